package gateway

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"sync/atomic"
	"syscall"
	"time"

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
	"github.com/agentgateway/gateway/internal/kvdeferred"
	"github.com/agentgateway/gateway/internal/limit"
	"github.com/agentgateway/gateway/internal/proc"
	"github.com/agentgateway/gateway/internal/project"
	"github.com/agentgateway/gateway/internal/queue"
	"github.com/agentgateway/gateway/internal/schedule"
	"github.com/agentgateway/gateway/internal/session"
	"github.com/agentgateway/gateway/internal/threads"
	"github.com/agentgateway/gateway/internal/transcribe"
)

// assembly is one gateway process being put together: `gateway run` or,
// with Options.Worker, `gateway worker`. Run builds it in stages, each a
// method here that binds the parts the later ones need, then starts its
// components; close undoes what the stages opened, in reverse order.
// The parts bind in a circle (the scheduler needs the queue, the queue's
// handler needs the scheduler), so a few are reached through fields set
// by a later stage.
type assembly struct {
	cfg  *config.Config
	opts Options
	log  zerolog.Logger

	closers []func()

	// openStores
	in      Inbox
	durable *durable
	node    *node        // this process's part of a gateway on NATS; nil on one machine
	shared  *sharedState // what follows a channel on NATS; nil on one machine
	ledger  *cost.Ledger
	guard   *files.Guard
	threads *threads.Store

	// buildDiscord
	dopts discord.Options
	steer func(queue.Event) bool // the runtime's, once it exists
	mon   *admin.Monitor         // nil without ADMIN_ADDR
	ctl   *controls
	plans *planModes // /plan
	bot   *discord.Bot
	gate  *hold.Gate
	// connected: the bot is connected (or attached), and the shutdown
	// closes it.
	connected bool

	// buildCore
	hooks    *hookRunner
	acts     *actionRunner
	wts      *worktrees
	core     *Core
	finished atomic.Uint64 // events processed, for trimWhenIdle
	// limits holds the login's prompts while a usage limit lasts.
	limits *limit.Gate

	// buildSchedule
	sched    *schedule.Scheduler
	webhooks *webhookServer
	deferKV  *kvdeferred.Store // the deferred prompts on NATS; nil on one machine

	// takeUp
	plan  resumePlan
	res   *resumer
	parts clusterParts
}

// onClose adds f to what close runs, before what was added earlier.
func (g *assembly) onClose(f func()) { g.closers = append(g.closers, f) }

// close undoes the stages in reverse order.
func (g *assembly) close() {
	for i := len(g.closers) - 1; i >= 0; i-- {
		g.closers[i]()
	}
}

// openStores opens where the gateway keeps what it must not lose: the
// inbox (with NATS, the shared stream and the state that follows a
// channel), the cost ledger, the threads; and the guard of every file the
// agent sends.
func (g *assembly) openStores(ctx context.Context) error {
	cfg, log := g.cfg, g.log
	in, err := OpenInbox(ctx, cfg, log.With().Str("component", "inbox").Logger())
	if err != nil {
		return err
	}
	g.in = in
	g.onClose(func() { in.Close() })
	// With NATS the stream is the queue: this process runs what the
	// stream hands it, and passes on what concerns turns that other
	// processes run.
	if n, ok := in.(*natsInbox); ok {
		g.node = &node{in: n, log: log.With().Str("component", "cluster").Logger()}
		var agentCred *proc.Credential
		if runAs, err := RunAs(cfg); err != nil {
			return err
		} else if runAs != nil {
			agentCred = &runAs.Credential
		}
		if g.shared, err = openShared(ctx, cfg, n, g.opts.Worker, agentCred, log); err != nil {
			return fmt.Errorf("the shared state on NATS JetStream: %w", err)
		}
		g.onClose(g.shared.close)
		// Before the bootstrap: a worker's persona is the operator's.
		g.shared.syncPersona(ctx, cfg.ConfigDir, log)
	}
	if dropped := in.Recovered(); dropped > 0 {
		log.Warn().Int64("bytes", dropped).Msg("the inbox ended in a record torn by a crash: cut it off (at most one event the gateway had not yet acknowledged)")
	}
	killLeftovers(cfg, log)
	g.durable = newDurable(in, log.With().Str("component", "inbox").Logger())
	importDiscordState(cfg, g.durable, log)

	if g.ledger, err = openLedger(cfg, log); err != nil {
		return err
	}
	g.onClose(func() { g.ledger.Close() })
	if g.shared != nil {
		// Before any turn is recorded: every process counts every turn.
		if err := g.shared.logs.shareLedger(ctx, g.ledger); err != nil {
			return err
		}
	}
	if cfg.ProjectsRoot != "" {
		if err := project.Check(cfg.ProjectsRoot); err != nil {
			log.Warn().Err(err).Msg("/project cannot bind channels until PROJECTS_ROOT names a directory")
		}
	}
	// One guard for every file the agent sends: outbox, sendFile, IPC.
	secrets := secretsOf(cfg, func() []schedule.Webhook {
		if g.sched == nil {
			return nil
		}
		return g.sched.Webhooks()
	})
	if g.guard, err = newGuard(cfg, g.opts.EnvFile, secrets); err != nil {
		return err
	}
	g.threads, err = openThreads(cfg, log)
	return err
}

// buildDiscord makes the Discord client (not yet connected), the slash
// commands' controls, and the gate that holds the agent's schedule edits.
func (g *assembly) buildDiscord(context.Context) error {
	cfg, log := g.cfg, g.log
	g.dopts = discordOptions(cfg, g.opts.Discord, g.in, g.durable)
	g.dopts.Access = g.dopts.Access.WithRoles(cfg.AllowedRoleIDs)
	g.dopts.ApproverRoles = cfg.ApproverRoleIDs
	g.dopts.UserSessions = cfg.SessionScope == config.SessionScopeUser
	g.dopts.NotifyAfter = cfg.NotifyAfter
	if g.node != nil {
		// A waiting prompt's turn runs wherever the stream hands it:
		// neither steered into a turn here nor sent now.
		g.dopts.Elsewhere, g.dopts.SendNow = g.node, false
	} else if cfg.Steer == config.SteerInject {
		g.dopts.Steer = func(e queue.Event) bool { return g.steer != nil && g.steer(e) }
	}
	// With ADMIN_ADDR, what happens is reported for the metrics and the
	// dashboard; without it mon is nil, reports do nothing, and none of
	// this is wired.
	g.mon = newMonitor(cfg, g.opts.Backend)
	if g.mon != nil {
		g.dopts.Monitor = g.mon
	}
	g.ctl = newControls(cfg, nil, g.ledger, cfg.Backend, nil, log.With().Str("component", "controls").Logger())
	g.ctl.threads = g.threads
	g.dopts.CardWarning = g.ctl.warning
	// A shutdown does not wait for a usage limit's reset: the prompts
	// waiting for it stay in the inbox for the next start.
	g.dopts.IntakeStopped = func() { g.limits.Close() }
	g.dopts.Files = g.guard
	// Voice messages: the recording is fetched under the attachments'
	// rules, then sent to TRANSCRIBE_URL; the key stays in this process.
	g.dopts.Voice.MaxDuration = cfg.VoiceMaxDuration
	g.dopts.Voice.Fetcher = files.NewFetcher(cfg.DiscordAPIBaseURL, int64(cfg.MaxAttachmentMB)<<20, int64(cfg.MaxAttachmentMB)<<20)
	if cfg.TranscribeURL != "" {
		g.dopts.Voice.Transcriber = transcribe.New(cfg.TranscribeURL, cfg.TranscribeAPIKey, cfg.TranscribeModel)
	}
	g.dopts.Threads = threadOptions(cfg, g.threads, func() *session.Store {
		if g.core == nil {
			return nil
		}
		return g.core.Sessions
	}, log.With().Str("component", "threads").Logger())
	bot, err := discord.New(g.dopts, log.With().Str("component", "discord").Logger())
	if err != nil {
		return err
	}
	g.bot = bot
	// Closed here unless connected: the shutdown closes a connected bot.
	g.onClose(func() {
		if !g.connected {
			bot.Close() // stops its state saver
		}
	})
	// The schedule files are guarded before anything reads them: a held
	// change the gateway stopped on is put back first (see internal/hold).
	// A worker fires no schedule: its agent's changes go to a run node.
	var forward func(context.Context, hold.Proposal) error
	if g.node != nil && g.opts.Worker {
		forward = holdForwarder{nc: g.node.in.nc, tell: func(ctx context.Context, ch, text string) error {
			_, err := bot.Send(ctx, ch, text, nil)
			return err
		}, log: log.With().Str("component", "schedule").Logger()}.forward
	}
	g.gate, err = hold.New(hold.Options{
		Dir:     cfg.ConfigDir,
		Channel: cfg.OutputChannelID,
		// Who may Apply is the gateway's approver rule, roles included.
		IsApprover: func(p hold.Press) bool {
			return isApprover(cfg, discord.Press{UserID: p.UserID, Roles: p.Roles, ManageGuild: p.ManageGuild})
		},
		Reloaded: func() {
			if cfg.WebhookAddr != "" && g.sched != nil {
				logDisabledWebhooks(g.sched.Webhooks(), cfg.Lookup, log)
			}
			if g.shared != nil && !g.opts.Worker {
				// An applied change reaches the workers now, not at the
				// persona's next tick.
				g.shared.syncPersona(context.Background(), cfg.ConfigDir, log)
			}
		},
		Forward: forward,
		Log:     log.With().Str("component", "schedule").Logger(),
	})
	if err != nil {
		return err
	}
	bot.HandleButtons(hold.ButtonPrefix, func(ctx context.Context, p discord.Press) discord.PressAnswer {
		a := g.gate.Press(ctx, hold.Press{ButtonID: p.ButtonID, UserID: p.UserID, ManageGuild: p.ManageGuild, Roles: p.Roles})
		return discord.PressAnswer{Update: a.Update, Notice: a.Notice}
	})
	return nil
}

// buildCore makes what runs turns: the queue, the runtime and the backend,
// with the actions, the worktrees and everything told about a turn.
func (g *assembly) buildCore(context.Context) error {
	cfg, log, bot, durable, mon := g.cfg, g.log, g.bot, g.durable, g.mon
	g.hooks = &hookRunner{}
	// With DISCORD_ACTIONS off too: nothing teaches the agent the actions
	// then, and a block it writes anyway is reported as refused, not
	// posted as it stands.
	g.acts = &actionRunner{env: newActions(cfg, int64(g.dopts.UploadLimit), g.guard), guildOf: bot.GuildOf,
		log: log.With().Str("component", "actions").Logger()}
	g.acts.env.Discord, g.acts.env.Confirm, g.acts.env.Presence, g.acts.env.Reactions = bot, bot, bot, bot
	var costs agent.CostRecorder = g.ctl
	fetcher := files.NewFetcher(cfg.DiscordAPIBaseURL, int64(cfg.MaxAttachmentMB)<<20, int64(cfg.MaxAttachmentsMB)<<20)
	fetcher.Guard = g.guard
	var enqueued func(queue.Event, error)
	if mon != nil {
		costs, enqueued = costRecorders{g.ctl, mon}, mon.Enqueued
	}
	// WORKTREES=on: a thread's turns run in a git worktree of its own.
	wts, err := newWorktrees(cfg, g.threads, g.opts.Clock, log.With().Str("component", "worktrees").Logger())
	if err != nil {
		return err
	}
	g.wts = wts
	var workspace agent.Workspace
	if wts != nil {
		workspace = wts
	}
	core, err := NewCore(cfg, CoreOptions{
		Workspace: workspace,
		Backend:   g.opts.Backend,
		Replier:   replierFor(bot, mon),
		Hooks:     g.hooks,
		EnvFile:   g.opts.EnvFile,
		Turns:     turnWatchers{g.gate, durable},
		Journal:   durable.journal(),
		Elsewhere: g.node != nil,
		Shared:    g.shared,
		StartID:   g.in.LastID(),
		Prepare: func(ctx context.Context, e queue.Event) queue.Event {
			// A worker reads the operator's files fresh per event, as on
			// one machine; what the mirror writes is the operator's, not
			// this turn's agent's. A run node has them on disk already
			// (its publisher pushes them on its reload tick).
			if g.opts.Worker {
				g.gate.Bring(ctx, func() []string { return g.shared.syncPersona(ctx, cfg.ConfigDir, log) })
			}
			// A prompt that moved to its thread continues the session
			// of its place there (SESSION_SCOPE=user: its author's own).
			return bot.ScopeSession(bot.PrepareThread(ctx, e))
		},
		OnStart: func(e queue.Event) {
			mon.Started(e)
			durable.started(e)
		},
		Costs:       costs,
		Enqueued:    enqueued,
		Admit:       g.ctl.admit,
		Attachments: fetcher,
		Outbox:      &files.Limits{Files: files.MaxFilesPerMessage, Bytes: int64(g.dopts.UploadLimit), Guard: g.guard},
		Actions:     g.acts,
		OnDone: func(e queue.Event, out agent.Outcome) {
			durable.done(e, out)
			mon.Done(e, out)
			g.finished.Add(1)
		},
		// Whatever became of an event, its producer lets go of it: a
		// heartbeat dropped by /claude-stop or at shutdown fires again.
		// One dropped at shutdown stays in the inbox for the next start.
		Left: func(e queue.Event, fate queue.Fate) {
			g.sched.Done(e.ID)
			durable.left(e, fate)
			if g.node != nil {
				g.node.left(e, fate)
			}
			mon.Left(e, fate)
		},
	}, log)
	if err != nil {
		return err
	}
	g.core = core
	g.limits = limit.New(g.opts.Clock)
	core.Runtime.HoldForLimits(g.limits)
	g.ctl.limits = g.limits
	g.ctl.sessions, g.ctl.queue, g.ctl.cli = core.Sessions, core.Queue, core.Backend
	g.steer = core.Runtime.Steer
	if w, ok := core.Backend.(interface{ Warm() backends.WarmStats }); ok && cfg.KeepAlive > 0 {
		g.ctl.warm = w.Warm
	}
	mon.Watch(admin.Sources{
		Waiting:   core.Queue.Waiting,
		Running:   core.Queue.Running,
		Inbox:     g.in.Stats,
		Processes: proc.Running,
		Warm:      g.ctl.warm,
		Connected: bot.Connected,
	})
	if core.Backend.Name() != "" {
		g.ctl.backend = core.Backend.Name()
	}
	g.ctl.register(bot)
	g.plans = newPlanModes(core.Queue.Enqueue, log.With().Str("component", "plan").Logger())
	g.plans.register(bot)
	bot.SetPromptMark(g.plans.mark)
	if wts != nil {
		wts.register(bot, func(ch string) bool { _, running, _ := core.Queue.Lane(ch); return running }, g.dopts.UploadLimit)
	}
	return nil
}

// buildSchedule makes the scheduler, the deferred prompts and the cron
// actions, and binds the webhook port (a port in use fails the start at
// once; requests are served once Discord is ready). A worker fires no
// schedule and takes no webhooks; it still reads the hooks.
func (g *assembly) buildSchedule(ctx context.Context) error {
	cfg, log, core := g.cfg, g.log, g.core
	sopts := schedule.Options{
		Enqueue:        core.Queue.Enqueue,
		DefaultChannel: cfg.OutputChannelID,
		Clock:          g.opts.Clock,
		Log:            log,
	}
	if g.node != nil {
		sopts.Finished = g.node.finished // the events run elsewhere
	}
	sched, err := schedule.New(sopts)
	if err != nil {
		return err
	}
	g.sched = sched
	g.hooks.instruction, g.hooks.process = sched.Hook, core.Runtime.Process
	switch {
	case cfg.Actions.Enabled && g.shared != nil:
		// On NATS every process keeps them in one bucket, and the holder
		// of the schedule's lease fires them (components).
		store, err := kvdeferred.Open(ctx, g.shared.js, kvdeferred.Options{Replicas: cfg.NATSReplicas, Clock: g.opts.Clock,
			Log: log.With().Str("component", "defer").Logger()})
		if err != nil {
			return fmt.Errorf("the deferred prompts on NATS JetStream: %w", err)
		}
		g.deferKV = store
		g.acts.env.Defer = deferrals{store: store, maxPending: cfg.DeferMaxPending}
	case cfg.Actions.Enabled:
		// Before the queue runs: the actions' parts are fixed from then on.
		store, err := deferred.Open(filepath.Join(cfg.ConfigDir, deferred.FileName), g.opts.Clock, fireDeferred(core.Queue.Enqueue),
			log.With().Str("component", "defer").Logger())
		if err != nil {
			log.Error().Err(files.WithoutPath(err)).Msg("the deferred prompts cannot be read; the defer action is off until the file is fixed or removed")
		} else {
			g.onClose(func() { store.Close() })
			g.acts.env.Defer = deferrals{store: store, maxPending: cfg.DeferMaxPending}
		}
	}
	if err := g.gate.Start(sched); err != nil {
		log.Error().Err(err).Msg("schedule")
	}
	// Still before the queue runs.
	g.acts.env.Crons = newCronActions(g.gate, sched)
	if cfg.WebhookAddr == "" || g.opts.Worker {
		return nil
	}
	var answered func(int)
	if g.mon != nil {
		answered = g.mon.WebhookAnswered
	}
	h, err := newWebhookHandler(sched, cfg.Lookup, core.Queue, cfg.OutputChannelID, answered, log)
	if err != nil {
		return err
	}
	if g.webhooks, err = listenWebhooks(cfg.WebhookAddr, h, log.With().Str("component", "webhook").Logger()); err != nil {
		return err
	}
	g.onClose(func() { g.webhooks.Close(context.Background()) })
	return nil
}

// takeUp readies what the previous run left (turns to run again go first
// in their lanes; deliveries and notices wait for Discord) and, on NATS,
// this process's part among the gateway's processes: there the stream
// hands out again what was left, to whichever process is free.
func (g *assembly) takeUp(ctx context.Context) error {
	cfg, log, core, bot := g.cfg, g.log, g.core, g.bot
	if g.node == nil {
		g.plan = planResume(g.in.Unfinished())
	}
	for _, e := range g.plan.rerun {
		core.Queue.Restore(e)
	}
	p := g.plan
	g.mon.Resumed(len(p.rerun), len(p.deliver), len(p.interrupted), len(p.dead))
	if n := len(p.rerun) + len(p.deliver) + len(p.interrupted) + len(p.dead); n > 0 {
		log.Info().Int("rerun", len(p.rerun)).Int("deliver", len(p.deliver)).
			Int("interrupted", len(p.interrupted)).Int("dead_letters", len(p.dead)).
			Msg("taking up the events the previous run did not finish")
	}
	retry := &retrier{in: g.in, enqueue: core.Queue.Enqueue, approvers: cfg.ApproverIDs, approverRoles: cfg.ApproverRoleIDs, log: log}
	bot.HandleButtons(discord.RetryPrefix, retry.press)
	g.res = &resumer{d: g.durable, notify: bot, deliver: bot.Resume, log: log}
	if g.node == nil {
		return nil
	}
	var err error
	if g.parts, err = g.node.start(ctx, cfg, g.shared, g.opts, core); err != nil {
		return err
	}
	g.ctl.nodes = &nodeStatus{in: g.node.in, registry: g.parts.registry, now: time.Now}
	g.node.bot, g.node.core, g.node.res = bot, core, g.res
	g.node.disp = g.node.in.Dispatcher(jsinbox.DispatchOptions{Slots: cfg.MaxConcurrent, OnError: func(err error) {
		g.node.log.Warn().Err(err).Msg("taking events from the stream")
	}})
	return nil
}

// serveAdmin starts the admin server and its dashboard (ADMIN_ADDR):
// /healthz at once, /readyz once Discord is connected, until everything
// else has stopped. On NATS the dashboard lists the gateway's processes.
func (g *assembly) serveAdmin(context.Context) error {
	if g.mon == nil {
		return nil
	}
	cfg, log, core := g.cfg, g.log, g.core
	ready := readiness{bot: g.bot, queue: core.Queue, inbox: g.in}
	if g.opts.Worker {
		ready.bot = restOnly{} // a worker has no Discord connection to lose
	}
	adminHTTP, err := startAdmin(cfg, g.mon, ready.check, log.With().Str("component", "admin").Logger())
	if err != nil {
		return err
	}
	dash := &dashboardSource{hub: g.mon.Hub(), queue: core.Queue, sessions: core.Sessions, ledger: g.ledger, sched: g.sched,
		ready: ready.check, connected: g.bot.Connected, name: g.bot.ChannelName, backend: core.Backend.Name(), log: log.With().Str("component", "dashboard").Logger(),
		limits: g.limits}
	if g.node != nil {
		dash.self, dash.processes = g.node.name, g.parts.registry.List
	}
	stopDash, err := mountDashboard(adminHTTP.srv, dash, filepath.Join(cfg.ConfigDir, ActivityFile))
	if err != nil {
		log.Error().Err(files.WithoutPath(err)).Msg("the dashboard's activity log cannot be opened; the dashboard is off")
		stopDash = func() {}
	}
	if g.opts.AdminReady != nil {
		g.opts.AdminReady(adminHTTP.srv.Addr(), g.mon.Hub())
	}
	g.onClose(func() {
		stopDash()
		adminHTTP.close()
	})
	return nil
}

// connect connects to Discord, bounded by the connect timeout; a worker
// attaches to Discord's REST API only.
func (g *assembly) connect(ctx context.Context) error {
	timeout := g.opts.ConnectTimeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var err error
	if g.opts.Worker {
		err = g.bot.Attach(ctx, g.core.Queue, g.core.Sessions)
	} else {
		err = g.bot.Open(ctx, g.core.Queue, g.core.Sessions)
	}
	g.connected = err == nil
	return err
}

// component is a part that runs until its context ends.
type component struct {
	name string
	run  func(context.Context) error
}

// components are the process's loops that need Discord, by role: the
// schedule (under its lease on NATS), the stream's dispatcher and the
// passed-on presses (NATS), the persona's publisher, the sweeps of
// worktrees and threads, the idle trim, the IPC folder, the schedule
// files' reloads, and the resumer.
func (g *assembly) components() []component {
	cfg, log := g.cfg, g.log
	var cs []component
	add := func(name string, run func(context.Context) error) { cs = append(cs, component{name, run}) }
	if g.wts != nil {
		add("worktrees", g.wts.Run) // removes the worktrees nobody needs, hourly
	}
	add("threads", func(ctx context.Context) error {
		// The real clock: a test's fake clock counts its timers.
		pruneThreads(ctx, g.threads, g.wts.holds, nil, log.With().Str("component", "threads").Logger())
		return nil
	})
	reloadEvery := g.opts.ReloadInterval
	if reloadEvery <= 0 {
		reloadEvery = 2 * time.Second
	}
	switch {
	case g.node != nil:
		add("cluster", g.node.serve)
		add("shared-logs", g.shared.logs.Run)
		add("heartbeat", g.parts.registry.Beat)
		if cfg.MaxConcurrent > 0 {
			add("dispatch", g.node.dispatch)
		}
		if !g.opts.Worker {
			// One process of the gateway fires the schedule at a time.
			add("schedule", func(ctx context.Context) error {
				return g.parts.lease.Run(ctx, scheduleLease, g.lead)
			})
			// The schedule's home asks about the workers' agents' changes.
			add("holds", func(ctx context.Context) error {
				return serveHolds(ctx, g.node.in.nc, g.gate, log.With().Str("component", "schedule").Logger())
			})
		}
		if g.shared.publisher != nil {
			add("persona", func(ctx context.Context) error {
				// The real clock: a test's fake clock counts its timers.
				t := time.NewTicker(reloadEvery)
				defer t.Stop()
				for {
					select {
					case <-ctx.Done():
						return nil
					case <-t.C:
						g.shared.syncPersona(ctx, cfg.ConfigDir, log)
					}
				}
			})
		}
	default:
		add("schedule", g.sched.Run)
	}
	add("trim", func(ctx context.Context) error {
		freeAfterStart(ctx, startSettle)
		trimWhenIdle(ctx, g.finished.Load, 10*time.Second)
		return nil
	})
	if w, err := newIPC(cfg, g.bot, g.core.Sessions, int64(g.dopts.UploadLimit), g.guard, log); err != nil {
		log.Error().Err(files.WithoutPath(err)).Msg("the IPC folder cannot be watched; files dropped into ipc/outbound are not posted")
	} else {
		add("ipc", w.Run)
	}
	g.gate.SetAsker(askIn{g.bot})
	add("schedule-files", func(ctx context.Context) error {
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		g.gate.Run(ctx, reloadEvery, hup)
		return nil
	})
	plan := g.plan
	add("resume", func(ctx context.Context) error {
		g.res.run(ctx, plan)
		return nil
	})
	return cs
}

// startSettle is how long after connecting the gateway counts as started:
// the READY and guild events are handled, the leftovers of the last run are
// taken up, the first reloads are done.
const startSettle = 3 * time.Second

// freeAfterStart collects once the start has settled and hands the freed
// pages back to the system. Starting leaves over a megabyte of garbage (the
// config's parse, the /proc scan for leftover processes, the READY
// payload, the JSON codecs' first use) on a heap too small to have been
// collected yet; without this it stays resident until the runtime's
// two-minute forced collection and its scavenger return it.
func freeAfterStart(ctx context.Context, settle time.Duration) {
	// The real clock: a test's fake clock counts its timers.
	t := time.NewTimer(settle)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
		debug.FreeOSMemory()
	}
}

// started serves the webhooks, queues the startup hook and tells
// Options.Ready, once the components run.
func (g *assembly) started() {
	if g.webhooks != nil {
		g.webhooks.Serve()
		if g.opts.WebhookReady != nil {
			g.opts.WebhookReady(g.webhooks.Addr())
		}
	}
	g.log.Info().Str("backend", g.core.Backend.Name()).Bool("worker", g.opts.Worker).Msg("gateway running")
	if text := g.sched.Hook(schedule.HookStartup); text != "" && !g.opts.Worker {
		if _, err := g.core.Queue.Enqueue(lifecycleEvent(schedule.HookStartup, text, g.cfg.OutputChannelID)); err != nil {
			g.log.Warn().Err(err).Msg("startup hook not queued")
		}
	}
	if g.opts.Ready != nil {
		g.opts.Ready()
	}
}
