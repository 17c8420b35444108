package persona

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// checkMergeCounts checks MergeLines' promise per distinct line, with b, t
// and o its counts in base, theirs and ours and r in the result: copies
// either side added are there (r >= t-b, r >= o-b), nothing appears that
// neither side has (r <= max(t, o)), and an edit on one side stands when
// the other side left the line alone.
func checkMergeCounts(t *testing.T, base, theirs, ours, got string) {
	t.Helper()
	bc, tc, oc, rc := counts(splitLines(base)), counts(splitLines(theirs)), counts(splitLines(ours)), counts(splitLines(got))
	lines := map[string]bool{}
	for _, m := range []map[string]int{bc, tc, oc, rc} {
		for l := range m {
			lines[l] = true
		}
	}
	for l := range lines {
		b, th, o, r := bc[l], tc[l], oc[l], rc[l]
		switch {
		case r < th-b || r < o-b:
			t.Fatalf("line %q: %d copies, but theirs added %d and ours %d\nbase %q\ntheirs %q\nours %q\ngot %q", l, r, th-b, o-b, base, theirs, ours, got)
		case r > max(th, o):
			t.Fatalf("line %q: %d copies, more than either side has (%d, %d)\nbase %q\ntheirs %q\nours %q\ngot %q", l, r, th, o, base, theirs, ours, got)
		case th == b && r != o:
			t.Fatalf("line %q: ours has %d copies and theirs left it alone, got %d\nbase %q\ntheirs %q\nours %q\ngot %q", l, o, r, base, theirs, ours, got)
		case o == b && r != th:
			t.Fatalf("line %q: theirs has %d copies and ours left it alone, got %d\nbase %q\ntheirs %q\nours %q\ngot %q", l, th, r, base, theirs, ours, got)
		}
	}
}

func TestMergeLines(t *testing.T) {
	tests := []struct {
		name                     string
		base, theirs, ours, want string
	}{
		{"both add a fact", "# M\n", "# M\n- a\n", "# M\n- b\n", "# M\n- a\n- b\n"},
		{"they delete, we add", "# M\n- old\n", "# M\n", "# M\n- old\n- new\n", "# M\n- new\n"},
		{"we delete, they add", "# M\n- old\n", "# M\n- old\n- new\n", "# M\n", "# M\n- new\n"},
		{"no base: a union", "", "# M\n- shared\n", "# M\n- local\n", "# M\n- shared\n- local\n"},
		{"the same fact on both sides once", "# M\n", "# M\n- x\n", "# M\n- x\n", "# M\n- x\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := MergeLines(tt.base, tt.theirs, tt.ours)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("MergeLines (-want +got):\n%s", diff)
			}
			checkMergeCounts(t, tt.base, tt.theirs, tt.ours, got)
		})
	}
}

// Random edits of a random memory.md on both sides: no line either side
// added is ever dropped, and each side's deletion of a line the other left
// alone stands.
func TestMergeLinesProperty(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(26, 4))
	pool := []string{"# Memory", "", "- a", "- b", "- c", "- a", "## Facts", "- d"}
	edit := func(lines []string, side string) []string {
		out := slices.Clone(lines)
		for i := rng.IntN(3); i > 0 && len(out) > 0; i-- {
			j := rng.IntN(len(out))
			out = slices.Delete(out, j, j+1)
		}
		for i := rng.IntN(4); i > 0; i-- {
			line := pool[rng.IntN(len(pool))]
			if rng.IntN(2) == 0 {
				line = fmt.Sprintf("- %s fact %d", side, rng.IntN(5))
			}
			out = slices.Insert(out, rng.IntN(len(out)+1), line)
		}
		return out
	}
	join := func(lines []string) string {
		if len(lines) == 0 {
			return ""
		}
		return strings.Join(lines, "\n") + "\n"
	}
	for range 5000 {
		var base []string
		for i := rng.IntN(6); i > 0; i-- {
			base = append(base, pool[rng.IntN(len(pool))])
		}
		b, th, o := join(base), join(edit(base, "their")), join(edit(base, "our"))
		checkMergeCounts(t, b, th, o, MergeLines(b, th, o))
	}
}

func FuzzMergeLines(f *testing.F) {
	f.Add("# M\n", "# M\n- a\n", "# M\n- b\n")
	f.Add("# M\n- old\n", "# M\n", "# M\n- old\n- new\n")
	f.Add("- x\n- x\n", "- x\n", "- x\n- x\n- x\n")
	f.Add("", "a", "b\n")
	f.Fuzz(func(t *testing.T, base, theirs, ours string) {
		checkMergeCounts(t, base, theirs, ours, MergeLines(base, theirs, ours))
	})
}

// memShared is a SharedMemory in memory, merging as the NATS one does (the
// NATS one is tested against a real server in package kvpersona).
type memShared struct {
	mu   sync.Mutex
	text string
	down bool
	// during runs while Merge holds the guard's lock, as an agent's write
	// would land.
	during func()
}

func (s *memShared) Merge(base *string, local string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return "", false
	}
	b := ""
	if base != nil {
		b = *base
	}
	s.text = MergeLines(b, s.text, local)
	if s.during != nil {
		s.during()
		s.during = nil
	}
	return s.text, true
}

func TestMemoryGuardShare(t *testing.T) {
	shared := &memShared{text: "# Memory\n- from elsewhere\n"}
	f := newGuardFile(t, "# Memory\n- local\n")
	f.g.Share(shared)

	r := f.g.Begin()
	if diff := cmp.Diff("# Memory\n- from elsewhere\n- local\n", f.read()); diff != "" {
		t.Errorf("after Begin, memory.md (-want +got):\n%s", diff)
	}
	f.write(f.read() + "- run fact\n")
	shared.mu.Lock()
	shared.text += "- meanwhile\n"
	shared.mu.Unlock()
	must(t, r.End())
	want := "# Memory\n- from elsewhere\n- local\n- meanwhile\n- run fact\n"
	if diff := cmp.Diff(want, f.read()); diff != "" {
		t.Errorf("after End, memory.md (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, shared.text); diff != "" {
		t.Errorf("after End, the shared copy (-want +got):\n%s", diff)
	}

	// A fact written while the shared copy is unreachable is merged the
	// next time, and a deletion made elsewhere meanwhile stands.
	shared.down = true
	r = f.g.Begin()
	f.write(want + "- offline\n")
	must(t, r.End())
	shared.mu.Lock()
	shared.down = false
	shared.text = strings.Replace(shared.text, "- local\n", "", 1)
	shared.mu.Unlock()
	must(t, f.g.Refresh())
	want = "# Memory\n- from elsewhere\n- meanwhile\n- run fact\n- offline\n"
	if diff := cmp.Diff(want, f.read()); diff != "" {
		t.Errorf("after Refresh, memory.md (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, shared.text); diff != "" {
		t.Errorf("after Refresh, the shared copy (-want +got):\n%s", diff)
	}
}

// An agent writes memory.md while the guard merges with the shared copy:
// its write and the shared copy's changes both end up in the file, and the
// write reaches the shared copy at the next merge.
func TestMemoryGuardShareAgentWritesMeanwhile(t *testing.T) {
	shared := &memShared{text: "# Memory\n"}
	f := newGuardFile(t, "# Memory\n")
	f.g.Share(shared)
	r := f.g.Begin()
	shared.mu.Lock()
	shared.text = "# Memory\n- elsewhere\n"
	shared.during = func() { f.write("# Memory\n- agent\n") }
	shared.mu.Unlock()
	must(t, r.End())
	if diff := cmp.Diff("# Memory\n- elsewhere\n- agent\n", f.read()); diff != "" {
		t.Errorf("memory.md (-want +got):\n%s", diff)
	}
	must(t, f.g.Refresh())
	if diff := cmp.Diff("# Memory\n- elsewhere\n- agent\n", shared.text); diff != "" {
		t.Errorf("the shared copy after the next merge (-want +got):\n%s", diff)
	}
}
