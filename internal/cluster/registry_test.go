package cluster

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/jonboulle/clockwork"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentgateway/gateway/internal/jsinbox"
)

// turnList is what a process runs, changed by the test.
type turnList struct {
	mu    sync.Mutex // guards turns
	turns []Turn
}

func (l *turnList) set(ts ...Turn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.turns = ts
}

func (l *turnList) get() []Turn {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Turn(nil), l.turns...)
}

// beating runs r.Beat until the returned stop is called, which waits for
// Beat to return.
func beating(t *testing.T, r *Registry) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Beat(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Beat = %v, want nil after its context ended", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func names(ws []Worker) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.Name)
	}
	return out
}

// Two processes beat: each lists both, by name, with what they wrote;
// the next beat carries the turns running then; a clean stop takes a
// process off the list at once.
func TestRegistryListsTheProcessesThatBeat(t *testing.T) {
	s := startServer(t)
	ctx := ctxFor(t)
	clock := clockwork.NewFakeClockAt(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	started := clock.Now().Add(-time.Hour)
	var turns turnList
	w := RegistryOptions{Clock: clock, Log: testLog(t), Turns: turns.get,
		Self: Worker{Name: "worker-1", Role: RoleWorker, Version: "v1.2.3", Started: started, Slots: 4}}
	r := RegistryOptions{Clock: clock, Log: testLog(t),
		Self: Worker{Name: "run-1", Role: RoleRun, Version: "v1.2.3", Slots: 0}}
	worker, err := OpenRegistry(ctx, dial(t, s).js, w)
	must(t, err)
	run, err := OpenRegistry(ctx, dial(t, s).js, r)
	must(t, err)
	before := time.Now()
	stopWorker := beating(t, worker)
	beating(t, run)

	ignoreBeat := cmpopts.IgnoreFields(Worker{}, "Beat")
	want := []Worker{
		{Name: "run-1", Role: RoleRun, Version: "v1.2.3", Started: clock.Now()},
		{Name: "worker-1", Role: RoleWorker, Version: "v1.2.3", Started: started, Slots: 4},
	}
	var got []Worker
	waitFor(t, 10*time.Second, "both processes listed", func() bool {
		got, err = run.List(ctx)
		must(t, err)
		return len(got) == 2
	})
	if diff := cmp.Diff(want, got, ignoreBeat); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	for _, g := range got {
		if g.Beat.Before(before.Add(-time.Second)) || g.Beat.After(time.Now().Add(time.Second)) {
			t.Errorf("%s: beat at %s, want about now (%s)", g.Name, g.Beat, before)
		}
	}

	// The next beat reports the turns running then.
	turns.set(Turn{Lane: "123456789012345678", Event: 42, Since: started.Add(time.Minute)})
	must(t, clock.BlockUntilContext(ctx, 2)) // both heartbeat tickers
	clock.Advance(DefaultWorkerTTL / 6)
	want[1].Turns = turns.get()
	waitFor(t, 10*time.Second, "the turn listed", func() bool {
		got, err = worker.List(ctx)
		must(t, err)
		return len(got) == 2 && len(got[1].Turns) == 1
	})
	if diff := cmp.Diff(want, got, ignoreBeat); diff != "" {
		t.Errorf("List after a beat (-want +got):\n%s", diff)
	}

	stopWorker()
	got, err = run.List(ctx)
	must(t, err)
	if diff := cmp.Diff([]string{"run-1"}, names(got)); diff != "" {
		t.Errorf("List right after a clean stop (-want +got):\n%s", diff)
	}
}

// A process that dies without cleaning up leaves the list once its last
// heartbeat is TTL old.
func TestRegistryForgetsAProcessThatDied(t *testing.T) {
	const ttl = time.Second
	s := startServer(t)
	ctx := ctxFor(t)
	// Its clock stands still: it beats once, as if it died right after.
	o := RegistryOptions{TTL: ttl, Clock: clockwork.NewFakeClock(), Log: testLog(t), Self: Worker{Name: "w", Role: RoleWorker}}
	dying := dial(t, s)
	r, err := OpenRegistry(ctx, dying.js, o)
	must(t, err)
	beating(t, r)
	o.Self.Name = "observer"
	observer, err := OpenRegistry(ctx, dial(t, s).js, o)
	must(t, err)
	waitFor(t, 10*time.Second, "w listed", func() bool {
		ws, err := observer.List(ctx)
		return err == nil && len(ws) == 1
	})
	dying.nc.Close()
	// Forgotten by the TTL set here, not the default (30 s): the wait
	// ends well before that. How soon after the TTL the server's expiry
	// and a listing see it depends on the machine's load (3.3 s once
	// under make test on 2 cores), so no tighter bound is checked.
	waitFor(t, DefaultWorkerTTL/3, "w forgotten", func() bool {
		ws, err := observer.List(ctx)
		return err == nil && len(ws) == 0
	})
}

// ReadWorkers creates nothing: on a fresh server it says no process has
// started, and the bucket is still missing after.
func TestReadWorkersCreatesNothing(t *testing.T) {
	s := startServer(t)
	ctx := ctxFor(t)
	js := dial(t, s).js
	if _, err := ReadWorkers(ctx, js, RegistryOptions{}); !errors.Is(err, jsinbox.ErrNotSetUp) {
		t.Fatalf("ReadWorkers on a fresh server = %v, want ErrNotSetUp", err)
	}
	if _, err := js.KeyValue(ctx, BucketWorkers); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Fatalf("the bucket after ReadWorkers: %v, want none", err)
	}
	r, err := OpenRegistry(ctx, js, RegistryOptions{Self: Worker{Name: "a", Role: RoleRun}, Log: testLog(t)})
	must(t, err)
	beating(t, r)
	waitFor(t, 10*time.Second, "a listed", func() bool {
		ws, err := ReadWorkers(ctx, js, RegistryOptions{})
		return err == nil && len(ws) == 1 && ws[0].Name == "a"
	})
	if _, err := ReadWorkers(ctx, js, RegistryOptions{TTL: time.Minute}); err == nil {
		t.Error("ReadWorkers with another TTL than the bucket's: no error")
	}
}

func TestRegistryRefusesBadOptions(t *testing.T) {
	s := startServer(t)
	js := dial(t, s).js
	for _, tc := range []struct {
		name string
		o    RegistryOptions
	}{
		{"a name with a space", RegistryOptions{Self: Worker{Name: "my host"}}},
		{"a wildcard", RegistryOptions{Self: Worker{Name: "w.*"}}},
		{"one beat per TTL", RegistryOptions{TTL: 10 * time.Second, Every: 6 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := OpenRegistry(ctxFor(t), js, tc.o); err == nil {
				t.Error("OpenRegistry: no error")
			}
		})
	}
}

func TestDefaultNameIsAKey(t *testing.T) {
	a, b := DefaultName(), DefaultName()
	for _, n := range []string{a, b} {
		if err := checkName(n); err != nil {
			t.Error(err)
		}
	}
	if a == b {
		t.Errorf("two default names are both %q", a)
	}
}

// Whatever the host is called, the name made of it is a key.
func FuzzKeyable(f *testing.F) {
	for _, s := range []string{"", "host", "my.host.example", "-", "ho st", "höst", "a*b>c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, host string) {
		if err := checkName(keyable(host) + "-" + randomHex(2)); err != nil {
			t.Errorf("host %q: %v", host, err)
		}
	})
}
