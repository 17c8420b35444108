package gateway

import (
	"context"
	"errors"
	"fmt"
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
	"github.com/agentgateway/gateway/internal/jsinbox"
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
	// Version is the gateway's version, shown in its heartbeat entry.
	Version string
	// Worker makes the process a `gateway worker`: it runs the turns the
	// inbox on NATS hands it and posts over Discord's REST API, with no
	// Discord gateway connection, no webhook listener and no scheduler.
	Worker bool
}

// errWorkerWithoutNATS is a worker's start error without NATS_URL.
var errWorkerWithoutNATS = errors.New("gateway worker runs the turns of a gateway whose inbox is on NATS JetStream: set NATS_URL (the same as the gateway run's)")

// Run is `gateway run`: it connects to Discord, takes prompts until ctx
// ends (SIGTERM, SIGINT), then shuts down gracefully (R10): intake stops
// (new prompts get a notice), accepted events finish or time out and their
// replies are delivered, then the bot disconnects. It returns nil after a
// clean shutdown and an error if Discord cannot be reached or closes the
// connection for good (a rejected token, a missing intent).
func Run(ctx context.Context, cfg *config.Config, opts Options, log zerolog.Logger) error {
	// The inbox first: every event is stored there before it is
	// acknowledged, and what a previous run left is taken up below.
	if opts.Worker && len(cfg.NATSURLs) == 0 {
		return errWorkerWithoutNATS
	}
	in, err := OpenInbox(ctx, cfg, log.With().Str("component", "inbox").Logger())
	if err != nil {
		return err
	}
	defer in.Close()
	// With NATS the stream is the queue: this process runs what the
	// stream hands it (cluster), and passes on what concerns turns that
	// other processes run.
	var cl *node
	var shared *sharedState
	if n, ok := in.(*natsInbox); ok {
		cl = &node{in: n, log: log.With().Str("component", "cluster").Logger()}
		var agent *proc.Credential
		if runAs, err := RunAs(cfg); err != nil {
			return err
		} else if runAs != nil {
			agent = &runAs.Credential
		}
		if shared, err = openShared(ctx, cfg, n, opts.Worker, agent, log); err != nil {
			return fmt.Errorf("the shared state on NATS JetStream: %w", err)
		}
		defer shared.close()
		// Before the bootstrap: a worker's persona is the operator's.
		shared.syncPersona(ctx, cfg.ConfigDir, log)
	}
	if dropped := in.Recovered(); dropped > 0 {
		log.Warn().Int64("bytes", dropped).Msg("the inbox ended in a record torn by a crash: cut it off (at most one event the gateway had not yet acknowledged)")
	}
	killLeftovers(cfg, log)
	durable := newDurable(in, log.With().Str("component", "inbox").Logger())
	importDiscordState(cfg, durable, log)

	dopts := discordOptions(cfg, opts.Discord, in, durable)
	// Bound once the runtime exists, before Discord is opened.
	var steer func(queue.Event) bool
	if cl != nil {
		// A waiting prompt's turn runs wherever the stream hands it:
		// neither steered into a turn here nor sent now.
		dopts.Elsewhere, dopts.SendNow = cl, false
	} else if cfg.Steer == config.SteerInject {
		dopts.Steer = func(e queue.Event) bool { return steer != nil && steer(e) }
	}
	// With ADMIN_ADDR, what happens is reported for the metrics and the
	// dashboard; without it mon is nil, reports do nothing, and none of
	// this is wired.
	mon := newMonitor(cfg, opts.Backend)
	if mon != nil {
		dopts.Monitor = mon
	}
	ledger, err := openLedger(cfg, log)
	if err != nil {
		return err
	}
	defer ledger.Close()
	if shared != nil {
		// Before any turn is recorded: every process counts every turn.
		if err := shared.logs.shareLedger(ctx, ledger); err != nil {
			return err
		}
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
		Elsewhere: cl != nil,
		Shared:    shared,
		StartID:   in.LastID(),
		Prepare: func(ctx context.Context, e queue.Event) queue.Event {
			shared.syncPersona(ctx, cfg.ConfigDir, log) // read fresh per event, as on one machine
			return bot.PrepareThread(ctx, e)
		},
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
			if cl != nil {
				cl.left(e, fate)
			}
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
	sopts := schedule.Options{
		Enqueue:        core.Queue.Enqueue,
		DefaultChannel: cfg.OutputChannelID,
		Clock:          opts.Clock,
		Log:            log,
	}
	if cl != nil {
		sopts.Finished = cl.finished // the events run elsewhere
	}
	sched, err = schedule.New(sopts)
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
	if cfg.WebhookAddr != "" && !opts.Worker {
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
	// lanes; deliveries and notices wait for Discord. On NATS the stream
	// hands them out again instead, to whichever process is free.
	var plan resumePlan
	if cl == nil {
		plan = planResume(in.Unfinished())
	}
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
	res := &resumer{d: durable, notify: bot, deliver: bot.Resume, log: log}
	var parts clusterParts
	if cl != nil {
		if parts, err = cl.start(ctx, cfg, shared, opts, core); err != nil {
			return err
		}
		ctl.nodes = &nodeStatus{in: cl.in, registry: parts.registry, now: time.Now}
		cl.bot, cl.core, cl.res = bot, core, res
		cl.disp = cl.in.Dispatcher(jsinbox.DispatchOptions{Slots: cfg.MaxConcurrent, OnError: func(err error) {
			cl.log.Warn().Err(err).Msg("taking events from the stream")
		}})
	}

	// The admin server answers from here on (/healthz at once; /readyz
	// once Discord is connected) until everything else has stopped.
	if mon != nil {
		closeAdmin, err := serveAdmin(cfg, opts, mon, bot, core, in, ledger, sched, log)
		if err != nil {
			return err
		}
		defer closeAdmin()
	}

	turns := startTurns(core)
	defer turns.stop()

	connectTimeout := opts.ConnectTimeout
	if connectTimeout <= 0 {
		connectTimeout = 60 * time.Second
	}
	openCtx, cancelOpen := context.WithTimeout(ctx, connectTimeout)
	if opts.Worker {
		err = bot.Attach(openCtx, core.Queue, core.Sessions)
	} else {
		err = bot.Open(openCtx, core.Queue, core.Sessions)
	}
	cancelOpen()
	if err != nil {
		turns.stop()
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
		// The real clock: a test's fake clock counts its timers.
		pruneThreads(ctx, threadList, wts.holds, nil, log.With().Str("component", "threads").Logger())
		return nil
	})
	switch {
	case cl != nil:
		bg.start("cluster", cl.serve)
		bg.start("shared-logs", shared.logs.Run)
		bg.start("heartbeat", parts.registry.Beat)
		if cfg.MaxConcurrent > 0 {
			bg.start("dispatch", cl.dispatch)
		}
		if !opts.Worker {
			// One process of the gateway fires the schedule at a time.
			bg.start("schedule", func(ctx context.Context) error {
				return parts.lease.Run(ctx, scheduleLease, sched.Lead)
			})
		}
	default:
		bg.start("schedule", sched.Run)
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	reloadEvery := opts.ReloadInterval
	if reloadEvery <= 0 {
		reloadEvery = 2 * time.Second
	}
	if shared != nil && shared.publisher != nil {
		bg.start("persona", func(ctx context.Context) error {
			// The real clock: a test's fake clock counts its timers.
			t := time.NewTicker(reloadEvery)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return nil
				case <-t.C:
					shared.syncPersona(ctx, cfg.ConfigDir, log)
				}
			}
		})
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
	bg.start("resume", func(ctx context.Context) error {
		res.run(ctx, plan)
		return nil
	})

	log.Info().Str("backend", core.Backend.Name()).Bool("worker", opts.Worker).Msg("gateway running")
	if text := sched.Hook(schedule.HookStartup); text != "" && !opts.Worker {
		if _, err := core.Queue.Enqueue(lifecycleEvent(schedule.HookStartup, text, cfg.OutputChannelID)); err != nil {
			log.Warn().Err(err).Msg("startup hook not queued")
		}
	}
	if opts.Ready != nil {
		opts.Ready()
	}

	var lost error
	if opts.Worker {
		<-ctx.Done()
	} else {
		lost = bot.Wait(ctx)
	}
	return shutdown{cfg: cfg, opts: opts, log: log, in: in, bot: bot, core: core, sched: sched,
		webhooks: hooksHTTP, background: bg, turns: turns, cluster: cl}.run(lost)
}

// openLedger opens the cost ledger; a write it cannot make later is
// logged, and the totals in memory stay right.
func openLedger(cfg *config.Config, log zerolog.Logger) (*cost.Ledger, error) {
	ledger, err := cost.Open(filepath.Join(cfg.ConfigDir, cost.FileName), nil)
	if err != nil {
		return nil, err
	}
	ledger.OnError(func(err error) {
		log.Error().Err(err).Msg("could not write the cost ledger; the totals in memory stay right until the gateway stops")
	})
	if n := ledger.Skipped(); n > 0 {
		log.Warn().Int("lines", n).Str("file", cost.FileName).Msg("skipped unreadable lines of the cost ledger (a torn write after a crash?)")
	}
	return ledger, nil
}

// serveAdmin starts the admin server and its dashboard (ADMIN_ADDR) and
// returns what stops them.
func serveAdmin(cfg *config.Config, opts Options, mon *admin.Monitor, bot *discord.Bot, core *Core, in Inbox,
	ledger *cost.Ledger, sched *schedule.Scheduler, log zerolog.Logger) (func(), error) {
	ready := readiness{bot: bot, queue: core.Queue, inbox: in}
	if opts.Worker {
		ready.bot = restOnly{} // a worker has no Discord connection to lose
	}
	adminHTTP, err := startAdmin(cfg, mon, ready.check, log.With().Str("component", "admin").Logger())
	if err != nil {
		return nil, err
	}
	dash := &dashboardSource{hub: mon.Hub(), queue: core.Queue, sessions: core.Sessions, ledger: ledger, sched: sched,
		ready: ready.check, connected: bot.Connected, name: bot.ChannelName, backend: core.Backend.Name(), log: log.With().Str("component", "dashboard").Logger()}
	stopDash, err := mountDashboard(adminHTTP.srv, dash, filepath.Join(cfg.ConfigDir, ActivityFile))
	if err != nil {
		log.Error().Err(files.WithoutPath(err)).Msg("the dashboard's activity log cannot be opened; the dashboard is off")
		stopDash = func() {}
	}
	if opts.AdminReady != nil {
		opts.AdminReady(adminHTTP.srv.Addr(), mon.Hub())
	}
	return func() {
		stopDash()
		adminHTTP.close()
	}, nil
}

// discordOptions are the bot's settings from the config, over base (the
// tests' faster reconnects and retries): the inbox keeps what it saw and
// delivered and gives the nonces.
func discordOptions(cfg *config.Config, base discord.Options, in Inbox, durable *durable) discord.Options {
	o := base
	o.Token = cfg.DiscordToken
	o.APIBaseURL = cfg.DiscordAPIBaseURL
	o.GatewayURL = cfg.DiscordGatewayURL
	o.Access = discord.NewAccess(cfg.AllowedUserIDs, cfg.AllowedChannelIDs, cfg.AllowedGuildIDs)
	o.Seen, o.Deliveries, o.NoncePrefix = durable, durable, in.NoncePrefix()
	o.MaxCatchUpAge, o.WatchingSince = cfg.CatchUpMaxAge, in.Created()
	o.MaxReplyMessages = cfg.MaxReplyMessages
	o.TurnCard = cfg.TurnCard
	o.ApprovalTimeout, o.Approvers = cfg.ApprovalTimeout, cfg.ApproverIDs
	o.QuestionsPath = filepath.Join(cfg.ConfigDir, discord.QuestionsFile)
	if o.UploadLimit <= 0 {
		o.UploadLimit = discord.DefaultUploadLimit
	}
	// A prompt that waits after all (STEER=queue, a CLI that cannot be
	// steered, a turn about to end) can still be sent now.
	o.SendNow = true
	return o
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
