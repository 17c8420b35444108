package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/nats-io/nats.go/jetstream"
)

// stage records who runs the lease's work, and every moment two ran it at
// once.
type stage struct {
	mu       sync.Mutex // guards the fields below
	running  map[string]bool
	overlaps []string
	enters   []visit
	leaves   []visit
}

type visit struct {
	who string
	at  time.Time
}

func newStage() *stage { return &stage{running: map[string]bool{}} }

// work is the lease's function for contender who: it runs until its
// context ends.
func (s *stage) work(who string) func(context.Context) error {
	return func(ctx context.Context) error {
		s.mu.Lock()
		for other := range s.running {
			s.overlaps = append(s.overlaps, fmt.Sprintf("%s entered while %s ran", who, other))
		}
		s.running[who] = true
		s.enters = append(s.enters, visit{who, time.Now()})
		s.mu.Unlock()
		<-ctx.Done()
		s.mu.Lock()
		delete(s.running, who)
		s.leaves = append(s.leaves, visit{who, time.Now()})
		s.mu.Unlock()
		return ctx.Err()
	}
}

// holder is who runs the work now, "" when none does.
func (s *stage) holder() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for who := range s.running {
		return who
	}
	return ""
}

// runs reports whether who's work is running now.
func (s *stage) runs(who string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running[who]
}

func (s *stage) entered(who string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, v := range s.enters {
		if v.who == who {
			n++
		}
	}
	return n
}

// last is when who last entered or left.
func last(vs []visit, who string) time.Time {
	var at time.Time
	for _, v := range vs {
		if v.who == who {
			at = v.at
		}
	}
	return at
}

func (s *stage) check(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.overlaps {
		t.Error(o)
	}
}

// contender is one process calling Run.
type contender struct {
	node
	cancel context.CancelFunc
	done   chan error
}

func contend(t *testing.T, n node, o LeaseOptions, name string, fn func(context.Context) error) *contender {
	t.Helper()
	l, err := OpenLease(ctxFor(t), n.js, o)
	must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	c := &contender{node: n, cancel: cancel, done: make(chan error, 1)}
	go func() { c.done <- l.Run(ctx, name, fn) }()
	t.Cleanup(func() {
		cancel()
		<-c.done
	})
	return c
}

// Three processes contend for one lease: one runs the work at a time while
// it renews; when it dies without giving the lease back, its work stops
// before the lease lapses and another takes over within TTL + Renew.
func TestLeaseRunsOnOneProcessAtATime(t *testing.T) {
	const ttl, renew = 3 * time.Second, time.Second
	s := startServer(t)
	st := newStage()
	watcher := dial(t, s)
	var cs = map[string]*contender{}
	for _, who := range []string{"a", "b", "c"} {
		cs[who] = contend(t, dial(t, s), LeaseOptions{TTL: ttl, Renew: renew, Holder: who, Log: testLog(t).With().Str("node", who).Logger()}, "scheduler", st.work(who))
	}

	waitFor(t, 10*time.Second, "a holder", func() bool { return st.holder() != "" })
	first := st.holder()
	// Renewals keep it: well past one TTL, no one else entered.
	kv, err := watcher.js.KeyValue(ctxFor(t), BucketLeases)
	must(t, err)
	start, err := kv.Get(ctxFor(t), "scheduler")
	must(t, err)
	waitFor(t, 10*time.Second, "four renewals", func() bool {
		e, err := kv.Get(ctxFor(t), "scheduler")
		return err == nil && e.Revision() >= start.Revision()+4
	})
	if got := st.holder(); got != first || st.entered(first) != 1 || len(st.enters) != 1 {
		t.Fatalf("after four renewals the holder is %q, want %q alone (entries %v)", got, first, st.enters)
	}

	// The holder dies: its connection closes without giving the lease back.
	died := time.Now()
	cs[first].nc.Close()
	waitFor(t, 10*time.Second, "another holder", func() bool { h := st.holder(); return h != "" && h != first })
	second := st.holder()
	st.mu.Lock()
	left, took := last(st.leaves, first), last(st.enters, second)
	st.mu.Unlock()
	t.Logf("the dead holder's work stopped %s after its death; %s took over %s after it, %s after the work stopped",
		left.Sub(died).Round(time.Millisecond), second, took.Sub(died).Round(time.Millisecond), took.Sub(left).Round(time.Millisecond))
	// The key lapses TTL after the last renewal (the server checks about
	// every 250 ms); the work must have stopped well before that.
	if stop := ttl - renew/2; left.IsZero() || left.Sub(died) > stop {
		t.Errorf("the dead holder's work stopped %s after its last renewal, want by TTL − Renew (< %s)", left.Sub(died), stop)
	}
	if left.IsZero() || !left.Before(took) {
		t.Errorf("%s took over at %s, before %s's work stopped (%s)", second, took, first, left)
	}
	if limit := ttl + renew + time.Second; took.Sub(died) > limit {
		t.Errorf("takeover %s after the holder died, want within TTL + Renew (+1s for the server's expiry)", took.Sub(died))
	}
	st.check(t)
}

// A holder that stops cleanly gives the lease back, and a waiting process
// takes it at once: its clock stands still, so it does not poll.
func TestLeaseCleanStopHandsOverAtOnce(t *testing.T) {
	const ttl = 30 * time.Second
	s := startServer(t)
	st := newStage()
	o := func(who string) LeaseOptions {
		return LeaseOptions{TTL: ttl, Holder: who, Log: testLog(t).With().Str("node", who).Logger()}
	}
	a := contend(t, dial(t, s), o("a"), "scheduler", st.work("a"))
	waitFor(t, 10*time.Second, "a to hold the lease", func() bool { return st.holder() == "a" })
	ob := o("b")
	clock := clockwork.NewFakeClock()
	ob.Clock = clock
	contend(t, dial(t, s), ob, "scheduler", st.work("b"))
	// b's first try failed: it waits on its retry timer.
	must(t, clock.BlockUntilContext(ctxFor(t), 1))

	a.cancel()
	if err := <-a.done; err != nil {
		t.Fatalf("Run after a clean stop = %v, want nil", err)
	}
	a.done <- nil // for the cleanup
	stopped := time.Now()
	// b watches the key and may already have taken it; only a's work must
	// be over (st.check reports any overlap).
	if st.runs("a") {
		t.Fatalf("a's Run returned while its work still ran")
	}
	waitFor(t, 5*time.Second, "b to take over", func() bool { return st.holder() == "b" })
	t.Logf("b took over %s after a stopped", time.Since(stopped).Round(time.Millisecond))
	st.check(t)
}

// With an injected clock: the holder renews on the clock's ticks, stops
// its work at the first renewal after another process took the key, takes
// the lease again as soon as that one deletes it, and stops its work when
// it cannot reach NATS for TTL − Renew, long before the key would lapse.
func TestLeaseFollowsItsClock(t *testing.T) {
	const ttl, renew = time.Minute, 20 * time.Second
	s := startServer(t)
	clock := clockwork.NewFakeClock()
	st := newStage()
	n := dial(t, s)
	contend(t, n, LeaseOptions{TTL: ttl, Renew: renew, Holder: "a", Clock: clock, Log: testLog(t)}, "scheduler", st.work("a"))
	ctx := ctxFor(t)
	kv, err := dial(t, s).js.KeyValue(ctx, BucketLeases)
	must(t, err)

	waitFor(t, 10*time.Second, "a to hold the lease", func() bool { return st.holder() == "a" })
	must(t, clock.BlockUntilContext(ctx, 2)) // the renewal ticker and the deadline
	e, err := kv.Get(ctx, "scheduler")
	must(t, err)
	rev := e.Revision()
	for range 3 {
		clock.Advance(renew)
		waitFor(t, 10*time.Second, "a renewal", func() bool {
			e, err := kv.Get(ctx, "scheduler")
			return err == nil && e.Revision() > rev
		})
		e, _ := kv.Get(ctx, "scheduler")
		rev = e.Revision()
	}
	if st.entered("a") != 1 || st.holder() != "a" {
		t.Fatalf("a lost the lease while renewing: %+v", st.enters)
	}

	// Another process writes the key (as if it had lapsed and been taken).
	rev, err = kv.Put(ctx, "scheduler", []byte(`{"holder":"z"}`))
	must(t, err)
	clock.Advance(renew)
	waitFor(t, 10*time.Second, "a to stop", func() bool { return st.holder() == "" })
	// It gives the key back: a takes it without the clock moving.
	must(t, kv.Delete(ctx, "scheduler", jetstream.LastRevision(rev)))
	waitFor(t, 10*time.Second, "a to take the lease again", func() bool { return st.entered("a") == 2 })

	// NATS becomes unreachable for a: its work stops at its own deadline.
	must(t, clock.BlockUntilContext(ctx, 2))
	n.nc.Close()
	clock.Advance(ttl - renew)
	waitFor(t, 10*time.Second, "a to stop when it cannot renew", func() bool { return st.holder() == "" })
	if _, err := kv.Get(ctx, "scheduler"); err != nil {
		t.Errorf("the key is gone (%v): a stopped because the key lapsed, not on its own deadline", err)
	}
	st.check(t)
}

// A work function that returns ends Run with its error, and the lease is
// given back; a bad name or timing is refused.
func TestLeaseRunEndsWithItsWork(t *testing.T) {
	s := startServer(t)
	n := dial(t, s)
	ctx := ctxFor(t)
	l, err := OpenLease(ctx, n.js, LeaseOptions{TTL: 30 * time.Second, Log: testLog(t)})
	must(t, err)
	boom := errors.New("boom")
	if err := l.Run(ctx, "scheduler", func(context.Context) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("Run = %v, want the work's error", err)
	}
	kv, err := n.js.KeyValue(ctx, BucketLeases)
	must(t, err)
	if _, err := kv.Get(ctx, "scheduler"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("the key after the work ended: %v, want deleted", err)
	}
	for _, name := range []string{"", "a b", "p.*", "p.>", ".p", "p."} {
		if err := l.Run(ctx, name, nil); !errors.Is(err, ErrBadName) {
			t.Errorf("Run(%q) = %v, want ErrBadName", name, err)
		}
	}
	if _, err := OpenLease(ctx, n.js, LeaseOptions{TTL: 30 * time.Second, Renew: 11 * time.Second}); err == nil {
		t.Error("a renewal period over TTL/3 was taken")
	}
	if _, err := OpenLease(ctx, n.js, LeaseOptions{TTL: 20 * time.Second}); err == nil {
		t.Error("a second TTL for the same bucket was taken")
	}
}
