package gateway

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/admin"
	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/cost"
	"github.com/agentgateway/gateway/internal/discord"
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
	if opts.Worker && len(cfg.NATSURLs) == 0 {
		return errWorkerWithoutNATS
	}
	g := &assembly{cfg: cfg, opts: opts, log: log}
	defer g.close()
	// In the order each part needs the ones before it: the stores first
	// (every event is stored before it is acknowledged), then the Discord
	// client, the core that runs turns, the schedule, and what the
	// previous run left.
	for _, build := range []func(context.Context) error{g.openStores, g.buildDiscord, g.buildCore, g.buildSchedule, g.takeUp, g.serveAdmin} {
		if err := build(ctx); err != nil {
			return err
		}
	}
	turns := startTurns(g.core)
	defer turns.stop()
	if err := g.connect(ctx); err != nil {
		turns.stop()
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	// Timers, reloads and webhooks start once Discord can take replies.
	bg := newBackground(log)
	defer bg.stop()
	for _, c := range g.components() {
		bg.start(c.name, c.run)
	}
	g.started()

	var lost error
	if opts.Worker {
		<-ctx.Done()
	} else {
		lost = g.bot.Wait(ctx)
	}
	return shutdown{cfg: cfg, opts: opts, log: log, in: g.in, bot: g.bot, core: g.core, sched: g.sched,
		webhooks: g.webhooks, background: bg, turns: turns, cluster: g.node, shared: g.shared}.run(lost)
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
