package hold

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentgateway/gateway/internal/schedule"
)

// Proposal is a schedule change made on a process that does not fire the
// schedule (a gateway worker, whose schedule files are the operator's,
// mirrored from NATS), handed to the process that does: there it is held
// for the approvers like its own agent's edit, or, made by a cron action,
// applied at once.
type Proposal struct {
	File string `json:"file"`
	// Content is the proposed file; Removed: the agent removed it.
	Content string `json:"content"`
	Removed bool   `json:"removed,omitempty"`
	// Base is the file the change was made on (the proposer's applied
	// content): a cron action's edit applies only on that.
	Base       string `json:"base"`
	BaseExists bool   `json:"base_exists"`
	// Tools are the writing tools the turns that made it called.
	Tools []string `json:"tools,omitempty"`
	// Channel and User are the turn's that made it: Channel is where it
	// is asked about when OUTPUT_CHANNEL_ID is not set.
	Channel string `json:"channel,omitempty"`
	User    string `json:"user,omitempty"`
	// Cron is a cron action's edit (DISCORD_ACTIONS_CRONS): the gateway's
	// own, applied, never held.
	Cron bool `json:"cron,omitempty"`
}

// ErrStale refuses a cron action's edit made on a file that has changed
// since.
var ErrStale = errors.New("agents.md was changed meanwhile: read the jobs again and retry")

func (p Proposal) content() text { return text{Body: p.Content, Exists: !p.Removed} }

// forwardWait bounds a cron action's hand-on: the action waits for it.
const forwardWait = 30 * time.Second

// forwardLocked hands an agent's change of name to Options.Forward and
// puts the file back: this process does not fire the schedule, so nothing
// is held or asked here. The hand-on runs on its own, as it may retry for
// a while; the schedule's process asks the approvers.
func (g *Gate) forwardLocked(ctx context.Context, name string, content text, tools []string, channel, user string) {
	before := g.applied[name]
	g.restoreOrLog(name, before)
	p := Proposal{
		File: name, Content: content.Body, Removed: !content.Exists,
		Base: before.Body, BaseExists: before.Exists,
		Tools: tools, Channel: channel, User: user,
	}
	g.log.Warn().Str("file", name).Strs("tools", tools).
		Msg("schedule change made during an agent turn that could write files: handed to the process that runs the schedule, to be asked about there; the file here is put back as it was")
	forward := g.opts.Forward
	go func() {
		if err := forward(context.WithoutCancel(ctx), p); err != nil {
			g.log.Error().Err(err).Str("file", name).Msg("the schedule change could not be handed to the process that runs the schedule; it is lost")
		}
	}()
}

// Propose takes a change handed on by another process (Options.Forward
// there). An agent's change is judged as this gate judges its own agent's
// edits: nothing to do if it is what applies already, written if it
// changes nothing the gateway acts on, held for approval otherwise. A cron
// action's edit of agents.md is applied as EditAgents would, provided
// agents.md still is what the edit was made on (ErrStale otherwise).
func (g *Gate) Propose(ctx context.Context, p Proposal) error {
	if !knownFile(p.File) {
		return fmt.Errorf("%q is not a schedule file", p.File)
	}
	g.op.Lock()
	defer g.op.Unlock()
	if p.Cron {
		if p.File != schedule.AgentsFile {
			return fmt.Errorf("a cron action changes %s only", schedule.AgentsFile)
		}
		return g.editAgentsLocked(ctx, func(cur string) (string, error) {
			if cur != p.Base {
				return "", ErrStale
			}
			return p.Content, nil
		})
	}
	// What is on disk is judged first, as for an edit made here.
	g.checkLocked(ctx, false)
	name, content := p.File, p.content()
	if content == g.applied[name] {
		return nil
	}
	if changes, _ := describe(name, g.applied[name], content); len(changes) == 0 {
		if err := g.restore(name, content); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
		g.log.Info().Str("file", name).Msg("a worker's agent changed the file but nothing it schedules: applying it")
		if g.applyLocked(ctx, name, content) {
			if err := g.reloadLocked(); err != nil {
				g.log.Error().Err(err).Msg("reload")
			}
		}
		return nil
	}
	g.holdLocked(ctx, name, content, p.Tools, p.Channel)
	g.postPendingLocked(ctx)
	return nil
}

func knownFile(name string) bool {
	for _, f := range Files {
		if f == name {
			return true
		}
	}
	return false
}

// Adopt takes the guarded files among names as they are on disk now, as
// the operator's: on a worker the mirror of the persona bucket writes
// them (the run node's applied files), and that must not be judged as an
// agent's edit, handed on and put back at every turn.
func (g *Gate) Adopt(ctx context.Context, names ...string) {
	g.op.Lock()
	defer g.op.Unlock()
	g.adoptLocked(ctx, names...)
}

// Bring runs write, which replaces files with the operator's (a worker's
// mirror of NATS) and returns their names, and adopts them as Adopt does,
// with no check between the write and the adoption: a check in between
// would take the mirror's write for the last agent turn's.
func (g *Gate) Bring(ctx context.Context, write func() []string) []string {
	g.op.Lock()
	defer g.op.Unlock()
	names := write()
	g.adoptLocked(ctx, names...)
	return names
}

func (g *Gate) adoptLocked(ctx context.Context, names ...string) {
	reload := false
	for _, name := range names {
		if !knownFile(name) {
			continue
		}
		cur, err := g.readDisk(name)
		if err != nil {
			continue // the next check reports it
		}
		g.seen[name] = cur
		delete(g.undecided, name)
		if cur != g.applied[name] {
			g.log.Info().Str("file", name).Msg("file brought from NATS: applying it")
			reload = g.applyLocked(ctx, name, cur) || reload
		}
	}
	if reload {
		if err := g.reloadLocked(); err != nil {
			g.log.Error().Err(err).Msg("reload")
		}
	}
}
