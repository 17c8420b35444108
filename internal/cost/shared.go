package cost

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/agentgateway/gateway/internal/kvlog"
)

// The stream the processes of a gateway on NATS share the ledger through
// (docs/scale-out.md §4).
const (
	StreamName    = "GATEWAY_LEDGER"
	streamSubject = "gateway.ledger"
)

// StreamOptions are the shared ledger's stream: it keeps records as long
// as the totals in memory need them, so a process with an empty ledger
// catches up on this month and this week. origin is this process's id
// (kvlog.LoadOrigin).
func StreamOptions(replicas int, origin string) kvlog.Options {
	return kvlog.Options{
		Stream:      StreamName,
		Subject:     streamSubject,
		Description: "agent gateway: the cost ledger's entries and lifted budgets, one subject per process",
		Replicas:    replicas,
		MaxAge:      keepDays * 24 * time.Hour,
		Origin:      origin,
	}
}

// Sharer publishes the ledger's records to the other processes of a
// gateway on NATS (kvlog.Log).
type Sharer interface {
	// Next numbers the next record.
	Next() uint64
	// Publish queues a numbered record, in the order of the numbers, once
	// the file holds it; it never waits on the network.
	Publish(r kvlog.Record)
}

// Share turns the shared mode on: from now on every entry and lift is
// numbered, written with its number and then handed to s. Without it
// (nil) the ledger is this process's alone.
func (l *Ledger) Share(s Sharer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sharer = s
}

// Position is the stream sequence of the last record the ledger applied
// from another process (kvlog.Local).
func (l *Ledger) Position() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.position
}

// Apply counts another process's entry or lift, and writes it with its
// sequence, so that a restart goes on after it (kvlog.Local). A sequence
// already applied is ignored.
func (l *Ledger) Apply(m kvlog.Message) error {
	var r record
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return fmt.Errorf("read a shared ledger record: %w", err)
	}
	switch {
	case r.Lift != nil:
	case r.Entry != nil:
		if err := r.Entry.valid(); err != nil {
			return fmt.Errorf("a shared ledger record: %w", err)
		}
	default:
		return fmt.Errorf("a shared ledger record: %w: neither an entry nor a lift", ErrInvalid)
	}
	r = r.shared()
	r.Seq, r.Origin = m.Seq, m.Origin
	l.mu.Lock()
	defer l.mu.Unlock()
	if m.Seq <= l.position {
		return nil
	}
	l.position = m.Seq
	if r.Lift != nil {
		l.lifts[r.Lift.Day+"/"+r.Lift.Channel] = true
	} else {
		l.count(*r.Entry)
	}
	return l.writeLocked(r)
}

// Own lists the records this process numbered above after, oldest first,
// at most limit (0: all), as they were published (kvlog.Local). Only what
// reached the file is there.
func (l *Ledger) Own(after uint64, limit int) ([]kvlog.Record, error) {
	if l.path == "" {
		return nil, nil
	}
	f, err := os.Open(l.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open the cost ledger: %w", err)
	}
	defer f.Close()
	var out []kvlog.Record
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() && (limit <= 0 || len(out) < limit) {
		var r record
		if json.Unmarshal(sc.Bytes(), &r) != nil || r.N <= after || r.Seq != 0 {
			continue
		}
		data, err := json.Marshal(r.shared())
		if err != nil {
			continue
		}
		out = append(out, kvlog.Record{N: r.N, Data: data})
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("read the cost ledger: %w", err)
	}
	return out, nil
}
