package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Design: what of the agent's user may run between turns.
//
// The mark (see sweep) finds what a turn left behind only while it still
// carries the mark: a process that clears its environment (env -i) and
// leaves the group (setsid) is found by nothing once its parents are gone,
// and keeps running as the agent between turns, free to act while the
// gateway does not expect it (swap a link right before the gateway follows
// it). When the agent runs as a user of its own (AGENT_USER), that user is
// the better mark: it cannot be dropped, and every process of it belongs
// to the agent. KillStrays kills every process of the user that is neither
// in the group of a process Start started and still runs (a turn, a warm
// CLI waiting for its next turn) nor a descendant of one (claude runs each
// Bash tool call in a session of its own, so a running turn's tools are
// in no group proc knows). What is left is an orphan: its turn is over, or
// it cut itself loose.
//
// The sweep holds leadersMu while it looks and kills, and Start holds it
// while it forks and registers the new leader, whose pid is its group id
// (Setpgid). So a process Start is starting is either not yet there (still
// root, or not forked) or already known when the sweep sees it. A process
// is killed through a pidfd opened before its uid is read a last time: if
// the pid was reused meanwhile, the signal goes to the process that is
// gone, never to the one that took the pid, so no other user's process is
// ever killed.

// strayDeadline bounds how long KillStrays waits for what it killed to die
// (a stray that forks as it is killed leaves children for the next scan).
const strayDeadline = time.Second

// KillStrays SIGKILLs every process whose real or effective uid is uid and
// that is neither in the process group of a process Start started and has
// not been waited for, nor a descendant of one, and reaps those that were
// the caller's. It returns how many it killed. The gateway calls it, with
// AGENT_USER, at start and after every turn: the user must run nothing
// else. Killing another user's processes needs root or CAP_KILL; without,
// the error counts what could not be stopped. uid 0 is refused.
func KillStrays(uid uint32) (killed int, err error) {
	if uid == 0 {
		return 0, errors.New("kill strays: refusing to sweep uid 0")
	}
	dead := map[int]bool{} // killed by this call
	failed := map[int]error{}
	deadline := time.Now().Add(strayDeadline)
	var tick *time.Ticker
	for {
		pending, err := straysOnce(uid, dead, failed)
		if err != nil {
			return len(dead), err
		}
		if !pending || !time.Now().Before(deadline) {
			break
		}
		if tick == nil {
			tick = time.NewTicker(sweepInterval)
			defer tick.Stop()
		}
		<-tick.C
	}
	for _, err := range failed {
		// One is enough to say why; they all failed alike.
		return len(dead), fmt.Errorf("kill strays: %d processes of uid %d could not be stopped: %w", len(failed), uid, err)
	}
	return len(dead), nil
}

// straysOnce scans /proc once under leadersMu, kills the strays of uid and
// reaps the zombies adopted by the caller. It reports whether anything it
// killed may still need a scan: alive, or a zombie that will come to the
// caller.
func straysOnce(uid uint32, dead map[int]bool, failed map[int]error) (pending bool, err error) {
	self, selfPgrp := os.Getpid(), syscall.Getpgrp()
	leadersMu.Lock()
	defer leadersMu.Unlock()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return false, fmt.Errorf("kill strays: %w", err)
	}
	// Every process's stat first: whether one belongs to a live group is
	// decided by its ancestors.
	t := tree{self: self, stats: make(map[int]stat, len(entries)), owned: map[int]bool{}}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		if st, ok := readStat(pid); ok {
			t.stats[pid] = st
			pids = append(pids, pid)
		}
	}
	for _, pid := range pids {
		st := t.stats[pid]
		switch {
		case st.dead():
			if st.ppid == self && st.pgrp != selfPgrp {
				reapAdoptedLocked(pid)
			} else if dead[st.ppid] {
				pending = true // its parent is dying: it will be the caller's
			}
		case dead[pid]:
			pending = true
		case !ofUser(pid, uid) || t.ownedByLeader(pid):
		default:
			ok, err := killStray(pid, uid)
			switch {
			case err != nil:
				failed[pid] = err
			case ok:
				dead[pid] = true
				pending = true
			}
		}
	}
	return pending, nil
}

// tree answers, for one scan, whether a process belongs to a live group.
type tree struct {
	self  int
	stats map[int]stat
	owned map[int]bool // the answers so far
}

// ownedByLeader reports whether pid, or one of its ancestors, is a live
// leader or in a live leader's group. The caller holds leadersMu.
func (t *tree) ownedByLeader(pid int) bool {
	var path []int
	owned := false
	// len(stats)+1 steps reach the top of any real chain; the bound only
	// guards against a loop that pid reuse between reads could fake.
	for p, steps := pid, 0; steps <= len(t.stats); steps++ {
		if v, ok := t.owned[p]; ok {
			owned = v
			break
		}
		st, ok := t.stats[p]
		if !ok {
			// Not listed: started after the listing, or gone (its
			// children were orphaned then).
			if st, ok = readStat(p); !ok {
				break
			}
		}
		path = append(path, p)
		_, isLeader := leaders[p]
		_, inGroup := leaders[st.pgrp]
		if isLeader || inGroup {
			owned = true
			break
		}
		if st.ppid <= 1 || st.ppid == t.self {
			break // an orphan, or something the caller started outside proc
		}
		p = st.ppid
	}
	for _, p := range path {
		t.owned[p] = owned
	}
	return owned
}

// ofUser reports whether pid's real or effective uid is uid.
func ofUser(pid int, uid uint32) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	r, e, ok := parseUids(b)
	return ok && (r == uid || e == uid)
}

// killStray SIGKILLs pid if it still runs as uid. It reports whether it
// did; a process that is gone is no error.
func killStray(pid int, uid uint32) (bool, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	switch {
	case err == nil:
		defer unix.Close(fd)
	case errors.Is(err, unix.ESRCH):
		return false, nil
	case errors.Is(err, unix.ENOSYS):
		// Before Linux 5.3: kill by pid, which a pid reused between the
		// check and the kill could mislead (a window of microseconds).
		fd = -1
	default:
		return false, fmt.Errorf("open process %d: %w", pid, err)
	}
	// With the pidfd open, the pid names the process the signal goes to,
	// or one that has died since (the signal then fails).
	if !ofUser(pid, uid) {
		return false, nil
	}
	if fd >= 0 {
		err = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
	} else {
		err = unix.Kill(pid, unix.SIGKILL)
	}
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, unix.ESRCH):
		return false, nil
	}
	return false, fmt.Errorf("signal process %d: %w", pid, err)
}

// parseUids reads the real and effective uid from the text of
// /proc/<pid>/status: the first two fields of its "Uid:" line.
func parseUids(b []byte) (real, effective uint32, ok bool) {
	for line := range bytes.Lines(b) {
		rest, found := bytes.CutPrefix(line, []byte("Uid:"))
		if !found {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) < 2 {
			return 0, 0, false
		}
		r, err1 := strconv.ParseUint(string(f[0]), 10, 32)
		e, err2 := strconv.ParseUint(string(f[1]), 10, 32)
		if err1 != nil || err2 != nil {
			return 0, 0, false
		}
		return uint32(r), uint32(e), true
	}
	return 0, 0, false
}
