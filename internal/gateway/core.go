// Package gateway wires the parts of the gateway together and owns their
// lifecycle: bootstrap, queue, runtime, backend, and the shutdown drain.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/agent"
	"github.com/agentgateway/gateway/internal/agentuser"
	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/files"
	"github.com/agentgateway/gateway/internal/persona"
	"github.com/agentgateway/gateway/internal/proc"
	"github.com/agentgateway/gateway/internal/queue"
	"github.com/agentgateway/gateway/internal/session"
)

// Core is the transport-independent heart of the gateway: everything
// between an accepted event and a reply.
type Core struct {
	Queue    *queue.Queue
	Runtime  *agent.Runtime
	Sessions *session.Store
	Backend  backends.Backend
}

// CoreOptions are the parts a transport provides.
type CoreOptions struct {
	// Backend overrides the backend named by the config (tests).
	Backend backends.Backend
	// Replier delivers replies.
	Replier agent.Replier
	// Hooks, if set, run inline around every event.
	Hooks agent.Hooks
	// Sessions overrides the session store (e.g. a memory-only one).
	Sessions *session.Store
	// OnDone, if set, is called after each event has been processed and
	// its reply handed over.
	OnDone func(queue.Event, agent.Outcome)
	// Left, if set, is called once for every accepted event when it leaves
	// the queue, whether it ran or was dropped (queue.Options.Left).
	Left func(queue.Event, queue.Fate)
	// Enqueued, if set, is told how every Enqueue ended
	// (queue.Options.Enqueued).
	Enqueued func(queue.Event, error)
	// EnvFile is the .env file in use; empty means config.DefaultEnvFile.
	// With AGENT_USER, the start check makes sure the agent cannot read it.
	EnvFile string
	// Turns, if set, watches every CLI run (the schedule hold, the inbox).
	Turns agent.TurnWatcher
	// Journal, if set, records every event before the queue accepts it
	// (the inbox); StartID is its highest event id.
	Journal queue.Journal
	StartID uint64
	// Elsewhere makes the journal's store the queue (queue.Options.Elsewhere).
	Elsewhere bool
	// Shared, if set, is the state that follows a channel to any process
	// of a gateway on NATS: sessions, settings, transcripts, memory.md.
	Shared *sharedState
	// Workspace, if set, picks where prompts' turns run (a thread's
	// worktree).
	Workspace agent.Workspace
	// Prepare, if set, readies an event's place before its turn (the
	// thread a prompt opens) and returns the event as the turn sees it.
	Prepare func(context.Context, queue.Event) queue.Event
	// OnStart, if set, is called when an event's turn is about to start.
	OnStart func(queue.Event)
	// Costs, if set, records what every event cost (the ledger).
	Costs agent.CostRecorder
	// Admit, if set, may refuse an event before it runs (budgets).
	Admit func(context.Context, queue.Event) bool
	// OneShot runs every turn in a print-mode process of its own, with no
	// warm process and no approvals (gateway chat when no terminal can
	// answer them).
	OneShot bool
	// Attachments, if set, fetches the files attached to prompts.
	Attachments agent.AttachmentFetcher
	// Outbox, if set, sends the files the agent leaves in its outbox with
	// the reply, within these limits.
	Outbox *files.Limits
	// Actions, if set, runs the Discord actions in the agent's replies;
	// NewCore gives it the memory guard and the channels' models.
	Actions *actionRunner
}

// NewBackend builds the backend the config selects, with the environment
// the CLI may see: the process environment plus the credentials read from
// .env. backends.FilterEnv removes everything else, the Discord token first.
// With AGENT_USER, every CLI runs as that user (see agentuser).
//
// claude runs interactively (stream-json input): warm processes per
// channel, soft interrupts and tool approvals (see backends.WarmOptions).
func NewBackend(cfg *config.Config, log zerolog.Logger) (backends.Backend, error) {
	return newBackend(cfg, true, log)
}

func newBackend(cfg *config.Config, interactive bool, log zerolog.Logger) (backends.Backend, error) {
	runAs, err := RunAs(cfg)
	if err != nil {
		return nil, err
	}
	return backends.New(cfg.Backend, backends.Options{
		Binary: cfg.AgentBinary,
		Env:    append(os.Environ(), cfg.BackendEnv()...),
		Log:    log.With().Str("component", "backend").Str("backend", cfg.Backend).Logger(),
		RunAs:  runAs,
		Owner:  Owner(cfg),
		Warm: backends.WarmOptions{
			Interactive:  interactive,
			KeepAlive:    cfg.KeepAlive,
			MaxProcesses: cfg.WarmCap(),
			MemoryCap:    int64(cfg.WarmMemoryMB) << 20,
			HangTimeout:  cfg.HangTimeout,
		},
	})
}

// RunAs is the user AGENT_USER names, as backends.Options takes it; nil
// when it is not set.
func RunAs(cfg *config.Config) (*backends.RunAs, error) {
	if cfg.AgentUser == "" {
		return nil, nil
	}
	u, err := agentuser.Lookup(cfg.AgentUser)
	if err != nil {
		return nil, err
	}
	return &backends.RunAs{Name: u.Name, Home: u.Home, Credential: *u.Credential()}, nil
}

// CheckAgentUser runs the start check of AGENT_USER (agentuser.Check), as
// `gateway run` does and doctor reports it: an error (an
// *agentuser.CheckError when the user exists) lists every problem with its
// fix. Nil when AGENT_USER is not set.
func CheckAgentUser(cfg *config.Config, envFile string) (*agentuser.User, error) {
	if cfg.AgentUser == "" {
		return nil, nil
	}
	u, err := agentuser.Lookup(cfg.AgentUser)
	if err != nil {
		return nil, err
	}
	if envFile == "" {
		envFile = config.DefaultEnvFile
	}
	if abs, err := filepath.Abs(envFile); err == nil {
		envFile = abs
	}
	// The model keys' files are left out: the CLI is given those keys.
	secrets := map[string]string{}
	for name, path := range cfg.PrivateFiles() {
		if !config.IsModelCredential(name) {
			secrets[name] = path
		}
	}
	return u, agentuser.Check(u, agentuser.Setup{ConfigDir: cfg.ConfigDir, EnvFile: envFile, SecretFiles: secrets})
}

// NewCore bootstraps CONFIG_DIR and builds the queue and the runtime.
func NewCore(cfg *config.Config, opts CoreOptions, log zerolog.Logger) (*Core, error) {
	if opts.Replier == nil {
		return nil, errors.New("gateway: no replier")
	}
	if _, err := persona.Bootstrap(cfg.ConfigDir, log); err != nil {
		return nil, fmt.Errorf("bootstrap %s: %w", cfg.ConfigDir, err)
	}
	// After the bootstrap, so the files it created are judged too.
	agentUser, err := CheckAgentUser(cfg, opts.EnvFile)
	if err != nil {
		return nil, err
	}
	turns := opts.Turns
	if agentUser != nil {
		s := &strays{uid: agentUser.UID, kill: proc.KillStrays, log: log.With().Str("component", "strays").Logger()}
		// Before any CLI runs: what a previous gateway's turns left.
		s.sweep("at start")
		turns = withStrays(s, turns)
	}
	sessions := opts.Sessions
	if sessions == nil {
		var warning string
		var err error
		sessions, warning, err = session.Open(filepath.Join(cfg.ConfigDir, session.FileName))
		if err != nil {
			return nil, err
		}
		if warning != "" {
			log.Warn().Msg(warning)
		}
	}
	if opts.Shared != nil {
		slog := log.With().Str("component", "sessions").Logger()
		sessions.Share(opts.Shared.sessions, func(err error) {
			slog.Warn().Err(err).Msg("the shared session store on NATS; using this machine's copy")
		})
	}
	backend := opts.Backend
	if backend == nil {
		var err error
		if backend, err = newBackend(cfg, !opts.OneShot, log); err != nil {
			return nil, err
		}
	}
	// System prompt files a crashed gateway left behind hold the whole
	// persona; nobody else needs them.
	agent.RemoveStalePromptFiles("", log)
	aopts := agent.Options{
		ConfigDir:             cfg.ConfigDir,
		WorkDir:               cfg.WorkDir,
		Costs:                 opts.Costs,
		Admit:                 opts.Admit,
		Timeout:               cfg.QueryTimeout,
		AllowedTools:          cfg.AllowedTools,
		PermissionMode:        cfg.PermissionMode,
		MaxTurns:              cfg.MaxTurns,
		Model:                 cfg.Model,
		Turns:                 turns,
		ScheduledToolsAllowed: cfg.ScheduledToolsPolicy == config.ScheduledToolsAllow,
		Attachments:           opts.Attachments,
		Outbox:                opts.Outbox,
		Workspace:             opts.Workspace,
	}
	aopts.Memory = persona.NewMemoryGuard(filepath.Join(cfg.ConfigDir, persona.MemoryFile))
	if opts.Shared != nil {
		aopts.Memory.Share(opts.Shared.memory)
		aopts.Transcripts = patientTranscripts{Transcripts: opts.Shared.transcripts, limit: max(cfg.NATSAckWait, 10*time.Second),
			log: log.With().Str("component", "transcripts").Logger()}
		runAs, err := RunAs(cfg)
		if err != nil {
			return nil, err
		}
		if runAs != nil {
			aopts.AgentHome = agentHome(&runAs.Credential, runAs.Home)
		} else {
			aopts.AgentHome = agentHome(nil, "")
		}
	}
	if opts.Actions != nil {
		opts.Actions.env.Memory = memoryActions{guard: aopts.Memory, path: filepath.Join(cfg.ConfigDir, persona.MemoryFile)}
		opts.Actions.env.Models = channelModels{sessions: sessions, fallback: cfg.Model}
		aopts.Actions, aopts.ActionFollowups = opts.Actions, cfg.ActionsMaxFollowups
	}
	if x := openExchanges(cfg, log); x != nil {
		if opts.Shared != nil {
			// Before any exchange is archived: a channel's recent
			// conversation is the same on every process.
			if err := opts.Shared.logs.shareArchive(context.Background(), x.archive); err != nil {
				x.Close()
				return nil, err
			}
		}
		aopts.Exchanges = x
		if cfg.HistoryMessages > 0 {
			aopts.History = x
		}
	}
	rt := agent.New(aopts, backend, sessions, opts.Replier, opts.Hooks, log.With().Str("component", "runtime").Logger())
	if agentUser != nil {
		rt.ShareSystemPromptWith(agentUser.GID)
	}
	handle := func(ctx context.Context, e queue.Event) {
		if opts.Prepare != nil {
			e = opts.Prepare(ctx, e)
		}
		if opts.OnStart != nil {
			opts.OnStart(e)
		}
		out := rt.Process(ctx, e)
		if opts.OnDone != nil {
			opts.OnDone(e, out)
		}
	}
	q := queue.New(queue.Options{
		MaxDepth:      cfg.MaxQueueDepth,
		MaxPerLane:    cfg.MaxChannelQueue,
		MaxConcurrent: cfg.MaxConcurrent,
		Left: func(e queue.Event, fate queue.Fate) {
			if fate != queue.Ran {
				rt.Forget(e) // dropped before it ran: no steering record stays
			}
			if opts.Left != nil {
				opts.Left(e, fate)
			}
		},
		Journal:   opts.Journal,
		Elsewhere: opts.Elsewhere,
		StartID:   opts.StartID,
		Enqueued:  opts.Enqueued,
	}, handle)
	return &Core{Queue: q, Runtime: rt, Sessions: sessions, Backend: backend}, nil
}

// Run dispatches events until ctx ends. Cancelling ctx stops runs in
// flight; call Shutdown first for a graceful stop.
func (c *Core) Run(ctx context.Context) error {
	_, err := c.Queue.Run(ctx)
	return err
}

// Shutdown stops intake and waits, bounded by ctx, for accepted events to
// finish and deliver their replies (R10).
func (c *Core) Shutdown(ctx context.Context) error {
	c.Queue.Close()
	err := c.Queue.Drain(ctx)
	if err == nil {
		c.Runtime.Close()
	}
	return err
}
