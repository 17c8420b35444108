package worktree

import (
	"context"
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentgateway/gateway/internal/proc"
)

// Git's messages name paths under PROJECTS_ROOT as $PROJECTS_ROOT/…,
// never where they are on the server.
func TestErrorsNameNoServerPath(t *testing.T) {
	gitEnv(t, false)
	root := filepath.Join(t.TempDir(), "srv", "projects")
	if err := os.MkdirAll(filepath.Join(root, "app"), 0o755); err != nil {
		t.Fatal(err)
	}
	g := New(Options{Root: root})
	_, err := g.run.Run(context.Background(), root, nil, "-C", filepath.Join(root, "app", "missing"), "status")
	var ee *ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("Run = %v, want an *ExitError", err)
	}
	if strings.Contains(err.Error(), root) || !strings.Contains(err.Error(), "$PROJECTS_ROOT/app/missing") {
		t.Errorf("error names the server's path or not the project's: %v", err)
	}
}

// A git that hangs is stopped with its whole process group when the
// timeout passes: the command fails with the deadline, and what it
// started is killed too.
func TestHangingGitIsKilledWithItsGroup(t *testing.T) {
	bin := t.TempDir()
	pidFile := filepath.Join(bin, "child.pid")
	write(t, filepath.Join(bin, "git"), "#!/bin/sh\nsleep 300 &\necho $! > "+pidFile+"\nwait\n")
	if err := os.Chmod(filepath.Join(bin, "git"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	g := New(Options{Timeout: 300 * time.Millisecond})
	start := time.Now()
	_, err := g.run.Run(context.Background(), bin, nil, "status")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run = %v, want the deadline", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("took %v to give up", took)
	}
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for alive(pid) {
		select {
		case <-deadline:
			t.Fatalf("git's child %d outlived it", pid)
		case <-tick.C:
		}
	}
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}

// With AGENT_USER, git runs as that user: the worktree, its branch's
// objects and the merge's files are the agent's, and git reads the
// agent's HOME, not the gateway's.
func TestGitRunsAsTheAgentUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("switching users needs root")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("needs a user named nobody to stand for the agent user")
	}
	gitEnv(t, false)
	uid, _ := strconv.Atoi(nobody.Uid)
	gid, _ := strconv.Atoi(nobody.Gid)
	// The test's temporary folders are private to root: open the way.
	base := t.TempDir()
	for d := base; d != filepath.Dir(d) && strings.HasPrefix(d, os.TempDir()) && d != os.TempDir(); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	home := filepath.Join(base, "home")
	write(t, filepath.Join(home, ".gitconfig"), "[user]\n\tname = The Agent\n\temail = agent@example.com\n")
	root := filepath.Join(base, "projects")
	app := filepath.Join(root, "app")
	write(t, filepath.Join(app, "f.txt"), lines)
	run(t, app, "init", "-q")
	commitAll(t, app, "initial")
	if err := filepath.Walk(base, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		filepath.Walk(base, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, 0, 0) })
	})

	agent := &User{Name: "nobody", Home: home, Credential: proc.Credential{UID: uint32(uid), GID: uint32(gid)}}
	g := New(Options{User: agent, Root: root})
	ctx := context.Background()
	wt, err := g.Create(ctx, app, "9")
	if err != nil {
		t.Fatal(err)
	}
	if owner := ownerOf(t, wt.Dir); owner != uid {
		t.Errorf("the worktree is owned by uid %d, want the agent's %d", owner, uid)
	}
	write(t, filepath.Join(wt.Dir, "new.txt"), "new\n")
	os.Lchown(filepath.Join(wt.Dir, "new.txt"), uid, gid)
	if _, err := g.Diff(ctx, wt); err != nil {
		t.Fatalf("Diff as the agent: %v", err)
	}
	res, err := g.Merge(ctx, wt, "merge")
	if err != nil {
		t.Fatal(err)
	}
	if got := runAs(t, app, "log", "-1", "--format=%an", res.Saved); got != "The Agent" {
		t.Errorf("the saved work's author is %q, want the agent's own identity", got)
	}
	if owner := ownerOf(t, filepath.Join(app, "new.txt")); owner != uid {
		t.Errorf("the merged file is owned by uid %d, want the agent's %d", owner, uid)
	}
	if err := g.Discard(ctx, wt); err != nil {
		t.Fatal(err)
	}
}

func ownerOf(t *testing.T, path string) int {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return int(st.Sys().(*syscall.Stat_t).Uid)
}

// runAs runs git as root in a repository another user owns.
func runAs(t *testing.T, dir string, args ...string) string {
	t.Helper()
	return run(t, dir, append([]string{"-c", "safe.directory=*"}, args...)...)
}
