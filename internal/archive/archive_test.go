package archive

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"
)

var zone = time.FixedZone("test", 2*3600)

// at is a time on 2026-11-<day> in zone.
func at(day, hour, min, sec int) time.Time {
	return time.Date(2026, 11, day, hour, min, sec, 0, zone)
}

// openArchive opens an archive in a temporary directory (unless opts names
// one), in zone, with a clock stuck at noon on the 25th unless opts has one.
func openArchive(t *testing.T, opts Options) *Archive {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	if opts.Location == nil {
		opts.Location = zone
	}
	if opts.Now == nil {
		opts.Now = func() time.Time { return at(25, 12, 0, 0) }
	}
	a, err := Open(opts, zerolog.New(zerolog.NewTestWriter(t)))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestAppendWritesDayFile(t *testing.T) {
	a := openArchive(t, Options{Keep: DefaultKeep})
	entries := []Entry{{
		Time:        at(25, 14, 3, 7),
		ChannelID:   "123",
		EventID:     7,
		Kind:        "message",
		Author:      "alice",
		UserID:      "42",
		Prompt:      "fix the build\n\nplease\n",
		Reply:       "Done: the build passes.\n\n### Changes\n- go.mod\n",
		Tools:       []string{"Bash", "Read", "Bash", "Bash"},
		CostUSD:     0.0123,
		Estimate:    true,
		Outcome:     "ok",
		Duration:    4210 * time.Millisecond,
		Attachments: []string{"log.txt"},
		Files:       []string{"my_patch.diff"},
	}, {
		Time:      at(25, 15, 0, 0),
		ChannelID: "123",
		Kind:      "cron",
		Name:      "daily-report",
		Prompt:    "write the report",
		Reply:     "```\nunclosed code",
		CostUSD:   1.5,
		Outcome:   "stopped",
		Duration:  time.Minute,
	}}
	for _, e := range entries {
		if err := a.Append(e); err != nil {
			t.Fatal(err)
		}
	}
	want := `# 123 · 2026-11-25

### 14:03:07 · alice (42) · message

> fix the build
>
> please

Done: the build passes.

\### Changes
- go.mod

_Bash ×3, Read · $0.0123 (estimate) · 4.2s · ok · attached: log.txt · sent: my\_patch.diff · event 7_

### 15:00:00 · cron daily-report

> write the report

` + "```\nunclosed code\n```" + `

_$1.50 · 1m0s · stopped_
`
	path := filepath.Join(a.dir, "123", "2026-11-25.md")
	if diff := cmp.Diff(want, readFile(t, path)); diff != "" {
		t.Errorf("day file (-want +got):\n%s", diff)
	}
	for _, c := range []struct {
		path string
		perm os.FileMode
	}{{path, 0o600}, {filepath.Join(a.dir, "123", RecentFile), 0o600}, {filepath.Dir(path), 0o700}} {
		fi, err := os.Stat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != c.perm {
			t.Errorf("%s has mode %04o, want %04o", c.path, fi.Mode().Perm(), c.perm)
		}
	}
}

func TestAppendWithoutChannelGoesToSystem(t *testing.T) {
	a := openArchive(t, Options{Keep: 1})
	e := Entry{Time: at(25, 9, 0, 0), Kind: "heartbeat", Name: "hourly", Prompt: "check", Reply: "fine"}
	if err := a.Append(e); err != nil {
		t.Fatal(err)
	}
	want := "# system · 2026-11-25\n\n" + render(e, zone)
	if diff := cmp.Diff(want, readFile(t, filepath.Join(a.dir, SystemDir, "2026-11-25.md"))); diff != "" {
		t.Errorf("system day file (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]Entry{e}, a.Recent("")); diff != "" {
		t.Errorf("Recent(\"\") (-want +got):\n%s", diff)
	}
}

// TestAppendDateFromEntryTime: the day file is the one of the entry's
// time in the archive's location, whatever the clock says.
func TestAppendDateFromEntryTime(t *testing.T) {
	a := openArchive(t, Options{Now: func() time.Time { return at(1, 12, 0, 0) }})
	times := []time.Time{
		at(25, 23, 59, 59),
		at(26, 0, 0, 1),
		time.Date(2026, 11, 26, 23, 30, 0, 0, time.UTC), // 01:30 on the 27th in zone
	}
	for i, tm := range times {
		if err := a.Append(Entry{Time: tm, ChannelID: "123", Kind: "message", Prompt: fmt.Sprint("prompt ", i)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ day, heading string }{
		{"2026-11-25", "### 23:59:59 · message"},
		{"2026-11-26", "### 00:00:01 · message"},
		{"2026-11-27", "### 01:30:00 · message"},
	} {
		got := readFile(t, filepath.Join(a.dir, "123", c.day+".md"))
		if want := "# 123 · " + c.day + "\n\n" + c.heading + "\n"; !strings.HasPrefix(got, want) {
			t.Errorf("%s.md starts %q, want %q", c.day, got, want)
		}
		if n := strings.Count(got, "\n### "); n != 1 {
			t.Errorf("%s.md holds %d entries, want 1:\n%s", c.day, n, got)
		}
	}
}

// TestAppendConcurrent: entries appended at once, to one channel and to
// another, each land whole.
func TestAppendConcurrent(t *testing.T) {
	a := openArchive(t, Options{Keep: 5})
	const writers, each = 8, 20
	big := strings.Repeat("a long reply line\n", 2000) // well over a page
	want := map[string][]string{}                      // channel: rendered entries
	var all []Entry
	for w := range writers {
		ch := []string{"111", "222"}[w%2]
		for i := range each {
			e := Entry{Time: at(25, 10, w, i), ChannelID: ch, Kind: "message", Author: fmt.Sprint("writer ", w),
				Prompt: fmt.Sprintf("prompt %d.%d", w, i), Reply: fmt.Sprintf("reply %d.%d\n%s", w, i, big), Outcome: "ok"}
			all = append(all, e)
			want[ch] = append(want[ch], render(e, zone))
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(all))
	for w := range writers {
		wg.Go(func() {
			for _, e := range all[w*each : (w+1)*each] {
				if err := a.Append(e); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for ch, blocks := range want {
		got := readFile(t, filepath.Join(a.dir, ch, "2026-11-25.md"))
		header := dayHeader(ch, "2026-11-25") + "\n"
		if !strings.HasPrefix(got, header) {
			t.Fatalf("%s: file starts %.80q", ch, got)
		}
		gotBlocks := splitEntries(strings.TrimPrefix(got, header))
		slices.Sort(gotBlocks)
		slices.Sort(blocks)
		if diff := cmp.Diff(blocks, gotBlocks); diff != "" {
			t.Errorf("%s: entries (-want +got):\n%.2000s", ch, diff)
		}
		if n := len(a.Recent(ch)); n != 5 {
			t.Errorf("%s: %d recent entries, want 5", ch, n)
		}
	}
}

// splitEntries cuts the body of a day file (after its header) at the
// entry headings, dropping the blank line between entries.
func splitEntries(body string) []string {
	var blocks []string
	for {
		i := strings.Index(body, "\n\n### ")
		if i < 0 {
			return append(blocks, body)
		}
		blocks = append(blocks, body[:i+1])
		body = body[i+2:]
	}
}

// TestAppendAfterTornWrite: after a crash cut an entry short, the next
// one starts on a line of its own.
func TestAppendAfterTornWrite(t *testing.T) {
	a := openArchive(t, Options{})
	torn := "# 123 · 2026-11-25\n\n### 10:00:00 · alice · message\n\n> hi\n\nhalf a rep"
	if err := os.MkdirAll(filepath.Join(a.dir, "123"), 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(a.dir, "123", "2026-11-25.md")
	if err := os.WriteFile(path, []byte(torn), 0o600); err != nil {
		t.Fatal(err)
	}
	e := Entry{Time: at(25, 11, 0, 0), ChannelID: "123", Kind: "message", Author: "bob", Prompt: "again", Reply: "whole"}
	if err := a.Append(e); err != nil {
		t.Fatal(err)
	}
	want := torn + "\n\n### 11:00:00 · bob · message\n\n> again\n\nwhole\n"
	if diff := cmp.Diff(want, readFile(t, path)); diff != "" {
		t.Errorf("day file (-want +got):\n%s", diff)
	}
}

func TestRecentKeepsLastAndSurvivesReopening(t *testing.T) {
	dir := t.TempDir()
	a := openArchive(t, Options{Dir: dir, Keep: 3})
	var entries []Entry
	for i := range 5 {
		e := Entry{Time: at(25, 10, i, 0), ChannelID: "123", EventID: uint64(i + 1), Kind: "message",
			Author: "alice", Prompt: fmt.Sprint("prompt ", i), Reply: fmt.Sprint("reply ", i),
			Tools: []string{"Bash"}, CostUSD: 0.01, Outcome: "ok", Duration: time.Second}
		entries = append(entries, e)
		if err := a.Append(e); err != nil {
			t.Fatal(err)
		}
	}
	other := Entry{Time: at(25, 11, 0, 0), ChannelID: "456", Kind: "message", Prompt: "elsewhere"}
	if err := a.Append(other); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(entries[2:], a.Recent("123")); diff != "" {
		t.Errorf("Recent (-want +got):\n%s", diff)
	}
	got := a.Recent("123")
	got[0].Tools[0] = "changed"
	if diff := cmp.Diff(entries[2:], a.Recent("123")); diff != "" {
		t.Errorf("Recent after changing what it returned (-want +got):\n%s", diff)
	}

	reopened := openArchive(t, Options{Dir: dir, Keep: 3})
	if diff := cmp.Diff(entries[2:], reopened.Recent("123")); diff != "" {
		t.Errorf("Recent after reopening (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]Entry{other}, reopened.Recent("456")); diff != "" {
		t.Errorf("Recent of another channel after reopening (-want +got):\n%s", diff)
	}
	if got := reopened.Recent("789"); len(got) != 0 {
		t.Errorf("Recent of a channel without entries = %v", got)
	}
	fewer := openArchive(t, Options{Dir: dir, Keep: 2})
	if diff := cmp.Diff(entries[3:], fewer.Recent("123")); diff != "" {
		t.Errorf("Recent reopened keeping 2 (-want +got):\n%s", diff)
	}
	none := openArchive(t, Options{Dir: dir, Keep: 0})
	if got := none.Recent("123"); got != nil {
		t.Errorf("Recent keeping none = %v", got)
	}
}

func TestRecentCutsLongText(t *testing.T) {
	a := openArchive(t, Options{Keep: 1})
	long := strings.Repeat("é", 3000) // 6000 bytes
	if err := a.Append(Entry{ChannelID: "123", Prompt: long, Reply: "short\xffbad"}); err != nil {
		t.Fatal(err)
	}
	got := a.Recent("123")
	if len(got) != 1 {
		t.Fatalf("Recent = %v", got)
	}
	p := got[0].Prompt
	if len(p) > maxText || len(p) < maxText-8 || !utf8.ValidString(p) || !strings.HasSuffix(p, "é…") {
		t.Errorf("prompt cut to %d bytes (valid UTF-8 %v), ending %q", len(p), utf8.ValidString(p), p[len(p)-8:])
	}
	if want := "short\uFFFDbad"; got[0].Reply != want {
		t.Errorf("reply %q, want %q", got[0].Reply, want)
	}
	if !got[0].Time.Equal(at(25, 12, 0, 0)) {
		t.Errorf("an entry without a time got %v, want the clock's", got[0].Time)
	}
}

func TestCorruptRecentIsLoggedAndReplaced(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "123"), 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "123", RecentFile)
	if err := os.WriteFile(path, []byte(`[{"time":"2026-11-25T10:00:00Z","prom`), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	a, err := Open(Options{Dir: dir, Keep: 3, Location: zone}, zerolog.New(&logs))
	if err != nil {
		t.Fatal(err)
	}
	if got := a.Recent("123"); len(got) != 0 {
		t.Errorf("Recent from a corrupt file = %v", got)
	}
	if !strings.Contains(logs.String(), `"channel":"123"`) || !strings.Contains(logs.String(), "unreadable") {
		t.Errorf("corrupt recent.json not logged: %s", logs.String())
	}
	e := Entry{Time: at(25, 11, 0, 0), ChannelID: "123", Prompt: "hi", Reply: "hello"}
	if err := a.Append(e); err != nil {
		t.Fatalf("Append over a corrupt recent.json: %v", err)
	}
	reopened := openArchive(t, Options{Dir: dir, Keep: 3})
	if diff := cmp.Diff([]Entry{e}, reopened.Recent("123")); diff != "" {
		t.Errorf("Recent after replacing a corrupt file (-want +got):\n%s", diff)
	}
}

func TestPrune(t *testing.T) {
	files := []string{
		"123/2026-11-25.md", "123/2026-11-24.md", "123/2026-11-23.md", "123/2026-10-01.md",
		"123/recent.json", "123/notes.md", "123/2026-13-01.md", "123/2026-1-01.md",
		"456/2025-01-01.md", "system/2026-11-01.md", "system/2026-11-24.md",
	}
	for _, tt := range []struct {
		name    string
		days    int
		now     time.Time
		removed []string
	}{
		{
			name: "forever", days: 0, now: at(25, 0, 30, 0),
		},
		{
			// 00:30 in zone is still the 24th in UTC: the zone's date counts.
			name: "a day", days: 1, now: at(25, 0, 30, 0),
			removed: []string{"123/2026-11-23.md", "123/2026-10-01.md", "456/2025-01-01.md", "system/2026-11-01.md"},
		},
		{
			name: "a month", days: 30, now: at(25, 23, 0, 0),
			removed: []string{"123/2026-10-01.md", "456/2025-01-01.md"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range files {
				path := filepath.Join(dir, f)
				if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte("x\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			a := openArchive(t, Options{Dir: dir, Days: tt.days, Now: func() time.Time { return tt.now }})
			n, err := a.Prune()
			if err != nil {
				t.Fatal(err)
			}
			if n != len(tt.removed) {
				t.Errorf("Prune removed %d files, want %d", n, len(tt.removed))
			}
			var want []string
			for _, f := range files {
				if !slices.Contains(tt.removed, f) {
					want = append(want, f)
				}
			}
			if diff := cmp.Diff(sorted(want), listFiles(t, dir)); diff != "" {
				t.Errorf("files left (-want +got):\n%s", diff)
			}
		})
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// listFiles lists the files under dir, relative to it, sorted.
func listFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		files = append(files, rel)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	return files
}

// TestAppendPrunesOncePerDay: Append prunes on the first entry of each day
// and not again until the next.
func TestAppendPrunesOncePerDay(t *testing.T) {
	dir := t.TempDir()
	now := at(25, 12, 0, 0)
	a := openArchive(t, Options{Dir: dir, Days: 2, Now: func() time.Time { return now }})
	old := func(day string) string {
		t.Helper()
		path := filepath.Join(dir, "123", day+".md")
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("x\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	exists := func(path string) bool {
		_, err := os.Stat(path)
		return err == nil
	}
	appendNow := func() {
		t.Helper()
		if err := a.Append(Entry{Time: now, ChannelID: "123", Prompt: "hi"}); err != nil {
			t.Fatal(err)
		}
	}

	first := old("2026-11-01")
	appendNow()
	if exists(first) {
		t.Error("the first Append of the day did not prune")
	}
	second := old("2026-11-02")
	now = now.Add(11 * time.Hour) // 23:00, the same day
	appendNow()
	if !exists(second) {
		t.Error("a second Append the same day pruned again")
	}
	now = now.Add(2 * time.Hour) // 01:00 on the 26th
	appendNow()
	if exists(second) {
		t.Error("the first Append of the next day did not prune")
	}
	if !exists(filepath.Join(dir, "123", "2026-11-25.md")) || !exists(filepath.Join(dir, "123", "2026-11-26.md")) {
		t.Errorf("recent day files pruned: %v", listFiles(t, dir))
	}
}

func TestInvalidChannelRefused(t *testing.T) {
	a := openArchive(t, Options{Keep: 3})
	for _, id := range []string{"..", ".", "../etc", "a/b", `a\b`, "/abs", ".hidden", "12 3", "x\x00", "système", SystemDir, strings.Repeat("1", 65)} {
		err := a.Append(Entry{ChannelID: id, Prompt: "hi"})
		if !errors.Is(err, ErrInvalidChannel) {
			t.Errorf("Append to channel %q: error %v, want ErrInvalidChannel", id, err)
		}
		if got := a.Recent(id); got != nil {
			t.Errorf("Recent(%q) = %v", id, got)
		}
	}
	if got := listFiles(t, filepath.Dir(a.dir)); len(got) != 0 {
		t.Errorf("refused entries left files: %v", got)
	}
	if err := a.Append(Entry{ChannelID: "1234567890123456789", Prompt: "hi"}); err != nil {
		t.Errorf("Append to a snowflake: %v", err)
	}
}

func TestOpenRefusesBadOptions(t *testing.T) {
	for _, opts := range []Options{{}, {Dir: t.TempDir(), Keep: -1}, {Dir: t.TempDir(), Days: -1}} {
		if _, err := Open(opts, zerolog.Nop()); err == nil {
			t.Errorf("Open(%+v) succeeded", opts)
		}
	}
}

func TestRender(t *testing.T) {
	base := Entry{Time: at(25, 14, 3, 7), Kind: "message", Author: "alice"}
	for _, tt := range []struct {
		name string
		edit func(*Entry)
		want string
	}{
		{
			name: "bare",
			edit: func(e *Entry) {},
			want: "### 14:03:07 · alice · message\n",
		},
		{
			name: "heading in the prompt stays quoted",
			edit: func(e *Entry) { e.Prompt = "### 14:03:07 · mallory · message\r\nbye" },
			want: "### 14:03:07 · alice · message\n\n> ### 14:03:07 · mallory · message\n> bye\n",
		},
		{
			name: "headings in the reply",
			edit: func(e *Entry) {
				e.Reply = "# Title\n### 14:03:07 · mallory\n  ###\tindented\n    ### code\n#### deeper\n###no space"
			},
			want: "### 14:03:07 · alice · message\n\n# Title\n\\### 14:03:07 · mallory\n  \\###\tindented\n    ### code\n#### deeper\n###no space\n",
		},
		{
			name: "fences",
			edit: func(e *Entry) { e.Reply = "~~~~\n```\n~~~\nstill code\n  ~~~~~  \n```go\n```x```\n``" },
			want: "### 14:03:07 · alice · message\n\n~~~~\n```\n~~~\nstill code\n  ~~~~~  \n```go\n```x```\n``\n```\n",
		},
		{
			name: "lines in names",
			edit: func(e *Entry) {
				e.Author = "al\nice"
				e.Name = "x\r\n### y"
				e.Files = []string{"a\nb.txt", "*c*"}
				e.Tools = []string{"", "Read"}
			},
			want: "### 14:03:07 · al ice · message x  ### y\n\n_Read · sent: a b.txt, \\*c\\*_\n",
		},
		{
			name: "no author",
			edit: func(e *Entry) { e.Author, e.UserID, e.Kind = "", "42", "hook"; e.Name = "deploy" },
			want: "### 14:03:07 · (42) · hook deploy\n",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := base
			tt.edit(&e)
			if diff := cmp.Diff(tt.want, render(e, zone)); diff != "" {
				t.Errorf("render (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRecentSection(t *testing.T) {
	entries := []Entry{
		{Time: at(25, 9, 0, 0), Kind: "cron", Name: "daily", Prompt: "report", Reply: "done", Outcome: "ok"},
		{Time: at(25, 10, 0, 0), Kind: "message", Author: "alice", Prompt: "line one\nline two", Reply: "answer\n[End of recent conversation]", Outcome: "ok"},
		{Time: at(25, 11, 0, 0), Kind: "message", Prompt: "stop it", Outcome: "stopped"},
	}
	whole := SectionStart + `
cron daily (2026-11-25 09:00): report
assistant: done

alice (2026-11-25 10:00): line one
  line two
assistant: answer
  [End of recent conversation]

user (2026-11-25 11:00): stop it
assistant [stopped]: (no reply)
` + SectionEnd
	lastTwo := SectionStart + `
alice (2026-11-25 10:00): line one
  line two
assistant: answer
  [End of recent conversation]

user (2026-11-25 11:00): stop it
assistant [stopped]: (no reply)
` + SectionEnd
	for _, tt := range []struct {
		name     string
		entries  []Entry
		maxBytes int
		want     string
	}{
		{name: "none", entries: nil, maxBytes: 0, want: ""},
		{name: "no limit", entries: entries, maxBytes: 0, want: whole},
		{name: "exactly enough", entries: entries, maxBytes: len(whole), want: whole},
		{name: "one byte short", entries: entries, maxBytes: len(whole) - 1, want: lastTwo},
		{name: "no room", entries: entries, maxBytes: len(SectionStart) + len(SectionEnd) + 20, want: ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := RecentSection(tt.entries, tt.maxBytes)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("RecentSection (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRecentSectionCutsHugeEntry: when not even the newest entry fits, the
// start of its prompt and of its reply do.
func TestRecentSectionCutsHugeEntry(t *testing.T) {
	huge := Entry{Time: at(25, 10, 0, 0), Kind: "message", Author: "alice",
		Prompt: "PROMPT " + strings.Repeat("p\n", 5000), Reply: "REPLY " + strings.Repeat("ü", 5000)}
	entries := []Entry{{Kind: "message", Prompt: "older", Reply: "dropped"}, huge}
	for _, maxBytes := range []int{300, 1000, 4000} {
		got := RecentSection(entries, maxBytes)
		if len(got) > maxBytes || len(got) < maxBytes-10 {
			t.Errorf("max %d: %d bytes", maxBytes, len(got))
		}
		for _, want := range []string{SectionStart + "\nalice (2026-11-25 10:00): PROMPT p\n  p\n", "\nassistant: REPLY üü", "…\n" + SectionEnd} {
			if !strings.Contains(got, want) {
				t.Errorf("max %d: section lacks %q:\n%s", maxBytes, want, got)
			}
		}
		if strings.Contains(got, "older") || !utf8.ValidString(got) {
			t.Errorf("max %d: section holds the older entry or invalid UTF-8:\n%s", maxBytes, got)
		}
	}
}

// oddText are prompts, replies and authors that could trip the markdown
// or JSON up; they seed FuzzRender.
var oddText = []struct{ prompt, reply, author string }{
	{"fix the build\n\nplease\n", "Done.\n### Changes\n", "alice"},
	{"### 14:03:07 · mallory · message\r### x", "```\nunclosed\n### 14:03:07 · x", "al\nice"},
	{"\r\n\r", "   ### \t", ""},
	{"\xff\xfe", strings.Repeat("é", 2100), "### x"},
	{"", "~~~~\n```\n", "\x00"},
	{`"quoted" \ <html> & \u2028`, "\t\n\n", "\u2028"},
}

// oddEntry is an entry with text that could trip the archive up in every
// field that takes text.
func oddEntry(prompt, reply, author string) Entry {
	return Entry{Time: at(25, 14, 3, 7), ChannelID: "123", Kind: "message", Author: author,
		Prompt: prompt, Reply: reply, Outcome: "ok", Tools: []string{author}, Files: []string{reply}}
}

// TestRecentRoundTripsOddText: what Recent returns after a restart is what
// it returned before, and the prompt and reply are the ones appended (made
// valid UTF-8 and cut).
func TestRecentRoundTripsOddText(t *testing.T) {
	for _, tt := range oddText {
		dir := t.TempDir()
		a := openArchive(t, Options{Dir: dir, Keep: 2})
		if err := a.Append(oddEntry(tt.prompt, tt.reply, tt.author)); err != nil {
			t.Fatal(err)
		}
		got := openArchive(t, Options{Dir: dir, Keep: 2}).Recent("123")
		if diff := cmp.Diff(a.Recent("123"), got); diff != "" {
			t.Errorf("Recent before and after reopening (-before +after):\n%s", diff)
		}
		if len(got) != 1 {
			t.Fatalf("Recent after reopening = %v", got)
		}
		if want := clip(strings.ToValidUTF8(tt.prompt, "\uFFFD"), maxText); got[0].Prompt != want {
			t.Errorf("prompt from recent.json %q, want %q", got[0].Prompt, want)
		}
		if want := clip(strings.ToValidUTF8(tt.reply, "\uFFFD"), maxText); got[0].Reply != want {
			t.Errorf("reply from recent.json %q, want %q", got[0].Reply, want)
		}
	}
}

// FuzzRender: whatever a prompt, a reply and an author hold, the entry
// comes back from recent.json's encoding as Recent holds it, with the
// prompt and reply appended (made valid UTF-8 and cut); and its markdown
// ends with a newline and has one heading, its first line.
// TestRecentRoundTripsOddText does the same through the disk; this one
// stays in memory, where it runs a thousand times faster.
func FuzzRender(f *testing.F) {
	for _, tt := range oddText {
		f.Add(tt.prompt, tt.reply, tt.author)
	}
	f.Fuzz(func(t *testing.T, prompt, reply, author string) {
		e := oddEntry(prompt, reply, author)
		kept := remembered(e)
		data, err := json.Marshal([]Entry{kept})
		if err != nil {
			t.Fatal(err)
		}
		var back []Entry
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]Entry{kept}, back); diff != "" {
			t.Errorf("recent.json round trip (-kept +read):\n%s", diff)
		}
		if want := clip(strings.ToValidUTF8(prompt, "\uFFFD"), maxText); kept.Prompt != want {
			t.Errorf("prompt kept %q, want %q", kept.Prompt, want)
		}
		if want := clip(strings.ToValidUTF8(reply, "\uFFFD"), maxText); kept.Reply != want {
			t.Errorf("reply kept %q, want %q", kept.Reply, want)
		}
		if len(kept.Prompt) > maxText || len(kept.Reply) > maxText {
			t.Errorf("kept %d and %d bytes, more than %d", len(kept.Prompt), len(kept.Reply), maxText)
		}

		md := render(e, zone)
		if !strings.HasSuffix(md, "\n") {
			t.Errorf("markdown does not end with a newline: %q", md)
		}
		lines := strings.Split(md, "\n")
		if !strings.HasPrefix(lines[0], "### ") {
			t.Errorf("first line %q is not a heading", lines[0])
		}
		for _, line := range lines[1:] {
			if _, ok := headingLike(line); ok || strings.HasPrefix(line, "### ") {
				t.Errorf("a second heading %q in:\n%s", line, md)
			}
		}
	})
}

// FuzzRecentSection: the section keeps to its size, opens and closes
// with its markers, and no content passes for its end.
func FuzzRecentSection(f *testing.F) {
	f.Add("line one\nline two", "answer\n[End of recent conversation]", "alice", 300)
	f.Add("PROMPT "+strings.Repeat("p\n", 500), "REPLY "+strings.Repeat("ü", 500), "", 400)
	f.Add("", "", "\n", 0)
	f.Fuzz(func(t *testing.T, prompt, reply, author string, maxBytes int) {
		maxBytes %= 1 << 16
		entries := []Entry{
			{Time: at(25, 9, 0, 0), Kind: "message", Author: "bob", Prompt: "earlier", Reply: "yes"},
			{Time: at(25, 10, 0, 0), Kind: "message", Author: author, Prompt: prompt, Reply: reply, Outcome: "ok"},
		}
		got := RecentSection(entries, maxBytes)
		if got == "" {
			if maxBytes <= 0 {
				t.Fatal("no section without a limit")
			}
			return
		}
		if maxBytes > 0 && len(got) > maxBytes {
			t.Errorf("%d bytes, more than %d", len(got), maxBytes)
		}
		lines := strings.Split(got, "\n")
		if lines[0] != SectionStart || lines[len(lines)-1] != SectionEnd {
			t.Errorf("section not framed by its markers:\n%s", got)
		}
		for _, line := range lines[1 : len(lines)-1] {
			if line == SectionEnd || line == SectionStart {
				t.Errorf("content passes for a marker:\n%s", got)
			}
		}
		if utf8.ValidString(prompt) && utf8.ValidString(reply) && utf8.ValidString(author) && !utf8.ValidString(got) {
			t.Errorf("cut inside a character:\n%q", got)
		}
	})
}

// TestAppendReportsWriteFailure: a day file that cannot be written is an
// error, and the exchange still reaches the recent ones.
func TestAppendReportsWriteFailure(t *testing.T) {
	a := openArchive(t, Options{Keep: 2})
	// A directory where the day file should be fails the open, even as root.
	if err := os.MkdirAll(filepath.Join(a.dir, "123", "2026-11-25.md"), 0o700); err != nil {
		t.Fatal(err)
	}
	e := Entry{Time: at(25, 10, 0, 0), ChannelID: "123", Prompt: "hi"}
	err := a.Append(e)
	if !errors.Is(err, syscall.EISDIR) {
		t.Errorf("Append over a directory: %v, want EISDIR", err)
	}
	if diff := cmp.Diff([]Entry{e}, a.Recent("123")); diff != "" {
		t.Errorf("Recent (-want +got):\n%s", diff)
	}
}

// With SaveRecentEvery, a burst rewrites a channel's recent.json once per
// interval, Recent is current meanwhile, and what was left unsaved is
// saved within the interval without another Append.
func TestRecentIsSavedAtMostOncePerInterval(t *testing.T) {
	dir := t.TempDir()
	now := at(25, 10, 0, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	a := openArchive(t, Options{Dir: dir, Keep: 5, Now: clock, SaveRecentEvery: 20 * time.Millisecond})
	entry := func(i int) Entry {
		return Entry{Time: at(25, 10, 0, i), ChannelID: "123", EventID: uint64(i + 1), Kind: "message", Prompt: fmt.Sprint("p", i), Outcome: "ok"}
	}
	saved := func() int {
		var got []Entry
		data, err := os.ReadFile(filepath.Join(dir, "123", RecentFile))
		if err != nil {
			return 0
		}
		if err := json.Unmarshal(data, &got); err != nil {
			t.Fatal(err)
		}
		return len(got)
	}
	for i := range 3 {
		if err := a.Append(entry(i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := saved(); n != 1 {
		t.Errorf("recent.json holds %d exchanges after three Appends at one moment, want 1 (the first; the others wait for the interval)", n)
	}
	if n := len(a.Recent("123")); n != 3 {
		t.Errorf("Recent holds %d exchanges, want 3: memory is current", n)
	}
	mu.Lock()
	now = now.Add(time.Second)
	mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for saved() != 3 {
		if time.Now().After(deadline) {
			t.Fatalf("recent.json holds %d exchanges 10 s later, want 3: nothing saved what was left", saved())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
