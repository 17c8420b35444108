package discord

import (
	"time"

	"github.com/diamondburned/arikawa/v3/discord"

	"github.com/agentgateway/gateway/internal/queue"
)

// "Send now" on a prompt waiting behind its channel's running turn
// (STEER=queue): a prompt still waiting after SendNowDelay gets a ⏩
// reaction next to ⏳; when its author clicks it, the running turn is
// stopped (softly, for claude: its warm process stays) and the prompt runs
// next. A reaction rather than a message with a button: a message per
// waiting prompt would fill a busy channel, and 🛑 already works the same
// way. The delay keeps the offer off prompts that wait a moment only: a
// busy gateway would otherwise spend two more reaction calls on each.
const sendNowEmoji = "⏩"

// SendNowDelay is how long a prompt waits before it is offered Send now.
const SendNowDelay = 3 * time.Second

// promoter is the Intake's optional ability to run a waiting event next.
type promoter interface {
	Promote(lane string, id uint64) bool
}

// canSendNow reports whether waiting prompts are offered Send now.
func (b *Bot) canSendNow() bool {
	_, ok := b.intake.(promoter)
	return b.opts.SendNow && ok
}

// offerSendNow places ⏩ on a prompt that has waited SendNowDelay, unless
// it started or was dropped meanwhile. It runs when mk.offer fires.
func (b *Bot) offerSendNow(mk *mark) {
	defer close(mk.offered)
	<-mk.placed // ⏳ first
	b.mu.Lock()
	select {
	case <-mk.gone:
		b.mu.Unlock()
		return
	default:
	}
	mk.sendNow = true
	b.mu.Unlock()
	if err := b.client(b.ctx).React(mk.channel, mk.message, sendNowEmoji); err != nil {
		b.log.Debug().Err(err).Msg("could not offer Send now")
	}
}

// leftLocked marks mk as gone from Bot.marks (b.mu held): an offer not yet
// made is called off.
func (mk *mark) leftLocked() {
	close(mk.gone)
	if mk.offer != nil && mk.offer.Stop() {
		close(mk.offered) // offerSendNow will not run
	}
}

// unmark removes a prompt's waiting reactions (⏳, and ⏩ if offered),
// once they are placed.
func (b *Bot) unmark(mk *mark) {
	<-mk.placed
	<-mk.offered
	if err := b.client(b.ctx).Unreact(mk.channel, mk.message, waitingEmoji); err != nil {
		b.log.Debug().Err(err).Str("channel", mk.channel.String()).Msg("could not remove the waiting mark")
	}
	b.mu.Lock()
	offered := mk.sendNow
	b.mu.Unlock()
	if offered {
		if err := b.client(b.ctx).Unreact(mk.channel, mk.message, sendNowEmoji); err != nil {
			b.log.Debug().Err(err).Str("channel", mk.channel.String()).Msg("could not remove the Send now offer")
		}
	}
}

// sendNowReaction takes a ⏩ on a waiting prompt: if user sent it and may
// stop the running turn, the prompt runs next and the turn is stopped.
// Anyone else's ⏩ is removed, so that it does not look like it worked.
func (b *Bot) sendNowReaction(channel discord.ChannelID, message discord.MessageID, user string) {
	var event uint64
	b.mu.Lock()
	for id, mk := range b.marks {
		if mk.channel == channel && mk.message == message && mk.sendNow {
			event = id
		}
	}
	b.mu.Unlock()
	if event == 0 {
		return
	}
	if !b.sendNow(channel.String(), event, user) {
		uid, err := discord.ParseSnowflake(user)
		if err == nil {
			_ = b.client(b.ctx).DeleteUserReaction(channel, message, discord.UserID(uid), sendNowEmoji)
		}
	}
}

// sendNow promotes waiting event id in channel's lane and stops the turn
// running there, when user may.
func (b *Bot) sendNow(channel string, id uint64, user string) bool {
	running, busy, waiting := b.intake.Lane(channel)
	var e *queue.Event
	for i := range waiting {
		if waiting[i].ID == id {
			e = &waiting[i]
		}
	}
	if e == nil {
		return false
	}
	if user != e.UserID && !b.opts.Access.ListedUser(user) || busy && !b.mayStop(user, running) {
		b.log.Info().Uint64("event", id).Str("user", user).Msg("Send now refused: not the prompt's author, or may not stop the running turn")
		return false
	}
	pr, ok := b.intake.(promoter)
	if !ok || !pr.Promote(channel, id) {
		return false
	}
	b.log.Info().Uint64("event", id).Uint64("stopped", running.ID).Str("by", user).Msg("Send now: the waiting prompt runs next")
	if busy {
		if t := b.turnOf(running.ID); t != nil {
			b.stopTurn(t, user, false)
		} else {
			b.intake.Cancel(channel, running.ID)
		}
	}
	return true
}
