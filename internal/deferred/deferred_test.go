package deferred

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
)

// fired records the prompts handed to the queue.
type fired struct {
	mu   sync.Mutex
	got  []Prompt
	fail int // refuse this many first
	ch   chan struct{}
}

func (f *fired) fire(p Prompt) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer func() { f.ch <- struct{}{} }()
	if f.fail > 0 {
		f.fail--
		return errors.New("queue full")
	}
	f.got = append(f.got, p)
	return nil
}

func (f *fired) wait(t *testing.T) {
	t.Helper()
	select {
	case <-f.ch:
	case <-time.After(10 * time.Second):
		t.Fatal("no prompt fired")
	}
}

func TestDeferredPromptFiresWhenDueAndSurvivesARestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	clock := clockwork.NewFakeClockAt(time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC))
	f := &fired{ch: make(chan struct{}, 10)}
	s, err := Open(path, clock, f.fire, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Add(Prompt{ChannelID: "1", Prompt: "check the deploy", Due: clock.Now().Add(10 * time.Minute)}, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Add(Prompt{ChannelID: "1", Prompt: "later", Due: clock.Now().Add(time.Hour)}, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Add(Prompt{ChannelID: "1", Prompt: "one too many", Due: clock.Now()}, 2); !errors.Is(err, ErrTooMany) {
		t.Fatalf("third prompt: %v, want ErrTooMany", err)
	}
	clock.BlockUntil(2)
	clock.Advance(10 * time.Minute)
	f.wait(t)
	if len(f.got) != 1 || f.got[0].Prompt != "check the deploy" {
		t.Fatalf("fired %+v", f.got)
	}
	waitPending(t, s, 1)
	// The gateway stops; the second prompt falls due while it is down.
	s.Close()
	clock.Advance(2 * time.Hour)
	f2 := &fired{ch: make(chan struct{}, 10), fail: 1}
	s2, err := Open(path, clock, f2.fire, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	f2.wait(t) // refused by a full queue: kept
	if n := s2.Pending(); n != 1 {
		t.Fatalf("%d pending after a refusal, want 1", n)
	}
	clock.BlockUntil(1)
	clock.Advance(retryFire)
	f2.wait(t)
	if len(f2.got) != 1 || f2.got[0].Prompt != "later" {
		t.Fatalf("after the restart fired %+v", f2.got)
	}
	waitPending(t, s2, 0) // the store forgets a prompt once fire returned
	data, _ := os.ReadFile(path)
	if string(data) != "[]\n" {
		t.Errorf("file after both fired = %q", data)
	}
}

// waitPending waits until n prompts are pending.
func waitPending(t *testing.T, s *Store, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for s.Pending() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d pending, want %d", s.Pending(), n)
		}
		<-tick.C
	}
}

func TestCorruptFileIsAnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	os.WriteFile(path, []byte("{not json"), 0o600)
	if _, err := Open(path, clockwork.NewFakeClock(), func(Prompt) error { return nil }, zerolog.Nop()); err == nil {
		t.Fatal("a corrupt file was read")
	}
}
