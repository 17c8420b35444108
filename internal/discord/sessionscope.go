package discord

import "github.com/agentgateway/gateway/internal/queue"

// Notices of /claude-reset when each person has their own session.
const (
	resetOwnNotice  = "Started a new conversation for you: your next prompt in this channel begins a fresh session. Other people's conversations here go on."
	resetOwnNothing = "You had no conversation to reset in this channel; your next prompt begins a fresh session."
)

// UserSessionKey is the session key (queue.Event.SessionKey) of user's
// own conversation in channel, when each person has their own session
// (SESSION_SCOPE=user).
func UserSessionKey(channel, user string) string { return channel + "/" + user }

// SessionKeyOf is the session binding a prompt of user in channel
// continues: the channel's, or with UserSessions the user's own there. A
// direct message has one person in it: its session is the channel's.
func (b *Bot) SessionKeyOf(channel, guild, user string) string {
	if !b.opts.UserSessions || guild == "" || user == "" {
		return channel
	}
	return UserSessionKey(channel, user)
}

// ScopeSession returns e with the session key of the channel it runs in,
// for a person's prompt when sessions are per user: the gateway calls it
// after PrepareThread, since a prompt that opens a thread moves to it
// after intake (or back, when the thread could not be opened). Other
// events, scheduled runs and the answers to their questions among them,
// come back as they are: they keep the channel's session rules.
func (b *Bot) ScopeSession(e queue.Event) queue.Event {
	b.scopeSession(&e)
	return e
}

func (b *Bot) scopeSession(e *queue.Event) {
	if e.Source != Source || e.Kind != queue.KindMessage || e.Scheduled() || e.ChannelID == "" {
		return
	}
	if key := b.SessionKeyOf(e.ChannelID, e.GuildID, e.UserID); key != e.ChannelID {
		e.SessionKey = key
	}
}

// SetPromptMark has mark applied to every prompt from Discord before it
// goes to the intake (messages, slash prompts, reaction answers, prompts
// kept during a shutdown): /plan marks the channel's next prompt this way.
// The undo mark returns, if not nil, is called when the intake refused the
// prompt. Set it before Open.
func (b *Bot) SetPromptMark(mark func(e *queue.Event) (undo func())) {
	b.mark = mark
}

// markPrompt applies the prompt mark to e and returns its undo, never nil.
func (b *Bot) markPrompt(e *queue.Event) (undo func()) {
	if b.mark != nil {
		if undo := b.mark(e); undo != nil {
			return undo
		}
	}
	return func() {}
}
