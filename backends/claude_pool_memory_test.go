package backends

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/procmem"
)

// fakeMemory stands in for /proc: every process group the pool asks about
// uses the same memory, which a test may change between turns.
type fakeMemory struct {
	mu   sync.Mutex // guards each
	each procmem.Usage
}

func (f *fakeMemory) set(u procmem.Usage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.each = u
}

func (f *fakeMemory) groups(pgids ...int) map[int]procmem.Usage {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[int]procmem.Usage{}
	for _, g := range pgids {
		out[g] = f.each
	}
	return out
}

const mib = 1 << 20

// memoryTest drives a memory-capped pool on the fake CLI, with fake
// memory readings, and remembers which process each key got.
type memoryTest struct {
	t     *testing.T
	c     *Claude
	dir   string
	clock *clockwork.FakeClock
	mem   *fakeMemory
	pids  map[string]int // key -> pid of its process
}

// newMemoryTest is a pool capped at capMiB on the fake CLI running
// script, each process using mem's memory.
func newMemoryTest(t *testing.T, script string, capMiB int64, each procmem.Usage) *memoryTest {
	t.Helper()
	clock := clockwork.NewFakeClock()
	c, dir := warmClaude(t, script, WarmOptions{MemoryCap: capMiB * mib, MaxProcesses: 16, Clock: clock})
	mem := &fakeMemory{each: each}
	c.pool.memory = mem.groups
	return &memoryTest{t: t, c: c, dir: dir, clock: clock, mem: mem, pids: map[string]int{}}
}

// run runs one turn for key to its end, resuming key's session when it
// has a process, and moves the clock on so that turns are ordered.
func (m *memoryTest) run(key string) {
	m.t.Helper()
	session := ""
	if pid := m.pids[key]; pid != 0 {
		session = "sess-" + strconv.Itoa(pid)
	}
	res, err := m.c.Run(context.Background(), warmReq(key, session), nil)
	if err != nil {
		m.t.Fatalf("%s's turn: %v", key, err)
	}
	m.record(key, res.SessionID)
	m.clock.Advance(time.Second)
}

// start begins a turn for key that runs until its context is canceled
// (the "hang" step), waits until the process is in it, and returns the
// stop and a channel closed when the turn has ended.
func (m *memoryTest) start(key string, hangs int) (stop func(), ended <-chan struct{}) {
	m.t.Helper()
	session := ""
	if pid := m.pids[key]; pid != 0 {
		session = "sess-" + strconv.Itoa(pid)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		res, _ := m.c.Run(ctx, warmReq(key, session), nil)
		if res.SessionID == "" {
			m.t.Errorf("%s's stopped turn has no session", key)
		}
	}()
	waitLogged(m.t, m.dir, "user hang", hangs)
	if m.pids[key] == 0 {
		m.pids[key] = m.newestPid()
	}
	return cancel, done
}

func (m *memoryTest) record(key, session string) {
	m.t.Helper()
	if m.pids[key] != 0 {
		return
	}
	pid, err := strconv.Atoi(strings.TrimPrefix(session, "sess-"))
	if err != nil {
		m.t.Fatalf("session %q is not the fake CLI's", session)
	}
	m.pids[key] = pid
}

// newestPid is the last process the fake CLI started.
func (m *memoryTest) newestPid() int {
	spawns := logged(m.t, m.dir, " spawn ")
	return pidOf(spawns[len(spawns)-1])
}

// kept reports which keys have a process in the pool.
func (m *memoryTest) kept() map[string]bool {
	pl := m.c.pool
	pl.mu.Lock()
	defer pl.mu.Unlock()
	out := map[string]bool{}
	for k := range pl.procs {
		out[k] = true
	}
	return out
}

// want checks that exactly keys are kept, and that the others' processes
// are stopped.
func (m *memoryTest) want(keys ...string) {
	m.t.Helper()
	got := m.kept()
	wantSet := map[string]bool{}
	for _, k := range keys {
		wantSet[k] = true
		if !got[k] {
			m.t.Errorf("%s's process is not kept; kept: %v", k, got)
		}
	}
	for k := range got {
		if !wantSet[k] {
			m.t.Errorf("%s's process is kept; want only %v", k, keys)
		}
	}
	for k, pid := range m.pids {
		if !wantSet[k] {
			waitFor(m.t, 10*time.Second, k+"'s evicted process to stop", func() bool { return processGone(pid) })
		} else if processGone(pid) {
			m.t.Errorf("%s's kept process %d is gone", k, pid)
		}
	}
}

// The cap is on proportional memory: three processes of 100 MiB PSS each
// (300 MiB RSS each, the rest shared) fit in 350 MiB.
func TestWarmMemoryCapCountsProportionalMemory(t *testing.T) {
	m := newMemoryTest(t, "text", 350, procmem.Usage{PSSBytes: 100 * mib, RSSBytes: 300 * mib, Processes: 1})
	for _, k := range []string{"a", "b", "c"} {
		m.run(k)
	}
	m.want("a", "b", "c")
	s := m.c.Warm()
	if s.Processes != 3 || s.PSSBytes != 300*mib || s.RSSBytes != 900*mib {
		t.Errorf("Warm() = %+v, want 3 processes, 300 MiB PSS, 900 MiB RSS", s)
	}
}

// Over the cap, the least recently used idle process goes first.
func TestWarmMemoryCapEvictsLeastRecentlyUsedFirst(t *testing.T) {
	m := newMemoryTest(t, "text", 250, procmem.Usage{PSSBytes: 100 * mib, RSSBytes: 100 * mib, Processes: 1})
	m.run("a")
	m.run("b")
	m.run("a") // a is now more recent than b
	m.run("c") // 300 MiB: b goes
	m.want("a", "c")
	m.run("d") // 300 MiB: a goes, used before c
	m.want("c", "d")
}

// A process in the middle of a turn is never stopped for memory, even
// when it is the least recently used.
func TestWarmMemoryCapNeverEvictsABusyProcess(t *testing.T) {
	m := newMemoryTest(t, "text,text,text,hang", 250, procmem.Usage{PSSBytes: 50 * mib, RSSBytes: 50 * mib, Processes: 1})
	m.run("a")
	m.run("b")
	m.run("c")
	stop, ended := m.start("a", 1) // a, least recently used, is busy
	m.mem.set(procmem.Usage{PSSBytes: 100 * mib, RSSBytes: 100 * mib, Processes: 1})
	m.run("d") // 400 MiB over 250: b and c go, not a
	m.want("a", "d")
	stop()
	<-ended
}

// When every process is busy none is stopped; the next finished turn
// checks again.
func TestWarmMemoryCapWaitsWhileEveryProcessIsBusy(t *testing.T) {
	m := newMemoryTest(t, "hang,hang", 150, procmem.Usage{PSSBytes: 100 * mib, RSSBytes: 100 * mib, Processes: 1})
	stopA, endedA := m.start("a", 1)
	stopB, endedB := m.start("b", 2)
	m.c.pool.checkMemory() // 200 MiB over 150, all busy
	m.want("a", "b")
	stopA()
	<-endedA // a is idle now and the pool is over: a goes
	m.want("b")
	stopB()
	<-endedB // 100 MiB: b stays
	m.want("b")
}

// Stopping a process does not free its share of pages the other
// processes map too (claude's binary): 300 MiB of which 120 MiB
// file-backed and shared is still 240 MiB with one process fewer.
func TestWarmMemoryEvictionLeavesSharedPagesCounted(t *testing.T) {
	m := newMemoryTest(t, "text", 230, procmem.Usage{PSSBytes: 100 * mib, PSSFileBytes: 40 * mib, RSSBytes: 160 * mib, Processes: 1})
	m.run("a")
	m.run("b")
	m.run("c") // 300 MiB: a goes (240 MiB left), then b (180)
	m.want("c")
}

// syncBuffer is a log sink safe for the pool's goroutines.
type syncBuffer struct {
	mu sync.Mutex // guards b
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Where smaps_rollup cannot be read, processes count by RSS, and the log
// says so once.
func TestWarmMemoryFallsBackToRSSAndSaysSoOnce(t *testing.T) {
	m := newMemoryTest(t, "text", 250, procmem.Usage{PSSBytes: 100 * mib, RSSBytes: 100 * mib, Processes: 1, RSSOnly: 1})
	var logs syncBuffer
	m.c.pool.log = zerolog.New(&logs)
	m.run("a")
	m.run("b")
	s := m.c.Warm()
	m.run("c") // 300 MiB counted by RSS: a goes
	m.want("b", "c")
	if s.RSSOnly != 2 || s.PSSBytes != 200*mib {
		t.Errorf("Warm() = %+v, want both processes counted by RSS, 200 MiB", s)
	}
	if n := strings.Count(logs.String(), "smaps_rollup"); n != 1 {
		t.Errorf("the log names smaps_rollup %d times, want once:\n%s", n, logs.String())
	}
}
