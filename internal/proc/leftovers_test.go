package proc

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pdeathHelper stands for a gateway: it starts a long sleep through Start,
// prints its pid and waits to be killed.
func pdeathHelper() int {
	p, err := Start(context.Background(), Spec{Path: "sleep", Args: []string{"300"}, Env: os.Environ(), Owner: "pdeathtest"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(p.Pid())
	select {}
}

// waitGone waits until pid no longer runs (a zombie counts as gone).
func waitGone(t *testing.T, pid int, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if state, _, _ := procStat(pid); state == "" || state == "Z" {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s (pid %d) still runs", what, pid)
}

func TestLeaderDiesWithTheGateway(t *testing.T) {
	helper := exec.Command(os.Args[0], "-test.run=^$")
	helper.Env = append(os.Environ(), "PROC_TEST_PDEATH_HELPER=1")
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		helper.Process.Kill()
		t.Fatalf("helper: %v", err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(line))
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	if err := helper.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	helper.Wait()
	waitGone(t, pid, "the CLI a killed gateway started")
}

func TestKillLeftoversKillsWhatCarriesTheMark(t *testing.T) {
	// What a killed gateway left: a shell in a session of its own (as a
	// grandchild that called setsid would be) and its children, all with
	// the gateway's owner mark; and something of another owner.
	start := func(owner string) *exec.Cmd {
		cmd := exec.Command("sh", "-c", "sleep 300 & sleep 300")
		cmd.Env = append(os.Environ(), ownerMark(owner))
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
		return cmd
	}
	left := start("leftovertest")
	other := start("someoneelse")
	var children []int
	deadline := time.Now().Add(10 * time.Second)
	for len(children) < 2 && time.Now().Before(deadline) {
		children = marked(ownerMark("leftovertest"))
		time.Sleep(10 * time.Millisecond)
	}
	if len(children) < 2 {
		t.Fatalf("marked processes = %v, want the shell and its sleeps", children)
	}

	killed, err := KillLeftovers("leftovertest")
	if err != nil {
		t.Fatal(err)
	}
	if killed < 2 {
		t.Errorf("killed %d, want the shell and its sleeps", killed)
	}
	left.Wait()
	for _, pid := range children {
		waitGone(t, pid, "a leftover")
	}
	if state, _, _ := procStat(other.Process.Pid); state == "" || state == "Z" {
		t.Error("a process of another owner was killed")
	}
	if _, err := KillLeftovers("bad owner!"); err == nil {
		t.Error("an owner that is not letters and digits was accepted")
	}
}
