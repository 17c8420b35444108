package gateway

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/diamondburned/arikawa/v3/api"

	"github.com/agentgateway/gateway/internal/discord"
	"github.com/agentgateway/gateway/internal/files"
	"github.com/agentgateway/gateway/internal/reply"
	"github.com/agentgateway/gateway/internal/worktree"
)

// Slash commands and buttons of the threads' worktrees.
const (
	commandDiff    = "diff"
	commandMerge   = "merge"
	commandDiscard = "discard"

	worktreeButton = "worktree:"

	// worktreeAskTTL is how long a /merge or /discard waits for Confirm.
	worktreeAskTTL = 15 * time.Minute
	// worktreeAnswerWithin is how long a command or press waits for git
	// before it answers that the result follows.
	worktreeAnswerWithin = 2 * time.Second
	// worktreeOpTimeout bounds a diff, merge or discard started from
	// Discord, however long it is waited for.
	worktreeOpTimeout = 5 * time.Minute
	// diffFilesShown bounds the files /diff lists.
	diffFilesShown = 15
)

// worktreeAsk is a /merge or /discard waiting for Confirm.
type worktreeAsk struct {
	action  string // commandMerge or commandDiscard
	thread  string
	author  string // the thread's author, who may answer with the approvers
	expires time.Time
}

// register installs /diff, /merge and /discard and their buttons; running
// reports whether a turn runs in a channel now; upload is Discord's
// largest file.
func (w *worktrees) register(bot *discord.Bot, running func(channel string) bool, upload int) {
	w.post, w.upload = bot, upload
	if running != nil {
		w.running = running
	}
	bot.HandleCommand(api.CreateCommandData{Name: commandDiff, Description: "What this thread changed in its worktree: files, lines, and the whole diff as a file"}, w.diff)
	bot.HandleCommand(api.CreateCommandData{Name: commandMerge, Description: "Merge this thread's branch into the branch its project was on (asks to confirm)"}, w.merge)
	bot.HandleCommand(api.CreateCommandData{Name: commandDiscard, Description: "Remove this thread's worktree and branch, with their unmerged work (asks to confirm)"}, w.discard)
	bot.HandleButtons(worktreeButton, w.press)
}

// noWorktree is the answer in a channel or thread without a worktree.
func (w *worktrees) noWorktree(channel string) discord.CommandAnswer {
	text := "This is not a thread with a worktree of its own. A thread the gateway opened on a git project gets one at its first prompt: the agent works there on a branch of its own, and `/diff`, `/merge` and `/discard` act on it."
	if th, ok := w.threads.Get(channel); ok && !th.Gone {
		text = "This thread has no worktree (yet): its project is not a git repository, or it has had no prompt since worktrees were turned on. The agent works in the project's checkout itself."
	}
	return discord.CommandAnswer{Ephemeral: true, Text: text}
}

// within runs op with its own context, bounded by worktreeOpTimeout, and
// waits for it until ctx ends or worktreeAnswerWithin passes: ok is false
// when it is still running, and later is then called with its result.
func within[T any](ctx context.Context, op func(context.Context) T, later func(T)) (T, bool) {
	done := make(chan T, 1)
	go func() {
		opCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), worktreeOpTimeout)
		defer cancel()
		done <- op(opCtx)
	}()
	wait, cancel := context.WithTimeout(ctx, worktreeAnswerWithin)
	defer cancel()
	select {
	case v := <-done:
		return v, true
	case <-wait.Done():
		go func() { later(<-done) }()
		var zero T
		return zero, false
	}
}

type diffResult struct {
	d   worktree.Diff
	err error
}

func (w *worktrees) diff(ctx context.Context, cmd discord.Command) discord.CommandAnswer {
	r, ok := w.record(cmd.ChannelID)
	if !ok {
		return w.noWorktree(cmd.ChannelID)
	}
	name := w.diffFileName(r.Thread)
	answer := func(res diffResult) (string, []files.Outgoing) {
		if res.err != nil {
			w.log.Warn().Err(res.err).Str("thread", r.Thread).Msg("/diff failed")
			return "Could not work out the diff: git failed (the gateway's log has the details).", nil
		}
		return diffAnswer(r.Branch, r.BaseBranch, res.d), w.diffFile(name, res.d)
	}
	res, ok := within(ctx, func(ctx context.Context) diffResult {
		d, err := w.git.Diff(ctx, r.Worktree)
		return diffResult{d, err}
	}, func(res diffResult) {
		text, file := answer(res)
		w.announce(r.Thread, text, file)
	})
	if !ok {
		return discord.CommandAnswer{Text: "Working out the diff of `" + r.Branch + "`; it follows here in a moment."}
	}
	text, file := answer(res)
	return discord.CommandAnswer{Text: text, Files: file}
}

// announce posts text and files in the thread, logging a failure.
func (w *worktrees) announce(channel, text string, attached []files.Outgoing) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := w.post.Announce(ctx, channel, text, attached); err != nil {
		w.log.Warn().Err(err).Str("thread", channel).Msg("could not post in the thread")
	}
}

// diffFileName is the attachment's name: the thread's name made safe for
// a file, else its id.
func (w *worktrees) diffFileName(thread string) string {
	base := thread
	if th, ok := w.threads.Get(thread); ok && th.Name != "" {
		base = th.Name
	}
	return safeFileName(base, thread) + ".diff"
}

// safeFileName keeps letters, digits, - _ and . of name (runs of anything
// else become one -), at most 80 bytes; fallback when nothing is left.
func safeFileName(name, fallback string) string {
	var b strings.Builder
	dash := false
	for _, r := range name {
		ok := r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '.')
		if ok {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
		if b.Len() >= 80 {
			break
		}
	}
	s := strings.Trim(b.String(), "-.")
	if s == "" {
		return fallback
	}
	return s
}

// diffFile is the whole patch as an attachment, cut to the upload limit.
func (w *worktrees) diffFile(name string, d worktree.Diff) []files.Outgoing {
	if len(d.Patch) == 0 {
		return nil
	}
	data := d.Patch
	if w.upload > 0 && len(data) > w.upload {
		data = data[:w.upload]
	}
	return []files.Outgoing{{Name: name, Data: data, Size: int64(len(data))}}
}

// diffAnswer is /diff's message: totals, up to diffFilesShown files with
// their +/- lines, and the patch's first lines in a diff code block, in
// at most reply.DiscordLimit characters. It is pure.
func diffAnswer(branch, base string, d worktree.Diff) string {
	if len(d.Files) == 0 {
		return fmt.Sprintf("No changes in `%s` against `%s` yet.", safeCode(branch, 60), safeCode(base, 60))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "**%d %s changed** in `%s` against `%s`: +%d −%d\n", len(d.Files), plural(len(d.Files), "file", "files"),
		safeCode(branch, 60), safeCode(base, 60), d.Added, d.Deleted)
	for i, f := range d.Files {
		if i == diffFilesShown {
			fmt.Fprintf(&b, "…and %d more\n", len(d.Files)-diffFilesShown)
			break
		}
		path := "`" + safeCode(f.Path, 80) + "`"
		if f.OldPath != "" {
			path = "`" + safeCode(f.OldPath, 60) + "` → " + path
		}
		if f.Binary {
			fmt.Fprintf(&b, "%s binary\n", path)
		} else {
			fmt.Fprintf(&b, "%s +%d −%d\n", path, f.Added, f.Deleted)
		}
	}
	head := b.String()
	const open, closing = "```diff\n", "```"
	footer := "\n-# The whole diff is attached below."
	if d.Truncated {
		footer = "\n-# The diff is too large to show whole; the attachment is its beginning."
	}
	room := reply.DiscordLimit - utf8.RuneCountInString(head) - utf8.RuneCountInString(open+closing+footer) - 10
	if room < 100 {
		return strings.TrimRight(head, "\n")
	}
	var block strings.Builder
	used := 0
	for _, line := range strings.Split(string(d.Patch), "\n") {
		line = safePatchLine(line, 160)
		n := utf8.RuneCountInString(line) + 1
		if used+n > room {
			if used+2 <= room {
				block.WriteString("…\n")
			}
			break
		}
		block.WriteString(line + "\n")
		used += n
	}
	return head + open + block.String() + closing + footer
}

// safePatchLine makes a patch line safe inside a code block: valid UTF-8,
// no control characters but tabs, no ``` that would end the block, at
// most max characters.
func safePatchLine(line string, max int) string {
	line = strings.ToValidUTF8(line, "�")
	line = strings.Map(func(r rune) rune {
		if r == '\t' || !unicode.IsControl(r) {
			return r
		}
		return '�'
	}, line)
	// A zero-width space keeps three backticks from closing the block.
	line = strings.ReplaceAll(line, "```", "`\u200b``")
	if utf8.RuneCountInString(line) > max {
		line = string([]rune(line)[:max-1]) + "…"
	}
	return line
}

// safeCode makes s safe inside inline code: no backticks, no line breaks
// or control characters, at most max characters.
func safeCode(s string, max int) string {
	s = strings.ToValidUTF8(s, "�")
	s = strings.Map(func(r rune) rune {
		switch {
		case r == '`':
			return '\''
		case unicode.IsControl(r):
			return '�'
		}
		return r
	}, s)
	if utf8.RuneCountInString(s) > max {
		s = "…" + string([]rune(s)[utf8.RuneCountInString(s)-max+1:])
	}
	return s
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func (w *worktrees) merge(ctx context.Context, cmd discord.Command) discord.CommandAnswer {
	return w.ask(ctx, cmd, commandMerge)
}

func (w *worktrees) discard(ctx context.Context, cmd discord.Command) discord.CommandAnswer {
	return w.ask(ctx, cmd, commandDiscard)
}

// ask answers /merge and /discard with what would happen and
// Confirm/Cancel buttons for the thread's author and the approvers.
func (w *worktrees) ask(ctx context.Context, cmd discord.Command, action string) discord.CommandAnswer {
	r, ok := w.record(cmd.ChannelID)
	if !ok {
		return w.noWorktree(cmd.ChannelID)
	}
	stateCtx, cancel := context.WithTimeout(ctx, worktreeAnswerWithin)
	state, err := w.git.State(stateCtx, r.Worktree)
	cancel()
	known := err == nil
	if err != nil {
		w.log.Warn().Err(err).Str("thread", r.Thread).Msg("could not tell what the worktree holds")
	}
	var text string
	switch {
	case action == commandMerge && known && state.Merged():
		return discord.CommandAnswer{Text: fmt.Sprintf("Nothing to merge: `%s` has everything from `%s` already.", safeCode(r.BaseBranch, 60), safeCode(r.Branch, 60))}
	case action == commandMerge:
		text = fmt.Sprintf("Merge `%s` into `%s` of %s?", safeCode(r.Branch, 60), safeCode(r.BaseBranch, 60), w.show(r.Checkout))
		if known {
			text += " " + workSummary(state, r.BaseBranch)
			if state.Uncommitted > 0 {
				text += " The uncommitted files are committed on the thread's branch first."
			}
		}
	default:
		text = fmt.Sprintf("Remove this thread's worktree and its branch `%s`?", safeCode(r.Branch, 60))
		switch {
		case !known:
			text += " Whatever it holds that is not merged will be lost (the gateway could not tell how much)."
		case state.Unmerged():
			text += " " + lostSummary(state, r.BaseBranch)
		default:
			text += " Nothing unmerged will be lost."
		}
	}
	th, _ := w.threads.Get(r.Thread)
	token := randomToken()
	now := w.clock.Now()
	w.mu.Lock()
	for k, a := range w.pending {
		if now.After(a.expires) {
			delete(w.pending, k)
		}
	}
	w.pending[token] = worktreeAsk{action: action, thread: r.Thread, author: th.Author, expires: now.Add(worktreeAskTTL)}
	w.mu.Unlock()
	confirm := discord.Button{ID: worktreeButton + action + ":" + token, Label: "Merge", Style: discord.ButtonSuccess}
	if action == commandDiscard {
		confirm.Label, confirm.Style = "Discard", discord.ButtonDanger
	}
	return discord.CommandAnswer{Text: text, Buttons: []discord.Button{
		confirm,
		{ID: worktreeButton + "cancel:" + token, Label: "Cancel", Style: discord.ButtonSecondary},
	}}
}

// workSummary says what a merge would bring: "2 commits and 3
// uncommitted files are not in `main` yet."
func workSummary(s worktree.State, base string) string {
	var parts []string
	if s.Ahead > 0 {
		parts = append(parts, fmt.Sprintf("%d %s", s.Ahead, plural(s.Ahead, "commit", "commits")))
	}
	if s.Uncommitted > 0 {
		parts = append(parts, fmt.Sprintf("%d uncommitted %s", s.Uncommitted, plural(s.Uncommitted, "file", "files")))
	}
	if len(parts) == 0 {
		return ""
	}
	verb := "are"
	if len(parts) == 1 && (s.Ahead == 1 || s.Uncommitted == 1) {
		verb = "is"
	}
	return strings.Join(parts, " and ") + " " + verb + " not in `" + safeCode(base, 60) + "` yet."
}

// lostSummary says what /discard loses.
func lostSummary(s worktree.State, base string) string {
	var parts []string
	if s.Uncommitted > 0 {
		parts = append(parts, fmt.Sprintf("%d uncommitted %s", s.Uncommitted, plural(s.Uncommitted, "change", "changes")))
	}
	if s.Ahead > 0 {
		parts = append(parts, fmt.Sprintf("%d %s not merged into `%s`", s.Ahead, plural(s.Ahead, "commit", "commits"), safeCode(base, 60)))
	}
	if len(parts) == 0 {
		return "Its branch's work will be lost (its base branch is gone)."
	}
	return strings.Join(parts, " and ") + " will be lost."
}

// mayDecide reports whether the presser may merge or discard a thread's
// work: its author, or an approver (APPROVER_IDS, else ALLOWED_USER_IDS,
// else members who can manage the server; the rule of the budget's
// button).
func (w *worktrees) mayDecide(p discord.Press, author string) bool {
	return (author != "" && p.UserID == author) || isApprover(w.cfg, p)
}

func (w *worktrees) press(ctx context.Context, p discord.Press) discord.PressAnswer {
	rest := strings.TrimPrefix(p.ButtonID, worktreeButton)
	choice, token, _ := strings.Cut(rest, ":")
	w.mu.Lock()
	ask, ok := w.pending[token]
	if ok && !w.mayDecide(p, ask.author) {
		w.mu.Unlock()
		return discord.PressAnswer{Notice: "Only the person who opened this thread, or one of the gateway's approvers, can answer this."}
	}
	delete(w.pending, token)
	w.mu.Unlock()
	if !ok || w.clock.Now().After(ask.expires) || ask.thread != p.ChannelID {
		text := "This question has expired or was answered already; nothing changed. Run the command again."
		return discord.PressAnswer{Update: &text}
	}
	if choice == "cancel" {
		text := "Not merged: cancelled."
		if ask.action == commandDiscard {
			text = "Not removed: cancelled."
		}
		return discord.PressAnswer{Update: &text}
	}
	r, ok := w.record(ask.thread)
	if !ok {
		text := "This thread has no worktree any more; nothing changed."
		return discord.PressAnswer{Update: &text}
	}
	if w.running(ask.thread) {
		text := "Nothing changed: the agent is working in this thread right now. Wait for its answer (or stop it with `/claude-stop`), then run the command again."
		return discord.PressAnswer{Update: &text}
	}
	w.log.Info().Str("thread", r.Thread).Str("by", p.UserID).Str("action", ask.action).Msg("worktree change confirmed")
	var op func(context.Context) string
	working := "Merging `" + safeCode(r.Branch, 60) + "` into `" + safeCode(r.BaseBranch, 60) + "`; the result follows here."
	if ask.action == commandMerge {
		op = func(ctx context.Context) string { return w.doMerge(ctx, r) }
	} else {
		op = func(ctx context.Context) string { return w.doDiscard(ctx, r) }
		working = "Removing the worktree; the result follows here."
	}
	text, done := within(ctx, func(ctx context.Context) string {
		w.opMu.Lock()
		defer w.opMu.Unlock()
		return op(ctx)
	}, func(text string) { w.announce(r.Thread, text, nil) })
	if !done {
		text = working
	}
	return discord.PressAnswer{Update: &text}
}

// doMerge merges the thread's branch and says how it went; w.opMu is held.
func (w *worktrees) doMerge(ctx context.Context, r worktreeRecord) string {
	name := r.Thread
	if th, ok := w.threads.Get(r.Thread); ok && th.Name != "" {
		name = th.Name
	}
	message := fmt.Sprintf("Merge thread %q (%s)\n\nMerged by the agent gateway on /merge.", name, r.Branch)
	res, err := w.git.Merge(ctx, r.Worktree, message)
	log := w.log.With().Str("thread", r.Thread).Str("branch", r.Branch).Str("base", r.BaseBranch).Logger()
	if err != nil {
		var conflict *worktree.ConflictError
		var dirty *worktree.DirtyError
		if !errors.As(err, &conflict) && !errors.As(err, &dirty) {
			log.Warn().Err(err).Msg("merge failed")
		} else {
			log.Info().Err(err).Msg("merge refused; nothing changed")
		}
		return mergeFailure(err, r.BaseBranch, w.show(r.Checkout))
	}
	log.Info().Str("kind", string(res.Kind)).Str("commit", res.Commit).Str("saved", res.Saved).Msg("thread merged")
	if res.Kind != worktree.UpToDate {
		if err := w.update(r.Thread, func(rec *worktreeRecord) {
			rec.Merged = &worktreeMerge{At: w.clock.Now(), Kind: string(res.Kind), Commit: res.Commit}
		}); err != nil {
			log.Error().Err(err).Msg("could not record the merge")
		}
	}
	return mergeSuccess(res, r.Branch, r.BaseBranch)
}

// mergeSuccess says what a merge did.
func mergeSuccess(res worktree.Merged, branch, base string) string {
	branch, base = safeCode(branch, 60), safeCode(base, 60)
	var b strings.Builder
	switch res.Kind {
	case worktree.UpToDate:
		return "Nothing to merge: `" + base + "` has everything from `" + branch + "` already."
	case worktree.FastForward:
		fmt.Fprintf(&b, "Merged `%s` into `%s` by fast-forward: `%s` is now at `%s`.", branch, base, base, shortCommit(res.Commit))
	default:
		fmt.Fprintf(&b, "Merged `%s` into `%s` with the merge commit `%s`.", branch, base, shortCommit(res.Commit))
	}
	if res.Saved != "" {
		fmt.Fprintf(&b, " The uncommitted work was committed on the thread's branch first (`%s`).", shortCommit(res.Saved))
	}
	if !res.CheckedOut {
		fmt.Fprintf(&b, " `%s` is not checked out anywhere, so only the branch moved.", base)
	}
	b.WriteString(" The worktree stays: keep working here and `/merge` again, or `/discard` it.")
	return b.String()
}

// mergeFailure says why a merge did not happen, and what to do.
func mergeFailure(err error, base, checkout string) string {
	base = safeCode(base, 60)
	var conflict *worktree.ConflictError
	var dirty *worktree.DirtyError
	switch {
	case errors.As(err, &conflict):
		return fmt.Sprintf("Not merged: this thread and `%s` changed the same lines in %s. Nothing was changed. Ask the agent to merge `%s` into this thread's branch and resolve them, then `/merge` again.",
			base, fileList(conflict.Files), base)
	case errors.As(err, &dirty):
		return fmt.Sprintf("Not merged: the checkout of %s has uncommitted changes to %s, which the merge would change. Nothing was changed. Commit or stash them there, then `/merge` again.",
			checkout, fileList(dirty.Files))
	case errors.Is(err, worktree.ErrBaseMoved):
		return "Not merged: `" + base + "` moved while merging. Nothing was changed; `/merge` again."
	case errors.Is(err, worktree.ErrBaseGone):
		return "Not merged: the branch `" + base + "` no longer exists. Nothing was changed."
	case errors.Is(err, worktree.ErrBranchGone):
		return "Not merged: this thread's branch no longer exists. Nothing was changed; `/discard` the worktree."
	case errors.Is(err, worktree.ErrOffBranch):
		return "Not merged: the thread's worktree is no longer on its own branch (something checked out another one there). Nothing was changed."
	}
	return "Not merged: git failed (the gateway's log has the details)."
}

// fileList names up to 10 files: "2 files: `a`, `b`".
func fileList(names []string) string {
	shown := names
	if len(shown) > 10 {
		shown = shown[:10]
	}
	quoted := make([]string, len(shown))
	for i, n := range shown {
		quoted[i] = "`" + safeCode(n, 80) + "`"
	}
	s := fmt.Sprintf("%d %s: %s", len(names), plural(len(names), "file", "files"), strings.Join(quoted, ", "))
	if len(names) > len(shown) {
		s += fmt.Sprintf(" and %d more", len(names)-len(shown))
	}
	return s
}

func shortCommit(id string) string {
	if len(id) > 10 {
		return id[:10]
	}
	return id
}

// doDiscard removes the thread's worktree and branch; w.opMu is held.
func (w *worktrees) doDiscard(ctx context.Context, r worktreeRecord) string {
	if err := w.git.Discard(ctx, r.Worktree); err != nil {
		w.log.Warn().Err(err).Str("thread", r.Thread).Msg("discard failed")
		return "Could not remove the worktree: git failed (the gateway's log has the details)."
	}
	if err := w.forget(r.Thread); err != nil {
		w.log.Error().Err(err).Str("thread", r.Thread).Msg("could not update the worktree list")
	}
	w.log.Info().Str("thread", r.Thread).Str("branch", r.Branch).Msg("worktree discarded")
	return "Removed this thread's worktree and its branch `" + safeCode(r.Branch, 60) + "`. The next prompt here starts a new worktree from the project's current branch."
}
