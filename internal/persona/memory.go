package persona

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"

	"github.com/agentgateway/gateway/internal/atomicfile"
)

// MemoryGuard keeps facts in memory.md when agent runs overlap (DESIGN
// decision 4). Two runs in different channels may each read memory.md and
// later rewrite it whole, so the second write would drop the first run's
// new fact. The guard remembers the content each run started from and the
// latest content it has seen, and after each tool result and at the end of
// each run merges line by line: lines others added since the run began are
// put back, lines others removed stay removed.
type MemoryGuard struct {
	path string

	mu    sync.Mutex // guards known and serializes read-merge-write of the file
	known string     // the latest content the guard has seen or written
}

// NewMemoryGuard guards the memory file at path.
func NewMemoryGuard(path string) *MemoryGuard {
	return &MemoryGuard{path: path}
}

// MemoryRun is one agent run's view of memory.md.
type MemoryRun struct {
	g    *MemoryGuard
	base string
}

// Begin snapshots memory.md as the run's starting point.
func (g *MemoryGuard) Begin() *MemoryRun {
	g.mu.Lock()
	defer g.mu.Unlock()
	cur, _ := g.read()
	g.known = cur
	return &MemoryRun{g: g, base: cur}
}

// Observe merges after one of the run's tools finished (it may just have
// written memory.md).
func (r *MemoryRun) Observe() error { return r.sync() }

// End merges once more when the run is over.
func (r *MemoryRun) End() error { return r.sync() }

func (r *MemoryRun) sync() error {
	g := r.g
	g.mu.Lock()
	defer g.mu.Unlock()
	cur, err := g.read()
	if err != nil {
		return err
	}
	merged := merge3(r.base, g.known, cur)
	if merged != cur {
		if err := atomicfile.Write(g.path, []byte(merged), 0o644); err != nil {
			return fmt.Errorf("restore memory.md facts: %w", err)
		}
	}
	g.known = merged
	return nil
}

func (g *MemoryGuard) read() (string, error) {
	data, err := os.ReadFile(g.path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read memory.md: %w", err)
	}
	return string(data), nil
}

// merge3 merges line by line. cur is what the run's agent left on disk; the
// result is cur plus the lines known has and base lacks (others added them),
// minus the lines base has and known lacks (others removed them). Counts
// make duplicate lines behave. An added line goes after the line it
// followed in known when that line is in the result, else at the end.
func merge3(base, known, cur string) string {
	if known == base || known == cur {
		return cur
	}
	knownLines, curLines := splitLines(known), splitLines(cur)
	baseLines := splitLines(base)
	baseCount := counts(baseLines)
	knownCount := counts(knownLines)

	// Lines others removed (in base more often than in known) leave cur.
	remove := map[string]int{}
	for line, n := range baseCount {
		if d := n - knownCount[line]; d > 0 {
			remove[line] = d
		}
	}
	var out []string
	for _, line := range curLines {
		if remove[line] > 0 {
			remove[line]--
			continue
		}
		out = append(out, line)
	}

	// Lines others added (in known more often than in base) return if cur
	// lacks them.
	have := counts(out)
	for i, line := range knownLines {
		if knownCount[line]-baseCount[line] <= 0 {
			continue
		}
		if have[line] >= knownCount[line] {
			continue
		}
		have[line]++
		at := len(out)
		if i > 0 {
			for j := len(out) - 1; j >= 0; j-- {
				if out[j] == knownLines[i-1] {
					at = j + 1
					break
				}
			}
		}
		out = append(out[:at], append([]string{line}, out[at:]...)...)
	}
	if len(out) == 0 {
		return ""
	}
	return strings.Join(out, "\n") + "\n"
}

func splitLines(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func counts(lines []string) map[string]int {
	m := make(map[string]int, len(lines))
	for _, l := range lines {
		m[l]++
	}
	return m
}
