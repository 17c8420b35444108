package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/discord"
	"github.com/agentgateway/gateway/internal/inbox"
	"github.com/agentgateway/gateway/internal/proc"
	"github.com/agentgateway/gateway/internal/queue"
)

// InboxFile is the inbox's log in CONFIG_DIR.
const InboxFile = "inbox.log"

// OpenInbox opens CONFIG_DIR's inbox with the configured retention.
func OpenInbox(cfg *config.Config) (*inbox.Inbox, error) {
	in, err := inbox.Open(filepath.Join(cfg.ConfigDir, InboxFile), inbox.Options{
		KeepFor: cfg.InboxRetention,
		KeepMax: cfg.InboxMaxEvents,
	})
	if err != nil {
		return nil, fmt.Errorf("open the inbox: %w", err)
	}
	return in, nil
}

// Owner is the mark every CLI process started for CONFIG_DIR carries
// (proc.Spec.Owner), so that the next start finds what a killed gateway
// left running.
func Owner(cfg *config.Config) string {
	dir, err := filepath.Abs(cfg.ConfigDir)
	if err != nil {
		dir = cfg.ConfigDir
	}
	sum := sha256.Sum256([]byte(dir))
	return hex.EncodeToString(sum[:6])
}

// killLeftovers stops the CLI processes a previous gateway on this
// CONFIG_DIR left running when it was killed: they would go on spending
// and writing files for turns the inbox now runs again.
func killLeftovers(cfg *config.Config, log zerolog.Logger) {
	n, err := proc.KillLeftovers(Owner(cfg))
	if err != nil {
		log.Warn().Err(err).Msg("could not look for agent processes a previous run left")
	}
	if n > 0 {
		log.Warn().Int("processes", n).Msg("stopped agent processes left running by a previous gateway that was killed")
	}
}

// tellRestarting tells, once, each prompt still unanswered as the gateway
// stops that it stays queued for the next start.
func tellRestarting(in *inbox.Inbox, n notifier, log zerolog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Only the prompts the next start runs again: the others get their
	// own notice then.
	for _, e := range planResume(in.Unfinished()).rerun {
		if e.Kind != queue.KindMessage {
			continue
		}
		if err := n.Notify(ctx, e, discord.RestartingTag, discord.RestartingNotice, false); err != nil {
			log.Debug().Err(err).Uint64("event", e.ID).Msg("could not tell a waiting prompt about the restart")
		}
	}
}

// importDiscordState moves the newest message seen per channel from the
// discord-state.json of an earlier version into a new inbox, once, so the
// first start after an upgrade still catches up on what was missed.
func importDiscordState(cfg *config.Config, d *durable, log zerolog.Logger) {
	path := filepath.Join(cfg.ConfigDir, discord.StateFile)
	if len(d.in.LastSeen()) > 0 {
		return
	}
	seen, err := discord.ReadStateFile(path)
	if err != nil {
		log.Warn().Str("file", discord.StateFile).Msg("the Discord state file of an earlier version is not readable; ignored")
		return
	}
	if len(seen) == 0 {
		return
	}
	if err := d.SaveSeen(seen); err != nil {
		log.Warn().Err(err).Msg("could not import the Discord state of an earlier version")
		return
	}
	if err := os.Remove(path); err != nil {
		log.Debug().Err(err).Msg("remove the imported Discord state file")
	}
	log.Info().Int("channels", len(seen)).Str("file", discord.StateFile).Msg("imported the newest message seen per channel into the inbox")
}
