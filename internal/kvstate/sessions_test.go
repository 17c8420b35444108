package kvstate

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentgateway/gateway/internal/natstest"
	"github.com/agentgateway/gateway/internal/session"
)

// connect returns a JetStream client of srv, closed when the test ends.
// It keeps trying to reconnect, as the gateway's does.
func connect(t *testing.T, srv *server.Server) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(srv.ClientURL(), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// errLog collects what a shared store reports.
type errLog struct {
	mu   sync.Mutex
	errs []error
}

func (l *errLog) report(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, err)
}

func (l *errLog) all() []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]error(nil), l.errs...)
}

// machine is one worker's session store: its own sessions.json, sharing
// the bucket through its own connection.
func machine(t *testing.T, srv *server.Server, o Options) (*session.Store, *errLog) {
	t.Helper()
	remote, err := OpenSessions(context.Background(), connect(t, srv), o)
	if err != nil {
		t.Fatal(err)
	}
	s, warning, err := session.Open(filepath.Join(t.TempDir(), session.FileName))
	if err != nil || warning != "" {
		t.Fatalf("open: %v %s", err, warning)
	}
	var l errLog
	s.Share(remote, l.report)
	return s, &l
}

var ignoreUpdated = cmpopts.IgnoreFields(session.Binding{}, "Updated")

func TestSessionsBindingSetOnOneMachineIsReadOnAnother(t *testing.T) {
	srv := natstest.Start(t, t.TempDir())
	a, la := machine(t, srv, Options{})
	b, lb := machine(t, srv, Options{})
	channels := []string{"123456789012345678", "thread:42", "chat.main"}
	for i, ch := range channels {
		want := session.Binding{SessionID: "s" + string(rune('1'+i)), Backend: "claude", Persona: map[string]string{"Identity": "h"}, WorkDir: "/p/app"}
		if err := a.Set(ch, want); err != nil {
			t.Fatal(err)
		}
		got, ok := b.Get(ch)
		if !ok {
			t.Fatalf("B does not see %s", ch)
		}
		if diff := cmp.Diff(want, got, ignoreUpdated); diff != "" {
			t.Errorf("B's binding of %s (-want +got):\n%s", ch, diff)
		}
	}
	if diff := cmp.Diff([]string{"123456789012345678", "chat.main", "thread:42"}, b.Channels()); diff != "" {
		t.Errorf("B's channels (-want +got):\n%s", diff)
	}
	if errs := append(la.all(), lb.all()...); len(errs) != 0 {
		t.Errorf("errors: %v", errs)
	}
}

// A reset on B between A's Current and A's SetIn wins.
func TestSessionsResetOnAnotherMachineWins(t *testing.T) {
	srv := natstest.Start(t, t.TempDir())
	a, _ := machine(t, srv, Options{})
	b, _ := machine(t, srv, Options{})
	if err := a.Set("c1", session.Binding{SessionID: "old"}); err != nil {
		t.Fatal(err)
	}
	_, _, epoch := a.Current("c1")
	if ok, err := a.SetIn("c1", epoch, session.Binding{SessionID: "turn"}); !ok || err != nil {
		t.Fatalf("SetIn when the CLI names the session = %v, %v", ok, err)
	}
	if had, err := b.Delete("c1"); !had || err != nil {
		t.Fatalf("Delete on B = %v, %v", had, err)
	}
	if ok, err := a.SetIn("c1", epoch, session.Binding{SessionID: "turn", SessionCostUSD: 0.2}); ok || err != nil {
		t.Fatalf("SetIn at the turn's end = %v, %v; want the reset to win", ok, err)
	}
	for name, s := range map[string]*session.Store{"A": a, "B": b} {
		if got, ok := s.Get("c1"); ok {
			t.Errorf("%s sees %+v after the reset", name, got)
		}
		if s.ResetAt("c1").IsZero() {
			t.Errorf("%s has no reset time", name)
		}
	}
}

// Settings changed on A while B writes a binding: both stay.
func TestSessionsSettingsAndBindingKeepBoth(t *testing.T) {
	srv := natstest.Start(t, t.TempDir())
	a, _ := machine(t, srv, Options{})
	b, _ := machine(t, srv, Options{})
	_, _, epoch := b.Current("c1")
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for _, m := range []string{"sonnet", "opus"} {
			if _, _, err := a.UpdateSettings("c1", func(s *session.Settings) { s.Model = m }); err != nil {
				t.Error(err)
			}
		}
	}()
	go func() {
		defer wg.Done()
		for _, id := range []string{"s1", "s2"} {
			if ok, err := b.SetIn("c1", epoch, session.Binding{SessionID: id}); !ok || err != nil {
				t.Errorf("SetIn(%s) = %v, %v", id, ok, err)
			}
		}
	}()
	wg.Wait()
	for name, s := range map[string]*session.Store{"A": a, "B": b} {
		if got := s.Settings("c1"); got.Model != "opus" {
			t.Errorf("%s's settings = %+v", name, got)
		}
		if got, ok := s.Get("c1"); !ok || got.SessionID != "s2" {
			t.Errorf("%s's binding = %+v, %v", name, got, ok)
		}
	}
}

// With the server stopped, reads give the machine's own copy within the
// timeout, and report why.
func TestSessionsStoppedServerFallsBackToTheLocalCopy(t *testing.T) {
	srv := natstest.Start(t, t.TempDir())
	const timeout = 300 * time.Millisecond
	a, la := machine(t, srv, Options{Timeout: timeout})
	b, _ := machine(t, srv, Options{Timeout: timeout})
	if err := b.Set("c1", session.Binding{SessionID: "s1"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.UpdateSettings("c1", func(s *session.Settings) { s.Model = "opus" }); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.Get("c1"); !ok {
		t.Fatal("A does not see B's binding")
	}
	a.Settings("c1")
	srv.Shutdown()
	srv.WaitForShutdown()

	start := time.Now()
	got, ok := a.Get("c1")
	took := time.Since(start)
	if !ok || got.SessionID != "s1" {
		t.Errorf("Get with the server down = %+v, %v; want A's copy", got, ok)
	}
	if got := a.Settings("c1"); got.Model != "opus" {
		t.Errorf("Settings with the server down = %+v", got)
	}
	if took > 5*timeout {
		t.Errorf("Get took %s with a timeout of %s", took, timeout)
	}
	errs := la.all()
	if len(errs) != 2 {
		t.Fatalf("reported %v, want 2 errors", errs)
	}
	if err := a.Set("c2", session.Binding{SessionID: "s2"}); err == nil {
		t.Error("Set with the server down reported no error")
	}
	if got, ok := a.Get("c2"); !ok || got.SessionID != "s2" {
		t.Errorf("A's copy after a failed write = %+v, %v", got, ok)
	}
}

// A bucket made with other settings is a start error, not a silent change.
func TestOpenSessionsChecksTheBucket(t *testing.T) {
	srv := natstest.Start(t, t.TempDir())
	js := connect(t, srv)
	cfg := SessionsConfig(Options{})
	cfg.History = 5
	if _, err := js.CreateKeyValue(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenSessions(context.Background(), js, Options{}); err == nil {
		t.Error("OpenSessions accepted a bucket keeping 5 revisions")
	}
}
