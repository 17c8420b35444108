package discord

import (
	"github.com/diamondburned/arikawa/v3/discord"

	"github.com/agentgateway/gateway/internal/queue"
)

// Unanswered is told about a prompt the gateway accepted and then stopped
// without answering: a shutdown that could not wait killed its turn or
// dropped it from the queue. The saved state then resumes the channel just
// before it, so the next start fetches it, and what followed it, again and
// answers it. Within a channel prompts run in order, so nothing after the
// oldest unanswered prompt has been answered either. Slash commands cannot
// be fetched again; they are only logged.
func (b *Bot) Unanswered(e queue.Event) {
	if e.Source != Source || e.Kind != queue.KindMessage {
		return
	}
	log := b.log.With().Uint64("event", e.ID).Str("channel", e.ChannelID).Logger()
	channel, cerr := discord.ParseSnowflake(e.ChannelID)
	message, merr := discord.ParseSnowflake(e.ReplyTo)
	if cerr != nil || merr != nil {
		log.Warn().Msg("a slash command was not answered before the gateway stopped; it cannot be taken up again")
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.unanswered == nil {
		b.unanswered = map[discord.ChannelID]discord.MessageID{}
	}
	ch, id := discord.ChannelID(channel), discord.MessageID(message)
	if first, ok := b.unanswered[ch]; !ok || id < first {
		b.unanswered[ch] = id
	}
	b.dirty = true
	log.Info().Str("message", e.ReplyTo).Msg("prompt not answered before the gateway stopped: the next start answers it")
}
