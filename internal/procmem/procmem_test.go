package procmem

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// claudeRollup is /proc/<pid>/smaps_rollup of an idle claude -p
// --input-format stream-json process (claude 2.1.330, Linux 6.18), while a
// second such process ran: its file-backed pages (Pss_File) are half of
// the binary's pages.
func claudeRollup(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "claude_smaps_rollup.txt"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var parseTests = []struct {
	name string
	text string
	want Rollup
	err  bool
}{
	{name: "before Linux 5.9: no split", text: "00400000-7ffd [rollup]\nRss:   2048 kB\nPss:  1024 kB\nShared_Clean: 1024 kB\n",
		want: Rollup{RSSKB: 2048, PSSKB: 1024}},
	{name: "fields in any order, others ignored", text: "Pss_File: 5 kB\nSwapPss: 9 kB\nPss: 7 kB\nPss_Anon: 2 kB\nRss: 10 kB\n",
		want: Rollup{RSSKB: 10, PSSKB: 7, PSSAnonKB: 2, PSSFileKB: 5}},
	{name: "kernel threads have zeros", text: "Rss: 0 kB\nPss: 0 kB\n", want: Rollup{}},
	{name: "empty", text: "", err: true},
	{name: "no Pss", text: "Rss: 10 kB\n", err: true},
	{name: "no Rss", text: "Pss: 10 kB\n", err: true},
	{name: "Pss twice", text: "Rss: 10 kB\nPss: 1 kB\nPss: 2 kB\n", err: true},
	{name: "other unit", text: "Rss: 10 MB\nPss: 1 kB\n", err: true},
	{name: "no unit", text: "Rss: 10\nPss: 1 kB\n", err: true},
	{name: "negative", text: "Rss: 10 kB\nPss: -1 kB\n", err: true},
	{name: "not a number", text: "Rss: 10 kB\nPss: 0x10 kB\n", err: true},
	{name: "overflowing bytes", text: "Rss: 10 kB\nPss: 9223372036854775807 kB\n", err: true},
	{name: "a Pss_ line malformed", text: "Rss: 10 kB\nPss: 1 kB\nPss_Anon: lots kB\n", err: true},
}

func TestParseRollup(t *testing.T) {
	t.Parallel()
	t.Run("recorded from claude", func(t *testing.T) {
		got, err := ParseRollup(claudeRollup(t))
		if err != nil {
			t.Fatal(err)
		}
		want := Rollup{RSSKB: 164484, PSSKB: 127046, PSSAnonKB: 90956, PSSFileKB: 36090}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("ParseRollup (-want +got):\n%s", diff)
		}
	})
	for _, tt := range parseTests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseRollup([]byte(tt.text))
			if tt.err {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("ParseRollup = %+v, %v; want ErrMalformed", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseRollup (-want +got):\n%s", diff)
			}
		})
	}
}

// formatRollup writes r as smaps_rollup text.
func formatRollup(r Rollup) string {
	return fmt.Sprintf("0-1 ---p 00000000 00:00 0 [rollup]\nRss: %d kB\nPss: %d kB\nPss_Anon: %d kB\nPss_File: %d kB\nPss_Shmem: %d kB\n",
		r.RSSKB, r.PSSKB, r.PSSAnonKB, r.PSSFileKB, r.PSSShmemKB)
}

func FuzzParseRollup(f *testing.F) {
	f.Add(claudeRollup(f))
	for _, tt := range parseTests {
		f.Add([]byte(tt.text))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseRollup(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		for _, n := range []int64{r.RSSKB, r.PSSKB, r.PSSAnonKB, r.PSSFileKB, r.PSSShmemKB} {
			if n < 0 || n > maxKB {
				t.Fatalf("size %d kB out of range in %+v", n, r)
			}
		}
		// What was read is what the text said: written back, it reads the same.
		again, err := ParseRollup([]byte(formatRollup(r)))
		if err != nil {
			t.Fatalf("%+v written back does not parse: %v", r, err)
		}
		if diff := cmp.Diff(r, again); diff != "" {
			t.Fatalf("round trip (-first +second):\n%s", diff)
		}
	})
}

// fakeProc is one process of a fake /proc tree.
type fakeProc struct {
	pid, pgrp int
	state     string
	rssPages  int64
	rollup    string // "" leaves smaps_rollup out, as when it cannot be read
}

func writeFakeProc(t *testing.T, root string, procs ...fakeProc) {
	t.Helper()
	for _, p := range procs {
		dir := filepath.Join(root, strconv.Itoa(p.pid))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		stat := fmt.Sprintf("%d (claude (x) y) %s 1 %d %d 0 -1", p.pid, p.state, p.pgrp, p.pgrp)
		files := map[string]string{"stat": stat, "statm": fmt.Sprintf("1000 %d 10 1 0 100 0\n", p.rssPages)}
		if p.rollup != "" {
			files["smaps_rollup"] = p.rollup
		}
		for name, text := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestGroupsSumsPSSOverEachGroup(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	page := int64(os.Getpagesize())
	writeFakeProc(t, root,
		fakeProc{pid: 100, pgrp: 100, state: "S", rollup: "Rss: 1000 kB\nPss: 600 kB\nPss_Anon: 400 kB\nPss_File: 200 kB\n"},
		fakeProc{pid: 101, pgrp: 100, state: "S", rollup: "Rss: 100 kB\nPss: 50 kB\nPss_Anon: 40 kB\nPss_File: 10 kB\n"},
		// Another user's process: no smaps_rollup, counted by RSS.
		fakeProc{pid: 102, pgrp: 100, state: "R", rssPages: 3},
		fakeProc{pid: 103, pgrp: 100, state: "Z", rollup: "Rss: 9 kB\nPss: 9 kB\n"},
		fakeProc{pid: 200, pgrp: 200, state: "S", rollup: "Rss: 80 kB\nPss: 40 kB\n"},
		fakeProc{pid: 300, pgrp: 300, state: "S", rollup: "Rss: 7 kB\nPss: 7 kB\n"},
	)
	if err := os.MkdirAll(filepath.Join(root, "self"), 0o755); err != nil {
		t.Fatal(err)
	}
	got := Reader{Root: root}.Groups(100, 200, 400)
	want := map[int]Usage{
		100: {PSSBytes: 650<<10 + 3*page, PSSAnonBytes: 440 << 10, PSSFileBytes: 210 << 10, RSSBytes: 1100<<10 + 3*page, Processes: 3, RSSOnly: 1},
		200: {PSSBytes: 40 << 10, RSSBytes: 80 << 10, Processes: 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Groups (-want +got):\n%s", diff)
	}
	if got := (Reader{Root: root}).Groups(); len(got) != 0 {
		t.Errorf("Groups() = %v, want none", got)
	}
}

func TestGroupsReadsThisProcess(t *testing.T) {
	t.Parallel()
	pgrp := syscall.Getpgrp()
	u := Groups(pgrp)[pgrp]
	if u.Processes < 1 || u.PSSBytes <= 0 || u.PSSBytes > u.RSSBytes {
		t.Fatalf("Groups(own group) = %+v, want this process's memory, PSS within RSS", u)
	}
}
