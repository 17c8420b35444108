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
	"syscall"

	"github.com/spf13/cobra"
)

// Exit codes.
const (
	exitOK     = 0
	exitError  = 1
	exitConfig = 2
)

// Version is set at build time with -ldflags "-X .../internal/cli.Version=v1.2.3".
var Version = "dev"

// streams are where commands read and write; tests replace them.
type streams struct {
	in     io.Reader
	out    io.Writer
	errOut io.Writer
}

// configError marks an error in the operator's configuration: it exits with
// exitConfig.
type configError struct{ err error }

func (e *configError) Error() string { return e.err.Error() }
func (e *configError) Unwrap() error { return e.err }

// Main runs the command line and returns the process exit code.
func Main() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, os.Args[1:], streams{in: os.Stdin, out: os.Stdout, errOut: os.Stderr})
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
	if errors.As(err, &cfgErr) {
		return exitConfig
	}
	return exitError
}

func newRootCmd(io streams) *cobra.Command {
	root := &cobra.Command{
		Use:   "gateway",
		Short: "A Discord front door for a coding agent CLI",
		Long: `gateway turns a Discord bot into the front door of a coding agent
(Claude Code by default; codex, gemini, opencode and pi as alternatives).
Messages, heartbeats, cron jobs, hooks and webhooks become events in one
queue; each event runs the agent CLI with the persona files in CONFIG_DIR.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(io.in)
	root.SetOut(io.out)
	root.SetErr(io.errOut)
	root.PersistentFlags().String("env-file", "", "read settings from this .env file (default: ./.env when present)")
	root.AddCommand(
		newRunCmd(io),
		newChatCmd(io),
		newDoctorCmd(io),
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
			_, err := fmt.Fprintln(io.out, "gateway", Version)
			return err
		},
	}
}
