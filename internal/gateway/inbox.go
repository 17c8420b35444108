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

// Inbox is what the gateway keeps every event in before it acknowledges
// it, and what became of the event: the embedded inbox in CONFIG_DIR
// (*inbox.Inbox) or, with NATS_URL, the inbox on NATS JetStream
// (internal/jsinbox). Both are safe for concurrent use.
type Inbox interface {
	Add(e queue.Event, seen ...inbox.Seen) error
	Started(id uint64) error
	ToolStarted(id uint64) error
	Replied(id uint64, text string, files ...string) error
	Delivered(id uint64, chunk int, messageID string) error
	Finish(id uint64, s inbox.State) error
	See(seen ...inbox.Seen) error
	Get(id uint64) (inbox.Entry, bool)
	Unfinished() []inbox.Entry
	LastID() uint64
	LastSeen() map[string]inbox.Seen
	NoncePrefix() string
	Created() time.Time
	Stats() inbox.Stats
	// Err is why the inbox cannot take events now (/readyz); nil when it can.
	Err() error
	// Recovered is how many bytes of a record torn by a crash were cut
	// off at open (the embedded inbox only).
	Recovered() int64
	Close() error
}

var _ Inbox = (*inbox.Inbox)(nil)

// OpenInbox opens the inbox: with NATS_URL the one on JetStream, else
// CONFIG_DIR's, with the configured retention.
func OpenInbox(ctx context.Context, cfg *config.Config, log zerolog.Logger) (Inbox, error) {
	if len(cfg.NATSURLs) > 0 {
		return openNATSInbox(ctx, cfg, log)
	}
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
func tellRestarting(in Inbox, n notifier, log zerolog.Logger) {
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
