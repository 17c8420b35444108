package worktree

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// gitEnv makes the machine's git configuration irrelevant: an empty
// system config and a global one with only what the test gives (an
// identity unless noIdentity).
func gitEnv(t *testing.T, noIdentity bool) {
	t.Helper()
	dir := t.TempDir()
	global := "[init]\n\tdefaultBranch = main\n[advice]\n\tdetachedHead = false\n"
	if !noIdentity {
		global += "[user]\n\tname = Test User\n\temail = test@example.com\n"
	}
	write(t, filepath.Join(dir, "global"), global)
	write(t, filepath.Join(dir, "system"), "")
	t.Setenv("GIT_CONFIG_GLOBAL", filepath.Join(dir, "global"))
	t.Setenv("GIT_CONFIG_SYSTEM", filepath.Join(dir, "system"))
	t.Setenv("HOME", dir)
	for _, name := range []string{"GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL",
		"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "XDG_CONFIG_HOME", "EMAIL"} {
		t.Setenv(name, "")
		os.Unsetenv(name)
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// run runs git as the test does by hand (not through the package).
func run(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	// The test's own commits have an author even when git's config has
	// none; the package's never see these variables.
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=Test Hand", "GIT_AUTHOR_EMAIL=hand@example.com",
		"GIT_COMMITTER_NAME=Test Hand", "GIT_COMMITTER_EMAIL=hand@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// newRepo makes <tmp>/projects/app, a repository on main with one
// commit holding the files.
func newRepo(t *testing.T, files map[string]string) (root, checkout string) {
	t.Helper()
	root = filepath.Join(t.TempDir(), "projects")
	checkout = filepath.Join(root, "app")
	if err := os.MkdirAll(checkout, 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, checkout, "init", "-q")
	for name, content := range files {
		write(t, filepath.Join(checkout, name), content)
	}
	run(t, checkout, "add", "-A")
	run(t, checkout, "commit", "-q", "-m", "initial")
	return root, checkout
}

func commitAll(t *testing.T, dir, msg string) string {
	t.Helper()
	run(t, dir, "add", "-A")
	run(t, dir, "commit", "-q", "-m", msg)
	return run(t, dir, "rev-parse", "HEAD")
}

// snapshot is everything a merge must leave alone when it refuses:
// every ref, and the status and files of both checkouts.
func snapshot(t *testing.T, dirs ...string) map[string]string {
	t.Helper()
	s := map[string]string{"refs": run(t, dirs[0], "for-each-ref", "--format=%(refname) %(objectname)")}
	for _, d := range dirs {
		s[d+" status"] = run(t, d, "status", "--porcelain=v1", "--untracked-files=all")
		s[d+" HEAD"] = run(t, d, "rev-parse", "HEAD")
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if !e.IsDir() {
				s[d+"/"+e.Name()] = read(t, filepath.Join(d, e.Name()))
			}
		}
		s[d+" index"] = run(t, d, "ls-files", "--stage")
	}
	return s
}

const lines = "one\ntwo\nthree\nfour\nfive\n"

func TestCreate(t *testing.T) {
	gitEnv(t, false)
	ctx := context.Background()
	g := New(Options{})

	t.Run("a worktree beside the checkout, on its own branch", func(t *testing.T) {
		root, app := newRepo(t, map[string]string{"f.txt": lines})
		head := run(t, app, "rev-parse", "HEAD")
		wt, err := g.Create(ctx, app, "1001")
		if err != nil {
			t.Fatal(err)
		}
		want := Worktree{Thread: "1001", Checkout: app, Dir: filepath.Join(root, ".worktrees", "app", "1001"),
			Branch: "gateway/1001", BaseBranch: "main", BaseCommit: head}
		if diff := cmp.Diff(want, wt); diff != "" {
			t.Fatalf("Create (-want +got):\n%s", diff)
		}
		if got := run(t, wt.Dir, "symbolic-ref", "HEAD"); got != "refs/heads/gateway/1001" {
			t.Errorf("the worktree is on %s", got)
		}
		if got := read(t, filepath.Join(wt.Dir, "f.txt")); got != lines {
			t.Errorf("f.txt in the worktree = %q", got)
		}
		if got := run(t, app, "status", "--porcelain", "--untracked-files=all"); got != "" {
			t.Errorf("the checkout is changed:\n%s", got)
		}

		again, err := g.Create(ctx, app, "1001")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, again); diff != "" {
			t.Errorf("a second Create (-want +got):\n%s", diff)
		}
		// Still the same base after the checkout moved on.
		write(t, filepath.Join(app, "g.txt"), "g\n")
		commitAll(t, app, "more")
		again, err = g.Create(ctx, app, "1001")
		if err != nil || again.BaseCommit != head {
			t.Errorf("Create after the base moved = %+v, %v; want the base it was made from", again, err)
		}
	})

	t.Run("a project in a subfolder of the repository", func(t *testing.T) {
		root, app := newRepo(t, map[string]string{"web/index.html": "hi\n"})
		wt, err := g.Create(ctx, filepath.Join(app, "web"), "1002")
		if err != nil {
			t.Fatal(err)
		}
		if wt.Prefix != "web/" || wt.WorkDir() != filepath.Join(root, ".worktrees", "app", "1002", "web") {
			t.Errorf("prefix %q, work dir %s", wt.Prefix, wt.WorkDir())
		}
	})

	t.Run("a folder deleted by hand is made again from the branch", func(t *testing.T) {
		_, app := newRepo(t, map[string]string{"f.txt": lines})
		wt, err := g.Create(ctx, app, "1003")
		if err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(wt.Dir, "new.txt"), "x\n")
		tip := commitAll(t, wt.Dir, "work")
		if err := os.RemoveAll(wt.Dir); err != nil {
			t.Fatal(err)
		}
		again, err := g.Create(ctx, app, "1003")
		if err != nil {
			t.Fatal(err)
		}
		if again.BaseCommit != wt.BaseCommit || run(t, again.Dir, "rev-parse", "HEAD") != tip {
			t.Errorf("recreated worktree %+v is not at the branch's commit", again)
		}
	})

	refusals := []struct {
		name  string
		setup func(t *testing.T) string
		want  error
	}{
		{"not a repository", func(t *testing.T) string { return t.TempDir() }, ErrNotRepository},
		{"no commit yet", func(t *testing.T) string {
			dir := t.TempDir()
			run(t, dir, "init", "-q")
			return dir
		}, ErrNoCommit},
		{"detached HEAD", func(t *testing.T) string {
			_, app := newRepo(t, map[string]string{"f.txt": lines})
			run(t, app, "checkout", "-q", "--detach")
			return app
		}, ErrDetached},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			dir := tc.setup(t)
			_, err := g.Create(ctx, dir, "2001")
			if !errors.Is(err, tc.want) {
				t.Fatalf("Create = %v, want %v", err, tc.want)
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(dir), Dir)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a refused Create left %s behind", Dir)
			}
		})
	}

	t.Run("a thread id a branch cannot be named after", func(t *testing.T) {
		_, app := newRepo(t, map[string]string{"f.txt": lines})
		for _, id := range []string{"", "../x", "a b", "-x", "a.lock", "a/b"} {
			if _, err := g.Create(ctx, app, id); !errors.Is(err, ErrBadThread) {
				t.Errorf("Create(%q) = %v, want ErrBadThread", id, err)
			}
		}
	})
}

// Two threads on one repository edit the same file differently: two
// branches, two folders, and each diff shows only its own thread's work
// (committed, uncommitted and untracked), without touching either index.
func TestTwoThreadsDiffOnlyTheirOwnWork(t *testing.T) {
	gitEnv(t, false)
	ctx := context.Background()
	g := New(Options{})
	_, app := newRepo(t, map[string]string{"f.txt": lines, "bin.dat": "\x00\x01"})
	a, err := g.Create(ctx, app, "1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := g.Create(ctx, app, "2")
	if err != nil {
		t.Fatal(err)
	}
	if a.Dir == b.Dir || a.Branch == b.Branch {
		t.Fatalf("two threads share a worktree: %+v %+v", a, b)
	}
	// Thread 1 commits a change; thread 2 leaves its own uncommitted and
	// adds an untracked file and changes a binary one.
	write(t, filepath.Join(a.Dir, "f.txt"), strings.Replace(lines, "two", "TWO from thread one", 1))
	commitAll(t, a.Dir, "thread one")
	write(t, filepath.Join(b.Dir, "f.txt"), strings.Replace(lines, "four\n", "", 1))
	write(t, filepath.Join(b.Dir, "notes", "new.md"), "new\nfile\n")
	write(t, filepath.Join(b.Dir, "bin.dat"), "\x00\x02\x03")
	indexBefore := run(t, b.Dir, "ls-files", "--stage")
	statusBefore := run(t, b.Dir, "status", "--porcelain=v1", "--untracked-files=all")

	da, err := g.Diff(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	want := []FileStat{{Path: "f.txt", Added: 1, Deleted: 1}}
	if diff := cmp.Diff(want, da.Files); diff != "" {
		t.Errorf("thread one's files (-want +got):\n%s", diff)
	}
	if p := string(da.Patch); !strings.Contains(p, "+TWO from thread one") || strings.Contains(p, "-four") || strings.Contains(p, "new.md") {
		t.Errorf("thread one's patch:\n%s", p)
	}

	db, err := g.Diff(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	want = []FileStat{{Path: "bin.dat", Binary: true}, {Path: "f.txt", Deleted: 1}, {Path: "notes/new.md", Added: 2}}
	if diff := cmp.Diff(want, db.Files); diff != "" {
		t.Errorf("thread two's files (-want +got):\n%s", diff)
	}
	if db.Added != 2 || db.Deleted != 1 || db.Base != a.BaseCommit {
		t.Errorf("thread two's totals +%d -%d base %s", db.Added, db.Deleted, db.Base)
	}
	if p := string(db.Patch); !strings.Contains(p, "-four") || strings.Contains(p, "TWO") || !strings.Contains(p, "+++ b/notes/new.md") {
		t.Errorf("thread two's patch:\n%s", p)
	}
	if got := run(t, b.Dir, "ls-files", "--stage"); got != indexBefore {
		t.Errorf("Diff changed the worktree's index:\n%s\nwas\n%s", got, indexBefore)
	}
	if got := run(t, b.Dir, "status", "--porcelain=v1", "--untracked-files=all"); got != statusBefore {
		t.Errorf("Diff changed the worktree's status:\n%s\nwas\n%s", got, statusBefore)
	}
	if got := run(t, app, "status", "--porcelain", "--untracked-files=all"); got != "" {
		t.Errorf("the main checkout is changed:\n%s", got)
	}
}

func TestMerge(t *testing.T) {
	ctx := context.Background()

	t.Run("fast-forward", func(t *testing.T) {
		gitEnv(t, false)
		g := New(Options{})
		_, app := newRepo(t, map[string]string{"f.txt": lines})
		wt, _ := g.Create(ctx, app, "1")
		write(t, filepath.Join(wt.Dir, "f.txt"), lines+"six\n")
		tip := commitAll(t, wt.Dir, "six")
		res, err := g.Merge(ctx, wt, "Merge thread 1")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(Merged{Kind: FastForward, Commit: tip, CheckedOut: true}, res); diff != "" {
			t.Errorf("Merge (-want +got):\n%s", diff)
		}
		if got := read(t, filepath.Join(app, "f.txt")); got != lines+"six\n" {
			t.Errorf("the checkout's file did not follow: %q", got)
		}
		if got := run(t, app, "status", "--porcelain", "--untracked-files=all"); got != "" {
			t.Errorf("the checkout is left dirty:\n%s", got)
		}
		again, err := g.Merge(ctx, wt, "Merge thread 1")
		if err != nil || again.Kind != UpToDate || again.Commit != tip {
			t.Errorf("merging again = %+v, %v; want up to date", again, err)
		}
	})

	t.Run("merge commit", func(t *testing.T) {
		gitEnv(t, false)
		g := New(Options{})
		_, app := newRepo(t, map[string]string{"f.txt": lines})
		wt, _ := g.Create(ctx, app, "1")
		write(t, filepath.Join(wt.Dir, "f.txt"), lines+"six\n")
		tip := commitAll(t, wt.Dir, "six")
		write(t, filepath.Join(app, "other.txt"), "main's own\n")
		base := commitAll(t, app, "main moves on")
		res, err := g.Merge(ctx, wt, "Merge thread 1")
		if err != nil {
			t.Fatal(err)
		}
		if res.Kind != MergeCommit || res.Saved != "" || !res.CheckedOut {
			t.Errorf("Merge = %+v", res)
		}
		if got := run(t, app, "rev-parse", "HEAD"); got != res.Commit {
			t.Errorf("main is at %s, want the merge %s", got, res.Commit)
		}
		if got := run(t, app, "log", "-1", "--format=%P%n%s%n%an"); got != base+" "+tip+"\nMerge thread 1\nTest User" {
			t.Errorf("merge commit parents, subject, author:\n%s", got)
		}
		if read(t, filepath.Join(app, "f.txt")) != lines+"six\n" || read(t, filepath.Join(app, "other.txt")) != "main's own\n" {
			t.Error("the checkout lacks one side's work")
		}
	})

	t.Run("a conflict changes nothing and names the files", func(t *testing.T) {
		gitEnv(t, false)
		g := New(Options{})
		_, app := newRepo(t, map[string]string{"f.txt": lines, "g.txt": lines})
		wt, _ := g.Create(ctx, app, "1")
		write(t, filepath.Join(wt.Dir, "f.txt"), strings.Replace(lines, "three", "THREE (thread)", 1))
		write(t, filepath.Join(wt.Dir, "g.txt"), strings.Replace(lines, "one", "ONE (thread)", 1))
		commitAll(t, wt.Dir, "thread")
		// Uncommitted and untracked work too: it must not be committed.
		write(t, filepath.Join(wt.Dir, "g.txt"), strings.Replace(lines, "one", "ONE (thread, again)", 1))
		write(t, filepath.Join(wt.Dir, "scratch.txt"), "scratch\n")
		write(t, filepath.Join(app, "f.txt"), strings.Replace(lines, "three", "THREE (main)", 1))
		write(t, filepath.Join(app, "g.txt"), strings.Replace(lines, "one", "ONE (main)", 1))
		commitAll(t, app, "main")
		write(t, filepath.Join(app, "local.txt"), "the user's own\n")
		before := snapshot(t, app, wt.Dir)

		_, err := g.Merge(ctx, wt, "Merge thread 1")
		var ce *ConflictError
		if !errors.As(err, &ce) {
			t.Fatalf("Merge = %v, want a *ConflictError", err)
		}
		if diff := cmp.Diff([]string{"f.txt", "g.txt"}, ce.Files); diff != "" {
			t.Errorf("conflicting files (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(before, snapshot(t, app, wt.Dir)); diff != "" {
			t.Errorf("a conflicting merge changed something (-before +after):\n%s", diff)
		}
	})

	t.Run("uncommitted work is committed on the branch first", func(t *testing.T) {
		for _, noIdentity := range []bool{false, true} {
			gitEnv(t, noIdentity)
			g := New(Options{})
			_, app := newRepo(t, map[string]string{"f.txt": lines})
			wt, _ := g.Create(ctx, app, "7")
			write(t, filepath.Join(wt.Dir, "f.txt"), lines+"six\n")
			write(t, filepath.Join(wt.Dir, "new.txt"), "untracked\n")
			run(t, wt.Dir, "add", "f.txt") // staged or not, it is all saved
			res, err := g.Merge(ctx, wt, "Merge thread 7")
			if err != nil {
				t.Fatal(err)
			}
			if res.Kind != FastForward || res.Saved == "" || res.Commit != res.Saved {
				t.Fatalf("Merge = %+v", res)
			}
			if got := run(t, wt.Dir, "rev-parse", "HEAD"); got != res.Saved {
				t.Errorf("the thread's branch is at %s, not at the saved work", got)
			}
			msg := run(t, app, "log", "-1", "--format=%B", res.Saved)
			if !strings.Contains(msg, "Committed by the agent gateway before merging gateway/7") {
				t.Errorf("saved commit's message:\n%s", msg)
			}
			author := run(t, app, "log", "-1", "--format=%an <%ae>|%cn <%ce>", res.Saved)
			wantAuthor := "Test User <test@example.com>|Test User <test@example.com>"
			if noIdentity {
				wantAuthor = FallbackName + " <" + FallbackEmail + ">|" + FallbackName + " <" + FallbackEmail + ">"
			}
			if author != wantAuthor {
				t.Errorf("no identity %v: author|committer = %s, want %s", noIdentity, author, wantAuthor)
			}
			if got := run(t, wt.Dir, "status", "--porcelain", "--untracked-files=all"); got != "" {
				t.Errorf("the worktree is not clean after the merge:\n%s", got)
			}
			if read(t, filepath.Join(app, "new.txt")) != "untracked\n" || read(t, filepath.Join(app, "f.txt")) != lines+"six\n" {
				t.Error("the checkout lacks the saved work")
			}
		}
	})

	t.Run("a dirty checkout in the way is refused, one not in the way is kept", func(t *testing.T) {
		gitEnv(t, false)
		g := New(Options{})
		_, app := newRepo(t, map[string]string{"f.txt": lines, "g.txt": lines})
		wt, _ := g.Create(ctx, app, "1")
		write(t, filepath.Join(wt.Dir, "f.txt"), lines+"six\n")
		write(t, filepath.Join(wt.Dir, "added.txt"), "thread\n")
		commitAll(t, wt.Dir, "thread")
		write(t, filepath.Join(app, "f.txt"), lines+"local edit\n")
		write(t, filepath.Join(app, "added.txt"), "the user's untracked file\n")
		write(t, filepath.Join(app, "g.txt"), lines+"unrelated edit\n")
		before := snapshot(t, app, wt.Dir)
		_, err := g.Merge(ctx, wt, "Merge thread 1")
		var de *DirtyError
		if !errors.As(err, &de) {
			t.Fatalf("Merge = %v, want a *DirtyError", err)
		}
		if diff := cmp.Diff([]string{"added.txt", "f.txt"}, de.Files); diff != "" {
			t.Errorf("files in the way (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(before, snapshot(t, app, wt.Dir)); diff != "" {
			t.Errorf("a refused merge changed something (-before +after):\n%s", diff)
		}

		// Out of the way, the unrelated edit stays as it is.
		run(t, app, "checkout", "-q", "--", "f.txt")
		os.Remove(filepath.Join(app, "added.txt"))
		if _, err := g.Merge(ctx, wt, "Merge thread 1"); err != nil {
			t.Fatal(err)
		}
		if read(t, filepath.Join(app, "g.txt")) != lines+"unrelated edit\n" || read(t, filepath.Join(app, "f.txt")) != lines+"six\n" {
			t.Error("the merge lost the checkout's unrelated edit or its own change")
		}
	})

	t.Run("a base branch checked out nowhere only moves its ref", func(t *testing.T) {
		gitEnv(t, false)
		g := New(Options{})
		_, app := newRepo(t, map[string]string{"f.txt": lines})
		wt, _ := g.Create(ctx, app, "1")
		write(t, filepath.Join(wt.Dir, "f.txt"), lines+"six\n")
		tip := commitAll(t, wt.Dir, "thread")
		run(t, app, "checkout", "-q", "-b", "elsewhere")
		write(t, filepath.Join(app, "f.txt"), "the user's work elsewhere\n")
		res, err := g.Merge(ctx, wt, "Merge thread 1")
		if err != nil {
			t.Fatal(err)
		}
		if res.Kind != FastForward || res.CheckedOut || run(t, app, "rev-parse", "main") != tip {
			t.Errorf("Merge = %+v; main at %s, want %s", res, run(t, app, "rev-parse", "main"), tip)
		}
		if read(t, filepath.Join(app, "f.txt")) != "the user's work elsewhere\n" {
			t.Error("the checkout of another branch was touched")
		}
	})
}

func TestStateAndDiscard(t *testing.T) {
	gitEnv(t, false)
	ctx := context.Background()
	g := New(Options{})
	_, app := newRepo(t, map[string]string{"f.txt": lines})
	wt, err := g.Create(ctx, app, "5")
	if err != nil {
		t.Fatal(err)
	}
	state := func() State {
		t.Helper()
		s, err := g.State(ctx, wt)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if s := state(); !s.Merged() || s.Unmerged() || !s.Exists {
		t.Errorf("a new worktree: %+v", s)
	}
	write(t, filepath.Join(wt.Dir, "f.txt"), lines+"six\n")
	commitAll(t, wt.Dir, "one")
	write(t, filepath.Join(wt.Dir, "a.txt"), "a\n")
	write(t, filepath.Join(wt.Dir, "b.txt"), "b\n")
	if diff := cmp.Diff(State{Exists: true, Uncommitted: 2, Ahead: 1}, state()); diff != "" {
		t.Errorf("with work (-want +got):\n%s", diff)
	}
	if _, err := g.Merge(ctx, wt, "merge"); err != nil {
		t.Fatal(err)
	}
	if s := state(); !s.Merged() {
		t.Errorf("after the merge: %+v", s)
	}
	write(t, filepath.Join(wt.Dir, "c.txt"), "c\n")
	if s := state(); s.Merged() || !s.Unmerged() {
		t.Errorf("work after the merge: %+v", s)
	}

	if err := g.Discard(ctx, wt); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(wt.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the worktree's folder is still there: %v", err)
	}
	if got := run(t, app, "branch", "--list", "gateway/*"); got != "" {
		t.Errorf("branches left: %s", got)
	}
	if got := run(t, app, "worktree", "list", "--porcelain"); strings.Contains(got, wt.Dir) {
		t.Errorf("git still lists the worktree:\n%s", got)
	}
	if err := g.Discard(ctx, wt); err != nil {
		t.Errorf("discarding again: %v", err)
	}
	if s := state(); s.Exists || !s.BranchGone || s.Unmerged() {
		t.Errorf("after discard: %+v", s)
	}
	if got := read(t, filepath.Join(app, "a.txt")); got != "a\n" {
		t.Errorf("the merged work is gone from the checkout: %q", got)
	}
}
