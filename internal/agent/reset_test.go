package agent

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/queue"
	"github.com/agentgateway/gateway/internal/session"
)

// talk is an archive as the gateway keeps one: every finished event is an
// exchange that began when its turn did, and the recent context is the
// exchanges that began at or after since.
type talk struct {
	mu      sync.Mutex // guards entries
	entries []talkEntry
}

type talkEntry struct {
	began time.Time
	text  string
}

func (a *talk) Exchange(e queue.Event, _ Outcome, took time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.entries = append(a.entries, talkEntry{time.Now().Add(-took), e.Text})
}

func (a *talk) RecentContext(_, _ string, since time.Time) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var said []string
	for _, x := range a.entries {
		if !x.began.Before(since) {
			said = append(said, x.text)
		}
	}
	if len(said) == 0 {
		return ""
	}
	return "[Recent: " + strings.Join(said, ", ") + "]"
}

// sessionsOfTheirOwn answers every run, numbering new sessions, and fails
// the resume of any session named in lost as the CLI does for a session it
// no longer knows.
func sessionsOfTheirOwn(lost ...string) func(context.Context, backends.Request, func(backends.Event)) (backends.Result, error) {
	var mu sync.Mutex
	n := 0
	return func(_ context.Context, req backends.Request, emit func(backends.Event)) (backends.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range lost {
			if req.SessionID == id {
				return backends.Result{}, &backends.Error{Kind: backends.KindStaleSession, Message: "No conversation found with session ID: " + id}
			}
		}
		id := req.SessionID
		if id == "" {
			n++
			id = fmt.Sprintf("s%d", n)
		}
		emit(backends.Event{Kind: backends.EventInit, SessionID: id})
		return backends.Result{SessionID: id, Text: "ok"}, nil
	}
}

// DESIGN decision 23: a reset (by a person, also with a restart before the
// next prompt) gives the next session no earlier turn; a session lost
// without anyone asking is given the recent conversation, from the last
// reset on.
func TestRecentContextOnlyForALostSession(t *testing.T) {
	type step struct {
		say     string // a prompt in channel c
		reset   bool   // /claude-reset or the dashboard's Reset
		restart bool   // a new runtime over the same files
		rebind  string // binds c to this session of another backend
	}
	for _, tc := range []struct {
		name  string
		lost  []string
		steps []step
		want  []string // every prompt the backend was given
	}{
		{"a reset is a clean slate", nil,
			[]step{{say: "first"}, {reset: true}, {say: "again"}},
			[]string{"first", "again"}},
		{"a reset then a restart is a clean slate", nil,
			[]step{{say: "first"}, {reset: true}, {restart: true}, {say: "again"}},
			[]string{"first", "again"}},
		{"a session the CLI cannot resume", []string{"s1"},
			[]step{{say: "first"}, {say: "again"}},
			[]string{"first", "again", "[Recent: first]\n\nagain"}},
		{"a session the CLI cannot resume, after a restart", []string{"s1"},
			[]step{{say: "first"}, {restart: true}, {say: "again"}},
			[]string{"first", "again", "[Recent: first]\n\nagain"}},
		{"a session of another backend", nil,
			[]step{{say: "first"}, {rebind: "x1"}, {say: "again"}},
			[]string{"first", "[Recent: first]\n\nagain"}},
		{"a lost session after a reset: only what came since", []string{"s2"},
			[]step{{say: "first"}, {reset: true}, {say: "second"}, {say: "third"}},
			[]string{"first", "second", "third", "[Recent: second]\n\nthird"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			history := &talk{}
			opts := Options{History: history, Exchanges: history}
			f := newFixture(t, opts, nil)
			rt, sessions := f.rt, f.sessions
			var prompts []string
			f.fake.Respond = sessionsOfTheirOwn(tc.lost...)
			for _, s := range tc.steps {
				switch {
				case s.reset:
					if _, err := sessions.Delete("c"); err != nil {
						t.Fatal(err)
					}
				case s.restart:
					prompts = append(prompts, promptsOf(f.fake.Requests())...)
					var err error
					if sessions, _, err = session.Open(filepath.Join(f.dir, session.FileName)); err != nil {
						t.Fatal(err)
					}
					f.fake = &backends.Fake{Respond: f.fake.Respond}
					rt = New(rt.opts, f.fake, sessions, f.out, nil, zerolog.New(zerolog.NewTestWriter(t)))
				case s.rebind != "":
					if err := sessions.Set("c", session.Binding{SessionID: s.rebind, Backend: "other"}); err != nil {
						t.Fatal(err)
					}
				default:
					if out := rt.Process(context.Background(), message("c", s.say)); out.Err != nil {
						t.Fatalf("%s: %v", s.say, out.Err)
					}
				}
			}
			prompts = append(prompts, promptsOf(f.fake.Requests())...)
			if d := cmp.Diff(tc.want, prompts); d != "" {
				t.Errorf("prompts given to the backend (-want +got):\n%s", d)
			}
		})
	}
}

func promptsOf(reqs []backends.Request) []string {
	var out []string
	for _, r := range reqs {
		out = append(out, r.Prompt)
	}
	return out
}
