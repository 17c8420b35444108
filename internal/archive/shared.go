package archive

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/agentgateway/gateway/internal/atomicfile"
	"github.com/agentgateway/gateway/internal/kvlog"
)

// The stream the processes of a gateway on NATS share the archive
// through (docs/scale-out.md §4).
const (
	StreamName    = "GATEWAY_ARCHIVE"
	streamSubject = "gateway.archive"
)

// JournalFile is the shared mode's journal, in the archive's directory:
// the exchanges this process recorded, numbered, and the stream position
// of those it applied from the others. The day files cannot be read back,
// so this is what a restart publishes from and goes on after.
const JournalFile = "shared.jsonl"

// compactAt is the journal's size past which it is rewritten without the
// exchanges the stream holds.
const compactAt = 1 << 20

// StreamOptions are the shared archive's stream: it keeps exchanges for
// ARCHIVE_DAYS (days; 0 for ever), as the day files are kept. origin is
// this process's id (kvlog.LoadOrigin).
func StreamOptions(replicas, days int, origin string) kvlog.Options {
	return kvlog.Options{
		Stream:      StreamName,
		Subject:     streamSubject,
		Description: "agent gateway: the conversation archive's exchanges, one subject per process",
		Replicas:    replicas,
		MaxAge:      time.Duration(days) * 24 * time.Hour,
		Origin:      origin,
	}
}

// Sharer publishes the archive's exchanges to the other processes of a
// gateway on NATS (kvlog.Log).
type Sharer interface {
	// Next numbers the next exchange.
	Next() uint64
	// Publish queues a numbered exchange, in the order of the numbers,
	// once the journal holds it; it never waits on the network.
	Publish(r kvlog.Record)
}

// shared is the state of the shared mode.
type shared struct {
	mu     sync.Mutex // guards the fields below; held across a journal write
	sharer Sharer
	// position is the stream sequence of the last exchange applied.
	position uint64
	loaded   bool
}

// journalLine is one line of the journal.
type journalLine struct {
	N      uint64 `json:"n,omitempty"`
	Entry  *Entry `json:"entry,omitempty"`
	Seq    uint64 `json:"seq,omitempty"`
	Origin string `json:"origin,omitempty"`
}

// Share turns the shared mode on: from now on every exchange Append
// archives is numbered, written to the journal and handed to s. Without
// it (nil) the archive is this process's alone and has no journal.
func (a *Archive) Share(s Sharer) {
	a.share.mu.Lock()
	defer a.share.mu.Unlock()
	a.share.sharer = s
}

// publish shares an exchange recorded here, in the shared mode.
func (a *Archive) publish(e Entry) {
	s := &a.share
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sharer == nil {
		return
	}
	e = e.valid()
	e.Origin, e.N = "", 0
	data, err := json.Marshal(e)
	if err != nil {
		a.log.Error().Err(err).Uint64("event", e.EventID).Msg("an exchange JSON cannot hold is not shared")
		return
	}
	n := s.sharer.Next()
	if err := a.journal(journalLine{N: n, Entry: &e}); err != nil {
		// The other processes still get it; a restart before it is
		// published loses it.
		a.log.Warn().Err(err).Msg("the shared archive's journal cannot be written")
	}
	s.sharer.Publish(kvlog.Record{N: n, Data: data})
}

// journal appends a line to the journal and syncs it; share.mu must be
// held.
func (a *Archive) journal(l journalLine) error {
	line, err := json.Marshal(l)
	if err != nil {
		return fmt.Errorf("write the archive's journal: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(a.dir, JournalFile), os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("write the archive's journal: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("write the archive's journal: %w", err)
	}
	if st.Size() > 0 && endsTorn(f, st.Size()) {
		line = append([]byte{'\n'}, line...)
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("write the archive's journal: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("write the archive's journal: %w", err)
	}
	return f.Close()
}

// readJournal calls fn for every line of the journal that reads; a torn
// line is skipped.
func (a *Archive) readJournal(fn func(journalLine)) error {
	f, err := os.Open(filepath.Join(a.dir, JournalFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the archive's journal: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		var l journalLine
		if json.Unmarshal(sc.Bytes(), &l) == nil {
			fn(l)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read the archive's journal: %w", err)
	}
	return nil
}

// loadPosition reads the position from the journal the first time;
// share.mu must be held.
func (a *Archive) loadPosition() error {
	s := &a.share
	if s.loaded {
		return nil
	}
	if err := a.readJournal(func(l journalLine) { s.position = max(s.position, l.Seq) }); err != nil {
		return err
	}
	s.loaded = true
	return nil
}

// Position is the stream sequence of the last exchange the archive
// applied from another process (kvlog.Local).
func (a *Archive) Position() uint64 {
	a.share.mu.Lock()
	defer a.share.mu.Unlock()
	if err := a.loadPosition(); err != nil {
		a.log.Error().Err(err).Msg("the shared archive's journal cannot be read; the archive takes the other processes' exchanges from the start of the stream")
	}
	return a.share.position
}

// Apply archives another process's exchange, its day file and recent
// exchanges as Append does (in time order), then notes its sequence in
// the journal, so that a restart goes on after it (kvlog.Local).
func (a *Archive) Apply(m kvlog.Message) error {
	var e Entry
	if err := json.Unmarshal(m.Data, &e); err != nil {
		return fmt.Errorf("read a shared exchange: %w", err)
	}
	if e.Time.IsZero() {
		return fmt.Errorf("a shared exchange without a time")
	}
	name, err := dirName(e.ChannelID)
	if err != nil {
		return fmt.Errorf("a shared exchange: %w", err)
	}
	e.Origin, e.N = m.Origin, m.N
	s := &a.share
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := a.loadPosition(); err != nil {
		return err
	}
	if m.Seq <= s.position {
		return nil
	}
	writeErr := a.write(name, []Entry{e}, true)
	s.position = m.Seq
	return errors.Join(writeErr, a.journal(journalLine{Seq: m.Seq, Origin: m.Origin}))
}

// Own lists the exchanges this process numbered above after, oldest
// first, at most limit (0: all) (kvlog.Local). after is a number the
// stream holds with all before it, so a journal grown large is rewritten
// here without them.
func (a *Archive) Own(after uint64, limit int) ([]kvlog.Record, error) {
	s := &a.share
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := a.loadPosition(); err != nil {
		return nil, err
	}
	var keep []journalLine
	var out []kvlog.Record
	err := a.readJournal(func(l journalLine) {
		if l.N <= after || l.Entry == nil {
			return
		}
		keep = append(keep, l)
		if limit > 0 && len(out) >= limit {
			return
		}
		data, err := json.Marshal(*l.Entry)
		if err == nil {
			out = append(out, kvlog.Record{N: l.N, Data: data})
		}
	})
	if err != nil {
		return nil, err
	}
	if st, err := os.Stat(filepath.Join(a.dir, JournalFile)); err == nil && st.Size() > compactAt {
		a.compact(keep)
	}
	return out, nil
}

// compact rewrites the journal with the position and the exchanges in
// keep; share.mu must be held. A failure leaves the journal as it was.
func (a *Archive) compact(keep []journalLine) {
	var buf []byte
	for _, l := range append([]journalLine{{Seq: a.share.position, Origin: "compacted"}}, keep...) {
		line, err := json.Marshal(l)
		if err != nil {
			return
		}
		buf = append(append(buf, line...), '\n')
	}
	if err := atomicfile.Write(filepath.Join(a.dir, JournalFile), buf, 0o600); err != nil {
		a.log.Warn().Err(err).Msg("the shared archive's journal cannot be compacted")
		return
	}
	a.log.Info().Int("waiting", len(keep)).Str("position", strconv.FormatUint(a.share.position, 10)).Msg("compacted the shared archive's journal")
}
