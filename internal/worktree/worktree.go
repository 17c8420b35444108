// Package worktree gives a Discord thread a git worktree of its own
// (WORKTREES=on, DESIGN decision 24): a branch gateway/<thread id> checked
// out beside the project's checkout, what the thread changed against its
// base, merging it back into the branch the checkout was on, and removing
// it.
//
// It is git plumbing and nothing else: every operation runs the git CLI
// through a Runner, by default as the agent's user when one is set (its
// uid, groups and HOME, never the gateway's), in a process group of its
// own that is killed on cancel or after a timeout. Nothing here changes
// the index or the files of a worktree the agent works in, except Merge,
// which commits the thread's uncommitted work on its branch (contents
// unchanged) before the merge goes ahead. A Git is safe for concurrent
// use, but two operations on one repository that change it (Create,
// Merge, Discard) must not run at once: the caller serialises them.
package worktree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agentgateway/gateway/internal/proc"
)

// BranchPrefix begins the branch of every thread's worktree.
const BranchPrefix = "gateway/"

// Dir is the folder, beside a checkout, that holds its threads'
// worktrees: <parent>/.worktrees/<checkout name>/<thread id>. It is
// hidden, so /project's folder list leaves it out, and it is never inside
// a checkout.
const Dir = ".worktrees"

// Errors of Create; the caller then runs the thread in the checkout.
var (
	ErrNotRepository = errors.New("the project is not a git repository")
	ErrNoCommit      = errors.New("the project's repository has no commit yet")
	ErrDetached      = errors.New("the project's checkout is on no branch (a detached HEAD)")
	ErrBadThread     = errors.New("not a thread id a branch can be named after")
	ErrInUse         = errors.New("the worktree's folder is taken by something else")
)

// Errors of Merge.
var (
	ErrBaseGone   = errors.New("the base branch no longer exists")
	ErrBranchGone = errors.New("the thread's branch no longer exists")
	ErrOffBranch  = errors.New("the thread's worktree is no longer on its branch")
	ErrBaseMoved  = errors.New("the base branch moved while merging")
)

// User is who git runs as.
type User struct {
	// Name is the login name (USER, LOGNAME); Home is given as HOME, so
	// git reads that user's ~/.gitconfig.
	Name, Home string
	Credential proc.Credential
}

// Options configure a Git; the zero value runs git as the gateway's user.
type Options struct {
	// User, if set, is who git runs as (AGENT_USER).
	User *User
	// Root is PROJECTS_ROOT: in git's messages it reads $PROJECTS_ROOT.
	Root string
	// Timeout bounds each git command. Zero: 2 minutes.
	Timeout time.Duration
	// MaxOutput bounds what is read of one command's output (a patch).
	// Zero: 32 MiB.
	MaxOutput int64
	// Owner marks git's processes as the gateway's (proc.Spec.Owner).
	Owner string
	// Runner replaces running git through proc (tests).
	Runner Runner
}

// Git runs the package's operations.
type Git struct {
	run  Runner
	user *User
}

// New returns a Git for opts.
func New(opts Options) *Git {
	g := &Git{run: opts.Runner, user: opts.User}
	if g.run == nil {
		r := procRunner{user: opts.User, timeout: opts.Timeout, maxOutput: opts.MaxOutput, owner: opts.Owner, scrub: scrubber(opts.Root, opts.User)}
		if r.timeout <= 0 {
			r.timeout = 2 * time.Minute
		}
		if r.maxOutput <= 0 {
			r.maxOutput = 32 << 20
		}
		g.run = r
	}
	return g
}

// Worktree is a thread's worktree.
type Worktree struct {
	Thread string `json:"thread"`
	// Checkout is the top of the main checkout it was made from.
	Checkout string `json:"checkout"`
	// Dir is the worktree's top; Prefix is where in it the project is
	// ("" when the project is the repository's top, else "sub/dir/").
	Dir    string `json:"dir"`
	Prefix string `json:"prefix,omitempty"`
	// Branch is gateway/<thread id>.
	Branch string `json:"branch"`
	// BaseBranch is the branch the checkout was on when the worktree was
	// made, BaseCommit its commit then: /merge merges into that branch.
	BaseBranch string `json:"base_branch"`
	BaseCommit string `json:"base_commit"`
}

// WorkDir is where the thread's turns run: the project's folder in the
// worktree.
func (w Worktree) WorkDir() string {
	return filepath.Join(w.Dir, filepath.FromSlash(w.Prefix))
}

func (w Worktree) branchRef() string { return "refs/heads/" + w.Branch }
func (w Worktree) baseRef() string   { return "refs/heads/" + w.BaseBranch }

// validThread accepts what a branch and a folder can be named after:
// letters, digits, - and _ (Discord's ids are digits).
func validThread(id string) bool {
	if id == "" || len(id) > 64 || strings.HasPrefix(id, "-") {
		return false
	}
	for _, r := range id {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// git runs git in dir.
func (g *Git) git(ctx context.Context, dir string, args ...string) ([]byte, error) {
	return g.run.Run(ctx, dir, nil, args...)
}

// Locate returns the top of the checkout dir is in and where dir is in it
// ("" or "sub/dir/"). ErrNotRepository when dir is in no work tree.
func (g *Git) Locate(ctx context.Context, dir string) (top, prefix string, err error) {
	out, err := g.git(ctx, dir, "rev-parse", "--is-inside-work-tree", "--show-toplevel", "--show-prefix")
	if err != nil {
		if exitCode(err) == 128 {
			return "", "", fmt.Errorf("%w: %w", ErrNotRepository, err)
		}
		return "", "", err
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) < 2 || lines[0] != "true" {
		return "", "", ErrNotRepository
	}
	top = lines[1]
	if len(lines) > 2 {
		prefix = lines[2]
	}
	return top, prefix, nil
}

// Path is where the worktree of thread is made for the checkout whose top
// is top.
func Path(top, thread string) string {
	return filepath.Join(filepath.Dir(top), Dir, filepath.Base(top), thread)
}

// Create makes the thread's worktree from the checkout dir is in (the
// project): a branch gateway/<thread> at the checkout's HEAD, checked out
// in <checkout's parent>/.worktrees/<checkout's name>/<thread>. A second
// call for the same thread returns the worktree made by the first. It
// refuses with ErrNotRepository, ErrNoCommit or ErrDetached when there is
// nothing to branch from.
func (g *Git) Create(ctx context.Context, dir, thread string) (Worktree, error) {
	if !validThread(thread) {
		return Worktree{}, ErrBadThread
	}
	top, prefix, err := g.Locate(ctx, dir)
	if err != nil {
		return Worktree{}, err
	}
	wt := Worktree{
		Thread:   thread,
		Checkout: top,
		Dir:      Path(top, thread),
		Prefix:   prefix,
		Branch:   BranchPrefix + thread,
	}
	list, err := g.list(ctx, top)
	if err != nil {
		return Worktree{}, err
	}
	for _, l := range list {
		if !samePath(l.path, wt.Dir) {
			continue
		}
		if l.branch != wt.branchRef() {
			return Worktree{}, ErrInUse
		}
		if _, err := os.Stat(wt.Dir); err == nil {
			return g.recall(ctx, wt)
		}
	}
	head, err := g.git(ctx, top, "rev-parse", "--verify", "-q", "HEAD^{commit}")
	if err != nil || !isObjectID(firstLine(head)) {
		return Worktree{}, ErrNoCommit
	}
	base, err := g.git(ctx, top, "symbolic-ref", "-q", "HEAD")
	if err != nil || !strings.HasPrefix(firstLine(base), "refs/heads/") {
		return Worktree{}, ErrDetached
	}
	wt.BaseBranch = strings.TrimPrefix(firstLine(base), "refs/heads/")
	wt.BaseCommit = firstLine(head)
	if _, err := os.Lstat(wt.Dir); err == nil {
		return Worktree{}, ErrInUse
	}
	exists, err := g.hasRef(ctx, top, wt.branchRef())
	if err != nil {
		return Worktree{}, err
	}
	if exists {
		// The branch outlived its folder (deleted by hand): check it out
		// again, with the base it was made from.
		if _, err := g.git(ctx, top, "worktree", "prune"); err != nil {
			return Worktree{}, err
		}
		if _, err := g.git(ctx, top, "worktree", "add", "--quiet", wt.Dir, wt.Branch); err != nil {
			return Worktree{}, err
		}
		return g.recall(ctx, wt)
	}
	if _, err := g.git(ctx, top, "worktree", "add", "--quiet", "--no-track", "-b", wt.Branch, wt.Dir, wt.BaseCommit); err != nil {
		return Worktree{}, err
	}
	// The base is kept with the branch (and goes with it when the branch
	// is deleted), so a second Create finds it.
	for key, value := range map[string]string{"gatewaybase": wt.BaseBranch, "gatewaybasecommit": wt.BaseCommit} {
		if _, err := g.git(ctx, top, "config", "branch."+wt.Branch+"."+key, value); err != nil {
			return Worktree{}, err
		}
	}
	return wt, nil
}

// recall fills in the base of an existing worktree from the branch's
// config, or, when that is missing, from the checkout's branch now.
func (g *Git) recall(ctx context.Context, wt Worktree) (Worktree, error) {
	base, _ := g.git(ctx, wt.Checkout, "config", "branch."+wt.Branch+".gatewaybase")
	commit, _ := g.git(ctx, wt.Checkout, "config", "branch."+wt.Branch+".gatewaybasecommit")
	wt.BaseBranch, wt.BaseCommit = firstLine(base), firstLine(commit)
	if wt.BaseBranch == "" {
		cur, err := g.git(ctx, wt.Checkout, "symbolic-ref", "-q", "HEAD")
		if err != nil || !strings.HasPrefix(firstLine(cur), "refs/heads/") {
			return Worktree{}, ErrDetached
		}
		wt.BaseBranch = strings.TrimPrefix(firstLine(cur), "refs/heads/")
	}
	if !isObjectID(wt.BaseCommit) {
		mb, err := g.git(ctx, wt.Checkout, "merge-base", wt.baseRef(), wt.branchRef())
		if err != nil {
			return Worktree{}, err
		}
		wt.BaseCommit = firstLine(mb)
	}
	return wt, nil
}

// list returns the worktrees of the repository top is a checkout of.
func (g *Git) list(ctx context.Context, top string) ([]listed, error) {
	out, err := g.git(ctx, top, "worktree", "list", "--porcelain", "-z")
	if err != nil {
		return nil, err
	}
	return parseWorktreeList(out)
}

// hasRef reports whether ref exists in the repository of dir.
func (g *Git) hasRef(ctx context.Context, dir, ref string) (bool, error) {
	_, err := g.git(ctx, dir, "rev-parse", "--verify", "-q", ref)
	switch code := exitCode(err); {
	case err == nil:
		return true, nil
	case code == 1:
		return false, nil
	default:
		return false, err
	}
}

// rev resolves ref to a commit id; ok is false when there is no such ref.
func (g *Git) rev(ctx context.Context, dir, ref string) (id string, ok bool, err error) {
	out, err := g.git(ctx, dir, "rev-parse", "--verify", "-q", ref+"^{commit}")
	switch {
	case exitCode(err) == 1:
		return "", false, nil
	case err != nil:
		return "", false, err
	}
	id = firstLine(out)
	if !isObjectID(id) {
		return "", false, fmt.Errorf("rev-parse %s: %w", ref, ErrMalformed)
	}
	return id, true, nil
}

// isAncestor reports whether a is an ancestor of (or is) b.
func (g *Git) isAncestor(ctx context.Context, dir, a, b string) (bool, error) {
	_, err := g.git(ctx, dir, "merge-base", "--is-ancestor", a, b)
	switch {
	case err == nil:
		return true, nil
	case exitCode(err) == 1:
		return false, nil
	}
	return false, err
}

// samePath compares two paths as the file system would resolve them.
func samePath(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	return err1 == nil && err2 == nil && ra == rb
}

// State is what a worktree holds that its base does not.
type State struct {
	// Exists is false when the worktree's folder is gone.
	Exists bool
	// Uncommitted counts the files changed, added or deleted in the
	// worktree and not committed (untracked files included).
	Uncommitted int
	// Ahead counts the commits on the thread's branch that the base branch
	// does not have; -1 when a branch is gone.
	Ahead int
	// BranchGone and BaseGone say a branch no longer exists.
	BranchGone, BaseGone bool
}

// Merged reports whether everything the thread did is in its base branch
// (nothing uncommitted, no commit the base lacks).
func (s State) Merged() bool {
	return !s.BranchGone && !s.BaseGone && s.Ahead == 0 && s.Uncommitted == 0
}

// Unmerged reports whether discarding the worktree would lose work.
func (s State) Unmerged() bool {
	return s.Uncommitted > 0 || s.Ahead > 0 || (s.BaseGone && !s.BranchGone)
}

// State reports whether wt holds work its base branch lacks.
func (g *Git) State(ctx context.Context, wt Worktree) (State, error) {
	var s State
	if st, err := os.Stat(wt.Dir); err == nil && st.IsDir() {
		s.Exists = true
		out, err := g.git(ctx, wt.Dir, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignore-submodules=none")
		if err != nil {
			return State{}, err
		}
		paths, err := parseStatus(out)
		if err != nil {
			return State{}, err
		}
		s.Uncommitted = len(paths)
	}
	_, branch, err := g.rev(ctx, wt.Checkout, wt.branchRef())
	if err != nil {
		return State{}, err
	}
	_, base, err := g.rev(ctx, wt.Checkout, wt.baseRef())
	if err != nil {
		return State{}, err
	}
	s.BranchGone, s.BaseGone = !branch, !base
	s.Ahead = -1
	switch {
	case branch && base:
		out, err := g.git(ctx, wt.Checkout, "rev-list", "--count", wt.baseRef()+".."+wt.branchRef())
		if err != nil {
			return State{}, err
		}
		if s.Ahead, err = strconv.Atoi(firstLine(out)); err != nil {
			return State{}, fmt.Errorf("rev-list --count: %w", ErrMalformed)
		}
	case branch:
		// No base to compare with: what the thread made since it began.
		out, err := g.git(ctx, wt.Checkout, "rev-list", "--count", wt.BaseCommit+".."+wt.branchRef())
		if err == nil {
			s.Ahead, _ = strconv.Atoi(firstLine(out))
		}
	}
	return s, nil
}

// Discard removes the worktree and deletes its branch, whatever they
// hold. A worktree or branch already gone is not an error.
func (g *Git) Discard(ctx context.Context, wt Worktree) error {
	list, err := g.list(ctx, wt.Checkout)
	if err != nil {
		return err
	}
	registered := false
	for _, l := range list {
		if samePath(l.path, wt.Dir) {
			registered = true
		}
	}
	if registered {
		if _, err := g.git(ctx, wt.Checkout, "worktree", "remove", "--force", wt.Dir); err != nil {
			return err
		}
	} else if _, err := g.git(ctx, wt.Checkout, "worktree", "prune"); err != nil {
		return err
	}
	exists, err := g.hasRef(ctx, wt.Checkout, wt.branchRef())
	if err != nil {
		return err
	}
	if exists {
		if _, err := g.git(ctx, wt.Checkout, "branch", "-D", "--quiet", wt.Branch); err != nil {
			return err
		}
	}
	return nil
}
