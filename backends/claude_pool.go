package backends

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/agentgateway/gateway/internal/procmem"
)

// claudePool keeps interactive claude processes between their
// conversation's turns: at most one per key, at most MaxProcesses in all,
// each for KeepAlive after its last turn, and within MemoryCap.
type claudePool struct {
	c *Claude

	// memory reads the memory of process groups; procmem.Groups, which
	// reads /proc, but for tests.
	memory func(pgids ...int) map[int]procmem.Usage
	// rssOnlyLogged is set once the log has said that some processes'
	// proportional memory could not be read.
	rssOnlyLogged atomic.Bool

	mu     sync.Mutex // guards the fields below and the pool fields of each process
	procs  map[string]*claudeProc
	closed bool
}

func newClaudePool(c *Claude) *claudePool {
	return &claudePool{c: c, procs: map[string]*claudeProc{}, memory: procmem.Groups}
}

// take returns the idle process kept for req's key if it can take req, and
// marks it busy. A kept process that cannot (other flags, another session,
// dead) is stopped. The model is not compared: the caller switches it.
func (pl *claudePool) take(req Request, settings string) *claudeProc {
	if req.Key == "" {
		return nil
	}
	pl.mu.Lock()
	cp := pl.procs[req.Key]
	if cp == nil || cp.busy {
		pl.mu.Unlock()
		return nil
	}
	why := ""
	switch {
	case cp.exited.Load():
		why = "it had exited"
	case cp.settings != settings:
		why = "the channel's settings changed"
	case cp.session != req.SessionID:
		why = "the conversation changed"
	}
	if why != "" {
		delete(pl.procs, req.Key)
		pl.stopIdleTimer(cp)
		pl.mu.Unlock()
		cp.close("replaced: " + why)
		return nil
	}
	cp.busy = true
	pl.stopIdleTimer(cp)
	pl.mu.Unlock()
	return cp
}

// add registers a new busy process under its key, when the key has none
// (a second process for a busy key runs its turn and goes). Room is made
// under MaxProcesses by stopping idle processes.
func (pl *claudePool) add(cp *claudeProc) {
	cp.busy = true
	if cp.key == "" || pl.c.opts.Warm.KeepAlive <= 0 {
		return
	}
	pl.mu.Lock()
	if pl.closed || pl.procs[cp.key] != nil {
		pl.mu.Unlock()
		return
	}
	pl.procs[cp.key] = cp
	victims := pl.overCountLocked()
	pl.mu.Unlock()
	for _, v := range victims {
		v.close("evicted: too many warm processes (MAX_WARM_PROCESSES)")
	}
}

// release takes cp back after a turn: kept idle for KeepAlive when
// reusable, stopped otherwise.
func (pl *claudePool) release(cp *claudeProc, reusable bool) {
	pl.mu.Lock()
	cp.busy = false
	kept := pl.procs[cp.key] == cp
	if !reusable || !kept || pl.closed || cp.exited.Load() {
		if kept {
			delete(pl.procs, cp.key)
		}
		pl.mu.Unlock()
		cp.close("not kept")
		return
	}
	cp.lastUsed = pl.c.clock().Now()
	cp.idle = pl.c.clock().AfterFunc(pl.c.opts.Warm.KeepAlive, func() { pl.expire(cp) })
	victims := pl.overCountLocked()
	pl.mu.Unlock()
	for _, v := range victims {
		v.close("evicted: too many warm processes (MAX_WARM_PROCESSES)")
	}
	pl.checkMemory()
}

// discard drops cp from the pool and stops it.
func (pl *claudePool) discard(cp *claudeProc, why string) {
	pl.mu.Lock()
	if pl.procs[cp.key] == cp {
		delete(pl.procs, cp.key)
	}
	pl.stopIdleTimer(cp)
	pl.mu.Unlock()
	cp.close(why)
}

// expire stops cp when it has stayed idle for KeepAlive.
func (pl *claudePool) expire(cp *claudeProc) {
	pl.mu.Lock()
	if pl.procs[cp.key] != cp || cp.busy {
		pl.mu.Unlock()
		return
	}
	delete(pl.procs, cp.key)
	pl.mu.Unlock()
	cp.close("idle for AGENT_KEEP_ALIVE")
}

func (pl *claudePool) stopIdleTimer(cp *claudeProc) {
	if cp.idle != nil {
		cp.idle.Stop()
		cp.idle = nil
	}
}

// idleLRULocked lists the idle processes, least recently used first.
func (pl *claudePool) idleLRULocked() []*claudeProc {
	var idle []*claudeProc
	for _, cp := range pl.procs {
		if !cp.busy {
			idle = append(idle, cp)
		}
	}
	slices.SortFunc(idle, func(a, b *claudeProc) int { return a.lastUsed.Compare(b.lastUsed) })
	return idle
}

// overCountLocked removes idle processes, least recently used first, while
// the pool holds more than MaxProcesses, and returns them to be stopped.
func (pl *claudePool) overCountLocked() []*claudeProc {
	limit := max(pl.c.opts.Warm.MaxProcesses, 1)
	var victims []*claudeProc
	for _, cp := range pl.idleLRULocked() {
		if len(pl.procs) <= limit {
			break
		}
		delete(pl.procs, cp.key)
		pl.stopIdleTimer(cp)
		victims = append(victims, cp)
	}
	return victims
}

// checkMemory stops idle processes, least recently used first, while the
// proportional memory (PSS) of all kept process groups is over MemoryCap.
// Busy processes are never stopped for it: when every process is busy
// none is, and the next finished turn checks again.
func (pl *claudePool) checkMemory() {
	limit := pl.c.opts.Warm.MemoryCap
	if limit <= 0 {
		return
	}
	pl.mu.Lock()
	pgids := make([]int, 0, len(pl.procs))
	for _, cp := range pl.procs {
		pgids = append(pgids, cp.p.Pid())
	}
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
	var victims []*claudeProc
	for _, cp := range pl.idleLRULocked() {
		if total <= limit {
			break
		}
		total -= freedByStopping(usage[cp.p.Pid()])
		delete(pl.procs, cp.key)
		if len(pl.procs) == 0 {
			total = 0
		}
		pl.stopIdleTimer(cp)
		victims = append(victims, cp)
	}
	pl.mu.Unlock()
	for _, v := range victims {
		pl.c.opts.Log.Info().Str("backend", "claude").Int("pid", v.p.Pid()).Int64("cap_bytes", limit).
			Msg("stopping an idle claude process: the warm processes use more memory than MAX_WARM_MEMORY_MB")
		v.close("evicted: memory cap")
	}
}

// freedByStopping is how much the kept processes' summed PSS drops when
// the process group u goes while others stay: its anonymous memory. Its
// share of file-backed pages (claude's binary, mapped by every claude)
// stays in the sum, divided among the processes still mapping them.
func freedByStopping(u procmem.Usage) int64 {
	return u.PSSBytes - u.PSSFileBytes
}

// readMemory reads the memory of the process groups pgids, and says once
// in the log when some processes count by RSS for want of PSS.
func (pl *claudePool) readMemory(pgids []int) map[int]procmem.Usage {
	usage := pl.memory(pgids...)
	rssOnly := 0
	for _, u := range usage {
		rssOnly += u.RSSOnly
	}
	if rssOnly > 0 && !pl.rssOnlyLogged.Swap(true) {
		pl.c.opts.Log.Warn().Str("backend", "claude").Int("processes", rssOnly).
			Msg("cannot read /proc/<pid>/smaps_rollup of some warm claude processes (a kernel before 4.14, or another user's processes): " +
				"their resident memory (RSS) counts instead of their proportional memory, so shared pages count once per process " +
				"and MAX_WARM_MEMORY_MB holds fewer processes; said once")
	}
	return usage
}

// close stops every process and keeps no more.
func (pl *claudePool) close() {
	pl.mu.Lock()
	pl.closed = true
	procs := make([]*claudeProc, 0, len(pl.procs))
	for k, cp := range pl.procs {
		procs = append(procs, cp)
		pl.stopIdleTimer(cp)
		delete(pl.procs, k)
	}
	pl.mu.Unlock()
	for _, cp := range procs {
		cp.close("the gateway is stopping")
	}
	for _, cp := range procs {
		_, _ = cp.p.Wait()
	}
}

// WarmStats describes the kept processes, for /status and doctor.
type WarmStats struct {
	Processes, Busy int
	// PSSBytes is their proportional memory (PSS), process groups
	// included: a page the processes share (claude's binary) counts once
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

// Warm reports the processes kept warm now.
func (c *Claude) Warm() WarmStats {
	pl := c.pool
	pl.mu.Lock()
	var s WarmStats
	pgids := make([]int, 0, len(pl.procs))
	for _, cp := range pl.procs {
		s.Processes++
		if cp.busy {
			s.Busy++
		}
		pgids = append(pgids, cp.p.Pid())
	}
	pl.mu.Unlock()
	for _, u := range pl.readMemory(pgids) {
		s.PSSBytes += u.PSSBytes
		s.RSSBytes += u.RSSBytes
		s.RSSOnly += u.RSSOnly
	}
	return s
}

// Close stops every warm process. Turns running now finish on theirs,
// which are then not kept.
func (c *Claude) Close() error {
	c.pool.close()
	return nil
}

// interactive reports whether req runs on an interactive process: when
// the CLI must be able to ask for approvals, or its process may be kept.
func (c *Claude) interactive(req Request) bool {
	return c.opts.Warm.Interactive && (req.Approve != nil || (req.Key != "" && c.opts.Warm.KeepAlive > 0))
}

// runInteractive runs req on a kept process or a new one, retrying once on
// a fresh process (resuming the session) when the first dies or hangs
// before its result.
func (c *Claude) runInteractive(ctx context.Context, req Request, emit func(Event)) (Result, error) {
	approvals := req.Approve != nil
	bin, err := c.binary()
	if err != nil {
		return Result{}, err
	}
	settings := settingsKey(bin, req, approvals)
	cp := c.pool.take(req, settings)
	if cp != nil && cp.model != req.Model && !c.setModel(cp, req.Model) {
		c.pool.discard(cp, "model change refused")
		cp = nil
	}
	if cp == nil {
		if cp, err = c.spawn(bin, req, approvals); err != nil {
			return Result{}, err
		}
		c.pool.add(cp)
	}
	warm := cp.turns > 0 // kept from an earlier turn
	started := c.clock().Now()
	out := c.turn(ctx, cp, req, emit)
	if out.retry && ctx.Err() == nil {
		warm = false
		c.pool.discard(cp, "died or hung during a turn")
		if id := firstSession(out.res.SessionID, cp.session, req.SessionID); id != "" {
			req.SessionID = id
		}
		c.opts.Log.Warn().Str("backend", "claude").Err(out.err).Str("session", req.SessionID).
			Dur("after", c.clock().Since(started)).Msg("claude process failed during a turn; retrying once on a fresh process")
		emit(Event{Kind: EventRetry, Attempt: 1, MaxAttempts: 1,
			Err: &Error{Kind: KindCrashed, Message: "the agent's process stopped responding; retrying on a fresh one"}})
		if cp, err = c.spawn(bin, req, approvals); err != nil {
			return out.res, err
		}
		c.pool.add(cp)
		out = c.turn(ctx, cp, req, emit)
		out.retry = false
	}
	c.pool.release(cp, out.reusable && !cp.modeSwitched)
	out.res.Warm = warm
	if out.err != nil {
		return out.res, out.err
	}
	return out.res, nil
}

func firstSession(ids ...string) string {
	for _, id := range ids {
		if id != "" {
			return id
		}
	}
	return ""
}
