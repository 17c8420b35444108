package agent

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/session"
)

// isolating is a fake backend that can run without the user's settings,
// as claude can.
type isolating struct{ *backends.Fake }

func (isolating) Isolates() bool { return true }

// failsAtStart makes the fake's first n runs exit before any event, the
// way a CLI that cannot start does; the later ones answer.
func failsAtStart(n int, kind backends.ErrorKind) func(context.Context, backends.Request, func(backends.Event)) (backends.Result, error) {
	runs := 0
	return func(_ context.Context, req backends.Request, emit func(backends.Event)) (backends.Result, error) {
		runs++
		if runs <= n {
			return backends.Result{}, &backends.Error{Kind: kind, Message: "exit status 1"}
		}
		emit(backends.Event{Kind: backends.EventInit, SessionID: "fresh"})
		return backends.Result{SessionID: "fresh", Text: "answered"}, nil
	}
}

// step describes one run of the ladder as the backend saw it.
type step struct {
	Session  string
	Isolated bool
}

func stepsOf(reqs []backends.Request) []step {
	var out []step
	for _, r := range reqs {
		out = append(out, step{r.SessionID, r.Isolated})
	}
	return out
}

func TestRetryLadder(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fails     int
		kind      backends.ErrorKind
		isolates  bool
		want      []step
		ok        bool
		freshNote bool
	}{
		{"a passing fault: the same run again", 1, backends.KindCrashed, true,
			[]step{{"s1", false}, {"s1", false}}, true, false},
		{"a session the CLI cannot load: without resume", 2, backends.KindCrashed, true,
			[]step{{"s1", false}, {"s1", false}, {"", false}}, true, true},
		{"user settings that break the CLI: without them", 3, backends.KindCrashed, true,
			[]step{{"s1", false}, {"s1", false}, {"", false}, {"", true}}, true, true},
		{"every step fails: the last error", 9, backends.KindCrashed, true,
			[]step{{"s1", false}, {"s1", false}, {"", false}, {"", true}}, false, false},
		{"a CLI that cannot isolate skips that step", 9, backends.KindExecution, false,
			[]step{{"s1", false}, {"s1", false}, {"", false}}, false, false},
		{"a missing binary is not retried", 9, backends.KindNotFound, true,
			[]step{{"s1", false}}, false, false},
		{"a refused key is not retried", 9, backends.KindAuth, true,
			[]step{{"s1", false}}, false, false},
		// claude as root with bypassPermissions: the gateway said so at
		// start, and no step changes the permission mode.
		{"a refused permission mode is not retried", 9, backends.KindPermission, true,
			[]step{{"s1", false}}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Options{}, nil)
			if tc.isolates {
				f.rt.backend = isolating{f.fake}
			}
			f.sessions.Set("c", session.Binding{SessionID: "s1", Backend: "fake"})
			f.fake.Respond = failsAtStart(tc.fails, tc.kind)
			out := f.rt.Process(context.Background(), message("c", "hello"))
			if d := cmp.Diff(tc.want, stepsOf(f.fake.Requests())); d != "" {
				t.Errorf("runs (-want +got):\n%s", d)
			}
			if (out.Err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok %v", out.Err, tc.ok)
			}
			reply := f.out.last("c")
			if tc.ok && !strings.Contains(reply, "answered") {
				t.Errorf("reply = %q, want the answer", reply)
			}
			if got := strings.Contains(reply, "could not be resumed"); got != tc.freshNote {
				t.Errorf("reply = %q; note about the new session: %v, want %v", reply, got, tc.freshNote)
			}
			for _, r := range f.fake.Requests() {
				if !strings.HasSuffix(r.Prompt, "\n\nhello") && r.Prompt != "hello" {
					t.Errorf("a step changed the prompt: %q", r.Prompt)
				}
			}
		})
	}
}

// A CLI that failed after it started (it printed events) is not run
// again: the turn may have done things.
func TestNoLadderAfterTheCLIStarted(t *testing.T) {
	f := newFixture(t, Options{}, nil)
	f.fake.Respond = func(_ context.Context, _ backends.Request, emit func(backends.Event)) (backends.Result, error) {
		emit(backends.Event{Kind: backends.EventInit, SessionID: "s"})
		return backends.Result{}, &backends.Error{Kind: backends.KindCrashed}
	}
	f.rt.Process(context.Background(), message("c", "hello"))
	if n := len(f.fake.Requests()); n != 1 {
		t.Errorf("%d runs, want 1", n)
	}
}

// recent is a History with a fixed section.
type recent string

func (r recent) RecentContext(string, string, time.Time) string { return string(r) }

// The recent conversation reaches a new session's first prompt only.
func TestRecentContextOnlyForANewSession(t *testing.T) {
	f := newFixture(t, Options{History: recent("[Recent conversation]\nalice: hi\n[End]")}, nil)
	f.fake.Respond = func(_ context.Context, req backends.Request, emit func(backends.Event)) (backends.Result, error) {
		emit(backends.Event{Kind: backends.EventInit, SessionID: "s"})
		return backends.Result{SessionID: "s", Text: "ok"}, nil
	}
	f.rt.Process(context.Background(), message("c", "first"))
	f.rt.Process(context.Background(), message("c", "second"))
	reqs := f.fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d runs", len(reqs))
	}
	if want := "[Recent conversation]\nalice: hi\n[End]\n\nfirst"; reqs[0].Prompt != want {
		t.Errorf("new session prompt = %q, want %q", reqs[0].Prompt, want)
	}
	if reqs[1].Prompt != "second" {
		t.Errorf("resumed prompt = %q, want it alone", reqs[1].Prompt)
	}
}
