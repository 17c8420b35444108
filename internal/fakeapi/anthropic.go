// Package fakeapi holds in-process fakes of model APIs that speak the real
// wire protocols, for tests and the conformance suite that runs the real
// agent CLIs against them. Only 127.0.0.1 is used.
//
// Anthropic fakes the Anthropic Messages API: POST /v1/messages (an SSE
// stream, or plain JSON for stream:false), /v1/messages/count_tokens, and
// HEAD / and /api/hello. Its conversation is a script of turns: each Main
// request takes the next turn, in arrival order; Helper requests the CLI
// makes on the side get a fixed short answer and leave the script alone
// (IsMain tells them apart). Every request is recorded.
//
// An Anthropic is safe for concurrent use: requests may arrive on many
// connections while a test adds turns and reads the log.
package fakeapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Anthropic is a fake Anthropic Messages API on 127.0.0.1.
type Anthropic struct {
	*recorder[Request]
	server *httptest.Server

	// Guarded by the recorder\'s mu:
	messages  int // message ids handed out
	toolCalls int // tool_use ids handed out
	// refusing is the limit the fake answers conversation requests with
	// instead of the script; nil answers normally.
	refusing *Refusal
}

// NewAnthropic starts a fake with the given script on 127.0.0.1 and a free
// port. The caller must Close it. Like httptest.NewServer, it panics if it
// cannot listen. Tests usually want StartAnthropic.
func NewAnthropic(turns ...Turn) *Anthropic {
	a := &Anthropic{recorder: newRecorder(turns, IsMain, func(r *Request) *Exchange { return &r.Exchange })}
	a.server = httptest.NewServer(a)
	return a
}

// StartAnthropic is NewAnthropic for a test: the fake is closed when the
// test ends, and if the test failed its request log is written to the test
// log.
func StartAnthropic(tb testing.TB, turns ...Turn) *Anthropic {
	tb.Helper()
	a := NewAnthropic(turns...)
	tb.Cleanup(func() {
		a.Close()
		if tb.Failed() {
			tb.Logf("fakeapi: %d requests:\n%s", len(a.Requests()), a.Summary())
		}
	})
	return a
}

// URL is the base URL, e.g. http://127.0.0.1:41234, for ANTHROPIC_BASE_URL.
func (a *Anthropic) URL() string { return a.server.URL }

// Close makes stalled requests return, then shuts the server down and
// waits for every handler to finish. It is safe to call more than once.
func (a *Anthropic) Close() {
	a.shut()
	a.server.Close()
}

// Summary is a line per request (kind, method, path, model, turn), for
// failure messages.
func (a *Anthropic) Summary() string {
	var b strings.Builder
	for _, r := range a.Requests() {
		fmt.Fprintf(&b, "#%d %s %s %s", r.Seq, r.Kind, r.Method, r.Path)
		if r.Model() != "" {
			fmt.Fprintf(&b, " model=%s max_tokens=%d stream=%t tools=%d", r.Model(), r.MaxTokens(), r.Stream(), len(r.Tools()))
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

// ServeHTTP answers one request and records it. It is exported so a
// command-line helper can serve the fake on an address of its choosing.
func (a *Anthropic) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req := Request{Exchange: readExchange(r)}
	body := req.Body
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages":
		req.Kind = Helper
		if a.isMain(req) {
			req.Kind = Main
		}
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages/count_tokens":
		req.Kind = CountTokens
	}

	refusal := a.refusal()
	if req.Kind == Main && refusal != nil {
		req.Kind = Refused // the script waits for the limit to be lifted
	}
	turn := a.record(&req)
	defer a.done()

	w.Header().Set("request-id", fmt.Sprintf("req_fake_%04d", req.Seq))
	switch req.Kind {
	case Refused:
		refusal.write(w)
	case Main:
		a.answer(w, r, &req, turn)
	case Helper:
		a.answer(w, r, &req, Text(helperText))
	case CountTokens:
		writeJSON(w, http.StatusOK, map[string]int{"input_tokens": estimateTokens(body)})
	default:
		if (r.URL.Path == "/" || r.URL.Path == "/api/hello") && (r.Method == http.MethodHead || r.Method == http.MethodGet) {
			w.WriteHeader(http.StatusOK)
			return
		}
		writeError(w, APIError{Status: http.StatusNotFound, Message: "fakeapi: no route for " + r.Method + " " + r.URL.Path})
	}
}

// helperText answers every Helper request.
const helperText = "ok"

// IsMain is the default rule that tells a conversation request to
// /v1/messages from a helper request: a request is Main when it offers
// tools or asks for extended thinking.
//
// What claude 2.1.330 sends (seen against this fake, 2026-11, with -p and
// stream-json): with CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 nothing but
// POST /v1/messages?beta=true, one per model turn; without it, also a
// HEAD /api/hello before each run. No count_tokens, title, topic or quota
// request showed up in -p mode. Every conversation request, subagents
// (Agent tool) and `--tools ""` included, carries "thinking"
// {"type":"adaptive"} and "context_management", a system of 3 text blocks
// (billing header, identity line, the agent prompt with any appended text
// at its end) and, when tools are on, the tools. The one helper seen, the
// WebFetch tool summarising a page, has the same model, max_tokens and
// stream:true, but no thinking, no context_management, an empty tools
// list and a system of 2 blocks (billing header, identity line). Side
// requests of other modes and versions (quota probes, titles) were not
// seen here; they are expected to go without tools and thinking too, and
// SetIsMain covers a CLI where this rule is wrong. The recorded bodies are
// in testdata/claude/requests.
func IsMain(r Request) bool {
	if len(r.Tools()) > 0 {
		return true
	}
	_, thinking := r.JSON["thinking"]
	return thinking
}

// answer writes turn as the response to req: an error, a stall, an SSE
// stream or a JSON message.
func (a *Anthropic) answer(w http.ResponseWriter, r *http.Request, req *Request, turn Turn) {
	if turn.Gate != nil {
		select {
		case <-turn.Gate:
		case <-r.Context().Done():
			return
		case <-a.closed:
			return
		}
	}
	if turn.Error != nil {
		writeError(w, *turn.Error)
		return
	}
	msg := a.message(req, turn)
	if turn.Stall == StallBeforeHeaders {
		a.stall(r.Context())
		return
	}
	if !req.Stream() {
		if turn.Stall != NoStall {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_ = http.NewResponseController(w).Flush()
			a.stall(r.Context())
			return
		}
		writeJSON(w, http.StatusOK, msg.final())
		return
	}
	writeStream(w, msg, turn.Stall)
	if turn.Stall != NoStall {
		a.stall(r.Context())
	}
}

// message builds the reply a turn stands for, handing out ids.
func (a *Anthropic) message(req *Request, turn Turn) reply {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.messages++
	m := reply{
		id:    fmt.Sprintf("msg_fake_%04d", a.messages),
		model: req.Model(),
		text:  turn.Text,
		usage: DefaultUsage,
	}
	if turn.Usage != nil {
		m.usage = *turn.Usage
	}
	for _, c := range turn.ToolCalls {
		if c.ID == "" {
			a.toolCalls++
			c.ID = fmt.Sprintf("toolu_fake_%04d", a.toolCalls)
		}
		if len(c.Input) == 0 {
			c.Input = json.RawMessage(`{}`)
		}
		m.tools = append(m.tools, c)
	}
	return m
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, e APIError) {
	if e.Type == "" {
		e.Type = errorType(e.Status)
	}
	type detail struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	writeJSON(w, e.Status, struct {
		Type  string `json:"type"`
		Error detail `json:"error"`
	}{"error", detail{e.Type, e.Message}})
}

// estimateTokens is a rough count for count_tokens: four bytes a token.
func estimateTokens(body []byte) int { return len(body)/4 + 1 }
