package backends

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// GeminiParser turns the lines of `gemini -p … -o stream-json` into
// events. It is pure: bytes in, events out, no I/O. The zero value is ready
// to use; use one per run, not concurrently.
//
// The stream (gemini 0.61.0) is one JSON object per line:
//
//	init        {session_id, model}
//	message     {role:"user"|"assistant", content, delta:true}
//	tool_use    {tool_name, tool_id, parameters}
//	tool_result {tool_id, status:"success"|"error", output, error{type,message}}
//	error       {severity:"warning"|"error", message}
//	result      {status:"success"|"error", error{type,message}, stats{…}}
//
// Failures are read from the stream, not the exit code (which is the HTTP
// status mod 256 for API errors): a result with status "error" becomes an
// *Error with a Kind. A result line with status "error" but no error object
// (an invalid model stream) takes its message from the last error line.
// Unknown line types are ignored. The reply (Result.Text) is the assistant
// text after the last tool call, like claude's result; all of it is streamed
// as EventText.
type GeminiParser struct {
	sessionID string
	textSent  bool            // a text event has been returned
	afterTool bool            // a tool event came after the last text
	reply     strings.Builder // assistant text since the last tool call
	toolNames map[string]string
	turns     int  // model responses seen
	inTurn    bool // the current model response has produced output
	denials   []string
	lastError string // message of the last "error" line
	result    *Result
	err       *Error
	events    []Event // reused by Parse
}

// geminiLine is the union of the fields gemini's lines carry. Fields whose
// type might change between versions are kept raw and read leniently.
type geminiLine struct {
	Type      string `json:"type"`
	SessionID string `json:"session_id"`
	// message
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	// tool_use, tool_result
	ToolName   string          `json:"tool_name"`
	ToolID     string          `json:"tool_id"`
	Parameters json.RawMessage `json:"parameters"`
	Status     string          `json:"status"`
	// error
	Severity string          `json:"severity"`
	Message  json.RawMessage `json:"message"`
	// tool_result, result
	Error json.RawMessage `json:"error"`
	Stats json.RawMessage `json:"stats"`
}

type geminiStats struct {
	InputTokens  json.RawMessage `json:"input_tokens"`
	OutputTokens json.RawMessage `json:"output_tokens"`
	Cached       json.RawMessage `json:"cached"`
	Input        json.RawMessage `json:"input"`
	DurationMS   json.RawMessage `json:"duration_ms"`
}

// Parse reads one line and returns the events it carries, in order. The
// returned slice is reused by the next call. A line that is not a JSON
// object returns an error wrapping errNotJSON and no events; the stream can
// go on (gemini prints warnings on stdout now and then).
func (p *GeminiParser) Parse(line []byte) ([]Event, error) {
	p.events = p.events[:0]
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil, nil
	}
	if line[0] != '{' {
		return nil, fmt.Errorf("gemini stream line: %w", errNotJSON)
	}
	var l geminiLine
	if err := unmarshalLenient(line, &l); err != nil {
		return nil, fmt.Errorf("gemini stream line: %w: %w", errNotJSON, err)
	}
	if p.result != nil {
		return nil, nil // one result per run
	}
	p.noteSession(l.SessionID)
	switch l.Type {
	case "message":
		if l.Role == "assistant" {
			var text string
			if json.Unmarshal(l.Content, &text) == nil {
				p.text(text)
			}
		}
	case "tool_use":
		p.toolUse(&l)
	case "tool_result":
		p.toolResult(&l)
	case "error":
		var msg string
		if json.Unmarshal(l.Message, &msg) == nil && msg != "" {
			p.lastError = msg
		}
	case "result":
		p.parseResult(&l)
	}
	if len(p.events) == 0 {
		return nil, nil
	}
	return p.events, nil
}

func (p *GeminiParser) noteSession(id string) {
	if id == "" || id == p.sessionID {
		return
	}
	p.sessionID = id
	p.events = append(p.events, Event{Kind: EventInit, SessionID: id})
}

// output notes that the model produced something; the first output after
// a tool result starts a new model response.
func (p *GeminiParser) output() {
	if !p.inTurn {
		p.inTurn = true
		p.turns++
	}
}

// text returns a text event. Text that follows a tool call starts with a
// blank line, so the concatenated events read as a transcript.
func (p *GeminiParser) text(s string) {
	if s == "" {
		return
	}
	p.output()
	if p.afterTool {
		p.afterTool = false
		p.reply.Reset() // the reply is what comes after the last tool call
	}
	p.reply.WriteString(s)
	if p.reply.Len() == len(s) && p.textSent {
		s = "\n\n" + s // the first text of a new block
	}
	p.textSent = true
	p.events = append(p.events, Event{Kind: EventText, SessionID: p.sessionID, Text: s})
}

func (p *GeminiParser) toolUse(l *geminiLine) {
	p.output()
	p.afterTool = true
	if p.toolNames == nil {
		p.toolNames = map[string]string{}
	}
	p.toolNames[l.ToolID] = l.ToolName
	input := ""
	if !isJSONNull(l.Parameters) {
		input = string(l.Parameters)
	}
	p.events = append(p.events, Event{Kind: EventToolUse, SessionID: p.sessionID,
		Tool: &ToolCall{ID: l.ToolID, Name: l.ToolName, Input: input}})
}

func (p *GeminiParser) toolResult(l *geminiLine) {
	p.inTurn = false // the model answers the tool result in a new response
	p.afterTool = true
	name := p.toolNames[l.ToolID]
	failed := l.Status == "error"
	if failed && geminiDenied(l.Error) {
		p.denials = append(p.denials, name)
	}
	p.events = append(p.events, Event{Kind: EventToolResult, SessionID: p.sessionID,
		Tool: &ToolCall{ID: l.ToolID, Name: name, IsError: failed}})
}

// geminiDenied reports whether a tool error says the tool was refused (by
// the approval mode or a policy) rather than failed.
func geminiDenied(raw json.RawMessage) bool {
	var e struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &e) != nil {
		return false
	}
	s := strings.ToLower(e.Type + " " + e.Message)
	for _, w := range []string{"access denied", "policy", "not allowed", "permission denied", "denied by", "plan mode"} {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

func (p *GeminiParser) parseResult(l *geminiLine) {
	res := Result{
		SessionID:         p.sessionID,
		Text:              p.reply.String(),
		Turns:             p.turns,
		PermissionDenials: p.denials,
	}
	if p.afterTool {
		res.Text = "" // the run ended on a tool call: no final message
	}
	var st geminiStats
	if unmarshalLenient(l.Stats, &st) == nil {
		prompt, cached := jsonInt(st.InputTokens), jsonInt(st.Cached)
		input := prompt - cached
		if !isJSONNull(st.Input) {
			input = jsonInt(st.Input)
		}
		res.Usage = Usage{InputTokens: input, OutputTokens: jsonInt(st.OutputTokens), CacheReadTokens: cached}
		res.Duration = time.Duration(jsonInt(st.DurationMS)) * time.Millisecond
	}
	if l.Status == "error" {
		p.err = classifyGeminiError(l.Error, p.lastError)
	} else if l.Status != "success" && l.Status != "" {
		p.err = &Error{Kind: KindExecution, Message: "gemini result status " + strconv.Quote(l.Status)}
	}
	if p.err == nil && res.Turns == 0 {
		res.Turns = 1
	}
	p.result = &res
	p.events = append(p.events, Event{Kind: EventResult, SessionID: res.SessionID, Result: &res, Err: p.err})
}

// SessionID is the session id seen so far, or "".
func (p *GeminiParser) SessionID() string { return p.sessionID }

// Result returns the turn's result once the result line has been parsed.
// The error is an *Error when the result reports a failure, and errNoResult
// when no result line was seen (see ClassifyGeminiStderr for that case).
func (p *GeminiParser) Result() (Result, error) {
	if p.result == nil {
		return Result{SessionID: p.sessionID}, errNoResult
	}
	if p.err != nil {
		return *p.result, p.err
	}
	return *p.result, nil
}

// classifyGeminiError reads a result's error object
// {"type":…,"message":…}. gemini 0.61.0 types API errors "unknown" and puts
// the API's body in the message ("[API Error: {\"error\":{\"code\":401,…}}]"),
// so the kind comes from the code or status word in there, then from the
// type, then from the words.
func classifyGeminiError(raw json.RawMessage, lastError string) *Error {
	var obj struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	if unmarshalLenient(raw, &obj) != nil || (obj.Type == "" && obj.Message == "") {
		obj.Message = jsonString(raw)
	}
	msg := obj.Message
	if msg == "" {
		msg = lastError
	}
	if msg == "" {
		msg = "gemini reported an error without a message"
	}
	e := &Error{Message: msg}
	if m := geminiCode().FindStringSubmatch(msg); m != nil {
		e.Status, _ = strconv.Atoi(m[1])
	}
	switch {
	case e.Status != 0:
		e.Kind = kindForStatus(e.Status)
	case geminiStatusKind(msg) != "":
		e.Kind = geminiStatusKind(msg)
	case obj.Type == "FatalTurnLimitedError":
		e.Kind = KindMaxTurns
	case obj.Type == "FatalAuthenticationError":
		e.Kind = KindAuth
	case obj.Type == "FatalCancellationError":
		e.Kind = KindCanceled
	default:
		e.Kind = geminiKindForText(msg)
	}
	return e
}

// geminiCode finds the HTTP status in an API error body quoted in a message.
var geminiCode = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`"code"\s*:\s*([1-5][0-9][0-9])\b`) })

// geminiStatusKind maps the google.rpc status words in a message to a kind,
// or "".
func geminiStatusKind(msg string) ErrorKind {
	switch {
	case strings.Contains(msg, "UNAUTHENTICATED"), strings.Contains(msg, "PERMISSION_DENIED"):
		return KindAuth
	case strings.Contains(msg, "RESOURCE_EXHAUSTED"):
		return KindRateLimit
	case strings.Contains(msg, "INVALID_ARGUMENT"), strings.Contains(msg, "FAILED_PRECONDITION"):
		return KindInvalid
	case strings.Contains(msg, "UNAVAILABLE"), strings.Contains(msg, "INTERNAL"), strings.Contains(msg, "DEADLINE_EXCEEDED"):
		return KindAPI
	}
	return ""
}

// geminiKindForText classifies by the words gemini and the Gemini API use
// ("API key not valid", "Resource exhausted", quota), then as kindForText.
func geminiKindForText(msg string) ErrorKind {
	l := strings.ToLower(msg)
	switch {
	case strings.Contains(l, "resource exhausted"), strings.Contains(l, "quota"):
		return KindRateLimit // before auth: its advice mentions "/auth method"
	case strings.Contains(l, "api key not valid"), strings.Contains(l, "api_key_invalid"),
		strings.Contains(l, "please set an auth method"), strings.Contains(l, "invalid auth method"):
		return KindAuth
	case strings.Contains(l, "max session turns"), strings.Contains(l, "maximum session turns"):
		return KindMaxTurns
	case strings.Contains(l, "fetch failed"):
		return KindAPI
	}
	return kindForText(msg)
}

// gemini's own texts for failures that come without a result line.
const (
	geminiStaleSession = "Error resuming session"
	geminiBadSession   = "Invalid session identifier"
	geminiNoSessions   = "No previous sessions found"
	geminiUntrusted    = "trusted folder"
	geminiAuthMissing  = "Please set an Auth method"
	geminiAuthInvalid  = "Invalid auth method"
)

// ClassifyGeminiStderr reads the failures gemini reports only on stderr,
// before any stream line: a resume of a session it does not know (exit 42),
// missing or wrong auth settings (exit 41), an untrusted folder (exit 55).
// It returns nil when stderr says none of these.
func ClassifyGeminiStderr(stderr string) *Error {
	switch {
	case strings.Contains(stderr, geminiStaleSession), strings.Contains(stderr, geminiBadSession),
		strings.Contains(stderr, geminiNoSessions):
		return &Error{Kind: KindStaleSession, Message: lastLineWith(stderr, geminiStaleSession, geminiBadSession, geminiNoSessions)}
	case strings.Contains(stderr, geminiAuthMissing), strings.Contains(stderr, geminiAuthInvalid):
		return &Error{Kind: KindAuth, Message: lastLineWith(stderr, geminiAuthMissing, geminiAuthInvalid)}
	case strings.Contains(strings.ToLower(stderr), geminiUntrusted):
		return &Error{Kind: KindPermission, Message: "gemini refuses to run in an untrusted folder: " + lastLineWith(stderr, "trusted")}
	}
	// An API error in -o json mode, or printed before the stream started.
	if strings.Contains(stderr, `"error"`) {
		if m := geminiCode().FindStringSubmatch(stderr); m != nil {
			status, _ := strconv.Atoi(m[1])
			return &Error{Kind: kindForStatus(status), Status: status, Message: lastLineWith(stderr, `"error"`)}
		}
	}
	return nil
}

// lastLineWith returns the last line of s containing one of subs, trimmed
// and cut to 300 bytes, or "".
func lastLineWith(s string, subs ...string) string {
	lines := strings.Split(s, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		for _, sub := range subs {
			if strings.Contains(lines[i], sub) {
				return lastLine(lines[i], 300)
			}
		}
	}
	return ""
}
