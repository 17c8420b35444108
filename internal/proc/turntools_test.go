package proc

import (
	"io"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"
)

// turnLeader starts script under sh in a process group of its own,
// as a warm CLI runs, with its stdin kept open for the test to write to.
func turnLeader(t *testing.T, script string) (*exec.Cmd, io.WriteCloser) {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	return cmd, stdin
}

// waitChildren waits until pid has n live children started since, and
// returns them.
func waitChildren(t *testing.T, pid, n int, since time.Time) []int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond) // polling /proc; there is no event to wait on
	defer tick.Stop()
	for {
		var kids []int
		for _, s := range readProcStats() {
			if s.ppid == pid && !s.started.Before(since.Add(-clockTick)) {
				kids = append(kids, s.pid)
			}
		}
		if len(kids) >= n {
			return kids
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d has children %v, want %d", pid, kids, n)
		}
		<-tick.C
	}
}

func alive(pid int) bool {
	for _, s := range readProcStats() {
		if s.pid == pid {
			return true
		}
	}
	return false
}

func TestEndTurnToolsEndsTheTurnsCommandsNotTheLeader(t *testing.T) {
	since := time.Now()
	// A tool call in a group of its own with a job, and a helper the
	// "CLI" starts in its own group (an MCP server started mid-turn).
	cmd, _ := turnLeader(t, "setsid sh -c 'sleep 100 & sleep 100; wait' & sleep 102 & read x")
	kids := waitChildren(t, cmd.Process.Pid, 2, since)
	tool := waitToolGroup(t, cmd.Process.Pid, since)
	if n := EndTurnTools(cmd.Process.Pid, since, time.Second); n != 3 {
		t.Errorf("signalled %d processes, want the tool's sh and its 2 sleeps", n)
	}
	if left := turnProcesses(cmd.Process.Pid, since); len(left) > 0 {
		t.Errorf("left running: %v (the tool's group %d)", left, tool)
	}
	helpers := 0
	for _, pid := range kids {
		if alive(pid) {
			helpers++
		}
	}
	if helpers != 1 {
		t.Errorf("%d of the leader's children live, want the helper in its group", helpers)
	}
	if !alive(cmd.Process.Pid) {
		t.Error("the leader was killed")
	}
}

// A command that ignores SIGTERM, in a process group of its own (as the
// CLIs run their shell tools), gets SIGKILL after the grace; a job its
// shell started is ended with it.
func TestEndTurnToolsKillsWhatIgnoresTerm(t *testing.T) {
	since := time.Now()
	cmd, _ := turnLeader(t, `setsid sh -c 'trap "" TERM; sleep 100 & sleep 101' & read x`)
	waitChildren(t, cmd.Process.Pid, 1, since)
	tool := waitToolGroup(t, cmd.Process.Pid, since)
	EndTurnTools(cmd.Process.Pid, since, 50*time.Millisecond)
	if left := turnProcesses(cmd.Process.Pid, since); len(left) > 0 {
		t.Errorf("left running: %v (the tool's group %d)", left, tool)
	}
	if !alive(cmd.Process.Pid) {
		t.Error("the leader was killed")
	}
}

// waitToolGroup waits until the leader's descendants include a group of
// their own with both sleeps, and returns that group.
func waitToolGroup(t *testing.T, leader int, since time.Time) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond) // polling /proc; there is no event to wait on
	defer tick.Stop()
	for {
		pids := turnProcesses(leader, since)
		groups := map[int]int{}
		for _, s := range readProcStats() {
			if slices.Contains(pids, s.pid) && s.pgrp != leader {
				groups[s.pgrp]++
			}
		}
		for g, n := range groups {
			if n >= 3 { // sh and both sleeps
				return g
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no tool group of 3 among %v", pids)
		}
		<-tick.C
	}
}

// What the leader started before the turn (an MCP server) stays.
func TestEndTurnToolsKeepsWhatStartedBeforeTheTurn(t *testing.T) {
	cmd, stdin := turnLeader(t, "setsid sleep 100 & read x; setsid sleep 101 & read y")
	before := waitChildren(t, cmd.Process.Pid, 1, time.Time{})
	// Start times are known to the kernel's tick: the turn begins two
	// ticks later, so the process before it cannot count as the turn's.
	since := time.Now().Add(2 * clockTick)
	<-time.After(time.Until(since))
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
	during := waitChildren(t, cmd.Process.Pid, 1, since)
	EndTurnTools(cmd.Process.Pid, since, time.Second)
	if !alive(before[0]) {
		t.Errorf("the process started before the turn (%d) was killed", before[0])
	}
	if alive(during[0]) {
		t.Errorf("the turn's process %d still runs", during[0])
	}
}

// A pid whose process is not the one /proc listed (it died and the pid
// went to another) is not signalled; the one listed is.
func TestSignalSameSignalsOnlyTheProcessListed(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	st, ok := readStat(cmd.Process.Pid)
	if !ok {
		t.Fatal("no /proc stat for the child")
	}
	listed := liveProc{pid: cmd.Process.Pid, ticks: st.start}

	other := listed
	other.ticks++ // a process that started later under the same pid
	if err := signalSame(other, syscall.SIGKILL); err != syscall.ESRCH {
		t.Fatalf("signalSame(another process's pid) = %v, want ESRCH", err)
	}
	if st, ok := readStat(cmd.Process.Pid); !ok || st.dead() {
		t.Fatal("the child died from a signal meant for another process")
	}

	if err := signalSame(listed, syscall.SIGKILL); err != nil {
		t.Fatalf("signalSame(the listed process) = %v", err)
	}
	if err := cmd.Wait(); err == nil {
		t.Fatal("the child exited cleanly; want it killed")
	}
	if err := signalSame(listed, syscall.SIGKILL); err != syscall.ESRCH {
		t.Errorf("signalSame(a reaped process) = %v, want ESRCH", err)
	}
}
