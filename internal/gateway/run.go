package gateway

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/config"
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
}

// Run is `gateway run`: it connects to Discord, takes prompts until ctx
// ends (SIGTERM, SIGINT), then shuts down gracefully (R10): intake stops
// (new prompts get a notice), accepted events finish or time out and their
// replies are delivered, then the bot disconnects. It returns nil after a
// clean shutdown and an error if Discord cannot be reached or closes the
// connection for good (a rejected token, a missing intent).
func Run(ctx context.Context, cfg *config.Config, opts Options, log zerolog.Logger) error {
	dopts := opts.Discord
	dopts.Token = cfg.DiscordToken
	dopts.APIBaseURL = cfg.DiscordAPIBaseURL
	dopts.GatewayURL = cfg.DiscordGatewayURL
	dopts.Access = discord.NewAccess(cfg.AllowedUserIDs, cfg.AllowedChannelIDs, cfg.AllowedGuildIDs)
	bot, err := discord.New(dopts, log.With().Str("component", "discord").Logger())
	if err != nil {
		return err
	}
	core, err := NewCore(cfg, CoreOptions{Backend: opts.Backend, Replier: bot}, log)
	if err != nil {
		return err
	}

	// Runs get their own context: a signal starts the graceful shutdown,
	// it does not cancel the agent mid-turn.
	runCtx, cancelRuns := context.WithCancel(context.Background())
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
	log.Info().Str("backend", core.Backend.Name()).Str("config_dir", cfg.ConfigDir).Msg("gateway running")
	if opts.Ready != nil {
		opts.Ready()
	}

	lost := bot.Wait(ctx)
	if lost != nil {
		log.Error().Err(lost).Msg("stopping")
	} else {
		log.Info().Msg("shutting down: no new prompts; waiting for the ones in progress")
	}

	bot.StopIntake()
	timeout := opts.ShutdownTimeout
	if timeout <= 0 {
		timeout = cfg.QueryTimeout + 30*time.Second
	}
	drainCtx, cancelDrain := context.WithTimeout(context.Background(), timeout)
	defer cancelDrain()
	var errs []error
	if err := core.Shutdown(drainCtx); err != nil {
		errs = append(errs, fmt.Errorf("shutdown: %w (runs still in progress were stopped)", err))
	}
	cancelRuns()
	<-queueDone
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
