package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/agent"
	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/gateway"
	"github.com/agentgateway/gateway/internal/queue"
)

type chatOptions struct {
	io      streams
	envFile string
	message string
	session string
	verbose bool
	// backend replaces the configured backend (tests).
	backend backends.Backend
}

func newChatCmd(io streams) *cobra.Command {
	opts := chatOptions{io: io}
	cmd := &cobra.Command{
		Use:   "chat",
		Short: "Talk to the agent from the terminal, without Discord",
		Long: `chat runs the same queue, persona, runtime and backend as the gateway,
with the terminal as the channel: one prompt per line on stdin (or -m TEXT),
replies on stdout. The session lasts for the whole chat; --session NAME keeps
it in sessions.json so a later chat with the same name continues it.

In a permission mode that asks before tools (acceptEdits, default, plan;
acceptEdits is the default as root), chat asks in the terminal as Discord
does with buttons: Allow Bash "npm test"? [y/N/a]. y allows the call, N or
Enter denies it, a allows the same call for the rest of the chat. Without a
terminal on stdin nobody can answer, and the CLI denies those calls.

Ctrl-C during a turn stops it and returns to the prompt; Ctrl-C or Ctrl-D at
the prompt quits. chat takes CONFIG_DIR's lock, like run: stop a gateway
running on the same CONFIG_DIR first, or chat with another CONFIG_DIR.
Logs go to stderr at warn level and above unless LOG_LEVEL or -v (--verbose)
asks for more.

Exit codes:
  0  ended with Ctrl-D or Ctrl-C at the prompt, or at the end of the
     prompts; -m answered
  1  without a terminal (-m, or prompts piped in): a turn failed; or
     CONFIG_DIR is locked by a running gateway, or another error
  2  usage; or the configuration is invalid or lacks the backend's
     credentials, or AGENT_USER is unsafe
  130  -m stopped by Ctrl-C before its answer`,
		Example: `  $ gateway chat
  $ gateway chat -m "What is in memory.md?"
  $ echo "Summarise README.md" | gateway chat --session docs
  $ gateway chat -v --env-file ./other.env`,
		Args: noArgs(`give one prompt with -m "TEXT", or type prompts after the start`),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.envFile, _ = cmd.Flags().GetString("env-file")
			return runChat(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVarP(&opts.message, "message", "m", "", "send this one prompt and exit")
	cmd.Flags().StringVar(&opts.session, "session", "", "keep the session under this name across chats")
	cmd.Flags().BoolVarP(&opts.verbose, "verbose", "v", false, "log at info level to stderr")
	return cmd
}

// chatLane is the queue lane (and channel) of the terminal.
const chatLane = "terminal"

// chatReplier prints replies and shows what the agent is doing.
type chatReplier struct {
	out    io.Writer
	status *statusLine
	// tools, if set, gets a line per tool call (stderr that is not a
	// terminal, where the status line is off).
	tools io.Writer
}

func (c *chatReplier) Reply(_ context.Context, _ queue.Event, text string) error {
	c.status.Stop()
	_, err := fmt.Fprintln(c.out, strings.TrimRight(text, "\n"))
	return err
}

// Observe shows which tool the agent is using, and what the CLI retries
// and why, so a long turn is not silent.
func (c *chatReplier) Observe(_ queue.Event, ev backends.Event) {
	switch {
	case ev.Kind == backends.EventRetry:
		c.status.Retry(ev.RetryStatus())
		if c.tools != nil {
			fmt.Fprintf(c.tools, "· %s\n", ev.RetryStatus())
		}
		return
	case ev.Kind == backends.EventToolUse && ev.Tool != nil:
		c.status.Tool(ev.Tool.Name)
		if c.tools != nil {
			fmt.Fprintf(c.tools, "· %s\n", ev.Tool.Name)
		}
	case ev.Kind == backends.EventToolResult:
		c.status.Tool("")
	}
	if ev.Kind == backends.EventText || ev.Kind == backends.EventThinking || ev.Kind == backends.EventToolUse {
		c.status.Retry("") // the model API answered
	}
}

// turnError is a turn that ended in an error: the user has seen the error
// text as the reply; without a terminal chat exits non-zero with it.
type turnError struct{ kind backends.ErrorKind }

func (e *turnError) Error() string { return fmt.Sprintf("the agent's turn failed (%s)", e.kind) }

// cliMissingError is an agent CLI that is not installed: chat and run
// refuse to start without it.
type cliMissingError struct{ detail string }

func (e *cliMissingError) Error() string { return e.detail }

func runChat(ctx context.Context, opts chatOptions) error {
	cfg, err := loadConfig(opts.envFile, forChat)
	if err != nil {
		return err
	}
	errOut := opts.io.errOut
	status := newStatusLine(errOut, opts.io.isTTY(errOut))
	log := newLogger(cfg, status, chatLevel(cfg, opts.verbose))
	for _, w := range startWarnings(cfg, false) {
		log.Warn().Msg(w)
	}
	if brief := cfg.RootDefaultBrief(); brief != "" && opts.backend == nil {
		fmt.Fprintln(errOut, "gateway: "+brief) // the terminal is the log here
	}
	if opts.backend == nil && cfg.RootRefusesBypass() {
		fmt.Fprintln(errOut, "gateway: "+cfg.RootBypassAdvice())
	}
	lock, err := lockConfigDir(cfg, "gateway chat", log)
	if err != nil {
		return err
	}
	defer lock.Release()
	becomeNonDumpable(log)
	becomeSubreaper(log)

	input := newInputLines(opts.io.in)
	defer input.close()
	printer := &chatReplier{out: opts.io.out, status: status}
	if !status.enabled {
		printer.tools = errOut
	}
	var replier agent.Replier = printer
	// In a mode that asks before tools, a terminal answers as Discord's
	// buttons do; without one (prompts piped in) the CLI runs one turn per
	// process and denies what it would have asked about.
	askHere := cfg.PermissionMode != permissionBypass && opts.io.isTTY(opts.io.in)
	if askHere {
		replier = &askingReplier{printer, &terminalApprover{errOut: errOut, status: status, lines: input.lines, timeout: cfg.ApprovalTimeout}}
	}
	done := make(chan agent.Outcome, 1)
	core, err := gateway.NewCore(cfg, gateway.CoreOptions{
		Backend: opts.backend,
		Replier: replier,
		OnDone:  func(_ queue.Event, out agent.Outcome) { done <- out },
		EnvFile: opts.envFile,
		OneShot: !askHere,
	}, log)
	if agentUserProblem(err) {
		return &configError{err}
	}
	if err != nil {
		return err
	}
	// Deferred first, so it runs last: the queue has stopped by then.
	defer core.Runtime.Close()
	if opts.backend == nil && backends.Package(cfg.Backend) != "" {
		// Refuse before the first prompt, not after it as a failed turn.
		if _, err := backends.LocateCLI(cfg.Backend, cfg.AgentBinary); err != nil {
			return &cliMissingError{detail: cliNotFound(cfg.Backend, cfg.AgentBinary)}
		}
	}
	// The queue outlives an interrupt long enough to stop the agent cleanly.
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	running := make(chan struct{})
	go func() { core.Run(runCtx); close(running) }()
	defer func() { stop(); <-running }()
	defer status.Stop()

	key := "chat:" + opts.session
	if opts.session == "" {
		key = fmt.Sprintf("chat:%d", time.Now().UnixNano())
		defer core.Sessions.Drop(key) // an unnamed chat keeps nothing, not even a reset mark
	}
	interactive := opts.message == "" && opts.io.isTTY(opts.io.in)
	if interactive || opts.verbose {
		fmt.Fprintln(errOut, chatBanner(ctx, cfg, core, opts, key))
	}

	c := &chat{opts: opts, core: core, status: status, done: done, key: key, input: input}
	if opts.message != "" {
		return c.ask(ctx, opts.message)
	}
	return c.loop(ctx, interactive)
}

// chat is one terminal conversation.
type chat struct {
	opts   chatOptions
	core   *gateway.Core
	status *statusLine
	done   <-chan agent.Outcome
	key    string
	// input is where prompts come from, and the answers to approvals.
	input *inputLines
}

// ask runs one prompt and waits for its answer. An interrupt stops the
// turn (errInterrupted once it has stopped); a second one returns at once.
func (c *chat) ask(ctx context.Context, text string) error {
	_, err := c.core.Queue.Enqueue(queue.Event{
		Kind: queue.KindMessage, Source: "chat", ChannelID: chatLane, SessionKey: c.key, Text: text,
	})
	if err != nil {
		return fmt.Errorf("queue prompt: %w", err)
	}
	c.status.Start()
	defer c.status.Stop()
	var stopped error
	ctxDone := ctx.Done()
	for {
		select {
		case out := <-c.done:
			switch {
			case stopped != nil:
				return stopped
			case out.Err != nil:
				return &turnError{kind: backends.KindOf(out.Err)}
			}
			return nil
		case <-c.opts.io.interrupts:
			if stopped != nil {
				return stopped // a second Ctrl-C: do not wait for the CLI
			}
			c.status.Stop()
			fmt.Fprintln(c.opts.io.errOut, "stopping the turn…")
			stopped = errInterrupted
			if !c.stop() {
				return stopped
			}
		case <-ctxDone:
			ctxDone = nil // SIGTERM: stop the turn, then leave
			stopped = fmt.Errorf("stopped: %w", context.Cause(ctx))
			if !c.stop() {
				return stopped
			}
		}
	}
}

// stop stops the terminal's turn and reports whether it was running (its
// outcome is still to come); a prompt that had not started is dropped.
func (c *chat) stop() (running bool) {
	running, _ = c.core.Queue.Stop(chatLane)
	return running
}

// loop reads prompts, one per line, until end of input (Ctrl-D) or an
// interrupt at the prompt. It returns the last turn's error when input is
// not a terminal, so a script sees a failure.
func (c *chat) loop(ctx context.Context, interactive bool) error {
	errOut := c.opts.io.errOut
	lines := c.input.lines()
	var failed error
	for {
		if interactive {
			fmt.Fprint(errOut, "> ")
		}
		var line string
		select {
		case l, ok := <-lines:
			if !ok {
				if interactive {
					fmt.Fprintln(errOut) // Ctrl-D: end the prompt's line
				}
				if err := <-c.input.err; err != nil {
					return fmt.Errorf("read prompts: %w", err)
				}
				return failed
			}
			line = strings.TrimSpace(l)
		case <-c.opts.io.interrupts:
			fmt.Fprintln(errOut) // Ctrl-C at the prompt quits at once
			return nil
		case <-ctx.Done():
			return nil
		}
		if line == "" {
			continue
		}
		err := c.ask(ctx, line)
		var te *turnError
		switch {
		case errors.Is(err, errInterrupted):
			// Stopped by Ctrl-C: back to the prompt.
		case errors.As(err, &te):
			if !interactive {
				failed = err
			}
		case err != nil:
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// chatBanner is the line chat starts with: backend, CLI version,
// CONFIG_DIR and session.
func chatBanner(ctx context.Context, cfg *config.Config, core *gateway.Core, opts chatOptions, key string) string {
	cli := core.Backend.Name()
	if opts.backend == nil {
		if path, err := backends.LocateCLI(cfg.Backend, cfg.AgentBinary); err != nil {
			cli += " (CLI not found)"
		} else if v, err := probeVersion(ctx, cfg, path); err == nil {
			cli += " " + v
		}
	}
	session := "new, kept until chat exits"
	if opts.session != "" {
		session = opts.session + ", new"
		if _, ok, _ := core.Sessions.Current(key); ok {
			session = opts.session + ", resumed"
		}
	}
	return fmt.Sprintf("gateway chat · %s · CONFIG_DIR %s · session %s\nCtrl-C stops a turn; Ctrl-C or Ctrl-D at the prompt quits.", cli, cfg.ConfigDir, session)
}

// permissionBypass is the permission mode that never asks.
const permissionBypass = "bypassPermissions"

// newLineScanner reads the chat's input: a prompt may be long (a pasted
// file), up to 1 MiB a line.
func newLineScanner(r io.Reader) *bufio.Scanner {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	return sc
}

func isTerminal(v any) bool {
	f, ok := v.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
