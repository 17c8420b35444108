package backends

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
)

// OpencodeParser turns the lines of `opencode run --format json` into
// events. It is pure: bytes in, events out, no I/O. The zero value is ready
// to use. An OpencodeParser is not safe for concurrent use; use one per run.
//
// opencode 1.18.33 prints one JSON object per line, each with "type",
// "timestamp" and "sessionID": step_start, text (a whole text part, once it
// is complete), tool_use (a tool call once it has completed or failed),
// step_finish (per model call: reason, tokens, cost), reasoning (only with
// --thinking) and error (the session failed: an API error, an auth error).
// There is no final summary line: the stream simply ends. Finish builds the
// result from what the steps said. Only the main session's parts are
// printed; a subagent's are not.
type OpencodeParser struct {
	sessionID string
	textSent  bool
	// lastMsg is the message id of the latest text part; lastText holds the
	// text parts of that message, the turn's answer.
	lastMsg  string
	lastText []string
	steps    int  // step_finish lines seen
	open     bool // a step_start without its step_finish yet
	usage    Usage
	cost     float64
	denials  []string
	err      *Error
	finished bool
	events   []Event // reused by Parse
}

// opencodeLine is the union of the fields opencode's lines carry.
type opencodeLine struct {
	Type      string          `json:"type"`
	SessionID string          `json:"sessionID"`
	Part      *opencodePart   `json:"part"`
	Error     json.RawMessage `json:"error"`
}

type opencodePart struct {
	ID        string          `json:"id"`
	MessageID string          `json:"messageID"`
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Tool      string          `json:"tool"`
	CallID    string          `json:"callID"`
	State     *opencodeState  `json:"state"`
	Reason    string          `json:"reason"`
	Tokens    *opencodeTokens `json:"tokens"`
	Cost      json.RawMessage `json:"cost"`
}

type opencodeState struct {
	Status string          `json:"status"`
	Input  json.RawMessage `json:"input"`
	Error  json.RawMessage `json:"error"`
}

type opencodeTokens struct {
	Input     json.RawMessage `json:"input"`
	Output    json.RawMessage `json:"output"`
	Reasoning json.RawMessage `json:"reasoning"`
	Cache     *struct {
		Read  json.RawMessage `json:"read"`
		Write json.RawMessage `json:"write"`
	} `json:"cache"`
}

// opencodeError is the error object of an error line, e.g.
// {"name":"APIError","data":{"message":…,"statusCode":401,…}}.
type opencodeError struct {
	Name string `json:"name"`
	Data *struct {
		Message      json.RawMessage `json:"message"`
		StatusCode   json.RawMessage `json:"statusCode"`
		ResponseBody json.RawMessage `json:"responseBody"`
		ProviderID   string          `json:"providerID"`
	} `json:"data"`
}

// Parse reads one line and returns the events it carries, in order. The
// returned slice is reused by the next call. A line that is not a JSON
// object returns an error wrapping errNotJSON and no events. Blank lines,
// unknown types and anything after Finish return nothing.
func (p *OpencodeParser) Parse(line []byte) ([]Event, error) {
	p.events = p.events[:0]
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil, nil
	}
	if line[0] != '{' {
		return nil, fmt.Errorf("opencode stream line: %w", errNotJSON)
	}
	var l opencodeLine
	if err := unmarshalLenient(line, &l); err != nil {
		return nil, fmt.Errorf("opencode stream line: %w: %w", errNotJSON, err)
	}
	if p.finished {
		return nil, nil
	}
	p.noteSession(l.SessionID)
	switch l.Type {
	case "step_start":
		p.open = true
	case "text":
		if l.Part != nil {
			p.text(l.Part)
		}
	case "tool_use":
		if l.Part != nil {
			p.tool(l.Part)
		}
	case "step_finish":
		if l.Part != nil {
			p.stepFinish(l.Part)
		}
	case "error":
		p.error(l.Error)
	}
	if len(p.events) == 0 {
		return nil, nil
	}
	return p.events, nil
}

func (p *OpencodeParser) noteSession(id string) {
	if id == "" || id == p.sessionID {
		return
	}
	p.sessionID = id
	p.events = append(p.events, Event{Kind: EventInit, SessionID: id})
}

// text reports a complete text part. Parts are separated by a blank line
// so the text events read as a transcript; the answer is the text of the
// last message that had any.
func (p *OpencodeParser) text(part *opencodePart) {
	s := part.Text
	if strings.TrimSpace(s) == "" {
		return
	}
	if part.MessageID != p.lastMsg || p.lastMsg == "" {
		p.lastMsg = part.MessageID
		p.lastText = p.lastText[:0]
	}
	p.lastText = append(p.lastText, strings.TrimSpace(s))
	if p.textSent {
		s = "\n\n" + s
	}
	p.textSent = true
	p.events = append(p.events, Event{Kind: EventText, SessionID: p.sessionID, Text: s})
}

// tool reports a finished tool call: opencode prints it once, when it has
// completed or failed, so it gives both a tool_use and a tool_result event.
func (p *OpencodeParser) tool(part *opencodePart) {
	input, status, errText := "", "", ""
	if part.State != nil {
		if !isJSONNull(part.State.Input) {
			input = string(part.State.Input)
		}
		status = part.State.Status
		errText = jsonString(part.State.Error)
	}
	p.events = append(p.events, Event{Kind: EventToolUse, SessionID: p.sessionID,
		Tool: &ToolCall{ID: part.CallID, Name: part.Tool, Input: input}})
	failed := status == "error"
	if failed && opencodeDenied(errText) {
		p.denials = append(p.denials, part.Tool)
	}
	p.events = append(p.events, Event{Kind: EventToolResult, SessionID: p.sessionID,
		Tool: &ToolCall{ID: part.CallID, Name: part.Tool, IsError: failed}})
}

// opencodeDenied reports whether a tool error is opencode refusing the call
// (a permission rule, or an "ask" auto-rejected by `opencode run`).
func opencodeDenied(errText string) bool {
	return strings.Contains(errText, "rejected permission") ||
		strings.Contains(errText, "specified a rule which prevents you")
}

func (p *OpencodeParser) stepFinish(part *opencodePart) {
	p.open = false
	p.steps++
	p.cost += jsonFloat(part.Cost)
	if t := part.Tokens; t != nil {
		p.usage.InputTokens += jsonInt(t.Input)
		p.usage.OutputTokens += jsonInt(t.Output) + jsonInt(t.Reasoning)
		if t.Cache != nil {
			p.usage.CacheReadTokens += jsonInt(t.Cache.Read)
			p.usage.CacheCreationTokens += jsonInt(t.Cache.Write)
		}
	}
}

// error records the first error line; it decides how the turn ended.
func (p *OpencodeParser) error(raw json.RawMessage) {
	if p.err != nil {
		return
	}
	p.err = classifyOpencodeError(raw)
}

// classifyOpencodeError reads an error object: the HTTP status when the
// provider answered with one, else the error's name and words.
func classifyOpencodeError(raw json.RawMessage) *Error {
	var oe opencodeError
	_ = unmarshalLenient(raw, &oe)
	e := &Error{Message: oe.Name}
	if oe.Data != nil {
		if msg := jsonString(oe.Data.Message); msg != "" {
			e.Message = msg
			if oe.Name != "" {
				e.Message = oe.Name + ": " + msg
			}
		}
		e.Status = int(jsonInt(oe.Data.StatusCode))
	}
	if e.Message == "" {
		e.Message = strings.TrimSpace(string(raw))
	}
	switch {
	case oe.Name == "ProviderAuthError":
		e.Kind = KindAuth
	case e.Status != 0:
		e.Kind = kindForStatus(e.Status)
	case oe.Name == "MessageOutputLengthError" || oe.Name == "ContextOverflowError":
		e.Kind = KindInvalid
	case oe.Name == "MessageAbortedError":
		e.Kind = KindCanceled
	default:
		e.Kind = kindForText(e.Message)
	}
	return e
}

// Finish ends the stream: it returns the result event when the stream
// reported how the turn ended (at least one finished step and no step left
// open, or an error line), and nothing otherwise. Lines parsed after Finish
// are ignored.
func (p *OpencodeParser) Finish() []Event {
	if p.finished {
		return nil
	}
	p.finished = true
	if p.err == nil && (p.steps == 0 || p.open) {
		return nil
	}
	res := p.result()
	return []Event{{Kind: EventResult, SessionID: res.SessionID, Result: &res, Err: p.err}}
}

func (p *OpencodeParser) result() Result {
	return Result{
		SessionID:         p.sessionID,
		Text:              strings.Join(p.lastText, "\n\n"),
		CostUSD:           p.cost,
		Usage:             p.usage,
		Turns:             p.steps,
		PermissionDenials: append([]string(nil), p.denials...),
	}
}

// SessionID is the session id seen so far, or "".
func (p *OpencodeParser) SessionID() string { return p.sessionID }

// Result returns the turn's result. The error is an *Error when an error
// line was seen, and errNoResult when the stream ended without a finished
// step (or in the middle of one). opencode reports no session total, so
// SessionCostUSD stays 0 and CostUSD is the sum of this run's steps.
func (p *OpencodeParser) Result() (Result, error) {
	if p.err != nil {
		return p.result(), p.err
	}
	if p.steps == 0 || p.open {
		return Result{SessionID: p.sessionID}, errNoResult
	}
	return p.result(), nil
}

// opencode's own texts on stderr for failures that never reach the stream.
const opencodeSessionNotFound = "Session not found"

// opencodeANSIEscape matches the colour codes opencode puts around "Error:".
var opencodeANSIEscape = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\x1b\[[0-9;]*[A-Za-z]`) })

// classifyOpencodeStderr reads a run's stderr when the stream said nothing:
// opencode prints "Error: Session not found" and exits 1 when --session
// names a session it does not know (the stream is empty). resumed says
// whether the run asked for a session. It returns nil when stderr names no
// failure it knows.
func classifyOpencodeStderr(stderr string, resumed bool) *Error {
	clean := opencodeANSIEscape().ReplaceAllString(stderr, "")
	if resumed && strings.Contains(clean, opencodeSessionNotFound) {
		return &Error{Kind: KindStaleSession, Message: "opencode: " + opencodeSessionNotFound}
	}
	return nil
}

// opencodeErrorLine returns the last "Error: …" line of stderr without
// colour codes, or "".
func opencodeErrorLine(stderr string) string {
	clean := opencodeANSIEscape().ReplaceAllString(stderr, "")
	lines := strings.Split(clean, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); strings.HasPrefix(l, "Error:") {
			return l
		}
	}
	return ""
}
