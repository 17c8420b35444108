package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/agent"
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
it in sessions.json so a later chat with the same name continues it.`,
		Example: `  gateway chat
  gateway chat -m "What is in memory.md?"
  echo "Summarise README.md" | gateway chat --session docs`,
		Args: cobra.NoArgs,
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

// chatReplier prints replies and tells the chat loop when an event is done.
type chatReplier struct {
	out  io.Writer
	tool io.Writer // tool activity, on stderr
}

func (c *chatReplier) Reply(_ context.Context, _ queue.Event, text string) error {
	_, err := fmt.Fprintln(c.out, strings.TrimRight(text, "\n"))
	return err
}

// Observe shows which tool the agent is using, so a long turn is not silent.
func (c *chatReplier) Observe(_ queue.Event, ev backends.Event) {
	if ev.Kind == backends.EventToolUse && ev.Tool != nil {
		fmt.Fprintf(c.tool, "· %s\n", ev.Tool.Name)
	}
}

func runChat(ctx context.Context, opts chatOptions) error {
	cfg, err := loadConfig(opts.envFile, forChat)
	if err != nil {
		return err
	}
	level := "warn"
	if opts.verbose {
		level = "info"
	}
	log := newLogger(cfg, opts.io.errOut, level)
	if opts.backend == nil {
		for _, w := range cfg.Warnings() {
			log.Warn().Msg(w)
		}
	}

	done := make(chan uint64, 1)
	core, err := gateway.NewCore(cfg, gateway.CoreOptions{
		Backend: opts.backend,
		Replier: &chatReplier{out: opts.io.out, tool: opts.io.errOut},
		OnDone:  func(e queue.Event, _ agent.Outcome) { done <- e.ID },
	}, log)
	if err != nil {
		return err
	}
	// The queue outlives an interrupt long enough to stop the agent cleanly.
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	running := make(chan struct{})
	go func() { core.Run(runCtx); close(running) }()
	defer func() { stop(); <-running }()

	key := "chat:" + opts.session
	if opts.session == "" {
		key = fmt.Sprintf("chat:%d", time.Now().UnixNano())
		defer core.Sessions.Delete(key) // an unnamed chat keeps nothing
	}

	ask := func(text string) error {
		rec, err := core.Queue.Enqueue(queue.Event{
			Kind: queue.KindMessage, Source: "chat", ChannelID: "terminal", SessionKey: key, Text: text,
		})
		if err != nil {
			return fmt.Errorf("queue prompt: %w", err)
		}
		select {
		case id := <-done:
			if id != rec.Event.ID {
				return fmt.Errorf("chat: finished event %d while waiting for %d", id, rec.Event.ID)
			}
			return nil
		case <-ctx.Done():
			return fmt.Errorf("interrupted: %w", ctx.Err())
		}
	}
	if opts.message != "" {
		return ask(opts.message)
	}

	interactive := isTerminal(opts.io.in)
	sc := bufio.NewScanner(opts.io.in)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for {
		if interactive {
			fmt.Fprint(opts.io.errOut, "> ")
		}
		if !sc.Scan() {
			break
		}
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if err := ask(line); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read prompts: %w", err)
	}
	return nil
}

func isTerminal(v any) bool {
	f, ok := v.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
