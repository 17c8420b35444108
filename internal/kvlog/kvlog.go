// Package kvlog shares an append-only log between the processes of one
// gateway on NATS JetStream: every process keeps its own local copy (a
// file it already reads), publishes what it records to a stream, and
// applies what the others publish to its copy.
//
// Each process is an origin with a stable id. Its records are numbered
// 1, 2, 3... (Next) and published in that order to <subject>.<origin>
// with a Nats-Msg-Id of <origin>.<n>, so a republish after a crash is
// dropped by the server within its duplicate window, and beyond it the
// last number in the stream says where to go on (Open asks the local copy
// for its own records after it). Publishing runs in the background: a
// record is never held up by NATS, and while NATS is away the records
// wait, in order, and a log line says the copy is behind.
//
// Following runs an ordered consumer from the stream sequence the local
// copy says it holds (Local.Position) and hands every other origin's
// record to Local.Apply, one at a time, in stream order. The copy stores
// each record's sequence with it, in the same write, so a restart goes on
// from there and nothing is applied twice. A process's own records are
// skipped: they are in its copy already, since a record is published only
// once it is there.
//
// A Log is safe for concurrent use; Publish must be called in the order
// of the numbers Next gave.
package kvlog

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/atomicfile"

	"github.com/agentgateway/gateway/internal/jsinbox"
)

// Headers of a published record.
const (
	HeaderOrigin = "Gateway-Origin"
	HeaderNumber = "Gateway-N"
)

// Record is one of this process's records: its number and its bytes.
type Record struct {
	N    uint64
	Data []byte
}

// Message is a record as the stream holds it.
type Message struct {
	// Seq is its stream sequence: what the local copy stores with it and
	// reports back as its Position.
	Seq    uint64
	Origin string
	N      uint64
	Data   []byte
}

// Local is the process's own copy of the log.
type Local interface {
	// Position is the stream sequence of the last message of another
	// process the copy holds; 0 for none.
	Position() uint64
	// Apply adds another process's record to the copy together with its
	// sequence. An error is logged and the record skipped.
	Apply(m Message) error
	// Own lists this process's records numbered above after, oldest first,
	// at most limit of them (0: all): what was recorded but may not be in
	// the stream. The stream holds after and every record before it, so
	// the copy may forget those.
	Own(after uint64, limit int) ([]Record, error)
}

// Options name the stream and this process.
type Options struct {
	// Stream is the stream's name (GATEWAY_LEDGER).
	Stream string
	// Subject is the prefix of its subjects (gateway.ledger): records go
	// to <Subject>.<Origin>.
	Subject     string
	Description string
	// Replicas of the stream; 0 is 1.
	Replicas int
	// MaxAge is how long the stream keeps a record; 0 is for ever.
	MaxAge time.Duration
	// Origin is this process's id (see LoadOrigin): letters, digits, "-"
	// and "_".
	Origin string
	// MaxPending bounds the records held in memory while they wait for
	// NATS; past it they are left out and read again from the local copy
	// (Local.Own) once the ones before are published. 0 is 10 000.
	MaxPending int
	// Retry is the first wait after a failed publish or a consumer that
	// stopped; it doubles up to 5 s. 0 is 100 ms.
	Retry time.Duration
	Log   zerolog.Logger
}

// duplicateWindow is the stream's; the server's default.
const duplicateWindow = 2 * time.Minute

// publishTimeout bounds one publish: past it the record waits for the
// next try.
const publishTimeout = 5 * time.Second

var originPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`) })

// ErrBadOrigin is returned for an origin that cannot be a subject token.
var ErrBadOrigin = errors.New("invalid origin id")

func (o Options) withDefaults() (Options, error) {
	if !originPattern().MatchString(o.Origin) {
		return o, fmt.Errorf("%w: %q", ErrBadOrigin, o.Origin)
	}
	if o.Stream == "" || o.Subject == "" {
		return o, errors.New("a shared log needs a stream and a subject")
	}
	if o.Replicas <= 0 {
		o.Replicas = 1
	}
	if o.MaxPending <= 0 {
		o.MaxPending = 10_000
	}
	if o.Retry <= 0 {
		o.Retry = 100 * time.Millisecond
	}
	return o, nil
}

// StreamConfig is the stream the options ask for.
func (o Options) StreamConfig() jetstream.StreamConfig {
	replicas := max(o.Replicas, 1)
	return jetstream.StreamConfig{
		Name:        o.Stream,
		Description: o.Description,
		Subjects:    []string{o.Subject + ".*"},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
		Discard:     jetstream.DiscardOld,
		MaxAge:      o.MaxAge,
		MaxMsgs:     -1,
		MaxBytes:    -1,
		Duplicates:  min(duplicateWindow, nonZero(o.MaxAge, duplicateWindow)),
	}
}

func nonZero(d, or time.Duration) time.Duration {
	if d == 0 {
		return or
	}
	return d
}

// ErrNotSetUp is what Check says of a stream that does not exist yet:
// the inbox's own error, so that doctor treats every missing stream and
// bucket alike.
var ErrNotSetUp = jsinbox.ErrNotSetUp

// Ensure creates the stream when it is missing and checks it when present:
// a setting that differs is an error naming it and how to fix it, never a
// silent change.
func Ensure(ctx context.Context, js jetstream.JetStream, o Options) (jetstream.Stream, error) {
	return setup(ctx, js, o, true)
}

// Check checks the stream as Ensure does without creating it: a missing
// stream is ErrNotSetUp (doctor).
func Check(ctx context.Context, js jetstream.JetStream, o Options) error {
	_, err := setup(ctx, js, o, false)
	return err
}

func setup(ctx context.Context, js jetstream.JetStream, o Options, create bool) (jetstream.Stream, error) {
	want := o.StreamConfig()
	s, err := js.Stream(ctx, want.Name)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound) && !create:
		return nil, fmt.Errorf("stream %s: %w", want.Name, ErrNotSetUp)
	case errors.Is(err, jetstream.ErrStreamNotFound):
		s, err = js.CreateStream(ctx, want)
		if err != nil {
			return nil, fmt.Errorf("create stream %s: %w", want.Name, err)
		}
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("look up stream %s: %w", want.Name, err)
	}
	if err := checkStream(s.CachedInfo().Config, want); err != nil {
		return nil, err
	}
	return s, nil
}

// checkStream compares the settings that matter; the fix names the nats
// CLI command, since the gateway never changes an existing stream.
func checkStream(got, want jetstream.StreamConfig) error {
	var m []string
	add := func(format string, args ...any) { m = append(m, fmt.Sprintf(format, args...)) }
	if strings.Join(got.Subjects, ",") != strings.Join(want.Subjects, ",") {
		add("subjects are %q, want %q", got.Subjects, want.Subjects)
	}
	if got.Retention != want.Retention {
		add("retention is %s, want %s", got.Retention, want.Retention)
	}
	if got.Storage != want.Storage {
		add("storage is %s, want %s", got.Storage, want.Storage)
	}
	if got.Replicas != want.Replicas {
		add("replicas are %d, want %d (nats stream edit %s --replicas %d, or set NATS_REPLICAS=%d)",
			got.Replicas, want.Replicas, want.Name, want.Replicas, got.Replicas)
	}
	if got.MaxAge != want.MaxAge {
		add("max age is %s, want %s (nats stream edit %s --max-age %s, or go back to the retention it was made with)",
			age(got.MaxAge), age(want.MaxAge), want.Name, want.MaxAge)
	}
	if len(m) == 0 {
		return nil
	}
	return fmt.Errorf("stream %s does not match this gateway's settings: %s; the gateway does not change an existing stream: change the setting or the stream",
		want.Name, strings.Join(m, "; "))
}

func age(d time.Duration) string {
	if d == 0 {
		return "unlimited"
	}
	return d.String()
}

// LoadOrigin reads this process's origin id from path, making one the
// first time (the host name and a random suffix). It belongs to the
// CONFIG_DIR: a copy of that directory run elsewhere must not keep it, or
// the two processes would skip each other's records.
func LoadOrigin(path, host string) (string, error) {
	data, err := os.ReadFile(path)
	if err == nil {
		id := strings.TrimSpace(string(data))
		if !originPattern().MatchString(id) {
			return "", fmt.Errorf("%w in %s: %q", ErrBadOrigin, "the node id file", id)
		}
		return id, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read the node id: %w", err)
	}
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("make a node id: %w", err)
	}
	host = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '-'
	}, host)
	if len(host) > 40 {
		host = host[:40]
	}
	id := strings.TrimPrefix(host+"-"+hex.EncodeToString(b[:]), "-")
	if _, err := atomicfile.Create(path, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write the node id: %w", err)
	}
	// Another process may have made it first: its id stands.
	return LoadOrigin(path, host)
}

// Log publishes this process's records and follows the others'.
type Log struct {
	js     jetstream.JetStream
	stream jetstream.Stream
	o      Options
	local  Local
	log    zerolog.Logger

	mu sync.Mutex // guards the fields below
	// next is the number the next record gets.
	next uint64
	// queue is what waits to be published, in order.
	queue []Record
	// published is the highest number the stream is known to hold.
	published uint64
	// handed is the highest number given to Publish.
	handed uint64
	// left is set when records were left out of queue (MaxPending): they
	// are read again from the local copy.
	left bool
	// behind is set while the stream lacks records of this process, once
	// a log line said so.
	behind bool
	// position is the follower's: the last sequence applied or skipped.
	position uint64

	wake chan struct{} // a record was queued
}

// Open creates or checks the stream and prepares the log: it asks the
// stream for the last number of this origin and queues the local copy's
// records after it. Run starts publishing and following.
func Open(ctx context.Context, js jetstream.JetStream, o Options, local Local) (*Log, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	s, err := Ensure(ctx, js, o)
	if err != nil {
		return nil, err
	}
	l := &Log{js: js, stream: s, o: o, local: local, wake: make(chan struct{}, 1),
		log: o.Log.With().Str("stream", o.Stream).Logger()}
	last, err := l.lastOwn(ctx)
	if err != nil {
		return nil, err
	}
	own, err := local.Own(last, 0)
	if err != nil {
		return nil, fmt.Errorf("read this process's records for %s: %w", o.Stream, err)
	}
	l.published, l.next = last, last+1
	if n := len(own); n > 0 {
		l.next = max(l.next, own[n-1].N+1)
		if n > o.MaxPending {
			own, l.left = own[:o.MaxPending], true
		}
		l.queue = own
		l.log.Info().Int("records", n).Msg("records this process made while NATS was away are published now")
	}
	l.position = local.Position()
	return l, nil
}

// lastOwn is the last number of this origin in the stream; 0 for none.
func (l *Log) lastOwn(ctx context.Context) (uint64, error) {
	m, err := l.stream.GetLastMsgForSubject(ctx, l.subject())
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read this process's last record in %s: %w", l.o.Stream, err)
	}
	n, err := strconv.ParseUint(m.Header.Get(HeaderNumber), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read this process's last record in %s: number %q: %w", l.o.Stream, m.Header.Get(HeaderNumber), err)
	}
	return n, nil
}

func (l *Log) subject() string { return l.o.Subject + "." + l.o.Origin }

// Next is the number of the next record of this process. The local copy
// stores it with the record, then hands the record to Publish.
func (l *Log) Next() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.next
	l.next++
	return n
}

// Publish queues r for the stream and returns at once. Records must come
// in the order of their numbers, and only once the local copy holds them
// (so that Own finds them again after a crash).
func (l *Log) Publish(r Record) {
	l.mu.Lock()
	l.handed = max(l.handed, r.N)
	switch {
	case r.N <= l.published:
	case len(l.queue) >= l.o.MaxPending || l.left:
		l.left = true
	default:
		l.queue = append(l.queue, r)
	}
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Behind is how many of this process's records the stream lacks, as far
// as this process knows.
func (l *Log) Behind() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.next - 1 - l.published
}

// Position is the stream sequence the follower has reached.
func (l *Log) Position() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.position
}

// Run publishes and follows until ctx ends; it returns nil then.
func (l *Log) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); l.publishLoop(ctx) }()
	go func() { defer wg.Done(); l.followLoop(ctx) }()
	wg.Wait()
	return nil
}

// backoff waits d (or until ctx ends) and returns the next wait.
func (l *Log) backoff(ctx context.Context, d time.Duration) time.Duration {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	return min(2*d, 5*time.Second)
}

// publishLoop publishes the queue, in order, retrying each record until
// the stream has it.
func (l *Log) publishLoop(ctx context.Context) {
	wait := l.o.Retry
	for ctx.Err() == nil {
		l.mu.Lock()
		if len(l.queue) == 0 && l.left {
			l.mu.Unlock()
			if err := l.refill(); err != nil {
				l.log.Error().Err(err).Msg("could not read this process's records again; they are published after a restart")
				wait = l.backoff(ctx, wait)
			}
			continue
		}
		if len(l.queue) == 0 {
			l.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-l.wake:
			}
			continue
		}
		r := l.queue[0]
		l.mu.Unlock()
		if err := l.send(ctx, r); err != nil {
			if ctx.Err() != nil {
				return
			}
			l.mu.Lock()
			if !l.behind {
				l.behind = true
				l.log.Warn().Err(err).Uint64("waiting", l.next-1-l.published).
					Msg("the copy on NATS is behind: this process's records wait and are published, in order, once NATS takes them")
			}
			l.mu.Unlock()
			wait = l.backoff(ctx, wait)
			continue
		}
		wait = l.o.Retry
		l.mu.Lock()
		l.queue = l.queue[1:]
		l.published = max(l.published, r.N)
		if l.behind && len(l.queue) == 0 && !l.left {
			l.behind = false
			l.log.Info().Uint64("published", l.published).Msg("the copy on NATS caught up with this process's records")
		}
		l.mu.Unlock()
	}
}

// Flush publishes the records waiting now, in order, until all are out or
// ctx ends: the last step of a process that stops, so that the others
// count what it recorded during its last turns. Call it after Run
// returned; what it leaves is published at the next start.
func (l *Log) Flush(ctx context.Context) error {
	for {
		l.mu.Lock()
		if len(l.queue) == 0 {
			l.mu.Unlock()
			return nil
		}
		r := l.queue[0]
		l.mu.Unlock()
		if err := l.send(ctx, r); err != nil {
			return err
		}
		l.mu.Lock()
		l.queue = l.queue[1:]
		l.published = max(l.published, r.N)
		l.mu.Unlock()
	}
}

// refill reads the records left out of the queue from the local copy.
func (l *Log) refill() error {
	l.mu.Lock()
	after := l.published
	l.mu.Unlock()
	recs, err := l.local.Own(after, l.o.MaxPending)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.queue = append(l.queue[:0], recs...)
	last := after
	if len(recs) > 0 {
		last = recs[len(recs)-1].N
	}
	// What was handed meanwhile is in the copy too: the next refill reads
	// it. Records handed but not in the copy (a failed write) cannot be
	// read again: they stay with this process.
	l.left = len(recs) == l.o.MaxPending || (len(recs) > 0 && l.handed > last)
	if len(recs) == 0 && l.handed > after {
		l.log.Error().Uint64("from", after+1).Uint64("to", l.handed).
			Msg("records missing from this process's copy (a failed write?) are not published")
		l.published = l.handed
	}
	return nil
}

func (l *Log) send(ctx context.Context, r Record) error {
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	m := nats.NewMsg(l.subject())
	m.Data = r.Data
	n := strconv.FormatUint(r.N, 10)
	m.Header.Set(HeaderOrigin, l.o.Origin)
	m.Header.Set(HeaderNumber, n)
	_, err := l.js.PublishMsg(ctx, m, jetstream.WithMsgID(l.o.Origin+"."+n), jetstream.WithExpectStream(l.o.Stream))
	if err != nil {
		return fmt.Errorf("publish record %s to %s: %w", n, l.o.Stream, err)
	}
	return nil
}

// followLoop applies the other processes' records, resuming from the
// position after any failure.
func (l *Log) followLoop(ctx context.Context) {
	wait := l.o.Retry
	warned := false
	for ctx.Err() == nil {
		read, err := l.follow(ctx)
		if ctx.Err() != nil {
			return
		}
		if read {
			wait, warned = l.o.Retry, false
		}
		if !warned {
			warned = true
			l.log.Warn().Err(err).Msg("cannot read the other processes' records from NATS; this process's copy is behind until it can")
		}
		wait = l.backoff(ctx, wait)
	}
}

// follow reads the stream from the position until it fails; read says
// whether it got anywhere.
func (l *Log) follow(ctx context.Context) (read bool, err error) {
	from := l.Position() + 1
	c, err := l.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{l.o.Subject + ".*"},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    from,
	})
	if err != nil {
		return false, fmt.Errorf("follow %s: %w", l.o.Stream, err)
	}
	it, err := c.Messages()
	if err != nil {
		return false, fmt.Errorf("follow %s: %w", l.o.Stream, err)
	}
	defer it.Stop()
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return read, fmt.Errorf("follow %s: %w", l.o.Stream, err)
		}
		read = true
		l.handle(msg)
	}
}

// handle applies one message, unless it is this process's own or one
// already applied.
func (l *Log) handle(msg jetstream.Msg) {
	meta, err := msg.Metadata()
	if err != nil {
		l.log.Error().Err(err).Msg("a record without its stream metadata; skipped")
		return
	}
	seq := meta.Sequence.Stream
	if seq <= l.Position() {
		return
	}
	origin := msg.Headers().Get(HeaderOrigin)
	if origin != l.o.Origin {
		n, _ := strconv.ParseUint(msg.Headers().Get(HeaderNumber), 10, 64)
		if err := l.local.Apply(Message{Seq: seq, Origin: origin, N: n, Data: msg.Data()}); err != nil {
			l.log.Error().Err(err).Uint64("seq", seq).Str("origin", origin).Msg("could not apply another process's record; skipped")
		}
	}
	l.mu.Lock()
	l.position = seq
	l.mu.Unlock()
}
