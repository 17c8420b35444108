package gateway

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/admin"
	"github.com/agentgateway/gateway/internal/agent"
	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/cost"
	"github.com/agentgateway/gateway/internal/deferred"
	"github.com/agentgateway/gateway/internal/discord"
	"github.com/agentgateway/gateway/internal/files"
	"github.com/agentgateway/gateway/internal/hold"
	"github.com/agentgateway/gateway/internal/proc"
	"github.com/agentgateway/gateway/internal/project"
	"github.com/agentgateway/gateway/internal/queue"
	"github.com/agentgateway/gateway/internal/schedule"
	"github.com/agentgateway/gateway/internal/session"
)

// Options adjust Run; the zero value is production.
type Options struct {
	// Backend replaces the configured backend (tests).
	Backend backends.Backend
	// Discord adjusts the Discord client (tests: faster reconnects and
	// retries). Token, URLs and allowlists always come from the config.
	Discord discord.Options
	// ConnectTimeout bounds the first connection to Discord. Zero: 60 s.
	ConnectTimeout time.Duration
	// ShutdownTimeout bounds the wait for accepted events at shutdown.
	// Zero: the query timeout plus 30 s, so a run in flight can finish or
	// time out and its reply still be delivered.
	ShutdownTimeout time.Duration
	// Ready, if set, is called once the gateway is connected and taking
	// prompts.
	Ready func()
	// Clock drives heartbeats and cron jobs; nil is the real clock.
	Clock clockwork.Clock
	// ReloadInterval is how often heartbeat.md, agents.md and boot.md are
	// checked for edits. Zero: 2 s.
	ReloadInterval time.Duration
	// WebhookReady, if set, is told the webhook listener's address.
	WebhookReady func(addr string)
	// AdminReady, if set, is told the admin server's address and the hub
	// its dashboard subscribes to, once it listens (ADMIN_ADDR).
	AdminReady func(addr string, hub *admin.Hub)
	// EnvFile is the .env file in use (--env-file); empty means
	// config.DefaultEnvFile. With AGENT_USER the start check makes sure the
	// agent cannot read it.
	EnvFile string
	// Signals replaces SIGINT and SIGTERM during the shutdown drain
	// (tests): a value received there stops at once instead of waiting.
	Signals <-chan os.Signal
}

// Run is `gateway run`: it connects to Discord, takes prompts until ctx
// ends (SIGTERM, SIGINT), then shuts down gracefully (R10): intake stops
// (new prompts get a notice), accepted events finish or time out and their
// replies are delivered, then the bot disconnects. It returns nil after a
// clean shutdown and an error if Discord cannot be reached or closes the
// connection for good (a rejected token, a missing intent).
func Run(ctx context.Context, cfg *config.Config, opts Options, log zerolog.Logger) error {
	// The inbox first: every event is stored there before it is
	// acknowledged, and what a previous run left is taken up below.
	in, err := OpenInbox(cfg)
	if err != nil {
		return err
	}
	defer in.Close()
	if dropped := in.Recovered(); dropped > 0 {
		log.Warn().Int64("bytes", dropped).Msg("the inbox ended in a record torn by a crash: cut it off (at most one event the gateway had not yet acknowledged)")
	}
	killLeftovers(cfg, log)
	durable := newDurable(in, log.With().Str("component", "inbox").Logger())
	importDiscordState(cfg, durable, log)

	dopts := opts.Discord
	dopts.Token = cfg.DiscordToken
	dopts.APIBaseURL = cfg.DiscordAPIBaseURL
	dopts.GatewayURL = cfg.DiscordGatewayURL
	dopts.Access = discord.NewAccess(cfg.AllowedUserIDs, cfg.AllowedChannelIDs, cfg.AllowedGuildIDs)
	dopts.Seen, dopts.Deliveries, dopts.NoncePrefix = durable, durable, in.NoncePrefix()
	dopts.MaxCatchUpAge, dopts.WatchingSince = cfg.CatchUpMaxAge, in.Created()
	dopts.MaxReplyMessages = cfg.MaxReplyMessages
	dopts.TurnCard = cfg.TurnCard
	dopts.ApprovalTimeout, dopts.Approvers = cfg.ApprovalTimeout, cfg.ApproverIDs
	dopts.QuestionsPath = filepath.Join(cfg.ConfigDir, discord.QuestionsFile)
	if dopts.UploadLimit <= 0 {
		dopts.UploadLimit = discord.DefaultUploadLimit
	}
	// Bound once the runtime exists, before Discord is opened.
	var steer func(queue.Event) bool
	if cfg.Steer == config.SteerInject {
		dopts.Steer = func(e queue.Event) bool { return steer != nil && steer(e) }
	}
	// A prompt that waits after all (STEER=queue, a CLI that cannot be
	// steered, a turn about to end) can still be sent now.
	dopts.SendNow = true
	// With ADMIN_ADDR, what happens is reported for the metrics and the
	// dashboard; without it mon is nil, reports do nothing, and none of
	// this is wired.
	mon := newMonitor(cfg, opts.Backend)
	if mon != nil {
		dopts.Monitor = mon
	}
	ledger, err := cost.Open(filepath.Join(cfg.ConfigDir, cost.FileName), nil)
	if err != nil {
		return err
	}
	defer ledger.Close()
	ledger.OnError(func(err error) {
		log.Error().Err(err).Msg("could not write the cost ledger; the totals in memory stay right until the gateway stops")
	})
	if n := ledger.Skipped(); n > 0 {
		log.Warn().Int("lines", n).Str("file", cost.FileName).Msg("skipped unreadable lines of the cost ledger (a torn write after a crash?)")
	}
	if cfg.ProjectsRoot != "" {
		if err := project.Check(cfg.ProjectsRoot); err != nil {
			log.Warn().Err(err).Msg("/project cannot bind channels until PROJECTS_ROOT names a directory")
		}
	}
	ctl := newControls(cfg, nil, ledger, cfg.Backend, nil, log.With().Str("component", "controls").Logger())
	dopts.CardWarning = ctl.warning
	var sched *schedule.Scheduler
	secrets := secretsOf(cfg, func() []schedule.Webhook {
		if sched == nil {
			return nil
		}
		return sched.Webhooks()
	})
	// One guard for every file the agent sends: outbox, sendFile, IPC.
	guard, err := newGuard(cfg, opts.EnvFile, secrets)
	if err != nil {
		return err
	}
	dopts.Files = guard
	threadList, err := openThreads(cfg, log)
	if err != nil {
		return err
	}
	var sessions *session.Store // the core's, once it exists
	ctl.threads = threadList
	dopts.Threads = threadOptions(cfg, threadList, func() *session.Store { return sessions }, log.With().Str("component", "threads").Logger())
	bot, err := discord.New(dopts, log.With().Str("component", "discord").Logger())
	if err != nil {
		return err
	}
	connected := false
	defer func() {
		if !connected {
			bot.Close() // stops its state saver
		}
	}()
	// The schedule files are guarded before anything reads them: a held
	// change the gateway stopped on is put back first (see internal/hold).
	checkWebhooks := func() {
		if cfg.WebhookAddr != "" && sched != nil {
			logDisabledWebhooks(sched.Webhooks(), cfg.Lookup, log)
		}
	}
	gate, err := hold.New(hold.Options{
		Dir:          cfg.ConfigDir,
		Channel:      cfg.OutputChannelID,
		Approvers:    cfg.ApproverIDs,
		AllowedUsers: cfg.AllowedUserIDs,
		Reloaded:     checkWebhooks,
		Log:          log.With().Str("component", "schedule").Logger(),
	})
	if err != nil {
		return err
	}
	bot.HandleButtons(hold.ButtonPrefix, func(ctx context.Context, p discord.Press) discord.PressAnswer {
		a := gate.Press(ctx, hold.Press{ButtonID: p.ButtonID, UserID: p.UserID, ManageGuild: p.ManageGuild})
		return discord.PressAnswer{Update: a.Update, Notice: a.Notice}
	})
	// The scheduler needs the queue, the queue's handler needs the
	// scheduler (Done) and the hooks need the runtime: bind them in turn.
	var finished atomic.Uint64 // events processed, for trimWhenIdle
	hooks := &hookRunner{}
	// With DISCORD_ACTIONS off too: nothing teaches the agent the actions
	// then, and a block it writes anyway is reported as refused, not
	// posted as it stands.
	acts := &actionRunner{env: newActions(cfg, int64(dopts.UploadLimit), guard), guildOf: bot.GuildOf,
		log: log.With().Str("component", "actions").Logger()}
	acts.env.Discord, acts.env.Confirm, acts.env.Presence, acts.env.Reactions = bot, bot, bot, bot
	var costs agent.CostRecorder = ctl
	fetcher := files.NewFetcher(cfg.DiscordAPIBaseURL, int64(cfg.MaxAttachmentMB)<<20, int64(cfg.MaxAttachmentsMB)<<20)
	fetcher.Guard = guard
	var enqueued func(queue.Event, error)
	if mon != nil {
		costs, enqueued = costRecorders{ctl, mon}, mon.Enqueued
	}
	// WORKTREES=on: a thread's turns run in a git worktree of its own.
	wts, err := newWorktrees(cfg, threadList, opts.Clock, log.With().Str("component", "worktrees").Logger())
	if err != nil {
		return err
	}
	var workspace agent.Workspace
	if wts != nil {
		workspace = wts
	}
	core, err := NewCore(cfg, CoreOptions{
		Workspace: workspace,
		Backend:   opts.Backend,
		Replier:   replierFor(bot, mon),
		Hooks:     hooks,
		EnvFile:   opts.EnvFile,
		Turns:     turnWatchers{gate, durable},
		Journal:   durable,
		StartID:   in.LastID(),
		Prepare:   bot.PrepareThread,
		OnStart: func(e queue.Event) {
			mon.Started(e)
			durable.started(e)
		},
		Costs:       costs,
		Enqueued:    enqueued,
		Admit:       ctl.admit,
		Attachments: fetcher,
		Outbox:      &files.Limits{Files: files.MaxFilesPerMessage, Bytes: int64(dopts.UploadLimit), Guard: guard},
		Actions:     acts,
		OnDone: func(e queue.Event, out agent.Outcome) {
			durable.done(e, out)
			mon.Done(e, out)
			finished.Add(1)
		},
		// Whatever became of an event, its producer lets go of it: a
		// heartbeat dropped by /claude-stop or at shutdown fires again.
		// One dropped at shutdown stays in the inbox for the next start.
		Left: func(e queue.Event, fate queue.Fate) {
			sched.Done(e.ID)
			durable.left(e, fate)
			mon.Left(e, fate)
		},
	}, log)
	if err != nil {
		return err
	}
	ctl.sessions, ctl.queue, ctl.cli = core.Sessions, core.Queue, core.Backend
	sessions = core.Sessions
	steer = core.Runtime.Steer
	if w, ok := core.Backend.(interface{ Warm() backends.WarmStats }); ok && cfg.KeepAlive > 0 {
		ctl.warm = w.Warm
	}
	mon.Watch(admin.Sources{
		Waiting:   core.Queue.Waiting,
		Running:   core.Queue.Running,
		Inbox:     in.Stats,
		Processes: proc.Running,
		Warm:      ctl.warm,
		Connected: bot.Connected,
	})
	if core.Backend.Name() != "" {
		ctl.backend = core.Backend.Name()
	}
	ctl.register(bot)
	if wts != nil {
		wts.register(bot, func(ch string) bool { _, running, _ := core.Queue.Lane(ch); return running }, dopts.UploadLimit)
	}
	sched, err = schedule.New(schedule.Options{
		Enqueue:        core.Queue.Enqueue,
		DefaultChannel: cfg.OutputChannelID,
		Clock:          opts.Clock,
		Log:            log,
	})
	if err != nil {
		return err
	}
	hooks.instruction, hooks.process = sched.Hook, core.Runtime.Process
	if cfg.Actions.Enabled {
		// Before the queue runs: the actions' parts are fixed from then on.
		store, err := deferred.Open(filepath.Join(cfg.ConfigDir, deferred.FileName), opts.Clock, fireDeferred(core.Queue.Enqueue),
			log.With().Str("component", "defer").Logger())
		if err != nil {
			log.Error().Err(files.WithoutPath(err)).Msg("the deferred prompts cannot be read; the defer action is off until the file is fixed or removed")
		} else {
			defer store.Close()
			acts.env.Defer = deferrals{store: store, maxPending: cfg.DeferMaxPending}
		}
	}
	if err := gate.Start(sched); err != nil {
		log.Error().Err(err).Msg("schedule")
	}
	// Still before the queue runs.
	acts.env.Crons = newCronActions(gate, sched)
	// Bind the webhook port before connecting, so a port in use fails the
	// start at once; requests are served once Discord is ready.
	var hooksHTTP *webhookServer
	if cfg.WebhookAddr != "" {
		var answered func(int)
		if mon != nil {
			answered = mon.WebhookAnswered
		}
		h, err := newWebhookHandler(sched, cfg.Lookup, core.Queue, cfg.OutputChannelID, answered, log)
		if err != nil {
			return err
		}
		if hooksHTTP, err = listenWebhooks(cfg.WebhookAddr, h, log.With().Str("component", "webhook").Logger()); err != nil {
			return err
		}
		defer hooksHTTP.Close(context.Background())
	}

	// What the previous run left: turns to run again go first in their
	// lanes; deliveries and notices wait for Discord.
	plan := planResume(in.Unfinished())
	for _, e := range plan.rerun {
		core.Queue.Restore(e)
	}
	mon.Resumed(len(plan.rerun), len(plan.deliver), len(plan.interrupted), len(plan.dead))
	if n := len(plan.rerun) + len(plan.deliver) + len(plan.interrupted) + len(plan.dead); n > 0 {
		log.Info().Int("rerun", len(plan.rerun)).Int("deliver", len(plan.deliver)).
			Int("interrupted", len(plan.interrupted)).Int("dead_letters", len(plan.dead)).
			Msg("taking up the events the previous run did not finish")
	}
	retry := &retrier{in: in, enqueue: core.Queue.Enqueue, approvers: cfg.ApproverIDs, log: log}
	bot.HandleButtons(discord.RetryPrefix, retry.press)

	// The admin server answers from here on (/healthz at once; /readyz
	// once Discord is connected) until everything else has stopped.
	if mon != nil {
		ready := readiness{bot: bot, queue: core.Queue, inbox: in}
		adminHTTP, err := startAdmin(cfg, mon, ready.check, log.With().Str("component", "admin").Logger())
		if err != nil {
			return err
		}
		defer adminHTTP.close()
		dash := &dashboardSource{hub: mon.Hub(), queue: core.Queue, sessions: core.Sessions, ledger: ledger, sched: sched,
			ready: ready.check, connected: bot.Connected, name: bot.ChannelName, backend: core.Backend.Name(), log: log.With().Str("component", "dashboard").Logger()}
		stopDash, err := mountDashboard(adminHTTP.srv, dash, filepath.Join(cfg.ConfigDir, ActivityFile))
		if err != nil {
			log.Error().Err(files.WithoutPath(err)).Msg("the dashboard's activity log cannot be opened; the dashboard is off")
		} else {
			defer stopDash()
		}
		if opts.AdminReady != nil {
			opts.AdminReady(adminHTTP.srv.Addr(), mon.Hub())
		}
	}

	// Runs get their own context: a signal starts the graceful shutdown,
	// it does not cancel the agent mid-turn. Cancelling it stops every run
	// with the cause queue.ErrShutdown.
	runCtx, cancel := context.WithCancelCause(context.Background())
	cancelRuns := func() { cancel(queue.ErrShutdown) }
	defer cancelRuns()
	queueDone := make(chan error, 1)
	go func() { queueDone <- core.Run(runCtx) }()

	connectTimeout := opts.ConnectTimeout
	if connectTimeout <= 0 {
		connectTimeout = 60 * time.Second
	}
	openCtx, cancelOpen := context.WithTimeout(ctx, connectTimeout)
	err = bot.Open(openCtx, core.Queue, core.Sessions)
	cancelOpen()
	if err != nil {
		cancelRuns()
		<-queueDone
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	connected = true
	// Timers, reloads and webhooks start once Discord can take replies.
	bg := newBackground(log)
	defer bg.stop()
	if wts != nil {
		bg.start("worktrees", wts.Run) // removes the worktrees nobody needs, hourly
	}
	bg.start("threads", func(ctx context.Context) error {
		pruneThreads(ctx, threadList, wts.holds, opts.Clock, log.With().Str("component", "threads").Logger())
		return nil
	})
	bg.start("schedule", sched.Run)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	reloadEvery := opts.ReloadInterval
	if reloadEvery <= 0 {
		reloadEvery = 2 * time.Second
	}
	bg.start("trim", func(ctx context.Context) error {
		trimWhenIdle(ctx, finished.Load, 10*time.Second)
		return nil
	})
	if w, err := newIPC(cfg, bot, core.Sessions, int64(dopts.UploadLimit), guard, log); err != nil {
		log.Error().Err(files.WithoutPath(err)).Msg("the IPC folder cannot be watched; files dropped into ipc/outbound are not posted")
	} else {
		bg.start("ipc", w.Run)
	}
	gate.SetAsker(askIn{bot})
	bg.start("schedule-files", func(ctx context.Context) error {
		gate.Run(ctx, reloadEvery, hup)
		return nil
	})
	if hooksHTTP != nil {
		hooksHTTP.Serve()
		if opts.WebhookReady != nil {
			opts.WebhookReady(hooksHTTP.Addr())
		}
	}
	res := &resumer{d: durable, notify: bot, deliver: bot.Resume, log: log}
	bg.start("resume", func(ctx context.Context) error {
		res.run(ctx, plan)
		return nil
	})

	log.Info().Str("backend", core.Backend.Name()).Msg("gateway running")
	if text := sched.Hook(schedule.HookStartup); text != "" {
		if _, err := core.Queue.Enqueue(lifecycleEvent(schedule.HookStartup, text, cfg.OutputChannelID)); err != nil {
			log.Warn().Err(err).Msg("startup hook not queued")
		}
	}
	if opts.Ready != nil {
		opts.Ready()
	}

	lost := bot.Wait(ctx)
	// The intake stops before the log says so: a prompt that arrives after
	// the line is kept for the next start, never queued for this drain.
	bot.StopIntake()
	if lost != nil {
		log.Error().Err(lost).Msg("stopping")
	} else {
		log.Info().Msg("shutting down: no new prompts; waiting for the ones in progress")
	}
	if hooksHTTP != nil {
		closeCtx, cancelClose := context.WithTimeout(context.Background(), 5*time.Second)
		hooksHTTP.Close(closeCtx)
		cancelClose()
	}
	bg.stop()
	// The shutdown hook is the last event accepted; the drain below waits
	// for it with the rest. Without Discord its reply could not be
	// delivered, so the paid turn is not started.
	if text := sched.Hook(schedule.HookShutdown); text != "" {
		if lost != nil {
			log.Warn().Msg("shutdown hook skipped: Discord is gone, so its reply could not be delivered")
		} else if _, err := core.Queue.Enqueue(lifecycleEvent(schedule.HookShutdown, text, cfg.OutputChannelID)); err != nil {
			log.Warn().Err(err).Msg("shutdown hook not queued")
		}
	}
	timeout := opts.ShutdownTimeout
	if timeout <= 0 {
		timeout = cfg.QueryTimeout + 30*time.Second
	}
	drainCtx, cancelDrain := context.WithTimeout(context.Background(), timeout)
	defer cancelDrain()
	// A second SIGINT or SIGTERM while the drain waits stops at once.
	signals := opts.Signals
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
			log.Warn().Int("running", core.Queue.Running()).Int("waiting", core.Queue.Len()).
				Msg("second signal: stopping now; prompts not answered are taken up at the next start")
			cancelDrain()
		case <-drainCtx.Done():
		}
	}()
	var errs []error
	if err := core.Shutdown(drainCtx); err != nil {
		why := "the shutdown timeout passed"
		if hurried.Load() {
			why = "a second signal came"
		}
		log.Warn().Str("why", why).Int("running", core.Queue.Running()).Int("waiting", core.Queue.Len()).
			Msg("stopping before every event finished: they stay in the inbox and are taken up at the next start")
	}
	cancelRuns()
	<-queueDone
	core.Runtime.Close()
	if lost == nil {
		tellRestarting(in, bot, log)
	}
	// Replies handed over but not yet taken by Discord get what is left of
	// the shutdown's time; Close drops the rest, each logged.
	if err := bot.Flush(drainCtx); err != nil {
		log.Warn().Err(err).Int("replies", bot.Pending()).Msg("replies still waiting for Discord are dropped")
	}
	if err := bot.Close(); err != nil && !errors.Is(err, context.Canceled) {
		log.Debug().Err(err).Msg("closing the Discord connection")
	}
	if lost != nil {
		errs = append(errs, lost)
	}
	if len(errs) == 0 {
		log.Info().Msg("stopped")
	}
	return errors.Join(errs...)
}

// askIn posts held schedule changes through the bot.
type askIn struct{ bot *discord.Bot }

func (a askIn) Ask(ctx context.Context, channel, text, apply, discard string) (string, error) {
	return a.bot.PostButtons(ctx, channel, text, []discord.Button{
		{ID: apply, Label: "Apply", Style: discord.ButtonSuccess},
		{ID: discard, Label: "Discard", Style: discord.ButtonDanger},
	})
}

func (a askIn) Edit(ctx context.Context, channel, message, text string) error {
	return a.bot.EditMessage(ctx, channel, message, text)
}
