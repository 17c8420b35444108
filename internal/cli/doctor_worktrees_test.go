package cli

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/gateway"
	"github.com/agentgateway/gateway/internal/worktree"
)

// doctor lists the worktrees that hold unmerged work, naming the thread,
// the branch, the project relative to PROJECTS_ROOT and the last use, and
// leaves out those with nothing unmerged.
func TestDoctorListsUnmergedWorktrees(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "gitconfig"), []byte("[init]\n\tdefaultBranch = main\n[user]\n\tname = T\n\temail = t@example.com\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GIT_CONFIG_GLOBAL", filepath.Join(home, "gitconfig"))
	t.Setenv("GIT_CONFIG_SYSTEM", os.DevNull)
	root := filepath.Join(t.TempDir(), "projects")
	app := filepath.Join(root, "app")
	if err := os.MkdirAll(app, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q"}, {"commit", "-q", "--allow-empty", "-m", "initial"}} {
		if out, err := exec.Command("git", append([]string{"-C", app}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	g := worktree.New(worktree.Options{})
	ctx := context.Background()
	used := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	records := map[string]any{}
	for _, id := range []string{"31", "32"} {
		wt, err := g.Create(ctx, app, id)
		if err != nil {
			t.Fatal(err)
		}
		records[id] = map[string]any{"thread": id, "checkout": wt.Checkout, "dir": wt.Dir, "branch": wt.Branch,
			"base_branch": wt.BaseBranch, "base_commit": wt.BaseCommit, "project": app, "last_used": used}
	}
	if err := os.WriteFile(filepath.Join(root, ".worktrees", "app", "31", "wip.txt"), []byte("wip\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	configDir := t.TempDir()
	data, _ := json.Marshal(map[string]any{"version": 1, "worktrees": records})
	if err := os.WriteFile(filepath.Join(configDir, gateway.WorktreesFile), data, 0o600); err != nil {
		t.Fatal(err)
	}
	threadList := `{"version":1,"threads":{"31":{"id":"31","parent":"1","name":"Fix the login bug","created":"2026-03-01T10:00:00Z"}}}`
	if err := os.WriteFile(filepath.Join(configDir, "threads.json"), []byte(threadList), 0o600); err != nil {
		t.Fatal(err)
	}

	cfg := &config.Config{ConfigDir: configDir, ProjectsRoot: root, Worktrees: true}
	checks := worktreeChecks(ctx, cfg)
	if len(checks) != 1 {
		t.Fatalf("checks = %+v, want the one worktree with unmerged work", checks)
	}
	want := `thread "Fix the login bug" (31): gateway/31 in app has 1 uncommitted file not in main; last used 2026-03-01 12:00 UTC`
	if c := checks[0]; !c.Warning || !strings.HasPrefix(c.Detail, want) || strings.Contains(c.Detail, root) {
		t.Errorf("check = %+v\nwant a warning starting %q, without the server's path", c, want)
	}

	os.Remove(filepath.Join(root, ".worktrees", "app", "31", "wip.txt"))
	if checks := worktreeChecks(ctx, cfg); len(checks) != 1 || !checks[0].OK {
		t.Errorf("with nothing unmerged: %+v", checks)
	}
}
