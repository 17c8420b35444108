package jsinbox

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentgateway/gateway/internal/queue"
)

// ringPrefix is the subject an intake rings after storing an event in a
// partition (gateway.ring.<partition>), so that an idle worker fetches it
// at once instead of at its next scan. A ring is a hint and may be lost:
// the scan finds what it missed.
const ringPrefix = "gateway.ring."

// Delivery is an event a Dispatcher handed to this process.
type Delivery struct {
	Event queue.Event
	// Deliveries counts how often the server has handed this event out,
	// this time included: more than one means an earlier holder died, or
	// stopped, before it finished the event.
	Deliveries uint64
}

// DispatchOptions configure a Dispatcher. Zero values take the defaults.
type DispatchOptions struct {
	// Slots is how many events this process runs at once
	// (MAX_CONCURRENT_QUERIES); it fetches only when a slot is free, so no
	// event waits here unstarted while another worker is idle. At least 1.
	Slots int
	// Progress is how often a held event's ack deadline is pushed back
	// (an in-progress ack). Zero: a third of the consumers' AckWait.
	Progress time.Duration
	// Scan is how often every partition holding events is tried, for
	// what rings missed: an event whose holder died comes back after its
	// AckWait and nobody rings for it. Zero: 2 s.
	Scan time.Duration
	// OnError, if set, is told of failures the dispatcher works around
	// (a fetch or an ack the server refused); nil ignores them.
	OnError func(error)
}

// Dispatcher hands this process the events of the stream, one at a time
// per partition and at most Slots at once (docs/scale-out.md §3). The
// server keeps order: each partition's consumer has max_ack_pending 1, so
// it hands out a partition's next event only after the current one was
// acked, and hands the current one out again (to whichever worker asks)
// once its holder stopped pushing its deadline back. A lane's events share
// a partition, so a lane never runs twice at once or out of order,
// whichever workers run it.
//
// An event stays held until Inbox.Finish acks it or Retry gives it back;
// Release frees its slot as soon as its turn is over (a finished turn's
// reply may still be on its way, and the partition waits for that).
type Dispatcher struct {
	in   *Inbox
	opts DispatchOptions

	rings chan int // partitions rung, or freed here

	mu        sync.Mutex // guards the fields below
	free      int        // slots not taken
	held      map[uint64]*holding
	partsHeld map[int]bool
	consumers map[int]jetstream.Consumer
	running   bool
	// progressing is closed by GiveBack to stop the progress acks.
	progressing chan struct{}
	progressOn  bool
}

// holding is an event fetched and not yet acked or given back.
type holding struct {
	msg       jetstream.Msg
	partition int
	slot      bool // its slot is still taken
}

// Dispatcher returns the inbox's dispatcher. Only one may run per Inbox:
// Finish acks the events it holds.
func (in *Inbox) Dispatcher(opts DispatchOptions) *Dispatcher {
	if opts.Slots < 1 {
		opts.Slots = 1
	}
	if opts.Progress <= 0 {
		opts.Progress = in.opts.AckWait / 3
	}
	if opts.Scan <= 0 {
		opts.Scan = 2 * time.Second
	}
	d := &Dispatcher{in: in, opts: opts, rings: make(chan int, 1024), free: opts.Slots,
		held: map[uint64]*holding{}, partsHeld: map[int]bool{}, consumers: map[int]jetstream.Consumer{},
		progressing: make(chan struct{})}
	in.mu.Lock()
	in.dispatcher = d
	in.mu.Unlock()
	return d
}

// Run fetches events until ctx ends, handing each to take on this
// goroutine (take must be quick: it queues the event). The events it
// holds stay held when it returns, their deadlines pushed back, so that a
// stopping process finishes its running turns: GiveBack then hands back
// what is left.
func (d *Dispatcher) Run(ctx context.Context, take func(Delivery)) error {
	d.mu.Lock()
	if d.running {
		d.mu.Unlock()
		return errors.New("jsinbox: the dispatcher is running already")
	}
	d.running = true
	if !d.progressOn {
		d.progressOn = true
		go d.progress(d.progressing)
	}
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		d.running = false
		d.mu.Unlock()
	}()
	sub, err := d.in.nc.Subscribe(ringPrefix+"*", func(m *nats.Msg) {
		p, err := strconv.Atoi(strings.TrimPrefix(m.Subject, ringPrefix))
		if err == nil {
			d.ring(p)
		}
	})
	if err != nil {
		return fmt.Errorf("subscribe to the partitions' rings: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()

	scan := time.NewTicker(d.opts.Scan)
	defer scan.Stop()
	d.scan(ctx, take)
	for {
		select {
		case <-ctx.Done():
			return nil
		case p := <-d.rings:
			d.try(ctx, p, take)
		case <-scan.C:
			d.scan(ctx, take)
		}
	}
}

// progress pushes back the held events' deadlines until GiveBack.
func (d *Dispatcher) progress(stop <-chan struct{}) {
	t := time.NewTicker(d.opts.Progress)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			d.inProgress()
		}
	}
}

// ring asks Run to try partition p; a full channel drops the hint, which
// the scan makes up for.
func (d *Dispatcher) ring(p int) {
	select {
	case d.rings <- p:
	default:
	}
}

// scan tries every partition that holds events.
func (d *Dispatcher) scan(ctx context.Context, take func(Delivery)) {
	if !d.hasSlot() {
		return
	}
	info, err := d.in.stream.Info(ctx, jetstream.WithSubjectFilter(streamSubjects))
	if err != nil {
		d.report(fmt.Errorf("read which partitions hold events: %w", err))
		return
	}
	parts := map[int]bool{}
	for subj := range info.State.Subjects {
		if p, ok := partitionOfSubject(subj); ok {
			parts[p] = true
		}
	}
	for p := range parts {
		if ctx.Err() != nil || !d.hasSlot() {
			return
		}
		d.try(ctx, p, take)
	}
}

func (d *Dispatcher) hasSlot() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.free > 0
}

// try fetches partition p's next event if a slot is free and this
// process does not hold p's current one already.
func (d *Dispatcher) try(ctx context.Context, p int, take func(Delivery)) {
	if p < 0 || p >= d.in.opts.Partitions {
		return
	}
	d.mu.Lock()
	if d.free == 0 || d.partsHeld[p] {
		d.mu.Unlock()
		return
	}
	d.free-- // taken before the fetch, so that nothing is fetched without one
	d.partsHeld[p] = true
	cons := d.consumers[p]
	d.mu.Unlock()
	got := false
	defer func() {
		if !got {
			d.mu.Lock()
			d.free++
			delete(d.partsHeld, p)
			d.mu.Unlock()
		}
	}()
	if cons == nil {
		c, err := d.in.stream.Consumer(ctx, consumerPrefix+strconv.Itoa(p))
		if err != nil {
			d.report(fmt.Errorf("look up the consumer of partition %d: %w", p, err))
			return
		}
		cons = c
		d.mu.Lock()
		d.consumers[p] = c
		d.mu.Unlock()
	}
	batch, err := cons.FetchNoWait(1)
	if err != nil {
		d.report(fmt.Errorf("fetch from partition %d: %w", p, err))
		return
	}
	for msg := range batch.Messages() {
		meta, err := msg.Metadata()
		if err != nil {
			d.report(fmt.Errorf("partition %d: a message without metadata: %w", p, err))
			_ = msg.Term()
			continue
		}
		e, err := decodeEvent(msg.Subject(), meta.Sequence.Stream, msg.Data())
		if err != nil {
			// Nothing can run it: ending its deliveries keeps it from
			// blocking the partition. The stream keeps it for a look.
			d.report(fmt.Errorf("partition %d: event %d cannot be read, skipped: %w", p, meta.Sequence.Stream, err))
			_ = msg.Term()
			continue
		}
		got = true
		d.mu.Lock()
		d.held[e.ID] = &holding{msg: msg, partition: p, slot: true}
		d.mu.Unlock()
		take(Delivery{Event: e, Deliveries: meta.NumDelivered})
	}
	if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, jetstream.ErrNoMessages) {
		d.report(fmt.Errorf("fetch from partition %d: %w", p, err))
	}
}

// Release frees event id's slot: its turn is over here, though its reply
// may still be on its way (the event stays held until Finish).
func (d *Dispatcher) Release(id uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if h := d.held[id]; h != nil && h.slot {
		h.slot = false
		d.free++
	}
}

// Retry gives event id back to the server to be handed out again after
// delay (a failure another attempt may not meet: NATS unreachable at the
// start, the gateway stopping); delay 0 hands it out at once.
func (d *Dispatcher) Retry(id uint64, delay time.Duration) {
	h := d.take(id)
	if h == nil {
		return
	}
	var err error
	if delay > 0 {
		err = h.msg.NakWithDelay(delay)
	} else {
		err = h.msg.Nak()
	}
	if err != nil {
		d.report(fmt.Errorf("give event %d back: %w", id, err))
	}
	if delay == 0 {
		d.in.ring(h.partition)
	}
}

// Holds reports whether this process holds event id.
func (d *Dispatcher) Holds(id uint64) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.held[id] != nil
}

// acked is Finish's: the event is done here. It acks the event and waits
// for the server to confirm, so that the partition's next event is handed
// out; false when this process did not hold it.
func (d *Dispatcher) acked(ctx context.Context, id uint64) (bool, error) {
	h := d.take(id)
	if h == nil {
		return false, nil
	}
	err := h.msg.DoubleAck(ctx)
	d.in.ring(h.partition) // the partition's next event, if any, can run now
	if err != nil {
		return true, fmt.Errorf("ack event %d: %w", id, err)
	}
	return true, nil
}

// take forgets event id, freeing its slot and partition.
func (d *Dispatcher) take(id uint64) *holding {
	d.mu.Lock()
	defer d.mu.Unlock()
	h := d.held[id]
	if h == nil {
		return nil
	}
	delete(d.held, id)
	delete(d.partsHeld, h.partition)
	if h.slot {
		d.free++
	}
	return h
}

// inProgress pushes back the ack deadline of every held event.
func (d *Dispatcher) inProgress() {
	d.mu.Lock()
	msgs := make([]jetstream.Msg, 0, len(d.held))
	for _, h := range d.held {
		msgs = append(msgs, h.msg)
	}
	d.mu.Unlock()
	for _, m := range msgs {
		if err := m.InProgress(); err != nil {
			d.report(fmt.Errorf("push back an event's ack deadline: %w", err))
		}
	}
}

// GiveBack hands every event still held back to the server at once, so
// that another worker takes it without waiting out its deadline: the
// last step of a stop, after the running turns had their time. Call it
// after Run returned.
func (d *Dispatcher) GiveBack() {
	d.mu.Lock()
	ids := make([]uint64, 0, len(d.held))
	for id := range d.held {
		ids = append(ids, id)
	}
	if d.progressOn {
		d.progressOn = false
		close(d.progressing)
		d.progressing = make(chan struct{})
	}
	d.mu.Unlock()
	for _, id := range ids {
		d.Retry(id, 0)
	}
}

func (d *Dispatcher) report(err error) {
	if d.opts.OnError != nil {
		d.opts.OnError(err)
	}
}

// ring tells every dispatcher that partition p may have an event to hand
// out; a hint only, so a failure is ignored.
func (in *Inbox) ring(p int) {
	_ = in.nc.Publish(ringPrefix+strconv.Itoa(p), nil)
}

// partitionOfSubject is the partition of an event subject.
func partitionOfSubject(subj string) (int, bool) {
	rest, ok := strings.CutPrefix(subj, subjectPrefix)
	if !ok {
		return 0, false
	}
	n, _, ok := strings.Cut(rest, ".")
	if !ok {
		return 0, false
	}
	p, err := strconv.Atoi(n)
	return p, err == nil
}
