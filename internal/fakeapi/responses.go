package fakeapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// Responses is a fake OpenAI Responses API on 127.0.0.1, the wire protocol
// of codex: POST /v1/responses (or /responses) answered with an SSE stream
// (response.created, response.output_item.added/done, output text and
// function-call argument deltas, response.completed with usage), or plain
// JSON for stream:false. GET /v1/models answers with an empty list.
//
// It plays the same script of Turns as Anthropic: each Main request takes
// the next turn; Helper requests (no tools offered) get a short fixed
// answer and leave the script alone. A ToolCall becomes a function_call
// item whose arguments are the call's Input, or a custom_tool_call item
// when the request declares that tool as a custom (freeform) tool, such as
// codex's apply_patch; its input is then Input read as a JSON string (or
// Input as it is, if it is not one). Every request is recorded.
//
// A Responses is safe for concurrent use.
type Responses struct {
	*recorder[ResponsesRequest]
	server *httptest.Server

	// Guarded by the recorder\'s mu:
	responses int // response ids handed out
	items     int // item ids handed out
	toolCalls int // call ids handed out
	// refusingUntil, when set, is the reset of the usage limit the fake
	// answers conversation requests with instead of the script.
	refusingUntil time.Time
}

// ResponsesRequest is one request as the Responses fake received it. Its
// Header, Body and JSON are shared with the fake's log: read them, don't
// change them.
type ResponsesRequest struct {
	Exchange
}

// NewResponses starts a fake with the given script on 127.0.0.1 and a free
// port. The caller must Close it. Tests usually want StartResponses.
func NewResponses(turns ...Turn) *Responses {
	s := &Responses{recorder: newRecorder(turns, ResponsesIsMain, func(r *ResponsesRequest) *Exchange { return &r.Exchange })}
	s.server = httptest.NewServer(s)
	return s
}

// StartResponses is NewResponses for a test: the fake is closed when the
// test ends, and if the test failed its request log is written to the test
// log.
func StartResponses(tb testing.TB, turns ...Turn) *Responses {
	tb.Helper()
	s := NewResponses(turns...)
	tb.Cleanup(func() {
		s.Close()
		if tb.Failed() {
			tb.Logf("fakeapi: %d requests:\n%s", len(s.Requests()), s.Summary())
		}
	})
	return s
}

// URL is the base URL without /v1, e.g. http://127.0.0.1:41234.
func (s *Responses) URL() string { return s.server.URL }

// Close makes stalled requests return, then shuts the server down and
// waits for every handler to finish. It is safe to call more than once.
func (s *Responses) Close() {
	s.shut()
	s.server.Close()
}

// Summary is a line per request, for failure messages.
func (s *Responses) Summary() string {
	var b strings.Builder
	for _, r := range s.Requests() {
		fmt.Fprintf(&b, "#%d %s %s %s", r.Seq, r.Kind, r.Method, r.Path)
		if r.Model() != "" {
			fmt.Fprintf(&b, " model=%s stream=%t tools=%d items=%d", r.Model(), r.Stream(), len(r.Tools()), len(r.Items()))
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
func (s *Responses) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req := ResponsesRequest{Exchange: readExchange(r)}
	isResponses := r.URL.Path == "/v1/responses" || r.URL.Path == "/responses"
	if r.Method == http.MethodPost && isResponses {
		req.Kind = Helper
		if s.isMain(req) {
			req.Kind = Main
		}
	}

	reset := s.refusal()
	if req.Kind == Main && !reset.IsZero() {
		req.Kind = Refused // the script waits for the limit to be lifted
	}
	turn := s.record(&req)
	defer s.done()

	w.Header().Set("x-request-id", fmt.Sprintf("req_fake_%04d", req.Seq))
	switch {
	case req.Kind == Refused:
		writeUsageLimitReached(w, reset)
	case req.Kind == Main:
		s.answer(w, r, &req, turn)
	case req.Kind == Helper:
		s.answer(w, r, &req, Text(helperText))
	case r.Method == http.MethodGet && (r.URL.Path == "/v1/models" || r.URL.Path == "/models"):
		writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{}, "models": []any{}})
	default:
		responsesWriteError(w, APIError{Status: http.StatusNotFound, Message: "fakeapi: no route for " + r.Method + " " + r.URL.Path})
	}
}

// ResponsesIsMain is the default rule that tells a conversation request from
// a helper request: a request is Main when it offers tools. Every turn codex
// 0.169.0 sends offers its tools (exec_command, apply_patch, ...).
func ResponsesIsMain(r ResponsesRequest) bool { return len(r.Tools()) > 0 }

// answer writes turn as the response to req.
func (s *Responses) answer(w http.ResponseWriter, r *http.Request, req *ResponsesRequest, turn Turn) {
	if turn.Gate != nil {
		select {
		case <-turn.Gate:
		case <-r.Context().Done():
			return
		case <-s.closed:
			return
		}
	}
	if turn.Error != nil {
		responsesWriteError(w, *turn.Error)
		return
	}
	resp := s.build(req, turn)
	if turn.Stall == StallBeforeHeaders {
		s.stall(r.Context())
		return
	}
	if !req.Stream() {
		if turn.Stall != NoStall {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_ = http.NewResponseController(w).Flush()
			s.stall(r.Context())
			return
		}
		writeJSON(w, http.StatusOK, resp.object("completed", resp.output))
		return
	}
	resp.writeStream(w, turn.Stall)
	if turn.Stall != NoStall {
		s.stall(r.Context())
	}
}

// responsesReply is one response the fake sends.
type responsesReply struct {
	id, model string
	created   int64
	output    []map[string]any // complete output items, in order
	usage     Usage
}

// build turns a script turn into output items, handing out ids.
func (s *Responses) build(req *ResponsesRequest, turn Turn) *responsesReply {
	custom := map[string]bool{}
	for _, t := range req.toolDecls() {
		if t.Type == "custom" {
			custom[t.Name] = true
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.responses++
	resp := &responsesReply{
		id:      fmt.Sprintf("resp_fake_%04d", s.responses),
		model:   req.Model(),
		created: time.Now().Unix(),
		usage:   DefaultUsage,
	}
	if turn.Usage != nil {
		resp.usage = *turn.Usage
	}
	if turn.Text != "" || len(turn.ToolCalls) == 0 {
		s.items++
		resp.output = append(resp.output, map[string]any{
			"id": fmt.Sprintf("msg_fake_%04d", s.items), "type": "message", "status": "completed",
			"role": "assistant", "content": []any{outputText(turn.Text)},
		})
	}
	for _, c := range turn.ToolCalls {
		s.items++
		callID := c.ID
		if callID == "" {
			s.toolCalls++
			callID = fmt.Sprintf("call_fake_%04d", s.toolCalls)
		}
		input := c.Input
		if len(input) == 0 {
			input = json.RawMessage(`{}`)
		}
		if custom[c.Name] {
			var text string
			if json.Unmarshal(input, &text) != nil {
				text = string(input)
			}
			resp.output = append(resp.output, map[string]any{
				"id": fmt.Sprintf("ctc_fake_%04d", s.items), "type": "custom_tool_call", "status": "completed",
				"call_id": callID, "name": c.Name, "input": text,
			})
			continue
		}
		resp.output = append(resp.output, map[string]any{
			"id": fmt.Sprintf("fc_fake_%04d", s.items), "type": "function_call", "status": "completed",
			"arguments": string(input), "call_id": callID, "name": c.Name,
		})
	}
	return resp
}

func outputText(text string) map[string]any {
	return map[string]any{"type": "output_text", "annotations": []any{}, "text": text}
}

// object is the response object as response.created/completed carry it.
func (m *responsesReply) object(status string, output []map[string]any) map[string]any {
	if output == nil {
		output = []map[string]any{}
	}
	o := map[string]any{
		"id": m.id, "object": "response", "created_at": m.created, "status": status,
		"model": m.model, "output": output, "error": nil,
	}
	if status == "completed" {
		o["usage"] = map[string]any{
			"input_tokens":          m.usage.InputTokens + m.usage.CacheReadInputTokens,
			"input_tokens_details":  map[string]any{"cached_tokens": m.usage.CacheReadInputTokens},
			"output_tokens":         m.usage.OutputTokens,
			"output_tokens_details": map[string]any{"reasoning_tokens": 0},
			"total_tokens":          m.usage.InputTokens + m.usage.CacheReadInputTokens + m.usage.OutputTokens,
		}
	} else {
		o["usage"] = nil
	}
	return o
}

// writeStream writes the response as the Responses SSE stream. With
// StallMidStream it stops after the first text chunk (or the first item
// when there is no text); with StallAfterHeaders after the headers.
func (m *responsesReply) writeStream(w http.ResponseWriter, stall Stall) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	if stall == StallAfterHeaders {
		return
	}
	seq := 0
	send := func(event string, data map[string]any) {
		data["type"] = event
		data["sequence_number"] = seq
		seq++
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
		_ = rc.Flush()
	}
	send("response.created", map[string]any{"response": m.object("in_progress", nil)})
	send("response.in_progress", map[string]any{"response": m.object("in_progress", nil)})
	for i, item := range m.output {
		id, _ := item["id"].(string)
		started := map[string]any{}
		for k, v := range item {
			started[k] = v
		}
		started["status"] = "in_progress"
		switch item["type"] {
		case "message":
			started["content"] = []any{}
			send("response.output_item.added", map[string]any{"output_index": i, "item": started})
			text := item["content"].([]any)[0].(map[string]any)["text"].(string)
			send("response.content_part.added", map[string]any{"item_id": id, "output_index": i, "content_index": 0, "part": outputText("")})
			for j, chunk := range chunks(text, 3) {
				send("response.output_text.delta", map[string]any{"item_id": id, "output_index": i, "content_index": 0, "delta": chunk, "logprobs": []any{}})
				if j == 0 && stall == StallMidStream {
					return
				}
			}
			send("response.output_text.done", map[string]any{"item_id": id, "output_index": i, "content_index": 0, "text": text, "logprobs": []any{}})
			send("response.content_part.done", map[string]any{"item_id": id, "output_index": i, "content_index": 0, "part": outputText(text)})
		case "function_call":
			args, _ := item["arguments"].(string)
			started["arguments"] = ""
			send("response.output_item.added", map[string]any{"output_index": i, "item": started})
			for _, chunk := range chunks(args, 2) {
				send("response.function_call_arguments.delta", map[string]any{"item_id": id, "output_index": i, "delta": chunk})
			}
			send("response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": i, "arguments": args})
		case "custom_tool_call":
			input, _ := item["input"].(string)
			started["input"] = ""
			send("response.output_item.added", map[string]any{"output_index": i, "item": started})
			for _, chunk := range chunks(input, 2) {
				send("response.custom_tool_call_input.delta", map[string]any{"item_id": id, "output_index": i, "delta": chunk})
			}
			send("response.custom_tool_call_input.done", map[string]any{"item_id": id, "output_index": i, "input": input})
		}
		send("response.output_item.done", map[string]any{"output_index": i, "item": item})
		if stall == StallMidStream {
			return
		}
	}
	send("response.completed", map[string]any{"response": m.object("completed", m.output)})
}

// responsesWriteError writes an OpenAI error body:
// {"error":{"message":…,"type":…,"param":null,"code":…}}.
func responsesWriteError(w http.ResponseWriter, e APIError) {
	typ, code := e.Type, ""
	if typ == "" {
		typ, code = responsesErrorType(e.Status)
	}
	writeJSON(w, e.Status, map[string]any{"error": map[string]any{
		"message": e.Message, "type": typ, "param": nil, "code": nilIfEmpty(code),
	}})
}

// responsesErrorType gives the OpenAI error type and code the real API
// uses for status.
func responsesErrorType(status int) (typ, code string) {
	switch status {
	case http.StatusUnauthorized:
		return "invalid_request_error", "invalid_api_key"
	case http.StatusForbidden:
		return "invalid_request_error", "unsupported_country_region_territory"
	case http.StatusNotFound:
		return "invalid_request_error", "model_not_found"
	case http.StatusTooManyRequests:
		return "requests", "rate_limit_exceeded"
	case http.StatusBadRequest:
		return "invalid_request_error", ""
	default:
		return "server_error", ""
	}
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// responsesBody is the part of a Responses API body the fake reads.
type responsesBody struct {
	Model        string              `json:"model"`
	Instructions string              `json:"instructions"`
	Stream       bool                `json:"stream"`
	Input        json.RawMessage     `json:"input"` // a string or items
	Tools        []responsesToolDecl `json:"tools"`
}

type responsesToolDecl struct {
	Type string `json:"type"`
	Name string `json:"name"`
}

func (r ResponsesRequest) decode() responsesBody {
	var b responsesBody
	_ = json.Unmarshal(r.Body, &b)
	return b
}

func (r ResponsesRequest) toolDecls() []responsesToolDecl { return r.decode().Tools }

// Model is the body's model.
func (r ResponsesRequest) Model() string { return r.decode().Model }

// Stream reports whether the body asked for an SSE stream.
func (r ResponsesRequest) Stream() bool { return r.decode().Stream }

// Instructions is the body's instructions: the CLI's base system prompt.
func (r ResponsesRequest) Instructions() string { return r.decode().Instructions }

// Tools is the names of the tools the body offers, in order (a tool
// without a name, such as web_search, by its type).
func (r ResponsesRequest) Tools() []string {
	var names []string
	for _, t := range r.decode().Tools {
		if t.Name != "" {
			names = append(names, t.Name)
		} else {
			names = append(names, t.Type)
		}
	}
	return names
}

// ResponsesItem is one input item, flattened.
type ResponsesItem struct {
	// Type is "message", "function_call", "function_call_output",
	// "custom_tool_call", "custom_tool_call_output", "reasoning", ...
	Type string
	// Role is a message's role: "developer", "user", "assistant", "system".
	Role string
	// Text is a message's text parts joined with "\n", a call's arguments
	// or input, or a call output's text.
	Text   string
	Name   string // a call's tool name
	CallID string // a call's or a call output's call_id
}

// Items is the body's input, flattened. An input given as one string is
// one user message.
func (r ResponsesRequest) Items() []ResponsesItem {
	raw := r.decode().Input
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []ResponsesItem{{Type: "message", Role: "user", Text: s}}
	}
	var items []struct {
		Type      string          `json:"type"`
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		Name      string          `json:"name"`
		CallID    string          `json:"call_id"`
		Arguments string          `json:"arguments"`
		Input     string          `json:"input"`
		Output    json.RawMessage `json:"output"`
	}
	if json.Unmarshal(raw, &items) != nil {
		return nil
	}
	var out []ResponsesItem
	for _, it := range items {
		typ := it.Type
		if typ == "" && it.Role != "" {
			typ = "message"
		}
		item := ResponsesItem{Type: typ, Role: it.Role, Name: it.Name, CallID: it.CallID}
		switch {
		case typ == "message":
			item.Text = responsesContentText(it.Content)
		case it.Arguments != "":
			item.Text = it.Arguments
		case it.Input != "":
			item.Text = it.Input
		case len(it.Output) > 0:
			item.Text = responsesContentText(it.Output)
		}
		out = append(out, item)
	}
	return out
}

// responsesContentText flattens content given as a string or as parts with
// text (input_text, output_text, ...).
func responsesContentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		var o struct {
			Output  string `json:"output"`
			Content string `json:"content"`
		}
		if json.Unmarshal(raw, &o) == nil {
			return o.Output + o.Content
		}
		return ""
	}
	var texts []string
	for _, p := range parts {
		if p.Text != "" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// RoleText is the text of the input messages with role, joined with
// "\n\n" ("developer" for developer instructions).
func (r ResponsesRequest) RoleText(role string) string {
	var texts []string
	for _, it := range r.Items() {
		if it.Type == "message" && it.Role == role {
			texts = append(texts, it.Text)
		}
	}
	return strings.Join(texts, "\n\n")
}

// Prompt is the text of the last user message, or "".
func (r ResponsesRequest) Prompt() string {
	items := r.Items()
	for i := len(items) - 1; i >= 0; i-- {
		if items[i].Type == "message" && items[i].Role == "user" {
			return items[i].Text
		}
	}
	return ""
}

// Transcript is every input item as a line "[type/role] text", for
// assertions on what history a request carries.
func (r ResponsesRequest) Transcript() string {
	var b strings.Builder
	for _, it := range r.Items() {
		label := it.Type
		if it.Role != "" {
			label += "/" + it.Role
		}
		if it.Name != "" {
			label += " " + it.Name
		}
		fmt.Fprintf(&b, "[%s] %s\n", label, it.Text)
	}
	return b.String()
}
