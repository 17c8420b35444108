package proc

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// ownerPrefix begins the variable that marks every process started for an
// owner (Spec.Owner).
const ownerPrefix = "GATEWAY_OWNER_"

func ownerMark(owner string) string { return ownerPrefix + owner + "=1" }

func validOwner(owner string) bool {
	if owner == "" || len(owner) > 64 {
		return false
	}
	for _, r := range owner {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
			return false
		}
	}
	return true
}

// KillLeftovers SIGKILLs every process that carries owner's mark (see
// Spec.Owner), with the process group of each one that leads a group. The
// gateway calls it once at start, before it starts any process: whatever
// carries the mark then was left by a previous gateway that was killed
// (the leaders die with it through Pdeathsig; their descendants do not).
// Processes of other users are found only with root or CAP_SYS_PTRACE (to
// read their environment); the rest are skipped.
func KillLeftovers(owner string) (killed int, err error) {
	if !validOwner(owner) {
		return 0, fmt.Errorf("kill leftovers: owner %q is not letters and digits", owner)
	}
	mark := []byte(ownerMark(owner) + "\x00")
	self, selfPgrp := os.Getpid(), syscall.Getpgrp()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("kill leftovers: %w", err)
	}
	// Find them all first: killing a group as it is found would hide its
	// other members from the count.
	type leftover struct{ pid, pgrp int }
	var found []leftover
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		st, ok := readStat(pid)
		if !ok || st.dead() || st.pgrp == selfPgrp || !hasMark(pid, mark) {
			continue
		}
		found = append(found, leftover{pid, st.pgrp})
	}
	for _, l := range found {
		if l.pgrp == l.pid {
			_ = signalGroup(l.pid, syscall.SIGKILL)
		}
		if err := syscall.Kill(l.pid, syscall.SIGKILL); err == nil || errors.Is(err, syscall.ESRCH) {
			killed++
		}
	}
	return killed, nil
}
