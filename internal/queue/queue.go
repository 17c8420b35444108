package queue

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"
)

// ErrClosed is returned by Enqueue after Close.
var ErrClosed = errors.New("queue closed: the gateway is shutting down")

// ErrDuplicate is what a Journal returns (wrapped) for an event whose Key
// it has recorded already: the source event was accepted before, and its
// producer should treat the new attempt as done.
var ErrDuplicate = errors.New("event accepted already")

// FullError is returned by Enqueue when the queue holds MaxDepth waiting
// events (R11.5), or the event's lane holds MaxPerLane.
type FullError struct {
	// Depth is how many events wait: in the whole queue, or in the lane
	// when Lane is set.
	Depth int
	// Lane is set when the lane's own limit refused the event while the
	// queue as a whole still had room.
	Lane bool
}

func (e *FullError) Error() string {
	if e.Lane {
		return fmt.Sprintf("lane full: %d events waiting in it", e.Depth)
	}
	return fmt.Sprintf("queue full: %d events waiting", e.Depth)
}

// Fate is how an accepted event left the queue.
type Fate int

const (
	// Ran: its handler ran and returned.
	Ran Fate = iota + 1
	// Stopped: Stop dropped it while it waited.
	Stopped
	// Dropped: the queue stopped (Run's context ended) while it waited.
	Dropped
)

func (f Fate) String() string {
	switch f {
	case Ran:
		return "ran"
	case Stopped:
		return "stopped"
	case Dropped:
		return "dropped"
	}
	return "unknown"
}

// Handler processes one event. The queue calls it on its own goroutine and
// starts the lane's next event when it returns.
type Handler func(ctx context.Context, e Event)

// Journal is the durability seam (DESIGN decisions 13 and 14): Append
// records an event durably before it is accepted; an error refuses the
// event (a journal that knows the event's Key already returns an error the
// producer recognises). What becomes of the event afterwards is recorded by
// whoever owns the journal (see Options.Left). A nil Journal keeps events in
// memory only.
type Journal interface {
	Append(e Event) error
}

// Assigner is a Journal whose store numbers the events itself (a
// stream's sequence): AppendAssign records e and returns it with the id
// the store gave, which the queue then uses. The ids must grow; they may
// skip. The queue offers e.ID as it would number it, so a store that
// keeps that id may. With an Assigner the queue's numbering cannot fall
// behind the store's (a write the store kept but did not confirm), which
// would refuse every later event.
type Assigner interface {
	Journal
	AppendAssign(e Event) (Event, error)
}

// Stager is a Journal that records in two steps, so that the events of
// concurrent Enqueue calls share one write to disk (group commit): Stage
// places e in the store's order and returns at once (the queue calls it
// under its append lock, ids ascending), and commit waits until e is
// durable (the queue calls it without any lock held). An event is accepted
// only once its commit returned nil, and accepted events enter their lanes
// in id order.
type Stager interface {
	Journal
	Stage(e Event) (commit func() error, err error)
}

// journal records e in the journal; it returns e with the id to use.
func (q *Queue) journal(e Event) (Event, error) {
	if a, ok := q.opts.Journal.(Assigner); ok {
		got, err := a.AppendAssign(e)
		if err != nil {
			return Event{}, err
		}
		e.ID = got.ID
		return e, nil
	}
	return e, q.opts.Journal.Append(e)
}

// Options configures a Queue.
type Options struct {
	// MaxDepth is how many events may wait (not yet running); at least 1.
	MaxDepth int
	// MaxPerLane is how many events one lane may have waiting; zero means
	// only MaxDepth applies. It keeps one busy channel from filling the
	// queue and locking every other channel out.
	MaxPerLane int
	// MaxConcurrent is how many lanes may run at once; at least 1.
	MaxConcurrent int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Journal, if set, records every event before it is accepted.
	Journal Journal
	// StartID is the id after which new events are numbered: a journal's
	// highest id, so that ids never repeat across restarts.
	StartID uint64
	// Left, if set, is called exactly once for every accepted event when
	// it leaves the queue: after its handler returned, or when it was
	// dropped without running. Producers release what they hold for the
	// event there (a heartbeat's busy mark, a waiting reaction), whatever
	// became of it. It is called without the queue's lock held.
	Left func(e Event, fate Fate)
	// Elsewhere makes the journal's store the queue (NATS JetStream with
	// several workers): Enqueue records each event and returns it as
	// waiting without keeping it, and whichever worker takes it from the
	// store runs it, handing it to its own queue with Restore. The store
	// applies the limits then.
	Elsewhere bool
	// Enqueued, if set, is told how every Enqueue ended: the event as
	// accepted (with its id) and a nil error, or the event as offered and
	// the error that refused it. It is called without the queue's locks
	// held (the admin server's metrics).
	Enqueued func(e Event, err error)
}

// Receipt describes an accepted event.
type Receipt struct {
	Event Event
	// Waiting is true when the event could not start at once: its lane is
	// busy or every concurrency slot is taken.
	Waiting bool
}

// Queue is the FIFO event queue with per-lane ordering.
type Queue struct {
	opts    Options
	handler Handler

	// appendMu serialises Enqueue around the journal's Append, which may
	// wait for the disk: ids are handed out and events inserted in the same
	// order, while mu stays free for dispatch and finishing handlers.
	appendMu sync.Mutex

	mu      sync.Mutex // guards every field below
	nextID  uint64
	last    time.Time
	lanes   map[string]*lane
	ready   laneHeap // lanes that are idle and have waiting events, by head id
	waiting int      // events accepted and not yet started
	running int      // handlers in flight
	closed  bool
	ctx     context.Context // set by Run; nil until then
	changed chan struct{}   // closed and replaced whenever a handler finishes or a staged event settles
	// jobs hands events to the goroutines waiting for one (work); ended
	// is closed when Run returns, and they end.
	jobs  chan job
	ended chan struct{}

	// staged are the events a Stager holds, in id order, that are not yet
	// in their lanes: their commit is in flight, or an older one's is.
	staged []*stagedEvent
	// stagedIn counts staged events per lane, for the limits.
	stagedIn map[string]int
}

// stagedEvent is an event between Stage and its lane.
type stagedEvent struct {
	e         Event
	committed bool  // its commit returned
	err       error // what its commit returned
	receipt   Receipt
	// settled is closed once the event entered its lane or was refused;
	// receipt and err are final then.
	settled chan struct{}
}

type lane struct {
	name   string
	events []Event // waiting events in id order
	busy   bool
	index  int // position in the ready heap, -1 when absent
	// stop cancels the running event's context (Stop); nil when idle.
	stop context.CancelCauseFunc
	// current is the running event; zero when idle.
	current Event
}

// New returns a queue that passes events to handler once Run is called.
func New(opts Options, handler Handler) *Queue {
	if opts.MaxDepth < 1 {
		opts.MaxDepth = 1
	}
	if opts.MaxConcurrent < 1 {
		opts.MaxConcurrent = 1
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Queue{
		opts:     opts,
		handler:  handler,
		nextID:   opts.StartID,
		lanes:    map[string]*lane{},
		changed:  make(chan struct{}),
		stagedIn: map[string]int{},
		jobs:     make(chan job),
		ended:    make(chan struct{}),
	}
}

// Enqueue assigns the event its id and timestamp, records it in the
// journal, and accepts it; or rejects it with *FullError, ErrClosed or the
// journal's error.
func (q *Queue) Enqueue(e Event) (Receipt, error) {
	p, err := q.Submit(e)
	if err != nil {
		return Receipt{}, err
	}
	return p.Wait()
}

// Pending is an event handed to Submit: recorded in the journal's order,
// its acceptance not yet known. Wait must be called once.
type Pending struct {
	q  *Queue
	se *stagedEvent // nil when Submit settled the event itself
	// commit makes se durable (the Stager's).
	commit  func() error
	receipt Receipt
}

// Event is the event with the id and time it was given.
func (p *Pending) Event() Event {
	if p.se != nil {
		return p.se.e
	}
	return p.receipt.Event
}

// Wait waits until the event is durable and in its lane, and returns its
// receipt, or the journal's error: the event was not accepted then.
func (p *Pending) Wait() (Receipt, error) {
	if p.se == nil {
		return p.receipt, nil
	}
	q, se := p.q, p.se
	err := p.commit()
	q.mu.Lock()
	se.committed, se.err = true, err
	q.settleLocked()
	q.mu.Unlock()
	<-se.settled
	if se.err != nil {
		err = fmt.Errorf("journal event: %w", se.err)
		q.enqueued(se.e, err)
		return Receipt{}, err
	}
	q.enqueued(se.receipt.Event, nil)
	return se.receipt, nil
}

// Submit is Enqueue in two steps, for a producer that takes events one
// after the other and must not wait for the disk between them (Discord's
// intake): it applies the limits, gives the event its id and places it in
// the journal's order, and returns; Pending.Wait then waits until it is
// durable. Events of concurrent Waits share the journal's sync. With a
// journal that is not a Stager, Submit does all of Enqueue and Wait
// returns at once.
func (q *Queue) Submit(e Event) (*Pending, error) {
	if j, ok := q.opts.Journal.(Stager); ok && !q.opts.Elsewhere {
		p, err := q.stage(j, e)
		if err != nil {
			q.enqueued(e, err)
		}
		return p, err
	}
	r, err := q.enqueueNow(e)
	if err != nil {
		q.enqueued(e, err)
		return nil, err
	}
	q.enqueued(r.Event, nil)
	return &Pending{q: q, receipt: r}, nil
}

// enqueued tells Options.Enqueued how an Enqueue ended; no lock is held.
func (q *Queue) enqueued(e Event, err error) {
	if q.opts.Enqueued != nil {
		q.opts.Enqueued(e, err)
	}
}

// enqueueNow records e in a journal that is not a Stager (or none) and
// accepts it, holding the append lock across the journal's write.
func (q *Queue) enqueueNow(e Event) (Receipt, error) {
	q.appendMu.Lock()
	defer q.appendMu.Unlock()
	q.mu.Lock()
	now, err := q.admitLocked(&e)
	q.mu.Unlock()
	if err != nil {
		return Receipt{}, err
	}

	if q.opts.Journal != nil {
		var err error
		if e, err = q.journal(e); err != nil {
			return Receipt{}, fmt.Errorf("journal event: %w", err)
		}
	}

	q.mu.Lock()
	defer q.mu.Unlock()
	q.nextID = max(q.nextID, e.ID)
	q.last = now
	if q.opts.Elsewhere && q.opts.Journal != nil {
		return Receipt{Event: e, Waiting: true}, nil
	}
	return q.insertLocked(e), nil
}

// admitLocked applies the limits to e and gives it its lane, id and time;
// the time is returned for q.last once e is recorded.
func (q *Queue) admitLocked(e *Event) (time.Time, error) {
	if q.closed {
		return time.Time{}, ErrClosed
	}
	if depth := q.waiting + len(q.staged); depth >= q.opts.MaxDepth {
		return time.Time{}, &FullError{Depth: depth}
	}
	e.Lane = e.lane()
	if q.opts.MaxPerLane > 0 {
		depth := q.stagedIn[e.Lane]
		if l := q.lanes[e.Lane]; l != nil {
			depth += len(l.events)
		}
		if depth >= q.opts.MaxPerLane {
			return time.Time{}, &FullError{Depth: depth, Lane: true}
		}
	}
	now := q.opts.Now()
	if now.Before(q.last) {
		now = q.last // timestamps never go backwards, whatever the clock does
	}
	e.ID = q.nextID + 1
	e.Time = now
	return now, nil
}

// stage is Submit with a Stager: the event is staged under the append
// lock, so ids and the journal's order agree; Pending.Wait commits it
// outside any lock, so that concurrent events share the journal's sync.
func (q *Queue) stage(j Stager, e Event) (*Pending, error) {
	q.appendMu.Lock()
	defer q.appendMu.Unlock()
	q.mu.Lock()
	now, err := q.admitLocked(&e)
	if err != nil {
		q.mu.Unlock()
		return nil, err
	}
	se := &stagedEvent{e: e, settled: make(chan struct{})}
	q.staged = append(q.staged, se)
	q.stagedIn[e.Lane]++
	q.mu.Unlock()

	commit, err := j.Stage(e)

	q.mu.Lock()
	defer q.mu.Unlock()
	if err != nil {
		// Nothing was staged after it: the append lock is still held.
		se.committed, se.err = true, err
		q.settleLocked()
		return nil, fmt.Errorf("journal event: %w", err)
	}
	q.nextID, q.last = max(q.nextID, e.ID), now
	return &Pending{q: q, se: se, commit: commit}, nil
}

// settleLocked moves the committed events at the head of the staged list
// into their lanes (or drops those whose commit failed), in id order; an
// event committed behind one still in flight waits for it.
func (q *Queue) settleLocked() {
	n := 0
	for _, se := range q.staged {
		if !se.committed {
			break
		}
		n++
		if q.stagedIn[se.e.Lane]--; q.stagedIn[se.e.Lane] == 0 {
			delete(q.stagedIn, se.e.Lane)
		}
		if se.err == nil {
			se.receipt = q.insertLocked(se.e)
		}
		close(se.settled)
	}
	if n == 0 {
		return
	}
	clear(q.staged[:n])
	q.staged = q.staged[n:]
	close(q.changed)
	q.changed = make(chan struct{})
}

// Keep records e in the journal for a later start without running it: a
// prompt that arrives while the gateway stops, after Close. It assigns the
// id and time as Enqueue does. Without a Journal it returns ErrClosed.
func (q *Queue) Keep(e Event) (Event, error) {
	if q.opts.Journal == nil {
		return Event{}, ErrClosed
	}
	q.appendMu.Lock()
	defer q.appendMu.Unlock()
	q.mu.Lock()
	e.Lane = e.lane()
	now := q.opts.Now()
	if now.Before(q.last) {
		now = q.last
	}
	e.ID, e.Time = q.nextID+1, now
	q.mu.Unlock()
	e, err := q.journal(e)
	if err != nil {
		return Event{}, fmt.Errorf("journal event: %w", err)
	}
	q.mu.Lock()
	q.nextID, q.last = max(q.nextID, e.ID), now
	q.mu.Unlock()
	return e, nil
}

// Restore accepts events a journal kept from an earlier run, with their
// ids and times, ahead of new ones: call it before the first Enqueue, in id
// order. Limits do not apply (they were met when the events came in) and
// the journal is not written.
func (q *Queue) Restore(e Event) Receipt {
	q.appendMu.Lock()
	defer q.appendMu.Unlock()
	q.mu.Lock()
	defer q.mu.Unlock()
	e.Lane = e.lane()
	if e.ID > q.nextID {
		q.nextID = e.ID
	}
	if e.Time.After(q.last) {
		q.last = e.Time
	}
	return q.insertLocked(e)
}

// insertLocked adds an accepted event to its lane and dispatches.
func (q *Queue) insertLocked(e Event) Receipt {
	l := q.lanes[e.Lane]
	if l == nil {
		l = &lane{name: e.Lane, index: -1}
		q.lanes[e.Lane] = l
	}
	l.events = append(l.events, e)
	q.waiting++
	if !l.busy && l.index < 0 {
		heap.Push(&q.ready, l)
	}
	q.dispatchLocked()
	// e was appended last, so it still waits iff it is still the lane's tail.
	waiting := len(l.events) > 0 && l.events[len(l.events)-1].ID == e.ID
	return Receipt{Event: e, Waiting: waiting}
}

// Run dispatches events until ctx ends, then waits for running handlers to
// return. Handlers receive ctx. Events still waiting then never run: each
// is handed to Options.Left as Dropped and returned, oldest first. They stay
// in the Journal, which is where a later start finds them.
func (q *Queue) Run(ctx context.Context) (dropped []Event, err error) {
	if err := q.start(ctx); err != nil {
		return nil, err
	}
	defer close(q.ended)
	<-ctx.Done()
	q.Close()
	q.mu.Lock()
	for q.running > 0 || len(q.staged) > 0 {
		changed := q.changed
		q.mu.Unlock()
		<-changed
		q.mu.Lock()
	}
	for _, l := range q.lanes {
		dropped = append(dropped, l.events...)
		l.events = nil
	}
	q.lanes = map[string]*lane{}
	q.ready = nil
	q.waiting = 0
	q.mu.Unlock()
	sort.Slice(dropped, func(i, j int) bool { return dropped[i].ID < dropped[j].ID })
	for _, e := range dropped {
		q.left(e, Dropped)
	}
	return dropped, nil
}

func (q *Queue) left(e Event, fate Fate) {
	if q.opts.Left != nil {
		q.opts.Left(e, fate)
	}
}

func (q *Queue) start(ctx context.Context) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ctx == ctx {
		return nil
	}
	if q.ctx != nil {
		return errors.New("queue: Run called twice")
	}
	q.ctx = ctx
	q.dispatchLocked()
	return nil
}

// Close stops intake: later Enqueue calls fail with ErrClosed. Accepted
// events still run.
func (q *Queue) Close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
}

// Drain waits until no event is waiting or running, or ctx ends.
func (q *Queue) Drain(ctx context.Context) error {
	for {
		q.mu.Lock()
		if q.waiting == 0 && q.running == 0 && len(q.staged) == 0 {
			q.mu.Unlock()
			return nil
		}
		changed := q.changed
		q.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("drain queue: %w", ctx.Err())
		}
	}
}

// Len returns how many events wait to start.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.waiting
}

// Closed reports whether Close was called: Enqueue refuses every event.
func (q *Queue) Closed() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.closed
}

// LaneWaiting is how many events wait in one lane, and since when.
type LaneWaiting struct {
	Lane    string
	Waiting int
	// Oldest is the enqueue time of the lane's longest-waiting event.
	Oldest time.Time
}

// Waiting lists the lanes that have events waiting, by lane name.
func (q *Queue) Waiting() []LaneWaiting {
	q.mu.Lock()
	out := make([]LaneWaiting, 0, len(q.lanes))
	for _, l := range q.lanes {
		if len(l.events) > 0 {
			out = append(out, LaneWaiting{Lane: l.name, Waiting: len(l.events), Oldest: l.events[0].Time})
		}
	}
	q.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Lane < out[j].Lane })
	return out
}

// Current returns the events running now, by lane.
func (q *Queue) Current() []Event {
	q.mu.Lock()
	out := make([]Event, 0, q.running)
	for _, l := range q.lanes {
		if l.busy {
			out = append(out, l.current)
		}
	}
	q.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Lane < out[j].Lane })
	return out
}

// Running returns how many handlers are in flight.
func (q *Queue) Running() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.running
}

// dispatchLocked starts as many ready lanes as the concurrency limit allows,
// oldest head event first.
func (q *Queue) dispatchLocked() {
	if q.ctx == nil || q.ctx.Err() != nil {
		return // not started, or stopping: waiting events stay where they are
	}
	for q.running < q.opts.MaxConcurrent && q.ready.Len() > 0 {
		l := heap.Pop(&q.ready).(*lane)
		e := l.events[0]
		l.events[0] = Event{} // let the strings go
		l.events = l.events[1:]
		l.busy = true
		l.current = e
		q.waiting--
		q.running++
		ctx, stop := context.WithCancelCause(q.ctx)
		l.stop = stop
		q.startLocked(job{ctx: ctx, l: l, e: e})
	}
}

// job is an event to run in its lane.
type job struct {
	ctx context.Context
	l   *lane
	e   Event
}

// workerIdle is how long a goroutine that ran an event waits for the next
// one before it ends.
const workerIdle = 10 * time.Second

// startLocked hands j to a goroutine waiting for work, or starts one.
// Reusing them spares each event a fresh stack grown again through the
// handler's calls.
func (q *Queue) startLocked(j job) {
	select {
	case q.jobs <- j:
	default:
		go q.work(j)
	}
}

// work runs j, then the jobs handed to it, until none came for workerIdle
// or Run ended.
func (q *Queue) work(j job) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		q.run(j.ctx, j.l, j.e)
		idle.Reset(workerIdle)
		select {
		case j = <-q.jobs:
		case <-idle.C:
			return
		case <-q.ended:
			return
		}
	}
}

func (q *Queue) run(ctx context.Context, l *lane, e Event) {
	defer q.finish(l, e)
	q.handler(ctx, e)
}

// ErrStopped is the cause of a running event's cancellation by Stop.
var ErrStopped = errors.New("stopped on request")

// ErrShutdown is the cause handlers see when the gateway stops without
// waiting for them (a second signal): their events were not answered and a
// later start should take them up again, so nobody is told they failed.
var ErrShutdown = errors.New("stopped by shutdown")

// Stop stops a lane's work at once: the running event's context is
// cancelled with cause ErrStopped (the handler sees it and should return
// promptly) and the lane's waiting events are dropped. It returns whether an
// event was running and the dropped events.
func (q *Queue) Stop(laneName string) (running bool, dropped []Event) {
	q.mu.Lock()
	l := q.lanes[laneName]
	if l == nil {
		q.mu.Unlock()
		return false, nil
	}
	dropped, l.events = l.events, nil
	q.waiting -= len(dropped)
	if l.index >= 0 {
		heap.Remove(&q.ready, l.index)
	}
	running = l.busy
	if running && l.stop != nil {
		l.stop(ErrStopped)
	}
	if !l.busy {
		delete(q.lanes, l.name)
	}
	close(q.changed)
	q.changed = make(chan struct{})
	q.mu.Unlock()
	for _, e := range dropped {
		q.left(e, Stopped)
	}
	return running, dropped
}

// Cancel stops the lane's running event if it is event id, and leaves the
// events waiting behind it in place: they run next. A Cancel for an event
// that has finished, or never ran, does nothing and reports false, so a
// late tap on a Stop button cannot stop the turn after it.
func (q *Queue) Cancel(laneName string, id uint64) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	l := q.lanes[laneName]
	if l == nil || !l.busy || l.current.ID != id || l.stop == nil {
		return false
	}
	l.stop(ErrStopped)
	return true
}

// Lane returns the lane's running event (ok false when idle) and copies
// of its waiting events, in order.
func (q *Queue) Lane(laneName string) (running Event, ok bool, waiting []Event) {
	q.mu.Lock()
	defer q.mu.Unlock()
	l := q.lanes[laneName]
	if l == nil {
		return Event{}, false, nil
	}
	return l.current, l.busy, slices.Clone(l.events)
}

func (q *Queue) finish(l *lane, e Event) {
	q.left(e, Ran)
	q.mu.Lock()
	defer q.mu.Unlock()
	q.running--
	l.busy = false
	l.current = Event{}
	if l.stop != nil {
		l.stop(nil)
		l.stop = nil
	}
	if len(l.events) > 0 {
		heap.Push(&q.ready, l)
	} else {
		delete(q.lanes, l.name) // idle lanes cost nothing
	}
	q.dispatchLocked()
	close(q.changed)
	q.changed = make(chan struct{})
}

// laneHeap orders ready lanes by the id of their oldest waiting event, so
// that across lanes the queue stays first in, first out.
type laneHeap []*lane

func (h laneHeap) Len() int           { return len(h) }
func (h laneHeap) Less(i, j int) bool { return h[i].events[0].ID < h[j].events[0].ID }
func (h laneHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *laneHeap) Push(x any) {
	l := x.(*lane)
	l.index = len(*h)
	*h = append(*h, l)
}
func (h *laneHeap) Pop() any {
	old := *h
	l := old[len(old)-1]
	old[len(old)-1] = nil
	l.index = -1
	*h = old[:len(old)-1]
	return l
}

// Promote moves event id, waiting in lane, to the front of that lane so
// that it runs next ("Send now"). It reports false when id is not waiting
// there (it started, finished or was dropped meanwhile).
func (q *Queue) Promote(laneName string, id uint64) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	l := q.lanes[laneName]
	if l == nil {
		return false
	}
	i := slices.IndexFunc(l.events, func(e Event) bool { return e.ID == id })
	if i < 0 {
		return false
	}
	e := l.events[i]
	copy(l.events[1:i+1], l.events[:i])
	l.events[0] = e
	if l.index >= 0 {
		heap.Fix(&q.ready, l.index)
	}
	return true
}
