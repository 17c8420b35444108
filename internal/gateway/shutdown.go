package gateway

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/discord"
	"github.com/agentgateway/gateway/internal/queue"
	"github.com/agentgateway/gateway/internal/schedule"
)

// turns runs the queue's events, each turn under a context of its own: a
// signal starts the graceful shutdown, it does not cancel the agent
// mid-turn. stop cancels every run with the cause queue.ErrShutdown and
// waits for the queue to return; it may be called more than once.
type turns struct {
	cancel context.CancelCauseFunc
	done   chan error
	once   *sync.Once
}

func startTurns(core *Core) turns {
	ctx, cancel := context.WithCancelCause(context.Background())
	t := turns{cancel: cancel, done: make(chan error, 1), once: new(sync.Once)}
	go func() { t.done <- core.Run(ctx) }()
	return t
}

func (t turns) stop() {
	t.cancel(queue.ErrShutdown)
	t.once.Do(func() { <-t.done })
}

// shutdown is the graceful stop of `gateway run` (R10), in its order: the
// intake stops, the background components stop, the shutdown hook is
// queued, accepted events finish within the drain time (a second signal
// cuts it short), the runs stop, users with kept prompts are told, and
// replies still on their way get what is left of the time.
type shutdown struct {
	cfg        *config.Config
	opts       Options
	log        zerolog.Logger
	in         Inbox
	bot        *discord.Bot
	core       *Core
	sched      *schedule.Scheduler
	webhooks   *webhookServer
	background *background
	turns      turns
	// cluster is this process's part of a gateway on NATS, shared the
	// state it shares; nil without.
	cluster *node
	shared  *sharedState
}

// run stops the gateway after the Discord connection ended (lost, nil for
// a signal) and returns Run's error.
func (s shutdown) run(lost error) error {
	// The intake stops before the log says so: a prompt that arrives after
	// the line is kept for the next start, never queued for this drain.
	s.bot.StopIntake()
	if lost != nil {
		s.log.Error().Err(lost).Msg("stopping")
	} else {
		s.log.Info().Msg("shutting down: no new prompts; waiting for the ones in progress")
	}
	if s.webhooks != nil {
		closeCtx, cancelClose := context.WithTimeout(context.Background(), 5*time.Second)
		s.webhooks.Close(closeCtx)
		cancelClose()
	}
	s.background.stop()
	// The shutdown hook is the last event accepted; the drain below waits
	// for it with the rest. Without Discord its reply could not be
	// delivered, so the paid turn is not started.
	if text := s.sched.Hook(schedule.HookShutdown); text != "" {
		if lost != nil {
			s.log.Warn().Msg("shutdown hook skipped: Discord is gone, so its reply could not be delivered")
		} else if _, err := s.core.Queue.Enqueue(lifecycleEvent(schedule.HookShutdown, text, s.cfg.OutputChannelID)); err != nil {
			s.log.Warn().Err(err).Msg("shutdown hook not queued")
		}
	}
	timeout := s.opts.ShutdownTimeout
	if timeout <= 0 {
		timeout = s.cfg.QueryTimeout + 30*time.Second
	}
	drainCtx, cancelDrain := context.WithTimeout(context.Background(), timeout)
	defer cancelDrain()
	// A second SIGINT or SIGTERM while the drain waits stops at once.
	signals := s.opts.Signals
	if signals == nil {
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGINT, syscall.SIGTERM)
		defer signal.Stop(c)
		signals = c
	}
	var hurried atomic.Bool
	go func() {
		select {
		case <-signals:
			hurried.Store(true)
			s.log.Warn().Int("running", s.core.Queue.Running()).Int("waiting", s.core.Queue.Len()).
				Msg("second signal: stopping now; prompts not answered are taken up at the next start")
			cancelDrain()
		case <-drainCtx.Done():
		}
	}()
	if err := s.core.Shutdown(drainCtx); err != nil {
		why := "the shutdown timeout passed"
		if hurried.Load() {
			why = "a second signal came"
		}
		s.log.Warn().Str("why", why).Int("running", s.core.Queue.Running()).Int("waiting", s.core.Queue.Len()).
			Msg("stopping before every event finished: they stay in the inbox and are taken up at the next start")
	}
	s.turns.stop()
	s.core.Runtime.Close()
	// Replies handed over but not yet taken by Discord get what is left of
	// the shutdown's time; Close drops the rest, each logged.
	if err := s.bot.Flush(drainCtx); err != nil {
		s.log.Warn().Err(err).Int("replies", s.bot.Pending()).Msg("replies still waiting for Discord are dropped")
	}
	if lost == nil && s.cluster == nil {
		// After the flush: a reply is recorded on its way to Discord, so
		// before it a turn that answered still looks unanswered and would
		// be told it stays queued. On NATS other processes take up the
		// waiting prompts.
		tellRestarting(s.in, s.bot, s.log)
	}
	if s.cluster != nil && s.cluster.disp != nil {
		// What did not finish here goes to another process at once.
		s.cluster.disp.GiveBack()
	}
	if s.shared != nil {
		// The other processes count this one's last turns now.
		flushCtx, cancelFlush := context.WithTimeout(context.Background(), 5*time.Second)
		s.shared.logs.Flush(flushCtx)
		cancelFlush()
	}
	if err := s.bot.Close(); err != nil && !errors.Is(err, context.Canceled) {
		s.log.Debug().Err(err).Msg("closing the Discord connection")
	}
	if lost != nil {
		return lost
	}
	s.log.Info().Msg("stopped")
	return nil
}
