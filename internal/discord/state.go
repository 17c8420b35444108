package discord

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/diamondburned/arikawa/v3/discord"

	"github.com/agentgateway/gateway/internal/atomicfile"
	"github.com/agentgateway/gateway/internal/files"
)

// StateFile is where the bot keeps, in CONFIG_DIR, the newest message it
// has seen in each channel, so that after a restart it can answer the
// prompts posted while it was down.
const StateFile = "discord-state.json"

// stateVersion is the format of StateFile.
const stateVersion = 1

type stateFile struct {
	Version  int                     `json:"version"`
	Channels map[string]channelState `json:"channels"`
}

type channelState struct {
	Last  discord.MessageID `json:"last"`
	Guild discord.GuildID   `json:"guild,omitempty"`
}

// loadState reads the newest message seen per channel. A missing file is
// no state; an unreadable one is reported and ignored: the bot then only
// misses what was posted while it was down, as without the file.
func loadState(path string) (map[discord.ChannelID]seen, error) {
	out := map[discord.ChannelID]seen{}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return out, err
	}
	var f stateFile
	if err := json.Unmarshal(b, &f); err != nil || f.Version != stateVersion {
		return out, fmt.Errorf("%s is not a version %d state file", path, stateVersion)
	}
	for id, c := range f.Channels {
		sf, err := discord.ParseSnowflake(id)
		if err != nil || !c.Last.IsValid() {
			continue
		}
		out[discord.ChannelID(sf)] = seen{message: c.Last, guild: c.Guild}
	}
	return out, nil
}

// ReadStateFile reads a StateFile written by an earlier version (before
// the inbox kept this), so that an upgrade does not forget where each
// channel was. A missing file is no state.
func ReadStateFile(path string) ([]SeenMessage, error) {
	last, err := loadState(path)
	var out []SeenMessage
	for ch, s := range last {
		out = append(out, SeenMessage{Channel: ch.String(), Message: s.message.String(), Guild: guildString(s.guild)})
	}
	return out, err
}

func saveState(path string, last map[discord.ChannelID]seen) error {
	f := stateFile{Version: stateVersion, Channels: make(map[string]channelState, len(last))}
	for ch, s := range last {
		f.Channels[ch.String()] = channelState{Last: s.message, Guild: s.guild}
	}
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	return atomicfile.Write(path, b, 0o600)
}

// persist writes the state every interval while it changes, until the bot
// closes, and once more then.
func (b *Bot) persist(interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-b.ctx.Done():
			b.saveIfDirty()
			close(b.persisted)
			return
		case <-t.C:
			b.saveIfDirty()
		}
	}
}

func (b *Bot) saveIfDirty() {
	b.mu.Lock()
	if !b.dirty {
		b.mu.Unlock()
		return
	}
	b.dirty = false
	snapshot := make(map[discord.ChannelID]seen, len(b.lastSeen))
	for ch, s := range b.lastSeen {
		snapshot[ch] = s
	}
	b.mu.Unlock()
	if b.opts.Seen != nil {
		batch := make([]SeenMessage, 0, len(snapshot))
		for ch, s := range snapshot {
			batch = append(batch, SeenMessage{Channel: ch.String(), Message: s.message.String(), Guild: guildString(s.guild)})
		}
		if err := b.opts.Seen.SaveSeen(batch); err != nil {
			b.log.Warn().Err(err).Msg("could not record the newest messages seen; a restart may fetch them again")
		}
		return
	}
	if err := saveState(b.opts.StatePath, snapshot); err != nil {
		b.log.Warn().Err(files.WithoutPath(err)).Str("file", StateFile).
			Msg("could not save the Discord state; prompts sent while the gateway is down may be missed")
	}
}

func guildString(g discord.GuildID) string {
	if !g.IsValid() {
		return ""
	}
	return g.String()
}
