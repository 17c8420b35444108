package proc

import (
	"bufio"
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// unusedUID returns a uid no process runs as, so that sweeping it cannot
// touch anything outside the test.
func unusedUID(t *testing.T) uint32 {
	t.Helper()
	for range 100 {
		uid := uint32(1<<30 + rand.IntN(1<<30))
		if len(processesOf(uid, "")) == 0 {
			return uid
		}
	}
	t.Fatal("found no unused uid")
	return 0
}

// processesOf lists the live processes whose real uid is uid and, unless
// arg is empty, that run `sleep arg`.
func processesOf(uid uint32, arg string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		if real, _, ok := parseUids(b); !ok || real != uid {
			continue
		}
		if state, _, _ := procStat(pid); state == "Z" || state == "" {
			continue
		}
		if arg != "" {
			cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
			if string(cmdline) != "sleep\x00"+arg+"\x00" {
				continue
			}
		}
		pids = append(pids, pid)
	}
	return pids
}

// killAllOf SIGKILLs every process of uid when the test ends.
func killAllOf(t *testing.T, uid uint32) {
	t.Cleanup(func() {
		for _, pid := range processesOf(uid, "") {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
}

// strayAs starts, as uid, a `sleep arg` that leaves its group for a session
// of its own and drops its environment (the mark), then is orphaned: the
// shell that started it exits. It returns the sleep's pid.
func strayAs(t *testing.T, uid uint32, arg string) int {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", "env -i setsid sleep "+arg+" </dev/null >/dev/null 2>&1 &")
	cmd.Env, cmd.Dir = shellEnv, "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("start the stray: %v: %s", err, out)
	}
	var pid int
	waitFor(t, 5*time.Second, "the stray `sleep "+arg+"` to run", func() bool {
		pids := processesOf(uid, arg)
		if len(pids) == 1 {
			pid = pids[0]
		}
		return pid != 0
	})
	return pid
}

// TestKillStrays: what a process of the agent's user left running outside
// every group proc runs (a setsid'd, env -i'd, orphaned sleep) is killed;
// the members of a live group, and its descendants in sessions of their
// own (claude runs its Bash tool so), are not; nor is a stray of another
// user.
func TestKillStrays(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run processes as another user")
	}
	uid, other := unusedUID(t), unusedUID(t)
	killAllOf(t, uid)
	killAllOf(t, other)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := startSh(t, ctx, `sleep 617001 & setsid sleep 617002 & echo ready; wait`, func(s *Spec) {
		s.Credential = &Credential{UID: uid, GID: uid}
		s.Dir = "/"
	})
	if got := readLine(t, bufio.NewReader(p.Stdout())); got != "ready" {
		t.Fatalf("the live group said %q, want ready", got)
	}
	alive := map[string]int{}
	for _, arg := range []string{"617001", "617002"} {
		waitFor(t, 5*time.Second, "the live group's `sleep "+arg+"` to run", func() bool {
			pids := processesOf(uid, arg)
			if len(pids) == 1 {
				alive[arg] = pids[0]
			}
			return alive[arg] != 0
		})
	}
	stray := strayAs(t, uid, "617003")
	alive["617004"] = strayAs(t, other, "617004")

	killed, err := KillStrays(uid)
	if err != nil {
		t.Fatalf("KillStrays: %v", err)
	}
	if killed != 1 {
		t.Errorf("KillStrays = %d, want 1 (the stray alone)", killed)
	}
	waitFor(t, 5*time.Second, "the stray to be killed and reaped", func() bool { return pidGone(stray) })
	for arg, pid := range alive {
		if state, _, _ := procStat(pid); state == "" || state == "Z" {
			t.Errorf("`sleep %s` (pid %d) was killed; only the stray should be", arg, pid)
		}
	}
	select {
	case <-p.Done():
		t.Errorf("the live group's leader was killed")
	default:
	}
}

// TestKillStraysSparesGroupsBeingStarted: a process Start is starting as
// the user while a sweep runs is never taken for a stray (its group is
// registered under the lock the sweep holds).
func TestKillStraysSparesGroupsBeingStarted(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run processes as another user")
	}
	uid := unusedUID(t)
	killAllOf(t, uid)
	var stop atomic.Bool
	var swept atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			n, err := KillStrays(uid)
			if err != nil {
				t.Errorf("KillStrays: %v", err)
				return
			}
			swept.Add(int64(n))
		}
	}()
	var ps []*Process
	for range 20 {
		ps = append(ps, startSh(t, t.Context(), `exec sleep 617005`, func(s *Spec) {
			s.Credential = &Credential{UID: uid, GID: uid}
			s.Dir = "/"
		}))
	}
	stop.Store(true)
	wg.Wait()
	if n := swept.Load(); n != 0 {
		t.Errorf("the sweeps killed %d processes, want 0", n)
	}
	for _, p := range ps {
		select {
		case <-p.Done():
			ex, _ := p.Wait()
			t.Errorf("process %d ended (%v) while the sweeps ran", p.Pid(), ex)
		default:
		}
	}
}

func TestKillStraysRefusesRoot(t *testing.T) {
	if n, err := KillStrays(0); err == nil || n != 0 {
		t.Errorf("KillStrays(0) = %d, %v; want 0 and an error", n, err)
	}
}

func TestParseUids(t *testing.T) {
	type uids struct {
		Real, Effective uint32
		OK              bool
	}
	tests := []struct {
		name string
		in   string
		want uids
	}{
		{"all the same", "Name:\tsleep\nUid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\n", uids{1000, 1000, true}},
		{"setuid root", "Name:\tsu\nUid:\t1000\t0\t0\t0\n", uids{1000, 0, true}},
		{"first line", "Uid:\t5\t6\t7\t8", uids{5, 6, true}},
		{"spaces", "Uid: 5 6 7 8\n", uids{5, 6, true}},
		{"a name that looks like it", "Name:\tUid:\t1\t1\nUid:\t2\t3\t3\t3\n", uids{2, 3, true}},
		{"no uid line", "Name:\tsleep\nGid:\t1\t1\t1\t1\n", uids{}},
		{"one field", "Uid:\t5\n", uids{}},
		{"not a number", "Uid:\tfive\t6\t7\t8\n", uids{}},
		{"negative", "Uid:\t-5\t6\t7\t8\n", uids{}},
		{"too big", "Uid:\t4294967296\t6\t7\t8\n", uids{}},
		{"empty", "", uids{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got uids
			got.Real, got.Effective, got.OK = parseUids([]byte(tt.in))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parseUids(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

// FuzzParseUids: any bytes give two uids or false, never a panic, and the
// uids are the first two fields of the Uid line.
func FuzzParseUids(f *testing.F) {
	f.Add([]byte("Name:\tsleep\nUid:\t1000\t0\t0\t0\n"))
	f.Add([]byte("Uid:"))
	f.Add([]byte("Uid:\t1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		real, eff, ok := parseUids(b)
		if !ok {
			if real != 0 || eff != 0 {
				t.Errorf("parseUids(%q) = %d, %d, false; want zeros", b, real, eff)
			}
			return
		}
		for _, line := range strings.Split(string(b), "\n") {
			if rest, found := strings.CutPrefix(line, "Uid:"); found {
				fields := strings.Fields(rest)
				r, _ := strconv.ParseUint(fields[0], 10, 32)
				e, _ := strconv.ParseUint(fields[1], 10, 32)
				if uint64(real) != r || uint64(eff) != e {
					t.Errorf("parseUids(%q) = %d, %d; want the fields %q", b, real, eff, fields[:2])
				}
				return
			}
		}
		t.Errorf("parseUids(%q) = %d, %d, true with no Uid line", b, real, eff)
	})
}
