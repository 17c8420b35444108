package discord

import (
	"strconv"

	"github.com/agentgateway/gateway/internal/card"
	"github.com/agentgateway/gateway/internal/limit"
	"github.com/agentgateway/gateway/internal/queue"
)

// Limited implements agent.LimitWatcher: the card of a prompt that waits
// for the login's usage limit to reset says so at once, with a Cancel
// button, until the wait is over (n nil).
func (b *Bot) Limited(e queue.Event, n *limit.Notice) {
	if t := b.turnOf(e.ID); t != nil {
		t.limited(n)
	}
}

// limited shows (or clears) the turn's wait for a usage limit. A wait
// that ends while the turn is being stopped was cancelled: its receipt
// says so.
func (t *turn) limited(n *limit.Notice) {
	t.mu.Lock()
	if n == nil && t.waiting != nil && t.stopping {
		t.cancelledAt = t.waiting.Limit.ResetAt
	}
	t.waiting = nil
	if n != nil {
		w := *n
		t.waiting = &w
	}
	t.mu.Unlock()
	if n != nil {
		// A wait is news at once, not after CardDelay.
		select {
		case t.show <- struct{}{}:
		default:
		}
	}
	t.refresh()
}

// shownLocked is the card's state as shown: while the turn waits for a
// usage limit, its first lines say until when. t.mu must be held.
func (t *turn) shownLocked() card.State {
	st := t.state
	if t.waiting == nil || t.stopping {
		return st
	}
	st.Header = card.LimitHeader(t.waiting.Limit.ResetAt, t.waiting.Own)
	st.Notice = card.LimitNote
	st.Retry = "" // the CLI's retries ended with the limit
	return st
}

// cancelButton is the card's one button while the turn waits for a usage
// limit: it stops the turn like Stop (the same key and the same check of
// who pressed it), in the words of a wait.
func cancelButton(event uint64) []Button {
	return []Button{{ID: stopButton + strconv.FormatUint(event, 10), Label: "Cancel", Style: ButtonDanger}}
}

// cancellableBy reports whether the press may cancel the turn as an
// approver may (APPROVER_IDS, APPROVER_ROLE_IDS): while it waits for a
// usage limit, the approvers may cancel anyone's prompt.
func (t *turn) cancellableBy(p Press) bool {
	t.mu.Lock()
	waiting := t.waiting != nil
	t.mu.Unlock()
	return waiting && t.b.isApprover(p.UserID, p.Roles)
}

// buttonsLocked are the card's buttons now. t.mu must be held.
func (t *turn) buttonsLocked() []Button {
	if t.waiting != nil {
		return cancelButton(t.e.ID)
	}
	return stopButtons(t.e.ID)
}
