package gateway

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/discord"
	"github.com/agentgateway/gateway/internal/queue"
)

// Answers to a Retry press.
const (
	retryGone     = "This prompt is no longer kept; send it again."
	retryNotYours = "Only the person who sent this prompt (or an approver) can retry it."
	retryAgain    = "This prompt was retried already."
	retryBusy     = "Too much is waiting right now; press Retry again in a minute."
	retryDown     = "The gateway is shutting down; press Retry again once it is back."
)

// retrier runs an interrupted prompt again when its Retry button is
// pressed (see resumer). A prompt is retried at most once: the new event's
// key is derived from the old one's id.
type retrier struct {
	in      Inbox
	enqueue func(queue.Event) (queue.Receipt, error)
	// approvers and approverRoles may retry anyone's prompt
	// (APPROVER_IDS, APPROVER_ROLE_IDS).
	approvers     []string
	approverRoles []string
	log           zerolog.Logger
}

func (r *retrier) press(_ context.Context, p discord.Press) discord.PressAnswer {
	id, err := strconv.ParseUint(strings.TrimPrefix(p.ButtonID, discord.RetryPrefix), 10, 64)
	if err != nil {
		return discord.PressAnswer{Notice: retryGone}
	}
	en, ok := r.in.Get(id)
	if !ok {
		return discord.PressAnswer{Notice: retryGone}
	}
	if p.UserID != en.Event.UserID && !slices.Contains(r.approvers, p.UserID) && !holdsAny(p.Roles, r.approverRoles) {
		return discord.PressAnswer{Notice: retryNotYours}
	}
	e := en.Event
	e.ID, e.Lane = 0, ""
	e.Key = "retry:" + strconv.FormatUint(id, 10)
	rcpt, err := r.enqueue(e)
	var full *queue.FullError
	switch {
	case errors.Is(err, queue.ErrDuplicate):
		return discord.PressAnswer{Notice: retryAgain}
	case errors.As(err, &full):
		return discord.PressAnswer{Notice: retryBusy}
	case err != nil:
		r.log.Warn().Err(err).Uint64("event", id).Msg("retry not queued")
		return discord.PressAnswer{Notice: retryDown}
	}
	r.log.Info().Uint64("event", id).Uint64("retry", rcpt.Event.ID).Str("user", p.UserID).Msg("interrupted prompt retried")
	text := "↻ Retried by <@" + p.UserID + ">: the prompt runs again from the start."
	return discord.PressAnswer{Update: &text}
}
