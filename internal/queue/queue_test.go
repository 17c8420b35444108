package queue

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// recorder is a handler that records start/finish order and lets a test
// decide when each event finishes.
type recorder struct {
	mu       sync.Mutex // guards the fields below
	started  []uint64
	finished []uint64
	active   map[string]int // lane -> handlers running now
	maxLane  int            // most handlers ever seen running in one lane
	inFlight int
	maxAll   int
	release  map[uint64]chan struct{}
	auto     bool
	startedC chan uint64
}

func newRecorder(auto bool) *recorder {
	return &recorder{
		active:   map[string]int{},
		release:  map[uint64]chan struct{}{},
		auto:     auto,
		startedC: make(chan uint64, 10000),
	}
}

func (r *recorder) gate(id uint64) chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.release[id]
	if !ok {
		c = make(chan struct{})
		r.release[id] = c
	}
	return c
}

func (r *recorder) handle(ctx context.Context, e Event) {
	r.mu.Lock()
	r.started = append(r.started, e.ID)
	r.active[e.Lane]++
	r.inFlight++
	r.maxLane = max(r.maxLane, r.active[e.Lane])
	r.maxAll = max(r.maxAll, r.inFlight)
	r.mu.Unlock()
	r.startedC <- e.ID
	if !r.auto {
		select {
		case <-r.gate(e.ID):
		case <-ctx.Done():
		}
	}
	r.mu.Lock()
	r.active[e.Lane]--
	r.inFlight--
	r.finished = append(r.finished, e.ID)
	r.mu.Unlock()
}

func waitStarted(t *testing.T, r *recorder) uint64 {
	t.Helper()
	select {
	case id := <-r.startedC:
		return id
	case <-time.After(10 * time.Second):
		t.Fatal("no event started within 10s")
		return 0
	}
}

func runQueue(t *testing.T, q *Queue) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	if err := q.start(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { q.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

func drain(t *testing.T, q *Queue) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := q.Drain(ctx); err != nil {
		t.Fatal(err)
	}
}

// Property 15: events of every kind are accepted with strictly increasing
// ids and non-decreasing timestamps, even when the clock steps backwards.
func TestMonotonicIDsAndTimes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 200; iter++ {
		clock := time.Unix(1_700_000_000, 0)
		q := New(Options{MaxDepth: 1000, MaxConcurrent: 3, Now: func() time.Time {
			clock = clock.Add(time.Duration(rng.IntN(2000)-1000) * time.Millisecond)
			return clock
		}}, func(context.Context, Event) {})
		var prev Event
		n := 1 + rng.IntN(50)
		for i := 0; i < n; i++ {
			kind := Kinds[rng.IntN(len(Kinds))]
			r, err := q.Enqueue(Event{Kind: kind, ChannelID: fmt.Sprint(rng.IntN(4))})
			if err != nil {
				t.Fatalf("enqueue %s: %v", kind, err)
			}
			if r.Event.Kind != kind {
				t.Fatalf("kind = %s, want %s", r.Event.Kind, kind)
			}
			if i > 0 && (r.Event.ID <= prev.ID || r.Event.Time.Before(prev.Time)) {
				t.Fatalf("event %d (%v) after %d (%v): not monotonic", r.Event.ID, r.Event.Time, prev.ID, prev.Time)
			}
			prev = r.Event
		}
	}
}

// Properties 16 and 13: with one lane, events run strictly one at a time in
// enqueue order; each lane keeps its order when lanes interleave.
func TestLaneFIFOAndExclusive(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for iter := 0; iter < 50; iter++ {
		rec := newRecorder(true)
		q := New(Options{MaxDepth: 1000, MaxConcurrent: 1 + rng.IntN(4)}, rec.handle)
		perLane := map[string][]uint64{}
		for i := 0; i < 1+rng.IntN(100); i++ {
			e := Event{Kind: KindMessage, ChannelID: fmt.Sprint("c", rng.IntN(5))}
			if rng.IntN(5) == 0 {
				e = Event{Kind: KindHeartbeat} // system lane
			}
			r, err := q.Enqueue(e)
			if err != nil {
				t.Fatal(err)
			}
			perLane[r.Event.Lane] = append(perLane[r.Event.Lane], r.Event.ID)
		}
		runQueue(t, q)
		drain(t, q)
		rec.mu.Lock()
		if rec.maxLane > 1 {
			t.Fatalf("%d events of one lane ran at once", rec.maxLane)
		}
		pos := map[uint64]int{}
		for i, id := range rec.started {
			pos[id] = i
		}
		for lane, ids := range perLane {
			for i := 1; i < len(ids); i++ {
				if pos[ids[i]] < pos[ids[i-1]] {
					t.Fatalf("lane %s: event %d started before %d", lane, ids[i], ids[i-1])
				}
			}
		}
		rec.mu.Unlock()
	}
}

// Property 16: a lane's next event starts only after the previous handler
// returned.
func TestNextEventWaitsForHandler(t *testing.T) {
	rec := newRecorder(false)
	q := New(Options{MaxDepth: 10, MaxConcurrent: 5}, rec.handle)
	runQueue(t, q)
	var ids []uint64
	for i := 0; i < 3; i++ {
		r, err := q.Enqueue(Event{Kind: KindMessage, ChannelID: "c1"})
		if err != nil {
			t.Fatal(err)
		}
		if want := i > 0; r.Waiting != want {
			t.Errorf("event %d: Waiting = %v, want %v", i, r.Waiting, want)
		}
		ids = append(ids, r.Event.ID)
	}
	for _, id := range ids {
		if got := waitStarted(t, rec); got != id {
			t.Fatalf("started %d, want %d", got, id)
		}
		select {
		case extra := <-rec.startedC:
			t.Fatalf("event %d started while %d was running", extra, id)
		default:
		}
		close(rec.gate(id))
	}
	drain(t, q)
	if diff := cmp.Diff(ids, rec.finished); diff != "" {
		t.Errorf("finish order (-want +got):\n%s", diff)
	}
}

// R9.1 and DESIGN decision 3: different channels run concurrently, up to
// MaxConcurrent; the rest wait in the queue instead of being refused.
func TestConcurrencyLimitAcrossLanes(t *testing.T) {
	rec := newRecorder(false)
	q := New(Options{MaxDepth: 10, MaxConcurrent: 2}, rec.handle)
	runQueue(t, q)
	var receipts []Receipt
	for i := 0; i < 4; i++ {
		r, err := q.Enqueue(Event{Kind: KindMessage, ChannelID: fmt.Sprint("c", i)})
		if err != nil {
			t.Fatal(err)
		}
		receipts = append(receipts, r)
	}
	first, second := waitStarted(t, rec), waitStarted(t, rec)
	if first+second != receipts[0].Event.ID+receipts[1].Event.ID {
		t.Fatalf("started %d and %d, want the two oldest", first, second)
	}
	if !receipts[2].Waiting || !receipts[3].Waiting {
		t.Errorf("events beyond the limit should report Waiting")
	}
	if q.Len() != 2 || q.Running() != 2 {
		t.Errorf("Len=%d Running=%d, want 2 and 2", q.Len(), q.Running())
	}
	close(rec.gate(first))
	if got := waitStarted(t, rec); got != receipts[2].Event.ID {
		t.Errorf("started %d, want %d (oldest waiting)", got, receipts[2].Event.ID)
	}
	close(rec.gate(second))
	close(rec.gate(receipts[2].Event.ID))
	close(rec.gate(receipts[3].Event.ID))
	drain(t, q)
	if rec.maxAll > 2 {
		t.Errorf("%d handlers ran at once, limit 2", rec.maxAll)
	}
}

// Properties 17 and 14: at MaxDepth waiting events, Enqueue is refused with
// the depth and the queue does not grow.
func TestDepthLimit(t *testing.T) {
	for depth := 1; depth <= 20; depth++ {
		q := New(Options{MaxDepth: depth, MaxConcurrent: 1}, func(context.Context, Event) {})
		for i := 0; i < depth; i++ {
			if _, err := q.Enqueue(Event{Kind: KindCron}); err != nil {
				t.Fatalf("depth %d: enqueue %d: %v", depth, i, err)
			}
		}
		_, err := q.Enqueue(Event{Kind: KindMessage, ChannelID: "x"})
		var full *FullError
		if !errors.As(err, &full) || full.Depth != depth {
			t.Fatalf("depth %d: err = %v, want FullError{%d}", depth, err, depth)
		}
		if q.Len() != depth {
			t.Fatalf("Len = %d after rejection, want %d", q.Len(), depth)
		}
	}
}

func TestCloseRefusesButRunsAccepted(t *testing.T) {
	rec := newRecorder(true)
	q := New(Options{MaxDepth: 10, MaxConcurrent: 1}, rec.handle)
	if _, err := q.Enqueue(Event{Kind: KindHook, Name: "startup"}); err != nil {
		t.Fatal(err)
	}
	q.Close()
	if _, err := q.Enqueue(Event{Kind: KindMessage}); !errors.Is(err, ErrClosed) {
		t.Fatalf("err = %v, want ErrClosed", err)
	}
	runQueue(t, q)
	drain(t, q)
	if len(rec.finished) != 1 {
		t.Errorf("finished %v, want the one accepted event", rec.finished)
	}
}

type memJournal struct {
	mu      sync.Mutex
	pending map[uint64]Event
	fail    bool
}

func (j *memJournal) Append(e Event) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.fail {
		return errors.New("disk full")
	}
	j.pending[e.ID] = e
	return nil
}

func TestJournalSeam(t *testing.T) {
	j := &memJournal{pending: map[uint64]Event{}}
	rec := newRecorder(true)
	q := New(Options{MaxDepth: 10, MaxConcurrent: 1, Journal: j}, rec.handle)
	if _, err := q.Enqueue(Event{Kind: KindWebhook, Name: "gh"}); err != nil {
		t.Fatal(err)
	}
	if len(j.pending) != 1 {
		t.Fatalf("journal holds %d events, want 1", len(j.pending))
	}
	j.fail = true
	if _, err := q.Enqueue(Event{Kind: KindWebhook}); err == nil {
		t.Fatal("enqueue succeeded although the journal failed")
	}
	if q.Len() != 1 {
		t.Errorf("Len = %d, want 1: a refused event must not be queued", q.Len())
	}
	runQueue(t, q)
	drain(t, q)
}

func TestRestoreKeepsIDsAndGoesFirst(t *testing.T) {
	rec := newRecorder(true)
	q := New(Options{MaxDepth: 10, MaxConcurrent: 1, StartID: 7}, rec.handle)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, id := range []uint64{3, 5} {
		if r := q.Restore(Event{ID: id, Time: at, Kind: KindMessage, ChannelID: "c"}); r.Event.ID != id {
			t.Fatalf("restored id %d as %d", id, r.Event.ID)
		}
	}
	r, err := q.Enqueue(Event{Kind: KindMessage, ChannelID: "c"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Event.ID != 8 {
		t.Errorf("first new id = %d, want 8 (after StartID 7)", r.Event.ID)
	}
	runQueue(t, q)
	drain(t, q)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if !slices.Equal(rec.finished, []uint64{3, 5, 8}) {
		t.Errorf("ran %v, want the restored events first, in order", rec.finished)
	}
}

func BenchmarkEnqueueDispatch(b *testing.B) {
	var wg sync.WaitGroup
	q := New(Options{MaxDepth: 1 << 20, MaxConcurrent: 8}, func(context.Context, Event) { wg.Done() })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go q.Run(ctx)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		wg.Add(1)
		if _, err := q.Enqueue(Event{Kind: KindMessage, ChannelID: "c"}); err != nil {
			b.Fatal(err)
		}
	}
	wg.Wait()
}

func TestStopCancelsTheRunningEventAndDropsTheLanesWaiting(t *testing.T) {
	var causes sync.Map
	r := newRecorder(false)
	q := New(Options{MaxDepth: 10, MaxConcurrent: 2}, func(ctx context.Context, e Event) {
		r.handle(ctx, e)
		causes.Store(e.ID, context.Cause(ctx))
	})
	runQueue(t, q)
	q.Enqueue(Event{Kind: KindMessage, ChannelID: "a"}) // 1, runs
	q.Enqueue(Event{Kind: KindMessage, ChannelID: "b"}) // 2, runs
	q.Enqueue(Event{Kind: KindMessage, ChannelID: "a"}) // 3, waits
	q.Enqueue(Event{Kind: KindMessage, ChannelID: "a"}) // 4, waits
	waitStarted(t, r)
	waitStarted(t, r)

	running, dropped := q.Stop("a")
	if !running || len(dropped) != 2 || dropped[0].ID != 3 || dropped[1].ID != 4 {
		t.Fatalf("Stop = %v, %v; want the running event stopped and 3, 4 dropped", running, dropped)
	}
	if q.Len() != 0 {
		t.Errorf("Len = %d after Stop, want 0", q.Len())
	}
	// The lane takes new work again; b was not touched.
	rc, _ := q.Enqueue(Event{Kind: KindMessage, ChannelID: "a"})
	if id := waitStarted(t, r); id != rc.Event.ID {
		t.Fatalf("started %d, want %d", id, rc.Event.ID)
	}
	close(r.gate(2))
	close(r.gate(rc.Event.ID))
	drain(t, q)
	if c, _ := causes.Load(uint64(1)); !errors.Is(c.(error), ErrStopped) {
		t.Errorf("event 1 cause = %v, want ErrStopped", c)
	}
	if c, _ := causes.Load(uint64(2)); c != nil {
		t.Errorf("event 2 cause = %v, want none", c)
	}
	if running, dropped := q.Stop("idle"); running || dropped != nil {
		t.Errorf("Stop(idle lane) = %v, %v", running, dropped)
	}
}

// leftLog records Options.Left calls.
type leftLog struct {
	mu    sync.Mutex
	fates map[uint64][]Fate
}

func (l *leftLog) left(e Event, f Fate) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fates == nil {
		l.fates = map[uint64][]Fate{}
	}
	l.fates[e.ID] = append(l.fates[e.ID], f)
}

func (l *leftLog) get() map[uint64][]Fate {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[uint64][]Fate{}
	for id, f := range l.fates {
		out[id] = append([]Fate(nil), f...)
	}
	return out
}

// Every accepted event leaves the queue exactly once through Left: ran,
// stopped while waiting, or dropped when the queue stopped, so a producer
// (a heartbeat's busy mark) is always released.
func TestEveryEventLeavesThroughLeft(t *testing.T) {
	rec := newRecorder(false)
	var log leftLog
	q := New(Options{MaxDepth: 10, MaxConcurrent: 1, Left: log.left}, rec.handle)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan []Event)
	go func() { dropped, _ := q.Run(ctx); done <- dropped }()

	mustEnqueue := func(e Event) uint64 {
		t.Helper()
		r, err := q.Enqueue(e)
		if err != nil {
			t.Fatal(err)
		}
		return r.Event.ID
	}
	a := mustEnqueue(Event{Kind: KindMessage, ChannelID: "a"})
	waitStarted(t, rec)
	a2 := mustEnqueue(Event{Kind: KindHeartbeat, ChannelID: "a"})
	b := mustEnqueue(Event{Kind: KindCron, ChannelID: "b"})
	if _, dropped := q.Stop("a"); len(dropped) != 1 || dropped[0].ID != a2 {
		t.Fatalf("Stop dropped %v, want event %d", dropped, a2)
	}
	close(rec.gate(a))
	waitStarted(t, rec) // b
	c := mustEnqueue(Event{Kind: KindWebhook, ChannelID: "c"})
	cancel() // b is running, c waits: c is dropped
	dropped := <-done
	if len(dropped) != 1 || dropped[0].ID != c {
		t.Fatalf("Run dropped %v, want event %d", dropped, c)
	}
	want := map[uint64][]Fate{a: {Ran}, a2: {Stopped}, b: {Ran}, c: {Dropped}}
	if diff := cmp.Diff(want, log.get()); diff != "" {
		t.Errorf("Left calls (-want +got):\n%s", diff)
	}
}

// One lane cannot fill the queue: beyond MaxPerLane waiting events it is
// refused with a lane FullError while other lanes are still accepted.
func TestPerLaneLimit(t *testing.T) {
	rec := newRecorder(false)
	q := New(Options{MaxDepth: 100, MaxPerLane: 3, MaxConcurrent: 1}, rec.handle)
	runQueue(t, q)
	if _, err := q.Enqueue(Event{ChannelID: "flood"}); err != nil {
		t.Fatal(err)
	}
	waitStarted(t, rec) // the running one does not count as waiting
	for i := 0; i < 3; i++ {
		if _, err := q.Enqueue(Event{ChannelID: "flood"}); err != nil {
			t.Fatalf("waiting event %d refused: %v", i+1, err)
		}
	}
	_, err := q.Enqueue(Event{ChannelID: "flood"})
	var full *FullError
	if !errors.As(err, &full) || !full.Lane || full.Depth != 3 {
		t.Fatalf("fourth waiting event in one lane: err = %v, want a lane FullError with depth 3", err)
	}
	if _, err := q.Enqueue(Event{ChannelID: "quiet"}); err != nil {
		t.Errorf("another lane refused while one lane is full: %v", err)
	}
	q.Stop("flood")
	q.Stop("quiet")
}

// Cancel stops only the running event it names: the waiting ones run
// next, and a Cancel that comes late (the event finished) stops nothing.
func TestCancelKeepsTheWaitingAndIgnoresLateCancels(t *testing.T) {
	var causes sync.Map
	r := newRecorder(false)
	q := New(Options{MaxDepth: 10, MaxConcurrent: 2}, func(ctx context.Context, e Event) {
		r.handle(ctx, e)
		causes.Store(e.ID, context.Cause(ctx))
	})
	runQueue(t, q)
	q.Enqueue(Event{Kind: KindMessage, ChannelID: "a"}) // 1, runs
	q.Enqueue(Event{Kind: KindMessage, ChannelID: "a"}) // 2, waits
	waitStarted(t, r)
	if running, ok, waiting := q.Lane("a"); !ok || running.ID != 1 || len(waiting) != 1 || waiting[0].ID != 2 {
		t.Fatalf("Lane = %v, %v, %v", running, ok, waiting)
	}
	if q.Cancel("a", 2) {
		t.Fatal("Cancel of a waiting event stopped something")
	}
	if !q.Cancel("a", 1) {
		t.Fatal("Cancel of the running event reported nothing stopped")
	}
	if id := waitStarted(t, r); id != 2 {
		t.Fatalf("started %d after the cancel, want 2", id)
	}
	if q.Cancel("a", 1) {
		t.Fatal("a late Cancel of event 1 stopped event 2")
	}
	close(r.gate(2))
	drain(t, q)
	if c, _ := causes.Load(uint64(1)); !errors.Is(c.(error), ErrStopped) {
		t.Errorf("event 1 cause = %v, want ErrStopped", c)
	}
	if c, _ := causes.Load(uint64(2)); c != nil {
		t.Errorf("event 2 cause = %v, want none", c)
	}
}

func TestPromoteRunsAWaitingEventNext(t *testing.T) {
	var mu sync.Mutex
	var order []string
	release := make(chan struct{})
	started := make(chan struct{}, 10)
	q := New(Options{MaxDepth: 10, MaxConcurrent: 1}, func(ctx context.Context, e Event) {
		started <- struct{}{}
		if e.Text == "first" {
			<-release
		}
		mu.Lock()
		order = append(order, e.Text)
		mu.Unlock()
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go q.Run(ctx)
	var ids []uint64
	for _, text := range []string{"first", "second", "third", "fourth"} {
		r, err := q.Enqueue(Event{Kind: KindMessage, ChannelID: "c", Lane: "c", Text: text})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.Event.ID)
	}
	<-started
	if !q.Promote("c", ids[3]) {
		t.Fatal("Promote of a waiting event failed")
	}
	if q.Promote("c", ids[0]) || q.Promote("other", ids[1]) {
		t.Error("Promote of a running event or in another lane succeeded")
	}
	close(release)
	if err := q.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"first", "fourth", "second", "third"}; !slices.Equal(order, want) {
		t.Errorf("order %q, want %q", order, want)
	}
}

func TestEnqueuedIsToldEveryOutcome(t *testing.T) {
	type told struct {
		ID   uint64
		Kind Kind
		Why  string // "" accepted, else what refused it
	}
	why := func(err error) string {
		var full *FullError
		switch {
		case err == nil:
			return ""
		case errors.As(err, &full) && full.Lane:
			return "lane full"
		case errors.As(err, &full):
			return "queue full"
		case errors.Is(err, ErrClosed):
			return "closed"
		}
		return "other"
	}
	var got []told
	var q *Queue
	q = New(Options{MaxDepth: 2, MaxPerLane: 1, MaxConcurrent: 1, Enqueued: func(e Event, err error) {
		_ = q.Len() // called without the queue's locks: reading it is fine
		got = append(got, told{e.ID, e.Kind, why(err)})
	}}, func(context.Context, Event) {})
	q.Enqueue(Event{Kind: KindMessage, ChannelID: "a"})
	q.Enqueue(Event{Kind: KindMessage, ChannelID: "a"}) // the lane holds one
	q.Enqueue(Event{Kind: KindCron})
	q.Enqueue(Event{Kind: KindWebhook}) // the queue holds two
	q.Close()
	q.Enqueue(Event{Kind: KindHook})
	want := []told{
		{1, KindMessage, ""},
		{0, KindMessage, "lane full"},
		{2, KindCron, ""},
		{0, KindWebhook, "queue full"},
		{0, KindHook, "closed"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Enqueued told (-want +got):\n%s", diff)
	}
	if !q.Closed() {
		t.Error("Closed() = false after Close")
	}
}

func TestWaitingListsLanesWithTheirOldest(t *testing.T) {
	clock := time.Unix(1_700_000_000, 0)
	q := New(Options{MaxDepth: 10, MaxConcurrent: 1, Now: func() time.Time {
		clock = clock.Add(time.Second)
		return clock
	}}, func(context.Context, Event) {})
	if got := q.Waiting(); len(got) != 0 {
		t.Fatalf("Waiting() of an empty queue = %v", got)
	}
	q.Enqueue(Event{Kind: KindMessage, ChannelID: "b"})
	q.Enqueue(Event{Kind: KindCron})
	q.Enqueue(Event{Kind: KindMessage, ChannelID: "b"})
	want := []LaneWaiting{
		{Lane: "b", Waiting: 2, Oldest: time.Unix(1_700_000_001, 0)},
		{Lane: SystemLane, Waiting: 1, Oldest: time.Unix(1_700_000_002, 0)},
	}
	if diff := cmp.Diff(want, q.Waiting()); diff != "" {
		t.Errorf("Waiting() (-want +got):\n%s", diff)
	}
}

// assigningJournal gives ids of its own, with gaps, as a journal whose
// store numbers events (a stream's sequence) does.
type assigningJournal struct {
	mu   sync.Mutex
	next uint64
	got  []uint64 // the ids the queue offered
}

func (j *assigningJournal) Append(Event) error { panic("Append called on a journal that assigns ids") }

func (j *assigningJournal) AppendAssign(e Event) (Event, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.got = append(j.got, e.ID)
	j.next += 3 // a gap: the store took sequences the queue never saw
	e.ID = j.next
	return e, nil
}

// A journal that assigns ids decides them: the queue's receipts, handlers
// and Keep carry the journal's ids, later ids number on from them, and the
// order of a lane holds.
func TestJournalAssignsIDs(t *testing.T) {
	j := &assigningJournal{next: 100}
	rec := newRecorder(true)
	q := New(Options{MaxDepth: 10, MaxConcurrent: 1, Journal: j, StartID: 7}, rec.handle)
	var ids []uint64
	for range 2 {
		r, err := q.Enqueue(Event{Kind: KindMessage, ChannelID: "c"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.Event.ID)
	}
	kept, err := q.Keep(Event{Kind: KindMessage, ChannelID: "c"})
	if err != nil {
		t.Fatal(err)
	}
	ids = append(ids, kept.ID)
	if diff := cmp.Diff([]uint64{103, 106, 109}, ids); diff != "" {
		t.Errorf("ids (-want +got):\n%s", diff)
	}
	// The queue offers the id after the last one the journal gave.
	if diff := cmp.Diff([]uint64{8, 104, 107}, j.got); diff != "" {
		t.Errorf("ids offered to the journal (-want +got):\n%s", diff)
	}
	runQueue(t, q)
	drain(t, q)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if diff := cmp.Diff([]uint64{103, 106}, rec.finished); diff != "" {
		t.Errorf("ran (-want +got):\n%s", diff)
	}
}

// assignFunc is a Journal that numbers events as a stream does.
type assignFunc func(Event) (Event, error)

func (f assignFunc) Append(e Event) error                { _, err := f(e); return err }
func (f assignFunc) AppendAssign(e Event) (Event, error) { return f(e) }

func TestElsewhereStoresWithoutRunning(t *testing.T) {
	var stored []Event
	r := newRecorder(true)
	q := New(Options{MaxDepth: 10, MaxConcurrent: 1, Elsewhere: true, Journal: assignFunc(func(e Event) (Event, error) {
		e.ID = uint64(100 + len(stored))
		stored = append(stored, e)
		return e, nil
	})}, r.handle)
	runQueue(t, q)
	rcpt, err := q.Enqueue(Event{ChannelID: "c1", Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if !rcpt.Waiting || rcpt.Event.ID != 100 || len(stored) != 1 {
		t.Fatalf("receipt %+v, stored %d: want the stored event, waiting", rcpt, len(stored))
	}
	if n := q.Len(); n != 0 {
		t.Fatalf("the queue holds %d events: a stored event runs where a worker takes it", n)
	}
	// A worker hands it back with Restore: then it runs here.
	q.Restore(rcpt.Event)
	if got := waitStarted(t, r); got != 100 {
		t.Fatalf("ran %d, want 100", got)
	}
}

func TestCurrentListsTheRunningEvents(t *testing.T) {
	r := newRecorder(false)
	q := New(Options{MaxDepth: 10, MaxConcurrent: 2}, r.handle)
	runQueue(t, q)
	a, _ := q.Enqueue(Event{ChannelID: "b-lane"})
	b, _ := q.Enqueue(Event{ChannelID: "a-lane"})
	c, _ := q.Enqueue(Event{ChannelID: "a-lane"})
	close(r.gate(c.Event.ID))
	waitStarted(t, r)
	waitStarted(t, r)
	got := q.Current()
	if len(got) != 2 || got[0].ID != b.Event.ID || got[1].ID != a.Event.ID {
		t.Fatalf("Current = %+v, want the two running events by lane", got)
	}
	close(r.gate(a.Event.ID))
	close(r.gate(b.Event.ID))
	drain(t, q)
}

// gatedStager is a Stager whose commits return when the test says.
type gatedStager struct {
	mu     sync.Mutex
	staged []uint64
	commit map[uint64]chan error
	// stagedC reports each staged id.
	stagedC chan uint64
}

func newGatedStager() *gatedStager {
	return &gatedStager{commit: map[uint64]chan error{}, stagedC: make(chan uint64, 100)}
}

func (j *gatedStager) Append(Event) error { panic("Append called on a Stager") }

func (j *gatedStager) Stage(e Event) (func() error, error) {
	c := make(chan error, 1)
	j.mu.Lock()
	j.staged = append(j.staged, e.ID)
	j.commit[e.ID] = c
	j.mu.Unlock()
	j.stagedC <- e.ID
	return func() error { return <-c }, nil
}

func (j *gatedStager) finish(id uint64, err error) {
	j.mu.Lock()
	c := j.commit[id]
	j.mu.Unlock()
	c <- err
}

func TestStagedEventsEnterTheirLanesInIDOrder(t *testing.T) {
	j := newGatedStager()
	rec := newRecorder(true)
	q := New(Options{MaxDepth: 10, MaxConcurrent: 1, Journal: j}, rec.handle)
	type result struct {
		r   Receipt
		err error
	}
	results := map[uint64]chan result{}
	for i := 1; i <= 3; i++ {
		c := make(chan result, 1)
		go func() {
			r, err := q.Enqueue(Event{Kind: KindMessage, ChannelID: "c", Text: fmt.Sprint(i)})
			c <- result{r, err}
		}()
		id := <-j.stagedC // staged one after the other, in id order
		results[id] = c
	}
	if q.Len() != 0 {
		t.Fatalf("Len = %d before any commit returned, want 0: nothing is accepted before it is durable", q.Len())
	}
	// Event 3 and 2 are durable first; they wait for 1.
	j.finish(3, nil)
	j.finish(2, errors.New("disk full"))
	select {
	case r := <-results[3]:
		t.Fatalf("event 3 accepted (%+v) before event 1, staged before it, settled", r)
	default:
	}
	j.finish(1, nil)
	for id, want := range map[uint64]bool{1: true, 2: false, 3: true} {
		got := <-results[id]
		if (got.err == nil) != want {
			t.Errorf("event %d: %v, want accepted=%v", id, got.err, want)
		}
		if want && got.r.Event.ID != id {
			t.Errorf("event %d accepted as %d", id, got.r.Event.ID)
		}
	}
	runQueue(t, q)
	drain(t, q)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if diff := cmp.Diff([]uint64{1, 3}, rec.started); diff != "" {
		t.Errorf("started (-want +got):\n%s", diff)
	}
}

func TestStagedEventsCountTowardsTheLimits(t *testing.T) {
	j := newGatedStager()
	q := New(Options{MaxDepth: 2, MaxPerLane: 1, MaxConcurrent: 1, Journal: j}, newRecorder(true).handle)
	done := make(chan error, 1)
	go func() { _, err := q.Enqueue(Event{Kind: KindMessage, ChannelID: "a"}); done <- err }()
	<-j.stagedC
	var full *FullError
	if _, err := q.Enqueue(Event{Kind: KindMessage, ChannelID: "a"}); !errors.As(err, &full) || !full.Lane {
		t.Errorf("second event in lane a while the first is staged: %v, want the lane's limit", err)
	}
	go func() { _, err := q.Enqueue(Event{Kind: KindMessage, ChannelID: "b"}); done <- err }()
	<-j.stagedC
	if _, err := q.Enqueue(Event{Kind: KindMessage, ChannelID: "c"}); !errors.As(err, &full) || full.Lane {
		t.Errorf("third event with two staged and MaxDepth 2: %v, want the queue's limit", err)
	}
	j.finish(1, nil)
	j.finish(2, nil)
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
