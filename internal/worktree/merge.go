package worktree

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
)

// MergeKind is how a merge landed.
type MergeKind string

const (
	// FastForward moved the base branch to the thread's commit.
	FastForward MergeKind = "fast-forward"
	// MergeCommit made a commit with both branches as parents.
	MergeCommit MergeKind = "merge commit"
	// UpToDate found the thread's work in the base branch already.
	UpToDate MergeKind = "up to date"
)

// Merged is what Merge did.
type Merged struct {
	Kind MergeKind
	// Commit is the base branch's commit after the merge.
	Commit string
	// Saved is the commit that recorded the thread's uncommitted work on
	// its branch before the merge; empty when there was none.
	Saved string
	// CheckedOut says the base branch is checked out (in the main
	// checkout, usually) and its files were updated with it.
	CheckedOut bool
}

// ConflictError is a merge that did not happen because both sides changed
// the same lines: nothing was changed, no ref, no file.
type ConflictError struct {
	Files []string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("merge conflict in %d files: %s", len(e.Files), strings.Join(e.Files, ", "))
}

// DirtyError is a merge refused because the checkout of the base branch
// has uncommitted changes to files the merge would change: nothing was
// changed.
type DirtyError struct {
	Files []string
}

func (e *DirtyError) Error() string {
	return fmt.Sprintf("the checkout has uncommitted changes to %d files the merge changes: %s", len(e.Files), strings.Join(e.Files, ", "))
}

// SavedMessage is the message of the commit that records a thread's
// uncommitted work before it is merged.
func SavedMessage(thread string) string {
	return "Uncommitted work of thread " + thread + "\n\nCommitted by the agent gateway before merging " + BranchPrefix + thread + ", so that nothing is lost."
}

// Fallback identity for commits the gateway makes when git knows no user.
const (
	FallbackName  = "Agent gateway"
	FallbackEmail = "agent-gateway@localhost"
)

// Merge merges the thread's work into its base branch: first its
// uncommitted work is committed on its branch (SavedMessage); then the
// base branch fast-forwards to it where it can, or gets a merge commit
// with message. Where the base branch is checked out, its files follow,
// through git's own fast-forward, which refuses to overwrite local
// changes; elsewhere only the ref moves, and only from the commit it was
// seen at. Every check is made before anything changes: a conflict
// (*ConflictError) or a checkout with changes in the way (*DirtyError)
// changes nothing, not even the thread's branch.
func (g *Git) Merge(ctx context.Context, wt Worktree, message string) (Merged, error) {
	base, ok, err := g.rev(ctx, wt.Checkout, wt.baseRef())
	if err != nil {
		return Merged{}, err
	}
	if !ok {
		return Merged{}, ErrBaseGone
	}
	tip, ok, err := g.rev(ctx, wt.Checkout, wt.branchRef())
	if err != nil {
		return Merged{}, err
	}
	if !ok {
		return Merged{}, ErrBranchGone
	}
	head, err := g.git(ctx, wt.Dir, "symbolic-ref", "-q", "HEAD")
	if err != nil || firstLine(head) != wt.branchRef() {
		return Merged{}, ErrOffBranch
	}
	ident, err := g.identity(ctx, wt.Dir)
	if err != nil {
		return Merged{}, err
	}

	// The thread's work as a commit object that no ref points to yet.
	tree, err := g.snapshot(ctx, wt)
	if err != nil {
		return Merged{}, err
	}
	tipTree, err := g.git(ctx, wt.Dir, "rev-parse", "--verify", tip+"^{tree}")
	if err != nil {
		return Merged{}, err
	}
	work := tip
	saved := ""
	if tree != firstLine(tipTree) {
		out, err := g.run.Run(ctx, wt.Dir, ident, "commit-tree", tree, "-p", tip, "-m", SavedMessage(wt.Thread))
		if err != nil {
			return Merged{}, err
		}
		work, saved = firstLine(out), firstLine(out)
	}

	res := Merged{Saved: saved}
	target := ""
	switch {
	case saved == "" && mustAncestor(g.isAncestor(ctx, wt.Checkout, work, base)):
		return Merged{Kind: UpToDate, Commit: base}, nil
	case mustAncestor(g.isAncestor(ctx, wt.Checkout, base, work)):
		res.Kind, target = FastForward, work
	default:
		out, err := g.git(ctx, wt.Checkout, "merge-tree", "--write-tree", "--name-only", "--no-messages", "-z", base, work)
		if err != nil && exitCode(err) != 1 {
			return Merged{}, err
		}
		merged, conflicts, perr := parseMergeTree(out)
		if perr != nil {
			return Merged{}, perr
		}
		if exitCode(err) == 1 {
			if len(conflicts) == 0 {
				conflicts = []string{"(git named no file)"}
			}
			return Merged{}, &ConflictError{Files: conflicts}
		}
		out, err = g.run.Run(ctx, wt.Checkout, ident, "commit-tree", merged, "-p", base, "-p", work, "-m", message)
		if err != nil {
			return Merged{}, err
		}
		res.Kind, target = MergeCommit, firstLine(out)
	}
	if !isObjectID(target) {
		return Merged{}, fmt.Errorf("commit-tree: %w", ErrMalformed)
	}

	// Where the base branch is checked out, its files must follow: refuse
	// now if they have local changes the merge would overwrite.
	where, whereHead, err := g.checkedOut(ctx, wt.Checkout, wt.baseRef())
	if err != nil {
		return Merged{}, err
	}
	if where != "" {
		if whereHead != base {
			return Merged{}, ErrBaseMoved
		}
		if err := g.inTheWay(ctx, where, base, target); err != nil {
			return Merged{}, err
		}
	}

	// From here on things change: first the thread's own branch, so its
	// work is recorded whatever happens next.
	if saved != "" {
		if _, err := g.run.Run(ctx, wt.Checkout, ident, "update-ref", "-m", "gateway: commit uncommitted work before merging", wt.branchRef(), saved, tip); err != nil {
			return Merged{}, err
		}
		// The worktree's index follows its branch; its files already match.
		if _, err := g.git(ctx, wt.Dir, "reset", "--quiet"); err != nil {
			return Merged{}, err
		}
	}
	if where != "" {
		if _, err := g.run.Run(ctx, where, ident, "merge", "--ff-only", "--quiet", target); err != nil {
			return Merged{}, err
		}
		res.CheckedOut = true
	} else if _, err := g.run.Run(ctx, wt.Checkout, ident, "update-ref", "-m", "gateway: merge "+wt.Branch, wt.baseRef(), target, base); err != nil {
		return Merged{}, err
	}
	res.Commit = target
	return res, nil
}

// mustAncestor turns a failed ancestry check into "no": the merge then
// takes the longer way, which checks everything again.
func mustAncestor(yes bool, err error) bool { return err == nil && yes }

// checkedOut returns the worktree where ref is checked out, and its HEAD
// commit; "" when it is checked out nowhere.
func (g *Git) checkedOut(ctx context.Context, top, ref string) (dir, head string, err error) {
	list, err := g.list(ctx, top)
	if err != nil {
		return "", "", err
	}
	for _, l := range list {
		if l.branch == ref && !l.bare {
			return l.path, l.head, nil
		}
	}
	return "", "", nil
}

// inTheWay returns a *DirtyError when the checkout dir has uncommitted
// changes (untracked files included) to files that differ between from
// and to.
func (g *Git) inTheWay(ctx context.Context, dir, from, to string) error {
	out, err := g.git(ctx, dir, "diff-tree", "-r", "-z", "--name-only", "--no-renames", from, to)
	if err != nil {
		return err
	}
	changed := nulFields(out)
	out, err = g.git(ctx, dir, "status", "--porcelain=v1", "-z", "--untracked-files=all")
	if err != nil {
		return err
	}
	local, err := parseStatus(out)
	if err != nil {
		return err
	}
	var hit []string
	for _, p := range local {
		for _, c := range changed {
			if p == c || strings.HasPrefix(c, strings.TrimSuffix(p, "/")+"/") || strings.HasPrefix(p, c+"/") {
				hit = append(hit, p)
				break
			}
		}
	}
	if len(hit) > 0 {
		slices.Sort(hit)
		return &DirtyError{Files: slices.Compact(hit)}
	}
	return nil
}

// identity is the environment that gives the commits the gateway makes an
// author and committer: git's own user when it has one, else the
// fallback.
func (g *Git) identity(ctx context.Context, dir string) ([]string, error) {
	var env []string
	for _, f := range []struct{ key, name, value string }{
		{"user.name", "NAME", FallbackName},
		{"user.email", "EMAIL", FallbackEmail},
	} {
		if g.user == nil && os.Getenv("GIT_AUTHOR_"+f.name) != "" && os.Getenv("GIT_COMMITTER_"+f.name) != "" {
			continue
		}
		out, err := g.git(ctx, dir, "config", "--get", f.key)
		switch {
		case err == nil && firstLine(out) != "":
			continue
		case err != nil && exitCode(err) != 1:
			return nil, err
		}
		env = append(env, "GIT_AUTHOR_"+f.name+"="+f.value, "GIT_COMMITTER_"+f.name+"="+f.value)
	}
	return env, nil
}
