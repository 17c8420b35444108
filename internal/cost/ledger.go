// Package cost keeps the ledger of what agent turns cost (CONFIG_DIR/
// ledger.jsonl), sums it by day, week and month, per channel and per kind
// of event, and judges the optional daily budgets.
//
// The file is append-only JSON lines and never rotated: at a few hundred
// bytes a turn it grows by well under a megabyte a day for a busy gateway.
// Only the daily totals of the last ~6 weeks are kept in memory.
package cost

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"sync"
	"time"

	"github.com/agentgateway/gateway/internal/kvlog"
)

// FileName is the ledger's file inside CONFIG_DIR.
const FileName = "ledger.jsonl"

// keepDays is how many days of totals stay in memory: enough for this
// month and this week.
const keepDays = 40

// Entry is one finished agent turn.
type Entry struct {
	Time    time.Time `json:"time"`
	Channel string    `json:"channel,omitempty"`
	// Thread is the thread the turn ran in, when Channel is the thread's
	// channel: a channel's budget covers the threads opened in it.
	Thread                                                          string        `json:"thread,omitempty"`
	User                                                            string        `json:"user,omitempty"`
	Kind                                                            string        `json:"kind"`
	Name                                                            string        `json:"name,omitempty"`
	Session                                                         string        `json:"session,omitempty"`
	Backend                                                         string        `json:"backend,omitempty"`
	Model                                                           string        `json:"model,omitempty"`
	InputTokens, OutputTokens, CacheReadTokens, CacheCreationTokens int64         `json:",omitempty"`
	CostUSD                                                         float64       `json:"cost_usd"`
	Estimate                                                        bool          `json:"estimate,omitempty"`
	Duration                                                        time.Duration `json:"duration_ns"`
	Outcome                                                         string        `json:"outcome"`
}

// record is one line of the file: an entry, or a lifted budget.
type record struct {
	*Entry
	Lift *lift `json:"lift,omitempty"`
	// N is this process's number of a record it shared (see Share).
	N uint64 `json:"n,omitempty"`
	// Seq and Origin are set on a record applied from another process:
	// its stream sequence and that process's id.
	Seq    uint64 `json:"seq,omitempty"`
	Origin string `json:"origin,omitempty"`
}

// shared is a record as it is published: without its place in this
// file.
func (r record) shared() record { return record{Entry: r.Entry, Lift: r.Lift} }

type lift struct {
	Day     string `json:"day"`
	Channel string `json:"channel,omitempty"`
	By      string `json:"by,omitempty"`
}

// Sum is spending over some period.
type Sum struct {
	USD    float64
	Turns  int
	Tokens int64
	// Estimate is set when any of it is an estimate (a subscription login).
	Estimate bool
	// ByKind breaks USD down by kind of event.
	ByKind map[string]float64
}

func (s *Sum) add(e Entry) {
	s.USD += e.CostUSD
	s.Turns++
	s.Tokens += e.InputTokens + e.OutputTokens
	s.Estimate = s.Estimate || e.Estimate
	if s.ByKind == nil {
		s.ByKind = map[string]float64{}
	}
	s.ByKind[e.Kind] += e.CostUSD
}

func (s *Sum) merge(o Sum) {
	s.USD += o.USD
	s.Turns += o.Turns
	s.Tokens += o.Tokens
	s.Estimate = s.Estimate || o.Estimate
	for k, v := range o.ByKind {
		if s.ByKind == nil {
			s.ByKind = map[string]float64{}
		}
		s.ByKind[k] += v
	}
}

// day holds one day's totals.
type day struct {
	all      Sum
	channels map[string]*Sum
}

// Ledger records turns and answers for their cost. It is safe for
// concurrent use.
//
// Totals change at once; the file is written behind, by one goroutine that
// appends what has piled up and syncs once per batch, so a busy gateway
// pays no fsync per turn on its way to the reply.
type Ledger struct {
	path string
	loc  *time.Location

	mu      sync.Mutex      // guards the fields below
	days    map[string]*day // by date, "2006-01-02" in loc
	lifts   map[string]bool // day + "/" + channel ("" for the gateway)
	skipped int
	// pending are encoded lines not yet written; flushed is closed and
	// replaced once they are.
	pending []byte
	flushed chan struct{}
	onError func(error)
	closed  bool
	// sharer publishes what is recorded here (nil: not shared); toShare
	// are the records written with pending, handed to it once written.
	sharer  Sharer
	toShare []kvlog.Record
	// position is the stream sequence of the last record applied from
	// another process.
	position uint64

	wake chan struct{}
	done chan struct{}
	f    *os.File // owned by the writer goroutine, with torn
	torn bool     // the file does not end with a newline
}

// endsTorn reports whether f has content that does not end with a newline.
func endsTorn(f *os.File) bool {
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return false
	}
	var last [1]byte
	if _, err := f.ReadAt(last[:], st.Size()-1); err != nil {
		return true
	}
	return last[0] != '\n'
}

// Open loads the ledger at path; lines that do not parse (a torn last line
// after a crash) are skipped and counted. Day boundaries are in loc (nil:
// time.Local). An empty path keeps the ledger in memory.
func Open(path string, loc *time.Location) (*Ledger, error) {
	if loc == nil {
		loc = time.Local
	}
	l := &Ledger{path: path, loc: loc, days: map[string]*day{}, lifts: map[string]bool{},
		flushed: make(chan struct{}), wake: make(chan struct{}, 1), done: make(chan struct{})}
	if path == "" {
		close(l.done)
		return l, nil
	}
	if err := l.load(); err != nil {
		return nil, err
	}
	go l.write()
	return l, nil
}

// OnError sets what is told about a failed write of the file (a full
// disk); the totals in memory stay right.
func (l *Ledger) OnError(f func(error)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.onError = f
}

// load reads the file's totals.
func (l *Ledger) load() error {
	f, err := os.Open(l.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open the cost ledger: %w", err)
	}
	defer f.Close()
	oldest := time.Now().In(l.loc).AddDate(0, 0, -keepDays)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		var r record
		if json.Unmarshal(sc.Bytes(), &r) != nil {
			l.skipped++
			continue
		}
		l.position = max(l.position, r.Seq)
		switch {
		case r.Lift != nil:
			l.lifts[r.Lift.Day+"/"+r.Lift.Channel] = true
		case r.Entry != nil && !r.Entry.Time.IsZero():
			if r.Entry.Time.After(oldest) {
				l.count(*r.Entry)
			}
		default:
			l.skipped++
		}
	}
	if err := sc.Err(); err != nil {
		// An over-long line: what was read so far stands.
		l.skipped++
	}
	return nil
}

// Skipped is how many lines Open could not read.
func (l *Ledger) Skipped() int { return l.skipped }

func (l *Ledger) dayKey(t time.Time) string { return t.In(l.loc).Format(time.DateOnly) }

// count adds e to the totals; mu must be held (or Open running).
func (l *Ledger) count(e Entry) {
	k := l.dayKey(e.Time)
	d := l.days[k]
	if d == nil {
		d = &day{channels: map[string]*Sum{}}
		l.days[k] = d
	}
	d.all.add(e)
	if e.Channel != "" {
		s := d.channels[e.Channel]
		if s == nil {
			s = &Sum{}
			d.channels[e.Channel] = s
		}
		s.add(e)
	}
}

// ErrInvalid is returned by Record for an entry that would corrupt the
// totals: no time, or a cost or token count that is negative or not a
// number.
var ErrInvalid = errors.New("invalid ledger entry")

func (e Entry) valid() error {
	switch {
	case e.Time.IsZero():
		return fmt.Errorf("%w: no time", ErrInvalid)
	case math.IsNaN(e.CostUSD) || math.IsInf(e.CostUSD, 0) || e.CostUSD < 0:
		return fmt.Errorf("%w: cost %v", ErrInvalid, e.CostUSD)
	case e.InputTokens < 0 || e.OutputTokens < 0 || e.CacheReadTokens < 0 || e.CacheCreationTokens < 0:
		return fmt.Errorf("%w: negative token count", ErrInvalid)
	}
	return nil
}

// Record counts e and appends it to the file, written behind (see
// Ledger). Only an entry that cannot be encoded is an error.
func (l *Ledger) Record(e Entry) error {
	if err := e.valid(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.count(e)
	l.forget(e.Time)
	return l.queueLocked(record{Entry: &e})
}

// forget drops the totals of days too old to be reported.
func (l *Ledger) forget(now time.Time) {
	oldest := l.dayKey(now.AddDate(0, 0, -keepDays))
	for k := range l.days {
		if k < oldest {
			delete(l.days, k)
		}
	}
}

// queueLocked hands a record of this process to the writer, numbered
// and shared in the shared mode; mu must be held.
func (l *Ledger) queueLocked(r record) error {
	if l.sharer == nil || l.closed {
		return l.writeLocked(r)
	}
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode a ledger entry: %w", err)
	}
	r.N = l.sharer.Next()
	share := kvlog.Record{N: r.N, Data: data}
	if l.path == "" {
		l.sharer.Publish(share)
		return nil
	}
	l.toShare = append(l.toShare, share)
	return l.writeLocked(r)
}

// writeLocked hands a record to the writer; mu must be held.
func (l *Ledger) writeLocked(r record) error {
	if l.path == "" || l.closed {
		return nil
	}
	line, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode a ledger entry: %w", err)
	}
	l.pending = append(append(l.pending, line...), '\n')
	select {
	case l.wake <- struct{}{}:
	default:
	}
	return nil
}

// write is the writer goroutine: it appends what piled up and syncs, until
// Close.
func (l *Ledger) write() {
	defer close(l.done)
	for {
		_, open := <-l.wake
		l.mu.Lock()
		batch, flushed, share, sharer := l.pending, l.flushed, l.toShare, l.sharer
		l.pending, l.flushed, l.toShare = nil, make(chan struct{}), nil
		report := l.onError
		l.mu.Unlock()
		if len(batch) > 0 {
			if err := l.appendBatch(batch); err != nil && report != nil {
				report(err)
			}
		}
		// Shared once written (or failed: the totals here count it, so the
		// other processes should too).
		for _, r := range share {
			sharer.Publish(r)
		}
		close(flushed)
		if !open {
			if l.f != nil {
				l.f.Close()
			}
			return
		}
	}
}

func (l *Ledger) appendBatch(batch []byte) error {
	if l.f == nil {
		f, err := os.OpenFile(l.path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return fmt.Errorf("open the cost ledger: %w", err)
		}
		l.f = f
		// A crash may have left a torn last line: start on a line of our
		// own, or the first new entry would be glued to it and lost.
		l.torn = endsTorn(f)
	}
	if l.torn {
		batch = append([]byte{'\n'}, batch...)
	}
	if _, err := l.f.Write(batch); err != nil {
		// Part of the batch may be on disk: the next write starts afresh.
		l.torn = true
		return fmt.Errorf("write the cost ledger: %w", err)
	}
	l.torn = false
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("write the cost ledger: %w", err)
	}
	return nil
}

// Flush waits until everything recorded so far is on disk (or failed).
func (l *Ledger) Flush() {
	l.mu.Lock()
	if l.path == "" || l.closed {
		l.mu.Unlock()
		return
	}
	wait := l.flushed
	select {
	case l.wake <- struct{}{}:
	default:
	}
	l.mu.Unlock()
	select {
	case <-wait:
	case <-l.done:
	}
}

// Close writes what is pending and closes the file.
func (l *Ledger) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		<-l.done
		return nil
	}
	l.closed = true
	if l.path != "" {
		close(l.wake)
	}
	l.mu.Unlock()
	<-l.done
	return nil
}

// Spent is today's spending of the whole gateway and of the channel.
func (l *Ledger) Spent(now time.Time, channel string) (gateway, inChannel float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.days[l.dayKey(now)]
	if d == nil {
		return 0, 0
	}
	if s := d.channels[channel]; s != nil {
		inChannel = s.USD
	}
	return d.all.USD, inChannel
}

// Lift lifts the budget of the whole gateway (channel "") or of one
// channel for the day of now, and records it before returning.
func (l *Ledger) Lift(now time.Time, channel, by string) error {
	l.mu.Lock()
	k := l.dayKey(now)
	l.lifts[k+"/"+channel] = true
	err := l.queueLocked(record{Lift: &lift{Day: k, Channel: channel, By: by}})
	l.mu.Unlock()
	l.Flush()
	return err
}

// Lifted reports whether the budget was lifted for the day of now.
func (l *Ledger) Lifted(now time.Time, channel string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lifts[l.dayKey(now)+"/"+channel]
}

// Report is the spending of today, this week (from Monday) and this month,
// in one channel and in the whole gateway.
type Report struct {
	Channel                                 string
	Today, Week, Month                      Sum // the channel's
	GatewayToday, GatewayWeek, GatewayMonth Sum
}

// Report sums the ledger for the periods containing now.
func (l *Ledger) Report(now time.Time, channel string) Report {
	now = now.In(l.loc)
	today := l.dayKey(now)
	monday := l.dayKey(now.AddDate(0, 0, -((int(now.Weekday()) + 6) % 7)))
	first := l.dayKey(time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, l.loc))
	r := Report{Channel: channel}
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, d := range l.days {
		if k > today {
			continue
		}
		var ch Sum
		if s := d.channels[channel]; s != nil {
			ch = *s
		}
		if k == today {
			r.Today.merge(ch)
			r.GatewayToday.merge(d.all)
		}
		if k >= monday {
			r.Week.merge(ch)
			r.GatewayWeek.merge(d.all)
		}
		if k >= first {
			r.Month.merge(ch)
			r.GatewayMonth.merge(d.all)
		}
	}
	return r
}

// ByChannel is the spending of today and of this week (from Monday) per
// channel ("" for events without one), for the dashboard.
func (l *Ledger) ByChannel(now time.Time) (today, week map[string]float64) {
	now = now.In(l.loc)
	todayKey := l.dayKey(now)
	monday := l.dayKey(now.AddDate(0, 0, -((int(now.Weekday()) + 6) % 7)))
	today, week = map[string]float64{}, map[string]float64{}
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, d := range l.days {
		if k > todayKey || k < monday {
			continue
		}
		for ch, s := range d.channels {
			week[ch] += s.USD
			if k == todayKey {
				today[ch] += s.USD
			}
		}
	}
	return today, week
}
