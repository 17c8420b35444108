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
	"syscall"

	"github.com/spf13/cobra"
)

// Exit codes.
const (
	exitOK     = 0
	exitError  = 1
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
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(io.errOut, "gateway:", err)
	var cfgErr *configError
	var coded *exitCodeError
	switch {
	case errors.As(err, &coded):
		return coded.code
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
queue; each event runs the agent CLI with the persona files in CONFIG_DIR.`,
		Version:       version(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// No SetVersionTemplate: a template links text/template, whose
	// reflection keeps every method of every type in the binary (+3.5 MB).
	// cobra's default prints "gateway version X", as the version command.
	root.SetIn(io.in)
	root.SetOut(io.out)
	root.SetErr(io.errOut)
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
	return root
}

func newVersionCmd(io streams) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the gateway's version",
		Args:  cobra.NoArgs,
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
