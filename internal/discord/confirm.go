package discord

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentgateway/gateway/internal/actions"
)

// ConfirmTimeout is how long a destructive action waits for a person.
const ConfirmTimeout = 10 * time.Minute

// confirmPrefix starts the custom_id of a confirmation's buttons:
// "act:<id>:yes" or "act:<id>:no", the id a random key (base 36) into
// Bot.confirms.
const confirmPrefix = "act:"

// confirmGone answers a press on a confirmation that is not open (any
// more) on that message.
const confirmGone = "This confirmation no longer applies (it was answered, it expired, or the gateway restarted); nothing was done."

// Errors of a confirmation that got no answer.
var (
	ErrConfirmExpired = errors.New("nobody confirmed it within 10 minutes")
	ErrConfirmPost    = errors.New("the confirmation could not be posted")
)

// confirmations are the destructive actions waiting for a person.
type confirmations struct {
	mu   sync.Mutex // guards open and each pending message
	open map[uint64]*pendingConfirm
}

type pendingConfirm struct {
	turn actions.Turn
	what string
	// message is the confirmation's message once posted; a press counts
	// only on it.
	message string
	// posted is closed once message is known (or the post failed): a
	// press can arrive before the POST's answer does.
	posted chan struct{}
	answer chan bool
}

// newConfirmID draws an id no open confirmation has. It is random, not a
// counter, so that it does not repeat from one run of the gateway to the
// next: a Confirm a crashed run left on its message cannot answer a new
// confirmation that got the same number. c.mu is held.
func (c *confirmations) newConfirmID() uint64 {
	for {
		var b [8]byte
		rand.Read(b[:])
		id := binary.LittleEndian.Uint64(b[:])
		if _, taken := c.open[id]; id != 0 && !taken {
			return id
		}
	}
}

// Confirm asks, under the event's prompt, whether the agent may do what
// (a destructive action), with Confirm and Cancel buttons only the
// prompt's author or an approver may press, and waits for the answer until
// ConfirmTimeout or ctx ends (actions.Confirmer).
func (b *Bot) Confirm(ctx context.Context, t actions.Turn, what string) (bool, error) {
	c := &b.confirms
	c.mu.Lock()
	if c.open == nil {
		c.open = map[uint64]*pendingConfirm{}
	}
	id := c.newConfirmID()
	p := &pendingConfirm{turn: t, what: what, answer: make(chan bool, 1), posted: make(chan struct{})}
	c.open[id] = p
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.open, id)
		c.mu.Unlock()
	}()

	who := "the person who asked"
	if t.UserID != "" {
		who = "<@" + t.UserID + ">"
	}
	text := fmt.Sprintf("⚠️ The agent wants to **%s**. Only %s or an approver can confirm; this expires in %d minutes.",
		what, who, int(ConfirmTimeout/time.Minute))
	key := confirmPrefix + strconv.FormatUint(id, 36)
	msg, err := b.PostButtons(ctx, t.ChannelID, text, []Button{
		{ID: key + ":yes", Label: "Confirm", Style: ButtonDanger},
		{ID: key + ":no", Label: "Cancel", Style: ButtonSecondary},
	})
	c.mu.Lock()
	p.message = msg
	c.mu.Unlock()
	close(p.posted)
	if err != nil {
		b.log.Warn().Err(err).Str("channel", t.ChannelID).Msg("could not ask for a confirmation; the action is not done")
		return false, ErrConfirmPost
	}
	timer := b.clock.NewTimer(ConfirmTimeout)
	defer timer.Stop()
	select {
	case ok := <-p.answer:
		return ok, nil
	case <-timer.Chan():
		if b.takeConfirm(id) == nil {
			return <-p.answer, nil // a press took it as the timer fired
		}
		b.closeConfirm(t.ChannelID, msg, "⌛ Not done: nobody confirmed that the agent may **"+what+"** within 10 minutes.")
		return false, ErrConfirmExpired
	case <-ctx.Done():
		if b.takeConfirm(id) == nil {
			return <-p.answer, nil
		}
		b.closeConfirm(t.ChannelID, msg, "Not done: the turn that asked to **"+what+"** ended before anyone answered.")
		return false, ctx.Err()
	}
}

// takeConfirm removes an open confirmation; nil when a press has it.
func (b *Bot) takeConfirm(id uint64) *pendingConfirm {
	b.confirms.mu.Lock()
	defer b.confirms.mu.Unlock()
	p := b.confirms.open[id]
	delete(b.confirms.open, id)
	return p
}

// closeConfirm replaces a confirmation nobody answered and removes its
// buttons.
func (b *Bot) closeConfirm(channel, message, text string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.EditMessage(ctx, channel, message, text); err != nil {
		b.log.Debug().Err(err).Msg("could not close the confirmation")
	}
}

// pressConfirm answers a press on Confirm or Cancel: only a press on the
// open confirmation's own message counts (as for approvals), and only the
// prompt's author or an approver decides; anyone else is told so.
func (b *Bot) pressConfirm(ctx context.Context, pr Press) PressAnswer {
	rest := strings.TrimPrefix(pr.ButtonID, confirmPrefix)
	num, verdict, _ := strings.Cut(rest, ":")
	id, err := strconv.ParseUint(num, 36, 64)
	if err != nil || (verdict != "yes" && verdict != "no") {
		return PressAnswer{Notice: confirmGone}
	}
	b.confirms.mu.Lock()
	p := b.confirms.open[id]
	if p != nil && p.message == "" {
		// Pressed before the POST's answer arrived: wait for the message
		// id, to check the press is on this confirmation's message.
		b.confirms.mu.Unlock()
		select {
		case <-p.posted:
		case <-ctx.Done():
		}
		b.confirms.mu.Lock()
		p = b.confirms.open[id]
	}
	if p == nil || p.message == "" || p.message != pr.MessageID || p.turn.ChannelID != pr.ChannelID {
		b.confirms.mu.Unlock()
		b.log.Info().Str("channel", pr.ChannelID).Str("user", pr.UserID).Msg("press on a confirmation that is not open on that message: nothing done")
		return PressAnswer{Notice: confirmGone}
	}
	if pr.UserID != p.turn.UserID && !b.isApprover(pr.UserID, pr.Roles) {
		b.confirms.mu.Unlock()
		return PressAnswer{Notice: "Only the person who asked the agent, or an approver, can answer this."}
	}
	delete(b.confirms.open, id)
	b.confirms.mu.Unlock()
	ok := verdict == "yes"
	p.answer <- ok
	b.log.Info().Str("action", p.what).Bool("confirmed", ok).Str("by", pr.UserID).Msg("destructive action answered")
	text := "✅ Confirmed by <@" + pr.UserID + ">: the agent may **" + p.what + "**."
	if !ok {
		text = "✖️ Cancelled by <@" + pr.UserID + ">: the agent will not **" + p.what + "**."
	}
	return PressAnswer{Update: &text}
}
