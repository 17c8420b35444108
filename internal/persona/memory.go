package persona

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/agentgateway/gateway/internal/atomicfile"
)

// MemoryGuard keeps every fact in memory.md when agent runs overlap (DESIGN
// decision 4). Two runs (in different lanes) may each rewrite memory.md
// whole from what they read when they started, so the later write would drop
// the earlier run's fact. The guard remembers the content each active run
// began with (its base) and the latest content the guard itself has seen or
// written (known). When a run begins, after each of a run's tool results and
// when it ends, it reads the file and merges line by line: lines added since
// some active run began that the file now lacks are put back (that run may
// have rewritten the file from its old copy), lines deleted since some active
// run began that the file has again are removed, and every other edit stands.
//
// Merging against every active run, not only the one reporting, matters: a
// run reports after its own tool, but the file may hold another run's write
// that has not been reported yet, and only that run's base tells a stale
// rewrite from a deliberate deletion. The cost is that a line added while
// other runs are active cannot be deleted until they have ended (it comes
// back), and a line deleted then cannot be re-added: losing a fact is worse
// than keeping one.
//
// The guard sees the file only when a run reports, so it cannot help in two
// cases: a write that another agent overwrites before any run has reported,
// and an agent write that lands in the instant between the guard's last look
// at the file and its own replace (it re-reads just before, and starts over
// when the file moved, to keep that instant short). The runtime reports
// after every tool result, and the preamble asks the agent to edit rather
// than rewrite, to keep both rare.
//
// The guard merges a memory.md of up to MaxFileSize bytes (256 KiB), the
// same bound the prompt applies. It never reads more than that: a larger file
// is left exactly as it is (not merged, never truncated or rewritten, so
// nothing in it is lost), and each run that meets it is told once with
// ErrMemoryTooLarge. Merging resumes when the file is back under the limit.
//
// With a shared copy (Share), the guard also merges the file with a copy of
// memory.md that guards on other machines merge into too, when a run begins
// and ends and around Edit (see SharedMemory).
//
// Use one MemoryGuard per memory.md path. It is safe for concurrent use.
type MemoryGuard struct {
	path string

	mu     sync.Mutex // guards known, active, shared and synced, and serializes each read-merge-write of the file
	known  string     // the file as the guard last saw or wrote it
	active map[*MemoryRun]struct{}
	shared SharedMemory
	// synced is the shared copy as this guard last merged with it: the
	// common ancestor of the file and the shared copy. nil until the first
	// merge.
	synced *string
	// cache saves rereading an unchanged file at every run's start and end.
	cache fileCache
}

// ErrMemoryTooLarge is returned, once per run, when memory.md is larger than
// MaxFileSize: the guard did not merge it and left it as it is.
var ErrMemoryTooLarge = errors.New("memory.md is too large to merge")

// NewMemoryGuard returns a guard for the memory file at path.
func NewMemoryGuard(path string) *MemoryGuard {
	return &MemoryGuard{path: path, active: map[*MemoryRun]struct{}{}}
}

// MemoryRun is one agent run's view of memory.md. Its methods may be called
// from any goroutine. Every run must End.
type MemoryRun struct {
	g    *MemoryGuard
	base string // the file when the run began; written under g.mu, then fixed
	// told is set once the run has returned ErrMemoryTooLarge; guarded by g.mu.
	told bool
}

// Begin starts a run: it merges what other active runs may have left
// unreported, then the file's content becomes the run's base. When the file
// cannot be read, the guard's known content is the base.
func (g *MemoryGuard) Begin() *MemoryRun {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.syncLocked(nil) // on error the known content stands
	// Before the base is taken: what other machines' runs wrote is then
	// part of the file this run starts from. An error shows again at End.
	_ = g.shareLocked()
	r := &MemoryRun{g: g, base: g.known}
	g.active[r] = struct{}{}
	return r
}

// Observe merges after one of the run's tools reported a result (the agent
// may just have written memory.md). A file over MaxFileSize is left alone;
// the first Observe or End of the run that meets one returns
// ErrMemoryTooLarge, later ones return nil.
func (r *MemoryRun) Observe() error {
	r.g.mu.Lock()
	defer r.g.mu.Unlock()
	return r.tellOnce(r.g.syncLocked(r))
}

// End merges once more and ends the run, reporting a too large file like
// Observe does; with a shared copy it then merges the file with it.
// Calling it again only merges.
func (r *MemoryRun) End() error {
	r.g.mu.Lock()
	defer r.g.mu.Unlock()
	defer delete(r.g.active, r)
	if err := r.tellOnce(r.g.syncLocked(r)); err != nil {
		return err
	}
	return r.g.shareLocked()
}

// tellOnce lets ErrMemoryTooLarge through the first time only. g.mu must be
// held.
func (r *MemoryRun) tellOnce(err error) error {
	if !errors.Is(err, ErrMemoryTooLarge) {
		return err
	}
	if r.told {
		return nil
	}
	r.told = true
	return err
}

// Edit changes memory.md on the gateway's behalf (the agent's memory
// actions): under the guard's lock it merges what runs left first, then
// writes change's result atomically. Runs in progress merge against it as
// against any concurrent write, so neither side loses a line. A file over
// MaxFileSize is not edited (ErrMemoryTooLarge).
//
// With a shared copy, the file is merged with it before change sees it (so
// a line to forget is there to forget) and after the write (so other
// machines see the edit without waiting for this one's next run).
func (g *MemoryGuard) Edit(change func(content string) (string, error)) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.syncLocked(nil); err != nil {
		return err
	}
	if err := g.shareLocked(); err != nil {
		return err
	}
	cur, perm, err := g.read()
	if err != nil {
		return err
	}
	next, err := change(cur)
	if err != nil || next == cur {
		return err
	}
	if err := atomicfile.Write(g.path, []byte(next), perm); err != nil {
		return fmt.Errorf("write memory.md: %w", err)
	}
	g.known = next
	return g.shareLocked()
}

// SharedMemory is a copy of memory.md that guards on other machines merge
// into too (with NATS_URL, a key in a JetStream bucket: package
// kvpersona). A guard given one (Share) merges its file with it when a run
// begins, so the run starts from what every machine knows, and when a run
// ends, so what the run wrote reaches the others.
//
// The guard keeps the common ancestor: the shared text as it last merged
// with it. Whatever changed in the file since then (this machine's runs, a
// fact written while the shared copy was unreachable) and whatever changed
// in the shared copy (other machines' runs) are merged line by line with
// MergeLines: additions on either side are kept, a deletion on either side
// stands.
type SharedMemory interface {
	// Merge merges into the shared copy what local changed since base
	// (nil before the guard's first merge: then nothing counts as
	// deleted), and the shared copy's own changes into the result, which
	// it returns and from then on holds. ok false means the shared copy was
	// not changed (unreachable, too large, conflicting too often): the
	// guard keeps its file and its base, and merges again next time. The
	// implementation reports its failures itself.
	Merge(base *string, local string) (merged string, ok bool)
}

// Share makes the guard merge memory.md with shared when a run begins and
// ends and around Edit. Without it (nil), the guard works on the file
// alone.
func (g *MemoryGuard) Share(shared SharedMemory) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.shared = shared
}

// IsShared reports whether memory.md is shared with other machines (Share).
func (g *MemoryGuard) IsShared() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.shared != nil
}

// Refresh merges what runs left and then the shared copy into memory.md,
// outside any run. Call it before reading the persona for a turn, so the
// prompt already holds what runs on other machines added (Begin merges
// again, which is then usually a no-op). Without a shared copy it only
// merges what runs left.
func (g *MemoryGuard) Refresh() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.syncLocked(nil); err != nil {
		return err
	}
	return g.shareLocked()
}

// shareLocked merges the file with the shared copy, if there is one, and
// makes the result the file and the known content. A file over
// MaxFileSize is left alone (the run is told by syncLocked). g.mu must be
// held.
func (g *MemoryGuard) shareLocked() error {
	if g.shared == nil {
		return nil
	}
	cur, perm, err := g.readCached()
	if errors.Is(err, ErrMemoryTooLarge) {
		return nil
	}
	if err != nil {
		return err
	}
	shared, ok := g.shared.Merge(g.synced, cur)
	if !ok {
		return nil
	}
	next := shared
	for attempt := 0; next != cur; attempt++ {
		// As in syncLocked: an agent may have written while the shared
		// copy was merged. Its write is the file now, with the shared
		// copy's changes laid over it; the write reaches the shared copy
		// at the next merge, as a change since shared.
		again, _, err := g.read()
		if err != nil {
			return err
		}
		if again != cur && attempt < maxMergeRetries {
			next, cur = merge3(cur, next, again), again
			continue
		}
		if err := atomicfile.Write(g.path, []byte(next), perm); err != nil {
			// The shared copy holds shared; the base stays the older
			// text, so the next merge finds this file's changes in it
			// already and does not double them.
			return fmt.Errorf("write memory.md merged with the shared copy: %w", err)
		}
		break
	}
	g.known = next
	g.synced = &shared
	return nil
}

// MergeLines merges two edits of memory.md line by line, with the rules
// the guard applies between runs: base is the text both started from,
// theirs and ours the edited texts. A line added on either side is kept,
// and a line added on both is not doubled; a line deleted on either side
// is deleted (copies added on the other side stay); every other line is as
// in ours. The result has ours' order, with theirs' additions placed after
// the nearest line before them in theirs that the result keeps, or at the
// top. It is a pure function.
func MergeLines(base, theirs, ours string) string { return merge3(base, theirs, ours) }

// maxMergeRetries bounds how often a merge starts over because the file
// changed while it merged.
const maxMergeRetries = 3

// syncLocked merges the file against the bases of the active runs and r (if
// not nil) and makes the result the known content. g.mu must be held.
func (g *MemoryGuard) syncLocked(r *MemoryRun) error {
	bases := make([]string, 0, len(g.active)+1)
	for a := range g.active {
		bases = append(bases, a.base)
	}
	if _, ok := g.active[r]; r != nil && !ok {
		bases = append(bases, r.base)
	}
	for attempt := 0; ; attempt++ {
		cur, perm, err := g.readCached()
		if err != nil {
			return err
		}
		if cur == g.known && allEqual(bases, cur) {
			return nil // nothing changed since every run began: nothing to merge
		}
		merged := merge(bases, g.known, cur)
		if merged == cur {
			g.known = cur
			return nil
		}
		// An agent may have written while we merged: look once more right
		// before replacing the file, so its write is merged, not lost. A
		// file that cannot be read whole now (it may have grown past the
		// limit) is not replaced.
		again, _, err := g.read()
		if err != nil {
			return err
		}
		if again != cur && attempt < maxMergeRetries {
			continue
		}
		if err := atomicfile.Write(g.path, []byte(merged), perm); err != nil {
			return fmt.Errorf("restore memory.md: %w", err)
		}
		g.known = merged
		return nil
	}
}

// readCached is read, taken from the cache while the file is unchanged.
func (g *MemoryGuard) readCached() (string, os.FileMode, error) {
	var perm os.FileMode = filePerm
	content, fi, err := g.cache.read(g.path, func() (string, error) {
		c, p, err := g.read()
		perm = p
		return c, err
	})
	if err == nil && fi != nil {
		perm = fi.Mode().Perm()
	}
	return content, perm, err
}

// read returns the file's content and mode; a missing file is empty. It
// reads at most MaxFileSize+1 bytes and fails with ErrMemoryTooLarge when the
// file is larger than MaxFileSize.
func (g *MemoryGuard) read() (string, os.FileMode, error) {
	f, err := os.Open(g.path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", filePerm, nil
	}
	if err != nil {
		return "", 0, fmt.Errorf("read memory.md: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", 0, fmt.Errorf("read memory.md: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return "", 0, fmt.Errorf("read memory.md: not a regular file (%s)", fi.Mode().Type())
	}
	if fi.Size() > MaxFileSize {
		return "", 0, tooLarge(fi.Size())
	}
	// The file may grow between Stat and the read: never read past the limit.
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return "", 0, fmt.Errorf("read memory.md: %w", err)
	}
	if len(data) > MaxFileSize {
		return "", 0, tooLarge(int64(len(data)))
	}
	return string(data), fi.Mode().Perm(), nil
}

// tooLarge is the error for a memory.md of at least size bytes.
func tooLarge(size int64) error {
	return fmt.Errorf("%w: at least %d bytes, the limit is %d (%d KiB); left as it is, not merged",
		ErrMemoryTooLarge, size, MaxFileSize, MaxFileSize>>10)
}

func allEqual(bases []string, s string) bool {
	for _, b := range bases {
		if b != s {
			return false
		}
	}
	return true
}

// merge3 is merge for a single run.
func merge3(base, known, cur string) string { return merge([]string{base}, known, cur) }

// merge merges memory.md line by line. bases are the files as the active
// runs began, known the file as the guard last saw it, cur the file now.
// Per distinct line, with k and c its counts in known and cur and b its
// count in one base:
//
//   - k > b (added since that base): keep min(max(c, k), c+k-b) copies, so
//     the added copies are there whether cur was derived from that base or
//     from known, and a line a run added too is not doubled;
//   - k < b (deleted since that base): keep max(min(c, k), c-(b-k)), so the
//     deleted copies go but copies added on top stay;
//   - k == b: c, the edit stands.
//
// Over several bases the most copies any addition asks for win; otherwise
// the fewest any deletion asks for. Removed copies are taken from the end of
// cur. An added line goes right after the nearest line before it in known
// that the result keeps, or at the top if there is none.
func merge(bases []string, known, cur string) string {
	if known == cur || len(bases) == 0 {
		return cur
	}
	knownLines, curLines := splitLines(known), splitLines(cur)
	kc, cc := counts(knownLines), counts(curLines)
	bcs := make([]map[string]int, 0, len(bases))
	changed := false
	for _, b := range bases {
		if b != known {
			bcs = append(bcs, counts(splitLines(b)))
			changed = true
		}
	}
	if !changed {
		return cur // no active run has missed anything
	}
	target := func(line string) int {
		k, c := kc[line], cc[line]
		hi, lo := c, c
		for _, bc := range bcs {
			switch b := bc[line]; {
			case k > b:
				hi = max(hi, min(max(c, k), c+k-b))
			case k < b:
				lo = min(lo, max(min(c, k), c-(b-k)))
			}
		}
		if hi > c {
			return hi
		}
		return lo
	}
	add, drop := map[string]int{}, map[string]int{}
	consider := func(line string) {
		if _, done := add[line]; done {
			return
		}
		if _, done := drop[line]; done {
			return
		}
		switch t, c := target(line), cc[line]; {
		case t > c:
			add[line] = t - c
		case t < c:
			drop[line] = c - t
		}
	}
	for line := range kc {
		consider(line)
	}
	for _, bc := range bcs {
		for line := range bc {
			consider(line)
		}
	}
	if len(add) == 0 && len(drop) == 0 {
		return cur
	}

	kept := make([]string, 0, len(curLines))
	for i := len(curLines) - 1; i >= 0; i-- {
		if line := curLines[i]; drop[line] > 0 {
			drop[line]--
		} else {
			kept = append(kept, line)
		}
	}
	slices.Reverse(kept)

	// Match the n-th copy of a line in known with its n-th copy in kept;
	// copies beyond those are the ones to insert.
	where := map[string][]int{}
	for i, line := range kept {
		where[line] = append(where[line], i)
	}
	after := map[int][]string{} // kept index -> lines to insert after it; -1: before all
	seen := map[string]int{}
	anchor := -1
	for _, line := range knownLines {
		n := seen[line]
		seen[line]++
		if pos := where[line]; n < len(pos) {
			anchor = pos[n]
			continue
		}
		if add[line] > 0 {
			add[line]--
			after[anchor] = append(after[anchor], line)
		}
	}

	out := make([]string, 0, len(kept)+len(knownLines))
	out = append(out, after[-1]...)
	for i, line := range kept {
		out = append(out, line)
		out = append(out, after[i]...)
	}
	if len(out) == 0 {
		return ""
	}
	s := strings.Join(out, "\n")
	// A blank last line exists only with its newline ("" is no line).
	if strings.HasSuffix(cur, "\n") || (cur == "" && strings.HasSuffix(known, "\n")) || out[len(out)-1] == "" {
		s += "\n"
	}
	return s
}

// splitLines splits s into lines; a final newline ends the last line.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

func counts(lines []string) map[string]int {
	m := make(map[string]int, len(lines))
	for _, l := range lines {
		m[l]++
	}
	return m
}
