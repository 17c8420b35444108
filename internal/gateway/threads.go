package gateway

import (
	"context"
	"path/filepath"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/discord"
	"github.com/agentgateway/gateway/internal/session"
	"github.com/agentgateway/gateway/internal/threads"
)

// openThreads opens the list of the threads the gateway opened
// (threads.json in CONFIG_DIR).
func openThreads(cfg *config.Config, log zerolog.Logger) (*threads.Store, error) {
	list, warning, err := threads.Open(filepath.Join(cfg.ConfigDir, threads.FileName))
	if err != nil {
		return nil, err
	}
	if warning != "" {
		log.Warn().Msg(warning)
	}
	return list, nil
}

// threadOptions turns on a thread per task when THREADS=auto. A thread
// inherits its channel's project, model and instructions when it is
// opened, and keeps its own afterwards (sessions is read when a thread
// opens, after the core exists).
func threadOptions(cfg *config.Config, list *threads.Store, sessions func() *session.Store, log zerolog.Logger) discord.ThreadOptions {
	if cfg.Threads != config.ThreadsAuto {
		return discord.ThreadOptions{}
	}
	return discord.ThreadOptions{
		Store:   list,
		Archive: cfg.ThreadArchive,
		Opened: func(thread, parent string) {
			store := sessions()
			if store == nil {
				return
			}
			inherited := store.Settings(parent)
			if inherited.IsZero() {
				return
			}
			if _, _, err := store.UpdateSettings(thread, func(s *session.Settings) { *s = inherited }); err != nil {
				log.Error().Err(err).Str("thread", thread).Msg("the thread could not inherit its channel's settings; it uses the defaults")
			}
		},
	}
}

// threadsKept is how long the thread list remembers a thread nobody wrote
// in; in an older one the bot answers when mentioned (see
// threads.Store.Prune).
const threadsKept = 30 * 24 * time.Hour

// pruneThreads forgets idle threads at start and daily, keeping those
// whose worktree still holds work (keep), until ctx ends.
func pruneThreads(ctx context.Context, list *threads.Store, keep func(string) bool, clock clockwork.Clock, log zerolog.Logger) {
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	tick := clock.NewTicker(24 * time.Hour)
	defer tick.Stop()
	for {
		n, err := list.Prune(clock.Now().Add(-threadsKept), keep)
		switch {
		case err != nil:
			log.Warn().Err(err).Msg("could not forget the threads idle for 30 days")
		case n > 0:
			log.Info().Int("threads", n).Msg("forgot the threads idle for 30 days (the bot answers there when mentioned)")
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.Chan():
		}
	}
}
