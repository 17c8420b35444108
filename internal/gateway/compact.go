package gateway

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/diamondburned/arikawa/v3/api"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/card"
	"github.com/agentgateway/gateway/internal/cost"
	"github.com/agentgateway/gateway/internal/discord"
	"github.com/agentgateway/gateway/internal/files"
	"github.com/agentgateway/gateway/internal/queue"
	"github.com/agentgateway/gateway/internal/session"
)

// commandCompact summarises the channel's conversation so far.
const commandCompact = "compact"

// compacter is a backend that can summarise a session's context on
// request (claude's /compact).
type compacter interface {
	Compact(ctx context.Context, req backends.Request) (backends.Result, error)
}

// sessionKeyer gives the session a person's prompts continue in a channel
// (per user under SESSION_SCOPE=user).
type sessionKeyer interface {
	SessionKeyOf(channel, guild, user string) string
}

// channelPoster posts a message of the gateway's own in a channel.
type channelPoster interface {
	Announce(ctx context.Context, channelID, text string, attached []files.Outgoing) error
}

// compactions are the lanes whose session is being compacted. A turn of
// such a lane waits in admit until the compaction is over: the CLI must
// not run the session twice at once.
type compactions struct {
	mu    sync.Mutex               // guards lanes
	lanes map[string]chan struct{} // closed when the lane's compaction ends
}

// begin marks lane as compacting; ok is false when it is already. end
// must be called once.
func (k *compactions) begin(lane string) (end func(), ok bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, busy := k.lanes[lane]; busy {
		return nil, false
	}
	if k.lanes == nil {
		k.lanes = map[string]chan struct{}{}
	}
	done := make(chan struct{})
	k.lanes[lane] = done
	return func() {
		k.mu.Lock()
		delete(k.lanes, lane)
		k.mu.Unlock()
		close(done)
	}, true
}

// wait blocks while lane is being compacted, or until ctx ends. It
// reports false when ctx ended first.
func (k *compactions) wait(ctx context.Context, lane string) bool {
	k.mu.Lock()
	done := k.lanes[lane]
	k.mu.Unlock()
	if done == nil {
		return true
	}
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}

// compactLane is the lane an event runs in.
func compactLane(e queue.Event) string {
	if e.Lane != "" {
		return e.Lane
	}
	return e.ChannelID
}

// registerCompact installs /compact.
func (c *controls) registerCompact(bot *discord.Bot) {
	bot.HandleCommand(api.CreateCommandData{Name: commandCompact, Description: "Summarise this conversation so far to free room in the agent's context"}, c.compact)
}

// compact answers /compact at once and compacts the session in the
// background, then posts the outcome in the channel. It refuses what
// cannot work: a backend that cannot compact, a channel without a
// session, a prompt running or waiting there, turns run by workers.
func (c *controls) compact(_ context.Context, cmd discord.Command) discord.CommandAnswer {
	refuse := func(text string) discord.CommandAnswer { return discord.CommandAnswer{Ephemeral: true, Text: text} }
	k, ok := c.cli.(compacter)
	switch {
	case !ok:
		return refuse("`/compact` is not supported by this backend (" + c.backend + "): it cannot summarise a conversation on request. `/claude-reset` starts a fresh one instead.")
	case c.nodes != nil:
		return refuse("`/compact` is not available while turns run on `gateway worker` processes: the conversation is on the worker that ran it.")
	}
	key := cmd.ChannelID
	if sk, ok := any(c.bot).(sessionKeyer); ok && c.bot != nil {
		key = sk.SessionKeyOf(cmd.ChannelID, cmd.GuildID, cmd.UserID)
	}
	b, bound, epoch := c.sessions.Current(key)
	switch {
	case !bound:
		return refuse("There is no conversation to compact here yet.")
	case b.Backend != "" && b.Backend != c.backend:
		return refuse("Not compacted: this conversation was made by " + b.Backend + ", and the gateway now runs " + c.backend + ".")
	}
	end, ok := c.compacting.begin(cmd.ChannelID)
	if !ok {
		return refuse("This conversation is being compacted already.")
	}
	// Marked first, checked second: a turn that starts now waits in admit.
	if c.laneBusy(cmd.ChannelID) {
		end()
		return refuse("Not compacted: a prompt is running or waiting in this channel. Try again when it is answered.")
	}
	go c.runCompact(k, cmd.ChannelID, key, cmd.UserID, b, epoch, end)
	return discord.CommandAnswer{Text: "🗜️ Compacting this conversation: the agent summarises it so far. New prompts here wait until it is done."}
}

// laneBusy reports whether a turn runs or waits in the channel's lane.
func (c *controls) laneBusy(channel string) bool {
	if c.queue == nil {
		return false
	}
	_, running, waiting := c.queue.Lane(channel)
	return running || len(waiting) > 0
}

// compactTimeout bounds a compaction when QUERY_TIMEOUT_MS is not set: it
// is one model call over the whole conversation.
const compactTimeout = 10 * time.Minute

// runCompact compacts key's session b, lets the channel's turns go on
// (end), and posts the outcome in channel. A session id the CLI gives
// back is bound in b's place, unless the conversation was reset
// meanwhile.
func (c *controls) runCompact(k compacter, channel, key, user string, b session.Binding, epoch session.Epoch, end func()) {
	timeout := c.cfg.QueryTimeout
	if timeout <= 0 {
		timeout = compactTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	log := c.log.With().Str("channel", channel).Str("session", b.SessionID).Logger()
	started := c.clock.Now()
	res, err := k.Compact(ctx, c.compactRequest(channel, key, b))
	nb, changed := b, false
	if err == nil && res.SessionID != "" && res.SessionID != b.SessionID {
		nb.SessionID, changed = res.SessionID, true
	}
	switch {
	case res.SessionCostUSD > b.SessionCostUSD && res.SessionID == b.SessionID:
		// claude reports the session's running total: the summary's
		// share is counted here, and the binding's total moves on so
		// that the next prompt is not charged for it again.
		res.CostUSD = res.SessionCostUSD - b.SessionCostUSD
		nb.SessionCostUSD, changed = res.SessionCostUSD, true
	case res.SessionCostUSD > 0:
		res.CostUSD = 0 // a total of another session: not known apart from it
	}
	if changed {
		nb.Updated = c.clock.Now()
		if _, serr := c.sessions.SetIn(key, epoch, nb); serr != nil {
			log.Error().Err(serr).Msg("save the compacted session")
		}
	}
	end()
	c.spentOnCompact(channel, user, res, err, c.clock.Since(started))
	text := compactReport(res, err)
	if err != nil {
		log.Warn().Err(err).Msg("compaction failed")
	} else {
		log.Info().Int64("context_tokens", res.ContextTokens).Msg("conversation compacted")
	}
	poster, ok := any(c.bot).(channelPoster)
	if !ok || c.bot == nil {
		return
	}
	if err := poster.Announce(ctx, channel, text, nil); err != nil {
		log.Warn().Err(err).Msg("compaction report not posted")
	}
}

// spentOnCompact records a compaction in the cost ledger as a model call
// of its own (kind compact), whatever its outcome, so /cost and the
// budgets count it.
func (c *controls) spentOnCompact(channel, user string, res backends.Result, err error, took time.Duration) {
	if c.ledger == nil {
		return
	}
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	entry := c.ledgerEntry(channel, user, cost.KindCompact, res, took, outcome)
	if lerr := c.ledger.Record(entry); lerr != nil {
		c.log.Error().Err(lerr).Str("channel", channel).Float64("cost_usd", res.CostUSD).Msg("could not record the compaction in the cost ledger")
	}
}

// compactRequest is the turn that compacts b: with the settings of the
// channel's own turns, so that it runs on the conversation's kept process
// when there is one.
func (c *controls) compactRequest(channel, key string, b session.Binding) backends.Request {
	set := c.sessions.Settings(channel)
	workDir := b.WorkDir
	if workDir == "" {
		workDir = c.channelDir(channel)
	}
	req := backends.Request{
		SessionID:      b.SessionID,
		Key:            key,
		WorkDir:        workDir,
		Model:          firstSet(set.Model, c.cfg.Model),
		AllowedTools:   c.cfg.AllowedTools,
		PermissionMode: c.cfg.PermissionMode,
		MaxTurns:       c.cfg.MaxTurns,
	}
	if filepath.Clean(workDir) != filepath.Clean(c.cfg.ConfigDir) {
		req.AddDirs = []string{c.cfg.ConfigDir}
	}
	if askingMode[c.cfg.PermissionMode] {
		// A prompt's turn can ask; summarising uses no tool, so nothing
		// is ever allowed here.
		req.Approve = func(context.Context, backends.Approval) backends.Verdict {
			return backends.Verdict{Message: "No tools while compacting the conversation."}
		}
	}
	return req
}

// askingMode are the permission modes in which claude asks before a tool.
var askingMode = map[string]bool{"default": true, "acceptEdits": true, "plan": true}

func firstSet(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}

// compactReport is what the channel is told after a compaction.
func compactReport(res backends.Result, err error) string {
	switch {
	case errors.Is(err, backends.ErrNotCompacted):
		return "Not compacted: " + notCompactedReason(err) + " The conversation goes on as it was."
	case err != nil:
		return "Not compacted: the agent's CLI failed (" + string(backends.KindOf(err)) + "). The conversation goes on as it was; the gateway's log says more."
	}
	text := "🗜️ Compacted: the conversation so far is now a summary."
	if pct, ok := backends.ContextPercent(res); ok {
		text += fmt.Sprintf(" Context %d%% (%s tokens).", pct, tokens(res.ContextTokens))
	} else if res.ContextTokens > 0 {
		text += fmt.Sprintf(" Context %s tokens.", tokens(res.ContextTokens))
	}
	if res.CostUSD > 0 {
		about := ""
		if res.CostEstimated {
			about = "about "
		}
		text += " The summary cost " + about + card.Dollars(res.CostUSD) + "."
	}
	return text
}

// notCompactedReason is the CLI's own reason, as one sentence.
func notCompactedReason(err error) string {
	return strings.TrimPrefix(err.Error(), backends.ErrNotCompacted.Error()+": ")
}

// tokens formats a token count for people: 2,566 or 153k.
func tokens(n int64) string {
	switch {
	case n >= 1_000_000:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 10_000:
		return fmt.Sprintf("%dk", (n+500)/1000)
	case n >= 1000:
		return fmt.Sprintf("%d,%03d", n/1000, n%1000)
	}
	return fmt.Sprint(n)
}
