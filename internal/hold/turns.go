package hold

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/agentgateway/gateway/internal/queue"
)

// readOnlyTools are the tools, of every CLI the gateway drives, that can
// only look: reading files, listing, searching, fetching, planning. Any
// other tool (Write, Edit, Bash, a subagent, an MCP tool, one this list
// does not know) may change files, so a turn that called one may have
// written a schedule file. An allowlist errs on the side of holding: a new
// tool is treated as writing until it is listed here.
var readOnlyTools = map[string]bool{
	// claude
	"read": true, "glob": true, "grep": true, "ls": true, "webfetch": true,
	"websearch": true, "todowrite": true, "todoread": true, "notebookread": true,
	"exitplanmode": true, "bashoutput": true, "listmcpresourcestool": true,
	"readmcpresourcetool": true, "toolsearch": true, "listagents": true, "cronlist": true,
	// codex
	"web_search": true,
	// gemini
	"read_file": true, "read_many_files": true, "list_directory": true,
	"search_file_content": true, "google_web_search": true, "web_fetch": true,
	// opencode, pi
	"list": true, "find": true, "todo": true,
}

// Writing reports whether a tool may change files (see readOnlyTools).
func Writing(tool string) bool {
	return !readOnlyTools[strings.ToLower(strings.TrimSpace(tool))]
}

// turn is one CLI run as the gate sees it.
type turn struct {
	id      uint64
	channel string // the event's channel, "" for a scheduled event without one
	user    string // the event's author, "" for a scheduled event
	// writing are the writing tools it called, each once, in order.
	writing []string
	running bool
	ended   time.Time
}

func (t *turn) used(tool string) {
	if Writing(tool) && !slices.Contains(t.writing, tool) {
		t.writing = append(t.writing, tool)
	}
}

// TurnStarted implements agent.TurnWatcher: the gate learns which turns run
// and which writing tools they call. ended wakes the gate's check at once,
// so that a schedule file the turn wrote is judged while the turn is still
// known to have written it.
func (g *Gate) TurnStarted(e queue.Event) (toolUsed func(name string), ended func()) {
	g.mu.Lock()
	g.nextTurn++
	t := &turn{id: g.nextTurn, channel: e.ChannelID, user: e.UserID, running: true}
	g.running[t.id] = t
	g.mu.Unlock()

	toolUsed = func(name string) {
		g.mu.Lock()
		t.used(name)
		g.mu.Unlock()
	}
	ended = func() {
		g.mu.Lock()
		t.running = false
		t.ended = g.clock.Now()
		delete(g.running, t.id)
		if len(t.writing) > 0 {
			g.recent = append(g.recent, t)
		}
		g.mu.Unlock()
		select {
		case g.wake <- struct{}{}:
		default:
		}
	}
	return toolUsed, ended
}

// suspects are the turns that may have written a file whose change was
// seen now: the ones running and the writing ones that ended within the
// grace period. mu must be held.
func (g *Gate) suspectsLocked(now time.Time) []*turn {
	keep := g.recent[:0]
	for _, t := range g.recent {
		if now.Sub(t.ended) <= g.opts.Grace {
			keep = append(keep, t)
		}
	}
	clear(g.recent[len(keep):])
	g.recent = keep
	ts := slices.Clone(g.recent)
	for _, t := range g.running {
		ts = append(ts, t)
	}
	slices.SortFunc(ts, func(a, b *turn) int { return cmp.Compare(a.id, b.id) })
	return ts
}
