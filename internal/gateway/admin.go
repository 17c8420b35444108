package gateway

import (
	"context"
	"errors"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/admin"
	"github.com/agentgateway/gateway/internal/agent"
	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/discord"
	"github.com/agentgateway/gateway/internal/queue"
)

// newMonitor returns the Monitor the gateway reports to when the admin
// server is on (ADMIN_ADDR), else nil: a nil Monitor does nothing, and
// nothing else of the admin server exists.
func newMonitor(cfg *config.Config, backend backends.Backend) *admin.Monitor {
	if cfg.AdminAddr == "" {
		return nil
	}
	name := cfg.Backend
	if backend != nil {
		name = backend.Name()
	}
	return admin.NewMonitor(name, admin.NewMetrics(), admin.NewHub(0, 0))
}

// observedBot is the bot as the runtime's Replier, with the Monitor told
// about every CLI run and its events as well. Every other ability of the
// bot (approvals, the turn card's Finished, files) is the bot's own.
type observedBot struct {
	*discord.Bot
	mon *admin.Monitor
}

var (
	_ agent.RunObserver = observedBot{}
	_ agent.Observer    = observedBot{}
	_ agent.Announcer   = observedBot{}
	_ agent.Finisher    = observedBot{}
	_ agent.Approver    = observedBot{}
	_ agent.FileReplier = observedBot{}
)

func (o observedBot) RunStarted(e queue.Event, info agent.RunInfo) {
	o.mon.RunStarted(e, info)
	o.Bot.RunStarted(e, info)
}

func (o observedBot) Observe(e queue.Event, ev backends.Event) {
	o.mon.Observe(e, ev)
	o.Bot.Observe(e, ev)
}

// replierFor is the bot, observed by mon when there is one.
func replierFor(bot *discord.Bot, mon *admin.Monitor) agent.Replier {
	if mon == nil {
		return bot
	}
	return observedBot{Bot: bot, mon: mon}
}

// costRecorders tells each recorder, in order, what every turn cost.
type costRecorders []agent.CostRecorder

func (cs costRecorders) Spent(e queue.Event, out agent.Outcome, took time.Duration) {
	for _, c := range cs {
		c.Spent(e, out, took)
	}
}

// Reasons /readyz gives.
var (
	errDiscordDown = errors.New("not connected to Discord")
	errQueueClosed = errors.New("shutting down: the queue takes no new events")
	errInboxBroken = errors.New("the inbox cannot be written (the log says why)")
)

// readiness is /readyz's check: Discord connected, the queue taking
// events, the inbox writable. Each is a flag or a field read under a
// lock: probes cost nothing.
type readiness struct {
	bot   interface{ Connected() bool }
	queue interface{ Closed() bool }
	inbox interface{ Err() error }
}

// restOnly stands for the Discord connection of a worker, which posts
// over REST only: it is never down.
type restOnly struct{}

func (restOnly) Connected() bool { return true }

func (r readiness) check() error {
	switch {
	case r.queue.Closed():
		return errQueueClosed
	case !r.bot.Connected():
		return errDiscordDown
	case r.inbox.Err() != nil:
		return errInboxBroken
	}
	return nil
}

// adminServer runs the admin server beside the gateway.
type adminServer struct {
	srv  *admin.Server
	done chan struct{}
	log  zerolog.Logger
}

// startAdmin binds ADMIN_ADDR and serves; a port in use fails the start.
func startAdmin(cfg *config.Config, mon *admin.Monitor, ready func() error, log zerolog.Logger) (*adminServer, error) {
	srv, err := admin.Listen(admin.Options{
		Addr:       cfg.AdminAddr,
		Token:      cfg.AdminToken,
		Hosts:      cfg.AdminHosts,
		TrustProxy: cfg.AdminTrustProxy,
		Ready:      ready,
		Metrics:    mon.Metrics(),
		Log:        log,
	})
	if err != nil {
		return nil, err
	}
	a := &adminServer{srv: srv, done: make(chan struct{}), log: log}
	go func() {
		defer close(a.done)
		if err := srv.Serve(); err != nil {
			log.Error().Err(err).Msg("admin server stopped")
		}
	}()
	log.Info().Str("addr", srv.Addr()).Bool("token", cfg.AdminToken != "").
		Msg("admin server listening: /healthz, /readyz, /metrics")
	return a, nil
}

// close stops the server, giving requests in flight a few seconds.
func (a *adminServer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := a.srv.Close(ctx); err != nil {
		a.log.Debug().Err(err).Msg("closing the admin server")
	}
	<-a.done
}
