package backends

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/agentgateway/gateway/internal/proc"
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
// endTurnTools closes that gap for every adapter: once the CLI has
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

// endStoppedTools is endTurnTools for an adapter whose soft stop has ended
// the turn, logging what it had to end.
func endStoppedTools(log zerolog.Logger, leader int, since time.Time, grace time.Duration) {
	if n := endTurnTools(leader, since, grace); n > 0 {
		log.Info().Int("processes", n).Msg("the stopped turn's tool commands still ran after the CLI answered the stop; ended them")
	}
}

// endTurnTools ends the processes the CLI leader started since the turn
// began: SIGTERM, then SIGKILL to what is left after grace (zero means
// proc.DefaultGrace). It returns once they are gone (or SIGKILLed and
// toolKillWait has passed), with how many it signalled.
func endTurnTools(leader int, since time.Time, grace time.Duration) int {
	if leader <= 0 {
		return 0
	}
	if grace <= 0 {
		grace = proc.DefaultGrace
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
		pids := turnProcesses(leader, since)
		if len(pids) == 0 {
			return true
		}
		for _, pid := range pids {
			if sent[pid] {
				continue
			}
			if err := syscall.Kill(pid, sig); err == nil || !errors.Is(err, syscall.ESRCH) {
				sent[pid], signalled[pid] = true, true
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

// procStat is what endTurnTools reads of a process.
type procStat struct {
	pid, ppid, pgrp int
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
	all := readProcStats()
	children := map[int][]procStat{}
	var leaderGroup int
	for _, s := range all {
		children[s.ppid] = append(children[s.ppid], s)
		if s.pid == leader {
			leaderGroup = s.pgrp
		}
	}
	// A process counts from the tick its start falls in.
	inTurn := func(s procStat) bool { return !s.started.Before(since.Add(-clockTick)) }
	found := map[int]bool{}
	groups := map[int]bool{} // the tool groups of the turn
	var walk func(pid int, inTool bool)
	walk = func(pid int, inTool bool) {
		for _, c := range children[pid] {
			if c.pid == leader || found[c.pid] {
				continue
			}
			tool := inTool || (inTurn(c) && c.pgrp == c.pid && c.pgrp != leaderGroup)
			if tool && inTurn(c) && c.pgrp != leaderGroup {
				found[c.pid] = true
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
			found[s.pid] = true
		}
	}
	pids := make([]int, 0, len(found))
	for pid := range found {
		pids = append(pids, pid)
	}
	return pids
}

// readProcStats reads /proc/<pid>/stat of every live process; zombies
// count as gone (their parent reaps them).
func readProcStats() []procStat {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	boot := bootTime()
	var out []procStat
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		if s, ok := parseProcStat(pid, b, boot); ok {
			out = append(out, s)
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

// parseProcStat reads the parent, group and start of a stat line. The
// command name is in parentheses and may hold spaces: fields start after
// the last ')'. It is false for a zombie or a line it cannot read.
func parseProcStat(pid int, b []byte, boot time.Time) (procStat, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, false
	}
	// state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt
	// cmajflt utime stime cutime cstime priority nice num_threads
	// itrealvalue starttime: starttime is the 20th after the ')'.
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 || f[0][0] == 'Z' || f[0][0] == 'X' {
		return procStat{}, false
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	pgrp, err2 := strconv.Atoi(string(f[2]))
	ticks, err3 := strconv.ParseInt(string(f[19]), 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return procStat{}, false
	}
	return procStat{pid: pid, ppid: ppid, pgrp: pgrp, started: boot.Add(time.Duration(ticks) * clockTick)}, true
}
