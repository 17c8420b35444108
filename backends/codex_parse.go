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

// CodexParser turns the lines of `codex exec --json` (codex 0.169.0) into
// events. It is pure: bytes in, events out, no I/O. The zero value is ready
// to use. A CodexParser is not safe for concurrent use; use one per run.
//
// The stream is thread.started{thread_id}, turn.started, item.started /
// item.updated / item.completed{item}, and turn.completed{usage} or
// turn.failed{error}; a top-level error{message} comes before turn.failed,
// and one that reads "Reconnecting... n/m (why)" is codex retrying the
// model API: an EventRetry.
// Items are agent_message{text} (complete messages: codex streams no
// deltas), reasoning, command_execution, file_change, mcp_tool_call,
// web_search, todo_list and error (a warning, such as unknown model
// metadata, that does not end the turn).
//
// Failures are read from the stream, not from the exit code: turn.failed,
// or a top-level error with no turn.completed after it, becomes an *Error
// with a Kind. Failures codex prints only on stderr (a resume of an
// unknown thread) are classified by CodexStderrError.
type CodexParser struct {
	sessionID string
	textSent  bool   // a text event has been returned
	lastText  string // the latest agent_message: the turn's answer
	started   map[string]bool
	lastError string // the latest top-level error message
	warnings  []string
	denials   []string // tools whose items codex declined
	result    *Result
	err       *Error
	events    []Event // reused by Parse
}

// codexLine is the union of the fields codex's lines carry. Fields whose
// type might change between CLI versions are kept raw and read leniently.
type codexLine struct {
	Type     string          `json:"type"`
	ThreadID string          `json:"thread_id"`
	Item     *codexItem      `json:"item"`
	Usage    json.RawMessage `json:"usage"`
	Error    json.RawMessage `json:"error"`
	Message  json.RawMessage `json:"message"`
}

type codexItem struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Text    string `json:"text"`
	Message string `json:"message"`
	Status  string `json:"status"`
	// command_execution
	Command  json.RawMessage `json:"command"`
	ExitCode json.RawMessage `json:"exit_code"`
	// file_change
	Changes json.RawMessage `json:"changes"`
	// mcp_tool_call
	Server    string          `json:"server"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	Error     json.RawMessage `json:"error"`
	// web_search
	Query string `json:"query"`
}

type codexUsage struct {
	InputTokens           json.RawMessage `json:"input_tokens"`
	CachedInputTokens     json.RawMessage `json:"cached_input_tokens"`
	CacheWriteInputTokens json.RawMessage `json:"cache_write_input_tokens"`
	OutputTokens          json.RawMessage `json:"output_tokens"`
}

// Parse reads one line and returns the events it carries, in order. The
// returned slice is reused by the next call. A line that is not a JSON
// object returns an error wrapping errNotJSON and no events; the stream can
// go on. Blank lines and unknown types return nothing.
func (p *CodexParser) Parse(line []byte) ([]Event, error) {
	p.events = p.events[:0]
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil, nil
	}
	if line[0] != '{' {
		return nil, fmt.Errorf("codex stream line: %w", errNotJSON)
	}
	var l codexLine
	if err := unmarshalLenient(line, &l); err != nil {
		return nil, fmt.Errorf("codex stream line: %w: %w", errNotJSON, err)
	}
	if p.result != nil {
		// One turn per run; anything after its end is not this turn's.
		return nil, nil
	}
	switch l.Type {
	case "thread.started":
		if l.ThreadID != "" && l.ThreadID != p.sessionID {
			p.sessionID = l.ThreadID
			p.events = append(p.events, Event{Kind: EventInit, SessionID: l.ThreadID})
		}
	case "item.started", "item.updated":
		if l.Item != nil {
			p.toolStarted(l.Item)
		}
	case "item.completed":
		if l.Item != nil {
			p.itemCompleted(l.Item)
		}
	case "error":
		if msg := jsonString(l.Message); msg != "" {
			p.lastError = msg
			if ev, ok := codexRetry(msg); ok {
				ev.SessionID = p.sessionID
				p.events = append(p.events, ev)
			}
		}
	case "turn.completed":
		p.finish(l.Usage, nil)
	case "turn.failed":
		msg := jsonString(l.Error)
		if msg == "" {
			msg = p.lastError
		}
		if msg == "" {
			msg = "codex reported a failed turn without a message"
		}
		p.finish(l.Usage, classifyCodexMessage(msg))
	}
	if len(p.events) == 0 {
		return nil, nil
	}
	return p.events, nil
}

// codexToolName names the tool an item stands for, or "" if the item is
// not a tool call.
func codexToolName(it *codexItem) string {
	switch it.Type {
	case "command_execution":
		return "exec_command"
	case "file_change":
		return "apply_patch"
	case "mcp_tool_call":
		if it.Server != "" {
			return "mcp__" + it.Server + "__" + it.Tool
		}
		return it.Tool
	case "web_search":
		return "web_search"
	case "collab_tool_call":
		return "collab"
	}
	return ""
}

// codexToolInput is the item's arguments as a JSON object.
func codexToolInput(it *codexItem) string {
	var v any
	switch it.Type {
	case "command_execution":
		v = map[string]any{"command": jsonString(it.Command)}
	case "file_change":
		v = map[string]json.RawMessage{"changes": codexNonNull(it.Changes)}
	case "mcp_tool_call":
		if isJSONNull(it.Arguments) {
			return ""
		}
		return string(it.Arguments)
	case "web_search":
		v = map[string]string{"query": it.Query}
	default:
		return ""
	}
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

func codexNonNull(raw json.RawMessage) json.RawMessage {
	if isJSONNull(raw) || !json.Valid(raw) {
		return json.RawMessage("null")
	}
	return raw
}

// toolStarted announces a tool item the first time it is seen.
func (p *CodexParser) toolStarted(it *codexItem) {
	name := codexToolName(it)
	if name == "" {
		return
	}
	if p.started == nil {
		p.started = map[string]bool{}
	}
	if p.started[it.ID] && it.ID != "" {
		return
	}
	p.started[it.ID] = true
	p.events = append(p.events, Event{Kind: EventToolUse, SessionID: p.sessionID,
		Tool: &ToolCall{ID: it.ID, Name: name, Input: codexToolInput(it)}})
}

func (p *CodexParser) itemCompleted(it *codexItem) {
	switch it.Type {
	case "agent_message":
		p.text(it.Text)
		return
	case "error":
		if msg := codexFirstNonEmpty(it.Message, it.Text); msg != "" {
			p.warnings = append(p.warnings, msg)
		}
		return
	}
	name := codexToolName(it)
	if name == "" {
		return // reasoning, todo_list and the like
	}
	p.toolStarted(it)
	if it.Status == "declined" || it.Status == "rejected" {
		p.denials = append(p.denials, name)
	}
	p.events = append(p.events, Event{Kind: EventToolResult, SessionID: p.sessionID,
		Tool: &ToolCall{ID: it.ID, Name: name, IsError: codexItemFailed(it)}})
}

// codexItemFailed reports whether a finished tool item failed.
func codexItemFailed(it *codexItem) bool {
	switch it.Status {
	case "failed", "declined", "rejected", "error":
		return true
	}
	if !isJSONNull(it.Error) {
		return true
	}
	if it.Type == "command_execution" && !isJSONNull(it.ExitCode) && jsonInt(it.ExitCode) != 0 {
		return true
	}
	return false
}

// text returns a text event for a complete agent message. Concatenated,
// the text events read as a transcript: a message that follows earlier
// text starts with a blank line.
func (p *CodexParser) text(s string) {
	if s == "" {
		return
	}
	p.lastText = s
	if p.textSent {
		s = "\n\n" + s
	}
	p.textSent = true
	p.events = append(p.events, Event{Kind: EventText, SessionID: p.sessionID, Text: s})
}

// finish records the end of the turn. codex 0.169.0 reports on a resumed
// turn the token totals of the whole thread, not of this turn alone.
func (p *CodexParser) finish(usage json.RawMessage, failure *Error) {
	res := Result{SessionID: p.sessionID, Text: p.lastText, PermissionDenials: p.denials}
	var u codexUsage
	if unmarshalLenient(usage, &u) == nil {
		cached := jsonInt(u.CachedInputTokens)
		// OpenAI counts cached tokens inside input_tokens; Usage counts
		// them apart, as Anthropic does.
		res.Usage = Usage{
			InputTokens:         max(jsonInt(u.InputTokens)-cached, 0),
			OutputTokens:        jsonInt(u.OutputTokens),
			CacheReadTokens:     cached,
			CacheCreationTokens: jsonInt(u.CacheWriteInputTokens),
		}
	}
	p.result = &res
	p.err = failure
	p.events = append(p.events, Event{Kind: EventResult, SessionID: res.SessionID, Result: &res, Err: failure})
}

// Finished reports whether turn.completed or turn.failed has been parsed.
func (p *CodexParser) Finished() bool { return p.result != nil }

// SessionID is the thread id seen so far, or "".
func (p *CodexParser) SessionID() string { return p.sessionID }

// Warnings are the messages of error items, which codex reports without
// ending the turn (unknown model metadata and the like).
func (p *CodexParser) Warnings() []string { return p.warnings }

// Result returns the turn's result once turn.completed or turn.failed has
// been parsed. The error is an *Error when the turn failed, or when the
// stream ended after a top-level error without either line. It is a plain
// error wrapping errNoResult when the stream said nothing about the end of
// the turn.
func (p *CodexParser) Result() (Result, error) {
	if p.result == nil {
		res := Result{SessionID: p.sessionID, Text: p.lastText}
		if p.lastError != "" {
			return res, classifyCodexMessage(p.lastError)
		}
		return res, errNoResult
	}
	if p.err != nil {
		return *p.result, p.err
	}
	return *p.result, nil
}

// codex's own texts for the failures the gateway handles specially.
const (
	// codexStaleSession is what `codex exec resume <id>` prints on stderr,
	// with an empty stdout, for a thread it does not know.
	codexStaleSession = "no rollout found for thread id"
	// codexHighDemand is how codex 0.169.0 reports any 5xx from the API:
	// the API's own message is not shown.
	codexHighDemand = "experiencing high demand"
)

// codexStatus finds the HTTP status in codex's "unexpected status 401
// Unauthorized: …" and "exceeded retry limit, last status: 429 …" texts.
// codexReconnecting matches codex's note that it retries the model API:
// "Reconnecting... 2/5 (unexpected status 401 Unauthorized: …)".
var codexReconnecting = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?s)^Reconnecting\.\.\. ([0-9]{1,4})/([0-9]{1,4})(?: \((.*)\))?$`)
})

// codexRetry reads codex's "Reconnecting... n/m (why)" message as an
// EventRetry.
func codexRetry(msg string) (Event, bool) {
	m := codexReconnecting().FindStringSubmatch(msg)
	if m == nil {
		return Event{}, false
	}
	attempt, _ := strconv.Atoi(m[1])
	maxAttempts, _ := strconv.Atoi(m[2])
	why := m[3]
	if why == "" {
		why = msg
	}
	return Event{Kind: EventRetry, Attempt: attempt, MaxAttempts: maxAttempts, Err: classifyCodexMessage(why)}, true
}

var codexStatus = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?:unexpected status|last status:?) ([1-5][0-9][0-9])\b`)
})

// classifyCodexMessage turns codex's description of a failed turn into an
// *Error.
func classifyCodexMessage(msg string) *Error {
	e := &Error{Message: msg}
	lower := strings.ToLower(msg)
	switch {
	case strings.Contains(lower, codexStaleSession), strings.Contains(lower, "thread not found"):
		e.Kind = KindStaleSession
	case strings.Contains(lower, "missing environment variable"), strings.Contains(lower, "not logged in"),
		strings.Contains(lower, "codex login"), strings.Contains(lower, "incorrect api key"):
		e.Kind = KindAuth
		if m := codexStatus().FindStringSubmatch(msg); m != nil {
			e.Status, _ = strconv.Atoi(m[1])
		}
	case codexStatus().MatchString(msg):
		e.Status, _ = strconv.Atoi(codexStatus().FindStringSubmatch(msg)[1])
		e.Kind = kindForStatus(e.Status)
	case strings.Contains(lower, codexHighDemand):
		e.Kind = KindAPI
	case strings.Contains(lower, "quota"), strings.Contains(lower, "usage limit"):
		e.Kind = KindRateLimit
		e.ResetAt = codexUsageReset(msg, time.Now(), time.Local)
	case strings.Contains(lower, "context window"), strings.Contains(lower, "context_length_exceeded"):
		e.Kind = KindInvalid
	case strings.Contains(lower, "stream disconnected"), strings.Contains(lower, "error sending request"):
		e.Kind = KindAPI
	default:
		e.Kind = kindForText(msg)
	}
	return e
}

// CodexStderrError classifies what codex printed on stderr when its
// stdout stream said nothing about the turn: a resume of an unknown thread
// ("Error: thread/resume: … no rollout found for thread id …"), a config
// file it cannot load, and the like. It returns nil when stderr holds no
// error codex is known to print.
func CodexStderrError(stderr string) *Error {
	var errLine string
	for _, line := range strings.Split(stderr, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "Error") || strings.Contains(line, codexStaleSession) {
			errLine = line
		}
	}
	if errLine == "" {
		return nil
	}
	if strings.Contains(errLine, codexStaleSession) || strings.Contains(errLine, "thread/resume failed") {
		return &Error{Kind: KindStaleSession, Message: errLine}
	}
	if strings.HasPrefix(errLine, "Error loading config") {
		return &Error{Kind: KindInvalid, Message: errLine + " (check config.toml in CODEX_HOME)"}
	}
	e := classifyCodexMessage(strings.TrimSpace(strings.TrimPrefix(errLine, "Error:")))
	if e.Kind == KindExecution {
		e.Kind = KindCrashed
	}
	e.Message = errLine
	return e
}

func codexFirstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
