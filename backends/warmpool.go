package backends

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/procmem"
)

// warmProc is what a warmPool needs of a kept CLI process. Any adapter
// with a long-running mode (claude's stream-json, an ACP agent, codex's
// app-server, pi's rpc mode) implements it on its process type, which
// must be a pointer (the pool compares processes with ==).
//
// The getters are read under the pool's mutex while the process is idle
// (not handed to a turn), so a turn may update the session it holds
// without locking. warmClose and warmWait may be called from any
// goroutine, more than once.
type warmProc interface {
	comparable
	// warmKey is the conversation the process is kept for (Request.Key);
	// "" is kept for none.
	warmKey() string
	// warmSettings is what a turn must match to reuse the process: its
	// binary, working directory and the flags it was started with. An
	// adapter leaves out what it can switch on a running process (claude:
	// the model).
	warmSettings() string
	// warmSession is the session the process holds now ("" before the CLI
	// has named one): a turn resuming another session cannot reuse it.
	warmSession() string
	// warmPgid is the process group whose memory counts against
	// WarmOptions.MemoryCap (the leader's pid).
	warmPgid() int
	// warmExited reports that the process has ended or is ending (its
	// stdout closed): it cannot take another turn.
	warmExited() bool
	// warmClose stops the process and its group, once; why is for the
	// log ("idle for AGENT_KEEP_ALIVE", "evicted: memory cap", …).
	warmClose(why string)
	// warmWait returns once the process has exited, after warmClose.
	warmWait()
}

// warmPool keeps an adapter's long-running CLI processes between their
// conversation's turns (DESIGN decision 16): at most one per key, at most
// WarmOptions.MaxProcesses in all (the least recently used idle one is
// stopped to make room), each for WarmOptions.KeepAlive after its last
// turn, and within WarmOptions.MemoryCap of proportional memory (PSS,
// through procmem). A process handed to a turn is busy and is never
// stopped by the pool for a cap: it goes back with release.
//
// A turn uses it as
//
//	p := pool.take(req.Key, settings, req.SessionID) // a kept idle process, or the zero P
//	if p == zero { p = start(); pool.add(p) }          // add keeps it when the key has none
//	… run the turn on p …
//	pool.release(p, reusable)                          // kept idle, or stopped
//
// and discard(p, why) drops a process that failed mid-turn. busy(key)
// returns the process running a turn for key (for steering), stats()
// describes the kept processes (WarmStats), and close() stops them all at
// shutdown. All methods are safe for concurrent use.
type warmPool[P warmProc] struct {
	// backend names the CLI in log lines ("claude").
	backend string
	opts    WarmOptions
	// log receives evictions and the RSS fallback notice.
	log zerolog.Logger

	// memory reads the memory of process groups; procmem.Groups, which
	// reads /proc, but for tests.
	memory func(pgids ...int) map[int]procmem.Usage
	// rssOnlyLogged is set once the log has said that some processes'
	// proportional memory could not be read.
	rssOnlyLogged atomic.Bool

	mu     sync.Mutex // guards procs, closed and every warmEntry
	procs  map[string]*warmEntry[P]
	closed bool
}

// warmEntry is a kept process and the pool's state about it.
type warmEntry[P warmProc] struct {
	proc     P
	busy     bool
	lastUsed time.Time
	idle     clockwork.Timer // the KeepAlive timer while idle
}

// newWarmPool returns an empty pool for backend's processes, configured
// by opts (KeepAlive, MaxProcesses, MemoryCap, Clock), logging to log.
func newWarmPool[P warmProc](backend string, opts WarmOptions, log zerolog.Logger) *warmPool[P] {
	return &warmPool[P]{backend: backend, opts: opts, log: log, procs: map[string]*warmEntry[P]{}, memory: procmem.Groups}
}

func (pl *warmPool[P]) clock() clockwork.Clock {
	if pl.opts.Clock != nil {
		return pl.opts.Clock
	}
	return clockwork.NewRealClock()
}

// take returns the idle process kept for key if it was started with
// settings and holds session, and marks it busy; otherwise the zero P. A
// kept process that cannot take the turn (other settings, another
// session, exited) is stopped.
func (pl *warmPool[P]) take(key, settings, session string) P {
	var zero P
	if key == "" {
		return zero
	}
	pl.mu.Lock()
	e := pl.procs[key]
	if e == nil || e.busy {
		pl.mu.Unlock()
		return zero
	}
	why := ""
	switch {
	case e.proc.warmExited():
		why = "it had exited"
	case e.proc.warmSettings() != settings:
		why = "the channel's settings changed"
	case e.proc.warmSession() != session:
		why = "the conversation changed"
	}
	pl.stopIdleTimer(e)
	if why != "" {
		delete(pl.procs, key)
		pl.mu.Unlock()
		e.proc.warmClose("replaced: " + why)
		return zero
	}
	e.busy = true
	pl.mu.Unlock()
	return e.proc
}

// add registers a new process, busy with its first turn, under its key
// when the key has none (a second process for a busy key runs its turn
// and goes) and KeepAlive keeps any. Room is made under MaxProcesses by
// stopping idle processes.
func (pl *warmPool[P]) add(p P) {
	key := p.warmKey()
	if key == "" || pl.opts.KeepAlive <= 0 {
		return
	}
	pl.mu.Lock()
	if pl.closed || pl.procs[key] != nil {
		pl.mu.Unlock()
		return
	}
	pl.procs[key] = &warmEntry[P]{proc: p, busy: true}
	victims := pl.overCountLocked()
	pl.mu.Unlock()
	pl.closeEvicted(victims)
}

// release takes p back after a turn: kept idle for KeepAlive when
// reusable (and kept at all), stopped otherwise.
func (pl *warmPool[P]) release(p P, reusable bool) {
	pl.mu.Lock()
	e := pl.procs[p.warmKey()]
	kept := e != nil && e.proc == p
	if kept {
		e.busy = false
	}
	if !reusable || !kept || pl.closed || p.warmExited() {
		if kept {
			delete(pl.procs, p.warmKey())
		}
		pl.mu.Unlock()
		p.warmClose("not kept")
		return
	}
	e.lastUsed = pl.clock().Now()
	e.idle = pl.clock().AfterFunc(pl.opts.KeepAlive, func() { pl.expire(e) })
	victims := pl.overCountLocked()
	pl.mu.Unlock()
	pl.closeEvicted(victims)
	pl.checkMemory()
}

// discard drops p from the pool and stops it.
func (pl *warmPool[P]) discard(p P, why string) {
	pl.mu.Lock()
	if e := pl.procs[p.warmKey()]; e != nil && e.proc == p {
		delete(pl.procs, p.warmKey())
		pl.stopIdleTimer(e)
	}
	pl.mu.Unlock()
	p.warmClose(why)
}

// busy returns the process running a turn for key, if there is one.
func (pl *warmPool[P]) busy(key string) (P, bool) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if e := pl.procs[key]; e != nil && e.busy {
		return e.proc, true
	}
	var zero P
	return zero, false
}

// expire stops e's process when it has stayed idle for KeepAlive.
func (pl *warmPool[P]) expire(e *warmEntry[P]) {
	pl.mu.Lock()
	key := e.proc.warmKey()
	if pl.procs[key] != e || e.busy {
		pl.mu.Unlock()
		return
	}
	delete(pl.procs, key)
	pl.mu.Unlock()
	e.proc.warmClose("idle for AGENT_KEEP_ALIVE")
}

func (pl *warmPool[P]) stopIdleTimer(e *warmEntry[P]) {
	if e.idle != nil {
		e.idle.Stop()
		e.idle = nil
	}
}

func (pl *warmPool[P]) closeEvicted(victims []P) {
	for _, v := range victims {
		v.warmClose("evicted: too many warm processes (MAX_WARM_PROCESSES)")
	}
}

// idleLRULocked lists the idle entries, least recently used first.
func (pl *warmPool[P]) idleLRULocked() []*warmEntry[P] {
	var idle []*warmEntry[P]
	for _, e := range pl.procs {
		if !e.busy {
			idle = append(idle, e)
		}
	}
	slices.SortFunc(idle, func(a, b *warmEntry[P]) int { return a.lastUsed.Compare(b.lastUsed) })
	return idle
}

// overCountLocked removes idle processes, least recently used first, while
// the pool holds more than MaxProcesses, and returns them to be stopped.
func (pl *warmPool[P]) overCountLocked() []P {
	limit := max(pl.opts.MaxProcesses, 1)
	var victims []P
	for _, e := range pl.idleLRULocked() {
		if len(pl.procs) <= limit {
			break
		}
		delete(pl.procs, e.proc.warmKey())
		pl.stopIdleTimer(e)
		victims = append(victims, e.proc)
	}
	return victims
}

// pgidsLocked lists the process groups of the kept processes.
func (pl *warmPool[P]) pgidsLocked() []int {
	pgids := make([]int, 0, len(pl.procs))
	for _, e := range pl.procs {
		pgids = append(pgids, e.proc.warmPgid())
	}
	return pgids
}

// checkMemory stops idle processes, least recently used first, while the
// proportional memory (PSS) of all kept process groups is over MemoryCap.
// Busy processes are never stopped for it: when every process is busy
// none is, and the next finished turn checks again.
func (pl *warmPool[P]) checkMemory() {
	limit := pl.opts.MemoryCap
	if limit <= 0 {
		return
	}
	pl.mu.Lock()
	pgids := pl.pgidsLocked()
	pl.mu.Unlock()
	usage := pl.readMemory(pgids)
	var total int64
	for _, u := range usage {
		total += u.PSSBytes
	}
	if total <= limit {
		return
	}
	pl.mu.Lock()
	var victims []P
	for _, e := range pl.idleLRULocked() {
		if total <= limit {
			break
		}
		total -= freedByStopping(usage[e.proc.warmPgid()])
		delete(pl.procs, e.proc.warmKey())
		if len(pl.procs) == 0 {
			total = 0
		}
		pl.stopIdleTimer(e)
		victims = append(victims, e.proc)
	}
	pl.mu.Unlock()
	for _, v := range victims {
		pl.log.Info().Str("backend", pl.backend).Int("pid", v.warmPgid()).Int64("cap_bytes", limit).
			Msgf("stopping an idle %s process: the warm processes use more memory than MAX_WARM_MEMORY_MB", pl.backend)
		v.warmClose("evicted: memory cap")
	}
}

// freedByStopping is how much the kept processes' summed PSS drops when
// the process group u goes while others stay: its anonymous memory. Its
// share of file-backed pages (the CLI's binary, mapped by every process
// of it) stays in the sum, divided among the processes still mapping
// them.
func freedByStopping(u procmem.Usage) int64 {
	return u.PSSBytes - u.PSSFileBytes
}

// readMemory reads the memory of the process groups pgids, and says once
// in the log when some processes count by RSS for want of PSS.
func (pl *warmPool[P]) readMemory(pgids []int) map[int]procmem.Usage {
	usage := pl.memory(pgids...)
	rssOnly := 0
	for _, u := range usage {
		rssOnly += u.RSSOnly
	}
	if rssOnly > 0 && !pl.rssOnlyLogged.Swap(true) {
		pl.log.Warn().Str("backend", pl.backend).Int("processes", rssOnly).
			Msgf("cannot read /proc/<pid>/smaps_rollup of some warm %s processes (a kernel before 4.14, or another user's processes): "+
				"their resident memory (RSS) counts instead of their proportional memory, so shared pages count once per process "+
				"and MAX_WARM_MEMORY_MB holds fewer processes; said once", pl.backend)
	}
	return usage
}

// stats describes the kept processes.
func (pl *warmPool[P]) stats() WarmStats {
	pl.mu.Lock()
	var s WarmStats
	for _, e := range pl.procs {
		s.Processes++
		if e.busy {
			s.Busy++
		}
	}
	pgids := pl.pgidsLocked()
	pl.mu.Unlock()
	for _, u := range pl.readMemory(pgids) {
		s.PSSBytes += u.PSSBytes
		s.RSSBytes += u.RSSBytes
		s.RSSOnly += u.RSSOnly
	}
	return s
}

// close stops every kept process, waits for them to exit, and keeps no
// more. Turns running now finish on their processes, which are then not
// kept.
func (pl *warmPool[P]) close() {
	pl.mu.Lock()
	pl.closed = true
	procs := make([]P, 0, len(pl.procs))
	for k, e := range pl.procs {
		procs = append(procs, e.proc)
		pl.stopIdleTimer(e)
		delete(pl.procs, k)
	}
	pl.mu.Unlock()
	for _, p := range procs {
		p.warmClose("the gateway is stopping")
	}
	for _, p := range procs {
		p.warmWait()
	}
}

// WarmStats describes the kept processes, for /status and doctor.
type WarmStats struct {
	Processes, Busy int
	// PSSBytes is their proportional memory (PSS), process groups
	// included: a page the processes share (the CLI's binary) counts once
	// in the sum. It is what MemoryCap (MAX_WARM_MEMORY_MB) caps.
	// Processes whose PSS cannot be read count by their RSS (RSSOnly).
	PSSBytes int64
	// RSSBytes is their resident memory, process groups included: a
	// shared page counts in every process that maps it, so the sum is
	// more than the memory they hold together.
	RSSBytes int64
	// RSSOnly is how many processes count by RSS in PSSBytes, their
	// /proc/<pid>/smaps_rollup unreadable (a kernel before 4.14, or
	// processes of another user).
	RSSOnly int
}
