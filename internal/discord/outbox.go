package discord

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/diamondburned/arikawa/v3/api"
	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/diamondburned/arikawa/v3/utils/httputil"
	"github.com/diamondburned/arikawa/v3/utils/json/option"

	"github.com/agentgateway/gateway/internal/queue"
	"github.com/agentgateway/gateway/internal/reply"
)

// noPings allows no mention to ping: not @everyone, not roles, not users
// named in the agent's text (DESIGN 8). Only the user a reply answers is
// notified, which is the gateway's intent, not the agent's.
func noPings(repliedUser bool) *api.AllowedMentions {
	return &api.AllowedMentions{Parse: []api.AllowedMentionType{}, RepliedUser: &repliedUser}
}

// messageCreate is the body of POST /channels/{id}/messages. arikawa's
// SendMessageData has no enforce_nonce: with it Discord answers a repeated
// nonce with the message it already created, so a send retried after an
// ambiguous failure (a 5xx, a dropped connection) posts at most once.
type messageCreate struct {
	Content          string               `json:"content"`
	Nonce            string               `json:"nonce"`
	EnforceNonce     bool                 `json:"enforce_nonce"`
	AllowedMentions  *api.AllowedMentions `json:"allowed_mentions"`
	MessageReference *messageReference    `json:"message_reference,omitempty"`
}

type messageReference struct {
	MessageID discord.MessageID `json:"message_id"`
	// FailIfNotExists false lets the reply through when the prompt was
	// deleted meanwhile.
	FailIfNotExists bool `json:"fail_if_not_exists"`
}

// client is the REST client bound to ctx.
func (b *Bot) client(ctx context.Context) *api.Client {
	return b.state.Client.WithContext(ctx)
}

// Started is told that an event begins to run: it removes the prompt's
// waiting mark and keeps the typing indicator alive until the returned
// function is called or the reply is sent. Slash commands show Discord's
// own "thinking" state instead.
func (b *Bot) Started(ctx context.Context, e queue.Event) (finished func()) {
	b.mu.Lock()
	mk := b.marks[e.ID]
	delete(b.marks, e.ID)
	b.mu.Unlock()
	if mk != nil {
		go func() {
			<-mk.placed
			if err := b.client(b.ctx).Unreact(mk.channel, mk.message, waitingEmoji); err != nil {
				b.log.Debug().Err(err).Str("channel", mk.channel.String()).Msg("could not remove the waiting mark")
			}
		}()
	}
	if strings.HasPrefix(e.ReplyTo, "interaction:") {
		// A slash command that ends without a reply (stopped on request)
		// must still leave Discord's "thinking" state.
		return func() {
			if in := b.takeInteraction(e.ReplyTo); in != nil {
				go b.answerInteraction(b.ctx, in, []string{stoppedNotice})
			}
		}
	}
	channel, err := discord.ParseSnowflake(e.ChannelID)
	if err != nil || e.Kind != queue.KindMessage || e.Source != Source {
		return func() {}
	}
	tctx, cancel := context.WithCancel(b.ctx)
	b.mu.Lock()
	b.typing[e.ID] = cancel
	b.mu.Unlock()
	go b.keepTyping(tctx, discord.ChannelID(channel))
	return func() { b.stopTyping(e.ID) }
}

func (b *Bot) stopTyping(event uint64) {
	b.mu.Lock()
	cancel := b.typing[event]
	delete(b.typing, event)
	b.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// keepTyping renews the typing indicator, which Discord shows for about
// ten seconds, until ctx ends.
func (b *Bot) keepTyping(ctx context.Context, channel discord.ChannelID) {
	t := time.NewTicker(b.opts.TypingInterval)
	defer t.Stop()
	for {
		if err := b.client(ctx).Typing(channel); err != nil && ctx.Err() == nil {
			b.log.Debug().Err(err).Str("channel", channel.String()).Msg("typing indicator failed")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Reply delivers an event's answer: split at Discord's limit with code
// blocks kept well-formed, the first chunk as a reply to the prompt, and
// no pings. A slash command's answer replaces its "thinking" response.
func (b *Bot) Reply(ctx context.Context, e queue.Event, text string) error {
	b.stopTyping(e.ID)
	channel, err := discord.ParseSnowflake(e.ChannelID)
	if err != nil {
		return fmt.Errorf("reply to event %d: invalid channel id %q", e.ID, e.ChannelID)
	}
	chunks := reply.Split(text, reply.DiscordLimit)
	if len(chunks) == 0 {
		return nil
	}
	if in := b.takeInteraction(e.ReplyTo); in != nil {
		sent := b.answerInteraction(ctx, in, chunks)
		if sent == len(chunks) {
			return nil
		}
		// The interaction token expired or Discord refused it: post the
		// rest in the channel rather than lose it.
		chunks, e.ReplyTo = chunks[sent:], ""
	}
	var ref discord.MessageID
	if id, err := discord.ParseSnowflake(e.ReplyTo); err == nil {
		ref = discord.MessageID(id)
	}
	for i, chunk := range chunks {
		if err := b.deliver(ctx, discord.ChannelID(channel), ref, chunk, b.nonce(e.ID, i)); err != nil {
			return fmt.Errorf("chunk %d of %d (%d bytes): %w", i+1, len(chunks), len(chunk), err)
		}
		ref = 0
	}
	return nil
}

func (b *Bot) takeInteraction(key string) *interaction {
	if !strings.HasPrefix(key, "interaction:") {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	in := b.interactions[key]
	delete(b.interactions, key)
	return in
}

// answerInteraction edits the deferred response with the first chunk and
// posts the rest as follow-ups. It returns how many chunks were delivered.
func (b *Bot) answerInteraction(ctx context.Context, in *interaction, chunks []string) int {
	select {
	case <-in.acked:
	case <-ctx.Done():
		return 0
	}
	if time.Now().After(in.expires) {
		return 0
	}
	c := b.client(ctx)
	for i, chunk := range chunks {
		var err error
		if i == 0 {
			_, err = c.EditInteractionResponse(in.app, in.token, api.EditInteractionResponseData{
				Content:         option.NewNullableString(chunk),
				AllowedMentions: noPings(false),
			})
		} else {
			_, err = c.FollowUpInteraction(in.app, in.token, api.InteractionResponseData{
				Content:         option.NewNullableString(chunk),
				AllowedMentions: noPings(false),
			})
		}
		if err != nil {
			b.log.Warn().Str("error", scrub(err, in.token)).Str("channel", in.channel.String()).
				Int("length", len(chunk)).Msg("slash command answer refused; posting in the channel")
			return i
		}
	}
	return len(chunks)
}

// deliver sends one message, retrying with backoff while Discord fails in a
// way that may pass (5xx, network). The nonce makes the retries safe.
func (b *Bot) deliver(ctx context.Context, channel discord.ChannelID, ref discord.MessageID, content, nonce string) error {
	var err error
	for try := 0; try < b.opts.DeliveryAttempts; try++ {
		if try > 0 {
			wait := b.opts.DeliveryBackoff << (try - 1)
			b.log.Warn().Err(err).Str("channel", channel.String()).Int("length", len(content)).
				Dur("retry_in", wait).Msg("Discord refused a message; retrying")
			if serr := sleep(ctx, wait); serr != nil {
				return errors.Join(err, serr)
			}
		}
		if err = b.send(ctx, channel, ref, content, nonce); err == nil || !retryable(err) {
			return err
		}
	}
	return err
}

// send posts one message with an enforced nonce and no pings.
func (b *Bot) send(ctx context.Context, channel discord.ChannelID, ref discord.MessageID, content, nonce string) error {
	body := messageCreate{
		Content:         content,
		Nonce:           nonce,
		EnforceNonce:    true,
		AllowedMentions: noPings(ref.IsValid()),
	}
	if ref.IsValid() {
		body.MessageReference = &messageReference{MessageID: ref}
	}
	var msg discord.Message
	return b.client(ctx).RequestJSON(&msg, "POST", api.EndpointChannels+channel.String()+"/messages",
		httputil.WithJSONBody(body))
}

// retryable reports whether a failed send may succeed later.
func retryable(err error) bool {
	var herr *httputil.HTTPError
	if errors.As(err, &herr) {
		return herr.Status >= 500 || herr.Status == 429
	}
	var rerr httputil.RequestError
	return errors.As(err, &rerr)
}

// scrub removes an interaction token (it appears in webhook URLs) from an
// error before it is logged.
func scrub(err error, token string) string {
	if token == "" {
		return err.Error()
	}
	return strings.ReplaceAll(err.Error(), token, "<token>")
}
