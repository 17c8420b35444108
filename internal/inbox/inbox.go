// Package inbox is the gateway's durable event store (DESIGN decision 14):
// every event is written here before anything acknowledges it, moves
// through its states here, and is taken up from here after a crash.
//
// The store is one append-only log file of checksummed records. Concurrent
// callers share fsyncs (group commit): while one batch is being synced,
// later records collect and the next sync covers them all. The records a
// restart depends on (Add, Replied, ToolStarted, and an end without a
// delivered reply) are fsync'd before the call returns; the others
// (Started, Delivered, an answered event's Finish) ride along: they are
// written with the next batch, or by the log's flusher within
// lazyFlushDelay, and the call does not wait. Losing one of those to a
// crash repeats only what is safe to repeat: a turn that had not started a
// tool, or a message posted again under its enforced nonce. The log keeps
// its order, so a record on disk implies every record before it is. A
// record torn by a crash can only be the last one; Open cuts it off. The log is rewritten from memory (compacted)
// when it has grown to several times what it holds, dropping finished
// events beyond the retention (Options.KeepFor, KeepMax).
//
// An Inbox is safe for concurrent use. After a write fails (a full disk)
// it refuses every further write with that error: nothing is acknowledged
// that is not on disk.
package inbox

import (
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/agentgateway/gateway/internal/queue"
)

// State is where an event is in its life.
type State uint8

const (
	// Accepted: durably recorded, not started.
	Accepted State = iota + 1
	// Running: its turn started (Entry.Attempts times).
	Running
	// Answered: its reply was delivered, or there was nothing to post.
	Answered
	// Failed: it ended with an error the user was told about, or it is a
	// dead letter.
	Failed
	// Dropped: dropped on request (/claude-stop) before it ran.
	Dropped
)

func (s State) String() string {
	switch s {
	case Accepted:
		return "accepted"
	case Running:
		return "running"
	case Answered:
		return "answered"
	case Failed:
		return "failed"
	case Dropped:
		return "dropped"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// Finished reports whether s is an end state.
func (s State) Finished() bool { return s == Answered || s == Failed || s == Dropped }

var (
	// ErrDuplicate is returned by Add for an event whose Key was recorded
	// before (and not yet forgotten by retention).
	ErrDuplicate = errors.New("inbox: event already recorded")
	// ErrUnknown is returned for an event id the inbox does not hold.
	ErrUnknown = errors.New("inbox: unknown event")
)

// Seen is the newest Discord message seen in a channel.
type Seen struct {
	Channel string `json:"channel"`
	Message string `json:"message"`
	Guild   string `json:"guild,omitempty"`
}

// Entry is one event and what became of it.
type Entry struct {
	Event    queue.Event `json:"event"`
	State    State       `json:"state"`
	Attempts int         `json:"attempts,omitempty"`
	// ToolStarted is set once the current attempt started a tool.
	ToolStarted bool `json:"tool_started,omitempty"`
	// Reply is the reply text, kept so a restart can finish delivering it.
	Reply string `json:"reply,omitempty"`
	// Files are the paths of the files the reply carries.
	Files []string `json:"files,omitempty"`
	// Delivered maps a reply's message index to its Discord message id.
	Delivered map[int]string `json:"delivered,omitempty"`
	Updated   time.Time      `json:"updated"`
}

func (e *Entry) clone() Entry {
	c := *e
	c.Delivered = maps.Clone(e.Delivered)
	return c
}

// Options configure an Inbox.
type Options struct {
	// KeepFor and KeepMax bound the finished entries kept (for
	// de-duplication and doctor): at compaction those finished longer ago
	// than KeepFor, and those beyond the newest KeepMax finished ones, are
	// forgotten, with their keys. Unfinished entries are always kept. Zero:
	// 7 days and 10,000.
	KeepFor time.Duration
	KeepMax int
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Stats describe the inbox for doctor and the logs.
type Stats struct {
	Bytes                             int64
	Entries, Waiting, Running, Failed int
	LastCompaction                    time.Time
}

// file is what the inbox writes to; tests replace it to inject failures.
type file interface {
	Write([]byte) (int, error)
	Sync() error
	Close() error
}

// compactMin is the size below which the log is never compacted.
const compactMin = 1 << 20

// Inbox is the durable event store.
type Inbox struct {
	path string
	opts Options

	mu sync.Mutex // guards every field below
	// cond is signalled when a batch has been synced.
	cond    *sync.Cond
	entries map[uint64]*Entry
	// finished counts the finished entries in memory; past KeepMax and a
	// quarter, the oldest are trimmed (trimLocked) without waiting for a
	// compaction, so memory stays bounded however the log grows.
	finished int
	keys     map[string]uint64
	lastID   uint64
	seen     map[string]Seen
	prefix   string
	created  time.Time

	f    file
	size int64
	// compacted is the log's size after the last compaction; the next one
	// is due at four times that (at least compactMin).
	compacted      int64
	lastCompaction time.Time
	// compactDue is set when the log has grown enough to compact; the
	// flusher does it once no record came for compactQuiet (lastStaged).
	compactDue bool
	lastStaged time.Time
	recovered  int64

	// Group commit: buf holds the records of batch gen, not yet written.
	// synced is the number of batches written and synced; failed is the
	// first batch whose write failed, with err.
	buf      []byte
	gen      uint64
	synced   uint64
	flushing bool
	err      error
	failed   uint64
	closed   bool

	// kick wakes the flusher when a record that rides along was staged;
	// stop ends it (Close) and flusherDone says it ended.
	kick        chan struct{}
	stop        chan struct{}
	flusherDone chan struct{}

	// syncHook, if set, is called for each fsync (tests count them).
	syncHook func()
}

// lazyFlushDelay bounds how long a record that rides along waits in memory
// for a batch that is synced anyway before the flusher writes it itself.
const lazyFlushDelay = 10 * time.Millisecond

// Open opens the log at path, creating it (0600, its directory 0700) if
// needed, and replays it.
func Open(path string, opts Options) (*Inbox, error) {
	if opts.KeepFor <= 0 {
		opts.KeepFor = 7 * 24 * time.Hour
	}
	if opts.KeepMax <= 0 {
		opts.KeepMax = 10000
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create the inbox's directory: %w", err)
	}
	in := &Inbox{
		path:    path,
		opts:    opts,
		entries: map[uint64]*Entry{},
		keys:    map[string]uint64{},
		seen:    map[string]Seen{},
	}
	in.cond = sync.NewCond(&in.mu)
	in.kick, in.stop, in.flusherDone = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read the inbox: %w", err)
	}
	good := in.replay(data)
	in.recovered = int64(len(data) - good)
	if good == 0 {
		// New, or not even its header survived: start a fresh log.
		in.prefix, in.created = newPrefix(), opts.Now().UTC()
		if err := in.rewrite(); err != nil {
			return nil, err
		}
		go in.flusher()
		return in, nil
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the inbox: %w", err)
	}
	if in.recovered > 0 {
		if err := f.Truncate(int64(good)); err != nil {
			f.Close()
			return nil, fmt.Errorf("cut the torn end off the inbox: %w", err)
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, fmt.Errorf("sync the inbox: %w", err)
		}
	}
	if _, err := f.Seek(int64(good), 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("open the inbox: %w", err)
	}
	in.f, in.size, in.compacted = f, int64(good), int64(good)
	if in.size > compactMin && in.size > 2*in.freshSize() {
		if err := in.rewrite(); err != nil {
			f.Close()
			return nil, err
		}
	}
	go in.flusher()
	return in, nil
}

// Inspect reads the log at path without changing it (for doctor, while a
// gateway may be running): its stats and how many bytes at its end do not
// replay (a torn record the next Open cuts off, or a write in progress).
func Inspect(path string) (Stats, int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Stats{}, 0, err
	}
	in := &Inbox{entries: map[uint64]*Entry{}, keys: map[string]uint64{}, seen: map[string]Seen{}}
	good := in.replay(data)
	in.size = int64(good)
	return in.Stats(), int64(len(data) - good), nil
}

// replay applies the records of data and returns how many bytes were good.
func (in *Inbox) replay(data []byte) int {
	off := 0
	for off < len(data) {
		r, n, err := decode(data[off:])
		if err != nil {
			break
		}
		if off == 0 {
			if r.T != recHeader || r.Version != formatVersion || r.Prefix == "" {
				return 0
			}
			in.prefix, in.created = r.Prefix, r.At
		} else if in.apply(r) != nil {
			break
		}
		off += n
	}
	return off
}

// apply changes the state as r says. Live mutations go through it too, so
// what is replayed is exactly what was done.
func (in *Inbox) apply(r record) error {
	switch r.T {
	case recState:
		in.lastID = max(in.lastID, r.LastID)
		in.raiseSeen(r.Seen)
		return nil
	case recEntry:
		if r.Entry == nil || r.Entry.Event.ID == 0 {
			return errTorn
		}
		e := r.Entry.clone()
		if old := in.entries[e.Event.ID]; old != nil && old.State.Finished() {
			in.finished--
		}
		if e.State.Finished() {
			in.finished++
		}
		in.entries[e.Event.ID] = &e
		if e.Event.Key != "" {
			in.keys[e.Event.Key] = e.Event.ID
		}
		in.lastID = max(in.lastID, e.Event.ID)
		return nil
	case recAdd:
		if r.Event == nil || r.Event.ID <= in.lastID {
			return fmt.Errorf("event id %d is not above %d", eventID(r.Event), in.lastID)
		}
		if r.Event.Key != "" {
			if _, dup := in.keys[r.Event.Key]; dup {
				return ErrDuplicate
			}
			in.keys[r.Event.Key] = r.Event.ID
		}
		in.entries[r.Event.ID] = &Entry{Event: *r.Event, State: Accepted, Updated: r.At}
		in.lastID = r.Event.ID
		in.raiseSeen(r.Seen)
		return nil
	case recSeen:
		in.raiseSeen(r.Seen)
		return nil
	}
	e := in.entries[r.ID]
	if e == nil {
		return fmt.Errorf("%w: %d", ErrUnknown, r.ID)
	}
	switch r.T {
	case recStart:
		e.State, e.ToolStarted = Running, false
		e.Attempts++
	case recTool:
		e.ToolStarted = true
	case recReply:
		e.Reply, e.Files = r.Text, r.Files
	case recDeliver:
		if e.Delivered == nil {
			e.Delivered = map[int]string{}
		}
		e.Delivered[r.Chunk] = r.Message
	case recFinish:
		if !r.State.Finished() {
			return fmt.Errorf("%s is not an end state", r.State)
		}
		if !e.State.Finished() {
			in.finished++
		}
		e.State = r.State
	default:
		return fmt.Errorf("unknown record type %q", r.T)
	}
	e.Updated = r.At
	return nil
}

func eventID(e *queue.Event) uint64 {
	if e == nil {
		return 0
	}
	return e.ID
}

// raiseSeen records newer messages; a channel's newest never goes back.
func (in *Inbox) raiseSeen(seen []Seen) {
	for _, s := range seen {
		if s.Channel == "" || s.Message == "" {
			continue
		}
		if old, ok := in.seen[s.Channel]; ok && !newer(s.Message, old.Message) {
			continue
		}
		in.seen[s.Channel] = s
	}
}

// newer compares Discord snowflakes as numbers ("10" is newer than "9").
func newer(a, b string) bool {
	x, okA := new(big.Int).SetString(a, 10)
	y, okB := new(big.Int).SetString(b, 10)
	if !okA || !okB {
		return okA && !okB
	}
	return x.Cmp(y) > 0
}

// mutate checks and applies r and makes it durable.
func (in *Inbox) mutate(r record) error {
	in.mu.Lock()
	if err := in.stageLocked(r); err != nil {
		in.mu.Unlock()
		return err
	}
	return in.commitLocked(in.gen)
}

// mutateLazily checks and applies r and hands it to the next batch without
// waiting for it: a record that rides along.
func (in *Inbox) mutateLazily(r record) error {
	in.mu.Lock()
	err := in.stageLocked(r)
	in.mu.Unlock()
	if err == nil {
		select {
		case in.kick <- struct{}{}:
		default:
		}
	}
	return err
}

// stageLocked checks r, applies it and appends it to the batch being
// collected (in.gen).
func (in *Inbox) stageLocked(r record) error {
	r.At = in.opts.Now().UTC()
	if err := in.writableLocked(); err != nil {
		return err
	}
	b, err := encode(r)
	if err != nil {
		return err
	}
	if err := in.apply(r); err != nil {
		return err
	}
	in.buf = append(in.buf, b...)
	in.lastStaged = time.Now()
	if r.T == recFinish && in.finished > in.opts.KeepMax+in.opts.KeepMax/4 {
		in.trimLocked(in.opts.KeepMax)
	}
	return nil
}

// flusher writes the records that ride along when no caller's batch took
// them within lazyFlushDelay.
func (in *Inbox) flusher() {
	defer close(in.flusherDone)
	for {
		select {
		case <-in.stop:
			return
		case <-in.kick:
		}
		select {
		case <-in.stop:
			return
		case <-time.After(lazyFlushDelay):
		}
		in.mu.Lock()
		if len(in.buf) > 0 && !in.flushing && !in.closed && in.err == nil {
			in.flushLocked(false)
		}
		due := in.compactDue
		in.mu.Unlock()
		for due {
			select {
			case <-in.stop:
				return
			case <-time.After(compactQuiet):
			}
			in.mu.Lock()
			if !in.flushing && !in.closed && in.err == nil {
				if time.Since(in.lastStaged) >= compactQuiet {
					in.flushLocked(true)
				} else if len(in.buf) > 0 {
					in.flushLocked(false)
				}
			}
			due = in.compactDue && !in.closed && in.err == nil
			in.mu.Unlock()
		}
	}
}

// compactQuiet is how long no record may have come before a due
// compaction runs; compactHard (or 16 times the last compacted size) is
// the size at which it runs whatever comes.
const (
	compactQuiet = 200 * time.Millisecond
	compactHard  = 64 << 20
)

func (in *Inbox) writableLocked() error {
	switch {
	case in.closed:
		return errors.New("inbox: closed")
	case in.err != nil:
		return in.err
	}
	return nil
}

// commitLocked waits until batch mine (the one holding the caller's
// record) is synced, leading the write itself when no other caller is. It
// is called with mu held and returns with it released.
func (in *Inbox) commitLocked(mine uint64) error {
	for in.synced <= mine {
		if in.err != nil && in.failed <= mine {
			break
		}
		if in.flushing {
			in.cond.Wait()
			continue
		}
		in.flushLocked(false)
	}
	var err error
	if in.err != nil && in.failed <= mine {
		err = in.err
	}
	in.mu.Unlock()
	return err
}

// flushLocked writes and syncs the current batch, or compacts (which
// covers it) when compact is set or the log has grown enough; mu is
// released while the batch is written.
func (in *Inbox) flushLocked(compact bool) {
	in.flushing = true
	batch := in.gen
	in.gen++
	var err error
	size := in.size + int64(len(in.buf))
	if !compact && size > max(compactMin, 4*in.compacted) {
		// Due: the flusher compacts at the next quiet moment, so that
		// the rewrite does not stall the writes of a busy moment; past
		// the hard limit it is done now.
		compact = size > max(compactHard, 16*in.compacted)
		if !compact && !in.compactDue {
			in.compactDue = true
			select {
			case in.kick <- struct{}{}:
			default:
			}
		}
	}
	if compact {
		in.buf = nil
		in.compactDue = false
		err = in.rewriteLocked()
	} else {
		data := in.buf
		in.buf = nil
		f := in.f
		in.mu.Unlock()
		_, err = f.Write(data)
		if err == nil {
			err = f.Sync()
			if in.syncHook != nil {
				in.syncHook()
			}
		}
		in.mu.Lock()
		if err == nil {
			in.size += int64(len(data))
		}
	}
	in.flushing = false
	if err != nil && in.err == nil {
		in.err, in.failed = fmt.Errorf("write the inbox: %w", err), batch
		if compact {
			in.err = err // rewriteLocked's errors say what failed
		}
	}
	in.synced = batch + 1
	in.cond.Broadcast()
}

// Add records an accepted event. e.ID must be above LastID. A non-empty
// e.Key recorded before returns ErrDuplicate and writes nothing. seen is
// recorded in the same record: the newest messages the event proves seen.
func (in *Inbox) Add(e queue.Event, seen ...Seen) error {
	commit, err := in.Stage(e, seen...)
	if err != nil {
		return err
	}
	return commit()
}

// Stage records an accepted event as Add does, in two steps: the record is
// checked, applied and placed in the batch being collected before Stage
// returns (so the next Stage may follow it with a higher id), and commit
// waits until that batch is on disk. Callers that number events under a
// lock stage under it and commit outside it, so that the events of many
// callers share one fsync.
func (in *Inbox) Stage(e queue.Event, seen ...Seen) (commit func() error, err error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if err := in.stageLocked(record{T: recAdd, Event: &e, Seen: seen}); err != nil {
		return nil, err
	}
	mine := in.gen
	return func() error {
		in.mu.Lock()
		return in.commitLocked(mine)
	}, nil
}

// Started records that the event's turn starts: Running, one more attempt.
// It rides along: a crash before the next batch leaves the event accepted,
// and it runs again (it had not started a tool: ToolStarted is synced).
func (in *Inbox) Started(id uint64) error { return in.mutateLazily(record{T: recStart, ID: id}) }

// ToolStarted records that the current attempt started a tool; once per
// attempt is written.
func (in *Inbox) ToolStarted(id uint64) error {
	in.mu.Lock()
	e := in.entries[id]
	done := e != nil && e.ToolStarted
	in.mu.Unlock()
	if done {
		return nil
	}
	return in.mutate(record{T: recTool, ID: id})
}

// Replied records the event's reply before it is delivered.
func (in *Inbox) Replied(id uint64, text string, files ...string) error {
	return in.mutate(record{T: recReply, ID: id, Text: text, Files: files})
}

// Delivered records that message chunk of the reply is on Discord. It
// rides along: after a crash before the next batch the chunk is posted
// again with the same nonce, which Discord answers with the message it
// already has.
func (in *Inbox) Delivered(id uint64, chunk int, messageID string) error {
	return in.mutateLazily(record{T: recDeliver, ID: id, Chunk: chunk, Message: messageID})
}

// Finish records how the event ended; s must be an end state. An event
// answered with a recorded reply finishes lazily (a restart before the
// next batch finds its reply and delivers what is missing, under the same
// nonces); every other end is synced, so that a turn that ended is not run
// again.
func (in *Inbox) Finish(id uint64, s State) error {
	if !s.Finished() {
		return fmt.Errorf("inbox: finish event %d as %s: not an end state", id, s)
	}
	r := record{T: recFinish, ID: id, State: s}
	in.mu.Lock()
	e := in.entries[id]
	lazy := s == Answered && e != nil && (e.Reply != "" || len(e.Files) > 0)
	in.mu.Unlock()
	if lazy {
		return in.mutateLazily(r)
	}
	return in.mutate(r)
}

// See records the newest messages seen without an event; none lowers a
// channel's newest.
func (in *Inbox) See(seen ...Seen) error {
	in.mu.Lock()
	var news []Seen
	for _, s := range seen {
		if old, ok := in.seen[s.Channel]; !ok || newer(s.Message, old.Message) {
			news = append(news, s)
		}
	}
	in.mu.Unlock()
	if len(news) == 0 {
		return nil
	}
	return in.mutate(record{T: recSeen, Seen: news})
}

// Get returns a copy of the entry of event id.
func (in *Inbox) Get(id uint64) (Entry, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	e := in.entries[id]
	if e == nil {
		return Entry{}, false
	}
	return e.clone(), true
}

// Unfinished returns the entries accepted or running, oldest first.
func (in *Inbox) Unfinished() []Entry {
	in.mu.Lock()
	defer in.mu.Unlock()
	var out []Entry
	for _, e := range in.entries {
		if !e.State.Finished() {
			out = append(out, e.clone())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Event.ID < out[j].Event.ID })
	return out
}

// LastID is the highest event id ever added.
func (in *Inbox) LastID() uint64 {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.lastID
}

// LastSeen returns the newest message seen per channel.
func (in *Inbox) LastSeen() map[string]Seen {
	in.mu.Lock()
	defer in.mu.Unlock()
	return maps.Clone(in.seen)
}

// NoncePrefix is a random string chosen when the log was created and kept
// for good: nonces built from it and event ids never repeat.
func (in *Inbox) NoncePrefix() string { return in.prefix }

// Created is when the log was first created (kept by compaction): the
// gateway has been watching Discord since then.
func (in *Inbox) Created() time.Time { return in.created }

// Err returns why the inbox refuses writes (closed, or a write failed:
// a full disk), or nil when it takes them. It does not touch the disk.
func (in *Inbox) Err() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.writableLocked()
}

// Recovered is how many bytes of a torn end Open cut off.
func (in *Inbox) Recovered() int64 { return in.recovered }

// Stats describe the inbox.
func (in *Inbox) Stats() Stats {
	in.mu.Lock()
	defer in.mu.Unlock()
	s := Stats{Bytes: in.size, Entries: len(in.entries), LastCompaction: in.lastCompaction}
	for _, e := range in.entries {
		switch e.State {
		case Accepted:
			s.Waiting++
		case Running:
			s.Running++
		case Failed:
			s.Failed++
		}
	}
	return s
}

// Close syncs what is pending and closes the log.
func (in *Inbox) Close() error {
	in.mu.Lock()
	for in.flushing {
		in.cond.Wait()
	}
	if in.closed {
		in.mu.Unlock()
		return nil
	}
	var err error
	if (len(in.buf) > 0 || in.compactDue) && in.err == nil {
		in.flushLocked(in.compactDue)
		err = in.err
	}
	in.closed = true
	f := in.f
	in.mu.Unlock()
	close(in.stop)
	<-in.flusherDone
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// rewrite writes a fresh log from memory (Open's compaction and creation),
// as a batch of its own: the records collected so far are in it.
func (in *Inbox) rewrite() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	for in.flushing {
		in.cond.Wait()
	}
	failed := in.err
	in.flushLocked(true)
	if in.err != failed {
		return in.err
	}
	return nil
}

// rewriteLocked replaces the log with a fresh one holding what is kept:
// the header, LastID and LastSeen, and one record per entry kept. The new
// log is complete on disk (synced, renamed, directory synced) before the
// old one goes.
func (in *Inbox) rewriteLocked() error {
	in.forgetLocked()
	data, err := in.snapshotLocked()
	if err != nil {
		return err
	}
	dir := filepath.Dir(in.path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(in.path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("compact the inbox: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err == nil {
		err = tmp.Sync()
	}
	if err != nil {
		tmp.Close()
		return fmt.Errorf("compact the inbox: %w", err)
	}
	if in.syncHook != nil {
		in.syncHook()
	}
	if err := os.Rename(tmp.Name(), in.path); err != nil {
		tmp.Close()
		return fmt.Errorf("compact the inbox: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	if in.f != nil {
		in.f.Close()
	}
	in.f, in.size, in.compacted = tmp, int64(len(data)), int64(len(data))
	in.lastCompaction = in.opts.Now().UTC()
	return nil
}

// snapshotLocked encodes the log a compaction writes.
func (in *Inbox) snapshotLocked() ([]byte, error) {
	now := in.opts.Now().UTC()
	var out []byte
	add := func(r record) error {
		r.At = now
		b, err := encode(r)
		out = append(out, b...)
		return err
	}
	seen := slices.Collect(maps.Values(in.seen))
	sort.Slice(seen, func(i, j int) bool { return seen[i].Channel < seen[j].Channel })
	header, err := encode(record{T: recHeader, Version: formatVersion, Prefix: in.prefix, At: in.created})
	if err != nil {
		return nil, err
	}
	out = append(out, header...)
	if err := add(record{T: recState, LastID: in.lastID, Seen: seen}); err != nil {
		return nil, err
	}
	for _, id := range slices.Sorted(maps.Keys(in.entries)) {
		if err := add(record{T: recEntry, Entry: in.entries[id]}); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// freshSize is roughly what a compacted log would take, for Open's
// decision to compact.
func (in *Inbox) freshSize() int64 {
	in.mu.Lock()
	defer in.mu.Unlock()
	data, err := in.snapshotLocked()
	if err != nil {
		return 0
	}
	return int64(len(data))
}

// forgetLocked drops the finished entries beyond the retention, with
// their keys (compaction: the new log holds neither).
func (in *Inbox) forgetLocked() {
	in.trimLocked(in.opts.KeepMax)
	for k, id := range in.keys {
		if _, ok := in.entries[id]; !ok {
			delete(in.keys, k) // its entry was trimmed earlier
		}
	}
}

// trimLocked drops from memory the finished entries beyond the newest
// keep ones and those older than KeepFor. Their keys stay until the next
// compaction, because the log still holds their records: a replay must
// refuse what the live inbox refused.
func (in *Inbox) trimLocked(keep int) {
	var finished []*Entry
	for _, e := range in.entries {
		if e.State.Finished() {
			finished = append(finished, e)
		}
	}
	sort.Slice(finished, func(i, j int) bool { return finished[i].Event.ID > finished[j].Event.ID }) // newest first
	cutoff := in.opts.Now().Add(-in.opts.KeepFor)
	kept := 0
	for i, e := range finished {
		if i < keep && !e.Updated.Before(cutoff) {
			kept++
			continue
		}
		delete(in.entries, e.Event.ID)
	}
	in.finished = kept
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
