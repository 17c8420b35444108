package discord

import (
	"github.com/diamondburned/arikawa/v3/api"
	"github.com/diamondburned/arikawa/v3/discord"

	"github.com/agentgateway/gateway/internal/queue"
)

// doneMention is the author a turn's answer pings because the turn ran
// longer than NotifyAfter (NOTIFY_AFTER): whoever asked for a long task
// hears when it is done. It is zero when NotifyAfter is off, for a short
// turn, and for events without an author to tell (scheduled runs, the
// answers to their questions). The turn's time runs from its start, not
// from the prompt: the wait in the queue is not the task's.
func (b *Bot) doneMention(e queue.Event) discord.UserID {
	if b.opts.NotifyAfter <= 0 || e.UserID == "" || e.Scheduled() {
		return 0
	}
	t := b.turnOf(e.ID)
	if t == nil || b.clock.Since(t.started) <= b.opts.NotifyAfter {
		return 0
	}
	id, err := discord.ParseSnowflake(e.UserID)
	if err != nil || !id.IsValid() {
		return 0
	}
	return discord.UserID(id)
}

// mentioning puts user's mention in front of an answer: a done
// notification shows who it is for.
func mentioning(user discord.UserID, text string) string {
	if text == "" {
		return user.Mention()
	}
	return user.Mention() + " " + text
}

// replyMentions are the allowed mentions of a reply's message: nobody,
// except the prompt's author through the reply itself (repliedUser) and,
// for a done notification, user (nonzero): the agent's own mentions of
// roles, @everyone or other users never ping.
func replyMentions(repliedUser bool, user discord.UserID) *api.AllowedMentions {
	am := noPings(repliedUser)
	if user.IsValid() {
		am.Users = []discord.UserID{user}
	}
	return am
}
