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
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Anthropic is a fake Anthropic Messages API on 127.0.0.1.
type Anthropic struct {
	server    *httptest.Server
	closed    chan struct{} // closed by Close: stalled handlers return
	closeOnce sync.Once

	mu        sync.Mutex // guards the fields below
	isMainFn  func(Request) bool
	script    []Turn // all turns ever added; next is the one to use
	next      int
	requests  []Request
	inflight  int           // handlers running
	changed   chan struct{} // closed and replaced when requests or inflight change
	messages  int           // message ids handed out
	toolCalls int           // tool_use ids handed out
}

// NewAnthropic starts a fake with the given script on 127.0.0.1 and a free
// port. The caller must Close it. Like httptest.NewServer, it panics if it
// cannot listen. Tests usually want StartAnthropic.
func NewAnthropic(turns ...Turn) *Anthropic {
	a := &Anthropic{
		closed:  make(chan struct{}),
		script:  append([]Turn(nil), turns...),
		changed: make(chan struct{}),
	}
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
	a.closeOnce.Do(func() {
		close(a.closed)
		a.server.Close()
	})
}

// Add appends turns to the script.
func (a *Anthropic) Add(turns ...Turn) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.script = append(a.script, turns...)
}

// SetIsMain replaces the rule that tells Main requests from Helper ones
// (IsMain by default; nil restores it), for a CLI whose side requests
// IsMain gets wrong. It applies to requests that arrive afterwards.
func (a *Anthropic) SetIsMain(isMain func(Request) bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.isMainFn = isMain
}

func (a *Anthropic) isMain(r Request) bool {
	a.mu.Lock()
	f := a.isMainFn
	a.mu.Unlock()
	if f == nil {
		f = IsMain
	}
	return f(r)
}

// Remaining is the number of script turns not yet used.
func (a *Anthropic) Remaining() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.script) - a.next
}

// Requests is every request so far, in arrival order.
func (a *Anthropic) Requests() []Request {
	a.mu.Lock()
	defer a.mu.Unlock()
	return cloneRequests(a.requests)
}

// MainRequests is the Main requests so far, in arrival order.
func (a *Anthropic) MainRequests() []Request { return onlyMain(a.Requests()) }

// Exhausted is the number of Main requests that came after the script ran
// out. A test whose script should have covered the conversation checks it
// is 0.
func (a *Anthropic) Exhausted() int {
	n := 0
	for _, r := range a.MainRequests() {
		if r.Exhausted {
			n++
		}
	}
	return n
}

// WaitFor waits until done holds for the requests so far, and returns them.
// done is called with the fake's lock held: it must not call the fake. When
// ctx ends first it returns the requests and ctx's error.
func (a *Anthropic) WaitFor(ctx context.Context, done func([]Request) bool) ([]Request, error) {
	for {
		a.mu.Lock()
		ok := done(a.requests)
		reqs, changed := cloneRequests(a.requests), a.changed
		a.mu.Unlock()
		if ok {
			return reqs, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return reqs, fmt.Errorf("fakeapi: wait: %w", ctx.Err())
		}
	}
}

// WaitMain waits until at least n Main requests have arrived and returns
// the Main requests. A request counts when it arrives, before it is
// answered, so a stalled one counts too.
func (a *Anthropic) WaitMain(ctx context.Context, n int) ([]Request, error) {
	reqs, err := a.WaitFor(ctx, func(reqs []Request) bool {
		return len(onlyMain(reqs)) >= n
	})
	main := onlyMain(reqs)
	if err != nil {
		return main, fmt.Errorf("got %d of %d main requests: %w", len(main), n, err)
	}
	return main, nil
}

// WaitIdle waits until no request is being handled, e.g. until a stalled
// request has seen its client go away.
func (a *Anthropic) WaitIdle(ctx context.Context) error {
	for {
		a.mu.Lock()
		n, changed := a.inflight, a.changed
		a.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("fakeapi: %d requests still running: %w", n, ctx.Err())
		}
	}
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
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	req := Request{
		Method: r.Method,
		Path:   r.URL.Path,
		Query:  r.URL.RawQuery,
		Header: r.Header.Clone(),
		Body:   body,
		Kind:   Other,
		Turn:   -1,
	}
	if json.Unmarshal(body, &req.JSON) != nil {
		req.JSON = nil
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages":
		req.Kind = Helper
		if a.isMain(req) {
			req.Kind = Main
		}
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages/count_tokens":
		req.Kind = CountTokens
	}

	turn := a.record(&req)
	defer a.done()

	w.Header().Set("request-id", fmt.Sprintf("req_fake_%04d", req.Seq))
	switch req.Kind {
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

// record logs req, gives it its Seq and, for a Main request, takes the next
// turn of the script.
func (a *Anthropic) record(req *Request) Turn {
	a.mu.Lock()
	defer a.mu.Unlock()
	req.Seq = len(a.requests)
	var turn Turn
	if req.Kind == Main {
		if a.next < len(a.script) {
			req.Turn = a.next
			turn = a.script[a.next]
			a.next++
		} else {
			req.Exhausted = true
			turn = Text(ScriptExhaustedText)
		}
	}
	a.requests = append(a.requests, *req)
	a.inflight++
	a.notifyLocked()
	return turn
}

// done marks a handler finished.
func (a *Anthropic) done() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.inflight--
	a.notifyLocked()
}

func (a *Anthropic) notifyLocked() {
	close(a.changed)
	a.changed = make(chan struct{})
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

// stall blocks until the client goes away or the fake is closed.
func (a *Anthropic) stall(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-a.closed:
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

func cloneRequests(reqs []Request) []Request { return append([]Request(nil), reqs...) }

func onlyMain(reqs []Request) []Request {
	var main []Request
	for _, r := range reqs {
		if r.Kind == Main {
			main = append(main, r)
		}
	}
	return main
}
