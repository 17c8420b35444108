package worktree

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Diff is what a thread changed against its base: committed, uncommitted
// and untracked files alike (ignored files are not part of it).
type Diff struct {
	// Base is the commit compared with: where the thread's branch and its
	// base branch last met.
	Base  string
	Files []FileStat
	// Added and Deleted are the lines over every text file.
	Added, Deleted int
	// Patch is the unified diff; Truncated says it is only its beginning
	// (Options.MaxOutput).
	Patch     []byte
	Truncated bool
}

// Diff computes what wt changed against its base, without touching the
// worktree's index or files: the worktree's state is staged in an index
// of its own, in a temporary folder.
func (g *Git) Diff(ctx context.Context, wt Worktree) (Diff, error) {
	base, err := g.base(ctx, wt)
	if err != nil {
		return Diff{}, err
	}
	tree, err := g.snapshot(ctx, wt)
	if err != nil {
		return Diff{}, err
	}
	// diff-tree is plumbing: no user setting (an external diff, colour,
	// no prefixes) changes what it writes.
	out, err := g.git(ctx, wt.Dir, "diff-tree", "-r", "-z", "--numstat", "-M", base, tree)
	if err != nil {
		return Diff{}, err
	}
	files, err := ParseNumstat(out)
	if err != nil {
		return Diff{}, err
	}
	d := Diff{Base: base, Files: files}
	for _, f := range files {
		d.Added += f.Added
		d.Deleted += f.Deleted
	}
	d.Patch, err = g.git(ctx, wt.Dir, "diff-tree", "-r", "-p", "-M", "--no-ext-diff", "--no-textconv", base, tree)
	if errors.Is(err, ErrOutputTooLarge) {
		d.Truncated, err = true, nil
	}
	if err != nil {
		return Diff{}, err
	}
	return d, nil
}

// base is the commit the thread's work is compared with: the merge base
// of its branch and its base branch, or the commit it began at when the
// base branch is gone.
func (g *Git) base(ctx context.Context, wt Worktree) (string, error) {
	if _, ok, err := g.rev(ctx, wt.Checkout, wt.baseRef()); err != nil {
		return "", err
	} else if !ok {
		if !isObjectID(wt.BaseCommit) {
			return "", ErrBaseGone
		}
		return wt.BaseCommit, nil
	}
	out, err := g.git(ctx, wt.Checkout, "merge-base", wt.baseRef(), wt.branchRef())
	if err != nil {
		if exitCode(err) == 1 {
			return "", fmt.Errorf("no common commit: %w", ErrBaseGone)
		}
		return "", err
	}
	return firstLine(out), nil
}

// snapshot writes the worktree's files as they are (tracked, changed and
// untracked, not ignored) into a tree object and returns its id. The
// worktree's own index is left alone: git stages into a fresh index in a
// temporary folder, owned by the user git runs as.
func (g *Git) snapshot(ctx context.Context, wt Worktree) (string, error) {
	tmp, err := os.MkdirTemp("", "gateway-worktree-")
	if err != nil {
		return "", fmt.Errorf("temporary index: %w", err)
	}
	defer os.RemoveAll(tmp)
	if g.user != nil {
		if err := os.Chown(tmp, int(g.user.Credential.UID), int(g.user.Credential.GID)); err != nil {
			return "", fmt.Errorf("temporary index: %w", err)
		}
	}
	env := []string{"GIT_INDEX_FILE=" + filepath.Join(tmp, "index")}
	steps := [][]string{
		{"read-tree", "HEAD"},
		{"add", "--all", "--", "."},
		{"write-tree"},
	}
	var out []byte
	for _, args := range steps {
		if out, err = g.run.Run(ctx, wt.Dir, env, args...); err != nil {
			return "", err
		}
	}
	tree := firstLine(out)
	if !isObjectID(tree) {
		return "", fmt.Errorf("write-tree: %w", ErrMalformed)
	}
	return tree, nil
}
