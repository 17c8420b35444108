package discord

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/diamondburned/arikawa/v3/discord"

	"github.com/agentgateway/gateway/internal/queue"
)

// Elsewhere passes on what concerns a turn this process does not run,
// when turns run on other processes (NATS_URL with `gateway worker`s): the
// press of a turn's button, a 🛑, /claude-stop. The bot holding the
// Discord connection still answers the interaction within Discord's 3 s;
// the process running the turn decides and acts.
type Elsewhere interface {
	// Press passes on the press of a turn's button (Stop, an approval);
	// ok is false when no process answered (the turn is over).
	Press(ctx context.Context, p Press) (a PressAnswer, ok bool)
	// Stop passes on a stop of the lane's running turn by user; with all,
	// the lane's waiting events are dropped too. It reports whether a turn
	// was running and how many prompts were dropped.
	Stop(ctx context.Context, lane, user string, all bool) (running bool, dropped int)
	// Reaction passes on a 🛑 on message in channel by user.
	Reaction(ctx context.Context, channel, message, user string)
	// Started reports whether event id's turn has started somewhere (or
	// is over): its ⏳, placed after that, must go.
	Started(ctx context.Context, id uint64) bool
}

// ErrTakenOver is what DeliveryLog.Replied returns (wrapped) when another
// process took the event over (its deadline passed while this one was
// cut off from NATS): that process answers it, and this one posts nothing.
var ErrTakenOver = errors.New("another process took the event over")

// turnButton reports whether a button belongs to a running turn (its
// card's Stop, an approval), the presses Elsewhere passes on.
func turnButton(id string) bool {
	return strings.HasPrefix(id, stopButton) || strings.HasPrefix(id, stopAllButton) || strings.HasPrefix(id, approvalButton)
}

// PressHere answers the press of a turn's button when this process runs
// that turn or holds that approval (a press another process passed on);
// ok is false otherwise, and nothing changed.
func (b *Bot) PressHere(ctx context.Context, p Press) (a PressAnswer, ok bool) {
	if !turnButton(p.ButtonID) || !b.holdsPress(p) {
		return PressAnswer{}, false
	}
	_, h := b.buttons.route(p.ButtonID)
	if h == nil {
		return PressAnswer{}, false
	}
	return h(ctx, p), true
}

// holdsPress reports whether the turn or approval a press is about is
// here.
func (b *Bot) holdsPress(p Press) bool {
	if strings.HasPrefix(p.ButtonID, approvalButton) {
		idText, _, _ := strings.Cut(strings.TrimPrefix(p.ButtonID, approvalButton), ":")
		b.approvals.mu.Lock()
		defer b.approvals.mu.Unlock()
		for id, pa := range b.approvals.open {
			if idText == uintText(id) && pa.channel == p.ChannelID {
				return true
			}
		}
		return false
	}
	idText := strings.TrimPrefix(strings.TrimPrefix(p.ButtonID, stopAllButton), stopButton)
	b.mu.Lock()
	defer b.mu.Unlock()
	for id, t := range b.turns {
		if idText == uintText(id) && t.channel.String() == p.ChannelID {
			return true
		}
	}
	return false
}

// StopHere stops the lane's running turn when this process runs it and
// user may stop it (a stop another process passed on); with all, the
// lane's events waiting here are dropped too. It reports whether it
// stopped a turn.
func (b *Bot) StopHere(lane, user string, all bool) bool {
	running, ok, _ := b.intake.Lane(lane)
	if !ok || !b.mayStop(user, running) {
		return false
	}
	if t := b.turnOf(running.ID); t != nil {
		return b.stopTurn(t, user, all)
	}
	return b.intake.Cancel(lane, running.ID)
}

// ReactionHere takes a 🛑 another process passed on, as if it had come
// over this process's own connection.
func (b *Bot) ReactionHere(channel, message, user string) {
	ch, err1 := discord.ParseSnowflake(channel)
	msg, err2 := discord.ParseSnowflake(message)
	u, err3 := discord.ParseSnowflake(user)
	if err1 != nil || err2 != nil || err3 != nil {
		return
	}
	if t := b.turnByMessage(discord.ChannelID(ch), discord.MessageID(msg)); t != nil && b.mayStop(user, t.e) {
		go b.stopTurn(t, discord.UserID(u).String(), false)
	}
}

// Attach readies a bot that never connects to Discord's gateway (`gateway
// worker`): it posts replies, cards, approvals and notices over REST
// only, and learns its own user from REST. Prompts, presses and stops
// reach it from the process that holds the connection (Elsewhere).
func (b *Bot) Attach(ctx context.Context, intake Intake, sessions SessionResetter) error {
	b.intake, b.sessions = intake, sessions
	me, err := b.client(ctx).Me()
	if err != nil {
		if u := restUnreachable(err, b.opts.APIBaseURL); u != nil {
			return fmt.Errorf("read the bot's own user over REST: %w", u)
		}
		return fmt.Errorf("read the bot's own user over REST: %w", fatal(err))
	}
	b.botID.Store(uint64(me.ID))
	return nil
}

// unmarkWaiting removes the ⏳ the intake placed on e's prompt, when the
// intake is another process and kept no mark for it. Discord ignores the
// removal of a reaction that is not there.
func (b *Bot) unmarkWaiting(e queue.Event) {
	if e.Source != Source || e.Kind != queue.KindMessage {
		return
	}
	msg := parseMessage(e.ReplyTo)
	if !msg.IsValid() {
		return
	}
	if err := b.client(b.ctx).Unreact(promptChannel(e), msg, waitingEmoji); err != nil {
		b.log.Debug().Err(err).Uint64("event", e.ID).Msg("could not remove the waiting mark")
	}
}

func uintText(n uint64) string { return strconv.FormatUint(n, 10) }

// adoptInteraction takes over the slash command another process received
// (e.Interaction), so that this process answers it as if it had: the
// card, the answer and the notices go to the command's response. The
// command's process responds to Discord first; the response is awaited
// (polled for at most adoptWait) before anything edits it.
func (b *Bot) adoptInteraction(e queue.Event) {
	if e.Interaction == nil || !strings.HasPrefix(e.ReplyTo, "interaction:") {
		return
	}
	app, err := discord.ParseSnowflake(e.Interaction.App)
	if err != nil || !b.clock.Now().Before(e.Interaction.Expires) {
		return
	}
	now := b.clock.Now()
	b.mu.Lock()
	for key, expires := range b.adopted {
		if !now.Before(expires) {
			delete(b.adopted, key)
		}
	}
	if _, ok := b.interactions[e.ReplyTo]; ok || !b.adopted[e.ReplyTo].IsZero() {
		b.mu.Unlock()
		return
	}
	if b.adopted == nil {
		b.adopted = map[string]time.Time{}
	}
	b.adopted[e.ReplyTo] = e.Interaction.Expires // once: after the answer it is gone for good
	in := &interaction{app: discord.AppID(app), token: e.Interaction.Token, channel: parseChannel(e.ChannelID),
		expires: e.Interaction.Expires, acked: make(chan struct{})}
	if e.ReplyIn != "" {
		in.channel = parseChannel(e.ReplyIn)
	}
	b.interactions[e.ReplyTo] = in
	b.mu.Unlock()
	go func() {
		defer close(in.acked)
		deadline := b.clock.Now().Add(adoptWait)
		for {
			if _, err := b.client(b.ctx).InteractionResponse(in.app, in.token); err == nil {
				return
			}
			if !b.clock.Now().Before(deadline) {
				return
			}
			select {
			case <-b.ctx.Done():
				return
			case <-b.clock.After(50 * time.Millisecond):
			}
		}
	}()
}

// adoptWait bounds the wait for the command's process to respond.
const adoptWait = 3 * time.Second
