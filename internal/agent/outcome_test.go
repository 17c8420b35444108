package agent

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/queue"
	"github.com/agentgateway/gateway/internal/session"
)

// A /claude-reset given while a turn runs wins: the turn's end does not
// bind the channel to the session it was running in, whether that session
// was new or resumed.
func TestResetDuringTurnWins(t *testing.T) {
	for _, resumed := range []bool{false, true} {
		name := map[bool]string{false: "new session", true: "resumed session"}[resumed]
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, Options{}, nil)
			if resumed {
				f.sessions.Set("c", session.Binding{SessionID: "old", Backend: "fake"})
			}
			started, release := make(chan struct{}), make(chan struct{})
			f.fake.Respond = func(ctx context.Context, req backends.Request, emit func(backends.Event)) (backends.Result, error) {
				id := req.SessionID
				if id == "" {
					id = "new"
				}
				emit(backends.Event{Kind: backends.EventInit, SessionID: id})
				close(started)
				<-release
				return backends.Result{SessionID: id, Text: "done", SessionCostUSD: 0.5}, nil
			}
			done := make(chan Outcome)
			go func() { done <- f.rt.Process(context.Background(), message("c", "long job")) }()
			<-started
			if _, err := f.sessions.Delete("c"); err != nil {
				t.Fatal(err)
			}
			close(release)
			out := <-done
			if out.Err != nil || out.Reply != "done" {
				t.Fatalf("outcome = %+v", out)
			}
			if b, ok := f.sessions.Get("c"); ok {
				t.Errorf("after a reset during the turn the channel is bound to %q; want no binding", b.SessionID)
			}
			// The next turn starts fresh and binds again.
			f.fake.Respond = nil
			f.rt.Process(context.Background(), message("c", "again"))
			if reqs := f.fake.Requests(); reqs[len(reqs)-1].SessionID != "" {
				t.Errorf("turn after the reset resumed %q", reqs[len(reqs)-1].SessionID)
			}
			if _, ok := f.sessions.Get("c"); !ok {
				t.Error("the turn after the reset did not bind its new session")
			}
		})
	}
}

// Refused tools are logged on "event finished" and named in the reply,
// with the settings that allow them.
func TestPermissionDenialsAreReported(t *testing.T) {
	f := newFixture(t, Options{}, nil)
	var logs bytes.Buffer
	f.rt.log = zerolog.New(&logs)
	f.fake.Respond = func(ctx context.Context, req backends.Request, emit func(backends.Event)) (backends.Result, error) {
		return backends.Result{SessionID: "s", Text: "I could not write the file.", PermissionDenials: []string{"Write", "Bash", "Write"}}, nil
	}
	f.rt.Process(context.Background(), message("c", "write a file"))
	reply := f.out.last("c")
	if !strings.HasPrefix(reply, "I could not write the file.") {
		t.Errorf("reply lost the agent's text: %q", reply)
	}
	if !strings.Contains(reply, "Not allowed to use: Bash, Write.") || !strings.Contains(reply, "ALLOWED_TOOLS") {
		t.Errorf("reply does not name the refused tools and the setting: %q", reply)
	}
	if !strings.Contains(logs.String(), `"permission_denials":["Write","Bash","Write"]`) {
		t.Errorf("event finished does not log the denials:\n%s", logs.String())
	}
}

// A scheduled check that keeps failing posts its failure once; repeats are
// only logged until it succeeds, and a new failure after that is posted.
func TestRepeatedScheduledFailurePostedOnce(t *testing.T) {
	f := newFixture(t, Options{}, nil)
	var mu sync.Mutex
	fail := true
	f.fake.Respond = func(ctx context.Context, req backends.Request, emit func(backends.Event)) (backends.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			return backends.Result{}, &backends.Error{Kind: backends.KindAPI, Status: 500}
		}
		return backends.Result{Text: "Inbox has 2 urgent mails."}, nil
	}
	setFail := func(v bool) { mu.Lock(); fail = v; mu.Unlock() }
	hb := queue.Event{ID: 1, Kind: queue.KindHeartbeat, Name: "inbox", ChannelID: "out", Text: "check"}
	other := queue.Event{ID: 2, Kind: queue.KindHeartbeat, Name: "calendar", ChannelID: "out", Text: "check"}
	posted := func() int {
		f.out.mu.Lock()
		defer f.out.mu.Unlock()
		return len(f.out.got["out"])
	}
	for i := 0; i < 3; i++ {
		f.rt.Process(context.Background(), hb)
	}
	if n := posted(); n != 1 {
		t.Fatalf("three failing runs posted %d messages, want 1", n)
	}
	f.rt.Process(context.Background(), other) // another check's failure is its own
	if n := posted(); n != 2 {
		t.Fatalf("another check's first failure: %d messages, want 2", n)
	}
	setFail(false)
	f.rt.Process(context.Background(), hb)
	if n := posted(); n != 3 {
		t.Fatalf("recovery: %d messages, want 3", n)
	}
	setFail(true)
	f.rt.Process(context.Background(), hb)
	if n := posted(); n != 4 {
		t.Fatalf("failure after recovery: %d messages, want 4 (it is new)", n)
	}
}

// A turn cancelled by a shutdown that does not wait posts no failure
// notice: its prompt is taken up again at the next start.
func TestShutdownCancellationPostsNothing(t *testing.T) {
	f := newFixture(t, Options{}, nil)
	f.fake.Respond = func(ctx context.Context, req backends.Request, emit func(backends.Event)) (backends.Result, error) {
		<-ctx.Done()
		return backends.Result{}, &backends.Error{Kind: backends.KindCanceled, Err: ctx.Err()}
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(queue.ErrShutdown)
	out := f.rt.Process(ctx, message("c", "hello"))
	if got := f.out.last("c"); got != "" {
		t.Errorf("a shutdown posted %q", got)
	}
	if !out.Interrupted {
		t.Error("Outcome.Interrupted is not set: the event would count as answered")
	}
}
