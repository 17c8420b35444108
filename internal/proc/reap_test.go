package proc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The test binary is a subreaper like the gateway, so what the tests leave
// orphaned comes to it and must be reaped by proc.
func TestMain(m *testing.M) {
	if os.Getenv("PROC_TEST_PDEATH_HELPER") == "1" {
		os.Exit(pdeathHelper())
	}
	if err := BecomeSubreaper(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func TestBecomeSubreaper(t *testing.T) {
	t.Parallel()
	// TestMain called it.
	var v int32
	if err := unix.Prctl(unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&v)), 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	if v != 1 {
		t.Errorf("PR_GET_CHILD_SUBREAPER = %d, want 1", v)
	}
}

// pidGone reports whether pid no longer exists, not even as a zombie.
func pidGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// marked returns the live processes whose environment holds the mark.
func marked(mark string) []int {
	var pids []int
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		if state, _, _ := procStat(pid); state != "Z" && hasMark(pid, []byte(mark+"\x00")) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// procPPid reads the parent of pid from /proc.
func procPPid(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// A grandchild that calls setsid leaves the process group, so the group kill
// cannot reach it; it must still die when the turn ends, and be reaped (it
// was reparented to us, the subreaper). It holds stdout, so stdout must reach
// EOF once it is killed.
func TestSetsidEscapeeKilledAndReaped(t *testing.T) {
	t.Parallel()
	// The leader waits for stdin to end, so the group kill cannot catch the
	// grandchild before it has left the group.
	gate, release := io.Pipe()
	p := startSh(t, t.Context(), "setsid sleep 1000 & echo $!; cat >/dev/null", func(s *Spec) { s.Stdin = gate })
	t.Cleanup(func() { release.Close() }) // before startSh's cleanup waits
	out := bufio.NewReader(p.Stdout())
	pid, err := strconv.Atoi(readLine(t, out))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	waitFor(t, 5*time.Second, "grandchild to call setsid", func() bool {
		_, _, sid := procStat(pid)
		return sid == pid
	})
	release.Close()
	if _, err := io.ReadAll(out); err != nil {
		t.Errorf("stdout: %v, want EOF once the escapee is killed", err)
	}
	if ex, err := waitExit(t, p, 10*time.Second); err != nil || ex.Code != 0 {
		t.Errorf("Wait = %v, %v; want exit status 0", ex, err)
	}
	waitFor(t, 5*time.Second, "escapee to be killed and reaped", func() bool { return pidGone(pid) })
	if got := marked(p.mark); len(got) != 0 {
		t.Errorf("processes still carrying the mark: %v", got)
	}
}

// The mark is in the environment of the leader and of what it starts.
func TestMarkInherited(t *testing.T) {
	t.Parallel()
	gate, release := io.Pipe()
	p := startSh(t, t.Context(), "sleep 1000 & echo $!; cat >/dev/null", func(s *Spec) { s.Stdin = gate })
	t.Cleanup(func() { release.Close() }) // before startSh's cleanup waits
	child, err := strconv.Atoi(readLine(t, bufio.NewReader(p.Stdout())))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p.mark, markPrefix) || !strings.HasSuffix(p.mark, "=1") {
		t.Fatalf("mark %q, want %s<id>=1", p.mark, markPrefix)
	}
	got := marked(p.mark)
	for _, pid := range []int{p.Pid(), child} {
		if !slices.Contains(got, pid) {
			t.Errorf("processes carrying the mark = %v, want the leader %d and its child %d among them", got, p.Pid(), child)
		}
	}
	release.Close()
	if _, err := waitExit(t, p, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := marked(p.mark); len(got) != 0 {
		t.Errorf("processes still carrying the mark after the end: %v", got)
	}
}

// An orphan that left the group and exited by itself before the turn ended
// is a zombie of ours (the subreaper): it must be reaped when the turn ends.
// Not parallel: the end of any other test's process would reap it too.
func TestExitedEscapeeReaped(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "go")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// The inner sh exits at once, so the escapee is orphaned; it exits
	// when the test writes to the fifo; the leader waits for stdin to end.
	gate, release := io.Pipe()
	p := startSh(t, t.Context(), `sh -c 'setsid sh -c "echo \$\$; read x < `+fifo+`" &'; cat >/dev/null`, func(s *Spec) { s.Stdin = gate })
	t.Cleanup(func() { release.Close() }) // before startSh's cleanup waits
	pid, err := strconv.Atoi(readLine(t, bufio.NewReader(p.Stdout())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	waitFor(t, 5*time.Second, "escapee to be orphaned", func() bool { return procPPid(pid) == os.Getpid() })
	if err := os.WriteFile(fifo, []byte("go\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "escapee to exit", func() bool {
		state, _, _ := procStat(pid)
		return state == "Z"
	})
	release.Close()
	if _, err := waitExit(t, p, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "zombie escapee to be reaped", func() bool { return pidGone(pid) })
}

// A grandchild orphaned inside the group is killed by the group kill and
// reaped.
func TestOrphanInGroupReaped(t *testing.T) {
	t.Parallel()
	p := startSh(t, t.Context(), `sh -c 'sleep 1000 >/dev/null & echo $!'`, nil)
	pid, err := strconv.Atoi(readLine(t, bufio.NewReader(p.Stdout())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if _, err := waitExit(t, p, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "orphan to be killed and reaped", func() bool { return pidGone(pid) })
}

func TestParseStat(t *testing.T) {
	tests := []struct {
		in   string
		want stat
		ok   bool
	}{
		{"42 (sleep) S 1 42 42 0 -1", stat{state: 'S', ppid: 1, pgrp: 42}, true},
		{"7 (a) b) (c) Z 3 9 9", stat{state: 'Z', ppid: 3, pgrp: 9}, true},
		{"7 (name with spaces) R 3 9", stat{state: 'R', ppid: 3, pgrp: 9}, true},
		{"7 (x) R 3", stat{}, false},
		{"7 x R 3 9", stat{}, false},
		{"7 (x) RR 3 9", stat{}, false},
		{"7 (x) R three 9", stat{}, false},
		{"", stat{}, false},
	}
	for _, tt := range tests {
		got, ok := parseStat([]byte(tt.in))
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseStat(%q) = %+v, %v; want %+v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

// FuzzParseStat: any bytes give a result or false, never a panic, and a
// result's fields are the three fields after the last ')'.
func FuzzParseStat(f *testing.F) {
	f.Add([]byte("42 (sleep) S 1 42 42 0 -1"))
	f.Add([]byte("7 (a) b) (c) Z 3 9 9"))
	f.Add([]byte(")"))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, ok := parseStat(b)
		if !ok {
			return
		}
		rest := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		ppid, _ := strconv.Atoi(rest[1])
		pgrp, _ := strconv.Atoi(rest[2])
		if want := (stat{state: rest[0][0], ppid: ppid, pgrp: pgrp}); st != want {
			t.Errorf("parseStat(%q) = %+v, want %+v", b, st, want)
		}
	})
}
