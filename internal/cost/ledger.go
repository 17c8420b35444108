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
	"os"
	"sync"
	"time"
)

// FileName is the ledger's file inside CONFIG_DIR.
const FileName = "ledger.jsonl"

// keepDays is how many days of totals stay in memory: enough for this
// month and this week.
const keepDays = 40

// Entry is one finished agent turn.
type Entry struct {
	Time                                                            time.Time     `json:"time"`
	Channel                                                         string        `json:"channel,omitempty"`
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
}

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
type Ledger struct {
	path string
	loc  *time.Location

	mu      sync.Mutex // guards the fields below and the file's appends
	f       *os.File
	days    map[string]*day // by date, "2006-01-02" in loc
	lifts   map[string]bool // day + "/" + channel ("" for the gateway)
	skipped int
}

// Open loads the ledger at path; lines that do not parse (a torn last line
// after a crash) are skipped and counted. Day boundaries are in loc (nil:
// time.Local). An empty path keeps the ledger in memory.
func Open(path string, loc *time.Location) (*Ledger, error) {
	if loc == nil {
		loc = time.Local
	}
	l := &Ledger{path: path, loc: loc, days: map[string]*day{}, lifts: map[string]bool{}}
	if path == "" {
		return l, nil
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return l, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open the cost ledger: %w", err)
	}
	defer f.Close()
	oldest := time.Now().In(loc).AddDate(0, 0, -keepDays)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		var r record
		if json.Unmarshal(sc.Bytes(), &r) != nil {
			l.skipped++
			continue
		}
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
	return l, nil
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

// Record appends e to the file (0600, synced) and counts it. A write error
// is returned; the entry is counted in memory all the same.
func (l *Ledger) Record(e Entry) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.count(e)
	l.forget(e.Time)
	return l.appendLocked(record{Entry: &e})
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

func (l *Ledger) appendLocked(r record) error {
	if l.path == "" {
		return nil
	}
	if l.f == nil {
		f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return fmt.Errorf("open the cost ledger: %w", err)
		}
		l.f = f
	}
	line, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode a ledger entry: %w", err)
	}
	if _, err := l.f.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("write the cost ledger: %w", err)
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("write the cost ledger: %w", err)
	}
	return nil
}

// Close closes the file.
func (l *Ledger) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
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
// channel for the day of now, and records it.
func (l *Ledger) Lift(now time.Time, channel, by string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := l.dayKey(now)
	l.lifts[k+"/"+channel] = true
	return l.appendLocked(record{Lift: &lift{Day: k, Channel: channel, By: by}})
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
