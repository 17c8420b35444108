package proc

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// shellEnv is enough environment for sh to find sleep, head and friends.
var shellEnv = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}

func startSh(t *testing.T, ctx context.Context, script string, mod func(*Spec)) *Process {
	t.Helper()
	s := Spec{Path: "/bin/sh", Args: []string{"-c", script}, Env: shellEnv, Grace: 2 * time.Second}
	if mod != nil {
		mod(&s)
	}
	p, err := Start(ctx, s)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		// Never leave anything running, whatever the test did.
		_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
		_, _ = p.Wait()
	})
	return p
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		<-tick.C
	}
}

// procStat reads state, process group and session of pid from /proc.
func procStat(pid int) (state string, pgrp, session int) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0, 0
	}
	// pid (comm) state ppid pgrp session ...; comm may contain spaces.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", 0, 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 4 {
		return "", 0, 0
	}
	pgrp, _ = strconv.Atoi(f[2])
	session, _ = strconv.Atoi(f[3])
	return f[0], pgrp, session
}

// groupGone reports whether no live process is left in group pgid. Zombies
// count as gone: they are dead and only wait for init to reap them.
func groupGone(pgid int) bool {
	if err := syscall.Kill(-pgid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		if state, pg, _ := procStat(pid); pg == pgid && state != "Z" && state != "" {
			return false
		}
	}
	return true
}

// readLine reads one line from the process's stdout, failing the test if
// none arrives in time.
func readLine(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	type res struct {
		s   string
		err error
	}
	c := make(chan res, 1)
	go func() {
		s, err := r.ReadString('\n')
		c <- res{s, err}
	}()
	select {
	case got := <-c:
		if got.err != nil {
			t.Fatalf("read line: %v (got %q)", got.err, got.s)
		}
		return strings.TrimSuffix(got.s, "\n")
	case <-time.After(10 * time.Second):
		t.Fatal("no line from child in 10s")
	}
	return ""
}

func waitExit(t *testing.T, p *Process, d time.Duration) (Exit, error) {
	t.Helper()
	select {
	case <-p.Done():
	case <-time.After(d):
		t.Fatalf("process %d did not finish in %v", p.Pid(), d)
	}
	return p.Wait()
}

func TestExitCodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		script string
		want   Exit
	}{
		{"zero", "exit 0", Exit{Code: 0}},
		{"three", "exit 3", Exit{Code: 3}},
		{"255", "exit 255", Exit{Code: 255}},
		{"sigkill", "kill -KILL $$", Exit{Code: 128 + 9, Signal: syscall.SIGKILL}},
		{"sigusr1", "kill -USR1 $$", Exit{Code: 128 + 10, Signal: syscall.SIGUSR1}},
		{"sigterm", "kill -TERM $$", Exit{Code: 128 + 15, Signal: syscall.SIGTERM}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := startSh(t, t.Context(), tt.script, nil)
			got, err := waitExit(t, p, 10*time.Second)
			if err != nil {
				t.Fatalf("Wait error = %v, want nil (exit codes are not errors)", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("exit (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStdinStdoutEnvDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	big := strings.Repeat("prompt line with text\n", 1<<16) // ~1.4 MiB, more than a pipe holds
	p := startSh(t, t.Context(), `pwd; printf '%s\n' "$FOO"; env | sort | tr '\n' ' '; echo; cat`, func(s *Spec) {
		s.Dir = dir
		s.Env = []string{"FOO=bar baz", "PATH=/usr/bin:/bin"}
		s.Stdin = strings.NewReader(big)
	})
	out, err := io.ReadAll(p.Stdout())
	if err != nil {
		t.Fatalf("read stdout: %v", err)
	}
	ex, err := waitExit(t, p, 10*time.Second)
	if err != nil || ex.Code != 0 {
		t.Fatalf("Wait = %v, %v; want exit 0", ex, err)
	}
	lines := strings.SplitN(string(out), "\n", 4)
	if len(lines) < 4 {
		t.Fatalf("short output: %q", out[:min(len(out), 200)])
	}
	if lines[0] != dir {
		t.Errorf("cwd = %q, want %q", lines[0], dir)
	}
	if lines[1] != "bar baz" {
		t.Errorf("FOO = %q, want %q", lines[1], "bar baz")
	}
	// sh adds PWD (and maybe SHLVL, _), proc its mark; nothing from the
	// test's own env.
	for _, kv := range strings.Fields(lines[2]) {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case kv == p.mark:
		case slices.Contains([]string{"FOO", "bar", "baz", "PATH", "PWD", "SHLVL", "_", "OLDPWD"}, name):
		default:
			t.Errorf("unexpected variable in child env: %q", kv)
		}
	}
	if lines[3] != big {
		t.Errorf("stdin round trip: got %d bytes, want %d", len(lines[3]), len(big))
	}
}

func TestNilEnvIsEmpty(t *testing.T) {
	t.Setenv("PROC_TEST_SECRET", "s3cret")
	p, err := Start(t.Context(), Spec{Path: "/usr/bin/env"})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(p.Stdout())
	if _, err := waitExit(t, p, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if got, want := string(out), p.mark+"\n"; got != want {
		t.Errorf("child with nil Env saw %q, want only the mark %q", got, want)
	}
}

func TestOwnProcessGroup(t *testing.T) {
	t.Parallel()
	p := startSh(t, t.Context(), "echo ready; exec sleep 300", nil)
	readLine(t, bufio.NewReader(p.Stdout()))
	pgid, err := syscall.Getpgid(p.Pid())
	if err != nil {
		t.Fatal(err)
	}
	if pgid != p.Pid() {
		t.Errorf("pgid = %d, want the child's own pid %d", pgid, p.Pid())
	}
	if pgid == syscall.Getpgrp() {
		t.Error("child shares the test's process group")
	}
}

func TestCancelKillsGrandchildren(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	p := startSh(t, ctx, "sleep 300 & echo $!; sleep 300", nil)
	out := bufio.NewReader(p.Stdout())
	grandchild, err := strconv.Atoi(readLine(t, out))
	if err != nil {
		t.Fatal(err)
	}
	if gpg, _ := syscall.Getpgid(grandchild); gpg != p.Pid() {
		t.Fatalf("grandchild %d in group %d, want %d", grandchild, gpg, p.Pid())
	}

	start := time.Now()
	cancel()
	ex, err := waitExit(t, p, 10*time.Second)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Wait error = %v, want context.Canceled", err)
	}
	if ex.Signal != syscall.SIGTERM {
		t.Errorf("exit = %v, want death by SIGTERM", ex)
	}
	waitFor(t, 5*time.Second, "process group to be gone", func() bool { return groupGone(p.Pid()) })
	if d := time.Since(start); d >= 2*time.Second {
		t.Errorf("stopping took %v, the whole grace: SIGTERM did not work", d)
	}
	if _, err := io.ReadAll(out); err != nil {
		t.Errorf("stdout after cancel: %v, want EOF", err)
	}
}

func TestDeadlineIsDistinguishable(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	p := startSh(t, ctx, "exec sleep 300", nil)
	_, err := waitExit(t, p, 10*time.Second)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait error = %v, want context.DeadlineExceeded", err)
	}

	cause := errors.New("user pressed stop")
	ctx2, cancel2 := context.WithCancelCause(t.Context())
	p2 := startSh(t, ctx2, "exec sleep 300", nil)
	cancel2(cause)
	if _, err := waitExit(t, p2, 10*time.Second); !errors.Is(err, cause) {
		t.Errorf("Wait error = %v, want the cancel cause", err)
	}
}

func TestIgnoredSIGTERMGetsSIGKILLAfterGrace(t *testing.T) {
	t.Parallel()
	const grace = 300 * time.Millisecond
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// The sleep inherits the ignored SIGTERM too.
	p := startSh(t, ctx, "trap '' TERM; sleep 300 & echo ready; wait", func(s *Spec) { s.Grace = grace })
	readLine(t, bufio.NewReader(p.Stdout()))

	start := time.Now()
	cancel()
	ex, err := waitExit(t, p, 10*time.Second)
	elapsed := time.Since(start)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Wait error = %v, want context.Canceled", err)
	}
	if ex.Signal != syscall.SIGKILL || ex.Code != 137 {
		t.Errorf("exit = %+v, want SIGKILL (137)", ex)
	}
	if elapsed < grace {
		t.Errorf("killed after %v, before the %v grace", elapsed, grace)
	}
	waitFor(t, 5*time.Second, "process group to be gone", func() bool { return groupGone(p.Pid()) })
}

func TestGrandchildKilledWhenLeaderExits(t *testing.T) {
	t.Parallel()
	// The background sleep keeps stdout open; without the group kill after
	// Wait, reading stdout would block for 300 s.
	p := startSh(t, t.Context(), "sleep 300 & echo $!", nil)
	out, err := io.ReadAll(p.Stdout())
	if err != nil {
		t.Fatalf("read stdout: %v", err)
	}
	ex, err := waitExit(t, p, 10*time.Second)
	if err != nil || ex.Code != 0 {
		t.Fatalf("Wait = %v, %v", ex, err)
	}
	grandchild, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	waitFor(t, 5*time.Second, "grandchild to be gone", func() bool { return groupGone(p.Pid()) })
	if grandchild == 0 {
		t.Fatalf("no grandchild pid in %q", out)
	}
}

func TestEscapedHolderDoesNotBlockForever(t *testing.T) {
	t.Parallel()
	const grace = 200 * time.Millisecond
	// setsid leaves the group, so the group kill cannot reach it, and env -i
	// drops the mark, so the sweep cannot find it; it keeps stdout and
	// stderr open. The readers must give up after the grace, and still
	// deliver everything written before.
	gate, release := io.Pipe()
	p := startSh(t, t.Context(), `env -i /usr/bin/setsid /bin/sh -c 'echo $$; exec /bin/sleep 300' & read x; echo tail >&2; exit 7`, func(s *Spec) {
		s.Grace = grace
		s.Stdin = gate
	})
	out := bufio.NewReader(p.Stdout())
	pid, err := strconv.Atoi(readLine(t, out))
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(pid, syscall.SIGKILL)
	if _, _, sid := procStat(pid); sid != pid {
		t.Fatalf("escapee %d has session %d, want its own", pid, sid)
	}
	release.Close() // now the leader exits, leaving the escapee behind
	rest, err := io.ReadAll(out)
	if !errors.Is(err, ErrOutputHeld) {
		t.Errorf("stdout read error = %v, want ErrOutputHeld", err)
	}
	if len(rest) != 0 {
		t.Errorf("unexpected stdout %q", rest)
	}
	ex, err := waitExit(t, p, 10*time.Second)
	if err != nil || ex.Code != 7 {
		t.Errorf("Wait = %v, %v; want exit status 7", ex, err)
	}
	if got := p.StderrTail(); got != "tail\n" {
		t.Errorf("stderr tail = %q, want %q", got, "tail\n")
	}
}

func TestPipeReaderAfterDeadline(t *testing.T) {
	t.Parallel()
	// A reader that falls behind must still get everything written before
	// the deadline passed, then ErrOutputHeld while the pipe is held open.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	want := strings.Repeat("0123456789abcdef", 2048) // 32 KiB: several reads
	if _, err := w.WriteString(want); err != nil {
		t.Fatal(err)
	}
	if err := r.SetReadDeadline(time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	pr := &pipeReader{f: r}
	var got strings.Builder
	buf := make([]byte, 1000)
	for {
		n, err := pr.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			if !errors.Is(err, ErrOutputHeld) {
				t.Errorf("final error = %v, want ErrOutputHeld", err)
			}
			break
		}
	}
	if got.String() != want {
		t.Errorf("read %d bytes, want %d", got.Len(), len(want))
	}
	if _, err := pr.Read(buf); !errors.Is(err, ErrOutputHeld) {
		t.Errorf("error is not sticky: %v", err)
	}

	// Same, but the writer is gone: plain EOF.
	r2, w2, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	w2.WriteString("last words")
	w2.Close()
	r2.SetReadDeadline(time.Now().Add(-time.Second))
	b, err := io.ReadAll(&pipeReader{f: r2})
	if err != nil || string(b) != "last words" {
		t.Errorf("ReadAll = %q, %v; want %q, nil", b, err, "last words")
	}
}

func TestStderrTailBounded(t *testing.T) {
	t.Parallel()
	p := startSh(t, t.Context(), "head -c 100000 /dev/zero | tr '\\0' a >&2; echo END >&2; exit 1", func(s *Spec) { s.TailBytes = 1000 })
	_, _ = io.Copy(io.Discard, p.Stdout())
	ex, err := waitExit(t, p, 10*time.Second)
	if err != nil || ex.Code != 1 {
		t.Fatalf("Wait = %v, %v", ex, err)
	}
	got := p.StderrTail()
	want := strings.Repeat("a", 1000-4) + "END\n"
	if got != want {
		t.Errorf("tail has %d bytes ending %q, want %d bytes ending %q", len(got), got[max(0, len(got)-10):], len(want), want[len(want)-10:])
	}
}

func TestDefaultTailBytes(t *testing.T) {
	t.Parallel()
	p := startSh(t, t.Context(), "head -c 100000 /dev/zero >&2", nil)
	if _, err := waitExit(t, p, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := len(p.StderrTail()); got != DefaultTailBytes {
		t.Errorf("tail = %d bytes, want %d", got, DefaultTailBytes)
	}
}

func TestNoZombie(t *testing.T) {
	t.Parallel()
	p := startSh(t, t.Context(), "exit 0", nil)
	if _, err := waitExit(t, p, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	// Reaped: the pid no longer exists at all (a zombie would still answer
	// signal 0 and have a /proc entry in state Z).
	if err := syscall.Kill(p.Pid(), 0); !errors.Is(err, syscall.ESRCH) {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(p.Pid()) + "/stat")
		t.Errorf("kill(pid, 0) = %v after Wait, want ESRCH; stat: %s", err, b)
	}
	// Wait is idempotent.
	for range 3 {
		if _, err := p.Wait(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestStartErrors(t *testing.T) {
	t.Parallel()
	_, err := Start(t.Context(), Spec{Path: "/nonexistent/binary"})
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Start(missing) = %v, want os.ErrNotExist", err)
	}
	_, err = Start(t.Context(), Spec{Path: "definitely-not-a-command-xyz"})
	if err == nil {
		t.Error("Start(unknown name) = nil error")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Start(ctx, Spec{Path: "/bin/true"}); !errors.Is(err, context.Canceled) {
		t.Errorf("Start(canceled ctx) = %v, want context.Canceled", err)
	}
}

func TestExitString(t *testing.T) {
	t.Parallel()
	if got := (Exit{Code: 3}).String(); got != "exit status 3" {
		t.Errorf("got %q", got)
	}
	if got := (Exit{Code: 137, Signal: syscall.SIGKILL}).String(); got != "killed by signal 9 (killed)" {
		t.Errorf("got %q", got)
	}
}

func TestTail(t *testing.T) {
	t.Parallel()
	tl := &tail{max: 5}
	for _, s := range []string{"ab", "cd", "efg", "", "hijklmnop", "q"} {
		tl.Write([]byte(s))
	}
	if got := tl.String(); got != "mnopq" {
		t.Errorf("tail = %q, want %q", got, "mnopq")
	}
}

func TestUnreadStdinDoesNotBlock(t *testing.T) {
	t.Parallel()
	// The child exits without reading a prompt bigger than the pipe buffer:
	// the copy fails with EPIPE and Wait still returns at once.
	p := startSh(t, t.Context(), "exit 4", func(s *Spec) {
		s.Stdin = strings.NewReader(strings.Repeat("x", 4<<20))
	})
	ex, err := waitExit(t, p, 10*time.Second)
	if err != nil || ex.Code != 4 {
		t.Errorf("Wait = %v, %v; want exit status 4", ex, err)
	}
}

// With Interrupt, a cancel sends that signal first: a CLI that stops
// cleanly on it exits by itself and says so; one that ignores it gets
// SIGTERM after InterruptGrace.
func TestCancelInterruptsFirst(t *testing.T) {
	t.Parallel()
	interrupt := func(s *Spec) { s.Interrupt, s.InterruptGrace = syscall.SIGINT, 300*time.Millisecond }

	ctx, cancel := context.WithCancel(t.Context())
	p := startSh(t, ctx, `trap 'echo interrupted; exit 0' INT; echo ready; while :; do sleep 0.05; done`, interrupt)
	out := bufio.NewReader(p.Stdout())
	if got := readLine(t, out); got != "ready" {
		t.Fatalf("first line = %q", got)
	}
	cancel()
	if got := readLine(t, out); got != "interrupted" {
		t.Errorf("after the cancel the CLI printed %q, want its own clean stop", got)
	}
	ex, err := waitExit(t, p, 10*time.Second)
	if !errors.Is(err, context.Canceled) || ex.Code != 0 {
		t.Errorf("exit = %v, %v; want a clean exit reported as cancelled", ex, err)
	}

	ctx2, cancel2 := context.WithCancel(t.Context())
	p2 := startSh(t, ctx2, `trap '' INT; echo ready; while :; do sleep 0.05; done`, interrupt)
	out2 := bufio.NewReader(p2.Stdout())
	readLine(t, out2)
	start := time.Now()
	cancel2()
	ex2, _ := waitExit(t, p2, 10*time.Second)
	if ex2.Signal != syscall.SIGTERM {
		t.Errorf("exit = %v, want SIGTERM after the interrupt was ignored", ex2)
	}
	if d := time.Since(start); d < 300*time.Millisecond || d >= 2*time.Second {
		t.Errorf("stopped after %v, want SIGTERM after the 300ms interrupt grace", d)
	}
	waitFor(t, 5*time.Second, "process group to be gone", func() bool { return groupGone(p2.Pid()) })
}

func TestStdinPipeTakesSeveralMessages(t *testing.T) {
	ctx := context.Background()
	p := startSh(t, ctx, `while read -r line; do echo "got $line"; done; echo eof`, func(s *Spec) { s.StdinPipe = true })
	if p.Stdin() == nil {
		t.Fatal("Stdin() is nil with StdinPipe")
	}
	out := bufio.NewReader(p.Stdout())
	for _, msg := range []string{"one", "two"} {
		if _, err := io.WriteString(p.Stdin(), msg+"\n"); err != nil {
			t.Fatal(err)
		}
		if got := readLine(t, out); got != "got "+msg {
			t.Fatalf("read %q after writing %q", got, msg)
		}
	}
	p.Stdin().Close()
	if got := readLine(t, out); got != "eof" {
		t.Fatalf("after close: %q", got)
	}
	if exit, err := waitExit(t, p, 10*time.Second); err != nil || exit.Code != 0 {
		t.Fatalf("exit %v, %v", exit, err)
	}
	// After exit, a write fails instead of blocking.
	if _, err := io.WriteString(p.Stdin(), "late\n"); err == nil {
		t.Error("a write after exit succeeded")
	}
}
