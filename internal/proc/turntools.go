package proc

import (
	"errors"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Design: what a soft stop leaves of the turn's tool commands.
//
// A soft stop (claude's interrupt, codex's turn/interrupt, ACP's
// session/cancel, pi's abort) keeps the CLI and its session, so the
// process group kill that ends a cold turn never comes. The CLI is left to
// end the commands its tools started. Observed against the pinned CLIs:
// each runs a shell tool call as a direct child leading a process group of
// its own (not in the CLI's group, which holds the CLI alone while it
// idles), and each kills that group when interrupted; but claude and
// opencode answer the interrupt first and send SIGKILL only later (about
// 1.5 s and 2.7 s after the turn had ended), so a command that ignores
// SIGTERM (a server, a build under a shell that traps TERM) still ran
// after the user was told the turn had stopped.
//
// EndTurnTools closes that gap for every adapter: once the CLI has
// answered its stop, what it started during the turn is ended before the
// turn reports stopped. The turn's processes are the CLI's descendants
// started since the turn began, and the members of the process groups
// they lead (a background job whose shell was killed is reparented out of
// the tree but stays in the group). The CLI itself is never signalled, nor
// anything in its own group, nor anything started before the turn:
// helpers a CLI keeps between turns (an MCP server, a language server, a
// background task of an earlier turn) stay. Out of reach: a command that started a session of its own
// (setsid) and whose parent already exited, since it is neither a
// descendant nor in a tool's group; proc's sweep ends it with the CLI.

// toolPoll is how often /proc is scanned while waiting for the turn's
// processes to die; there is no event to wait on.
const toolPoll = 20 * time.Millisecond

// toolKillWait bounds the wait for SIGKILLed processes to be gone.
const toolKillWait = time.Second

// clockTick is the unit of /proc/<pid>/stat's starttime (USER_HZ, 100 on
// every Linux the gateway runs on).
const clockTick = 10 * time.Millisecond

// EndTurnTools ends the processes the CLI leader started since the turn
// began (see turnProcesses): SIGTERM, then SIGKILL to what is left after
// grace (zero means DefaultGrace). It returns once they are gone (or
// SIGKILLed and toolKillWait has passed), with how many it signalled.
func EndTurnTools(leader int, since time.Time, grace time.Duration) int {
	if leader <= 0 {
		return 0
	}
	if grace <= 0 {
		grace = DefaultGrace
	}
	signalled := map[int]bool{}
	if !signalUntilGone(leader, since, syscall.SIGTERM, grace, signalled) {
		signalUntilGone(leader, since, syscall.SIGKILL, toolKillWait, signalled)
	}
	return len(signalled)
}

// signalUntilGone sends sig to each of the turn's processes, new ones as
// they appear, until none is left (true) or within has passed.
func signalUntilGone(leader int, since time.Time, sig syscall.Signal, within time.Duration, signalled map[int]bool) bool {
	deadline := time.Now().Add(within)
	var tick *time.Ticker
	sent := map[int]bool{}
	for {
		procs := turnProcs(leader, since)
		if len(procs) == 0 {
			return true
		}
		for _, p := range procs {
			if sent[p.pid] {
				continue
			}
			if err := signalSame(p, sig); err == nil || !errors.Is(err, syscall.ESRCH) {
				sent[p.pid], signalled[p.pid] = true, true
			}
		}
		if !time.Now().Before(deadline) {
			return false
		}
		if tick == nil {
			tick = time.NewTicker(toolPoll)
			defer tick.Stop()
		}
		<-tick.C
	}
}

// signalSame sends sig to p if its pid still names p: the process may
// have died since /proc was read and its pid gone to another. A pidfd pins
// the process the pid names now; its start time, read after that, tells
// whether it is p (ESRCH when it is not). Without pidfds (Linux before
// 5.3, a seccomp filter) it checks the start time and signals the pid.
func signalSame(p liveProc, sig syscall.Signal) error {
	fd, err := unix.PidfdOpen(p.pid, 0)
	pinned := err == nil
	switch {
	case pinned:
		defer unix.Close(fd)
	case errors.Is(err, syscall.ESRCH):
		return err
	}
	if st, ok := readStat(p.pid); !ok || st.start != p.ticks {
		return syscall.ESRCH
	}
	if !pinned { // no pidfds here (ENOSYS, or refused by a seccomp filter)
		return syscall.Kill(p.pid, sig)
	}
	return unix.PidfdSendSignal(fd, sig, nil, 0)
}

// liveProc is a live process as turnProcesses sees it.
type liveProc struct {
	pid, ppid, pgrp int
	ticks           uint64 // its start, in clock ticks after boot
	started         time.Time
}

// turnProcesses lists the live processes of the tool commands the leader
// started since the turn began: the process groups of their own that its
// descendants started since then lead (the CLIs run each shell tool call
// so), those groups' members, and their descendants outside the leader's
// group. Never the leader, and nothing in the leader's own group: a
// helper the CLI starts during a turn there (an MCP server, a language
// server opencode starts when a file is first touched) is the CLI's, kept
// with it.
func turnProcesses(leader int, since time.Time) []int {
	procs := turnProcs(leader, since)
	pids := make([]int, len(procs))
	for i, p := range procs {
		pids[i] = p.pid
	}
	return pids
}

// turnProcs is turnProcesses with what /proc said of each.
func turnProcs(leader int, since time.Time) []liveProc {
	all := readProcStats()
	children := map[int][]liveProc{}
	var leaderGroup int
	for _, s := range all {
		children[s.ppid] = append(children[s.ppid], s)
		if s.pid == leader {
			leaderGroup = s.pgrp
		}
	}
	// A process counts from the tick its start falls in.
	inTurn := func(s liveProc) bool { return !s.started.Before(since.Add(-clockTick)) }
	found := map[int]liveProc{}
	groups := map[int]bool{} // the tool groups of the turn
	var walk func(pid int, inTool bool)
	walk = func(pid int, inTool bool) {
		for _, c := range children[pid] {
			if _, seen := found[c.pid]; seen || c.pid == leader {
				continue
			}
			tool := inTool || (inTurn(c) && c.pgrp == c.pid && c.pgrp != leaderGroup)
			if tool && inTurn(c) && c.pgrp != leaderGroup {
				found[c.pid] = c
				if c.pgrp == c.pid {
					groups[c.pgrp] = true
				}
			}
			walk(c.pid, tool)
		}
	}
	walk(leader, false)
	for _, s := range all {
		if groups[s.pgrp] && s.pid != leader && inTurn(s) {
			found[s.pid] = s
		}
	}
	procs := make([]liveProc, 0, len(found))
	for _, p := range found {
		procs = append(procs, p)
	}
	return procs
}

// readProcStats reads /proc/<pid>/stat of every live process; zombies
// count as gone (their parent reaps them).
func readProcStats() []liveProc {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	boot := bootTime()
	var out []liveProc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := readStat(pid); ok && !st.dead() {
			out = append(out, liveProc{pid: pid, ppid: st.ppid, pgrp: st.pgrp, ticks: st.start, started: boot.Add(time.Duration(st.start) * clockTick)})
		}
	}
	return out
}

// bootTime is when the system booted, on the wall clock, to the
// nanosecond: now less the time since boot (/proc/stat's btime has only
// seconds).
func bootTime() time.Time {
	var ts unix.Timespec
	now := time.Now()
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return time.Time{}
	}
	return now.Add(-time.Duration(ts.Nano()))
}
