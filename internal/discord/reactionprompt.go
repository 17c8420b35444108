package discord

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/diamondburned/arikawa/v3/gateway"

	"github.com/agentgateway/gateway/internal/actions"
	"github.com/agentgateway/gateway/internal/queue"
)

// ReactionPromptTTL is how long a reaction prompt waits for its answer.
const ReactionPromptTTL = 24 * time.Hour

// reactionPrompts are the questions waiting for a reaction, by message.
type reactionPrompts struct {
	mu   sync.Mutex
	open map[discord.MessageID]*reactionPrompt
}

type reactionPrompt struct {
	channel  discord.ChannelID
	guild    string
	question string
	emoji    []string
	// asker may answer; empty means anyone allowed in the channel (the
	// question came from a scheduled run).
	asker   string
	expires time.Time
}

// AskWithReactions posts question with one reaction per emoji (2-9, plain
// Unicode emoji) and, when the person who sent the prompt reacts with one
// of them, queues that answer as a new prompt in the channel: the agent
// takes it up as a new turn (actions.Reactions). Questions are kept in
// memory for ReactionPromptTTL; a restart forgets them.
func (b *Bot) AskWithReactions(ctx context.Context, t actions.Turn, channelID, question string, emoji []string) (string, error) {
	for _, e := range emoji {
		if e == "" || strings.ContainsAny(e, "<>:") || len(e) > 32 {
			return "", fmt.Errorf("%q is not a plain emoji", e)
		}
	}
	ch, err := parseID("channel", channelID)
	if err != nil {
		return "", err
	}
	text := "❓ " + question + "\n-# React with " + strings.Join(emoji, " ") + " to answer."
	msgID, err := b.Send(ctx, channelID, text, nil)
	if err != nil {
		return "", err
	}
	id, _ := parseID("message", msgID)
	b.questions.mu.Lock()
	if b.questions.open == nil {
		b.questions.open = map[discord.MessageID]*reactionPrompt{}
	}
	now := b.clock.Now()
	for mid, q := range b.questions.open {
		if now.After(q.expires) {
			delete(b.questions.open, mid)
		}
	}
	b.questions.open[discord.MessageID(id)] = &reactionPrompt{channel: discord.ChannelID(ch), guild: t.GuildID,
		question: question, emoji: emoji, asker: t.UserID, expires: now.Add(ReactionPromptTTL)}
	b.questions.mu.Unlock()
	for _, e := range emoji {
		if err := b.client(ctx).React(discord.ChannelID(ch), discord.MessageID(id), discord.APIEmoji(e)); err != nil {
			return msgID, fmt.Errorf("add the reaction %s: %w", e, err)
		}
	}
	return msgID, nil
}

// reactionAnswer takes a reaction to an open question: the answer becomes
// a prompt in the channel. It reports whether the reaction was one.
func (b *Bot) reactionAnswer(ev *gateway.MessageReactionAddEvent) bool {
	b.questions.mu.Lock()
	q := b.questions.open[ev.MessageID]
	if q == nil || ev.ChannelID != q.channel || !slices.Contains(q.emoji, ev.Emoji.Name) {
		b.questions.mu.Unlock()
		return q != nil
	}
	user := ev.UserID.String()
	if (q.asker != "" && user != q.asker) || !b.allowed(ev.UserID, ev.ChannelID, ev.GuildID) {
		b.questions.mu.Unlock()
		return true
	}
	delete(b.questions.open, ev.MessageID)
	b.questions.mu.Unlock()
	name := user
	if ev.Member != nil {
		name = displayName(ev.Member.User, ev.Member)
	}
	e := queue.Event{
		Kind: queue.KindMessage, Source: Source, ChannelID: ev.ChannelID.String(), GuildID: q.guild,
		Text:   fmt.Sprintf("[Answer to your question %q: %s reacted %s]", q.question, name, ev.Emoji.Name),
		UserID: user, Author: name, ReplyTo: ev.MessageID.String(),
		Key: "reaction:" + ev.MessageID.String(),
	}
	if _, err := b.intake.Enqueue(e); err != nil {
		b.log.Warn().Err(err).Str("channel", e.ChannelID).Msg("the answer to a reaction prompt was not queued")
		return true
	}
	b.log.Info().Str("channel", e.ChannelID).Str("emoji", ev.Emoji.Name).Msg("reaction prompt answered")
	return true
}
