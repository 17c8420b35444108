// Package card renders the live turn card: the one Discord message that
// shows, while a turn runs, what the agent is doing (elapsed time, model,
// the last tools with a one-line summary each, thinking, API retries, a
// tail of the answer), and the one-line receipt it becomes at the end.
//
// Rendering is pure: a State in, at most Limit characters out, code fences
// balanced, nothing that reads as a mention.
package card

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentgateway/gateway/internal/actions"
)

// Limit is Discord's limit for a message's content, in characters.
const Limit = 2000

// MaxTools is how many tool rows the card shows; older ones are counted.
const MaxTools = 6

// Lengths of the card's parts, in characters.
const (
	maxSummary = 100
	maxLine    = 200
	// maxPreview bounds the answer's tail; the rest of Limit is left to
	// the header and the tool rows.
	maxPreview = 1000
)

// Phase is where the turn is.
type Phase int

const (
	Running Phase = iota
	Stopping
	Stopped
	Finished
	Failed
)

// Tool is one tool call on the card.
type Tool struct {
	ID      string
	Name    string
	Summary string
	Done    bool
	Failed  bool
}

// State is everything the card shows.
type State struct {
	Phase   Phase
	Elapsed time.Duration
	Model   string
	// Sandbox is the CLI's sandbox tier, when it has one (codex).
	Sandbox string
	// Tools are every tool call so far, in order.
	Tools    []Tool
	Thinking bool
	// Text is the answer streamed so far; the card shows its tail.
	Text string
	// Retry says what the CLI is retrying and why, while it does
	// ("retrying the model API (attempt 2 of 10): no response"); shown
	// while the turn runs.
	Retry string
	// Notice is a one-line status (a usage limit the turn waits for).
	Notice string
	// Warning is a one-line budget warning.
	Warning string
	// StoppedBy names who stopped the turn.
	StoppedBy string
	// Header, if set, replaces the first line (a receipt over what the
	// stopped turn had shown).
	Header string
	// Heard is a voice prompt's transcript, quoted under the first line
	// so the user sees what was heard.
	Heard string
}

// Render returns the card's content.
func Render(s State) string {
	var b strings.Builder
	b.WriteString(header(s))
	b.WriteByte('\n')
	if s.Heard != "" {
		b.WriteString(heardLine(s.Heard, maxHeard) + "\n")
	}
	start := max(0, len(s.Tools)-MaxTools)
	if start > 0 {
		fmt.Fprintf(&b, "-# %d earlier tool calls\n", start)
	}
	for _, t := range s.Tools[start:] {
		b.WriteString(toolRow(t, s.Phase))
		b.WriteByte('\n')
	}
	if s.Thinking && s.Phase == Running {
		b.WriteString("💭 thinking…\n")
	}
	if s.Retry != "" && s.Phase == Running {
		b.WriteString("🔁 " + oneLine(s.Retry, maxLine) + "\n")
	}
	if s.Notice != "" {
		b.WriteString("⚠️ " + oneLine(s.Notice, maxLine) + "\n")
	}
	if s.Warning != "" {
		b.WriteString("💸 " + oneLine(s.Warning, maxLine) + "\n")
	}
	head := b.String()
	room := Limit - utf8.RuneCountInString(head) - 1
	if tail := preview(s.Text, min(room, maxPreview)); tail != "" {
		head += "\n" + tail
	}
	return strings.TrimRight(head, "\n")
}

func header(s State) string {
	if s.Header != "" {
		return oneLine(s.Header, maxLine)
	}
	var h string
	switch s.Phase {
	case Running:
		h = "⏳ **Working**"
	case Stopping:
		h = "⏹️ **Stopping…**"
	case Stopped:
		h = "🛑 **Stopped**"
		if s.StoppedBy != "" {
			h += " by " + oneLine(s.StoppedBy, 40)
		}
	case Finished:
		h = "✅ **Done**"
	case Failed:
		h = "❌ **Failed**"
	}
	h += " · " + Duration(s.Elapsed)
	if s.Model != "" {
		h += " · " + code(oneLine(s.Model, 60))
	}
	if s.Sandbox != "" {
		h += " · sandbox " + code(oneLine(s.Sandbox, 40))
	}
	return h
}

func toolRow(t Tool, phase Phase) string {
	mark := "⋯"
	switch {
	case t.Failed:
		mark = "✗"
	case t.Done:
		mark = "✓"
	case phase != Running:
		mark = "·" // never finished: the turn ended first
	}
	row := mark + " " + code(oneLine(t.Name, 40))
	if t.Summary != "" {
		row += " " + code(oneLine(t.Summary, maxSummary))
	}
	return row
}

// code puts s in an inline code span that s cannot end: backticks become
// a look-alike.
func code(s string) string {
	if s == "" {
		return ""
	}
	return "`" + strings.ReplaceAll(s, "`", "ˋ") + "`"
}

// oneLine makes s a single line of at most n characters, mentions
// defused.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(strings.ToValidUTF8(s, "\uFFFD")), " ")
	s = defuse(s)
	if utf8.RuneCountInString(s) > n {
		r := []rune(s)
		s = string(r[:n-1]) + "…"
	}
	return s
}

// defuse breaks what Discord would render as a mention: @everyone, @here,
// <@user>, <@&role>, <#channel>. A zero-width space after the marker keeps
// the text readable.
func defuse(s string) string {
	if !strings.ContainsAny(s, "@<") {
		return s
	}
	r := strings.NewReplacer("@everyone", "@\u200beveryone", "@here", "@\u200bhere", "<@", "<\u200b@", "<#", "<\u200b#")
	return r.Replace(s)
}

// withoutActions hides the Discord action blocks of a streamed answer,
// whole or still being written: the gateway runs them at the end and
// reports each, so their JSON is noise on the card.
func withoutActions(text string) string {
	for {
		i := strings.Index(text, actions.OpenTag)
		if i < 0 {
			return text
		}
		j := strings.Index(text[i:], actions.CloseTag)
		if j < 0 {
			return text[:i]
		}
		text = text[:i] + text[i+j+len(actions.CloseTag):]
	}
}

// preview is the tail of text in at most n characters, as a quote: the
// last lines that fit, cut at a line start where it can be, with any code
// fence it is inside reopened at the top and closed at the end.
func preview(text string, n int) string {
	text = strings.TrimSpace(withoutActions(text))
	if text == "" || n < 40 {
		return ""
	}
	text = defuse(strings.ToValidUTF8(text, "\uFFFD"))
	// Leave room for the ellipsis line, a reopened and a closing fence.
	const overhead = 4 + 8 + 4
	budget := n - overhead
	cut := text
	if extra := utf8.RuneCountInString(cut) - budget; extra > 0 {
		// Skip the first extra characters: the tail is what fits.
		at := 0
		for range extra {
			_, size := utf8.DecodeRuneInString(text[at:])
			at += size
		}
		cut = text[at:]
		if nl := strings.IndexByte(cut, '\n'); nl >= 0 && nl < len(cut)/2 {
			cut = cut[nl+1:]
		}
	}
	// Which fences are open where the tail starts, and at its end?
	openBefore := fenceOpen(text[:len(text)-len(cut)])
	var b strings.Builder
	if len(cut) < len(text) {
		b.WriteString("…\n")
	}
	if openBefore {
		b.WriteString("```\n")
	}
	b.WriteString(cut)
	if fenceOpen(text) {
		b.WriteString("\n```")
	}
	return b.String()
}

// fenceOpen reports whether a code fence is open at the end of s: an odd
// number of lines start with ```.
func fenceOpen(s string) bool {
	open := false
	for line := range strings.SplitSeq(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			open = !open
		}
	}
	return open
}

// Duration formats an elapsed time for people: 7s, 1m 05s, 1h 02m.
func Duration(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm %02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh %02dm", int(d.Hours()), int(d.Minutes())%60)
}

// Receipt is what the card becomes when the turn is over.
type Receipt struct {
	Phase   Phase
	Tools   int
	Elapsed time.Duration
	// CostUSD is what the turn cost; negative when unknown.
	CostUSD  float64
	Estimate bool
	// ContextPercent is how full the session's context is, in percent of
	// the model's window; 0 when unknown.
	ContextPercent int
}

// ContextWarnAt is the context fullness, in percent, from which the
// receipt suggests /compact.
const ContextWarnAt = 80

// String is the receipt's one line.
func (r Receipt) String() string {
	var s string
	switch r.Phase {
	case Stopped:
		s = "🛑 Stopped after " + Duration(r.Elapsed)
	case Failed:
		s = "❌ Failed after " + Duration(r.Elapsed)
	default:
		s = "✅ Done in " + Duration(r.Elapsed)
	}
	switch r.Tools {
	case 0:
	case 1:
		s += " · 1 tool"
	default:
		s += fmt.Sprintf(" · %d tools", r.Tools)
	}
	if r.CostUSD >= 0 {
		s += " · " + Dollars(r.CostUSD)
		if r.Estimate {
			s += " (estimate)"
		}
	}
	if r.ContextPercent > 0 {
		s += fmt.Sprintf(" · context %d%%", r.ContextPercent)
		if r.ContextPercent >= ContextWarnAt {
			s += " — /compact to summarise"
		}
	}
	return s
}

// Dollars formats an amount: four decimals under a dollar, two above.
func Dollars(v float64) string {
	if v < 1 {
		return fmt.Sprintf("$%.4f", v)
	}
	return fmt.Sprintf("$%.2f", v)
}

// maxHeard bounds the quoted transcript of a voice prompt, in characters.
const maxHeard = 300

// heardLine quotes a voice prompt's transcript on one line of at most n
// characters of it, mentions defused.
func heardLine(heard string, n int) string {
	return "> 🎙️ " + oneLine(heard, n)
}

// WithHeard puts the quote of a voice prompt's transcript under the first
// line of a card's text (a receipt), cut to keep the text within Limit;
// text is returned as it is when heard is empty or there is no room.
func WithHeard(text, heard string) string {
	if heard == "" {
		return text
	}
	room := Limit - utf8.RuneCountInString(text) - utf8.RuneCountInString(heardLine("", 0)) - 1
	if room < 20 {
		return text
	}
	line := heardLine(heard, min(room, maxHeard))
	first, rest, found := strings.Cut(text, "\n")
	if !found {
		return first + "\n" + line
	}
	return first + "\n" + line + "\n" + rest
}
