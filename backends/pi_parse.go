package backends

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// PiParser turns the lines of `pi -p --mode json` into events. It is pure:
// bytes in, events out, no I/O. The zero value is ready to use. A PiParser
// is not safe for concurrent use; use one per run.
//
// pi prints a session header ({"type":"session","id":…}), then its agent
// events: agent_start, turn_start, message_start/update/end,
// tool_execution_start/update/end, turn_end and agent_end. pi exits 0 when
// the model API fails: the failure is an assistant message with
// stopReason "error" and an errorMessage, so the outcome is read from the
// stream. With pi's own retries on, a failed attempt's agent_end can be
// followed by auto_retry_start (an EventRetry) and another attempt, so the
// turn's outcome is the last agent_end of the stream, not the first: Parse never returns
// an EventResult, and Result (called when the stream has ended) gives the
// outcome. Unknown line types are ignored.
type PiParser struct {
	sessionID string
	textSent  bool // a text event has been returned
	newBlock  bool // the next text starts a new block
	// last is the latest complete assistant message (message_end).
	last    *piMessage
	usage   Usage
	cost    float64
	turns   int
	denials []string
	// ended is set by agent_end and cleared by the agent_start of a retry.
	ended    bool
	endMsg   *piMessage // the last assistant message agent_end listed
	retrying bool       // auto_retry_start seen and not yet ended
	events   []Event    // reused by Parse
}

// piLine is the union of the fields pi's lines carry. Fields whose type
// might change between versions are kept raw and read leniently.
type piLine struct {
	Type string `json:"type"`
	// session header
	ID string `json:"id"`

	// message_start, message_update, message_end, turn_end
	Message               *piMessage        `json:"message"`
	AssistantMessageEvent *piAssistantEvent `json:"assistantMessageEvent"`

	// tool_execution_*
	ToolCallID string          `json:"toolCallId"`
	ToolName   string          `json:"toolName"`
	Args       json.RawMessage `json:"args"`
	Result     json.RawMessage `json:"result"`
	IsError    bool            `json:"isError"`

	// agent_end
	Messages []piMessage `json:"messages"`

	// auto_retry_start
	Attempt      json.RawMessage `json:"attempt"`
	MaxAttempts  json.RawMessage `json:"maxAttempts"`
	ErrorMessage string          `json:"errorMessage"`
}

// piAssistantEvent is the streaming part of a message_update line; its
// "partial" copy of the message is not read.
type piAssistantEvent struct {
	Type  string `json:"type"`
	Delta string `json:"delta"`
}

// piMessage is an agent message: user, assistant or toolResult.
type piMessage struct {
	Role         string          `json:"role"`
	Content      json.RawMessage `json:"content"` // a string or blocks
	StopReason   string          `json:"stopReason"`
	ErrorMessage string          `json:"errorMessage"`
	Usage        *piUsage        `json:"usage"`
}

type piUsage struct {
	Input      json.RawMessage `json:"input"`
	Output     json.RawMessage `json:"output"`
	CacheRead  json.RawMessage `json:"cacheRead"`
	CacheWrite json.RawMessage `json:"cacheWrite"`
	Cost       *struct {
		Total json.RawMessage `json:"total"`
	} `json:"cost"`
}

type piBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// Parse reads one line and returns the events it carries, in order. The
// returned slice is reused by the next call. A line that is not a JSON
// object returns an error wrapping errNotJSON and no events; the stream can
// go on. Blank lines and unknown types return nothing.
func (p *PiParser) Parse(line []byte) ([]Event, error) {
	p.events = p.events[:0]
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil, nil
	}
	if line[0] != '{' {
		return nil, fmt.Errorf("pi stream line: %w", errNotJSON)
	}
	var l piLine
	if err := unmarshalLenient(line, &l); err != nil {
		return nil, fmt.Errorf("pi stream line: %w: %w", errNotJSON, err)
	}
	switch l.Type {
	case "session":
		if l.ID != "" && l.ID != p.sessionID {
			p.sessionID = l.ID
			p.events = append(p.events, Event{Kind: EventInit, SessionID: l.ID})
		}
	case "agent_start":
		p.ended = false
	case "message_update":
		p.update(l.AssistantMessageEvent)
	case "message_end":
		p.messageEnd(l.Message)
	case "tool_execution_start":
		input := ""
		if !isJSONNull(l.Args) {
			input = string(l.Args)
		}
		p.events = append(p.events, Event{Kind: EventToolUse, SessionID: p.sessionID,
			Tool: &ToolCall{ID: l.ToolCallID, Name: l.ToolName, Input: input}})
	case "tool_execution_end":
		if l.IsError && piToolMissing(l.ToolName, l.Result) {
			// The tool is not enabled (--tools): pi's way of refusing it.
			p.denials = append(p.denials, l.ToolName)
		}
		p.events = append(p.events, Event{Kind: EventToolResult, SessionID: p.sessionID,
			Tool: &ToolCall{ID: l.ToolCallID, Name: l.ToolName, IsError: l.IsError}})
	case "agent_end":
		p.ended = true
		p.endMsg = nil
		for i := len(l.Messages) - 1; i >= 0; i-- {
			if l.Messages[i].Role == "assistant" {
				m := l.Messages[i]
				p.endMsg = &m
				break
			}
		}
	case "auto_retry_start":
		p.retrying = true
		// errorMessage is the failed call's, e.g. `503 {"type":"error",…}`.
		p.events = append(p.events, Event{Kind: EventRetry, SessionID: p.sessionID,
			Attempt: int(max(0, jsonInt(l.Attempt))), MaxAttempts: int(max(0, jsonInt(l.MaxAttempts))),
			Err: classifyPiText(l.ErrorMessage)})
	case "auto_retry_end":
		p.retrying = false
	}
	if len(p.events) == 0 {
		return nil, nil
	}
	return p.events, nil
}

// update handles the streaming events of an assistant message.
func (p *PiParser) update(ev *piAssistantEvent) {
	if ev == nil {
		return
	}
	switch ev.Type {
	case "text_start":
		p.newBlock = true
	case "text_delta":
		p.text(ev.Delta)
	}
}

// text returns a text event. Concatenated, the text events of a run read
// as a transcript: a block that follows earlier text starts with a blank
// line.
func (p *PiParser) text(s string) {
	if s == "" {
		return
	}
	if p.newBlock && p.textSent {
		s = "\n\n" + s
	}
	p.newBlock = false
	p.textSent = true
	p.events = append(p.events, Event{Kind: EventText, SessionID: p.sessionID, Text: s})
}

// messageEnd counts a finished assistant message: its usage and cost, and
// it becomes the candidate for the turn's answer.
func (p *PiParser) messageEnd(m *piMessage) {
	if m == nil || m.Role != "assistant" {
		return
	}
	p.turns++
	if u := m.Usage; u != nil {
		p.usage.InputTokens += jsonInt(u.Input)
		p.usage.OutputTokens += jsonInt(u.Output)
		p.usage.CacheReadTokens += jsonInt(u.CacheRead)
		p.usage.CacheCreationTokens += jsonInt(u.CacheWrite)
		if u.Cost != nil {
			p.cost += jsonFloat(u.Cost.Total)
		}
	}
	msg := *m
	p.last = &msg
}

// SessionID is the session id seen so far, or "".
func (p *PiParser) SessionID() string { return p.sessionID }

// Result returns the turn's outcome once the stream has ended: the result
// of the last agent_end, with usage and cost summed over every model call
// of the run. The error is an *Error when the last attempt failed, and
// errNoResult when no agent_end was seen or a retry was still under way
// when the stream ended.
func (p *PiParser) Result() (Result, error) {
	res := Result{SessionID: p.sessionID, CostUSD: p.cost, Usage: p.usage, Turns: p.turns}
	if !p.ended || p.retrying {
		return res, errNoResult
	}
	res.PermissionDenials = append([]string(nil), p.denials...)
	msg := p.endMsg
	if msg == nil {
		msg = p.last
	}
	if msg == nil {
		return res, nil
	}
	res.Text = piText(msg.Content)
	if err := classifyPiMessage(msg); err != nil {
		return res, err
	}
	return res, nil
}

// piText joins the text blocks of a message's content.
func piText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		return jsonString(raw)
	}
	if len(raw) == 0 || raw[0] != '[' {
		return ""
	}
	var blocks []piBlock
	if unmarshalLenient(raw, &blocks) != nil {
		return ""
	}
	var texts []string
	for _, b := range blocks {
		if b.Type == "text" && b.Text != "" {
			texts = append(texts, b.Text)
		}
	}
	return strings.Join(texts, "\n\n")
}

// piToolMissing reports whether a failed tool result is pi's "Tool X not
// found", which it returns for a tool that exists but is not enabled.
func piToolMissing(name string, result json.RawMessage) bool {
	var r struct {
		Content json.RawMessage `json:"content"`
	}
	if unmarshalLenient(result, &r) != nil {
		return false
	}
	return piText(r.Content) == "Tool "+name+" not found"
}

// classifyPiMessage returns the failure an assistant message reports, or
// nil. pi marks a failed model call with stopReason "error" and puts the
// SDK's message in errorMessage, e.g. `401 {"type":"error","error":{...}}`.
func classifyPiMessage(m *piMessage) *Error {
	switch m.StopReason {
	case "error":
	case "aborted":
		msg := m.ErrorMessage
		if msg == "" {
			msg = "pi aborted the request"
		}
		return &Error{Kind: KindCanceled, Message: msg}
	default:
		return nil
	}
	msg := m.ErrorMessage
	if msg == "" {
		msg = "pi reported an error without a message"
	}
	return classifyPiText(msg)
}

// piLeadingStatus finds the HTTP status the SDKs put at the start of an
// API error message ("401 {...}", "429 Too many requests").
var piLeadingStatus = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\s*([1-5][0-9][0-9])\b`) })

// classifyPiText turns pi's text for a failure into an *Error with a Kind.
func classifyPiText(msg string) *Error {
	e := &Error{Message: msg}
	if m := piLeadingStatus().FindStringSubmatch(msg); m != nil {
		e.Status, _ = strconv.Atoi(m[1])
	}
	// The JSON body after the status, when there is one, names the type.
	var apiType string
	if i := strings.IndexByte(msg, '{'); i >= 0 {
		var body struct {
			Type  string `json:"type"`
			Error struct {
				Type   string `json:"type"`
				Status string `json:"status"`
			} `json:"error"`
		}
		if json.Unmarshal([]byte(msg[i:]), &body) == nil {
			apiType = body.Error.Type
		}
	}
	switch {
	case piStaleText(msg):
		e.Kind = KindStaleSession
	case piAuthText(msg):
		e.Kind = KindAuth
	case e.Status != 0:
		e.Kind = kindForStatus(e.Status)
	case knownAPIErrorType(apiType) != "":
		e.Kind = knownAPIErrorType(apiType)
	default:
		e.Kind = kindForText(msg)
	}
	return e
}

// pi's own texts for failures that come before any model call: they go to
// stderr (or, for a session of another directory, a question on stdout)
// and pi exits without agent events.
var (
	piStaleTexts = []string{
		"No session found matching",                       // --session with an unknown id
		"Session found in different project",              // the id belongs to another cwd
		"Stored session working directory does not exist", // the session's cwd is gone
	}
	piAuthTexts = []string{
		"No API key found", "No API key for", "No models available", "No model selected",
	}
)

func piStaleText(s string) bool { return piContainsAny(s, piStaleTexts) }
func piAuthText(s string) bool  { return piContainsAny(s, piAuthTexts) }

func piContainsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// piFailure classifies a run that ended without an agent_end from what pi
// printed: the tail of stderr and any non-JSON stdout. It returns nil when
// neither says what went wrong.
func piFailure(stderr, stdout string) *Error {
	all := strings.TrimSpace(stderr + "\n" + stdout)
	switch {
	case all == "":
		return nil
	case piStaleText(all):
		return &Error{Kind: KindStaleSession, Message: lastLine(piFirstMatchLine(all, piStaleTexts), 300)}
	case piAuthText(all):
		return &Error{Kind: KindAuth, Message: lastLine(piFirstMatchLine(all, piAuthTexts), 300)}
	}
	return nil
}

// firstMatchLine returns the first line of s that contains one of subs.
func piFirstMatchLine(s string, subs []string) string {
	for _, line := range strings.Split(s, "\n") {
		if piContainsAny(line, subs) {
			return line
		}
	}
	return s
}
