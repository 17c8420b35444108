// Package cli holds the gateway's cobra commands. Main is the only entry
// point; exit codes are chosen in one place.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	// exitUsage: a mistake in the command line (usageError).
	exitUsage = 2
	// exitConfig: a mistake in the configuration (configError). The same
	// code as a usage error: in both the operator must change something
	// before a retry can succeed (systemd's RestartPreventExitStatus=2).
	exitConfig = 2
	// exitInterrupted is the shell's code for a process stopped by SIGINT
	// (128+2): `chat -m` interrupted before its answer.
	exitInterrupted = 130
)

// Version is set at build time with -ldflags "-X .../internal/cli.Version=v1.2.3".
// Empty means: ask the build info (buildVersion).
var Version = ""

// streams are where commands read and write, and the terminal's interrupts;
// tests replace them.
type streams struct {
	in     io.Reader
	out    io.Writer
	errOut io.Writer
	// interrupts delivers SIGINT (Ctrl-C). Main sets it; nil never fires.
	// `chat` handles each interrupt itself (stop the turn, or quit at the
	// prompt); the other commands end their context at the first one.
	interrupts <-chan os.Signal
	// tty reports whether one of the streams is a terminal; nil means
	// isTerminal. Tests pretend to be a terminal with it.
	tty func(any) bool
}

func (s streams) isTTY(v any) bool {
	if s.tty != nil {
		return s.tty(v)
	}
	return isTerminal(v)
}

// configError marks an error in the operator's configuration: it exits with
// exitConfig.
type configError struct{ err error }

func (e *configError) Error() string { return e.err.Error() }
func (e *configError) Unwrap() error { return e.err }

// usageError is a mistake in the command line: an unknown command or flag,
// a bad flag value, a wrong number of arguments, a flag the command cannot
// work with. It exits with exitUsage.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usagef is a usageError with a message of its own.
func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// errInterrupted ends a command stopped by Ctrl-C: it exits with
// exitInterrupted.
var errInterrupted = errors.New("interrupted")

// Main runs the command line and returns the process exit code. SIGTERM
// ends the commands' context; SIGINT goes to streams.interrupts, so that
// `chat` can stop a turn without quitting.
func Main() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	interrupts := make(chan os.Signal, 1)
	signal.Notify(interrupts, os.Interrupt)
	defer signal.Stop(interrupts)
	return run(ctx, os.Args[1:], streams{in: os.Stdin, out: os.Stdout, errOut: os.Stderr, interrupts: interrupts})
}

func run(ctx context.Context, args []string, io streams) int {
	root := newRootCmd(io)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(io.errOut, "gateway:", err)
	var usage *usageError
	var cfgErr *configError
	var coded *exitCodeError
	switch {
	case errors.As(err, &coded):
		return coded.code
	case errors.As(err, &usage):
		fmt.Fprintf(io.errOut, "Run '%s --help' for usage.\n", cmd.CommandPath())
		return exitUsage
	case errors.As(err, &cfgErr):
		return exitConfig
	case errors.Is(err, errInterrupted):
		return exitInterrupted
	}
	return exitError
}

// untilInterrupt returns ctx, ended by the first interrupt as well: the
// behaviour of SIGINT for every command but chat.
func untilInterrupt(ctx context.Context, interrupts <-chan os.Signal) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	go func() {
		select {
		case <-interrupts:
			cancel(errInterrupted)
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(nil) }
}

func newRootCmd(io streams) *cobra.Command {
	root := &cobra.Command{
		Use:   "gateway",
		Short: "A Discord front door for a coding agent CLI",
		Long: `gateway turns a Discord bot into the front door of a coding agent
(Claude Code by default; codex, gemini, opencode and pi as alternatives).
Messages, heartbeats, cron jobs, hooks and webhooks become events in one
queue; each event runs the agent CLI with the persona files in CONFIG_DIR.

Every command reads a .env file from the current directory when present
(--env-file names another); real environment variables win over it. Each
command's --help says what it does and which exit codes it returns.

Exit codes:
  0  success
  1  an error (the message says which)
  2  usage: an unknown command or flag, a bad flag value, wrong arguments;
     or an invalid configuration`,
		Example: `  $ gateway init
  $ gateway doctor
  $ gateway chat -m "What is in memory.md?"
  $ gateway run`,
		Version:       version(),
		Args:          subcommandArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		// Reached only without arguments: subcommandArgs refuses the rest.
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmd.Help()
		},
	}
	// No SetVersionTemplate: a template links text/template, whose
	// reflection keeps every method of every type in the binary (+3.5 MB).
	// cobra's default prints "gateway version X", as the version command.
	root.SetIn(io.in)
	root.SetOut(io.out)
	root.SetErr(io.errOut)
	// --version without cobra's -v shorthand: -v is chat's --verbose.
	root.Flags().Bool("version", false, "print the gateway's version")
	root.PersistentFlags().String("env-file", "", "read settings from this .env file (default: ./.env when present)")
	root.AddCommand(
		newRunCmd(io),
		newWorkerCmd(io),
		newChatCmd(io),
		newDoctorCmd(io),
		newInitCmd(io),
		newConfigCmd(io),
		newHealthcheckCmd(io),
		newSessionsCmd(io),
		newSendCmd(io),
		newVersionCmd(io),
	)
	root.InitDefaultCompletionCmd()
	describeCompletion(root)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err} })
	usageErrorsFromArgs(root)
	return root
}

// subcommandArgs is the Args of a command that only groups subcommands:
// any argument is an unknown command, with cobra's suggestions. cobra's
// own check for the root (legacyArgs) returns an error no caller can tell
// from others, and cobra.NoArgs suggests nothing.
func subcommandArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's default, set where cobra sets it
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t")
	}
	return errors.New(msg)
}

// noArgs is cobra.NoArgs with advice: an argument is more likely a
// misplaced value than a subcommand.
func noArgs(advice string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		return fmt.Errorf("%s takes no arguments, got %q: %s", cmd.CommandPath(), args[0], advice)
	}
}

// usageErrorsFromArgs makes the Args check of cmd and of every command
// under it return a usageError, so that a wrong number of arguments exits
// with exitUsage.
func usageErrorsFromArgs(cmd *cobra.Command) {
	if check := cmd.Args; check != nil {
		cmd.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return &usageError{err}
			}
			return nil
		}
	}
	for _, sub := range cmd.Commands() {
		usageErrorsFromArgs(sub)
	}
}

// completionExamples load the completion script of each shell cobra knows.
var completionExamples = map[string]string{
	"bash":       `  $ source <(gateway completion bash)`,
	"zsh":        `  $ gateway completion zsh > "${fpath[1]}/_gateway"`,
	"fish":       `  $ gateway completion fish > ~/.config/fish/completions/gateway.fish`,
	"powershell": `  $ gateway completion powershell | Out-String | Invoke-Expression`,
}

// describeCompletion gives cobra's completion command and its shells the
// exit codes and examples every command's help has.
func describeCompletion(root *cobra.Command) {
	for _, c := range root.Commands() {
		if c.Name() != "completion" {
			continue
		}
		c.Long = `completion prints a script that completes gateway's commands and flags in
bash, zsh, fish or powershell. Each shell's help says how to load it.

Exit codes:
  0  printed
  2  usage: no such shell, or extra arguments`
		c.Example = strings.Join([]string{completionExamples["bash"], completionExamples["zsh"], completionExamples["fish"]}, "\n")
		// Runnable, so that an unknown shell reaches Args instead of
		// cobra printing the help and exiting 0.
		c.Args = subcommandArgs
		c.RunE = func(cmd *cobra.Command, args []string) error { return cmd.Help() }
		for _, sh := range c.Commands() {
			sh.Long = strings.TrimRight(sh.Long, "\n") + `

Exit codes:
  0  printed
  2  usage: extra arguments, or an unknown flag`
			sh.Example = completionExamples[sh.Name()]
		}
	}
}

func newVersionCmd(io streams) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the gateway's version",
		Long: `version prints the gateway's version: the one make build stamps, or else
the module version or commit Go recorded (go install). gateway --version
prints the same line.

Exit codes:
  0  printed
  2  usage: an argument or an unknown flag`,
		Example: `  $ gateway version
  $ gateway --version`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := fmt.Fprintln(io.out, "gateway version", version())
			return err
		},
	}
}

// version is the version set at build time, or else the one the Go
// toolchain recorded (go install, go build in a checkout).
func version() string {
	if Version != "" {
		return Version
	}
	info, _ := debug.ReadBuildInfo()
	return buildVersion(info)
}

// buildVersion reads a version from build info: the main module's version
// (go install module@v1.2.3), else the VCS revision with "-dirty" for
// uncommitted changes (go build in a checkout), else "dev".
func buildVersion(info *debug.BuildInfo) string {
	if info == nil {
		return "dev"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev string
	var dirty bool
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "dev"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}
