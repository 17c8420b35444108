package discord

import (
	"context"
	"fmt"
	"strconv"

	"github.com/diamondburned/arikawa/v3/discord"

	"github.com/agentgateway/gateway/internal/queue"
)

// RetryPrefix starts the id of a notice's Retry button: RetryPrefix
// followed by the event's id.
const RetryPrefix = "retry:"

// Notify posts a gateway notice about event e in its channel, answering
// its prompt when it came from a message, with a Retry button when retry is
// set. The notice's nonce is derived from the event and tag (one letter per
// kind of notice), so posting it again for the same event (a restart in
// between) shows it once while Discord remembers the nonce. An event
// without a channel only logs.
func (b *Bot) Notify(ctx context.Context, e queue.Event, tag, text string, retry bool) error {
	channel, ref := noticePlace(e)
	if !channel.IsValid() {
		b.log.Info().Uint64("event", e.ID).Str("notice", text).Msg("notice about an event without a channel")
		return nil
	}
	body := messageCreate{
		Content:         text,
		Nonce:           fmt.Sprintf("%s%s%d", b.noncePrefix, tag, e.ID),
		EnforceNonce:    true,
		AllowedMentions: noPings(false),
	}
	if ref.IsValid() {
		body.MessageReference = &messageReference{MessageID: ref}
		body.AllowedMentions = noPings(true)
	}
	if retry {
		row, err := buttonRow(text, []Button{{ID: RetryPrefix + strconv.FormatUint(e.ID, 10), Label: "Retry", Style: ButtonPrimary}})
		if err != nil {
			return err
		}
		body.Components = row
	}
	if _, err := b.postMessage(ctx, discord.Snowflake(channel), body); err != nil {
		return fmt.Errorf("notice in channel %s: %w", e.ChannelID, err)
	}
	return nil
}
