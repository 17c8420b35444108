package gateway

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/diamondburned/arikawa/v3/discord"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/fakediscord"
)

// worktreeGitEnv makes the machine's git configuration irrelevant to the
// test: git runs as the gateway's user with only this config.
func worktreeGitEnv(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	global := filepath.Join(dir, "gitconfig")
	if err := os.WriteFile(global, []byte("[init]\n\tdefaultBranch = main\n[user]\n\tname = Test User\n\temail = test@example.com\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GIT_CONFIG_GLOBAL", global)
	t.Setenv("GIT_CONFIG_SYSTEM", empty)
	for _, name := range []string{"GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"} {
		t.Setenv(name, "")
		os.Unsetenv(name)
	}
}

func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

const fiveLines = "one\ntwo\nthree\nfour\nfive\n"

// worktreeProject makes PROJECTS_ROOT/app, a repository on main with
// f.txt committed.
func worktreeProject(t *testing.T) (root, app string) {
	t.Helper()
	root = filepath.Join(t.TempDir(), "projects")
	app = filepath.Join(root, "app")
	if err := os.MkdirAll(app, 0o755); err != nil {
		t.Fatal(err)
	}
	gitOut(t, app, "init", "-q")
	if err := os.WriteFile(filepath.Join(app, "f.txt"), []byte(fiveLines), 0o644); err != nil {
		t.Fatal(err)
	}
	gitOut(t, app, "add", "-A")
	gitOut(t, app, "commit", "-q", "-m", "initial")
	return root, app
}

// lineTwo is the agent: "line two: <text>" rewrites the second line of
// f.txt where it works, and it answers with that folder.
func lineTwo(_ context.Context, req backends.Request, _ func(backends.Event)) (backends.Result, error) {
	if text, ok := strings.CutPrefix(req.Prompt, "line two: "); ok {
		content := strings.Replace(fiveLines, "two\n", text+"\n", 1)
		if err := os.WriteFile(filepath.Join(req.WorkDir, "f.txt"), []byte(content), 0o644); err != nil {
			return backends.Result{}, err
		}
	}
	return backends.Result{Text: "done"}, nil
}

func worktreeHarness(t *testing.T) (h *harness, root, app string) {
	t.Helper()
	worktreeGitEnv(t)
	root, app = worktreeProject(t)
	h = startGateway(t, harnessOptions{respond: lineTwo, env: map[string]string{
		config.EnvThreads:      config.ThreadsAuto,
		config.EnvWorktrees:    "on",
		config.EnvProjectsRoot: root,
		config.EnvWorkDir:      app,
	}})
	return h, root, app
}

// command runs a slash command in ch and returns its answer.
func (h *harness) command(ch discord.ChannelID, name string) fakediscord.Message {
	h.t.Helper()
	id := h.fd.Interact(ch, h.user, name, nil)
	var m fakediscord.Message
	h.fd.Wait(h.t, "the answer to /"+name, waitLong, func() bool {
		for _, a := range h.fd.Answers() {
			if a.Interaction == id && a.Original && a.Content != "" {
				m = a
				return true
			}
		}
		return false
	})
	return m
}

// pressed presses the button labelled label under m as user and returns
// the message's text once the press changed it.
func (h *harness) pressed(m fakediscord.Message, user discord.User, label string) string {
	h.t.Helper()
	h.fd.Press(m.ChannelID, m.ID, user, button(h.t, m, label), 0)
	var text string
	h.fd.Wait(h.t, "the press's answer", waitLong, func() bool {
		for _, a := range h.fd.Answers() {
			if a.ID == m.ID && a.Content != m.Content {
				text = a.Content
				return true
			}
		}
		return false
	})
	return text
}

// Two threads on one repository work in two worktrees on two branches;
// /diff shows only the thread's own change, with the whole patch as a
// file; /merge lands the first in main; the second, conflicting, changes
// nothing and names the file; /discard removes it.
func TestTwoThreadsWorkInTwoWorktrees(t *testing.T) {
	h, root, app := worktreeHarness(t)
	th1 := h.waitThread(h.mention(h.channel, "line two: TWO from the first thread"))
	h.waitReplies(th1.ID, 1)
	th2 := h.waitThread(h.mention(h.channel, "line two: 2 from the second thread"))
	h.waitReplies(th2.ID, 1)

	reqs := h.backend.Requests()
	want1 := filepath.Join(root, ".worktrees", "app", th1.ID.String())
	want2 := filepath.Join(root, ".worktrees", "app", th2.ID.String())
	if len(reqs) != 2 || reqs[0].WorkDir != want1 || reqs[1].WorkDir != want2 {
		t.Fatalf("work dirs %q, want %s and %s", []string{reqs[0].WorkDir, reqs[1].WorkDir}, want1, want2)
	}
	if got := gitOut(t, app, "branch", "--list", "gateway/*", "--format=%(refname:short)"); got != "gateway/"+th1.ID.String()+"\ngateway/"+th2.ID.String() {
		t.Errorf("branches:\n%s", got)
	}
	if got := gitOut(t, app, "status", "--porcelain", "--untracked-files=all"); got != "" {
		t.Errorf("the main checkout was changed:\n%s", got)
	}

	// /diff: only the thread's own change, and the whole patch attached.
	d := h.command(th1.ID, "diff")
	if !strings.Contains(d.Content, "**1 file changed**") || !strings.Contains(d.Content, "`f.txt` +1 −1") ||
		!strings.Contains(d.Content, "```diff\n") || !strings.Contains(d.Content, "+TWO from the first thread") ||
		strings.Contains(d.Content, "second thread") {
		t.Errorf("/diff in the first thread:\n%s", d.Content)
	}
	// The file follows the command's answer, as a follow-up of the
	// command: after the summary, never before it.
	var file fakediscord.File
	h.fd.Wait(t, "the diff file", waitLong, func() bool {
		for _, m := range h.fd.Answers() {
			if m.Interaction == d.Interaction && !m.Original && len(m.Files) == 1 {
				file = m.Files[0]
				return true
			}
		}
		return false
	})
	if file.Name != "line-two-TWO-from-the-first-thread.diff" || !strings.Contains(string(file.Data), "-two\n+TWO from the first thread\n") {
		t.Errorf("diff file %q:\n%s", file.Name, file.Data)
	}
	if d := h.command(th2.ID, "diff"); !strings.Contains(d.Content, "+2 from the second thread") || strings.Contains(d.Content, "first thread") {
		t.Errorf("/diff in the second thread:\n%s", d.Content)
	}
	if d := h.command(h.channel, "diff"); !strings.Contains(d.Content, "not a thread with a worktree") {
		t.Errorf("/diff in the channel: %q", d.Content)
	}

	// /merge: only the thread's author or an approver may confirm.
	ask := h.command(th1.ID, "merge")
	if !strings.Contains(ask.Content, "Merge `gateway/"+th1.ID.String()+"` into `main` of `app`?") || !strings.Contains(ask.Content, "1 uncommitted file") {
		t.Errorf("/merge asks %q", ask.Content)
	}
	refused := h.fd.Press(th1.ID, ask.ID, stranger(h), button(t, ask, "Merge"), 0)
	h.fd.Wait(t, "the stranger refused", waitLong, func() bool { return len(h.fd.Callbacks(refused)) == 1 })
	if cb := h.fd.Callbacks(refused); cb[0] != 4 {
		t.Errorf("a stranger's press got callback %v, want an ephemeral refusal", cb)
	}
	done := h.pressed(ask, h.user, "Merge")
	if !strings.Contains(done, "by fast-forward") || !strings.Contains(done, "committed on the thread's branch first") {
		t.Errorf("merge answer: %q", done)
	}
	if got, _ := os.ReadFile(filepath.Join(app, "f.txt")); !strings.Contains(string(got), "TWO from the first thread") {
		t.Errorf("main's checkout after the merge:\n%s", got)
	}
	if _, err := os.Stat(want1); err != nil {
		t.Errorf("the merged worktree is gone: %v", err)
	}

	// The second thread changed the same line: nothing changes.
	mainHead := gitOut(t, app, "rev-parse", "HEAD")
	ask = h.command(th2.ID, "merge")
	done = h.pressed(ask, h.user, "Merge")
	if !strings.Contains(done, "Not merged") || !strings.Contains(done, "1 file: `f.txt`") || !strings.Contains(done, "Nothing was changed") {
		t.Errorf("conflicting merge answer: %q", done)
	}
	if got := gitOut(t, app, "rev-parse", "HEAD"); got != mainHead {
		t.Errorf("main moved on a conflict: %s, was %s", got, mainHead)
	}
	if got := gitOut(t, want2, "status", "--porcelain"); got != "M f.txt" {
		t.Errorf("the second worktree after the refused merge:\n%s", got)
	}
	if got := gitOut(t, app, "rev-parse", "gateway/"+th2.ID.String()); got != gitOut(t, app, "rev-parse", "HEAD~1") {
		t.Errorf("the second thread's branch moved on a conflict")
	}

	// /discard says what is lost, and removes worktree and branch.
	ask = h.command(th2.ID, "discard")
	if !strings.Contains(ask.Content, "1 uncommitted change will be lost") {
		t.Errorf("/discard asks %q", ask.Content)
	}
	if done := h.pressed(ask, h.user, "Discard"); !strings.Contains(done, "Removed this thread's worktree") {
		t.Errorf("discard answer: %q", done)
	}
	if _, err := os.Stat(want2); !os.IsNotExist(err) {
		t.Errorf("the discarded worktree is still there: %v", err)
	}
	if got := gitOut(t, app, "branch", "--list", "gateway/*", "--format=%(refname:short)"); got != "gateway/"+th1.ID.String() {
		t.Errorf("branches after discard:\n%s", got)
	}
}
