package dashboard

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sync"

	"github.com/agentgateway/gateway/internal/atomicfile"
)

// ActivityFile is the activity log's file inside CONFIG_DIR.
const ActivityFile = "activity.jsonl"

// Keep is how many finished events the activity log (and the page) keeps.
const Keep = 200

// compactAt is how many lines the file may reach before it is rewritten
// with the last Keep: appends stay cheap and the file stays small.
const compactAt = 2 * Keep

// ActivityLog is the list of recently finished events, kept on disk as
// JSON lines so that a restart does not empty the page. It is safe for
// concurrent use.
//
// Appends are not synced: a crash may lose the last few entries, or leave
// a torn last line that the next Open drops. The file never holds more
// than compactAt lines.
type ActivityLog struct {
	path string

	mu      sync.Mutex // guards the fields below and writes to the file
	entries []Entry    // oldest first, at most Keep
	lines   int        // lines in the file
	f       *os.File   // open for appending; nil in memory or after a failed write
	closed  bool
}

// OpenActivityLog loads the log at path, creating it on the first Append.
// Lines that do not parse are dropped. An empty path keeps the log in
// memory only.
func OpenActivityLog(path string) (*ActivityLog, error) {
	l := &ActivityLog{path: path}
	if path == "" {
		return l, nil
	}
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read the activity log: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	clean := true
	for sc.Scan() {
		l.lines++
		var e Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			clean = false
			continue
		}
		l.entries = append(l.entries, e)
	}
	if sc.Err() != nil {
		clean = false
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		// A torn last line: the next append would join onto it.
		clean = false
	}
	if len(l.entries) > Keep {
		l.entries = slices.Clone(l.entries[len(l.entries)-Keep:])
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !clean || l.lines > compactAt {
		if err := l.compact(); err != nil {
			return nil, err
		}
		return l, nil
	}
	if err := l.open(); err != nil {
		return nil, err
	}
	return l, nil
}

// open opens the file for appending; mu must be held.
func (l *ActivityLog) open() error {
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open the activity log: %w", err)
	}
	l.f = f
	return nil
}

// compact rewrites the file with the entries kept and reopens it; mu must
// be held.
func (l *ActivityLog) compact() error {
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, e := range l.entries {
		if err := enc.Encode(e); err != nil {
			return fmt.Errorf("encode activity: %w", err)
		}
	}
	if err := atomicfile.Write(l.path, buf.Bytes(), 0o600); err != nil {
		return fmt.Errorf("compact the activity log: %w", err)
	}
	l.lines = len(l.entries)
	return l.open()
}

// Append adds a finished event. The entry is kept in memory even when the
// file cannot be written, and the error says so.
func (l *ActivityLog) Append(e Entry) error {
	line, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode activity: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = append(l.entries, e)
	if len(l.entries) > Keep {
		// Copy rather than reslice so the backing array does not grow
		// without bound.
		l.entries = slices.Clone(l.entries[len(l.entries)-Keep:])
	}
	if l.path == "" || l.closed {
		return nil
	}
	if l.f == nil || l.lines >= compactAt {
		// Also the way back after a failed write or compaction: the file
		// is rewritten whole from memory.
		return l.compact()
	}
	if _, err := l.f.Write(append(line, '\n')); err != nil {
		// A partial line would corrupt the next: start over next time.
		l.f.Close()
		l.f = nil
		return fmt.Errorf("append to the activity log: %w", err)
	}
	l.lines++
	return nil
}

// Recent returns the entries kept, newest first.
func (l *ActivityLog) Recent() []Entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := slices.Clone(l.entries)
	slices.Reverse(out)
	return out
}

// Close closes the file; later appends are kept in memory only.
func (l *ActivityLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	if err != nil {
		return fmt.Errorf("close the activity log: %w", err)
	}
	return nil
}
