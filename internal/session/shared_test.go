package session

import (
	"context"
	"errors"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// memRemote is a Remote in memory with the revision rules of a JetStream
// KV bucket: one revision counter for the whole bucket, Update at 0
// creates. The NATS-backed Remote is tested in internal/kvstate.
type memRemote struct {
	mu   sync.Mutex // guards everything below
	rev  uint64
	recs map[string]Record
	down bool
	// beforeUpdate, if set, runs (unlocked) before each Update: a test's
	// way to change the bucket between a read and a write.
	beforeUpdate func(kind, channel string)
	updates      int
}

var _ Remote = (*memRemote)(nil)

var errDown = errors.New("remote: no servers available")

func newMemRemote() *memRemote { return &memRemote{recs: map[string]Record{}} }

func (m *memRemote) setDown(down bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.down = down
}

func (m *memRemote) Get(_ context.Context, kind, channel string) (Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return Record{}, errDown
	}
	return m.recs[kind+"."+channel], nil
}

func (m *memRemote) Update(_ context.Context, kind, channel string, value []byte, revision uint64) (uint64, bool, error) {
	m.mu.Lock()
	hook := m.beforeUpdate
	m.mu.Unlock()
	if hook != nil {
		hook(kind, channel)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return 0, false, errDown
	}
	m.updates++
	k := kind + "." + channel
	if m.recs[k].Revision != revision {
		return 0, false, nil
	}
	m.rev++
	m.recs[k] = Record{Value: append([]byte(nil), value...), Revision: m.rev}
	return m.rev, true, nil
}

func (m *memRemote) List(_ context.Context, kind string) (map[string]Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return nil, errDown
	}
	out := map[string]Record{}
	for k, r := range m.recs {
		if len(k) > len(kind) && k[:len(kind)+1] == kind+"." {
			out[k[len(kind)+1:]] = r
		}
	}
	return out, nil
}

// errLog collects what a shared Store reports.
type errLog struct {
	mu   sync.Mutex
	errs []error
}

func (l *errLog) log(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, err)
}

func (l *errLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.errs)
}

// sharedPair is two Stores on two machines (two files) sharing r.
func sharedPair(t *testing.T, r Remote) (a, b *Store, la, lb *errLog) {
	t.Helper()
	a = openStore(t, filepath.Join(t.TempDir(), FileName))
	b = openStore(t, filepath.Join(t.TempDir(), FileName))
	la, lb = &errLog{}, &errLog{}
	a.Share(r, la.log)
	b.Share(r, lb.log)
	return a, b, la, lb
}

var ignoreUpdated = cmpopts.IgnoreFields(Binding{}, "Updated")

func TestSharedBindingFollowsTheChannel(t *testing.T) {
	a, b, la, lb := sharedPair(t, newMemRemote())
	want := Binding{SessionID: "s1", Backend: "claude", Persona: map[string]string{"Identity": "h1"}, WorkDir: "/p/app", SessionCostUSD: 0.5}
	if err := a.Set("c1", want); err != nil {
		t.Fatal(err)
	}
	if err := a.Set("c2", Binding{SessionID: "s2"}); err != nil {
		t.Fatal(err)
	}
	got, ok := b.Get("c1")
	if !ok {
		t.Fatal("B does not see the binding A set")
	}
	if diff := cmp.Diff(want, got, ignoreUpdated); diff != "" {
		t.Errorf("B's binding (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"c1", "c2"}, b.Channels()); diff != "" {
		t.Errorf("B's channels (-want +got):\n%s", diff)
	}
	if _, _, err := a.UpdateSettings("c1", func(s *Settings) { s.Model = "opus" }); err != nil {
		t.Fatal(err)
	}
	if got := b.Settings("c1"); got.Model != "opus" {
		t.Errorf("B's settings = %+v, want model opus", got)
	}
	if _, err := b.Delete("c1"); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.Get("c1"); ok {
		t.Error("A still sees the binding B reset")
	}
	if a.ResetAt("c1").IsZero() {
		t.Error("A does not see when B reset the channel")
	}
	if diff := cmp.Diff([]string{"c2"}, a.Channels()); diff != "" {
		t.Errorf("A's channels after the reset (-want +got):\n%s", diff)
	}
	if n := la.count() + lb.count(); n != 0 {
		t.Errorf("%d errors reported with the remote up", n)
	}
}

// A turn notes its conversation with Current and binds with SetIn, once
// when the CLI names the session and again when it ends; a reset or a
// drop on another machine in between wins, a plain Set does not.
func TestSharedResetOnAnotherMachineWins(t *testing.T) {
	tests := []struct {
		name    string
		between func(b *Store) error
		stored  bool
	}{
		{"nothing", func(*Store) error { return nil }, true},
		{"reset", func(b *Store) error { _, err := b.Delete("c1"); return err }, false},
		{"drop", func(b *Store) error { _, err := b.Drop("c1"); return err }, false},
		{"drop of no binding", func(b *Store) error {
			if _, err := b.Drop("c1"); err != nil {
				return err
			}
			_, err := b.Drop("c1")
			return err
		}, false},
		{"set", func(b *Store) error { return b.Set("c1", Binding{SessionID: "other"}) }, true},
		{"settings", func(b *Store) error {
			_, _, err := b.UpdateSettings("c1", func(s *Settings) { s.Model = "m" })
			return err
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b, _, _ := sharedPair(t, newMemRemote())
			if err := a.Set("c1", Binding{SessionID: "old"}); err != nil {
				t.Fatal(err)
			}
			_, _, epoch := a.Current("c1")
			if ok, err := a.SetIn("c1", epoch, Binding{SessionID: "turn"}); !ok || err != nil {
				t.Fatalf("first SetIn = %v, %v", ok, err)
			}
			if err := tt.between(b); err != nil {
				t.Fatal(err)
			}
			ok, err := a.SetIn("c1", epoch, Binding{SessionID: "turn", SessionCostUSD: 1})
			if err != nil || ok != tt.stored {
				t.Fatalf("SetIn after %s = %v, %v; want %v", tt.name, ok, err, tt.stored)
			}
			got, bound := b.Get("c1")
			if tt.stored && (!bound || got.SessionID != "turn") {
				t.Errorf("B sees %+v, %v; want the turn's session", got, bound)
			}
			if !tt.stored && bound {
				t.Errorf("B sees %+v after the reset; want none", got)
			}
			// A turn that begins after it binds again.
			_, _, next := a.Current("c1")
			if ok, err := a.SetIn("c1", next, Binding{SessionID: "next"}); !ok || err != nil {
				t.Errorf("SetIn in the next conversation = %v, %v", ok, err)
			}
		})
	}
}

// A reset landing between SetIn's read and its write still wins: the
// write is checked against the revision read.
func TestSharedResetRacingSetInWins(t *testing.T) {
	r := newMemRemote()
	a, b, _, _ := sharedPair(t, r)
	_, _, epoch := a.Current("c1")
	var once sync.Once
	r.beforeUpdate = func(kind, channel string) {
		if kind == KindBinding {
			once.Do(func() {
				r.beforeUpdate = nil
				if _, err := b.Delete("c1"); err != nil {
					t.Error(err)
				}
			})
		}
	}
	ok, err := a.SetIn("c1", epoch, Binding{SessionID: "turn"})
	if err != nil || ok {
		t.Fatalf("SetIn = %v, %v; want the reset to win", ok, err)
	}
	if got, bound := a.Get("c1"); bound {
		t.Errorf("binding %+v survived the reset", got)
	}
}

// /model on one machine and a turn's binding on another are separate
// records: neither undoes the other, also when they collide.
func TestSharedSettingsAndBindingKeepBoth(t *testing.T) {
	r := newMemRemote()
	a, b, _, _ := sharedPair(t, r)
	if _, _, err := a.UpdateSettings("c1", func(s *Settings) { s.Project = "/p/app" }); err != nil {
		t.Fatal(err)
	}
	_, _, epoch := b.Current("c1")
	// B's settings change collides with A's: A's write retries on the
	// fresh value.
	var once sync.Once
	r.beforeUpdate = func(kind, channel string) {
		if kind == KindSettings {
			once.Do(func() {
				r.beforeUpdate = nil
				if _, _, err := b.UpdateSettings("c1", func(s *Settings) { s.SystemPrompt = "be brief" }); err != nil {
					t.Error(err)
				}
			})
		}
	}
	before, after, err := a.UpdateSettings("c1", func(s *Settings) { s.Model = "opus" })
	if err != nil {
		t.Fatal(err)
	}
	want := Settings{Project: "/p/app", Model: "opus", SystemPrompt: "be brief"}
	if diff := cmp.Diff(want, after); diff != "" {
		t.Errorf("after (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(Settings{Project: "/p/app", SystemPrompt: "be brief"}, before); diff != "" {
		t.Errorf("before (-want +got):\n%s", diff)
	}
	if ok, err := b.SetIn("c1", epoch, Binding{SessionID: "s1"}); !ok || err != nil {
		t.Fatalf("SetIn = %v, %v", ok, err)
	}
	for name, s := range map[string]*Store{"A": a, "B": b} {
		if diff := cmp.Diff(want, s.Settings("c1")); diff != "" {
			t.Errorf("%s's settings (-want +got):\n%s", name, diff)
		}
		if got, ok := s.Get("c1"); !ok || got.SessionID != "s1" {
			t.Errorf("%s's binding = %+v, %v", name, got, ok)
		}
	}
}

// With the remote unreachable, reads give the local copy and report the
// error; changes stay in the local copy and return the error.
func TestSharedFallsBackToTheLocalCopy(t *testing.T) {
	r := newMemRemote()
	a, b, la, _ := sharedPair(t, r)
	if err := b.Set("c1", Binding{SessionID: "s1"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.UpdateSettings("c1", func(s *Settings) { s.Model = "opus" }); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.Get("c1"); !ok { // A's copy now holds it
		t.Fatal("A does not see B's binding")
	}
	a.Settings("c1")
	r.setDown(true)
	reads := []struct {
		name string
		read func() any
		want any
	}{
		{"Get", func() any { b, _ := a.Get("c1"); return b.SessionID }, "s1"},
		{"Current", func() any { b, _, _ := a.Current("c1"); return b.SessionID }, "s1"},
		{"Settings", func() any { return a.Settings("c1").Model }, "opus"},
		{"Channels", func() any { return a.Channels() }, []string{"c1"}},
		{"ResetAt", func() any { return a.ResetAt("c1") }, time.Time{}},
	}
	for _, rd := range reads {
		before := la.count()
		if diff := cmp.Diff(rd.want, rd.read()); diff != "" {
			t.Errorf("%s with the remote down (-want +got):\n%s", rd.name, diff)
		}
		if la.count() != before+1 {
			t.Errorf("%s reported %d errors, want 1", rd.name, la.count()-before)
		}
	}
	for _, e := range la.errs {
		if !errors.Is(e, errDown) {
			t.Errorf("reported %v, want it to wrap the remote's error", e)
		}
	}
	if err := a.Set("c2", Binding{SessionID: "s2"}); !errors.Is(err, errDown) {
		t.Errorf("Set with the remote down = %v, want its error", err)
	}
	if got, ok := a.Get("c2"); !ok || got.SessionID != "s2" {
		t.Errorf("local copy after a failed write-through = %+v, %v", got, ok)
	}
	// The local copy is on disk: a restart without the remote has it.
	again := openStore(t, a.path)
	if got, ok := again.Get("c1"); !ok || got.SessionID != "s1" {
		t.Errorf("A's file after a restart = %+v, %v", got, ok)
	}
	if got := again.Settings("c1"); got.Model != "opus" {
		t.Errorf("A's file's settings = %+v", got)
	}
}

// Sharing a store that has bindings of its own (the machine that ran
// alone before) puts them in the remote where it has none, and never
// replaces what is there.
func TestShareSeedsTheRemote(t *testing.T) {
	r := newMemRemote()
	first := openStore(t, filepath.Join(t.TempDir(), FileName))
	if err := first.Set("c1", Binding{SessionID: "s1"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := first.UpdateSettings("c1", func(s *Settings) { s.Model = "opus" }); err != nil {
		t.Fatal(err)
	}
	if _, err := first.Delete("c9"); err != nil {
		t.Fatal(err)
	}
	stale := openStore(t, filepath.Join(t.TempDir(), FileName))
	if err := stale.Set("c1", Binding{SessionID: "stale"}); err != nil {
		t.Fatal(err)
	}
	var l errLog
	first.Share(r, l.log)
	stale.Share(r, l.log)
	fresh := openStore(t, filepath.Join(t.TempDir(), FileName))
	fresh.Share(r, l.log)
	if got, ok := fresh.Get("c1"); !ok || got.SessionID != "s1" {
		t.Errorf("binding = %+v, %v; want the first machine's", got, ok)
	}
	if got := fresh.Settings("c1"); got.Model != "opus" {
		t.Errorf("settings = %+v", got)
	}
	if fresh.ResetAt("c9").IsZero() {
		t.Error("the reset time was not shared")
	}
	if got, ok := stale.Get("c1"); !ok || got.SessionID != "s1" {
		t.Errorf("the stale machine reads %+v, %v; want the shared binding", got, ok)
	}
	if l.count() != 0 {
		t.Errorf("errors: %v", l.errs)
	}
}

// Records that are not what a Store writes are read as nothing, and
// reported.
func TestSharedUnreadableRecordIsReported(t *testing.T) {
	r := newMemRemote()
	a, _, la, _ := sharedPair(t, r)
	r.recs[KindBinding+".c1"] = Record{Value: []byte("not json"), Revision: 7}
	if _, ok := a.Get("c1"); ok {
		t.Error("a binding from an unreadable record")
	}
	if la.count() != 1 {
		t.Errorf("%d errors reported, want 1", la.count())
	}
	// It is written over by the next binding.
	_, _, epoch := a.Current("c1")
	if ok, err := a.SetIn("c1", epoch, Binding{SessionID: "s1"}); !ok || err != nil {
		t.Errorf("SetIn over an unreadable record = %v, %v", ok, err)
	}
}

func TestSharedConcurrentTurnsKeepEveryChannel(t *testing.T) {
	a, b, _, _ := sharedPair(t, newMemRemote())
	var wg sync.WaitGroup
	want := []string{}
	for i := range 20 {
		ch := string(rune('a' + i))
		want = append(want, ch)
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, epoch := s.Current(ch)
			if ok, err := s.SetIn(ch, epoch, Binding{SessionID: "s-" + ch}); !ok || err != nil {
				t.Errorf("SetIn(%s) = %v, %v", ch, ok, err)
			}
		}()
	}
	wg.Wait()
	sort.Strings(want)
	for name, s := range map[string]*Store{"A": a, "B": b} {
		if diff := cmp.Diff(want, s.Channels()); diff != "" {
			t.Errorf("%s's channels (-want +got):\n%s", name, diff)
		}
	}
}
