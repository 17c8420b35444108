package persona

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentgateway/gateway/internal/atomicfile"
)

func TestMerge3(t *testing.T) {
	tests := []struct {
		name                   string
		base, known, cur, want string
	}{
		{"nobody else changed anything", "a\n", "a\n", "a\nmine\n", "a\nmine\n"},
		{"cur already has everything", "a\n", "a\nb\n", "a\nb\n", "a\nb\n"},
		{"a fact added by another run comes back after its line", "# M\n- x\n- y\n", "# M\n- x\n- other\n- y\n", "# M\n- x\n- y\n- mine\n", "# M\n- x\n- other\n- y\n- mine\n"},
		{"added lines keep their order", "h\n", "h\n1\n2\n3\n", "h\nmine\n", "h\n1\n2\n3\nmine\n"},
		{"an added line at the top", "a\n", "top\na\n", "a\nmine\n", "top\na\nmine\n"},
		{"the line before it is gone: the nearest earlier one", "h\nold\n", "h\nold\nnew\n", "h\n", "h\nnew\n"},
		{"nothing before it is left: at the top", "old\n", "old\nnew\n", "mine\n", "new\nmine\n"},
		{"a line another run deleted stays deleted", "h\n- stale\n- keep\n", "h\n- keep\n", "h\n- stale\n- keep\n- mine\n", "h\n- keep\n- mine\n"},
		{"the run's own deletion stands", "h\n- a\n- b\n", "h\n- a\n- b\n", "h\n- b\n", "h\n- b\n"},
		{"a line added by both is not doubled", "h\n", "h\n- same\n", "h\n- same\n", "h\n- same\n"},
		{"the run deleted what another added after it began: it comes back", "h\n- a\n", "h\n- a\n- b\n", "h\n", "h\n- b\n"},
		{"duplicates: one copy deleted by another run", "- x\n- x\n", "- x\n", "- x\n- x\n- y\n", "- x\n- y\n"},
		{"duplicates: cur already without it", "- x\n- x\n", "- x\n", "- x\n- y\n", "- x\n- y\n"},
		{"duplicates: the run adds a copy of a deleted line", "- x\n- x\n", "- x\n", "- x\n- x\n- x\n", "- x\n- x\n"},
		{"duplicates: another run added a copy", "- x\n", "- x\n- x\n", "- x\n- y\n", "- x\n- x\n- y\n"},
		{"blank lines count as lines", "# M\n", "# M\n\n- a\n", "# M\n\n- b\n", "# M\n\n- a\n- b\n"},
		{"the file was deleted", "h\n- a\n", "h\n- a\n- b\n", "", "- b\n"},
		{"no final newline stays so", "h\n", "h\n- a\n", "h\n- b", "h\n- a\n- b"},
		{"empty everything", "", "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, merge3(tt.base, tt.known, tt.cur)); diff != "" {
				t.Errorf("merge3 (-want +got):\n%s", diff)
			}
		})
	}
}

// guardFile is a memory.md with its guard.
type guardFile struct {
	t    *testing.T
	path string
	g    *MemoryGuard
}

func newGuardFile(t *testing.T, content string) *guardFile {
	t.Helper()
	path := filepath.Join(t.TempDir(), MemoryFile)
	writeFile(t, path, content)
	return &guardFile{t: t, path: path, g: NewMemoryGuard(path)}
}

func (f *guardFile) read() string {
	f.t.Helper()
	data, err := os.ReadFile(f.path)
	if err != nil {
		f.t.Fatal(err)
	}
	return string(data)
}

func (f *guardFile) write(s string) {
	f.t.Helper()
	writeFile(f.t, f.path, s)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// DESIGN decision 4: two runs start from the same memory.md; A writes
// base+factA, B later writes base+factB over it. Whatever the order, with an
// observation after each write, both facts survive.
func TestMemoryGuardTwoRuns(t *testing.T) {
	const base = "# Memory\n- base fact\n"
	orders := []string{
		"Aw Ao Bw Bo Ae Be",
		"Aw Ao Bw Bo Be Ae",
		"Bw Bo Aw Ao Ae Be",
		"Aw Ao Ae Bw Bo Be",
		"Aw Bo Ao Bw Bo Be Ae", // B observes a write that is not its own
		"Aw Ae Bw Be",          // only the ends observe
	}
	for _, order := range orders {
		t.Run(order, func(t *testing.T) {
			f := newGuardFile(t, base)
			runs := map[byte]*MemoryRun{'A': f.g.Begin(), 'B': f.g.Begin()}
			for _, op := range strings.Fields(order) {
				r := runs[op[0]]
				switch op[1] {
				case 'w':
					f.write(base + "- fact " + op[:1] + "\n")
				case 'o':
					must(t, r.Observe())
				case 'e':
					must(t, r.End())
				}
			}
			got := f.read()
			for _, fact := range []string{"- base fact\n", "- fact A\n", "- fact B\n"} {
				if strings.Count(got, fact) != 1 {
					t.Errorf("memory.md has %q %d times:\n%s", fact, strings.Count(got, fact), got)
				}
			}
		})
	}
}

// Another run may report (or a run may begin) between a stale rewrite and
// the writing run's own report. The guard must not take the rewrite for the
// reporting run's edit: the dropped fact comes back, the resurrected line
// goes (the case a single-base merge gets wrong).
func TestMemoryGuardUnreportedForeignWrite(t *testing.T) {
	for _, between := range []string{"end", "observe", "begin"} {
		t.Run(between, func(t *testing.T) {
			f := newGuardFile(t, "# Memory\n- deleted by A\n")
			a := f.g.Begin()
			b := f.g.Begin() // B's agent read the file now
			f.write("# Memory\n- fact A\n")
			must(t, a.Observe())
			c := f.g.Begin()                                // C's base has fact A
			f.write("# Memory\n- deleted by A\n- fact B\n") // B rewrites from its stale view
			switch between {
			case "end":
				must(t, c.End())
			case "observe":
				must(t, c.Observe())
			case "begin":
				f.g.Begin()
			}
			must(t, b.Observe())
			must(t, b.End())
			must(t, a.End())
			if diff := cmp.Diff("# Memory\n- fact A\n- fact B\n", f.read()); diff != "" {
				t.Errorf("memory.md (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMemoryGuardDeletionStaysDeleted(t *testing.T) {
	f := newGuardFile(t, "# Memory\n- wrong\n- right\n")
	a, b := f.g.Begin(), f.g.Begin()
	f.write("# Memory\n- right\n") // A's agent deletes a wrong fact
	must(t, a.Observe())
	f.write("# Memory\n- wrong\n- right\n- from B\n") // B rewrites from its stale view
	must(t, b.Observe())
	must(t, a.End())
	must(t, b.End())
	if diff := cmp.Diff("# Memory\n- right\n- from B\n", f.read()); diff != "" {
		t.Errorf("memory.md (-want +got):\n%s", diff)
	}
}

func TestMemoryGuardKeepsHumanEdits(t *testing.T) {
	f := newGuardFile(t, "# Memory\n- old\n- keep\n")
	r := f.g.Begin()
	f.write("# Memory\n- old\n- keep\n- agent fact\n")
	must(t, r.Observe())
	must(t, r.End())
	// Between runs a human deletes one line and adds another.
	f.write("# Memory\n- keep\n- agent fact\n- added by a human\n")
	r = f.g.Begin()
	f.write(f.read() + "- next fact\n")
	must(t, r.Observe())
	must(t, r.End())
	if diff := cmp.Diff("# Memory\n- keep\n- agent fact\n- added by a human\n- next fact\n", f.read()); diff != "" {
		t.Errorf("memory.md (-want +got):\n%s", diff)
	}
	// A human edit during a run the agent does not touch stays too.
	r = f.g.Begin()
	f.write("# Memory\n- human again\n")
	must(t, r.End())
	if got := f.read(); got != "# Memory\n- human again\n" {
		t.Errorf("memory.md = %q", got)
	}
}

func TestMemoryGuardKeepsMode(t *testing.T) {
	f := newGuardFile(t, "h\n")
	must(t, os.Chmod(f.path, 0o640))
	a, b := f.g.Begin(), f.g.Begin()
	f.write("h\n- a\n")
	must(t, a.Observe())
	f.write("h\n- b\n")
	must(t, b.End())
	if fi, err := os.Stat(f.path); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("mode after a merge: %v, %v", fi.Mode(), err)
	}
	if got := f.read(); got != "h\n- a\n- b\n" {
		t.Errorf("memory.md = %q", got)
	}
}

// The property behind DESIGN decision 4. Runs begin at random times, each
// adds facts one write at a time and may delete lines of the original file
// (each line by at most one run). A run's agent either rewrites the whole file
// from what it read when the run began (the dangerous case) or edits the
// current file. The runtime observes after each write before any other write
// lands; observations and ends otherwise interleave at random. In the end
// every fact is there once, every deleted line is gone and every other
// original line is still there.
func TestMemoryGuardProperty(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(4, 4))
	for iter := 0; iter < 300; iter++ {
		var original []string
		for i := rng.IntN(6); i >= 0; i-- {
			original = append(original, fmt.Sprintf("- original %d", i))
		}
		f := newGuardFile(t, "# Memory\n"+strings.Join(original, "\n")+"\n")

		type run struct {
			r       *MemoryRun
			base    []string // the file's lines when the run began
			stale   bool
			facts   []string
			deletes []string
			written int
			steps   []byte // b(egin), w(rite), o(bserve), x (extra observe), e(nd)
		}
		n := 2 + rng.IntN(3)
		runs := make([]*run, n)
		deletedBy := map[string]bool{}
		for i := range runs {
			r := &run{stale: rng.IntN(2) == 0}
			for j := rng.IntN(3); j >= 0; j-- {
				r.facts = append(r.facts, fmt.Sprintf("- fact %d.%d", i, j))
			}
			for _, line := range original {
				if !deletedBy[line] && rng.IntN(4) == 0 {
					deletedBy[line] = true
					r.deletes = append(r.deletes, line)
				}
			}
			r.steps = []byte{'b'}
			for range r.facts {
				r.steps = append(r.steps, 'w', 'o')
				if rng.IntN(2) == 0 {
					r.steps = append(r.steps, 'x')
				}
			}
			r.steps = append(r.steps, 'e')
			runs[i] = r
		}
		pending := -1 // the run whose write awaits its observation
		var trace []string
		for {
			var ready []int
			for i, r := range runs {
				if len(r.steps) > 0 && (r.steps[0] != 'w' || pending < 0) {
					ready = append(ready, i)
				}
			}
			if len(ready) == 0 {
				break
			}
			i := ready[rng.IntN(len(ready))]
			r := runs[i]
			step := r.steps[0]
			r.steps = r.steps[1:]
			trace = append(trace, fmt.Sprintf("%d%c", i, step))
			switch step {
			case 'b':
				r.r = f.g.Begin()
				r.base = splitLines(f.read())
			case 'w':
				r.written++
				var lines []string
				if r.stale {
					lines = slices.Clone(r.base)
				} else {
					lines = splitLines(f.read())
				}
				lines = slices.DeleteFunc(lines, func(l string) bool { return slices.Contains(r.deletes, l) })
				for _, fact := range r.facts[:r.written] {
					if !slices.Contains(lines, fact) {
						lines = append(lines, fact)
					}
				}
				f.write(strings.Join(lines, "\n") + "\n")
				pending = i
			case 'o', 'x':
				must(t, r.r.Observe())
				if step == 'o' {
					pending = -1
				}
			case 'e':
				must(t, r.r.End())
			}
		}
		got := f.read()
		lines := splitLines(got)
		for _, r := range runs {
			for _, fact := range r.facts {
				if c := strings.Count("\n"+got, "\n"+fact+"\n"); c != 1 {
					t.Fatalf("iteration %d: %q %d times\ntrace %v\n%s", iter, fact, c, trace, got)
				}
			}
		}
		for _, line := range original {
			if has := slices.Contains(lines, line); has == deletedBy[line] {
				t.Fatalf("iteration %d: %q present=%v, deleted=%v\ntrace %v\n%s", iter, line, has, deletedBy[line], trace, got)
			}
		}
	}
}

// Runs on many goroutines: the guard is race free and loses nothing when
// each agent write is observed before the next write (agents write
// atomically here; Begin runs concurrently with everything).
func TestMemoryGuardConcurrentRuns(t *testing.T) {
	f := newGuardFile(t, "# Memory\n")
	var agents sync.Mutex // one agent write and its observation, or one End, at a time
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := f.g.Begin()
			base, err := os.ReadFile(f.path)
			if err != nil {
				t.Error(err)
				return
			}
			agents.Lock()
			err = atomicfile.Write(f.path, fmt.Appendf(base, "- fact %d\n", i), 0o644)
			if err == nil {
				err = r.Observe()
			}
			agents.Unlock()
			agents.Lock()
			if err == nil {
				err = r.End()
			}
			agents.Unlock()
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	got := f.read()
	for i := range 16 {
		if !strings.Contains(got, fmt.Sprintf("- fact %d\n", i)) {
			t.Errorf("fact %d lost:\n%s", i, got)
		}
	}
}

func TestMemoryGuardMissingAndUnreadable(t *testing.T) {
	dir := t.TempDir()
	g := NewMemoryGuard(filepath.Join(dir, MemoryFile))
	r := g.Begin()
	if err := r.End(); err != nil {
		t.Errorf("End without a memory.md: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, MemoryFile)); err == nil {
		t.Error("the guard created memory.md")
	}
	if err := os.Mkdir(filepath.Join(dir, MemoryFile), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := g.Begin().Observe(); err == nil {
		t.Error("Observe of a directory succeeded")
	}
}

// A memory.md larger than the merge limit is left exactly as it is, even
// when a merge would have changed it, and the run is told once.
func TestMemoryGuardLeavesLargeFileAlone(t *testing.T) {
	f := newGuardFile(t, "# Memory\n- old\n")
	a, b := f.g.Begin(), f.g.Begin()
	f.write("# Memory\n- old\n- fact A\n")
	must(t, a.Observe())
	// B rewrites from its stale view, and the file is now over the limit:
	// a merge would put fact A back, which means rewriting the whole file.
	big := "# Memory\n- old\n" + strings.Repeat("- filler line of text\n", MaxFileSize/22+1)
	if len(big) <= MaxFileSize {
		t.Fatalf("test file has %d bytes, want more than %d", len(big), MaxFileSize)
	}
	f.write(big)
	err := b.Observe()
	if !errors.Is(err, ErrMemoryTooLarge) {
		t.Errorf("Observe of a too large file = %v, want ErrMemoryTooLarge", err)
	}
	// Reported once per run.
	must(t, b.Observe())
	must(t, b.End())
	if err := a.End(); !errors.Is(err, ErrMemoryTooLarge) {
		t.Errorf("End of the other run = %v, want ErrMemoryTooLarge", err)
	}
	if got := f.read(); got != big {
		t.Errorf("the guard changed a file over the limit: %d bytes, want %d untouched", len(got), len(big))
	}

	// Back under the limit, merging resumes.
	c, d := f.g.Begin(), f.g.Begin()
	f.write("# Memory\n- fact C\n")
	must(t, c.Observe())
	f.write("# Memory\n- fact D\n")
	must(t, d.End())
	must(t, c.End())
	if diff := cmp.Diff("# Memory\n- fact C\n- fact D\n", f.read()); diff != "" {
		t.Errorf("memory.md (-want +got):\n%s", diff)
	}
}

// The guard reads at most MaxFileSize+1 bytes of memory.md, whatever its
// size: a 64 MiB file (sparse, so the test costs no disk) must not cost
// anywhere near 64 MiB of allocations.
func TestMemoryGuardReadIsBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), MemoryFile)
	const size = 64 << 20
	fh, err := os.Create(path)
	must(t, err)
	must(t, fh.Truncate(size))
	must(t, fh.Close())
	g := NewMemoryGuard(path)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r := g.Begin()
	_ = r.Observe()
	_ = r.End()
	runtime.ReadMemStats(&after)

	if got, limit := after.TotalAlloc-before.TotalAlloc, uint64(8*MaxFileSize); got > limit {
		t.Errorf("a run over a %d MiB memory.md allocated %d KiB, want at most %d KiB", size>>20, got>>10, limit>>10)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != size {
		t.Errorf("memory.md after the run: %v, %v; want it untouched at %d bytes", fi, err, size)
	}
}
