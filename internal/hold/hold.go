// Package hold keeps the agent from changing the gateway's own schedule
// behind an operator's back.
//
// heartbeat.md and agents.md make the gateway act on its own (timers, cron
// jobs, hooks, webhooks) and boot.md shapes its start. The agent works in
// CONFIG_DIR and, run as the gateway's user, can write them. The Gate reads
// them for the scheduler instead of the scheduler reading the disk, and
// judges every change it sees:
//
//   - seen with no agent turn running, and none that could write files
//     having ended within the grace period: an operator's edit, applied as
//     before;
//   - seen while turns run that have called no writing tool yet: undecided
//     (the last applied schedule stays) until one of them calls a writing
//     tool (held) or all of them end without one (applied);
//   - seen while, or right after, a turn ran a writing tool (Write, Edit,
//     Bash and their kin in every CLI; anything not known to be read-only):
//     held. The file is put back as it was, the proposed content is kept in
//     the hold (persisted, so Apply works after a restart too), and a
//     message with what would change and Apply/Discard buttons is posted
//     for the approvers. Apply writes the proposed content and schedules
//     it; Discard drops it.
//
// A change whose schedule is the same as before (prose, comments) is not
// held. The files' content is compared, not their timestamps, so editors
// that replace files are followed and the check works on every filesystem.
package hold

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/atomicfile"
	"github.com/agentgateway/gateway/internal/persona"
	"github.com/agentgateway/gateway/internal/schedule"
)

// StateFile keeps the pending holds in CONFIG_DIR (0600).
const StateFile = "schedule-holds.json"

// Files are the files the gate guards.
var Files = []string{schedule.HeartbeatFile, schedule.AgentsFile, persona.BootFile}

// Reloader applies a schedule read through read (the scheduler's
// ReloadFrom).
type Reloader interface {
	ReloadFrom(read func(name string) (string, error)) error
}

// Asker posts a held change where approvers can see it.
type Asker interface {
	// Ask posts text in channel with an Apply and a Discard button whose
	// ids are apply and discard, and returns the message's id.
	Ask(ctx context.Context, channel, text, apply, discard string) (message string, err error)
	// Edit replaces a message's text and removes its buttons.
	Edit(ctx context.Context, channel, message, text string) error
}

// Options configure a Gate.
type Options struct {
	// Dir is CONFIG_DIR.
	Dir string
	// StatePath is where pending holds are kept; empty: Dir/StateFile.
	StatePath string
	// Channel is where held changes are posted (OUTPUT_CHANNEL_ID). Empty:
	// the channel of the turn that wrote the file, when it has one.
	Channel string
	// Approvers may press Apply and Discard (APPROVER_IDS). Empty: the
	// AllowedUsers; both empty: members with the Manage Server permission.
	Approvers    []string
	AllowedUsers []string
	// IsApprover, when set, decides instead of the lists above (the
	// gateway's own rule, which counts Discord roles too).
	IsApprover func(Press) bool
	// Grace is how long after a writing turn ended a change is still
	// taken for its doing. Zero: 10 s.
	Grace time.Duration
	// Clock is the gate's time; nil is the real clock.
	Clock clockwork.Clock
	// Reloaded, if set, runs after every reload of the schedule.
	Reloaded func()
	// Forward, if set, makes this the gate of a process that does not
	// fire the schedule (a gateway worker): an agent's change that would
	// be held, and a cron action's edit, are handed to it instead (for
	// the other process's Propose), and the file here is put back. It
	// retries as it sees fit; the gate runs it on its own goroutine for
	// an agent's change and waits for it for a cron action's edit. Nil:
	// changes are held and asked about here.
	Forward func(ctx context.Context, p Proposal) error
	Log     zerolog.Logger
}

// text is a file's content; a missing file is the zero text.
type text struct {
	Body   string `json:"body"`
	Exists bool   `json:"exists"`
}

// undecided is a change seen while turns ran that had not called a writing
// tool yet.
type undecided struct {
	content text
	turns   []*turn
}

// Gate guards the schedule files. It is safe for concurrent use.
type Gate struct {
	opts  Options
	clock clockwork.Clock
	log   zerolog.Logger
	// wake asks the loop for a check now (a turn ended).
	wake chan struct{}

	// op serialises checks and presses: each reads and writes the files
	// and the holds, and may talk to Discord. It is taken before mu.
	op       sync.Mutex
	reloader Reloader
	asker    Asker
	// applied is what the schedule runs from, seen what the disk held at
	// the last check, by file. They differ only while a change is
	// undecided.
	applied   map[string]text
	seen      map[string]text
	undecided map[string]*undecided
	holds     map[string]*Hold // by file
	// unreadable is the last read error logged per file, to log it once.
	unreadable map[string]string
	// voided are holds that stopped applying before Discord was there to
	// be told: their messages are edited at the next check.
	voided []voided

	// mu guards the turns, which the runtime reports from its goroutines.
	mu       sync.Mutex
	nextTurn uint64
	running  map[uint64]*turn
	recent   []*turn // writing turns that ended, within Grace
}

type voided struct {
	hold *Hold
	why  string
}

// New reads the guarded files and the pending holds. A hold whose file
// still holds its proposed content (the gateway stopped between keeping
// the hold and putting the file back) has the file put back now; one whose
// file was edited while the gateway was stopped no longer applies.
func New(opts Options) (*Gate, error) {
	if opts.StatePath == "" {
		opts.StatePath = filepath.Join(opts.Dir, StateFile)
	}
	if opts.Grace <= 0 {
		opts.Grace = 10 * time.Second
	}
	g := &Gate{
		opts:       opts,
		clock:      opts.Clock,
		log:        opts.Log,
		wake:       make(chan struct{}, 1),
		applied:    map[string]text{},
		seen:       map[string]text{},
		undecided:  map[string]*undecided{},
		holds:      map[string]*Hold{},
		unreadable: map[string]string{},
		running:    map[uint64]*turn{},
	}
	if g.clock == nil {
		g.clock = clockwork.NewRealClock()
	}
	holds, err := loadHolds(opts.StatePath)
	if err != nil {
		return nil, err
	}
	for _, name := range Files {
		cur, err := g.readDisk(name)
		if err != nil {
			return nil, err
		}
		h := holds[name]
		switch {
		case h == nil:
		case cur == h.Before:
			g.holds[name] = h
		case cur == h.After:
			if err := g.restore(name, h.Before); err != nil {
				return nil, fmt.Errorf("put %s back as it was before the held change: %w", name, err)
			}
			cur = h.Before
			g.holds[name] = h
			g.log.Warn().Str("file", name).Msg("held schedule change found in the file at start: put the file back as it was; the change still waits for approval")
		default:
			g.voided = append(g.voided, voided{h, "`" + name + "` was edited while the gateway was stopped; that edit applies and this change no longer does."})
		}
		g.applied[name], g.seen[name] = cur, cur
	}
	if len(g.voided) > 0 {
		if err := g.saveLocked(); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// Start binds the scheduler and applies the schedule. Call it once, before
// Run.
func (g *Gate) Start(r Reloader) error {
	g.op.Lock()
	defer g.op.Unlock()
	g.reloader = r
	// What changed since New (the bootstrap creating default files) was
	// done by the gateway itself, before any turn: take it as it is.
	for _, name := range Files {
		if g.holds[name] != nil {
			continue
		}
		if cur, err := g.readDisk(name); err == nil {
			g.applied[name], g.seen[name] = cur, cur
		}
	}
	return g.reloadLocked()
}

// SetAsker binds where held changes are posted, once Discord is ready.
func (g *Gate) SetAsker(a Asker) {
	g.op.Lock()
	g.asker = a
	g.op.Unlock()
}

// Run checks the files every interval, when a turn ends and when reload
// receives a value (SIGHUP), until ctx ends.
func (g *Gate) Run(ctx context.Context, interval time.Duration, reload <-chan os.Signal) {
	t := g.clock.NewTicker(interval)
	defer t.Stop()
	for {
		forced := false
		select {
		case <-ctx.Done():
			return
		case <-reload:
			g.log.Info().Msg("SIGHUP: reloading heartbeat.md and agents.md")
			forced = true
		case <-g.wake:
		case <-t.Chan():
		}
		g.Check(ctx, forced)
	}
}

// Check looks at the files once and acts on what changed; reload applies
// the schedule again even when nothing did.
func (g *Gate) Check(ctx context.Context, reload bool) {
	g.op.Lock()
	defer g.op.Unlock()
	g.checkLocked(ctx, reload)
}

// checkLocked is Check with op held.
func (g *Gate) checkLocked(ctx context.Context, reload bool) {
	g.tellVoidedLocked(ctx)
	now := g.clock.Now()
	for _, name := range Files {
		cur, err := g.readDisk(name)
		if err != nil {
			if msg := err.Error(); g.unreadable[name] != msg {
				g.unreadable[name] = msg
				g.log.Error().Err(err).Str("file", name).Msg("cannot read the file: the schedule last applied from it stays")
			}
			continue
		}
		delete(g.unreadable, name)
		if cur == g.seen[name] {
			continue
		}
		g.seen[name] = cur
		if cur == g.applied[name] {
			delete(g.undecided, name) // changed and changed back
			continue
		}
		g.mu.Lock()
		suspects := g.suspectsLocked(now)
		g.mu.Unlock()
		if len(suspects) == 0 {
			g.log.Info().Str("file", name).Msg("file changed with no agent turn running: applying it")
			reload = g.applyLocked(ctx, name, cur) || reload
			continue
		}
		g.undecided[name] = &undecided{content: cur, turns: suspects}
	}
	for _, name := range Files {
		u := g.undecided[name]
		if u == nil {
			continue
		}
		g.mu.Lock()
		tools, running, channel, user := judge(u.turns)
		g.mu.Unlock()
		switch {
		case len(tools) > 0 && g.opts.Forward != nil:
			delete(g.undecided, name)
			g.forwardLocked(ctx, name, u.content, tools, channel, user)
		case len(tools) > 0:
			delete(g.undecided, name)
			reload = g.holdLocked(ctx, name, u.content, tools, channel) || reload
		case !running:
			delete(g.undecided, name)
			g.log.Info().Str("file", name).Msg("file changed while agent turns ran that wrote nothing: applying it")
			reload = g.applyLocked(ctx, name, u.content) || reload
		}
	}
	g.postPendingLocked(ctx)
	if reload {
		if err := g.reloadLocked(); err != nil {
			g.log.Error().Err(err).Msg("reload")
		}
	}
}

// judge says what the turns that may have made a change did: the writing
// tools they called, whether any still runs, and the channel and author of
// the first that wrote. mu must be held.
func judge(turns []*turn) (tools []string, running bool, channel, user string) {
	for _, t := range turns {
		running = running || t.running
		for _, tool := range t.writing {
			if !slices.Contains(tools, tool) {
				tools = append(tools, tool)
			}
		}
		if channel == "" && len(t.writing) > 0 {
			channel, user = t.channel, t.user
		}
	}
	return tools, running, channel, user
}

// applyLocked makes content the applied content of name: an operator's
// edit. A pending hold on the file no longer applies. It reports whether
// the schedule must be reloaded.
func (g *Gate) applyLocked(ctx context.Context, name string, content text) bool {
	g.applied[name] = content
	g.dropHoldLocked(ctx, name, "`"+name+"` was changed again with no agent turn running; that edit applies and this change no longer does.")
	return name != persona.BootFile
}

// dropHoldLocked ends the pending hold on name, if any, because the file's
// applied content changed under it, and says why on its message.
func (g *Gate) dropHoldLocked(ctx context.Context, name, why string) {
	if h := g.holds[name]; h != nil {
		delete(g.holds, name)
		g.saveOrLog()
		g.tellLocked(ctx, h, why)
	}
}

// ErrUndecided is returned by EditAgents while agents.md holds a change
// made during an agent turn that is not judged yet.
var ErrUndecided = errors.New("agents.md has a change made during a running agent turn that is not judged yet: try again once the turn has ended")

// EditAgents changes agents.md on the gateway's own behalf (the cron
// actions, which the operator enables with DISCORD_ACTIONS_CRONS): the
// change is applied, never held, even while agent turns run, and the
// schedule is reloaded before it returns.
//
// It first checks the files as Check does, so an edit already on disk is
// judged (and, if an agent's, held and put back) rather than built upon.
// If agents.md still differs from the applied schedule, a turn that has
// not decided it yet is running, and it fails with ErrUndecided instead of
// applying that unjudged edit along with its own. Otherwise change gets
// the file's content ("" when it is missing) and its result is written
// atomically and recorded as applied and seen, so no check takes it for an
// agent's edit. A hold still pending on agents.md no longer applies and is
// closed. The error is change's, the write's, or the reload's (items the
// scheduler refused; the file is written all the same).
//
// On a worker (Options.Forward set) nothing is written here: the edit is
// handed on, made on the applied agents.md, and the error is the
// hand-on's (ErrStale from the other process when its agents.md differs).
func (g *Gate) EditAgents(ctx context.Context, change func(content string) (string, error)) error {
	g.op.Lock()
	defer g.op.Unlock()
	if g.opts.Forward == nil {
		return g.editAgentsLocked(ctx, change)
	}
	cur, body, err := g.changeAgentsLocked(ctx, change)
	if err != nil {
		return err
	}
	if body == cur.Body && cur.Exists {
		return nil
	}
	fctx, cancel := context.WithTimeout(ctx, forwardWait)
	defer cancel()
	return g.opts.Forward(fctx, Proposal{File: schedule.AgentsFile, Content: body, Base: cur.Body, BaseExists: cur.Exists, Cron: true})
}

// changeAgentsLocked reads agents.md as applied and returns it with what
// change makes of it; ErrUndecided while a change to it waits for a
// decision. op must be held.
func (g *Gate) changeAgentsLocked(ctx context.Context, change func(content string) (string, error)) (cur text, body string, err error) {
	g.checkLocked(ctx, false)
	name := schedule.AgentsFile
	if cur, err = g.readDisk(name); err != nil {
		return cur, "", fmt.Errorf("read %s: %w", name, err)
	}
	if cur != g.applied[name] {
		return cur, "", ErrUndecided
	}
	body, err = change(cur.Body)
	return cur, body, err
}

// editAgentsLocked is EditAgents on the process that fires the schedule,
// with op held.
func (g *Gate) editAgentsLocked(ctx context.Context, change func(content string) (string, error)) error {
	name := schedule.AgentsFile
	cur, body, err := g.changeAgentsLocked(ctx, change)
	if err != nil {
		return err
	}
	nw := text{Body: body, Exists: true}
	if nw == cur {
		return nil
	}
	if err := g.restore(name, nw); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	g.applied[name] = nw
	g.log.Info().Str("file", name).Msg("file changed by a cron action: applying it")
	err = g.reloadLocked()
	g.dropHoldLocked(ctx, name, "`"+name+"` was changed by a cron action since this was posted, so this change no longer applies; ask the agent again if it is still wanted.")
	if err != nil {
		return fmt.Errorf("reload the schedule: %w", err)
	}
	return nil
}

// holdLocked keeps the change of name to content for approval, unless it
// changes nothing the gateway acts on. It reports whether the schedule must
// be reloaded.
func (g *Gate) holdLocked(ctx context.Context, name string, content text, tools []string, channel string) bool {
	before := g.applied[name]
	changes, _ := describe(name, before, content)
	if len(changes) == 0 {
		g.log.Info().Str("file", name).Msg("the agent changed the file but nothing it schedules: applying it")
		return g.applyLocked(ctx, name, content)
	}
	if old := g.holds[name]; old != nil {
		if old.After == content {
			// The same change again: put the file back, keep the message.
			g.restoreOrLog(name, before)
			return false
		}
		g.tellLocked(ctx, old, "Replaced by a newer change to `"+name+"`, posted below.")
	}
	h := &Hold{
		ID:      newID(),
		File:    name,
		Before:  before,
		After:   content,
		Tools:   tools,
		Created: g.clock.Now().UTC(),
	}
	if h.Channel = g.opts.Channel; h.Channel == "" {
		h.Channel = channel
	}
	g.holds[name] = h
	// Kept before the file is put back: a crash in between finds the
	// hold and puts the file back at the next start.
	g.saveOrLog()
	g.restoreOrLog(name, before)
	g.log.Warn().Str("file", name).Strs("tools", tools).Int("changes", len(changes)).
		Msg("schedule change made during an agent turn that could write files: held for approval; the file is put back as it was")
	if h.Channel == "" {
		g.log.Warn().Str("file", name).Msg("no channel to ask for approval: set OUTPUT_CHANNEL_ID. To apply the change yourself, make the edit while no agent turn runs")
	}
	return false
}

// postPendingLocked posts the holds that have a channel and no message
// yet: new ones, and ones Discord could not take before.
func (g *Gate) postPendingLocked(ctx context.Context) {
	if g.asker == nil {
		return
	}
	for _, name := range Files {
		h := g.holds[name]
		if h == nil || h.Message != "" || h.Channel == "" {
			continue
		}
		if now := g.clock.Now(); now.Before(h.retryAt) {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		id, err := g.asker.Ask(pctx, h.Channel, heldMessage(h), buttonID(actionApply, h.ID), buttonID(actionDiscard, h.ID))
		cancel()
		if err != nil {
			h.retryAt = g.clock.Now().Add(30 * time.Second)
			g.log.Warn().Err(err).Str("file", name).Msg("could not post the held schedule change; trying again in 30 s")
			continue
		}
		h.Message = id
		g.saveOrLog()
	}
}

// tellLocked replaces a hold's message (and its buttons) with why it no
// longer applies.
func (g *Gate) tellLocked(ctx context.Context, h *Hold, why string) {
	if h.Message == "" || g.asker == nil {
		return
	}
	ectx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := g.asker.Edit(ectx, h.Channel, h.Message, closedMessage(h, why)); err != nil {
		g.log.Warn().Err(err).Str("file", h.File).Msg("could not update the message of a held schedule change")
	}
}

func (g *Gate) tellVoidedLocked(ctx context.Context) {
	if g.asker == nil {
		return
	}
	for _, v := range g.voided {
		g.tellLocked(ctx, v.hold, v.why)
	}
	g.voided = nil
}

// reloadLocked applies the applied content of the files.
func (g *Gate) reloadLocked() error {
	if g.reloader == nil {
		return nil
	}
	err := g.reloader.ReloadFrom(func(name string) (string, error) {
		t, ok := g.applied[name]
		if !ok || !t.Exists {
			return "", fs.ErrNotExist
		}
		return t.Body, nil
	})
	if g.opts.Reloaded != nil {
		g.opts.Reloaded()
	}
	return err
}

// readDisk reads a guarded file as the scheduler would.
func (g *Gate) readDisk(name string) (text, error) {
	body, err := schedule.ReadFile(g.opts.Dir, name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return text{}, nil
	case err != nil:
		return text{}, err
	}
	return text{Body: body, Exists: true}, nil
}

// restore writes t back as name (removing the file when t is missing),
// keeping the file's mode.
func (g *Gate) restore(name string, t text) error {
	path := filepath.Join(g.opts.Dir, name)
	if !t.Exists {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		g.seen[name] = t
		return nil
	}
	perm := os.FileMode(0o600)
	if fi, err := os.Stat(path); err == nil {
		perm = fi.Mode().Perm()
	}
	if err := atomicfile.Write(path, []byte(t.Body), perm); err != nil {
		return err
	}
	g.seen[name] = t
	return nil
}

func (g *Gate) restoreOrLog(name string, t text) {
	if err := g.restore(name, t); err != nil {
		g.log.Error().Err(err).Str("file", name).Msg("could not put the file back as it was; the schedule still runs from the last applied one")
	}
}

func (g *Gate) saveOrLog() {
	if err := g.saveLocked(); err != nil {
		g.log.Error().Err(err).Msg("could not keep the held schedule changes; they are lost at the next start")
	}
}

// Pending returns the holds waiting for a decision, by file name order.
func (g *Gate) Pending() []Hold {
	g.op.Lock()
	defer g.op.Unlock()
	var hs []Hold
	for _, name := range Files {
		if h := g.holds[name]; h != nil {
			hs = append(hs, *h)
		}
	}
	return hs
}
