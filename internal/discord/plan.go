package discord

import (
	"context"
	"path/filepath"
	"strings"
	"sync"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/agent"
	"github.com/agentgateway/gateway/internal/card"
	"github.com/agentgateway/gateway/internal/files"
	"github.com/agentgateway/gateway/internal/queue"
)

// Controls of a plan message, after "appr:<id>:".
const (
	planApprove = "pa" // Approve
	planKeep    = "pk" // Keep planning…, opens a form for the note
	planNote    = "pn" // the form's submission
	noteField   = "note"
)

// PlanApprovedMode is the permission mode an approved plan continues in:
// edits go ahead, commands are still asked about. The runtime keeps a
// channel's own mode instead when it is neither plan nor default.
const PlanApprovedMode = "acceptEdits"

// Messages to the model about its plan.
const (
	planNotShown = "The plan could not be shown to the user, so it was not approved. Stay in plan mode and end your turn with the plan in your answer."
	planTimedOut = "Nobody answered in time to approve the plan (the user may be away), so it is not approved. Stay in plan mode: change nothing, and end your turn with the plan in your answer so the user can approve it later."
	planRevise   = "The user did not approve the plan yet and wants it revised. Their note:\n\n"
	planReviseTo = "\n\nRevise the plan accordingly, then call ExitPlanMode again."
)

// maxPlanBytes bounds the plan file read for a plan message.
const maxPlanBytes = 256 << 10

// readPlanFile returns the plan file the model wrote, read through the
// files guard: the agent chose the path, so it is read as the agent would
// read it, never through a link, never one of the gateway's own files and
// never one holding its secrets. A plan that cannot be read is empty: the
// user is then told it could not be shown.
func (b *Bot) readPlanFile(e queue.Event, path string) string {
	guard := b.opts.Files
	if guard == nil {
		guard = &files.Guard{}
	}
	data, err := guard.Read(path, filepath.Dir(path), maxPlanBytes)
	if err != nil {
		b.log.Info().Uint64("event", e.ID).Err(err).Msg("the plan file could not be read for the plan message")
		return ""
	}
	return strings.ToValidUTF8(string(data), "")
}

// pendingPlan is what an open plan message holds beyond the approval it
// is registered as.
type pendingPlan struct {
	view card.Plan
	mu   sync.Mutex // guards answered
	// answered is set by the first answer (Approve or a note).
	answered bool
}

// reviewPlan implements an ExitPlanMode call: the plan under the prompt
// (attached as plan.md when long) with Approve and Keep planning….
// Approve lets the turn go on in PlanApprovedMode; a note sends the model
// back to planning with it.
func (b *Bot) reviewPlan(ctx context.Context, e queue.Event, a backends.Approval) agent.Decision {
	if a.Plan == "" && a.PlanFile != "" {
		a.Plan = b.readPlanFile(e, a.PlanFile)
	}
	pl := &pendingPlan{view: card.Plan{Text: a.Plan, Attached: card.PlanAttached(a.Plan), Asker: e.UserID,
		Timeout: b.approvalTimeout(), Mode: PlanApprovedMode}}
	p := &pendingApproval{e: e, channel: e.ChannelID, answer: make(chan agent.Decision, 1), posted: make(chan struct{})}
	id, release := b.openAsk(p)
	defer release()
	p.press = func(ctx context.Context, pr Press, answer string) PressAnswer {
		return b.onPlanPress(id, p, pl, pr, answer)
	}
	key := askKey(id)
	m := askMessage{text: card.RenderPlan(pl.view), rows: []Row{{Buttons: []Button{
		{ID: key + planApprove, Label: "Approve", Style: ButtonSuccess},
		{ID: key + planKeep, Label: "Keep planning…", Style: ButtonSecondary},
	}}}}
	if pl.view.Attached {
		m.files = []file{{name: "plan.md", data: []byte(a.Plan)}}
	}
	return b.waitAsk(ctx, e, id, p, a.Tool, m, pl.view.Timeout, func(how askEnd) (agent.Decision, string) {
		view := pl.view
		if how == askWithdrawn {
			view.Phase = card.PlanWithdrawn
			return agent.Decision{Verdict: backends.Verdict{Message: deniedByUser}, By: "withdrawn"}, card.RenderPlan(view)
		}
		view.Phase = card.PlanTimedOut
		return agent.Decision{Verdict: backends.Verdict{Message: planTimedOut}, By: "timeout"}, card.RenderPlan(view)
	}, func() agent.Decision {
		return agent.Decision{Verdict: backends.Verdict{Message: planNotShown}, By: "error"}
	})
}

// onPlanPress takes an allowed press on a plan message: Approve, Keep
// planning… (the form) or the form's note.
func (b *Bot) onPlanPress(id uint64, p *pendingApproval, pl *pendingPlan, pr Press, answer string) PressAnswer {
	view := pl.view
	view.By = pr.UserID
	var d agent.Decision
	switch answer {
	case planApprove:
		view.Phase = card.PlanApproved
		d = agent.Decision{Verdict: backends.Verdict{Allow: true, Mode: PlanApprovedMode}, By: pr.UserID}
	case planKeep:
		return PressAnswer{Modal: &Modal{ID: askKey(id) + planNote, Title: "Keep planning", Fields: []TextField{{
			ID: noteField, Label: "What should change in the plan?", Paragraph: true, Required: true, MaxLength: maxTypedAnswer,
		}}}}
	case planNote:
		note := strings.TrimSpace(pr.Fields[noteField])
		if note == "" {
			return PressAnswer{Notice: "Write what should change, so the agent can revise the plan."}
		}
		view.Phase, view.Note = card.PlanRevising, note
		d = agent.Decision{Verdict: backends.Verdict{Message: planRevise + note + planReviseTo}, By: pr.UserID}
	default:
		return PressAnswer{Notice: approvalGone}
	}
	pl.mu.Lock()
	first := !pl.answered
	pl.answered = true
	pl.mu.Unlock()
	if !first || !b.settleAsk(id, p, d) {
		return PressAnswer{Notice: approvalGone}
	}
	text := card.RenderPlan(view)
	return PressAnswer{Update: &text}
}
