package discord

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/diamondburned/arikawa/v3/api"
	"github.com/diamondburned/arikawa/v3/discord"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/agent"
	"github.com/agentgateway/gateway/internal/card"
	"github.com/agentgateway/gateway/internal/queue"
)

// Controls of a question message, after "appr:<id>:": the id is an open
// approval's, so presses route, are checked (the right message, the
// prompt's author or an approver) and pass between processes as an
// approval's do.
const (
	questionOption = "q" // q<question>.<option>: a single-choice button
	questionSelect = "s" // s<question>: a select menu (several choices, or many options)
	questionOther  = "o" // o<question>: Other…, opens a form
	questionTyped  = "m" // m<question>: the form's submission
	otherValue     = "other"
	answerField    = "answer"
)

// Limits of a question message's controls.
const (
	maxQuestionRows  = maxRows // one row per question
	maxOptionButtons = 4       // and Other… makes five
	maxTypedAnswer   = 1000
)

// Messages to the model and the user about questions.
const (
	questionPostFail = "could not post the agent's question"
	// noQuestionAnswer is said when the question could not be shown: the
	// model gets it as the tool's error.
	questionNotShown = "The question could not be shown to the user, so it was not answered. Go on with your best judgment, or ask in your answer."
)

// pendingQuestion is what an open question message holds beyond the
// approval it is registered as.
type pendingQuestion struct {
	input     json.RawMessage
	questions []card.Question
	timeout   time.Duration

	mu      sync.Mutex // guards answers and by
	answers []string
	by      string
}

// askQuestions implements an AskUserQuestion call: its questions under the
// prompt, each with its options as buttons (a select menu when several may
// be chosen or there are many) and Other… for a typed answer. The answers
// go back as the tool's input, so the turn goes on. ok is false when the
// input holds no question to show (it is then asked about as a tool).
func (b *Bot) askQuestions(ctx context.Context, e queue.Event, a backends.Approval) (d agent.Decision, ok bool) {
	qs, err := card.ParseQuestions(a.Input)
	if err != nil {
		b.log.Warn().Err(err).Uint64("event", e.ID).Msg("AskUserQuestion input not understood; asked about as a tool")
		return agent.Decision{}, false
	}
	if len(qs) > maxQuestionRows {
		qs = qs[:maxQuestionRows]
	}
	q := &pendingQuestion{input: a.Input, questions: qs, timeout: b.approvalTimeout(), answers: make([]string, len(qs))}
	p := &pendingApproval{e: e, channel: e.ChannelID, answer: make(chan agent.Decision, 1), posted: make(chan struct{})}
	id, release := b.openAsk(p)
	defer release()
	p.press = func(ctx context.Context, pr Press, answer string) PressAnswer {
		return b.onQuestionPress(id, p, q, pr, answer)
	}
	text := card.RenderQuestions(q.view(card.QuestionAsking, e.UserID))
	rows := questionRows(askKey(id), qs, q.answers)
	d = b.waitAsk(ctx, e, id, p, a.Tool, askMessage{text: text, rows: rows}, q.timeout, func(phase askEnd) (agent.Decision, string) {
		q.mu.Lock()
		defer q.mu.Unlock()
		if phase == askWithdrawn {
			return agent.Decision{Verdict: backends.Verdict{Message: deniedByUser}, By: "withdrawn"},
				card.RenderQuestions(q.view(card.QuestionWithdrawn, e.UserID))
		}
		// The CLI's own words for no answer: "The user did not answer the
		// questions." (with whatever was answered before the time ran out).
		return agent.Decision{Verdict: backends.Verdict{Allow: true, UpdatedInput: q.updatedInput()}, By: "timeout"},
			card.RenderQuestions(q.view(card.QuestionTimedOut, e.UserID))
	}, func() agent.Decision {
		return agent.Decision{Verdict: backends.Verdict{Message: questionNotShown}, By: "error"}
	})
	return d, true
}

// view is the message for the questions in phase.
func (q *pendingQuestion) view(phase card.QuestionPhase, asker string) card.Questions {
	return card.Questions{Phase: phase, Questions: q.questions, Answers: slices.Clone(q.answers), Asker: asker, By: q.by, Timeout: q.timeout}
}

// updatedInput is the tool's input with "answers": question text to
// answer, for the questions answered (a multiple choice's labels joined
// with ", ", as the CLI documents them).
func (q *pendingQuestion) updatedInput() json.RawMessage {
	var in map[string]json.RawMessage
	if json.Unmarshal(q.input, &in) != nil || in == nil {
		in = map[string]json.RawMessage{}
	}
	answers := map[string]string{}
	for i, qu := range q.questions {
		if q.answers[i] != "" {
			answers[qu.Text] = q.answers[i]
		}
	}
	in["answers"], _ = json.Marshal(answers)
	out, _ := json.Marshal(in)
	return out
}

// onQuestionPress takes an allowed press on a question message: an
// option, a select menu's choice, Other… (a form) or the form's answer.
// The message shows each answer as it comes; the last one answers the
// tool.
func (b *Bot) onQuestionPress(id uint64, p *pendingApproval, q *pendingQuestion, pr Press, answer string) PressAnswer {
	kind, rest := answer[:min(1, len(answer))], answer[min(1, len(answer)):]
	qText, oText, _ := strings.Cut(rest, ".")
	qi, err := strconv.Atoi(qText)
	if err != nil || qi < 0 || qi >= len(q.questions) {
		return PressAnswer{Notice: approvalGone}
	}
	qu := q.questions[qi]
	var got string
	switch kind {
	case questionOption:
		oi, err := strconv.Atoi(oText)
		if err != nil || oi < 0 || oi >= len(qu.Options) {
			return PressAnswer{Notice: approvalGone}
		}
		got = qu.Options[oi].Label
	case questionSelect:
		if slices.Contains(pr.Values, otherValue) {
			return PressAnswer{Modal: typedAnswerForm(askKey(id)+questionTyped+qText, qu)}
		}
		var labels []string
		for _, v := range pr.Values {
			if oi, err := strconv.Atoi(v); err == nil && oi >= 0 && oi < len(qu.Options) {
				labels = append(labels, qu.Options[oi].Label)
			}
		}
		got = strings.Join(labels, ", ")
	case questionOther:
		return PressAnswer{Modal: typedAnswerForm(askKey(id)+questionTyped+qText, qu)}
	case questionTyped:
		got = strings.TrimSpace(pr.Fields[answerField])
	default:
		return PressAnswer{Notice: approvalGone}
	}
	if got == "" {
		return PressAnswer{Notice: "Pick an answer, or type one with Other…."}
	}

	q.mu.Lock()
	if q.answers[qi] != "" {
		q.mu.Unlock()
		return PressAnswer{Notice: "That question is answered already."}
	}
	q.answers[qi] = got
	q.by = pr.UserID
	done := !slices.Contains(q.answers, "")
	phase := card.QuestionAsking
	if done {
		phase = card.QuestionAnswered
	}
	text := card.RenderQuestions(q.view(phase, p.e.UserID))
	rows := questionRows(askKey(id), q.questions, q.answers)
	input := q.updatedInput()
	q.mu.Unlock()
	if !done {
		return PressAnswer{Update: &text, Rows: rows}
	}
	if !b.settleAsk(id, p, agent.Decision{Verdict: backends.Verdict{Allow: true, UpdatedInput: input}, By: pr.UserID}) {
		return PressAnswer{Notice: approvalGone}
	}
	return PressAnswer{Update: &text}
}

// typedAnswerForm is the form Other… opens.
func typedAnswerForm(id string, q card.Question) *Modal {
	label := "Your answer"
	if h := strings.TrimSpace(q.Header); h != "" {
		label = cutText("Your answer: "+h, maxFieldLabel)
	}
	return &Modal{ID: id, Title: "Answer the agent", Fields: []TextField{{
		ID: answerField, Label: label, Placeholder: cutText(oneLineText(q.Text), maxFieldHint),
		Paragraph: true, Required: true, MaxLength: maxTypedAnswer,
	}}}
}

// questionRows are the controls of the questions not yet answered: one
// row each.
func questionRows(key string, qs []card.Question, answers []string) []Row {
	var rows []Row
	for i, q := range qs {
		if answers[i] != "" || len(rows) == maxQuestionRows {
			continue
		}
		qi := strconv.Itoa(i)
		if !q.Multi && len(q.Options) > 0 && len(q.Options) <= maxOptionButtons {
			var bs []Button
			for oi, o := range q.Options {
				bs = append(bs, Button{ID: key + questionOption + qi + "." + strconv.Itoa(oi), Label: buttonLabel(o.Label, oi), Style: ButtonPrimary})
			}
			bs = append(bs, Button{ID: key + questionOther + qi, Label: "Other…", Style: ButtonSecondary})
			rows = append(rows, Row{Buttons: bs})
			continue
		}
		rows = append(rows, Row{Select: questionMenu(key+questionSelect+qi, q)})
	}
	return rows
}

// questionMenu is a select menu for q: its options (at most 24) and
// Other….
func questionMenu(id string, q card.Question) *Select {
	sel := &Select{ID: id, Placeholder: cutText(menuPlaceholder(q), maxPlaceholder)}
	for oi, o := range q.Options {
		if oi == maxSelectOptions-1 {
			break
		}
		sel.Options = append(sel.Options, SelectOption{Label: buttonLabel(o.Label, oi), Value: strconv.Itoa(oi),
			Description: cutText(oneLineText(o.Description), maxOptionText)})
	}
	sel.Options = append(sel.Options, SelectOption{Label: "Other…", Value: otherValue, Description: "Type your own answer"})
	sel.Min, sel.Max = 1, 1
	if q.Multi {
		sel.Max = len(sel.Options)
	}
	return sel
}

func menuPlaceholder(q card.Question) string {
	what := strings.TrimSpace(q.Header)
	if what == "" {
		what = oneLineText(q.Text)
	}
	if q.Multi {
		return "Pick one or more: " + what
	}
	return "Pick one: " + what
}

// buttonLabel is an option's label as a button or menu option shows it;
// the answer is always the whole label.
func buttonLabel(label string, i int) string {
	label = oneLineText(label)
	if label == "" {
		return "Option " + strconv.Itoa(i+1)
	}
	return cutText(label, maxOptionText)
}

func oneLineText(s string) string { return strings.Join(strings.Fields(s), " ") }

// cutText shortens s to max characters, marking the cut.
func cutText(s string, max int) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return string(r[:max-1]) + "…"
}

// askKey is the custom_id prefix of open approval id's controls.
func askKey(id uint64) string { return approvalButton + strconv.FormatUint(id, 10) + ":" }

// approvalTimeout is how long approvals, questions and plans wait.
func (b *Bot) approvalTimeout() time.Duration {
	if b.opts.ApprovalTimeout <= 0 {
		return DefaultApprovalTimeout
	}
	return b.opts.ApprovalTimeout
}

// askChunkBase numbers the DeliveryLog chunks of question and plan
// messages as approvalChunkBase numbers approvals' (ApprovalChunk holds
// for them too), far enough below that StaleNotice tells them apart.
const askChunkBase = approvalChunkBase - 1<<30

// StaleQuestionNotice is what a question or plan left open by a gateway
// that did not survive becomes at the next start: the turn runs again and
// the agent asks anew.
const StaleQuestionNotice = "⌛ Not answered: the gateway restarted before anyone answered; the agent will ask again if it still needs to."

// StaleNotice is what the message recorded under an approval chunk (see
// ApprovalChunk) becomes when a restart finds it left open.
func StaleNotice(chunk int) string {
	if chunk <= askChunkBase {
		return StaleQuestionNotice
	}
	return StaleApprovalNotice
}

// askMessage is what a question or plan message first shows.
type askMessage struct {
	text  string
	rows  []Row
	files []file
}

// askEnd is how an unanswered question or plan ended.
type askEnd int

const (
	askTimedOut askEnd = iota
	askWithdrawn
)

// openAsk registers p as an open approval; release takes it out.
func (b *Bot) openAsk(p *pendingApproval) (id uint64, release func()) {
	b.approvals.mu.Lock()
	if b.approvals.open == nil {
		b.approvals.open = map[uint64]*pendingApproval{}
	}
	b.approvals.seq++
	id = b.approvals.seq
	b.approvals.open[id] = p
	b.approvals.mu.Unlock()
	return id, func() {
		b.approvals.mu.Lock()
		delete(b.approvals.open, id)
		b.approvals.mu.Unlock()
	}
}

// settleAsk closes open approval id with d, once: false when it was no
// longer open (the time ran out, or another answer took it).
func (b *Bot) settleAsk(id uint64, p *pendingApproval, d agent.Decision) bool {
	b.approvals.mu.Lock()
	_, open := b.approvals.open[id]
	delete(b.approvals.open, id)
	b.approvals.mu.Unlock()
	if open {
		p.answer <- d
	}
	return open
}

// waitAsk posts a question or plan message under e's prompt and waits for
// its answer (settleAsk), the timeout or ctx (the CLI withdrew it, or the
// turn ended). ended gives the decision and the message's last text when
// nobody answered; notShown the decision when the message could not be
// posted. The message is recorded in the DeliveryLog while open, as an
// approval's, so that a restart closes it.
func (b *Bot) waitAsk(ctx context.Context, e queue.Event, id uint64, p *pendingApproval, tool string, m askMessage,
	timeout time.Duration, ended func(askEnd) (agent.Decision, string), notShown func() agent.Decision) agent.Decision {
	if t := b.turnOf(e.ID); t != nil {
		t.waitingFor(tool)
		defer t.waitingFor("")
	}
	msg, err := b.postAsk(ctx, e, id, m)
	if err != nil {
		close(p.posted)
		b.log.Warn().Err(err).Uint64("event", e.ID).Str("tool", tool).Msg(questionPostFail)
		return notShown()
	}
	b.approvals.mu.Lock()
	p.message = msg
	b.approvals.mu.Unlock()
	close(p.posted)
	if b.opts.Deliveries != nil {
		chunk := askChunkBase - int(id)
		b.opts.Deliveries.Delivered(e.ID, chunk, msg)
		defer b.opts.Deliveries.Delivered(e.ID, chunk, "")
	}
	timer := b.clock.NewTimer(timeout)
	defer timer.Stop()
	how := askTimedOut
	select {
	case d := <-p.answer:
		return d // the press's own answer already updated the message
	case <-timer.Chan():
	case <-ctx.Done():
		how = askWithdrawn
	}
	if d, pressed := b.endApproval(id, p); pressed {
		return d
	}
	d, text := ended(how)
	b.closeAsk(p, text)
	return d
}

// postAsk posts a question or plan message as a reply to e's prompt (the
// one ping meant: its author), or naming the user of a slash command.
func (b *Bot) postAsk(ctx context.Context, e queue.Event, id uint64, m askMessage) (string, error) {
	ch, err := parseID("channel", e.ChannelID)
	if err != nil {
		return "", err
	}
	cc, err := rowComponents(m.text, m.rows)
	if err != nil {
		return "", err
	}
	body := messageCreate{
		Content: m.text, Nonce: fmt.Sprintf("%sa%d-%d", b.noncePrefix, e.ID, id), EnforceNonce: true,
		AllowedMentions: noPings(false), Components: cc, Attachments: attachments(m.files),
	}
	if prompt, ok := replyRef(e); ok && b.interactionOf(e.ReplyTo) == nil {
		body.MessageReference = &messageReference{MessageID: prompt}
		body.AllowedMentions = noPings(true)
	} else if user, err := discord.ParseSnowflake(e.UserID); err == nil {
		body.AllowedMentions = &api.AllowedMentions{Parse: []api.AllowedMentionType{}, Users: []discord.UserID{discord.UserID(user)}}
	}
	msg, err := b.retrying(ctx, func() (discord.MessageID, error) {
		opts, err := withBody(body, m.files)
		if err != nil {
			return 0, err
		}
		var msg discord.Message
		err = b.client(ctx).RequestJSON(&msg, "POST", api.EndpointChannels+ch.String()+"/messages", opts...)
		return msg.ID, err
	})
	if err != nil {
		return "", fmt.Errorf("post %s in channel %s: %w", "question", e.ChannelID, err)
	}
	return msg.String(), nil
}

// closeAsk edits an unanswered question or plan message to its end,
// without controls; it does not depend on the turn's context.
func (b *Bot) closeAsk(p *pendingApproval, text string) {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	if err := b.EditMessage(ctx, p.channel, p.message, text); err != nil {
		b.log.Debug().Err(err).Uint64("event", p.e.ID).Msg("could not close the question message")
	}
}
