package backends

import (
	"context"
)

// claudeProc is kept in a warmPool between its conversation's turns.
func (cp *claudeProc) warmKey() string      { return cp.key }
func (cp *claudeProc) warmSettings() string { return cp.settings }
func (cp *claudeProc) warmSession() string  { return cp.session }
func (cp *claudeProc) warmPgid() int        { return cp.p.Pid() }
func (cp *claudeProc) warmExited() bool     { return cp.exited.Load() }
func (cp *claudeProc) warmClose(why string) { cp.close(why) }
func (cp *claudeProc) warmWait()            { _, _ = cp.p.Wait() }

// Warm reports the processes kept warm now.
func (c *Claude) Warm() WarmStats { return c.pool.stats() }

// Close stops every warm process. Turns running now finish on theirs,
// which are then not kept.
func (c *Claude) Close() error {
	c.pool.close()
	return nil
}

// interactive reports whether req runs on an interactive process: when
// the CLI must be able to ask for approvals, or its process may be kept.
func (c *Claude) interactive(req Request) bool {
	return c.opts.Warm.Interactive && (req.Approve != nil || (req.Key != "" && c.opts.Warm.KeepAlive > 0))
}

// runInteractive runs req on a kept process or a new one, retrying once on
// a fresh process (resuming the session) when the first dies or hangs
// before its result.
func (c *Claude) runInteractive(ctx context.Context, req Request, emit func(Event)) (Result, error) {
	approvals := req.Approve != nil
	bin, err := c.binary()
	if err != nil {
		return Result{}, err
	}
	settings := settingsKey(bin, req, approvals)
	cp := c.pool.take(req.Key, settings, req.SessionID)
	if cp != nil && cp.model != req.Model && !c.setModel(cp, req.Model) {
		c.pool.discard(cp, "model change refused")
		cp = nil
	}
	if cp == nil {
		if cp, err = c.spawn(bin, req, approvals); err != nil {
			return Result{}, err
		}
		c.pool.add(cp)
	}
	warm := cp.turns > 0 // kept from an earlier turn
	started := c.clock().Now()
	out := c.turn(ctx, cp, req, emit)
	if out.retry && ctx.Err() == nil {
		warm = false
		c.pool.discard(cp, "died or hung during a turn")
		if id := firstSession(out.res.SessionID, cp.session, req.SessionID); id != "" {
			req.SessionID = id
		}
		c.opts.Log.Warn().Str("backend", "claude").Err(out.err).Str("session", req.SessionID).
			Int64("after_ms", c.clock().Since(started).Milliseconds()).Msg("claude process failed during a turn; retrying once on a fresh process")
		emit(Event{Kind: EventRetry, Attempt: 1, MaxAttempts: 1,
			Err: &Error{Kind: KindCrashed, Message: "the agent's process stopped responding; retrying on a fresh one"}})
		if cp, err = c.spawn(bin, req, approvals); err != nil {
			return out.res, err
		}
		c.pool.add(cp)
		out = c.turn(ctx, cp, req, emit)
		out.retry = false
	}
	c.pool.release(cp, out.reusable && !cp.modeSwitched)
	out.res.Warm = warm
	if out.err != nil {
		return out.res, out.err
	}
	return out.res, nil
}

func firstSession(ids ...string) string {
	for _, id := range ids {
		if id != "" {
			return id
		}
	}
	return ""
}
