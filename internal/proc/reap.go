package proc

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Design: what survives a turn, and who reaps it.
//
// The process group catches everything that stays in it, but a descendant
// may leave it (setsid, setpgid: a daemonizing tool, Node's detached spawn),
// and once its parents are gone nothing links it to the turn any more: the
// PPid chain ends at the subreaper or init. Tracking the tree while the turn
// runs (polling /proc/*/task/*/children) misses anything born and orphaned
// between two polls. So every process is marked instead: Start adds a
// variable unique to the process (markPrefix + random id) to its environment,
// which every descendant inherits, and when the leader has exited, sweep
// SIGKILLs every live process whose /proc/<pid>/environ carries the mark or
// that is still in the group, and repeats until none is left (a process may
// fork between a scan and its kill). A process's environ is readable by its
// own user, so this needs no privilege. What deliberately clears its
// environment (env -i), or cannot be inspected (setuid, undumpable), escapes;
// the pipe deadlines still stop Stdout from waiting on it (ErrOutputHeld).
//
// The kill does not need the subreaper: the mark finds an orphan wherever it
// was reparented. With BecomeSubreaper, orphans of a turn are reparented to
// the gateway rather than to init, so they stay under it (in ps and in the
// gateway's process tree) and do not depend on an init that reaps: in a
// container whose PID 1 is a shell or the gateway's wrapper, they would
// otherwise pile up as zombies. The gateway must then reap them itself. Wait4(-1) would also take the exit status of
// children that os/exec is waiting for, so sweep reaps one pid at a time: a
// zombie whose parent is the gateway is reaped unless it is a leader proc
// started (leaders; os/exec waits for those) or in the gateway's own process
// group (where a child started without proc, which keeps the default group,
// is). Anything else whose parent is the gateway was adopted. This reaps
// the turn's killed processes and also orphans that exited on their own
// earlier, from any turn, each time a process ends. It holds as long as
// everything the gateway starts in a process group of its own goes through
// proc.

// markPrefix begins the name of the variable that marks a process and its
// descendants: markPrefix + a random id, with the value 1.
const markPrefix = "GATEWAY_PROC_"

// sweepInterval is how often sweep looks again for what is left.
const sweepInterval = 10 * time.Millisecond

var (
	// leadersMu guards leaders and is held while proc forks, so a reaper
	// never mistakes a new leader that exited at once for an orphan.
	leadersMu sync.Mutex
	// leaders are the pids proc started whose os/exec Wait has not returned.
	// It is process-wide like the subreaper attribute it goes with.
	leaders = map[int]struct{}{}
)

// BecomeSubreaper makes the calling process (the gateway) a child subreaper
// (PR_SET_CHILD_SUBREAPER): orphans of the processes it starts are
// reparented to it instead of init. Processes started with Start reap them
// when they end. Call it once at startup, before starting any process. The
// attribute is not inherited by children.
func BecomeSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("become child subreaper: %w", err)
	}
	return nil
}

// newMark returns a fresh environment entry marking one process and its
// descendants.
func newMark() string { return markPrefix + rand.Text() + "=1" }

// startLeader starts cmd and registers its process as a leader.
func startLeader(cmd *exec.Cmd) error {
	leadersMu.Lock()
	defer leadersMu.Unlock()
	if err := cmd.Start(); err != nil {
		return err
	}
	leaders[cmd.Process.Pid] = struct{}{}
	return nil
}

// leaderReaped unregisters a leader once os/exec has waited for it.
func leaderReaped(pid int) {
	leadersMu.Lock()
	defer leadersMu.Unlock()
	delete(leaders, pid)
}

// sweep kills what is left of a process's turn after its leader has exited:
// the rest of group pgid and every process carrying mark. It reaps zombies
// adopted by the gateway as it goes, and returns when nothing of the turn is
// left alive or about to become the gateway's zombie, or at deadline.
func sweep(pgid int, mark string, deadline time.Time) {
	killed := map[int]bool{}
	var tick *time.Ticker
	for {
		_ = signalGroup(pgid, syscall.SIGKILL)
		if !sweepOnce(pgid, []byte(mark+"\x00"), killed) || !time.Now().Before(deadline) {
			break
		}
		if tick == nil {
			tick = time.NewTicker(sweepInterval)
			defer tick.Stop()
		}
		<-tick.C
	}
}

// sweepOnce scans /proc once, SIGKILLs the turn's live processes and reaps
// adopted zombies. It reports whether anything of the turn may still need
// the gateway: a live process, or a zombie whose parent is dying.
func sweepOnce(pgid int, mark []byte, killed map[int]bool) (pending bool) {
	self, selfPgrp := os.Getpid(), syscall.Getpgrp()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		st, ok := readStat(pid)
		if !ok {
			continue // gone meanwhile
		}
		if st.dead() {
			switch {
			case st.ppid == self:
				reapAdopted(pid, st.pgrp, selfPgrp)
			case st.pgrp == pgid || killed[pid] || killed[st.ppid]:
				// Its parent is dying too; it will be ours to reap.
				pending = true
			}
			continue
		}
		switch {
		case killed[pid]:
			pending = true // dying; its environ may already be gone
		case st.pgrp == pgid || hasMark(pid, mark):
			if err := syscall.Kill(pid, syscall.SIGKILL); err == nil {
				killed[pid] = true
				pending = true
			}
		}
	}
	return pending
}

// reapAdopted reaps zombie pid, a child of the gateway, unless someone else
// waits for it: a leader (os/exec) or a child in the gateway's own group.
func reapAdopted(pid, pgrp, selfPgrp int) {
	if pgrp == selfPgrp {
		return
	}
	leadersMu.Lock()
	defer leadersMu.Unlock()
	reapAdoptedLocked(pid)
}

// reapAdoptedLocked is reapAdopted's wait, with leadersMu held and the
// gateway's own group ruled out by the caller.
func reapAdoptedLocked(pid int) {
	if _, ok := leaders[pid]; ok {
		return
	}
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		if !errors.Is(err, syscall.EINTR) {
			return
		}
	}
}

// stat is what sweep and EndTurnTools need of /proc/<pid>/stat.
type stat struct {
	state      byte
	ppid, pgrp int
	// start is when the process started, in clock ticks after boot
	// (starttime, the 22nd field); 0 when the line is shorter.
	start uint64
}

// dead reports a zombie (or a process past that).
func (s stat) dead() bool { return s.state == 'Z' || s.state == 'X' || s.state == 'x' }

func readStat(pid int) (stat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return stat{}, false
	}
	return parseStat(b)
}

// parseStat reads the state, parent and process group from the text of
// /proc/<pid>/stat: "pid (comm) state ppid pgrp ...", where comm may hold
// anything, parentheses and spaces included.
func parseStat(b []byte) (stat, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return stat{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 || len(f[0]) != 1 {
		return stat{}, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgrp, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil {
		return stat{}, false
	}
	st := stat{state: f[0][0], ppid: ppid, pgrp: pgrp}
	// state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt
	// cmajflt utime stime cutime cstime priority nice num_threads
	// itrealvalue starttime: starttime is the 20th after the ')'.
	if len(f) >= 20 {
		st.start, _ = strconv.ParseUint(f[19], 10, 64)
	}
	return st, true
}

// hasMark reports whether the environment pid started with holds the entry
// mark (NUL-terminated). Processes of other users cannot be read and are not
// ours anyway.
func hasMark(pid int, mark []byte) bool {
	env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	if bytes.HasPrefix(env, mark) {
		return true
	}
	return bytes.Contains(env, append([]byte{0}, mark...))
}
