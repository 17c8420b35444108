package backends

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// errNoResult means a stream ended without a result line.
var errNoResult = errors.New("stream ended without a result")

// errNotJSON marks a line that is not a JSON object; callers skip it.
var errNotJSON = errors.New("not a JSON object")

// ClaudeParser turns the lines of `claude -p --output-format stream-json
// --verbose [--include-partial-messages]` into events. It is pure: bytes
// in, events out, no I/O. The zero value is ready to use. A ClaudeParser is
// not safe for concurrent use; use one per run.
//
// Failures are read from the stream, not from the exit code: a result line
// with is_error (even with subtype "success") or an error subtype becomes an
// *Error with a Kind. Unknown line types are ignored.
type ClaudeParser struct {
	sessionID string
	// deltaMsgs holds the ids of messages whose text arrived as partial
	// deltas, so the complete assistant message does not repeat it.
	deltaMsgs map[string]bool
	anyDeltas bool   // some text arrived as deltas
	curMsg    string // id from the latest message_start stream event
	textSent  bool   // a text event has been returned
	newBlock  bool   // the next text starts a new block
	toolNames map[string]string
	result    *Result
	err       *Error
	events    []Event // reused by Parse
	// retry is the model API call claude is retrying, if the model has
	// not answered since; fatal is set once those retries cannot succeed.
	retry claudeRetry
	fatal *Error
	// answered is set once the model API streamed anything, thinking
	// included.
	answered bool
	// model and keySource are what system/init said.
	model, keySource string
	// limit is the usage limit a rate_limit_event or an API error line
	// said refuses the login's requests, if one did.
	limit claudeLimit
	// context is the input of the run's latest model call of its own (not
	// a subagent's), cache included: how full the session's context is;
	// callModel is the model that call went to.
	context   int64
	callModel string
	// compacted is set once the session's context was compacted in this
	// run (system/compact_boundary).
	compacted bool
}

// claudeRetry is what claude's system/api_retry lines said since the model
// last answered.
type claudeRetry struct {
	active   bool
	attempt  int64
	max      int64
	status   int    // HTTP status; 0 when no response came back
	reason   string // claude's word for it: "authentication_failed", "unknown", ...
	connFail int    // retries in a row that got no HTTP response
}

// claudeUnreachableAfter is how many retries in a row without any HTTP
// response make the model API unreachable. claude's default backoff
// (0.5 s, 1 s, 2 s, 4.5 s, ...) reaches the fifth after about 8 s, long
// enough to ride out a blip and far short of claude's own ten attempts
// (over two minutes).
const claudeUnreachableAfter = 5

// claudeLine is the union of the fields claude's lines carry. Fields whose
// type might change between CLI versions are kept raw and read leniently, so
// one odd field does not cost the whole line.
type claudeLine struct {
	Type            string          `json:"type"`
	Subtype         string          `json:"subtype"`
	SessionID       string          `json:"session_id"`
	ParentToolUseID json.RawMessage `json:"parent_tool_use_id"`

	// stream_event
	Event *claudeStreamEvent `json:"event"`

	// assistant, user
	Message           *claudeMessage `json:"message"`
	IsAPIErrorMessage bool           `json:"is_api_error_message"`

	// result
	IsError           bool            `json:"is_error"`
	Result            json.RawMessage `json:"result"`
	TotalCostUSD      json.RawMessage `json:"total_cost_usd"`
	Usage             json.RawMessage `json:"usage"`
	NumTurns          json.RawMessage `json:"num_turns"`
	DurationMS        json.RawMessage `json:"duration_ms"`
	PermissionDenials json.RawMessage `json:"permission_denials"`
	Errors            json.RawMessage `json:"errors"`
	APIErrorStatus    json.RawMessage `json:"api_error_status"`
	APIErrorType      json.RawMessage `json:"api_error_type"`
	APIError          json.RawMessage `json:"api_error"`
	APIErrorParams    json.RawMessage `json:"api_error_params"`

	// rate_limit_event
	RateLimitInfo json.RawMessage `json:"rate_limit_info"`
	ModelUsage    json.RawMessage `json:"modelUsage"`

	// system/compact_boundary
	CompactMetadata *struct {
		PostTokens json.RawMessage `json:"post_tokens"`
	} `json:"compact_metadata"`

	// system/init
	Model        string `json:"model"`
	APIKeySource string `json:"apiKeySource"`

	// system/api_retry (and "error" on assistant API-error lines)
	Attempt     json.RawMessage `json:"attempt"`
	MaxRetries  json.RawMessage `json:"max_retries"`
	ErrorStatus json.RawMessage `json:"error_status"`
	Error       json.RawMessage `json:"error"`
}

type claudeStreamEvent struct {
	Type    string `json:"type"`
	Message *struct {
		ID string `json:"id"`
	} `json:"message"`
	ContentBlock *struct {
		Type string `json:"type"`
	} `json:"content_block"`
	Delta *struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"delta"`
}

type claudeMessage struct {
	ID      string          `json:"id"`
	Model   string          `json:"model"`
	Content json.RawMessage `json:"content"` // a string or an array of blocks
	Usage   json.RawMessage `json:"usage"`
}

type claudeBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	IsError   bool            `json:"is_error"`
}

type claudeUsage struct {
	InputTokens              json.RawMessage `json:"input_tokens"`
	OutputTokens             json.RawMessage `json:"output_tokens"`
	CacheReadInputTokens     json.RawMessage `json:"cache_read_input_tokens"`
	CacheCreationInputTokens json.RawMessage `json:"cache_creation_input_tokens"`
}

// Parse reads one line and returns the events it carries, in order. The
// returned slice is reused by the next call. A line that is not a JSON
// object returns an error wrapping errNotJSON and no events; the stream can
// go on. Blank lines and unknown types return nothing.
func (p *ClaudeParser) Parse(line []byte) ([]Event, error) {
	p.events = p.events[:0]
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil, nil
	}
	if line[0] != '{' {
		return nil, fmt.Errorf("claude stream line: %w", errNotJSON)
	}
	var l claudeLine
	if err := unmarshalLenient(line, &l); err != nil {
		return nil, fmt.Errorf("claude stream line: %w: %w", errNotJSON, err)
	}
	if p.result != nil {
		// One result per run; anything after it is not this turn's.
		return nil, nil
	}
	p.noteSession(l.SessionID)
	sub := !isJSONNull(l.ParentToolUseID) // from a subagent

	// system/init carries the session id; noteSession has announced it.
	switch l.Type {
	case "system":
		switch l.Subtype {
		case "api_retry":
			p.apiRetry(&l)
		case "init":
			p.init(&l)
		case "compact_boundary":
			p.compactBoundary(&l)
		}
	case "rate_limit_event":
		p.limit.note(l.RateLimitInfo)
	case "stream_event":
		p.streamEvent(l.Event, sub)
	case "assistant":
		p.assistant(&l, sub)
	case "user":
		p.user(&l)
	case "result":
		p.parseResult(&l)
	}
	if len(p.events) == 0 {
		return nil, nil
	}
	return p.events, nil
}

// noteSession records the session id and announces it (EventInit) the
// first time it is seen or when it changes.
func (p *ClaudeParser) noteSession(id string) {
	if id == "" || id == p.sessionID {
		return
	}
	p.sessionID = id
	p.events = append(p.events, Event{Kind: EventInit, SessionID: id})
}

// init reads system/init: the model and the source of the credentials,
// announced on the run's EventInit.
func (p *ClaudeParser) init(l *claudeLine) {
	p.model, p.keySource = l.Model, l.APIKeySource
	for i := range p.events {
		if p.events[i].Kind == EventInit {
			p.events[i].Model, p.events[i].KeySource = p.model, p.keySource
			return
		}
	}
	if p.sessionID != "" {
		p.events = append(p.events, Event{Kind: EventInit, SessionID: p.sessionID, Model: p.model, KeySource: p.keySource})
	}
}

// claudeSubscription is claude's apiKeySource when it runs on a login
// rather than an API key: its costs are estimates.
const claudeSubscription = "none"

func (p *ClaudeParser) streamEvent(ev *claudeStreamEvent, sub bool) {
	if ev == nil {
		return
	}
	p.retry = claudeRetry{} // the model API answered
	p.answered = true
	switch ev.Type {
	case "message_start":
		if ev.Message != nil {
			p.curMsg = ev.Message.ID
		}
	case "content_block_start":
		if ev.ContentBlock == nil || sub {
			return
		}
		switch ev.ContentBlock.Type {
		case "text":
			p.newBlock = true
		case "thinking", "redacted_thinking":
			p.events = append(p.events, Event{Kind: EventThinking, SessionID: p.sessionID})
		}
	case "content_block_delta":
		if ev.Delta == nil || ev.Delta.Type != "text_delta" || sub {
			return
		}
		if p.deltaMsgs == nil {
			p.deltaMsgs = map[string]bool{}
		}
		p.deltaMsgs[p.curMsg] = true
		p.anyDeltas = true
		p.text(ev.Delta.Text)
	}
}

// text returns a text event. Concatenated, the text events of a run read
// as a transcript: a block that follows earlier text starts with a blank
// line, so "I'll check." and "Done." do not run together.
func (p *ClaudeParser) text(s string) {
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

func (p *ClaudeParser) assistant(l *claudeLine, sub bool) {
	if l.Message == nil {
		return
	}
	if !l.IsAPIErrorMessage && l.Message.Model != "<synthetic>" {
		p.retry = claudeRetry{} // the model API answered
		p.answered = true
		if !sub {
			p.noteContext(l.Message)
		}
	}
	if l.IsAPIErrorMessage {
		p.limit.noteParams(l.APIErrorParams)
	}
	blocks := contentBlocks(l.Message.Content)
	// Text already streamed as deltas is not repeated. API errors show up as
	// synthetic assistant text; the result line reports them properly.
	skipText := sub || l.IsAPIErrorMessage || l.Message.Model == "<synthetic>" ||
		p.deltaMsgs[l.Message.ID] || (l.Message.ID == "" && p.anyDeltas)
	for _, b := range blocks {
		switch b.Type {
		case "text":
			if !skipText {
				p.newBlock = true
				p.text(b.Text)
			}
		case "tool_use":
			if p.toolNames == nil {
				p.toolNames = map[string]string{}
			}
			if _, seen := p.toolNames[b.ID]; seen && b.ID != "" {
				continue
			}
			p.toolNames[b.ID] = b.Name
			input := ""
			if !isJSONNull(b.Input) {
				input = string(b.Input)
			}
			p.events = append(p.events, Event{Kind: EventToolUse, SessionID: p.sessionID,
				Tool: &ToolCall{ID: b.ID, Name: b.Name, Input: input}})
		}
	}
}

func (p *ClaudeParser) user(l *claudeLine) {
	if l.Message == nil {
		return
	}
	for _, b := range contentBlocks(l.Message.Content) {
		if b.Type != "tool_result" {
			continue
		}
		p.events = append(p.events, Event{Kind: EventToolResult, SessionID: p.sessionID,
			Tool: &ToolCall{ID: b.ToolUseID, Name: p.toolNames[b.ToolUseID], IsError: b.IsError}})
	}
}

// parseResult reads the result line. Note that claude 2.1.330 reports
// total_cost_usd for the whole session (a resumed run includes the earlier
// runs), while usage and num_turns are this run's.
func (p *ClaudeParser) parseResult(l *claudeLine) {
	res := Result{
		SessionID:         l.SessionID,
		Text:              jsonString(l.Result),
		CostUSD:           jsonFloat(l.TotalCostUSD),
		SessionCostUSD:    jsonFloat(l.TotalCostUSD),
		Turns:             int(jsonInt(l.NumTurns)),
		Duration:          time.Duration(jsonInt(l.DurationMS)) * time.Millisecond,
		PermissionDenials: permissionDenials(l.PermissionDenials),
	}
	if res.SessionID == "" {
		res.SessionID = p.sessionID
	}
	res.Model = p.model
	res.CostEstimated = p.keySource == claudeSubscription
	var u claudeUsage
	if json.Unmarshal(l.Usage, &u) == nil {
		res.Usage = Usage{
			InputTokens:         jsonInt(u.InputTokens),
			OutputTokens:        jsonInt(u.OutputTokens),
			CacheReadTokens:     jsonInt(u.CacheReadInputTokens),
			CacheCreationTokens: jsonInt(u.CacheCreationInputTokens),
		}
	}
	res.ContextTokens = p.context
	res.Compacted = p.compacted
	res.ContextWindow = contextWindowReported(l.ModelUsage, p.callModel, p.model)
	p.result = &res
	p.err = classifyClaudeResult(l, res.Text)
	if p.err != nil && p.err.Kind == KindRateLimit {
		p.limit.noteParams(l.APIErrorParams)
		p.limit.noteText(res.Text)
		p.err.ResetAt, p.err.LimitWindow = p.limit.resetAt, p.limit.window
	}
	p.events = append(p.events, Event{Kind: EventResult, SessionID: res.SessionID, Result: &res, Err: p.err})
}

// noteContext keeps the context size an assistant line reports: its
// usage is that of the call's message_start, whose input tokens (plain,
// cache read and cache written) are everything the model was sent.
func (p *ClaudeParser) noteContext(m *claudeMessage) {
	var u claudeUsage
	if len(m.Usage) == 0 || json.Unmarshal(m.Usage, &u) != nil {
		return
	}
	if n := jsonInt(u.InputTokens) + jsonInt(u.CacheReadInputTokens) + jsonInt(u.CacheCreationInputTokens); n > 0 {
		p.context, p.callModel = n, m.Model
	}
}

// compactBoundary reads system/compact_boundary: claude summarised the
// conversation (/compact, or on its own when the context is full), and
// compact_metadata.post_tokens is the size of what is left until the next
// model call says otherwise.
func (p *ClaudeParser) compactBoundary(l *claudeLine) {
	p.compacted = true
	if l.CompactMetadata != nil {
		if n := jsonInt(l.CompactMetadata.PostTokens); n > 0 {
			p.context = n
		}
	}
}

// contextWindowReported reads the context window of a result's
// modelUsage (model name to usage, contextWindow among them): that of
// the model of the last call, else of the session's model, else the
// largest (a subagent's smaller model must not shrink it).
func contextWindowReported(raw json.RawMessage, models ...string) int64 {
	var usage map[string]struct {
		ContextWindow json.RawMessage `json:"contextWindow"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &usage) != nil {
		return 0
	}
	for _, m := range models {
		if u, ok := usage[m]; ok && m != "" {
			if w := jsonInt(u.ContextWindow); w > 0 {
				return w
			}
		}
	}
	var largest int64
	for _, u := range usage {
		largest = max(largest, jsonInt(u.ContextWindow))
	}
	return largest
}

// apiRetry reads a system/api_retry line: claude failed to call the model
// API and will try again after a delay. A refused key is refused again on
// every attempt, and claude's default of ten attempts with backoff takes
// minutes, so that ends the turn at once (Fatal); so does a model API that
// gave no HTTP response claudeUnreachableAfter times in a row.
func (p *ClaudeParser) apiRetry(l *claudeLine) {
	r := claudeRetry{
		active:   true,
		attempt:  jsonInt(l.Attempt),
		max:      jsonInt(l.MaxRetries),
		status:   int(jsonInt(l.ErrorStatus)),
		reason:   jsonString(l.Error),
		connFail: p.retry.connFail,
	}
	if r.status == 0 {
		r.connFail++
	} else {
		r.connFail = 0
	}
	p.retry = r
	p.events = append(p.events, Event{Kind: EventRetry, SessionID: p.sessionID, Err: r.err(),
		Attempt: int(r.attempt), MaxAttempts: int(r.max)})
	if p.fatal != nil {
		return
	}
	if e := r.err(); e.Kind == KindAuth || r.connFail >= claudeUnreachableAfter {
		p.fatal = e
	}
}

// err describes the failure being retried: a refused key, no response at
// all, or the kind of the HTTP status.
func (r claudeRetry) err() *Error {
	at := fmt.Sprintf("claude was retrying, attempt %d of %d", r.attempt, r.max)
	switch {
	case r.status == 401 || r.status == 403 || r.reason == "authentication_failed":
		return &Error{Kind: KindAuth, Status: r.status,
			Message: fmt.Sprintf("the model API refused the credentials (%s); %s", r.reason, at)}
	case r.status == 0:
		return &Error{Kind: KindUnreachable,
			Message: fmt.Sprintf("could not reach the model API: %d attempts in a row got no response (%s); %s", r.connFail, r.reason, at)}
	}
	return &Error{Kind: kindForStatus(r.status), Status: r.status,
		Message: fmt.Sprintf("the model API kept failing (%s); %s", r.reason, at)}
}

// Fatal returns the failure that dooms the turn before claude gives up by
// itself (a refused key, an unreachable model API), or nil. The caller
// should stop claude and report it.
func (p *ClaudeParser) Fatal() *Error { return p.fatal }

// Retrying returns the model API failure claude was still retrying when
// the stream ended, or nil if the model answered since: what to report
// instead of a bare timeout. The model API was unreachable when the latest
// retries got no HTTP response.
func (p *ClaudeParser) Retrying() *Error {
	if !p.retry.active {
		return nil
	}
	return p.retry.err()
}

// Answered reports whether the model API has streamed anything this run
// (a message start, thinking, text or a tool call), as opposed to nothing
// but retries or silence.
func (p *ClaudeParser) Answered() bool { return p.answered }

// SessionID is the session id seen so far, or "".
func (p *ClaudeParser) SessionID() string { return p.sessionID }

// Result returns the turn's result once the result line has been parsed.
// The error is an *Error when the result reports a failure, and a plain
// error when no result line was seen.
func (p *ClaudeParser) Result() (Result, error) {
	if p.result == nil {
		return Result{SessionID: p.sessionID}, errNoResult
	}
	if p.err != nil {
		return *p.result, p.err
	}
	return *p.result, nil
}

// Claude's own texts for the failures the gateway handles specially.
const (
	claudeStaleSession = "No conversation found with session ID"
	claudeRootRefusal  = "cannot be used with root/sudo privileges"
	// claudeConnectionFailed is the api_error of a result after retries
	// that never got an HTTP response (testdata/claude/unreachable_full.jsonl).
	claudeConnectionFailed = "connection_failed"
)

// rootRefusalMessage tells the operator what to do about claude refusing
// bypassPermissions as root.
const rootRefusalMessage = "claude refuses bypassPermissions when running as root: set IS_SANDBOX=1 if this is a sandbox/container, or set PERMISSION_MODE=acceptEdits"

// classifyClaudeResult returns the failure a result line reports, or nil.
func classifyClaudeResult(l *claudeLine, text string) *Error {
	errs := errorTexts(l.Errors)
	failed := l.IsError || strings.HasPrefix(l.Subtype, "error")
	if !failed {
		return nil
	}
	msgs := make([]string, 0, len(errs)+1)
	if text != "" {
		msgs = append(msgs, text)
	}
	msgs = append(msgs, errs...)
	if apiErr := jsonString(l.APIError); apiErr != "" && !containsFold(msgs, apiErr) {
		msgs = append(msgs, apiErr)
	}
	e := &Error{Message: strings.Join(msgs, "; "), Status: int(jsonInt(l.APIErrorStatus))}
	all := strings.Join(msgs, "\n")
	switch {
	case l.Subtype == "error_max_turns":
		e.Kind = KindMaxTurns
	case strings.Contains(all, claudeStaleSession):
		e.Kind = KindStaleSession
	case strings.Contains(all, claudeRootRefusal):
		e.Kind = KindPermission
		e.Message = rootRefusalMessage + " (" + e.Message + ")"
	case e.Status == 0 && jsonString(l.APIError) == claudeConnectionFailed:
		e.Kind = KindUnreachable
	case e.Status != 0:
		e.Kind = kindForStatus(e.Status)
	case knownAPIErrorType(jsonString(l.APIErrorType)) != "":
		e.Kind = knownAPIErrorType(jsonString(l.APIErrorType))
	default:
		if m := apiErrorStatus().FindStringSubmatch(all); m != nil {
			e.Status, _ = strconv.Atoi(m[1])
			e.Kind = kindForStatus(e.Status)
		} else {
			e.Kind = kindForText(all)
		}
	}
	return e
}

// apiErrorStatus finds the status in claude's "API Error: 401 {...}" text.
var apiErrorStatus = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`API Error: ([1-5][0-9][0-9])\b`) })

// knownAPIErrorType returns the kind named by an Anthropic API error type
// ("authentication_error", ...), or "" for other types.
func knownAPIErrorType(t string) ErrorKind {
	switch ErrorKind(t) {
	case KindAuth, KindRateLimit, KindOverloaded, KindInvalid, KindAPI:
		return ErrorKind(t)
	case "permission_error":
		return KindAuth
	}
	return ""
}

// kindForStatus maps a model API HTTP status to an ErrorKind.
func kindForStatus(status int) ErrorKind {
	switch {
	case status == 401 || status == 403:
		return KindAuth
	case status == 429:
		return KindRateLimit
	case status == 529:
		return KindOverloaded
	case status >= 400 && status < 500:
		return KindInvalid
	case status >= 500:
		return KindAPI
	}
	return KindExecution
}

// kindForText classifies an error that came without an HTTP status by the
// words the API or the CLI used.
func kindForText(s string) ErrorKind {
	l := strings.ToLower(s)
	has := func(subs ...string) bool {
		for _, sub := range subs {
			if strings.Contains(l, sub) {
				return true
			}
		}
		return false
	}
	switch {
	case has("authentication_error", "invalid api key", "invalid x-api-key", "permission_error",
		"please run /login", "not logged in", "oauth token", "credit balance"):
		return KindAuth
	case has("rate_limit", "rate limit", "usage limit"):
		return KindRateLimit
	case has("overloaded"):
		return KindOverloaded
	case has("invalid_request_error", "invalid request", "prompt is too long"):
		return KindInvalid
	case has("api error", "api_error", "connection", "econnrefused", "timed out", "timeout", "server_error"):
		return KindAPI
	}
	return KindExecution
}

func contentBlocks(raw json.RawMessage) []claudeBlock {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '[' {
		return nil // absent, null, or a plain string
	}
	var blocks []claudeBlock
	if err := unmarshalLenient(raw, &blocks); err != nil {
		return nil
	}
	return blocks
}

// unmarshalLenient is json.Unmarshal that accepts values of unexpected
// types: encoding/json still fills every field it can, so one odd field
// does not cost the rest. Syntax errors still fail.
func unmarshalLenient(data []byte, v any) error {
	err := json.Unmarshal(data, v)
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		return nil
	}
	return err
}

func permissionDenials(raw json.RawMessage) []string {
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return nil
	}
	var names []string
	for _, it := range items {
		var d struct {
			ToolName string `json:"tool_name"`
		}
		if json.Unmarshal(it, &d) == nil && d.ToolName != "" {
			names = append(names, d.ToolName)
		} else if s := jsonString(it); s != "" {
			names = append(names, s)
		}
	}
	return names
}

// errorTexts reads claude's errors field: strings, or objects with a message.
func errorTexts(raw json.RawMessage) []string {
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		if s := jsonString(raw); s != "" {
			return []string{s}
		}
		return nil
	}
	var out []string
	for _, it := range items {
		if s := jsonString(it); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// jsonString reads a JSON string, or the "message" of an object (nested
// like an API error body), or a number's text. Anything else is "".
func jsonString(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return ""
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	case '{':
		var o struct {
			Message json.RawMessage `json:"message"`
			Error   json.RawMessage `json:"error"`
			Type    string          `json:"type"`
		}
		if json.Unmarshal(raw, &o) != nil {
			return ""
		}
		if s := jsonString(o.Message); s != "" {
			return s
		}
		if s := jsonString(o.Error); s != "" {
			return s
		}
		return o.Type
	default:
		if raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9') {
			return string(raw)
		}
	}
	return ""
}

// jsonInt reads an integer given as a JSON number or numeric string; 0 if
// it is neither.
func jsonInt(raw json.RawMessage) int64 {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 1 && raw[0] == '"' {
		raw = raw[1 : len(raw)-1]
	}
	if i, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		return i
	}
	if f, err := strconv.ParseFloat(string(raw), 64); err == nil && f >= -1<<62 && f <= 1<<62 {
		return int64(f)
	}
	return 0
}

func jsonFloat(raw json.RawMessage) float64 {
	var f float64
	if json.Unmarshal(raw, &f) == nil {
		return f
	}
	return 0
}

func isJSONNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.Contains(strings.ToLower(v), strings.ToLower(s)) {
			return true
		}
	}
	return false
}
