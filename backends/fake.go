package backends

import (
	"context"
	"fmt"
	"sync"
)

// Fake is an in-process backend for tests and benchmarks. By default it
// answers at once with the prompt echoed back, keeps a session id across
// resumed turns and reports a cost; set Respond to script other behaviour.
// It is safe for concurrent use.
type Fake struct {
	// Respond, if set, produces the turn instead of the echo.
	Respond func(ctx context.Context, req Request, emit func(Event)) (Result, error)
	// Forget keeps no record of the requests (Requests returns none), for
	// measurements of the gateway's own memory: a record holds each
	// request's prompt and approver.
	Forget bool

	mu       sync.Mutex // guards requests and sessions
	requests []Request
	sessions int
}

var _ Backend = (*Fake)(nil)

// Name implements Backend.
func (f *Fake) Name() string { return "fake" }

// Run implements Backend.
func (f *Fake) Run(ctx context.Context, req Request, emit func(Event)) (Result, error) {
	if !f.Forget {
		f.mu.Lock()
		f.requests = append(f.requests, req)
		f.mu.Unlock()
	}
	if emit == nil {
		emit = func(Event) {}
	}
	if f.Respond != nil {
		return f.Respond(ctx, req, emit)
	}
	id := req.SessionID
	if id == "" {
		f.mu.Lock()
		f.sessions++
		id = fmt.Sprintf("fake-session-%d", f.sessions)
		f.mu.Unlock()
	}
	emit(Event{Kind: EventInit, SessionID: id})
	text := "echo: " + req.Prompt
	emit(Event{Kind: EventText, SessionID: id, Text: text})
	res := Result{SessionID: id, Text: text, CostUSD: 0.0001, Turns: 1}
	emit(Event{Kind: EventResult, SessionID: id, Result: &res})
	return res, ctx.Err()
}

// Requests returns a copy of every request received so far.
func (f *Fake) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Request(nil), f.requests...)
}
