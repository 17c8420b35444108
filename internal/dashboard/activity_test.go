package dashboard

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func entry(id int) Entry {
	return Entry{
		EventID: uint64(id), Time: t0.Add(time.Duration(id) * time.Second), ChannelID: "100", ChannelName: "general",
		Kind: "message", Outcome: "ok", Duration: time.Duration(id) * time.Millisecond, CostUSD: float64(id) / 1000,
	}
}

// entries returns entries from..to (inclusive), in that order.
func entries(from, to int) []Entry {
	var out []Entry
	step := 1
	if to < from {
		step = -1
	}
	for i := from; ; i += step {
		out = append(out, entry(i))
		if i == to {
			return out
		}
	}
}

// fileLines returns the file's lines and fails on one that is not an
// Entry.
func fileLines(t *testing.T, path string) []Entry {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []Entry
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var e Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("line %d %q: %v", len(out)+1, sc.Text(), err)
		}
		out = append(out, e)
	}
	return out
}

func TestActivityLogKeepsTheLastAndSurvivesARestart(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), ActivityFile)
	l, err := OpenActivityLog(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Recent(); len(got) != 0 {
		t.Fatalf("a new log has %d entries", len(got))
	}
	maxLines := 0
	for i := 1; i <= 1000; i++ {
		if err := l.Append(entry(i)); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		maxLines = max(maxLines, bytes.Count(data, []byte("\n")))
	}
	if maxLines > compactAt {
		t.Errorf("the file reached %d lines, want at most %d", maxLines, compactAt)
	}
	want := entries(1000, 1000-Keep+1) // newest first
	if d := cmp.Diff(want, l.Recent()); d != "" {
		t.Errorf("recent (-want +got):\n%s", d)
	}
	if d := cmp.Diff(entries(1000-len(fileLines(t, path))+1, 1000), fileLines(t, path)); d != "" {
		t.Errorf("the file (-want +got):\n%s", d)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}

	again, err := OpenActivityLog(path)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if d := cmp.Diff(want, again.Recent()); d != "" {
		t.Errorf("recent after reopening (-want +got):\n%s", d)
	}
}

func TestActivityLogOpen(t *testing.T) {
	t.Parallel()
	line := func(id int) string {
		b, _ := json.Marshal(entry(id))
		return string(b) + "\n"
	}
	many := ""
	for i := 1; i <= compactAt+100; i++ {
		many += line(i)
	}
	tests := []struct {
		name      string
		content   string
		want      []Entry // newest first
		fileAfter int     // lines in the file after Open
	}{
		{"no file", "", nil, -1},
		{"clean", line(1) + line(2), entries(2, 1), 2},
		{"torn last line", line(1) + line(2) + `{"event_id":3,"ti`, entries(2, 1), 2},
		{"garbage line", line(1) + "not json\n" + line(2), entries(2, 1), 2},
		{"too long", many, entries(compactAt+100, compactAt+100-Keep+1), Keep},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), ActivityFile)
			if tt.content != "" {
				if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			l, err := OpenActivityLog(path)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if d := cmp.Diff(tt.want, l.Recent()); d != "" {
				t.Errorf("recent (-want +got):\n%s", d)
			}
			if tt.fileAfter >= 0 {
				if n := len(fileLines(t, path)); n != tt.fileAfter {
					t.Errorf("%d lines in the file after Open, want %d", n, tt.fileAfter)
				}
			}
			// The next append lands on a line of its own.
			if err := l.Append(entry(5000)); err != nil {
				t.Fatal(err)
			}
			got := fileLines(t, path)
			if d := cmp.Diff(entry(5000), got[len(got)-1]); d != "" {
				t.Errorf("last line after an append (-want +got):\n%s", d)
			}
		})
	}
}

func TestActivityLogInMemory(t *testing.T) {
	t.Parallel()
	l, err := OpenActivityLog("")
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= Keep+5; i++ {
		if err := l.Append(entry(i)); err != nil {
			t.Fatal(err)
		}
	}
	if d := cmp.Diff(entries(Keep+5, 6), l.Recent()); d != "" {
		t.Errorf("recent (-want +got):\n%s", d)
	}
}

func TestActivityLogUnreadable(t *testing.T) {
	t.Parallel()
	// A directory where the file should be.
	dir := t.TempDir()
	if _, err := OpenActivityLog(dir); err == nil {
		t.Error("opening a directory as the log succeeded")
	}
}

func TestActivityLogConcurrentAppends(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), ActivityFile)
	l, err := OpenActivityLog(path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 100 {
				if err := l.Append(entry(w*1000 + i + 1)); err != nil {
					t.Error(err)
					return
				}
				l.Recent()
			}
		})
	}
	wg.Wait()
	if n := len(l.Recent()); n != Keep {
		t.Errorf("%d entries kept, want %d", n, Keep)
	}
	// Every line is whole, and the file holds what memory holds.
	lines := fileLines(t, path)
	seen := map[uint64]bool{}
	for _, e := range lines {
		seen[e.EventID] = true
	}
	for _, e := range l.Recent() {
		if !seen[e.EventID] {
			t.Errorf("event %d kept in memory but not in the file", e.EventID)
		}
	}
	if len(lines) > compactAt {
		t.Errorf("%d lines, want at most %d", len(lines), compactAt)
	}
}
