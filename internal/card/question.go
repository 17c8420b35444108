package card

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Question is one of the questions an agent asks the user with claude's
// AskUserQuestion tool.
type Question struct {
	// Text is the question; the answer is keyed by it.
	Text string `json:"question"`
	// Header is a short label for it (at most 12 characters, by the
	// tool's schema; not enforced).
	Header  string   `json:"header"`
	Options []Option `json:"options"`
	// Multi lets the user pick several options.
	Multi bool `json:"multiSelect"`
}

// Option is one answer a Question offers.
type Option struct {
	Label       string `json:"label"`
	Description string `json:"description"`
}

// ErrNoQuestions is returned by ParseQuestions for an input without a
// question the user could answer.
var ErrNoQuestions = errors.New("no questions with options")

// ParseQuestions reads an AskUserQuestion tool input. Questions without a
// text are dropped; at least one must remain.
func ParseQuestions(input json.RawMessage) ([]Question, error) {
	var in struct {
		Questions []Question `json:"questions"`
	}
	if err := json.Unmarshal(input, &in); err != nil {
		return nil, fmt.Errorf("read the questions: %w", err)
	}
	var out []Question
	for _, q := range in.Questions {
		if strings.TrimSpace(q.Text) != "" {
			out = append(out, q)
		}
	}
	if len(out) == 0 {
		return nil, ErrNoQuestions
	}
	return out, nil
}

// QuestionPhase is where a question message stands.
type QuestionPhase int

const (
	// QuestionAsking waits for answers; the message carries the controls.
	QuestionAsking QuestionPhase = iota
	// QuestionAnswered has every answer.
	QuestionAnswered
	// QuestionTimedOut ended without an answer in time.
	QuestionTimedOut
	// QuestionWithdrawn was cancelled by the CLI (the turn was stopped).
	QuestionWithdrawn
)

// Questions is what a question message shows.
type Questions struct {
	Phase     QuestionPhase
	Questions []Question
	// Answers holds each question's answer so far, by index; "" is none
	// yet.
	Answers []string
	// Asker is the user id the questions are for (shown, never pinged).
	Asker string
	// By is who answered, for QuestionAnswered.
	By      string
	Timeout time.Duration
}

// Limits of a question message's parts, so that four questions of four
// options each stay within Discord's 2000 characters.
const (
	maxQuestionText   = 300
	maxOptionLine     = 110
	maxShownAnswer    = 200
	maxQuestionsShown = 4
)

// RenderQuestions returns a question message's content: each question with
// its options (and its answer once given), or how it ended. It is at most
// 2000 characters and pings nobody by itself.
func RenderQuestions(q Questions) string {
	var b strings.Builder
	b.WriteString(questionsHeader(q) + "\n")
	for i, qu := range q.Questions {
		if i == maxQuestionsShown {
			fmt.Fprintf(&b, "-# … %d more questions\n", len(q.Questions)-i)
			break
		}
		b.WriteString(questionBlock(qu, answerOf(q.Answers, i), q.Phase == QuestionAsking))
	}
	if q.Phase == QuestionAsking && q.Timeout > 0 {
		fmt.Fprintf(&b, "-# If nobody answers within %s, the agent goes on without an answer.", Duration(q.Timeout))
	}
	return cut(strings.TrimRight(b.String(), "\n"), 2000)
}

func answerOf(answers []string, i int) string {
	if i < len(answers) {
		return answers[i]
	}
	return ""
}

func questionsHeader(q Questions) string {
	switch q.Phase {
	case QuestionAnswered:
		by := ""
		if q.By != "" {
			by = " by <@" + q.By + ">"
		}
		return "✅ Answered" + by + ":"
	case QuestionTimedOut:
		return "⌛ Nobody answered in time; the agent goes on without an answer:"
	case QuestionWithdrawn:
		return "➖ No longer needed (the turn was stopped or moved on):"
	}
	who := ""
	if q.Asker != "" {
		who = "<@" + q.Asker + ">, "
	}
	if len(q.Questions) == 1 {
		return "❓ " + who + "the agent has a question:"
	}
	return fmt.Sprintf("❓ %sthe agent has %d questions:", who, len(q.Questions))
}

// questionBlock is one question: its text, then its options while it is
// open, or its answer.
func questionBlock(q Question, answer string, open bool) string {
	var b strings.Builder
	head := ""
	if h := strings.TrimSpace(q.Header); h != "" {
		head = "**" + escapeMarkdown(oneLine(h, 40)) + "** · "
	}
	b.WriteString("> " + head + escapeMarkdown(oneLine(q.Text, maxQuestionText)) + "\n")
	switch {
	case answer != "":
		b.WriteString("→ " + escapeMarkdown(oneLine(answer, maxShownAnswer)) + "\n")
	case open:
		for i, o := range q.Options {
			line := fmt.Sprintf("%d. %s", i+1, escapeMarkdown(o.Label))
			if d := strings.TrimSpace(o.Description); d != "" {
				line += " — " + escapeMarkdown(d)
			}
			b.WriteString(oneLine(line, maxOptionLine) + "\n")
		}
		if q.Multi {
			b.WriteString("-# Pick one or more.\n")
		}
	default:
		b.WriteString("→ (no answer)\n")
	}
	return b.String()
}

// escapeMarkdown keeps a model's text from formatting the message
// (oneLine defuses its mentions).
func escapeMarkdown(s string) string {
	r := strings.NewReplacer("*", "\\*", "_", "\\_", "`", "'", "~", "\\~", "|", "\\|")
	return r.Replace(s)
}

// PlanPhase is where a plan message stands.
type PlanPhase int

const (
	// PlanAsking waits for Approve or Keep planning.
	PlanAsking PlanPhase = iota
	// PlanApproved let the agent go on with the plan.
	PlanApproved
	// PlanRevising sent it back with a note.
	PlanRevising
	// PlanTimedOut was not approved in time; the agent keeps planning.
	PlanTimedOut
	// PlanWithdrawn was cancelled by the CLI (the turn was stopped).
	PlanWithdrawn
)

// Plan is what a plan message shows.
type Plan struct {
	Phase PlanPhase
	// Text is the plan, Markdown, as the model wrote it; empty when it
	// could not be read.
	Text string
	// Attached says the plan goes as a file with the message (it is too
	// long to show): the message then shows only its start.
	Attached bool
	// Mode is the permission mode an approval continues in.
	Mode  string
	Asker string
	By    string
	// Note is what the user asked to change (PlanRevising).
	Note    string
	Timeout time.Duration
}

// MaxInlinePlan is the longest plan shown in the message itself, in
// characters; a longer one is attached as plan.md.
const MaxInlinePlan = 1400

// PlanAttached reports whether a plan of text is sent as a file.
func PlanAttached(text string) bool { return utf8.RuneCountInString(text) > MaxInlinePlan }

// RenderPlan returns a plan message's content: the plan (or its start,
// with the whole attached) and the question, or how it was answered. It
// is at most 2000 characters and pings nobody by itself.
func RenderPlan(p Plan) string {
	var b strings.Builder
	b.WriteString(planHeader(p) + "\n")
	switch {
	case strings.TrimSpace(p.Text) == "":
		b.WriteString("-# The plan's text could not be shown; ask the agent to paste it if you need it.\n")
	case p.Attached:
		b.WriteString(quoteBlock(cut(firstLines(p.Text, 8), 400)) + "\n-# The whole plan is attached as plan.md.\n")
	default:
		b.WriteString(quoteBlock(cut(p.Text, MaxInlinePlan)) + "\n")
	}
	if p.Phase == PlanRevising && strings.TrimSpace(p.Note) != "" {
		b.WriteString("Note: " + escapeMarkdown(oneLine(p.Note, 300)) + "\n")
	}
	if p.Phase == PlanAsking && p.Timeout > 0 {
		fmt.Fprintf(&b, "-# If nobody answers within %s, the agent is told the plan was not approved.", Duration(p.Timeout))
	}
	return cut(strings.TrimRight(b.String(), "\n"), 2000)
}

func planHeader(p Plan) string {
	by := ""
	if p.By != "" {
		by = " by <@" + p.By + ">"
	}
	switch p.Phase {
	case PlanApproved:
		mode := ""
		if p.Mode != "" {
			mode = " (permission mode `" + safeInline(p.Mode) + "`)"
		}
		return "✅ Plan approved" + by + "; the agent carries it out" + mode + "."
	case PlanRevising:
		return "📝 Sent back" + by + "; the agent revises the plan."
	case PlanTimedOut:
		return "⌛ Nobody answered in time; the plan was not approved and the agent keeps planning."
	case PlanWithdrawn:
		return "➖ No longer needed (the turn was stopped or moved on)."
	}
	who := ""
	if p.Asker != "" {
		who = "<@" + p.Asker + ">, "
	}
	return "📋 " + who + "the agent has a plan. Approve it to let the agent start, or keep planning with a note."
}

// quoteBlock shows text as a block quote, line by line.
func quoteBlock(text string) string {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	for i, l := range lines {
		lines[i] = "> " + defuse(l)
	}
	return strings.Join(lines, "\n")
}

// firstLines is text's first n lines.
func firstLines(text string, n int) string {
	lines := strings.SplitN(text, "\n", n+1)
	if len(lines) > n {
		lines = append(lines[:n], "…")
	}
	return strings.Join(lines, "\n")
}
