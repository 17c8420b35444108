package gateway

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/queue"
	"github.com/agentgateway/gateway/internal/reply"
	"github.com/agentgateway/gateway/internal/threads"
	"github.com/agentgateway/gateway/internal/worktree"
)

// worktreesUnderTest is the worktrees of WORKTREES=on over PROJECTS_ROOT
// root, with a fake clock and an in-memory thread list.
func worktreesUnderTest(t *testing.T, root string, configDir string) (*worktrees, *threads.Store, *clockwork.FakeClock) {
	t.Helper()
	cfg, err := config.Load(config.LoadOptions{Environ: []string{
		config.EnvConfigDir + "=" + configDir, config.EnvPermissionMode + "=acceptEdits",
		config.EnvWorktrees + "=on", config.EnvProjectsRoot + "=" + root,
	}})
	if err != nil {
		t.Fatal(err)
	}
	list, _, err := threads.Open("")
	if err != nil {
		t.Fatal(err)
	}
	clock := clockwork.NewFakeClockAt(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	w, err := newWorktrees(cfg, list, clock, zerolog.New(zerolog.NewTestWriter(t)))
	if err != nil {
		t.Fatal(err)
	}
	return w, list, clock
}

func prompt(thread string) queue.Event {
	return queue.Event{ID: 1, Kind: queue.KindMessage, ChannelID: thread, Lane: thread, Text: "hi"}
}

// The hook: a prompt in a thread the gateway opened runs in the thread's
// worktree, made once and found again after a restart; anywhere else,
// or for a project git cannot branch, the turn runs where it would have,
// and a reason worth telling is told once.
func TestWorktreeHookChoosesTheWorkDir(t *testing.T) {
	worktreeGitEnv(t)
	root, app := worktreeProject(t)
	plain := filepath.Join(root, "plain")
	empty := filepath.Join(root, "empty")
	for _, d := range []string{plain, empty} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	gitOut(t, empty, "init", "-q")
	configDir := t.TempDir()
	w, list, _ := worktreesUnderTest(t, root, configDir)
	for _, id := range []string{"11", "12", "13", "14"} {
		list.Add(threads.Thread{ID: id, Parent: "1", Author: "u"})
	}
	list.MarkGone("14")
	ctx := context.Background()

	type call struct{ dir, note string }
	steps := []struct {
		name, channel, project string
		want                   call
	}{
		{"a channel", "1", app, call{}},
		{"a thread's first prompt", "11", app, call{dir: filepath.Join(root, ".worktrees", "app", "11")}},
		{"its second", "11", app, call{dir: filepath.Join(root, ".worktrees", "app", "11")}},
		{"not a git repository", "12", plain, call{}},
		{"no commit yet", "13", empty, call{note: "No worktree for this thread: the project's repository has no commit yet. It works in the project's checkout itself."}},
		{"no commit yet, again", "13", empty, call{}},
		{"a thread Discord deleted", "14", app, call{}},
	}
	for _, s := range steps {
		dir, note := w.WorkDir(ctx, prompt(s.channel), s.project)
		if diff := cmp.Diff(s.want, call{dir, note}, cmp.AllowUnexported(call{})); diff != "" {
			t.Errorf("%s (-want +got):\n%s", s.name, diff)
		}
	}

	// After a restart, the record is read back.
	again, _, _ := worktreesUnderTest(t, root, configDir)
	again.threads = list
	if dir, _ := again.WorkDir(ctx, prompt("11"), app); dir != filepath.Join(root, ".worktrees", "app", "11") {
		t.Errorf("after a restart the thread works in %q", dir)
	}
	r, ok := again.record("11")
	if !ok || r.Branch != "gateway/11" || r.BaseBranch != "main" || r.Project != app {
		t.Errorf("record after a restart = %+v, %v", r, ok)
	}
}

// Cleanup, at start and hourly: a worktree whose thread is gone, or that
// is merged and whose thread has been quiet for WORKTREE_KEEP_DAYS, is
// removed; one holding unmerged work is kept whatever its thread became.
func TestWorktreeCleanup(t *testing.T) {
	worktreeGitEnv(t)
	root, app := worktreeProject(t)
	w, list, clock := worktreesUnderTest(t, root, t.TempDir())
	ctx := context.Background()
	// 21 gone and clean, 22 gone with work, 23 clean and quiet,
	// 24 with work and quiet, 25 clean and used recently.
	for _, id := range []string{"21", "22", "23", "24", "25"} {
		list.Add(threads.Thread{ID: id, Parent: "1", Author: "u"})
		if dir, _ := w.WorkDir(ctx, prompt(id), app); dir == "" {
			t.Fatalf("no worktree for %s", id)
		}
	}
	for _, id := range []string{"22", "24"} {
		if err := os.WriteFile(filepath.Join(root, ".worktrees", "app", id, "work.txt"), []byte("unmerged\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	list.MarkGone("21")
	list.MarkGone("22")
	remaining := func() []string {
		var ids []string
		for _, id := range []string{"21", "22", "23", "24", "25"} {
			if _, ok := w.record(id); ok {
				ids = append(ids, id)
			}
		}
		return ids
	}

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		<-done
	})
	waitFor(t, "the sweep at start", func() bool { return len(remaining()) == 4 })
	if diff := cmp.Diff([]string{"22", "23", "24", "25"}, remaining()); diff != "" {
		t.Fatalf("after the sweep at start (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(root, ".worktrees", "app", "21")); !os.IsNotExist(err) {
		t.Errorf("the gone thread's worktree is still on disk: %v", err)
	}

	// Seven days later, the quiet clean one goes; 25 was used meanwhile.
	clock.Advance(6*24*time.Hour + 23*time.Hour)
	w.WorkDir(ctx, prompt("25"), app)
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)
	waitFor(t, "the hourly sweep", func() bool { return len(remaining()) == 3 })
	if diff := cmp.Diff([]string{"22", "24", "25"}, remaining()); diff != "" {
		t.Errorf("a week later (-want +got):\n%s", diff)
	}
	if got := gitOut(t, app, "branch", "--list", "gateway/*", "--format=%(refname:short)"); got != "gateway/22\ngateway/24\ngateway/25" {
		t.Errorf("branches left:\n%s", got)
	}
}

// waitFor polls cond until it holds, failing after waitLong.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(waitLong)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}

// /diff's message stays within Discord's limit with its code block
// closed, whatever the diff holds.
func TestDiffAnswerFitsDiscord(t *testing.T) {
	long := strings.Repeat("x", 5000)
	cases := []struct {
		name string
		d    worktree.Diff
		has  []string
	}{
		{"nothing", worktree.Diff{}, []string{"No changes in `gateway/1` against `main` yet."}},
		{"one file", worktree.Diff{Files: []worktree.FileStat{{Path: "a.go", Added: 2, Deleted: 1}}, Added: 2, Deleted: 1,
			Patch: []byte("diff --git a/a.go b/a.go\n-old\n+new\n+more\n")}, []string{"**1 file changed**", "`a.go` +2 −1", "```diff\ndiff --git a/a.go b/a.go\n-old\n+new\n+more\n"}},
		{"many files, long lines, fences, odd names", func() worktree.Diff {
			d := worktree.Diff{Patch: []byte(strings.Repeat("+```\n+"+long+"\n+\x1b[31mred\n", 200))}
			for i := 0; i < 40; i++ {
				d.Files = append(d.Files, worktree.FileStat{Path: "dir/`odd`\nname" + long[:i], Added: i})
			}
			d.Files = append(d.Files, worktree.FileStat{Path: "img.png", Binary: true}, worktree.FileStat{OldPath: "old", Path: "new"})
			return d
		}(), []string{"**42 files changed**", "…and 27 more"}},
		{"truncated", worktree.Diff{Files: []worktree.FileStat{{Path: "a"}}, Patch: []byte("+a\n"), Truncated: true}, []string{"too large to show whole"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := diffAnswer("gateway/1", "main", tc.d)
			if n := utf8.RuneCountInString(got); n > reply.DiscordLimit {
				t.Errorf("%d characters", n)
			}
			if strings.Count(got, "```")%2 != 0 {
				t.Errorf("unbalanced code fences:\n%s", got)
			}
			for _, s := range tc.has {
				if !strings.Contains(got, s) {
					t.Errorf("lacks %q:\n%s", s, got)
				}
			}
			if strings.ContainsRune(got, '\x1b') {
				t.Errorf("a control character reaches Discord")
			}
		})
	}
}

func TestSafeFileName(t *testing.T) {
	for in, want := range map[string]string{
		"Fix the login bug":     "Fix-the-login-bug",
		"../../etc/passwd":      "etc-passwd",
		"émoji 🎉 only":          "moji-only",
		"🎉":                     "123",
		strings.Repeat("a", 99): strings.Repeat("a", 80),
	} {
		if got := safeFileName(in, "123"); got != want {
			t.Errorf("safeFileName(%q) = %q, want %q", in, got, want)
		}
	}
}
