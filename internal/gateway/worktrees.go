package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/atomicfile"
	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/project"
	"github.com/agentgateway/gateway/internal/queue"
	"github.com/agentgateway/gateway/internal/threads"
	"github.com/agentgateway/gateway/internal/worktree"
)

// WorktreesFile, in CONFIG_DIR, holds the worktree of every thread that
// has one (WORKTREES=on).
const WorktreesFile = "worktrees.json"

// worktreeSweepEvery is how often worktrees are looked at for removal.
const worktreeSweepEvery = time.Hour

// worktreeRecord is what the gateway keeps about a thread's worktree.
type worktreeRecord struct {
	worktree.Worktree
	// Project is the folder the thread's turns would have run in (its
	// project, else WORK_DIR) when the worktree was made.
	Project  string    `json:"project"`
	Created  time.Time `json:"created"`
	LastUsed time.Time `json:"last_used"`
	// Merged is set by the last /merge that landed.
	Merged *worktreeMerge `json:"merged,omitempty"`
}

type worktreeMerge struct {
	At     time.Time `json:"at"`
	Kind   string    `json:"kind"`
	Commit string    `json:"commit"`
}

type worktreesFile struct {
	Version   int                       `json:"version"`
	Worktrees map[string]worktreeRecord `json:"worktrees"`
}

// worktrees gives each thread the gateway opened on a git project a
// worktree of its own (DESIGN decision 24): the thread's first prompt
// makes it and every turn of the thread runs there (agent.Workspace);
// /diff, /merge and /discard act on it; Run removes the ones nobody needs
// any more. Git runs as the agent's user.
type worktrees struct {
	cfg     *config.Config
	git     *worktree.Git
	threads *threads.Store
	clock   clockwork.Clock
	log     zerolog.Logger
	path    string // CONFIG_DIR/worktrees.json

	// Bound by register.
	post    announcer
	running func(channel string) bool
	upload  int

	// opMu serialises what changes a repository (create, merge, discard):
	// git takes one lock per repository and fails, not waits, when it is
	// held.
	opMu sync.Mutex

	mu sync.Mutex // guards the fields below
	// records are the worktrees by thread id, as on disk.
	records map[string]worktreeRecord
	// pending are the /merge and /discard questions waiting for an
	// answer, by token.
	pending map[string]worktreeAsk
	// told is, per thread, the last reason given for running without a
	// worktree: the same reason is said once, not on every turn.
	told map[string]string
}

// newWorktrees returns the worktrees of WORKTREES=on, nil when it is off.
// With AGENT_USER, git runs as that user.
func newWorktrees(cfg *config.Config, list *threads.Store, clock clockwork.Clock, log zerolog.Logger) (*worktrees, error) {
	if !cfg.Worktrees {
		return nil, nil
	}
	g, err := worktreeGit(cfg)
	if err != nil {
		return nil, err
	}
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	w := &worktrees{cfg: cfg, git: g, threads: list, clock: clock, log: log,
		path:    filepath.Join(cfg.ConfigDir, WorktreesFile),
		records: map[string]worktreeRecord{}, pending: map[string]worktreeAsk{}, told: map[string]string{},
		running: func(string) bool { return false },
	}
	records, warning, err := loadWorktrees(w.path)
	if err != nil {
		return nil, err
	}
	if warning != "" {
		log.Warn().Msg(warning)
	}
	w.records = records
	return w, nil
}

// worktreeGit runs git as AGENT_USER when it is set.
func worktreeGit(cfg *config.Config) (*worktree.Git, error) {
	runAs, err := RunAs(cfg)
	if err != nil {
		return nil, err
	}
	opts := worktree.Options{Root: cfg.ProjectsRoot, Owner: Owner(cfg)}
	if runAs != nil {
		opts.User = &worktree.User{Name: runAs.Name, Home: runAs.Home, Credential: runAs.Credential}
	}
	return worktree.New(opts), nil
}

// loadWorktrees reads the records at path; a file that cannot be parsed
// is moved aside with a warning (the worktrees themselves stay on disk,
// and git still lists them).
func loadWorktrees(path string) (map[string]worktreeRecord, string, error) {
	records := map[string]worktreeRecord{}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return records, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("read the worktree list: %w", err)
	}
	var f worktreesFile
	if perr := json.Unmarshal(data, &f); perr != nil || f.Version < 1 {
		if perr == nil {
			perr = errors.New("no version")
		}
		aside := fmt.Sprintf("%s.corrupt-%s", path, time.Now().UTC().Format("20060102T150405Z"))
		if err := os.Rename(path, aside); err != nil {
			return nil, "", fmt.Errorf("move aside an unreadable worktree list: %w", err)
		}
		return records, fmt.Sprintf("%s could not be read (%v); moved it aside and started with no worktrees (they stay on disk: `git worktree list` shows them)", WorktreesFile, perr), nil
	}
	for id, r := range f.Worktrees {
		if id != "" && r.Thread == id {
			records[id] = r
		}
	}
	return records, "", nil
}

// saveLocked writes the records; w.mu is held.
func (w *worktrees) saveLocked() error {
	data, err := json.MarshalIndent(worktreesFile{Version: 1, Worktrees: w.records}, "", "  ")
	if err != nil {
		return fmt.Errorf("encode the worktree list: %w", err)
	}
	if err := atomicfile.Write(w.path, data, 0o600); err != nil {
		return fmt.Errorf("write the worktree list: %w", err)
	}
	return nil
}

// record returns the thread's worktree, if it has one.
func (w *worktrees) record(thread string) (worktreeRecord, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r, ok := w.records[thread]
	return r, ok
}

// update changes the thread's record (or adds it) and saves.
func (w *worktrees) update(thread string, change func(*worktreeRecord)) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	before, had := w.records[thread]
	r := before
	change(&r)
	w.records[thread] = r
	if err := w.saveLocked(); err != nil {
		if had {
			w.records[thread] = before
		} else {
			delete(w.records, thread)
		}
		return err
	}
	return nil
}

// forget drops the thread's record and saves.
func (w *worktrees) forget(thread string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	r, ok := w.records[thread]
	if !ok {
		return nil
	}
	delete(w.records, thread)
	if err := w.saveLocked(); err != nil {
		w.records[thread] = r
		return err
	}
	return nil
}

// WorkDir is the agent.Workspace: a prompt in a thread the gateway opened
// runs in the thread's worktree, made at its first prompt, when its
// project is a git repository. Whatever goes wrong, the turn runs in the
// checkout, and the reply says why once. A project that is not a git
// repository is no problem: it has no worktrees.
func (w *worktrees) WorkDir(ctx context.Context, e queue.Event, dir string) (string, string) {
	th, ok := w.threads.Get(e.ChannelID)
	if !ok || th.Gone {
		return "", ""
	}
	log := w.log.With().Str("thread", e.ChannelID).Uint64("event", e.ID).Logger()
	now := w.clock.Now()
	if r, ok := w.record(e.ChannelID); ok {
		if !samePath(r.Project, dir) {
			return "", w.tellOnce(e.ChannelID, "This thread's worktree is for "+w.show(r.Project)+", not for "+w.show(dir)+": this turn runs in the checkout itself. `/discard` the worktree to get one for the new project.")
		}
		if st, err := os.Stat(r.WorkDir()); err == nil && st.IsDir() {
			if err := w.update(e.ChannelID, func(r *worktreeRecord) { r.LastUsed = now }); err != nil {
				log.Warn().Err(err).Msg("could not record when the worktree was used")
			}
			return r.WorkDir(), ""
		}
		// The folder went away: Create makes it again from the branch.
	}
	// A stopped turn must not leave git half way through a checkout: the
	// runner's own timeout bounds it instead.
	ctx = context.WithoutCancel(ctx)
	w.opMu.Lock()
	wt, err := w.create(ctx, dir, e.ChannelID)
	w.opMu.Unlock()
	if err != nil {
		if errors.Is(err, worktree.ErrNotRepository) {
			log.Debug().Msg("the thread's project is not a git repository: no worktree")
			return "", ""
		}
		log.Warn().Err(err).Msg("no worktree for the thread; its turn runs in the checkout")
		return "", w.tellOnce(e.ChannelID, createFailure(err))
	}
	if err := w.update(e.ChannelID, func(r *worktreeRecord) {
		created := r.Created
		*r = worktreeRecord{Worktree: wt, Project: dir, Created: created, LastUsed: now, Merged: r.Merged}
		if r.Created.IsZero() {
			r.Created = now
		}
	}); err != nil {
		// The worktree exists and is found again by the next turn.
		log.Error().Err(err).Msg("could not record the thread's worktree")
	}
	log.Info().Str("branch", wt.Branch).Str("base", wt.BaseBranch).Str("project", w.show(dir)).Msg("thread works in a worktree of its own")
	w.mu.Lock()
	delete(w.told, e.ChannelID)
	w.mu.Unlock()
	return wt.WorkDir(), ""
}

// create makes the thread's worktree for the project dir, inside
// PROJECTS_ROOT when it is set.
func (w *worktrees) create(ctx context.Context, dir, thread string) (worktree.Worktree, error) {
	if w.cfg.ProjectsRoot != "" {
		top, _, err := w.git.Locate(ctx, dir)
		if err != nil {
			return worktree.Worktree{}, err
		}
		if !insideRoot(w.cfg.ProjectsRoot, worktree.Path(top, thread)) {
			return worktree.Worktree{}, errOutsideRoot
		}
	}
	return w.git.Create(ctx, dir, thread)
}

var errOutsideRoot = errors.New("the worktree would be outside PROJECTS_ROOT")

// createFailure is the line a reply carries when a thread has no
// worktree.
func createFailure(err error) string {
	why := "git could not make it (the gateway's log has the details)"
	switch {
	case errors.Is(err, worktree.ErrNoCommit):
		why = "the project's repository has no commit yet"
	case errors.Is(err, worktree.ErrDetached):
		why = "the project's checkout is on no branch (a detached HEAD), so there is nothing to merge into"
	case errors.Is(err, worktree.ErrInUse):
		why = "its folder is taken by something else"
	case errors.Is(err, errOutsideRoot):
		why = "the repository's folder is not inside the projects directory"
	}
	return "No worktree for this thread: " + why + ". It works in the project's checkout itself."
}

// tellOnce returns note the first time it is the thread's reason, ""
// after that.
func (w *worktrees) tellOnce(thread, note string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.told[thread] == note {
		return ""
	}
	w.told[thread] = note
	return note
}

// show names a folder for users: relative to PROJECTS_ROOT.
func (w *worktrees) show(dir string) string {
	return "`" + project.Show(w.cfg.ProjectsRoot, dir) + "`"
}

// insideRoot reports whether path is root or below it, with links in
// root resolved.
func insideRoot(root, path string) bool {
	if real, err := filepath.EvalSymlinks(root); err == nil {
		root = real
	}
	rel, err := filepath.Rel(filepath.Clean(root), filepath.Clean(path))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

func samePath(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	return err1 == nil && err2 == nil && ra == rb
}

// holds reports whether a worktree belongs to thread: its thread stays
// in the thread list however long it is idle.
func (w *worktrees) holds(thread string) bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.records[thread]
	return ok
}

// Run removes, at start and every hour until ctx ends, the worktrees
// whose thread Discord deleted, and those merged whose thread has been
// quiet for WORKTREE_KEEP_DAYS. A worktree with work its base lacks is
// kept whatever its thread became (doctor lists it).
func (w *worktrees) Run(ctx context.Context) error {
	tick := w.clock.NewTicker(worktreeSweepEvery)
	defer tick.Stop()
	for {
		w.sweep(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.Chan():
		}
	}
}

// sweep is one pass of Run.
func (w *worktrees) sweep(ctx context.Context) {
	w.mu.Lock()
	records := make([]worktreeRecord, 0, len(w.records))
	for _, r := range w.records {
		records = append(records, r)
	}
	w.mu.Unlock()
	sort.Slice(records, func(i, j int) bool { return records[i].Thread < records[j].Thread })
	keep := time.Duration(w.cfg.WorktreeKeepDays) * 24 * time.Hour
	now := w.clock.Now()
	for _, r := range records {
		if ctx.Err() != nil {
			return
		}
		log := w.log.With().Str("thread", r.Thread).Str("branch", r.Branch).Str("project", project.Show(w.cfg.ProjectsRoot, r.Project)).Logger()
		th, known := w.threads.Get(r.Thread)
		last := r.LastUsed
		if th.LastUsed.After(last) {
			last = th.LastUsed
		}
		gone := known && th.Gone
		idle := now.Sub(last) >= keep
		if !gone && !idle {
			continue
		}
		state, err := w.git.State(ctx, r.Worktree)
		if err != nil {
			log.Warn().Err(err).Msg("could not tell whether the worktree holds unmerged work; kept")
			continue
		}
		switch {
		case !state.Exists && state.BranchGone:
			log.Info().Msg("the worktree and its branch are gone: forgotten")
		case state.Unmerged():
			log.Info().Bool("thread_gone", gone).Int("uncommitted", state.Uncommitted).Int("commits_ahead", state.Ahead).
				Msg("worktree kept: it holds work its base branch lacks (doctor lists it)")
			continue
		case !gone && !state.Merged():
			continue
		default:
			w.opMu.Lock()
			err := w.git.Discard(context.WithoutCancel(ctx), r.Worktree)
			w.opMu.Unlock()
			if err != nil {
				log.Warn().Err(err).Msg("could not remove the worktree")
				continue
			}
			log.Info().Bool("thread_gone", gone).Time("last_used", last).Msg("worktree removed: merged or empty, and its thread is gone or quiet")
		}
		if err := w.forget(r.Thread); err != nil {
			log.Error().Err(err).Msg("could not update the worktree list")
		}
	}
}

// WorktreeReport is one worktree with work its base branch lacks, as
// doctor lists it.
type WorktreeReport struct {
	Thread, Name, Branch, BaseBranch string
	// Project is relative to PROJECTS_ROOT.
	Project     string
	LastUsed    time.Time
	Uncommitted int
	Ahead       int
	ThreadGone  bool
}

// UnmergedWorktrees lists the threads' worktrees that hold work their
// base branch lacks (uncommitted files, commits not merged), oldest use
// first. Git runs as AGENT_USER when it is set.
func UnmergedWorktrees(ctx context.Context, cfg *config.Config) ([]WorktreeReport, error) {
	records, _, err := readWorktrees(filepath.Join(cfg.ConfigDir, WorktreesFile))
	if err != nil || len(records) == 0 {
		return nil, err
	}
	g, err := worktreeGit(cfg)
	if err != nil {
		return nil, err
	}
	// Read as it is: threads.Open would move an unreadable list aside
	// under a running gateway.
	var list struct {
		Threads map[string]threads.Thread `json:"threads"`
	}
	if data, err := os.ReadFile(filepath.Join(cfg.ConfigDir, threads.FileName)); err == nil {
		_ = json.Unmarshal(data, &list)
	}
	var out []WorktreeReport
	var errs []error
	for _, r := range records {
		s, err := g.State(ctx, r.Worktree)
		if err != nil {
			errs = append(errs, fmt.Errorf("thread %s: %w", r.Thread, err))
			continue
		}
		if !s.Unmerged() {
			continue
		}
		rep := WorktreeReport{Thread: r.Thread, Branch: r.Branch, BaseBranch: r.BaseBranch,
			Project: project.Show(cfg.ProjectsRoot, r.Project), LastUsed: r.LastUsed, Uncommitted: s.Uncommitted, Ahead: s.Ahead}
		if th, ok := list.Threads[r.Thread]; ok {
			rep.Name, rep.ThreadGone = th.Name, th.Gone
			if th.LastUsed.After(rep.LastUsed) {
				rep.LastUsed = th.LastUsed
			}
		}
		out = append(out, rep)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].LastUsed.Before(out[j].LastUsed) })
	return out, errors.Join(errs...)
}

// readWorktrees reads the records without changing anything (doctor
// runs beside a running gateway).
func readWorktrees(path string) (map[string]worktreeRecord, bool, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read the worktree list: %w", err)
	}
	var f worktreesFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, true, fmt.Errorf("%s: %w", WorktreesFile, err)
	}
	return f.Worktrees, true, nil
}
