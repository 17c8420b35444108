package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/agent"
	"github.com/agentgateway/gateway/internal/queue"
	"github.com/agentgateway/gateway/internal/schedule"
	"github.com/agentgateway/gateway/internal/webhook"
)

// hookRunner runs the agent_begin and agent_stop hooks inline around every
// non-hook event (R19.3, R19.4). The hook turn is itself a hook event, which
// the runtime never wraps in hooks, so hooks cannot recurse.
type hookRunner struct {
	instruction func(schedule.Hook) string
	// process is the runtime's Process, bound after the runtime exists.
	process func(context.Context, queue.Event) agent.Outcome
}

var _ agent.Hooks = (*hookRunner)(nil)

func (h *hookRunner) AgentBegin(ctx context.Context, e queue.Event) {
	h.run(ctx, schedule.HookAgentBegin, e, "is about to be handled")
}

func (h *hookRunner) AgentStop(ctx context.Context, e queue.Event, out agent.Outcome) {
	result := "was handled"
	if out.Err != nil {
		result = "failed"
	}
	h.run(ctx, schedule.HookAgentStop, e, result)
}

func (h *hookRunner) run(ctx context.Context, hook schedule.Hook, e queue.Event, what string) {
	text := h.instruction(hook)
	if text == "" || h.process == nil {
		return
	}
	h.process(ctx, queue.Event{
		ID:     e.ID,
		Time:   time.Now(),
		Kind:   queue.KindHook,
		Source: "hook",
		Name:   string(hook),
		Text:   text + "\n\n" + describe(e, what),
	})
}

// describe tells a hook which event it surrounds, without the event's text:
// the hook's instruction is the operator's, the prompt is a user's.
func describe(e queue.Event, what string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "(Context: a %s event", e.Kind)
	if e.Name != "" {
		fmt.Fprintf(&b, " named %q", e.Name)
	}
	if e.ChannelID != "" {
		fmt.Fprintf(&b, " for channel %s", e.ChannelID)
	}
	fmt.Fprintf(&b, " %s.)", what)
	return b.String()
}

// lifecycleEvent is the startup or shutdown hook's event: queued like any
// other, its reply goes to the output channel.
func lifecycleEvent(hook schedule.Hook, text, channel string) queue.Event {
	return queue.Event{Kind: queue.KindHook, Source: "hook", Name: string(hook), Text: text, ChannelID: channel}
}

// webhookServer listens on addr for POST /hooks/{name}.
type webhookServer struct {
	srv *http.Server
	ln  net.Listener
	log zerolog.Logger
}

// listenAddr binds a bare port to the loopback interface: a webhook
// listener is reachable from outside only when the operator names a host.
func listenAddr(addr string) string {
	if !strings.Contains(addr, ":") {
		addr = ":" + addr
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host != "" {
		return addr
	}
	return net.JoinHostPort("127.0.0.1", port)
}

// listenWebhooks binds the listener; Serve starts answering.
func listenWebhooks(addr string, h http.Handler, log zerolog.Logger) (*webhookServer, error) {
	ln, err := net.Listen("tcp", listenAddr(addr))
	if err != nil {
		return nil, fmt.Errorf("webhook listener (WEBHOOK_ADDR=%s): %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/hooks/", h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second}
	return &webhookServer{srv: srv, ln: ln, log: log}, nil
}

func (w *webhookServer) Serve() {
	go func() {
		if err := w.srv.Serve(w.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			w.log.Error().Err(err).Msg("webhook listener stopped")
		}
	}()
	w.log.Info().Str("addr", w.Addr()).Msg("webhook listener ready: POST /hooks/{name}")
}

func (w *webhookServer) Addr() string { return w.ln.Addr().String() }

// Close stops taking requests; in-flight ones finish, bounded by ctx.
func (w *webhookServer) Close(ctx context.Context) error {
	err := w.srv.Shutdown(ctx)
	w.ln.Close()
	return err
}

// logDisabledWebhooks says, at start and after each reload, which webhooks
// refuse every request because their secret breaks the rules
// (webhook.SecretProblem), and why.
func logDisabledWebhooks(hooks []schedule.Webhook, lookup func(string) (string, bool), log zerolog.Logger) {
	for _, w := range hooks {
		secret, ok := lookup(w.SecretEnv)
		if why := webhook.SecretProblem(w.SecretEnv, secret, ok); why != "" {
			log.Warn().Str("component", "webhook").Str("webhook", w.Name).Str("why", why).
				Msg("webhook disabled: every request is refused (403) until its secret meets the rules")
		}
	}
}

func newWebhookHandler(s *schedule.Scheduler, lookup func(string) (string, bool), q *queue.Queue, defaultChannel string,
	answered func(status int), log zerolog.Logger) (http.Handler, error) {
	return webhook.New(webhook.Options{
		Lookup:         s.Webhook,
		Secret:         lookup,
		Enqueue:        q.Enqueue,
		DefaultChannel: defaultChannel,
		Answered:       answered,
		Log:            log.With().Str("component", "webhook").Logger(),
	})
}

// trimWhenIdle hands memory back to the system after a burst of work: once
// no event has finished for a whole interval after some had, it runs a
// collection and returns freed pages at once. Without it the heap a burst
// grew stays mapped until the runtime's two-minute forced collection and
// its scavenger get to it, which looks like a leak in `top`.
func trimWhenIdle(ctx context.Context, finished func() uint64, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	last, pending := finished(), false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		switch now := finished(); {
		case now != last:
			last, pending = now, true
		case pending:
			pending = false
			debug.FreeOSMemory()
		}
	}
}
