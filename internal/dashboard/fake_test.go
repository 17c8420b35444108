package dashboard

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// fakeSource is an in-memory Source: Publish changes its state the way the
// gateway would and tells every subscriber; the actions are recorded.
type fakeSource struct {
	mu     sync.Mutex // guards the fields below
	state  State
	subs   map[chan Update]bool
	calls  []string // "stop 42", "run cron daily", "reset 123"
	err    error    // what the actions return
	onStop func(id uint64)

	called chan string // each action, as in calls
}

func newFakeSource(s State) *fakeSource {
	return &fakeSource{state: s, subs: map[chan Update]bool{}, called: make(chan string, 16)}
}

var _ Source = (*fakeSource)(nil)

func (f *fakeSource) Snapshot() State {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.state
	s.Running = slices.Clone(s.Running)
	s.Activity = slices.Clone(s.Activity)
	return s
}

func (f *fakeSource) Subscribe(ctx context.Context) <-chan Update {
	ch := make(chan Update, 64)
	f.mu.Lock()
	f.subs[ch] = true
	f.mu.Unlock()
	go func() {
		<-ctx.Done()
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.subs[ch] {
			delete(f.subs, ch)
			close(ch)
		}
	}()
	return ch
}

// subscribers is how many subscriptions are open.
func (f *fakeSource) subscribers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.subs)
}

// closeAll ends every subscription from the Source's side.
func (f *fakeSource) closeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ch := range f.subs {
		delete(f.subs, ch)
		close(ch)
	}
}

// Publish applies u to the state and sends it to every subscriber. A
// subscriber whose buffer is full misses it, as the Source contract allows
// (the tests never fill one).
func (f *fakeSource) Publish(u Update) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch p := u.Payload.(type) {
	case Turn:
		f.state.Running = append(f.state.Running, p)
	case ToolChange:
		for i := range f.state.Running {
			if f.state.Running[i].EventID == p.EventID {
				f.state.Running[i].Tool = p.Tool
			}
		}
	case Entry:
		f.state.Running = slices.DeleteFunc(f.state.Running, func(t Turn) bool { return t.EventID == p.EventID })
		f.state.Activity = append([]Entry{p}, f.state.Activity...)
	}
	for ch := range f.subs {
		select {
		case ch <- u:
		default:
		}
	}
}

func (f *fakeSource) act(call string) error {
	f.mu.Lock()
	f.calls = append(f.calls, call)
	err := f.err
	f.mu.Unlock()
	select {
	case f.called <- call:
	default:
	}
	return err
}

func (f *fakeSource) Stop(id uint64) error {
	err := f.act(fmt.Sprintf("stop %d", id))
	f.mu.Lock()
	onStop := f.onStop
	f.mu.Unlock()
	if err == nil && onStop != nil {
		onStop(id)
	}
	return err
}

func (f *fakeSource) RunNow(kind, name string) error { return f.act("run " + kind + " " + name) }

func (f *fakeSource) ResetSession(ch string) error { return f.act("reset " + ch) }

func (f *fakeSource) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// waitFor fails the test unless cond holds within a few seconds. It checks
// a condition; it does not wait a fixed time.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}
