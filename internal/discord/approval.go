package discord

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/diamondburned/arikawa/v3/api"
	"github.com/diamondburned/arikawa/v3/discord"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/agent"
	"github.com/agentgateway/gateway/internal/card"
	"github.com/agentgateway/gateway/internal/queue"
)

// Approval buttons: "appr:<id>:<answer>", the id a key into Bot.approvals.
const (
	approvalButton   = "appr:"
	answerAllow      = "a"
	answerSession    = "s"
	answerDeny       = "d"
	answerDenyStop   = "x"
	notYourApproval  = "Only the person who asked, or an approver (APPROVER_IDS or APPROVER_ROLE_IDS), can answer this."
	approvalGone     = "This approval is no longer open."
	approvalPostFail = "could not post the tool approval; the tool is denied"
)

// DefaultApprovalTimeout is how long an approval waits when
// Options.ApprovalTimeout is zero.
const DefaultApprovalTimeout = 10 * time.Minute

// approvalChunkBase numbers the DeliveryLog chunks of approval messages:
// approval n of an event is recorded under approvalChunkBase-n, and
// cleared (an empty message id) once answered, so that a restart finds
// the ones left open (StaleApprovals).
const approvalChunkBase = -1000

// ApprovalChunk reports whether a DeliveryLog chunk is an approval
// message's.
func ApprovalChunk(chunk int) bool { return chunk <= approvalChunkBase }

// StaleApprovalNotice is what an approval left open by a gateway that did
// not survive becomes at the next start: denied, never allowed.
const StaleApprovalNotice = "🚫 Denied: the gateway restarted before anyone answered; the tool did not run."

// Messages to the model.
const (
	deniedByUser    = "The user denied this tool call."
	deniedAndStop   = "The user denied this tool call and stopped the turn."
	deniedByTimeout = "Nobody answered the approval request in time (the user may be away), so this tool call was denied. Go on without it, or say in your answer what you need approved."
)

// pendingApproval is an approval message waiting for an answer.
type pendingApproval struct {
	e       queue.Event
	view    card.Approval
	channel string
	message string
	// answer gets the first valid press.
	answer chan agent.Decision
	// posted is closed once message is known (or the post failed): a
	// press can arrive before the POST's answer does.
	posted chan struct{}
	// press, when set, takes the allowed presses (a question's or a
	// plan's controls, question.go and plan.go); answer is what follows
	// the id in the control's ID.
	press func(ctx context.Context, p Press, answer string) PressAnswer
}

// approvals are the open approval messages, by id.
type approvals struct {
	mu   sync.Mutex // guards the fields below
	seq  uint64
	open map[uint64]*pendingApproval
}

// Approve implements agent.Approver: it posts the question under the
// prompt (a reply, which notifies its author) with Allow, Allow for this
// session, Deny and Deny and stop, and waits for the author's (or an
// approver's) press, the timeout, or ctx (the CLI withdrew the request or
// the turn ended). The message always ends saying what happened.
func (b *Bot) Approve(ctx context.Context, e queue.Event, a backends.Approval) agent.Decision {
	switch a.Tool {
	case backends.ToolAskUserQuestion:
		if d, ok := b.askQuestions(ctx, e, a); ok {
			return d
		}
	case backends.ToolExitPlanMode:
		return b.reviewPlan(ctx, e, a)
	}
	timeout := b.opts.ApprovalTimeout
	if timeout <= 0 {
		timeout = DefaultApprovalTimeout
	}
	t := b.turnOf(e.ID)
	workDir := ""
	if t != nil {
		t.mu.Lock()
		workDir = t.workDir
		t.mu.Unlock()
	}
	p := &pendingApproval{e: e, channel: e.ChannelID, answer: make(chan agent.Decision, 1), posted: make(chan struct{}),
		view: card.Approval{Tool: a.Tool, Input: a.Input, Description: a.Description, Asker: e.UserID, Timeout: timeout, WorkDir: workDir}}
	b.approvals.mu.Lock()
	if b.approvals.open == nil {
		b.approvals.open = map[uint64]*pendingApproval{}
	}
	b.approvals.seq++
	id := b.approvals.seq
	b.approvals.open[id] = p
	b.approvals.mu.Unlock()
	defer func() {
		b.approvals.mu.Lock()
		delete(b.approvals.open, id)
		b.approvals.mu.Unlock()
	}()

	if t != nil {
		t.waitingFor(a.Tool)
		defer t.waitingFor("")
	}
	msg, err := b.postApproval(ctx, e, id, p.view, a.CanRemember)
	if err != nil {
		close(p.posted)
		b.log.Warn().Err(err).Uint64("event", e.ID).Str("tool", a.Tool).Msg(approvalPostFail)
		return agent.Decision{Verdict: backends.Verdict{Message: "The approval request could not be shown to the user, so this tool call was denied."}, By: "error"}
	}
	chunk := approvalChunkBase - int(id)
	b.approvals.mu.Lock()
	p.message = msg
	b.approvals.mu.Unlock()
	close(p.posted)
	if b.opts.Deliveries != nil {
		b.opts.Deliveries.Delivered(e.ID, chunk, msg)
		defer b.opts.Deliveries.Delivered(e.ID, chunk, "")
	}

	timer := b.clock.NewTimer(timeout)
	defer timer.Stop()
	select {
	case d := <-p.answer:
		return d // the press's own answer already updated the message
	case <-timer.Chan():
		if d, pressed := b.endApproval(id, p); pressed {
			return d // a press took it as the timer fired
		}
		b.closeApproval(p, card.TimedOut, "")
		return agent.Decision{Verdict: backends.Verdict{Message: deniedByTimeout}, By: "timeout"}
	case <-ctx.Done():
		b.closeApproval(p, card.Withdrawn, "")
		return agent.Decision{Verdict: backends.Verdict{Message: deniedByUser}, By: "withdrawn"}
	}
}

// postApproval posts the question with its buttons as a reply to the
// prompt and returns the message id.
func (b *Bot) postApproval(ctx context.Context, e queue.Event, id uint64, view card.Approval, canRemember bool) (string, error) {
	ch, err := parseID("channel", e.ChannelID)
	if err != nil {
		return "", err
	}
	text := card.RenderApproval(view)
	key := approvalButton + strconv.FormatUint(id, 10) + ":"
	buttons := []Button{{ID: key + answerAllow, Label: "Allow", Style: ButtonSuccess}}
	if canRemember {
		buttons = append(buttons, Button{ID: key + answerSession, Label: "Allow for this session", Style: ButtonPrimary})
	}
	buttons = append(buttons,
		Button{ID: key + answerDeny, Label: "Deny", Style: ButtonSecondary},
		Button{ID: key + answerDenyStop, Label: "Deny and stop", Style: ButtonDanger})
	row, err := buttonRow(text, buttons)
	if err != nil {
		return "", err
	}
	body := messageCreate{
		Content: text, Nonce: fmt.Sprintf("%sa%d-%d", b.noncePrefix, e.ID, id), EnforceNonce: true,
		AllowedMentions: noPings(false), Components: row,
	}
	if prompt, ok := replyRef(e); ok && b.interactionOf(e.ReplyTo) == nil {
		// A reply notifies the prompt's author: the one ping meant here.
		body.MessageReference = &messageReference{MessageID: prompt}
		body.AllowedMentions = noPings(true)
	} else if user, err := discord.ParseSnowflake(e.UserID); err == nil {
		// A slash command has no message to reply to: name its user.
		body.AllowedMentions = &api.AllowedMentions{Parse: []api.AllowedMentionType{}, Users: []discord.UserID{discord.UserID(user)}}
	}
	msg, err := b.postMessage(ctx, ch, body)
	if err != nil {
		return "", fmt.Errorf("post approval in channel %s: %w", e.ChannelID, err)
	}
	return msg.String(), nil
}

// interactionOf returns the slash command replyTo names, if it is one.
func (b *Bot) interactionOf(replyTo string) *interaction {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.interactions[replyTo]
}

// endApproval closes approval id to presses. pressed reports that a
// press had already taken it, with the press's decision (the press has
// shown it on the message).
func (b *Bot) endApproval(id uint64, p *pendingApproval) (d agent.Decision, pressed bool) {
	b.approvals.mu.Lock()
	_, open := b.approvals.open[id]
	delete(b.approvals.open, id)
	b.approvals.mu.Unlock()
	if open {
		return agent.Decision{}, false
	}
	return <-p.answer, true
}

// closeApproval edits an unanswered approval message to its end, without
// buttons; it does not depend on the turn's context.
func (b *Bot) closeApproval(p *pendingApproval, phase card.ApprovalPhase, by string) {
	view := p.view
	view.Phase, view.By = phase, by
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	if err := b.EditMessage(ctx, p.channel, p.message, card.RenderApproval(view)); err != nil {
		b.log.Debug().Err(err).Uint64("event", p.e.ID).Msg("could not close the approval message")
	}
}

// onApprovalPress takes a press on an approval's button: only the prompt's
// author or an approver may answer, once, while the approval is open.
func (b *Bot) onApprovalPress(ctx context.Context, p Press) PressAnswer {
	rest := strings.TrimPrefix(p.ButtonID, approvalButton)
	idText, answer, _ := strings.Cut(rest, ":")
	id, err := strconv.ParseUint(idText, 10, 64)
	b.approvals.mu.Lock()
	pa := b.approvals.open[id]
	if err == nil && pa != nil && pa.message == "" {
		// Pressed before the POST's answer arrived: wait for the message
		// id, to check the press is on this approval's message.
		b.approvals.mu.Unlock()
		select {
		case <-pa.posted:
		case <-ctx.Done():
		}
		b.approvals.mu.Lock()
		pa = b.approvals.open[id]
	}
	// The message must be this approval's: ids restart with the process,
	// and a previous run's approval left with its buttons (its closing
	// edit failed) must not answer this one.
	if err != nil || pa == nil || pa.channel != p.ChannelID || pa.message == "" || pa.message != p.MessageID {
		b.approvals.mu.Unlock()
		return PressAnswer{Notice: approvalGone}
	}
	if p.UserID != pa.e.UserID && !b.isApprover(p.UserID, p.Roles) {
		b.approvals.mu.Unlock()
		b.log.Info().Uint64("event", pa.e.ID).Str("user", p.UserID).Msg("approval press refused: not the prompt's author or an approver")
		return PressAnswer{Notice: notYourApproval}
	}
	if pa.press != nil {
		b.approvals.mu.Unlock()
		return pa.press(ctx, p, answer)
	}
	var d agent.Decision
	phase := card.Denied
	switch answer {
	case answerAllow:
		d, phase = agent.Decision{Verdict: backends.Verdict{Allow: true}}, card.Allowed
	case answerSession:
		d, phase = agent.Decision{Verdict: backends.Verdict{Allow: true, Remember: true}}, card.AllowedSession
	case answerDeny:
		d = agent.Decision{Verdict: backends.Verdict{Message: deniedByUser}}
	case answerDenyStop:
		d, phase = agent.Decision{Verdict: backends.Verdict{Message: deniedAndStop, Interrupt: true}}, card.DeniedStopped
	default:
		b.approvals.mu.Unlock()
		return PressAnswer{Notice: approvalGone}
	}
	d.By = p.UserID
	delete(b.approvals.open, id) // answered once
	b.approvals.mu.Unlock()
	pa.answer <- d
	if answer == answerDenyStop {
		// The turn ends as stopped, like the card's Stop.
		if t := b.turnOf(pa.e.ID); t != nil {
			go b.stopTurn(t, p.UserID, false)
		}
	}
	view := pa.view
	view.Phase, view.By = phase, p.UserID
	text := card.RenderApproval(view)
	return PressAnswer{Update: &text}
}
