package kvdeferred

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jonboulle/clockwork"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/deferred"
	"github.com/agentgateway/gateway/internal/natstest"
)

func connect(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url)
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

func open(t *testing.T, js jetstream.JetStream, clock clockwork.Clock) *Store {
	t.Helper()
	s, err := Open(context.Background(), js, Options{Replicas: 1, Clock: clock, Log: zerolog.New(zerolog.NewTestWriter(t))})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fires records what a firing loop queued.
type fires struct {
	mu   sync.Mutex
	got  []string
	fail bool
	seen chan struct{}
}

func newFires() *fires { return &fires{seen: make(chan struct{}, 16)} }

func (f *fires) fire(p deferred.Prompt) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		return errors.New("queue refused")
	}
	f.got = append(f.got, p.ChannelID+": "+p.Prompt)
	f.seen <- struct{}{}
	return nil
}

func (f *fires) list() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.got...)
}

// run starts s's firing loop until the test ends (or stop is called).
func run(t *testing.T, s *Store, fire deferred.Fire) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, fire) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-time.After(5 * time.Millisecond)
	}
}

// A prompt deferred on one process fires on the one that runs the loop,
// after the first is gone, once; a second loop taking over (a failover)
// does not fire it again.
func TestAPromptDeferredElsewhereFiresOnce(t *testing.T) {
	srv := natstest.Start(t, t.TempDir())
	clock := clockwork.NewFakeClock()
	worker := open(t, connect(t, srv.ClientURL()), clock)
	if _, err := worker.Add(deferred.Prompt{ChannelID: "7", Prompt: "check the build", Due: clock.Now().Add(time.Hour)}, 10); err != nil {
		t.Fatal(err)
	}
	// The worker that deferred it stops.
	leader := open(t, connect(t, srv.ClientURL()), clock)
	f := newFires()
	stop := run(t, leader, f.fire)
	waitFor(t, "the loop to read the bucket", func() bool { return leader.Pending() == 1 && leader.armed() == 1 })
	clock.Advance(59 * time.Minute)
	if got := f.list(); len(got) != 0 {
		t.Fatalf("fired early: %q", got)
	}
	clock.Advance(time.Minute)
	<-f.seen
	waitFor(t, "the prompt removed", func() bool { return leader.Pending() == 0 })
	stop()
	next := open(t, connect(t, srv.ClientURL()), clock)
	run(t, next, f.fire)
	waitFor(t, "the next loop to read the bucket", next.loaded)
	clock.Advance(2 * time.Hour)
	if diff := cmp.Diff([]string{"7: check the build"}, f.list()); diff != "" {
		t.Fatalf("fired (-want +got):\n%s", diff)
	}
}

// A prompt the queue refuses stays and fires at the next try.
func TestAPromptTheQueueRefusedIsTriedAgain(t *testing.T) {
	srv := natstest.Start(t, t.TempDir())
	clock := clockwork.NewFakeClock()
	s := open(t, connect(t, srv.ClientURL()), clock)
	f := newFires()
	f.fail = true
	run(t, s, f.fire)
	if _, err := s.Add(deferred.Prompt{ChannelID: "7", Prompt: "later", Due: clock.Now()}, 10); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the refused try", func() bool { return s.tries() >= 1 })
	f.mu.Lock()
	f.fail = false
	f.mu.Unlock()
	waitFor(t, "the retry armed", func() bool { return s.armed() == 1 })
	clock.Advance(retryFire)
	<-f.seen
	waitFor(t, "the prompt removed", func() bool { return s.Pending() == 0 })
}

// The pending limit counts every process's prompts.
func TestPendingLimitIsShared(t *testing.T) {
	srv := natstest.Start(t, t.TempDir())
	a := open(t, connect(t, srv.ClientURL()), nil)
	b := open(t, connect(t, srv.ClientURL()), nil)
	for _, s := range []*Store{a, b} {
		if _, err := s.Add(deferred.Prompt{ChannelID: "7", Prompt: "x", Due: s.Now().Add(time.Hour)}, 2); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Add(deferred.Prompt{ChannelID: "7", Prompt: "x", Due: a.Now().Add(time.Hour)}, 2); !errors.Is(err, deferred.ErrTooMany) {
		t.Fatalf("third prompt: err = %v, want ErrTooMany", err)
	}
}
