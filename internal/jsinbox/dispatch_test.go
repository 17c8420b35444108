package jsinbox

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentgateway/gateway/internal/inbox"
)

// worker runs a dispatcher over its own connection and records what it
// ran; a turn "runs" until the test finishes it.
type worker struct {
	name string
	in   *Inbox
	d    *Dispatcher
	stop context.CancelFunc
	done chan struct{}
}

type ledger struct {
	mu      sync.Mutex
	running map[string]uint64 // lane -> event running
	order   map[string][]uint64
	overlap []string
	by      map[uint64]string
	taken   chan Delivery
}

func newLedger() *ledger {
	return &ledger{running: map[string]uint64{}, order: map[string][]uint64{}, by: map[uint64]string{}, taken: make(chan Delivery, 100)}
}

func startWorker(t *testing.T, name string, in *Inbox, slots int, l *ledger) *worker {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &worker{name: name, in: in, d: in.Dispatcher(DispatchOptions{Slots: slots, Scan: 100 * time.Millisecond,
		OnError: func(err error) { t.Logf("%s: %v", name, err) }}), stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		_ = w.d.Run(ctx, func(d Delivery) {
			l.mu.Lock()
			lane := d.Event.Lane
			if other, busy := l.running[lane]; busy && other != d.Event.ID {
				l.overlap = append(l.overlap, fmt.Sprintf("lane %s: %d taken while %d runs", lane, d.Event.ID, other))
			}
			l.running[lane] = d.Event.ID
			if o := l.order[lane]; len(o) == 0 || o[len(o)-1] != d.Event.ID {
				l.order[lane] = append(o, d.Event.ID)
			}
			l.by[d.Event.ID] = name
			l.mu.Unlock()
			l.taken <- d
		})
	}()
	t.Cleanup(func() { cancel(); <-w.done; w.d.GiveBack() })
	return w
}

// finish ends event d's turn on the worker that took it.
func (l *ledger) finish(t *testing.T, workers map[string]*worker, d Delivery) {
	t.Helper()
	l.mu.Lock()
	w := workers[l.by[d.Event.ID]]
	delete(l.running, d.Event.Lane)
	l.mu.Unlock()
	w.d.Release(d.Event.ID)
	must(t, w.in.Finish(d.Event.ID, inbox.Answered))
}

func TestDispatchKeepsLaneOrderAcrossWorkers(t *testing.T) {
	srv := runServer(t, t.TempDir())
	opts := Options{Partitions: 3}
	intake := openInbox(t, connect(t, srv), opts)
	l := newLedger()
	workers := map[string]*worker{}
	for _, name := range []string{"a", "b"} {
		workers[name] = startWorker(t, name, openInbox(t, connect(t, srv), opts), 2, l)
	}
	ctx := bg(t)
	want := map[string][]uint64{}
	lanes := []string{"101", "202", "303", "404", "505"}
	for i := range 30 {
		lane := lanes[i%len(lanes)]
		e, err := intake.Append(ctx, event(lane, fmt.Sprintf("k%d", i), i))
		must(t, err)
		want[lane] = append(want[lane], e.ID)
	}
	for range 30 {
		select {
		case d := <-l.taken:
			l.finish(t, workers, d)
		case <-ctx.Done():
			t.Fatalf("not every event was handed out: %v", l.order)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.overlap) > 0 {
		t.Fatalf("a lane ran twice at once: %v", l.overlap)
	}
	if diff := cmp.Diff(want, l.order); diff != "" {
		t.Fatalf("lane order (-appended +ran):\n%s", diff)
	}
	ran := map[string]int{}
	for _, w := range l.by {
		ran[w]++
	}
	if ran["a"] == 0 || ran["b"] == 0 {
		t.Errorf("one worker ran everything (%v): the other sat idle", ran)
	}
	if got := intake.Unfinished(); len(got) != 0 {
		t.Errorf("%d events left in the stream after every one finished", len(got))
	}
}

func TestDispatchTakesNoMoreThanItsSlots(t *testing.T) {
	srv := runServer(t, t.TempDir())
	opts := Options{Partitions: 8}
	in := openInbox(t, connect(t, srv), opts)
	l := newLedger()
	w := startWorker(t, "a", in, 2, l)
	ctx := bg(t)
	for i := range 6 {
		_, err := in.Append(ctx, event(fmt.Sprintf("%d", 1000+i), fmt.Sprintf("k%d", i), i))
		must(t, err)
	}
	first, second := <-l.taken, <-l.taken
	select {
	case d := <-l.taken:
		t.Fatalf("event %d was taken with both slots busy", d.Event.ID)
	case <-time.After(300 * time.Millisecond): // three scans: nothing may come
	}
	// A released slot takes the next event though the first is not acked
	// (its reply may still be posting).
	w.d.Release(first.Event.ID)
	third := <-l.taken
	must(t, in.Finish(first.Event.ID, inbox.Answered))
	must(t, in.Finish(second.Event.ID, inbox.Answered))
	w.d.Release(second.Event.ID)
	w.d.Release(third.Event.ID)
	must(t, in.Finish(third.Event.ID, inbox.Answered))
	for range 3 {
		d := <-l.taken
		w.d.Release(d.Event.ID)
		must(t, in.Finish(d.Event.ID, inbox.Answered))
	}
}

func TestAnEventWhoseHolderDiedIsHandedOutAgain(t *testing.T) {
	srv := runServer(t, t.TempDir())
	opts := Options{Partitions: 2, AckWait: time.Second}
	intake := openInbox(t, connect(t, srv), opts)
	l := newLedger()
	doomedConn := connect(t, srv)
	workers := map[string]*worker{"a": startWorker(t, "a", openInbox(t, doomedConn, opts), 1, l)}
	ctx := bg(t)
	e, err := intake.Append(ctx, event("777", "k1", 1))
	must(t, err)
	first := <-l.taken
	if first.Deliveries != 1 || first.Event.ID != e.ID {
		t.Fatalf("first delivery = %+v", first)
	}
	// The holder dies: no ack, no nak, no progress.
	doomedConn.Close()
	workers["b"] = startWorker(t, "b", openInbox(t, connect(t, srv), opts), 1, l)
	again := <-l.taken
	if again.Event.ID != e.ID || again.Deliveries != 2 {
		t.Fatalf("after the holder died: %+v, want event %d delivered a second time", again, e.ID)
	}
	l.mu.Lock()
	l.by[e.ID] = "b"
	l.mu.Unlock()
	l.finish(t, workers, again)
}

func TestProgressKeepsALongTurnWithItsHolder(t *testing.T) {
	srv := runServer(t, t.TempDir())
	opts := Options{Partitions: 1, AckWait: 500 * time.Millisecond}
	in := openInbox(t, connect(t, srv), opts)
	l := newLedger()
	a := startWorker(t, "a", in, 1, l)
	b := startWorker(t, "b", openInbox(t, connect(t, srv), opts), 1, l)
	_ = b
	ctx := bg(t)
	_, err := in.Append(ctx, event("777", "k1", 1))
	must(t, err)
	d := <-l.taken
	select {
	case again := <-l.taken:
		t.Fatalf("event %d handed out again while its holder pushed its deadline back", again.Event.ID)
	case <-time.After(2 * time.Second): // four ack deadlines
	}
	l.mu.Lock()
	holder := l.by[d.Event.ID]
	l.mu.Unlock()
	w := map[string]*worker{"a": a, "b": b}[holder]
	w.d.Release(d.Event.ID)
	must(t, w.in.Finish(d.Event.ID, inbox.Answered))
}

func TestAStopMarksTheLanesEventsSoFar(t *testing.T) {
	in := openInbox(t, connect(t, runServer(t, t.TempDir())), Options{Partitions: 2})
	ctx := bg(t)
	if m, err := in.StopMark(ctx, "555"); err != nil || m != 0 {
		t.Fatalf("StopMark of a lane never stopped = %d, %v", m, err)
	}
	var last uint64
	for i := range 3 {
		e, err := in.Append(ctx, event("555", fmt.Sprintf("k%d", i), i))
		must(t, err)
		last = e.ID
	}
	_, err := in.Append(ctx, event("666", "other", 9))
	must(t, err)
	held, err := in.MarkStop(ctx, "555")
	must(t, err)
	if held != 3 {
		t.Errorf("MarkStop counted %d events of the lane, want 3", held)
	}
	if m, err := in.StopMark(ctx, "555"); err != nil || m < last {
		t.Fatalf("StopMark = %d, %v; want at least %d", m, err, last)
	}
	later, err := in.Append(ctx, event("555", "later", 10))
	must(t, err)
	if m, _ := in.StopMark(ctx, "555"); later.ID <= m {
		t.Fatalf("an event appended after the stop (%d) is under its mark %d", later.ID, m)
	}
}
