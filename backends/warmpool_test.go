package backends

import (
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/procmem"
)

// fakeWarm is a kept process without a process: it records why it was
// closed.
type fakeWarm struct {
	key, settings, session string
	pgid                   int

	mu     sync.Mutex // guards why and exited
	why    string
	exited bool
}

func (f *fakeWarm) warmKey() string      { return f.key }
func (f *fakeWarm) warmSettings() string { return f.settings }
func (f *fakeWarm) warmSession() string  { return f.session }
func (f *fakeWarm) warmPgid() int        { return f.pgid }
func (f *fakeWarm) warmWait()            {}
func (f *fakeWarm) warmExited() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.exited
}
func (f *fakeWarm) warmClose(why string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.why == "" {
		f.why = why
	}
}
func (f *fakeWarm) closed() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.why
}

func newTestPool(t *testing.T, opts WarmOptions) (*warmPool[*fakeWarm], *clockwork.FakeClock) {
	t.Helper()
	clock := clockwork.NewFakeClock()
	opts.Clock = clock
	if opts.KeepAlive == 0 {
		opts.KeepAlive = time.Hour
	}
	pl := newWarmPool[*fakeWarm]("fake", opts, zerolog.New(zerolog.NewTestWriter(t)))
	pl.memory = func(pgids ...int) map[int]procmem.Usage { return map[int]procmem.Usage{} }
	t.Cleanup(pl.close)
	return pl, clock
}

// turn runs one turn for key the way an adapter does: a kept process, or
// a new one added to the pool.
func turn(pl *warmPool[*fakeWarm], key, settings, session string, pgid int) *fakeWarm {
	p := pl.take(key, settings, session)
	if p == nil {
		p = &fakeWarm{key: key, settings: settings, session: session, pgid: pgid}
		pl.add(p)
	}
	pl.release(p, true)
	return p
}

func TestWarmPoolReusesOnlyWhatMatches(t *testing.T) {
	pl, _ := newTestPool(t, WarmOptions{MaxProcesses: 4})
	a := turn(pl, "a", "s1", "", 1)
	if again := turn(pl, "a", "s1", "", 1); again != a {
		t.Fatal("the same key, settings and session got a new process")
	}
	b := turn(pl, "a", "s2", "", 2)
	if b == a || a.closed() != "replaced: the channel's settings changed" {
		t.Errorf("settings changed: closed %q, want the old process replaced", a.closed())
	}
	c := turn(pl, "a", "s2", "other-session", 3)
	if c == b || b.closed() != "replaced: the conversation changed" {
		t.Errorf("session changed: closed %q", b.closed())
	}
	c.mu.Lock()
	c.exited = true
	c.mu.Unlock()
	if d := turn(pl, "a", "s2", "other-session", 4); d == c || c.closed() != "replaced: it had exited" {
		t.Errorf("exited: closed %q", c.closed())
	}
}

func TestWarmPoolEvictsTheLeastRecentlyUsedIdleProcess(t *testing.T) {
	pl, clock := newTestPool(t, WarmOptions{MaxProcesses: 2})
	a := turn(pl, "a", "s", "", 1)
	clock.Advance(time.Second)
	b := turn(pl, "b", "s", "", 2)
	clock.Advance(time.Second)
	turn(pl, "a", "s", "", 1) // a is now the most recent
	clock.Advance(time.Second)
	turn(pl, "c", "s", "", 3)
	if b.closed() == "" || a.closed() != "" {
		t.Errorf("closed: a %q, b %q; want b evicted", a.closed(), b.closed())
	}
	if s := pl.stats(); s.Processes != 2 || s.Busy != 0 {
		t.Errorf("stats = %+v, want 2 idle", s)
	}
}

func TestWarmPoolNeverEvictsABusyProcess(t *testing.T) {
	pl, _ := newTestPool(t, WarmOptions{MaxProcesses: 1})
	busy := &fakeWarm{key: "a", pgid: 1}
	pl.add(busy)
	turn(pl, "b", "", "", 2) // over the cap while a is busy: b, idle, goes
	if busy.closed() != "" {
		t.Fatalf("the busy process was closed: %q", busy.closed())
	}
	if got, ok := pl.busy("a"); !ok || got != busy {
		t.Error("busy(a) does not find the running process")
	}
	pl.release(busy, true)
	if s := pl.stats(); s.Processes != 1 {
		t.Errorf("stats = %+v, want the cap of 1 after the turn", s)
	}
}

func TestWarmPoolExpiresAfterKeepAlive(t *testing.T) {
	pl, clock := newTestPool(t, WarmOptions{MaxProcesses: 4, KeepAlive: time.Minute})
	p := turn(pl, "a", "", "", 1)
	clock.Advance(59 * time.Second)
	if p.closed() != "" {
		t.Fatal("closed before AGENT_KEEP_ALIVE")
	}
	clock.Advance(time.Second)
	waitFor(t, 5*time.Second, "the idle process to expire", func() bool { return p.closed() != "" })
	if p.closed() != "idle for AGENT_KEEP_ALIVE" {
		t.Errorf("closed %q, want expired", p.closed())
	}
}

func TestWarmPoolMemoryCapStopsIdleProcesses(t *testing.T) {
	pl, clock := newTestPool(t, WarmOptions{MaxProcesses: 8, MemoryCap: 250 * mib})
	pl.memory = func(pgids ...int) map[int]procmem.Usage {
		out := map[int]procmem.Usage{}
		for _, g := range pgids {
			out[g] = procmem.Usage{PSSBytes: 100 * mib, Processes: 1}
		}
		return out
	}
	var ps []*fakeWarm
	for i, k := range []string{"a", "b", "c"} {
		ps = append(ps, turn(pl, k, "", "", i+1))
		clock.Advance(time.Second)
	}
	var closed []string
	for _, p := range ps {
		closed = append(closed, p.closed())
	}
	if diff := cmp.Diff([]string{"evicted: memory cap", "", ""}, closed); diff != "" {
		t.Errorf("closed (-want +got):\n%s", diff)
	}
}

func TestWarmPoolCloseStopsEverythingAndKeepsNoMore(t *testing.T) {
	pl, _ := newTestPool(t, WarmOptions{MaxProcesses: 4})
	p := turn(pl, "a", "", "", 1)
	pl.close()
	if p.closed() != "the gateway is stopping" {
		t.Errorf("closed %q", p.closed())
	}
	late := turn(pl, "b", "", "", 2)
	if late.closed() != "not kept" {
		t.Errorf("a process after close: %q, want not kept", late.closed())
	}
}
