// Package jsinbox is the gateway's inbox on NATS JetStream
// (docs/scale-out.md §2): the same records as internal/inbox, kept by a
// NATS cluster instead of one file, so that several machines can share them.
//
// Events are messages of the work-queue stream GATEWAY_EVENTS, one subject
// per lane (gateway.events.<partition>.<lane>); an event's id is its stream
// sequence, monotonic and never reused. The stream's limits are the queue's:
// max_msgs is MAX_QUEUE_DEPTH, max_msgs_per_subject MAX_CHANNEL_QUEUE, both
// refusing new messages when reached. Source keys are de-duplicated twice:
// by the stream's duplicate window (Nats-Msg-Id) and, for as long as
// Options.KeyTTL, by the KV bucket gateway-keys. What becomes of an event
// (started, tool started, reply, finish) is a record in gateway-events,
// written with revision checks; delivered reply chunks are in
// gateway-deliveries and the newest message per channel in gateway-seen.
// A finished event leaves the stream.
//
// Open creates the stream, the per-partition pull consumers and the buckets
// when missing and checks them when present: a setting that differs is an
// error naming it, never a silent change.
//
// An Inbox is safe for concurrent use, and several Inboxes (on several
// machines) may share one stream. The methods without a context use
// Options.Timeout for each call to the server.
package jsinbox

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentgateway/gateway/internal/inbox"
	"github.com/agentgateway/gateway/internal/queue"
)

// The records are the embedded inbox's, so that the gateway handles both
// stores alike.
type (
	// State is where an event is in its life.
	State = inbox.State
	// Seen is the newest Discord message seen in a channel.
	Seen = inbox.Seen
	// Entry is one event and what became of it.
	Entry = inbox.Entry
	// Stats describe the inbox for doctor and the logs.
	Stats = inbox.Stats
)

var (
	// ErrDuplicate is returned (wrapped) by Add and Append for an event whose
	// Key was accepted before. It matches queue.ErrDuplicate and
	// inbox.ErrDuplicate with errors.Is.
	ErrDuplicate = fmt.Errorf("%w: %w", queue.ErrDuplicate, inbox.ErrDuplicate)
	// ErrUnknown is returned for an event id the inbox does not hold.
	ErrUnknown = inbox.ErrUnknown
	// ErrFenced is returned by a write of an attempt another writer has
	// taken over (a Started elsewhere since this process's Started): the
	// caller must stop and post nothing.
	ErrFenced = errors.New("jsinbox: the event was taken over by another attempt")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("jsinbox: closed")
)

// Options configure an Inbox. Zero values take the defaults of
// docs/scale-out.md.
type Options struct {
	// Partitions is how many partitions (and pull consumers) the stream
	// has; fixed when the stream is made. Zero: 256.
	Partitions int
	// Replicas of the stream and buckets: 3 on a cluster. Zero: 1.
	Replicas int
	// MaxDepth is MAX_QUEUE_DEPTH: how many events the stream holds
	// (waiting and running). Zero: no limit.
	MaxDepth int
	// MaxPerLane is MAX_CHANNEL_QUEUE: how many events one lane holds.
	// Zero: no limit.
	MaxPerLane int
	// DuplicateWindow is the stream's duplicate window. Zero: 2 minutes.
	DuplicateWindow time.Duration
	// KeyTTL is how long gateway-keys remembers a source key. Zero: 7 days.
	KeyTTL time.Duration
	// KeepFor is how long event records and deliveries are kept after
	// their last change. Zero: 7 days.
	KeepFor time.Duration
	// AckWait and MaxDeliver configure the partitions' consumers. Zero:
	// 60 s and 4: three attempts at a turn, and a fourth delivery whose
	// holder posts the dead-letter notice (LastDelivery) instead of
	// running it, so that no event is left in the stream untold.
	AckWait    time.Duration
	MaxDeliver int
	// Timeout bounds each call to the server of the methods without a
	// context (the PubAck of Add among them). Zero: 2 s.
	Timeout time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	if o.Partitions <= 0 {
		o.Partitions = 256
	}
	if o.Replicas <= 0 {
		o.Replicas = 1
	}
	if o.MaxDeliver <= 0 {
		o.MaxDeliver = 4
	}
	def(&o.DuplicateWindow, 2*time.Minute)
	def(&o.KeyTTL, 7*24*time.Hour)
	def(&o.KeepFor, 7*24*time.Hour)
	def(&o.AckWait, 60*time.Second)
	def(&o.Timeout, 2*time.Second)
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Inbox is the durable event store on JetStream.
type Inbox struct {
	opts    Options
	nc      *nats.Conn
	js      jetstream.JetStream
	stream  jetstream.Stream
	keys    jetstream.KeyValue
	events  jetstream.KeyValue
	deliv   jetstream.KeyValue
	seen    jetstream.KeyValue
	lanes   jetstream.KeyValue
	prefix  string
	created time.Time

	mu sync.Mutex // guards the fields below
	// held are the records this process last wrote, with their revision:
	// its later writes of the same attempt are Updates at that revision,
	// so a takeover elsewhere fences them off.
	held   map[uint64]heldRecord
	closed bool
	// dispatcher, once made, holds the events this process runs: Finish
	// acks them.
	dispatcher *Dispatcher
}

type heldRecord struct {
	rec record
	rev uint64
	// fenced: another attempt took the event over; every later write of
	// this one fails until this process starts the event again.
	fenced bool
}

// record is an event's value in gateway-events: the entry without its
// deliveries, which have a bucket of their own.
type record struct {
	Event       queue.Event `json:"event"`
	State       State       `json:"state"`
	Attempts    int         `json:"attempts,omitempty"`
	ToolStarted bool        `json:"tool_started,omitempty"`
	Reply       string      `json:"reply,omitempty"`
	Files       []string    `json:"files,omitempty"`
	Updated     time.Time   `json:"updated"`
}

// Open connects the inbox to JetStream over nc, creating or checking the
// stream, consumers and buckets. The Inbox does not own nc.
func Open(ctx context.Context, nc *nats.Conn, opts Options) (*Inbox, error) {
	opts = opts.withDefaults()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	in := &Inbox{opts: opts, nc: nc, js: js, held: map[uint64]heldRecord{}}
	kvs := map[string]jetstream.KeyValue{}
	for _, cfg := range opts.bucketConfigs() {
		kv, err := ensureBucket(ctx, js, cfg)
		if err != nil {
			return nil, err
		}
		kvs[cfg.Bucket] = kv
	}
	in.keys, in.events, in.deliv, in.seen = kvs[BucketKeys], kvs[BucketEvents], kvs[BucketDelivered], kvs[BucketSeen]
	in.lanes = kvs[BucketLanes]
	if in.prefix, in.created, err = ensureMeta(ctx, kvs[BucketMeta], opts); err != nil {
		return nil, err
	}
	if in.stream, err = ensureStream(ctx, js, opts); err != nil {
		return nil, err
	}
	if err := ensureConsumers(ctx, in.stream, opts); err != nil {
		return nil, err
	}
	return in, nil
}

// ErrNotSetUp is what Check says of a stream or bucket that does not exist
// yet: the first Open creates it.
var ErrNotSetUp = errors.New("not created yet (the first gateway run with NATS_URL creates it)")

// Check looks at the stream, its consumers and the buckets as Open would,
// and reports the first that is missing (ErrNotSetUp) or differs from
// opts, changing nothing: what doctor says before a start.
func Check(ctx context.Context, nc *nats.Conn, opts Options) error {
	opts = opts.withDefaults()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	for _, cfg := range opts.bucketConfigs() {
		if _, err := setupBucket(ctx, js, cfg, false); err != nil {
			return err
		}
	}
	s, err := setupStream(ctx, js, opts, false)
	if err != nil {
		return err
	}
	return setupConsumers(ctx, s, opts, false)
}

// ctx is the context of a method without one.
func (in *Inbox) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), in.opts.Timeout)
}

func (in *Inbox) checkOpen() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		return ErrClosed
	}
	return nil
}

// LastDelivery reports whether d is the last time the server hands its
// event out: its holder must finish it, whatever its record says.
func (in *Inbox) LastDelivery(d Delivery) bool {
	return d.Deliveries >= uint64(in.opts.MaxDeliver)
}

// Subject is the subject an event is published on.
func (in *Inbox) Subject(e queue.Event) string { return subject(laneOf(e), in.opts.Partitions) }

// laneOf is the event's lane as the queue computes it.
func laneOf(e queue.Event) string {
	switch {
	case e.Lane != "":
		return e.Lane
	case e.ChannelID != "":
		return e.ChannelID
	}
	return queue.SystemLane
}

// keyName is a source key as a KV key: its SHA-256, since KV keys allow
// a small alphabet.
func keyName(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// Add records an accepted event, as the embedded inbox's Add does: e.ID,
// when set, must be LastID+1, and the event becomes that stream sequence
// (the publish expects the stream's last sequence to be e.ID-1, so a
// stream that moved on refuses it and nothing is stored). A zero e.ID
// takes the next sequence, which Append returns. A Key accepted before is
// ErrDuplicate. seen are recorded after the event is stored.
func (in *Inbox) Add(e queue.Event, seen ...Seen) error {
	ctx, cancel := in.ctx()
	defer cancel()
	_, err := in.add(ctx, e, e.ID, seen)
	return err
}

// Append records an accepted event and returns it with its id (the
// stream sequence) and lane set. Its e.ID is ignored. A Key accepted
// before is ErrDuplicate; a full lane or stream is a *queue.FullError.
func (in *Inbox) Append(ctx context.Context, e queue.Event, seen ...Seen) (queue.Event, error) {
	return in.add(ctx, e, 0, seen)
}

// storeFailed is the JetStream error code of a publish a limit refused.
const storeFailed jetstream.ErrorCode = 10077

func (in *Inbox) add(ctx context.Context, e queue.Event, id uint64, seen []Seen) (queue.Event, error) {
	if err := in.checkOpen(); err != nil {
		return queue.Event{}, err
	}
	e.Lane, e.ID = laneOf(e), 0
	if e.Time.IsZero() {
		e.Time = in.opts.Now()
	}
	if e.Key != "" {
		// The cheap refusal: a key older than the duplicate window.
		_, err := in.keys.Get(ctx, keyName(e.Key))
		if err == nil {
			return queue.Event{}, fmt.Errorf("event key %q: %w", e.Key, ErrDuplicate)
		}
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			return queue.Event{}, fmt.Errorf("check the event's key: %w", err)
		}
	}
	body, err := json.Marshal(e)
	if err != nil {
		return queue.Event{}, fmt.Errorf("encode the event: %w", err)
	}
	subj := in.Subject(e)
	var opts []jetstream.PublishOpt
	if e.Key != "" {
		opts = append(opts, jetstream.WithMsgID(e.Key))
	}
	if id != 0 {
		opts = append(opts, jetstream.WithExpectLastSequence(id-1))
	}
	ack, err := in.js.PublishMsg(ctx, &nats.Msg{Subject: subj, Data: body}, opts...)
	if err != nil {
		return queue.Event{}, in.publishError(ctx, err, id, subj)
	}
	if ack.Duplicate {
		return queue.Event{}, fmt.Errorf("event key %q: %w", e.Key, ErrDuplicate)
	}
	e.ID = ack.Sequence
	if e.Key != "" {
		if err := in.claimKey(ctx, e); err != nil {
			return queue.Event{}, err
		}
	}
	in.ring(partition(e.Lane, in.opts.Partitions))
	// The event is stored: a seen mark lost here only makes the catch-up
	// read a message again, and its key refuses it then.
	_ = in.see(ctx, seen)
	return e, nil
}

// claimKey records the event's key after its PubAck. If another event
// holds the key (two intakes took the same source event beyond the
// duplicate window), the first one stays and this one is taken back out.
// A key that cannot be written leaves the event accepted: the worker's
// check at the start writes it.
func (in *Inbox) claimKey(ctx context.Context, e queue.Event) error {
	id := strconv.FormatUint(e.ID, 10)
	_, err := in.keys.Create(ctx, keyName(e.Key), []byte(id))
	if !errors.Is(err, jetstream.ErrKeyExists) {
		return nil
	}
	if held, gerr := in.keys.Get(ctx, keyName(e.Key)); gerr == nil && string(held.Value()) == id {
		return nil
	}
	if err := in.stream.DeleteMsg(ctx, e.ID); err != nil && !gone(err) {
		return fmt.Errorf("event key %q was accepted meanwhile, and event %d could not be taken back: %w", e.Key, e.ID, err)
	}
	return fmt.Errorf("event key %q: %w", e.Key, ErrDuplicate)
}

// publishError turns a refused publish into the queue's errors.
func (in *Inbox) publishError(ctx context.Context, err error, id uint64, subj string) error {
	var jerr jetstream.JetStreamError
	if errors.As(err, &jerr) && jerr.APIError() != nil {
		switch jerr.APIError().ErrorCode {
		case jetstream.JSErrCodeStreamWrongLastSequence, jetstream.JSErrCodeStreamWrongLastSequenceConstant:
			return fmt.Errorf("event id %d is not the stream's next sequence: %w", id, err)
		case storeFailed:
			// Which limit refused it: the lane's if it holds its maximum.
			if in.opts.MaxPerLane > 0 {
				if info, ierr := in.stream.Info(ctx, jetstream.WithSubjectFilter(subj)); ierr == nil {
					if n := info.State.Subjects[subj]; n >= uint64(in.opts.MaxPerLane) {
						return &queue.FullError{Depth: int(n), Lane: true}
					}
					if in.opts.MaxDepth > 0 && info.State.Msgs >= uint64(in.opts.MaxDepth) {
						return &queue.FullError{Depth: int(info.State.Msgs)}
					}
				}
			} else if in.opts.MaxDepth > 0 {
				return &queue.FullError{Depth: in.opts.MaxDepth}
			}
		}
	}
	return fmt.Errorf("store the event: %w", err)
}

// Started records that the event's turn starts: Running, one more
// attempt. It takes the event over from any earlier attempt, which is
// fenced off from then on.
func (in *Inbox) Started(id uint64) error {
	ctx, cancel := in.ctx()
	defer cancel()
	_, err := in.Start(ctx, id)
	return err
}

// Start is Started with a context; it returns the entry as the new
// attempt begins it (what earlier attempts left: reply, deliveries).
func (in *Inbox) Start(ctx context.Context, id uint64) (Entry, error) {
	if err := in.checkOpen(); err != nil {
		return Entry{}, err
	}
	for {
		rec, rev, err := in.current(ctx, id)
		if err != nil {
			return Entry{}, err
		}
		rec.State, rec.ToolStarted = inbox.Running, false
		rec.Attempts++
		rev, err = in.write(ctx, id, &rec, rev)
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
			continue // another writer moved first: read again and take over
		}
		if err != nil {
			return Entry{}, fmt.Errorf("record that event %d started: %w", id, err)
		}
		in.hold(id, rec, rev)
		return in.entry(ctx, rec)
	}
}

// current reads the event's record and revision (0 when it has none yet,
// and the event is taken from the stream).
func (in *Inbox) current(ctx context.Context, id uint64) (record, uint64, error) {
	kv, err := in.events.Get(ctx, eventKey(id))
	if err == nil {
		var rec record
		if err := json.Unmarshal(kv.Value(), &rec); err != nil {
			return record{}, 0, fmt.Errorf("event %d's record: %w", id, err)
		}
		return rec, kv.Revision(), nil
	}
	if !errors.Is(err, jetstream.ErrKeyNotFound) {
		return record{}, 0, fmt.Errorf("read event %d: %w", id, err)
	}
	e, err := in.streamEvent(ctx, id)
	if err != nil {
		return record{}, 0, err
	}
	return record{Event: e, State: inbox.Accepted, Updated: e.Time}, 0, nil
}

// streamEvent reads an event from the stream.
func (in *Inbox) streamEvent(ctx context.Context, id uint64) (queue.Event, error) {
	msg, err := in.stream.GetMsg(ctx, id)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return queue.Event{}, fmt.Errorf("%w: %d", ErrUnknown, id)
	}
	if err != nil {
		return queue.Event{}, fmt.Errorf("read event %d: %w", id, err)
	}
	return decodeEvent(msg.Subject, msg.Sequence, msg.Data)
}

func decodeEvent(subj string, seq uint64, data []byte) (queue.Event, error) {
	var e queue.Event
	if err := json.Unmarshal(data, &e); err != nil {
		return queue.Event{}, fmt.Errorf("event %d: %w", seq, err)
	}
	lane, err := laneOfSubject(subj)
	if err != nil {
		return queue.Event{}, fmt.Errorf("event %d: %w", seq, err)
	}
	e.ID, e.Lane = seq, lane
	return e, nil
}

func eventKey(id uint64) string { return "ev." + strconv.FormatUint(id, 10) }

// write stores rec at revision rev (Create when 0) and returns the new
// revision.
func (in *Inbox) write(ctx context.Context, id uint64, rec *record, rev uint64) (uint64, error) {
	rec.Updated = in.opts.Now().UTC()
	b, err := json.Marshal(rec)
	if err != nil {
		return 0, fmt.Errorf("encode event %d's record: %w", id, err)
	}
	if rev == 0 {
		return in.events.Create(ctx, eventKey(id), b)
	}
	return in.events.Update(ctx, eventKey(id), b, rev)
}

func (in *Inbox) hold(id uint64, rec record, rev uint64) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.held[id] = heldRecord{rec: rec, rev: rev}
}

// change applies f to the event's record. A record this process holds is
// updated at the revision it wrote, and a conflict is ErrFenced; one it
// does not hold (written by an earlier run) is read, changed and written
// at the revision read, again on a conflict. f returns false when there
// is nothing to write.
func (in *Inbox) change(ctx context.Context, id uint64, what string, f func(*record) bool) error {
	if err := in.checkOpen(); err != nil {
		return err
	}
	in.mu.Lock()
	h, held := in.held[id]
	in.mu.Unlock()
	if held && h.fenced {
		return fmt.Errorf("record %s of event %d: %w", what, id, ErrFenced)
	}
	for {
		rec, rev := h.rec, h.rev
		if !held {
			var err error
			if rec, rev, err = in.current(ctx, id); err != nil {
				return err
			}
		}
		if !f(&rec) {
			return nil
		}
		newRev, err := in.write(ctx, id, &rec, rev)
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists) {
			if held {
				in.mu.Lock()
				in.held[id] = heldRecord{fenced: true}
				in.mu.Unlock()
				return fmt.Errorf("record %s of event %d: %w", what, id, ErrFenced)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("record %s of event %d: %w", what, id, err)
		}
		if rec.State.Finished() {
			in.mu.Lock()
			delete(in.held, id)
			in.mu.Unlock()
		} else {
			in.hold(id, rec, newRev)
		}
		return nil
	}
}

// ToolStarted records that the current attempt started a tool; once per
// attempt is written.
func (in *Inbox) ToolStarted(id uint64) error {
	ctx, cancel := in.ctx()
	defer cancel()
	return in.change(ctx, id, "the tool start", func(r *record) bool {
		if r.ToolStarted {
			return false
		}
		r.ToolStarted = true
		return true
	})
}

// Replied records the event's reply before it is delivered.
func (in *Inbox) Replied(id uint64, text string, files ...string) error {
	ctx, cancel := in.ctx()
	defer cancel()
	return in.change(ctx, id, "the reply", func(r *record) bool {
		r.Reply, r.Files = text, files
		return true
	})
}

// Delivered records that message chunk of the reply is on Discord.
func (in *Inbox) Delivered(id uint64, chunk int, messageID string) error {
	if err := in.checkOpen(); err != nil {
		return err
	}
	ctx, cancel := in.ctx()
	defer cancel()
	if _, err := in.events.Get(ctx, eventKey(id)); errors.Is(err, jetstream.ErrKeyNotFound) {
		if _, err := in.streamEvent(ctx, id); err != nil {
			return err
		}
	}
	b, _ := json.Marshal(delivery{Message: messageID})
	if _, err := in.deliv.Put(ctx, deliveryKey(id, chunk), b); err != nil {
		return fmt.Errorf("record delivery %d of event %d: %w", chunk, id, err)
	}
	return nil
}

type delivery struct {
	Message string `json:"message"`
}

func deliveryKey(id uint64, chunk int) string {
	return strconv.FormatUint(id, 10) + "." + strconv.Itoa(chunk)
}

// Finish records how the event ended (s must be an end state) and takes
// it out of the stream, which frees its place in the limits.
func (in *Inbox) Finish(id uint64, s State) error {
	if !s.Finished() {
		return fmt.Errorf("jsinbox: finish event %d as %s: not an end state", id, s)
	}
	ctx, cancel := in.ctx()
	defer cancel()
	in.mu.Lock()
	d := in.dispatcher
	in.mu.Unlock()
	if err := in.change(ctx, id, "the end", func(r *record) bool {
		r.State = s
		return true
	}); err != nil {
		if errors.Is(err, ErrFenced) && d != nil {
			// Handed out again elsewhere: this delivery is not ours to
			// ack or give back any more.
			d.take(id)
		}
		return err
	}
	if d != nil {
		// The event was handed out here: the ack takes it out of the
		// stream and lets the partition hand out its next one.
		if held, err := d.acked(ctx, id); held {
			return err
		}
	}
	if err := in.stream.DeleteMsg(ctx, id); err != nil && !gone(err) {
		return fmt.Errorf("take finished event %d out of the stream: %w", id, err)
	}
	return nil
}

// gone reports whether a delete failed because the message is not in the
// stream any more (an ack of its delivery took it out first): the server
// says so with the not-found code, or with the generic deletion failure
// whose description is "no message found".
func gone(err error) bool {
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return true
	}
	var api *jetstream.APIError
	return errors.As(err, &api) && api.ErrorCode == jsErrCodeDeleteFailed && strings.Contains(api.Description, "no message found")
}

// jsErrCodeDeleteFailed is the server's JSStreamMsgDeleteFailedF.
const jsErrCodeDeleteFailed jetstream.ErrorCode = 10057

// Get returns the entry of event id; false when the inbox does not hold it
// or the server could not be read (Lookup tells which).
func (in *Inbox) Get(id uint64) (Entry, bool) {
	ctx, cancel := in.ctx()
	defer cancel()
	e, err := in.Lookup(ctx, id)
	return e, err == nil
}

// Lookup returns the entry of event id, or ErrUnknown.
func (in *Inbox) Lookup(ctx context.Context, id uint64) (Entry, error) {
	rec, _, err := in.current(ctx, id)
	if err != nil {
		return Entry{}, err
	}
	return in.entry(ctx, rec)
}

// entry completes a record with its deliveries.
func (in *Inbox) entry(ctx context.Context, rec record) (Entry, error) {
	e := Entry{
		Event: rec.Event, State: rec.State, Attempts: rec.Attempts, ToolStarted: rec.ToolStarted,
		Reply: rec.Reply, Files: rec.Files, Updated: rec.Updated,
	}
	prefix := strconv.FormatUint(rec.Event.ID, 10) + "."
	w, err := in.deliv.Watch(ctx, prefix+"*", jetstream.IgnoreDeletes())
	if err != nil {
		return Entry{}, fmt.Errorf("read the deliveries of event %d: %w", rec.Event.ID, err)
	}
	defer w.Stop()
	for {
		select {
		case kv := <-w.Updates():
			if kv == nil { // the end of what is stored
				return e, nil
			}
			chunk, err := strconv.Atoi(strings.TrimPrefix(kv.Key(), prefix))
			var d delivery
			if err != nil || json.Unmarshal(kv.Value(), &d) != nil {
				continue
			}
			if e.Delivered == nil {
				e.Delivered = map[int]string{}
			}
			e.Delivered[chunk] = d.Message
		case <-ctx.Done():
			return Entry{}, fmt.Errorf("read the deliveries of event %d: %w", rec.Event.ID, ctx.Err())
		}
	}
}

// Unfinished returns the entries accepted or running, oldest first; nil
// when the server could not be read (List tells why).
func (in *Inbox) Unfinished() []Entry {
	ctx, cancel := in.ctx()
	defer cancel()
	out, _ := in.List(ctx)
	return out
}

// List returns the entries accepted or running, oldest first: every event
// still in the stream, with its record when it has one.
func (in *Inbox) List(ctx context.Context) ([]Entry, error) {
	var out []Entry
	for seq := uint64(1); ; {
		msg, err := in.stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(streamSubjects))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("list the events: %w", err)
		}
		seq = msg.Sequence + 1
		en, err := in.Lookup(ctx, msg.Sequence)
		if errors.Is(err, ErrUnknown) {
			continue // finished meanwhile
		}
		if err != nil {
			return nil, err
		}
		if !en.State.Finished() {
			out = append(out, en)
		}
	}
	// sort.Slice, not slices.SortFunc: each struct type given to the generic
	// sort compiles to ~12 KB of its own code.
	sort.Slice(out, func(i, j int) bool { return out[i].Event.ID < out[j].Event.ID })
	return out, nil
}

// LastID is the highest event id ever added (the stream's last sequence);
// 0 when the server could not be read.
func (in *Inbox) LastID() uint64 {
	ctx, cancel := in.ctx()
	defer cancel()
	info, err := in.stream.Info(ctx)
	if err != nil {
		return 0
	}
	return info.State.LastSeq
}

// NoncePrefix is a random string chosen when the buckets were made and
// kept for good: nonces built from it and event ids never repeat.
func (in *Inbox) NoncePrefix() string { return in.prefix }

// Created is when the buckets were first made.
func (in *Inbox) Created() time.Time { return in.created }

// Stats describe the inbox: the stream's bytes, and the events kept by
// state (a scan of every record: for doctor, not for every request).
func (in *Inbox) Stats() Stats {
	ctx, cancel := in.ctx()
	defer cancel()
	var s Stats
	info, err := in.stream.Info(ctx)
	if err != nil {
		return s
	}
	s.Bytes = int64(info.State.Bytes)
	states := map[uint64]State{}
	w, err := in.events.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return s
	}
	defer w.Stop()
scan:
	for {
		select {
		case kv := <-w.Updates():
			if kv == nil {
				break scan
			}
			var r record
			if json.Unmarshal(kv.Value(), &r) == nil {
				states[r.Event.ID] = r.State
			}
		case <-ctx.Done():
			return s
		}
	}
	// Events in the stream without a record have not started.
	waiting := int(info.State.Msgs)
	for _, st := range states {
		switch st {
		case inbox.Running:
			s.Running++
			waiting--
		case inbox.Failed:
			s.Failed++
		}
	}
	s.Waiting = max(waiting, 0)
	s.Entries = len(states) + s.Waiting
	return s
}

// Close stops the inbox; it does not close the connection.
func (in *Inbox) Close() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.closed = true
	return nil
}

const prefixAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

func newPrefix() string {
	b := make([]byte, 8)
	rand.Read(b)
	for i := range b {
		b[i] = prefixAlphabet[int(b[i])%len(prefixAlphabet)]
	}
	return string(b)
}
