package fakeapi

// Chat fakes the OpenAI Chat Completions API that opencode (through
// @ai-sdk/openai-compatible) and other OpenAI-compatible clients speak:
// POST /v1/chat/completions (an SSE stream of chat.completion.chunk
// objects ending with data: [DONE], or one chat.completion object for
// stream:false) and GET /v1/models. It takes the same script of Turns as
// Anthropic; a Chat is safe for concurrent use in the same way.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// Chat is a fake OpenAI Chat Completions API on 127.0.0.1.
type Chat struct {
	*recorder[ChatRequest]
	server *httptest.Server

	// Guarded by the recorder\'s mu:
	responses int // completion ids handed out
	toolCalls int // tool call ids handed out
}

// ChatRequest is one request as the Chat fake received it. Its Header,
// Body and JSON are shared with the fake's log: read them, don't change them.
type ChatRequest struct {
	Exchange
}

// NewChat starts a fake with the given script on 127.0.0.1 and a free
// port. The caller must Close it. Like httptest.NewServer, it panics if it
// cannot listen. Tests usually want StartChat.
func NewChat(turns ...Turn) *Chat {
	c := &Chat{recorder: newRecorder(turns, IsChatMain, func(r *ChatRequest) *Exchange { return &r.Exchange })}
	c.server = httptest.NewServer(c)
	return c
}

// StartChat is NewChat for a test: the fake is closed when the test ends,
// and if the test failed its request log is written to the test log.
func StartChat(tb testing.TB, turns ...Turn) *Chat {
	tb.Helper()
	c := NewChat(turns...)
	tb.Cleanup(func() {
		c.Close()
		if tb.Failed() {
			tb.Logf("fakeapi: %d chat requests:\n%s", len(c.Requests()), c.Summary())
		}
	})
	return c
}

// URL is the server's root, e.g. http://127.0.0.1:41234. OpenAI clients
// want BaseURL, which adds /v1.
func (c *Chat) URL() string { return c.server.URL }

// BaseURL is URL + "/v1", the base URL OpenAI clients append
// /chat/completions to.
func (c *Chat) BaseURL() string { return c.server.URL + "/v1" }

// Close makes stalled requests return, then shuts the server down and
// waits for every handler to finish. It is safe to call more than once.
func (c *Chat) Close() {
	c.shut()
	c.server.Close()
}

// IsChatMain is the default rule that tells a conversation request from a
// helper request (a title or a summary): a request is Main when it offers
// tools. opencode 1.18.33 offers its tools on every conversation request
// and none on its title and summary requests.
func IsChatMain(r ChatRequest) bool { return len(r.Tools()) > 0 }

// Summary is a line per request (kind, method, path, model, turn), for
// failure messages.
func (c *Chat) Summary() string {
	var b strings.Builder
	for _, r := range c.Requests() {
		fmt.Fprintf(&b, "#%d %s %s %s", r.Seq, r.Kind, r.Method, r.Path)
		if r.Model() != "" {
			fmt.Fprintf(&b, " model=%s stream=%t tools=%d messages=%d", r.Model(), r.Stream(), len(r.Tools()), len(r.Messages()))
		}
		switch {
		case r.Exhausted:
			b.WriteString(" (script exhausted)")
		case r.Turn >= 0:
			fmt.Fprintf(&b, " turn=%d", r.Turn)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// ServeHTTP answers one request and records it.
func (c *Chat) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req := ChatRequest{Exchange: readExchange(r)}
	isCompletion := r.Method == http.MethodPost &&
		(r.URL.Path == "/v1/chat/completions" || r.URL.Path == "/chat/completions")
	if isCompletion {
		req.Kind = Helper
		if c.isMain(req) {
			req.Kind = Main
		}
	}

	turn := c.record(&req)
	defer c.done()

	w.Header().Set("x-request-id", fmt.Sprintf("req_fake_%04d", req.Seq))
	switch {
	case req.Kind == Main:
		c.answer(w, r, &req, turn)
	case req.Kind == Helper:
		c.answer(w, r, &req, Text(helperText))
	case r.Method == http.MethodGet && (r.URL.Path == "/v1/models" || r.URL.Path == "/models"):
		writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{}})
	default:
		writeChatError(w, APIError{Status: http.StatusNotFound, Message: "fakeapi: no route for " + r.Method + " " + r.URL.Path})
	}
}

// answer writes turn as the response to req: an error, a stall, an SSE
// stream or a JSON completion.
func (c *Chat) answer(w http.ResponseWriter, r *http.Request, req *ChatRequest, turn Turn) {
	if turn.Gate != nil {
		select {
		case <-turn.Gate:
		case <-r.Context().Done():
			return
		case <-c.closed:
			return
		}
	}
	if turn.Error != nil {
		writeChatError(w, *turn.Error)
		return
	}
	if turn.Stall == StallBeforeHeaders {
		c.stall(r.Context())
		return
	}
	m := c.completion(req, turn)
	if !req.Stream() {
		if turn.Stall != NoStall {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_ = http.NewResponseController(w).Flush()
			c.stall(r.Context())
			return
		}
		writeJSON(w, http.StatusOK, m.final())
		return
	}
	writeChatStream(w, m, turn.Stall, req.includeUsage())
	if turn.Stall != NoStall {
		c.stall(r.Context())
	}
}

// chatReply is one assistant message the fake sends.
type chatReply struct {
	id, model string
	created   int64
	text      string
	tools     []ToolCall
	usage     Usage
}

func (c *Chat) completion(req *ChatRequest, turn Turn) chatReply {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.responses++
	m := chatReply{
		id:      fmt.Sprintf("chatcmpl-fake%04d", c.responses),
		model:   req.Model(),
		created: time.Now().Unix(),
		text:    turn.Text,
		usage:   DefaultUsage,
	}
	if turn.Usage != nil {
		m.usage = *turn.Usage
	}
	for _, tc := range turn.ToolCalls {
		if tc.ID == "" {
			c.toolCalls++
			tc.ID = fmt.Sprintf("call_fake_%04d", c.toolCalls)
		}
		if len(tc.Input) == 0 {
			tc.Input = json.RawMessage(`{}`)
		}
		m.tools = append(m.tools, tc)
	}
	return m
}

func (m chatReply) finishReason() string {
	if len(m.tools) > 0 {
		return "tool_calls"
	}
	return "stop"
}

// Chat Completions wire shapes, fields in the order the real API sends them.
type (
	chatUsage struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		TotalTokens         int `json:"total_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	}
	chatFunction struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	}
	chatToolCallWire struct {
		Index    *int         `json:"index,omitempty"`
		ID       string       `json:"id,omitempty"`
		Type     string       `json:"type,omitempty"`
		Function chatFunction `json:"function"`
	}
	chatMessageWire struct {
		Role      string             `json:"role,omitempty"`
		Content   *string            `json:"content,omitempty"`
		ToolCalls []chatToolCallWire `json:"tool_calls,omitempty"`
	}
	chatChoice struct {
		Index        int              `json:"index"`
		Message      *chatMessageWire `json:"message,omitempty"`
		Delta        *chatMessageWire `json:"delta,omitempty"`
		FinishReason *string          `json:"finish_reason"`
	}
	chatCompletion struct {
		ID      string       `json:"id"`
		Object  string       `json:"object"`
		Created int64        `json:"created"`
		Model   string       `json:"model"`
		Choices []chatChoice `json:"choices"`
		Usage   *chatUsage   `json:"usage,omitempty"`
	}
)

// wireUsage maps the script's Anthropic-style counts to OpenAI's: cached
// and cache-creation tokens are part of prompt_tokens.
func (m chatReply) wireUsage() *chatUsage {
	u := &chatUsage{
		PromptTokens:     m.usage.InputTokens + m.usage.CacheReadInputTokens + m.usage.CacheCreationInputTokens,
		CompletionTokens: m.usage.OutputTokens,
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	u.PromptTokensDetails.CachedTokens = m.usage.CacheReadInputTokens
	return u
}

// final is the reply as a non-streaming chat.completion.
func (m chatReply) final() chatCompletion {
	msg := &chatMessageWire{Role: "assistant", Content: &m.text}
	for _, tc := range m.tools {
		msg.ToolCalls = append(msg.ToolCalls, chatToolCallWire{ID: tc.ID, Type: "function",
			Function: chatFunction{Name: tc.Name, Arguments: string(tc.Input)}})
	}
	finish := m.finishReason()
	return chatCompletion{ID: m.id, Object: "chat.completion", Created: m.created, Model: m.model,
		Choices: []chatChoice{{Message: msg, FinishReason: &finish}}, Usage: m.wireUsage()}
}

// writeChatStream writes m as chat.completion.chunk events: a role chunk,
// content deltas, per tool call a chunk with its id and name and argument
// chunks, a chunk with finish_reason, a usage chunk when asked for, and
// data: [DONE]. With StallMidStream it stops after the first content chunk
// (or the first tool call chunk); with StallAfterHeaders after the headers.
func writeChatStream(w http.ResponseWriter, m chatReply, stall Stall, includeUsage bool) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	if stall == StallAfterHeaders {
		return
	}
	chunk := func(delta *chatMessageWire, finish *string, usage *chatUsage) {
		c := chatCompletion{ID: m.id, Object: "chat.completion.chunk", Created: m.created, Model: m.model,
			Choices: []chatChoice{{Delta: delta, FinishReason: finish}}}
		if delta == nil && finish == nil {
			c.Choices = []chatChoice{}
			c.Usage = usage
		}
		b, _ := json.Marshal(c)
		fmt.Fprintf(w, "data: %s\n\n", b)
		_ = rc.Flush()
	}
	empty := ""
	chunk(&chatMessageWire{Role: "assistant", Content: &empty}, nil, nil)
	for _, piece := range chunks(m.text, 3) {
		chunk(&chatMessageWire{Content: &piece}, nil, nil)
		if stall == StallMidStream {
			return
		}
	}
	for i, tc := range m.tools {
		chunk(&chatMessageWire{ToolCalls: []chatToolCallWire{{Index: &i, ID: tc.ID, Type: "function",
			Function: chatFunction{Name: tc.Name}}}}, nil, nil)
		if stall == StallMidStream {
			return
		}
		for _, piece := range chunks(string(tc.Input), 2) {
			chunk(&chatMessageWire{ToolCalls: []chatToolCallWire{{Index: &i, Function: chatFunction{Arguments: piece}}}}, nil, nil)
		}
	}
	if stall == StallMidStream {
		return // an empty reply: stall after the role chunk
	}
	finish := m.finishReason()
	chunk(&chatMessageWire{}, &finish, nil)
	if includeUsage {
		chunk(nil, nil, m.wireUsage())
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	_ = rc.Flush()
}

// writeChatError answers with an OpenAI error body:
// {"error":{"message":…,"type":…,"param":null,"code":…}}.
func writeChatError(w http.ResponseWriter, e APIError) {
	typ, code := chatErrorType(e.Status)
	if e.Type != "" {
		typ = e.Type
	}
	type detail struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	}
	d := detail{Message: e.Message, Type: typ}
	if code != "" {
		d.Code = &code
	}
	writeJSON(w, e.Status, struct {
		Error detail `json:"error"`
	}{d})
}

// chatErrorType gives the error type and code the OpenAI API uses for
// status.
func chatErrorType(status int) (typ, code string) {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error", ""
	case http.StatusUnauthorized:
		return "invalid_request_error", "invalid_api_key"
	case http.StatusForbidden:
		return "permission_error", ""
	case http.StatusNotFound:
		return "invalid_request_error", "model_not_found"
	case http.StatusTooManyRequests:
		return "rate_limit_error", "rate_limit_exceeded"
	default:
		return "server_error", ""
	}
}

// chatBody is the part of a Chat Completions body the fake reads.
type chatBody struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Messages []struct {
		Role       string             `json:"role"`
		Content    json.RawMessage    `json:"content"` // a string or parts
		ToolCalls  []chatToolCallWire `json:"tool_calls"`
		ToolCallID string             `json:"tool_call_id"`
	} `json:"messages"`
	Tools []struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
}

func (r ChatRequest) decode() chatBody {
	var b chatBody
	_ = json.Unmarshal(r.Body, &b)
	return b
}

// Model is the body's model.
func (r ChatRequest) Model() string { return r.decode().Model }

// Stream reports whether the body asked for an SSE stream.
func (r ChatRequest) Stream() bool { return r.decode().Stream }

func (r ChatRequest) includeUsage() bool {
	o := r.decode().StreamOptions
	return o != nil && o.IncludeUsage
}

// Tools is the names of the function tools the body offers, in order.
func (r ChatRequest) Tools() []string {
	var names []string
	for _, t := range r.decode().Tools {
		names = append(names, t.Function.Name)
	}
	return names
}

// ChatMessage is one conversation message, flattened.
type ChatMessage struct {
	Role string // "system", "developer", "user", "assistant", "tool"
	// Text joins the text parts with "\n"; for a tool message, its result.
	Text string
	// ToolCalls are an assistant message's calls.
	ToolCalls []ChatToolCall
	// ToolCallID is the call a tool message answers.
	ToolCallID string
}

// ChatToolCall is one function call of an assistant message.
type ChatToolCall struct {
	ID        string
	Name      string
	Arguments string // JSON text
}

// Messages is the body's messages, flattened.
func (r ChatRequest) Messages() []ChatMessage {
	var out []ChatMessage
	for _, m := range r.decode().Messages {
		msg := ChatMessage{Role: m.Role, Text: chatContentText(m.Content), ToolCallID: m.ToolCallID}
		for _, tc := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, ChatToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		out = append(out, msg)
	}
	return out
}

// System is the text of the system and developer messages, joined with
// "\n\n".
func (r ChatRequest) System() string {
	var parts []string
	for _, m := range r.Messages() {
		if m.Role == "system" || m.Role == "developer" {
			parts = append(parts, m.Text)
		}
	}
	return strings.Join(parts, "\n\n")
}

// Prompt is the text of the last user message, or "".
func (r ChatRequest) Prompt() string {
	msgs := r.Messages()
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			return msgs[i].Text
		}
	}
	return ""
}

// chatContentText reads content that is a string or an array of parts
// ({"type":"text","text":…}); other parts are left out.
func chatContentText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var texts []string
	for _, p := range parts {
		if p.Type == "text" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n")
}
