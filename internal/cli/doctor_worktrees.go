package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/gateway"
)

// worktreeChecks lists the threads' worktrees that hold work their base
// branch lacks (WORKTREES=on): the gateway never removes those, so they
// stay until someone merges or discards them.
func worktreeChecks(ctx context.Context, cfg *config.Config) []check {
	list, err := gateway.UnmergedWorktrees(ctx, cfg)
	var out []check
	if err != nil {
		out = append(out, check{Name: "worktrees", Warning: true, Detail: "could not look at every worktree: " + err.Error()})
	}
	for _, r := range list {
		out = append(out, check{Name: "worktrees", Warning: true, Detail: worktreeLine(r)})
	}
	if len(out) == 0 && cfg.Worktrees {
		out = append(out, check{Name: "worktrees", OK: true, Detail: "no thread's worktree holds unmerged work"})
	}
	return out
}

// worktreeLine reads like: thread "Fix the login bug" (123): gateway/123
// in app has 2 commits and 1 uncommitted file not in main; last used
// 2026-03-01 12:00 UTC.
func worktreeLine(r gateway.WorktreeReport) string {
	name := fmt.Sprintf("thread %s", r.Thread)
	if r.Name != "" {
		name = fmt.Sprintf("thread %q (%s)", r.Name, r.Thread)
	}
	if r.ThreadGone {
		name += ", deleted in Discord,"
	}
	var work []string
	if r.Ahead > 0 {
		work = append(work, fmt.Sprintf("%d %s", r.Ahead, pluralWord(r.Ahead, "commit", "commits")))
	}
	if r.Uncommitted > 0 {
		work = append(work, fmt.Sprintf("%d uncommitted %s", r.Uncommitted, pluralWord(r.Uncommitted, "file", "files")))
	}
	if len(work) == 0 {
		work = append(work, "work")
	}
	used := "never used"
	if !r.LastUsed.IsZero() {
		used = "last used " + r.LastUsed.UTC().Format("2006-01-02 15:04 UTC")
	}
	return fmt.Sprintf("%s: %s in %s has %s not in %s; %s (/merge or /discard it in the thread)",
		name, r.Branch, r.Project, strings.Join(work, " and "), r.BaseBranch, used)
}

func pluralWord(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
