package discord

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/diamondburned/arikawa/v3/discord"

	"github.com/agentgateway/gateway/internal/files"
)

// Announce posts a message nobody asked for (ipc.Poster: a file dropped
// into CONFIG_DIR/ipc/outbound): text cut into Discord messages as a reply
// would be, the files attached to the last one, no pings. The files carry
// their bytes (Outgoing.Data), read and checked by the caller as the
// agent could read them: nothing is looked up again here. It returns once
// Discord took every message, or with the error of the first it did not
// take; each message's nonce comes from the announcement's content, so a
// retry after a lost answer does not post it twice.
func (b *Bot) Announce(ctx context.Context, channelID, text string, attached []files.Outgoing) error {
	channel, err := discord.ParseSnowflake(channelID)
	if err != nil {
		return fmt.Errorf("announce: invalid channel id %q", channelID)
	}
	parts := withFiles(planReply(text, b.opts.MaxReplyMessages, b.opts.UploadLimit), attached)
	sum := sha256.New()
	fmt.Fprintf(sum, "%s\x00%s", channelID, text)
	for _, f := range attached {
		fmt.Fprintf(sum, "\x00%s", f.Path)
	}
	key := hex.EncodeToString(sum.Sum(nil))[:12]
	for i, p := range parts {
		nonce := b.noncePrefix + "a" + key + strconv.Itoa(i)
		if _, err := b.post(ctx, discord.ChannelID(channel), 0, p, nonce); err != nil {
			return fmt.Errorf("announce in channel %s, message %d of %d: %w", channelID, i+1, len(parts), err)
		}
	}
	return nil
}
