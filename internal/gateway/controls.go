package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/diamondburned/arikawa/v3/api"
	arikawa "github.com/diamondburned/arikawa/v3/discord"
	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/agent"
	"github.com/agentgateway/gateway/internal/card"
	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/cost"
	"github.com/agentgateway/gateway/internal/discord"
	"github.com/agentgateway/gateway/internal/limit"
	"github.com/agentgateway/gateway/internal/project"
	"github.com/agentgateway/gateway/internal/queue"
	"github.com/agentgateway/gateway/internal/session"
	"github.com/agentgateway/gateway/internal/threads"
)

// Slash commands and buttons of the channel controls.
const (
	commandProject      = "project"
	commandModel        = "model"
	commandSystemPrompt = "system-prompt"
	commandStatus       = "status"
	commandCost         = "cost"

	projectButton = "project:"
	budgetButton  = "budget:"

	// maxChannelPrompt bounds /system-prompt's text.
	maxChannelPrompt = 4000
	// pendingTTL is how long a project change waits for its Keep/Fresh
	// answer.
	pendingTTL = 15 * time.Minute
)

// controls are the per-channel settings (/project, /model,
// /system-prompt), what a channel can see of its work (/status, /cost),
// the cost ledger and the daily budgets.
type controls struct {
	cfg      *config.Config
	sessions *session.Store
	ledger   *cost.Ledger
	budget   cost.Budget
	clock    clockwork.Clock
	log      zerolog.Logger
	backend  string

	// Bound after the core and the bot exist.
	// threads are the threads the gateway opened: their costs count
	// toward their channels.
	threads *threads.Store
	// warm reports the backend's warm processes (claude); nil for others.
	warm func() backends.WarmStats
	// nodes tells what the gateway's processes run, on NATS; nil on one
	// machine.
	nodes *nodeStatus
	bot   *discord.Bot
	queue *queue.Queue
	// cli is the backend, for the sessions it keeps on disk (/resume).
	cli backends.Backend
	// limits holds the login's prompts while a usage limit lasts; nil
	// when nothing does.
	limits *limit.Gate

	mu sync.Mutex // guards the fields below
	// pending are the project changes waiting for Keep or Fresh, by token.
	pending map[string]projectChange
	// resumes are the /resume questions waiting for Confirm, by token.
	resumes map[string]resumeChange
	// announced are the budget refusals already posted with a Lift
	// button, by day and scope.
	announced map[string]bool

	// compacting are the channels whose conversation /compact is
	// summarising: their turns wait (compact.go).
	compacting compactions
}

// projectChange is a /project waiting for its Keep/Fresh answer.
type projectChange struct {
	channel, user string
	// dir is the new project; "" goes back to the default.
	dir     string
	expires time.Time
}

func newControls(cfg *config.Config, sessions *session.Store, ledger *cost.Ledger, backend string, clock clockwork.Clock, log zerolog.Logger) *controls {
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	return &controls{
		cfg: cfg, sessions: sessions, ledger: ledger, backend: backend, clock: clock, log: log,
		budget:    cost.Budget{DailyUSD: cfg.DailyBudgetUSD, ChannelDailyUSD: cfg.ChannelBudgetUSD},
		pending:   map[string]projectChange{},
		resumes:   map[string]resumeChange{},
		announced: map[string]bool{},
	}
}

// register installs the commands and buttons on the bot.
func (c *controls) register(bot *discord.Bot) {
	c.bot = bot
	str := func(name, desc string, max int) *arikawa.StringOption {
		o := &arikawa.StringOption{OptionName: name, Description: desc}
		if max > 0 {
			o.MaxLength = &max
		}
		return o
	}
	completed := func(o *arikawa.StringOption) *arikawa.StringOption {
		o.Autocomplete = true
		return o
	}
	bot.HandleCommand(api.CreateCommandData{
		Name: commandProject, Description: "Show or set the directory the agent works in for this channel",
		Options: arikawa.CommandOptions{completed(str("path", "A directory inside the projects directory, or reset for the default", 500))},
	}, c.project)
	bot.HandleCommand(api.CreateCommandData{
		Name: commandModel, Description: "Set this channel's model; without a name, go back to the default",
		Options: arikawa.CommandOptions{completed(str("name", "The model, e.g. sonnet or claude-opus-4-1", 100))},
	}, c.model)
	resumeID := completed(str("session", "The session's id; the list shows this project's newest", 100))
	resumeID.Required = true
	bot.HandleCommand(api.CreateCommandData{
		Name: commandResume, Description: "Continue here a session started in a terminal on the gateway's machine",
		Options: arikawa.CommandOptions{resumeID},
	}, c.resume)
	bot.HandleAutocomplete(commandProject, c.completeProject)
	bot.HandleAutocomplete(commandModel, c.completeModel)
	bot.HandleAutocomplete(commandResume, c.completeResume)
	bot.HandleButtons(resumeButton, c.resumePress)
	bot.HandleCommand(api.CreateCommandData{
		Name: commandSystemPrompt, Description: "Add instructions to the system prompt in this channel; without text, remove them",
		Options: arikawa.CommandOptions{str("text", "Instructions for the agent in this channel", maxChannelPrompt)},
	}, c.systemPrompt)
	bot.HandleCommand(api.CreateCommandData{Name: commandStatus, Description: "What the agent works on here: project, model, session, queue, cost"}, c.status)
	bot.HandleCommand(api.CreateCommandData{Name: commandCost, Description: "What the agent cost today, this week and this month"}, c.costReport)
	c.registerCompact(bot)
	bot.HandleButtons(projectButton, c.projectPress)
	bot.HandleButtons(budgetButton, c.budgetPress)
}

// showDir names a working directory for users: relative to PROJECTS_ROOT,
// never the server's path.
func (c *controls) showDir(dir string) string {
	if dir == "" {
		return "the gateway's default directory"
	}
	return "`" + project.Show(c.cfg.ProjectsRoot, dir) + "`"
}

func (c *controls) project(_ context.Context, cmd discord.Command) discord.CommandAnswer {
	if c.cfg.ProjectsRoot == "" {
		return discord.CommandAnswer{Ephemeral: true, Text: "Projects are not enabled. The operator can set `PROJECTS_ROOT` to the directory that holds the projects; then `/project path:<name>` makes the agent work in one of them in this channel."}
	}
	cur := c.sessions.Settings(cmd.ChannelID).Project
	path := strings.TrimSpace(cmd.String("path"))
	if path == "" {
		if cur == "" {
			return discord.CommandAnswer{Text: "This channel has no project: the agent works in the gateway's default directory. `/project path:<name>` picks one inside the projects directory."}
		}
		return discord.CommandAnswer{Text: "This channel's project is " + c.showDir(cur) + ". `/project path:reset` goes back to the default."}
	}
	dir := ""
	if path != "reset" {
		var err error
		if dir, err = project.Resolve(c.cfg.ProjectsRoot, path); err != nil {
			c.log.Info().Str("channel", cmd.ChannelID).Err(err).Msg("project refused")
			return discord.CommandAnswer{Ephemeral: true, Text: "Not changed: " + err.Error() + "."}
		}
	}
	if dir == cur {
		return discord.CommandAnswer{Ephemeral: true, Text: "This channel already works in " + c.showDir(cur) + "."}
	}
	if _, hasSession := c.sessions.Get(cmd.ChannelID); !hasSession {
		if err := c.setProject(cmd.ChannelID, dir, false); err != nil {
			return discord.CommandAnswer{Ephemeral: true, Text: err.Error()}
		}
		return discord.CommandAnswer{Text: "This channel now works in " + c.showDir(dir) + "."}
	}
	token := randomToken()
	c.mu.Lock()
	now := c.clock.Now()
	for k, p := range c.pending {
		if now.After(p.expires) {
			delete(c.pending, k)
		}
	}
	c.pending[token] = projectChange{channel: cmd.ChannelID, user: cmd.UserID, dir: dir, expires: now.Add(pendingTTL)}
	c.mu.Unlock()
	return discord.CommandAnswer{
		Text: "Switch this channel to " + c.showDir(dir) + ": keep the conversation so far, or start a fresh one?",
		Buttons: []discord.Button{
			{ID: projectButton + "keep:" + token, Label: "Keep the conversation", Style: discord.ButtonPrimary},
			{ID: projectButton + "fresh:" + token, Label: "Start fresh", Style: discord.ButtonSecondary},
		},
	}
}

func (c *controls) projectPress(_ context.Context, p discord.Press) discord.PressAnswer {
	rest := strings.TrimPrefix(p.ButtonID, projectButton)
	choice, token, _ := strings.Cut(rest, ":")
	c.mu.Lock()
	change, ok := c.pending[token]
	if ok && change.user != p.UserID && !p.ManageGuild {
		c.mu.Unlock()
		return discord.PressAnswer{Notice: "Only the person who asked for this change can answer it."}
	}
	delete(c.pending, token)
	c.mu.Unlock()
	if !ok || c.clock.Now().After(change.expires) || change.channel != p.ChannelID {
		done := "This question has expired or was answered already; nothing changed. Run `/project` again."
		return discord.PressAnswer{Update: &done}
	}
	fresh := choice == "fresh"
	if err := c.setProject(change.channel, change.dir, fresh); err != nil {
		msg := err.Error()
		return discord.PressAnswer{Update: &msg}
	}
	text := "This channel now works in " + c.showDir(change.dir) + ", continuing the conversation."
	if fresh {
		text = "This channel now works in " + c.showDir(change.dir) + "; the next prompt starts a fresh conversation."
	}
	return discord.PressAnswer{Update: &text}
}

// setProject binds the channel to dir ("" for the default), starting a
// fresh conversation if asked. Keeping it works because the runtime
// carries the session to the new directory (agent.SessionMover).
func (c *controls) setProject(channel, dir string, fresh bool) error {
	if _, _, err := c.sessions.UpdateSettings(channel, func(s *session.Settings) { s.Project = dir }); err != nil {
		c.log.Error().Err(err).Str("channel", channel).Msg("save the channel's project")
		return errors.New("Could not save the change: the session file could not be written. Check the gateway's log.")
	}
	if fresh {
		if _, err := c.sessions.Delete(channel); err != nil {
			c.log.Error().Err(err).Str("channel", channel).Msg("start a fresh conversation")
		}
	}
	c.log.Info().Str("channel", channel).Bool("fresh", fresh).Bool("default", dir == "").Msg("channel project changed")
	return nil
}

// validModel accepts the characters model names use; the name is one
// argument of the CLI, and must not pass for a flag.
func validModel(name string) bool {
	if name == "" || len(name) > 100 || strings.HasPrefix(name, "-") {
		return false
	}
	return !strings.ContainsFunc(name, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._:/@-[]", r))
	})
}

func (c *controls) model(_ context.Context, cmd discord.Command) discord.CommandAnswer {
	name := strings.TrimSpace(cmd.String("name"))
	if name != "" && !validModel(name) {
		return discord.CommandAnswer{Ephemeral: true, Text: "Not changed: a model name has letters, digits and . _ : / @ - only, e.g. `sonnet` or `claude-opus-4-1`."}
	}
	if _, _, err := c.sessions.UpdateSettings(cmd.ChannelID, func(s *session.Settings) { s.Model = name }); err != nil {
		c.log.Error().Err(err).Str("channel", cmd.ChannelID).Msg("save the channel's model")
		return discord.CommandAnswer{Ephemeral: true, Text: "Could not save the change: the session file could not be written. Check the gateway's log."}
	}
	if name == "" {
		return discord.CommandAnswer{Text: "This channel uses the default model again (" + c.defaultModel() + ")."}
	}
	return discord.CommandAnswer{Text: "This channel now uses the model `" + name + "` from the next prompt on."}
}

func (c *controls) defaultModel() string {
	if c.cfg.Model != "" {
		return "`" + c.cfg.Model + "`"
	}
	return "the CLI's own default"
}

func (c *controls) systemPrompt(_ context.Context, cmd discord.Command) discord.CommandAnswer {
	text := strings.TrimSpace(cmd.String("text"))
	if len([]rune(text)) > maxChannelPrompt {
		return discord.CommandAnswer{Ephemeral: true, Text: fmt.Sprintf("Not changed: at most %d characters.", maxChannelPrompt)}
	}
	if _, _, err := c.sessions.UpdateSettings(cmd.ChannelID, func(s *session.Settings) { s.SystemPrompt = text }); err != nil {
		c.log.Error().Err(err).Str("channel", cmd.ChannelID).Msg("save the channel's instructions")
		return discord.CommandAnswer{Ephemeral: true, Text: "Could not save the change: the session file could not be written. Check the gateway's log."}
	}
	if text == "" {
		return discord.CommandAnswer{Text: "This channel's own instructions are removed."}
	}
	return discord.CommandAnswer{Text: fmt.Sprintf("This channel's instructions are set (%d characters); the agent sees them from the next prompt on.", len([]rune(text)))}
}

func (c *controls) status(_ context.Context, cmd discord.Command) discord.CommandAnswer {
	set := c.sessions.Settings(cmd.ChannelID)
	var b strings.Builder
	b.WriteString("**Status of this channel**\n")
	proj := "none (the gateway's default directory)"
	if set.Project != "" {
		proj = c.showDir(set.Project)
	}
	fmt.Fprintf(&b, "Project: %s\n", proj)
	model := c.defaultModel() + " (default)"
	if set.Model != "" {
		model = "`" + set.Model + "`"
	}
	fmt.Fprintf(&b, "Model: %s · backend `%s`\n", model, c.backend)
	if set.SystemPrompt != "" {
		fmt.Fprintf(&b, "Channel instructions: %d characters\n", len([]rune(set.SystemPrompt)))
	}
	key := c.sessionKey(cmd.ChannelID, cmd.GuildID, cmd.UserID)
	label := "Session"
	if key != cmd.ChannelID {
		label = "Your session here"
	}
	if bnd, ok := c.sessions.Get(key); ok {
		fmt.Fprintf(&b, "%s: `%s` (last used %s ago)\n", label, shortID(bnd.SessionID), card.Duration(c.clock.Since(bnd.Updated)))
		if run := c.terminalCommand(bnd, cmd.ChannelID); run != "" {
			fmt.Fprintf(&b, "Continue it in a terminal: %s\n", codeSpan(run))
		}
	} else {
		fmt.Fprintf(&b, "%s: none yet; the next prompt starts one\n", label)
	}
	if c.nodes != nil {
		b.WriteString(c.nodes.status(cmd.ChannelID))
	} else if c.queue != nil {
		running, ok, waiting := c.queue.Lane(cmd.ChannelID)
		switch {
		case ok:
			fmt.Fprintf(&b, "Running: a %s for %s", kindName(running), card.Duration(c.clock.Since(running.Time)))
		default:
			b.WriteString("Running: nothing")
		}
		fmt.Fprintf(&b, " · waiting: %d\n", len(waiting))
	}
	if l, ok := c.limits.Current(); ok {
		b.WriteString("⏸️ " + card.LimitStatus(l.ResetAt, c.limits.Left(), c.limits.Waiting()) + "\n")
	}
	if c.warm != nil {
		w := c.warm()
		fmt.Fprintf(&b, "Warm agent processes: %d of %d (%d working), %d MB (their proportional share of memory)\n", w.Processes, c.cfg.WarmCap(), w.Busy, w.PSSBytes>>20)
	}
	if c.ledger != nil {
		gw, ch := c.ledger.Spent(c.clock.Now(), c.budgetChannel(cmd.ChannelID))
		here := "here"
		if c.budgetChannel(cmd.ChannelID) != cmd.ChannelID {
			here = "in this thread's channel and its threads"
		}
		fmt.Fprintf(&b, "Cost today: %s %s, %s for the whole gateway", card.Dollars(ch), here, card.Dollars(gw))
		if v := c.ledger.Check(c.budget, c.clock.Now(), c.budgetChannel(cmd.ChannelID)); v.Level != cost.LevelOK {
			b.WriteString("\n⚠️ " + v.Text())
		}
	}
	return discord.CommandAnswer{Text: b.String()}
}

func kindName(e queue.Event) string {
	if e.Kind == queue.KindMessage {
		return "prompt"
	}
	return string(e.Kind)
}

func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

func (c *controls) costReport(_ context.Context, cmd discord.Command) discord.CommandAnswer {
	if c.ledger == nil {
		return discord.CommandAnswer{Ephemeral: true, Text: "No cost ledger."}
	}
	text := c.ledger.Report(c.clock.Now(), c.budgetChannel(cmd.ChannelID)).Render()
	if c.budget.DailyUSD > 0 || c.budget.ChannelDailyUSD > 0 {
		text += "\n" + budgetLine(c.budget)
	}
	return discord.CommandAnswer{Text: text}
}

func budgetLine(b cost.Budget) string {
	var parts []string
	if b.DailyUSD > 0 {
		parts = append(parts, "gateway "+card.Dollars(b.DailyUSD))
	}
	if b.ChannelDailyUSD > 0 {
		parts = append(parts, "each channel "+card.Dollars(b.ChannelDailyUSD))
	}
	return "-# Daily budgets: " + strings.Join(parts, ", ")
}

// Spent implements agent.CostRecorder: every turn that ran goes in the
// ledger.
func (c *controls) Spent(e queue.Event, out agent.Outcome, took time.Duration) {
	if out.Refused || c.ledger == nil {
		return
	}
	outcome := "ok"
	switch {
	case out.Stopped:
		outcome = "stopped"
	case out.Interrupted:
		outcome = "interrupted"
	case out.Err != nil:
		outcome = "error"
	}
	entry := c.ledgerEntry(e.ChannelID, e.UserID, string(e.Kind), out.Result, took, outcome)
	entry.Name = e.Name
	if err := c.ledger.Record(entry); err != nil {
		c.log.Error().Err(err).Uint64("event", e.ID).Float64("cost_usd", entry.CostUSD).Msg("could not record the turn in the cost ledger")
	}
}

// ledgerEntry is the cost ledger's record of one run of the agent in
// channel ch, counted toward its budget channel (see budgetChannel).
func (c *controls) ledgerEntry(ch, user, kind string, r backends.Result, took time.Duration, outcome string) cost.Entry {
	entry := cost.Entry{
		Time: c.clock.Now(), Channel: c.budgetChannel(ch), User: user, Kind: kind,
		Session: r.SessionID, Backend: c.backend, Model: r.Model,
		InputTokens: r.Usage.InputTokens, OutputTokens: r.Usage.OutputTokens,
		CacheReadTokens: r.Usage.CacheReadTokens, CacheCreationTokens: r.Usage.CacheCreationTokens,
		CostUSD: r.CostUSD, Estimate: r.CostEstimated, Duration: took, Outcome: outcome,
	}
	if entry.Channel != ch {
		entry.Thread = ch
	}
	return entry
}

// budgetChannel is the channel whose budget and costs a turn in ch counts
// toward: a thread the gateway opened counts toward its channel, so a
// channel's budget cannot be stepped around by opening threads.
func (c *controls) budgetChannel(ch string) string {
	if c.threads != nil {
		if t, ok := c.threads.Get(ch); ok {
			return t.Parent
		}
	}
	return ch
}

// warning is the card's budget line for e, when a budget is nearly used.
func (c *controls) warning(e queue.Event) string {
	if c.ledger == nil {
		return ""
	}
	if v := c.ledger.Check(c.budget, c.clock.Now(), c.budgetChannel(e.ChannelID)); v.Level == cost.LevelWarn {
		return v.Text()
	}
	return ""
}

// admit refuses events once a daily budget is used up: a prompt gets a
// reply saying so, and the first refusal of the day (per budget) is posted
// with a button an operator can lift the budget with.
func (c *controls) admit(ctx context.Context, e queue.Event) bool {
	// A shutdown ends the wait: the turn then sees the same context end.
	c.compacting.wait(ctx, compactLane(e))
	if c.ledger == nil || (c.budget.DailyUSD <= 0 && c.budget.ChannelDailyUSD <= 0) {
		return true
	}
	now := c.clock.Now()
	v := c.ledger.Check(c.budget, now, c.budgetChannel(e.ChannelID))
	if v.Level != cost.LevelOver {
		return true
	}
	day := now.Format(time.DateOnly)
	scope := "gateway"
	if v.Channel {
		scope = c.budgetChannel(e.ChannelID)
	}
	c.log.Warn().Uint64("event", e.ID).Str("kind", string(e.Kind)).Str("budget", scope).
		Float64("spent_usd", v.SpentUSD).Float64("limit_usd", v.LimitUSD).Msg("event not run: daily budget used up")
	if e.Kind == queue.KindMessage && c.bot != nil {
		if err := c.bot.Reply(ctx, e, "Not run: "+v.Text()); err != nil {
			c.log.Warn().Err(err).Msg("budget refusal not delivered")
		}
	}
	channel := e.ChannelID
	if channel == "" {
		channel = c.cfg.OutputChannelID
	}
	key := day + "/" + scope
	c.mu.Lock()
	first := !c.announced[key]
	c.announced[key] = true
	c.mu.Unlock()
	if first && channel != "" && c.bot != nil {
		text := v.Text() + "\nAn operator can lift it for the rest of today."
		id := budgetButton + "lift:" + day + ":" + scope
		if _, err := c.bot.PostButtons(ctx, channel, text, []discord.Button{{ID: id, Label: "Lift for today", Style: discord.ButtonDanger}}); err != nil {
			c.log.Warn().Err(err).Msg("budget notice not posted")
		}
	}
	return false
}

// budgetPress lifts a budget for its day: approvers only (APPROVER_IDS,
// else ALLOWED_USER_IDS, else members who can manage the server).
func (c *controls) budgetPress(_ context.Context, p discord.Press) discord.PressAnswer {
	rest := strings.TrimPrefix(p.ButtonID, budgetButton+"lift:")
	day, scope, ok := strings.Cut(rest, ":")
	if !ok {
		return discord.PressAnswer{}
	}
	if !c.approver(p) {
		return discord.PressAnswer{Notice: "Only the gateway's approvers can lift a budget (APPROVER_IDS and APPROVER_ROLE_IDS; without them, ALLOWED_USER_IDS and ALLOWED_ROLE_IDS, or members who can manage this server)."}
	}
	now := c.clock.Now()
	if now.Format(time.DateOnly) != day {
		done := "This budget was for " + day + "; it has reset since."
		return discord.PressAnswer{Update: &done}
	}
	channel := ""
	if scope != "gateway" {
		channel = scope
	}
	if err := c.ledger.Lift(now, channel, p.UserID); err != nil {
		c.log.Error().Err(err).Msg("record the lifted budget")
	}
	c.log.Info().Str("budget", scope).Str("by", p.UserID).Msg("daily budget lifted for today")
	text := "Budget lifted for the rest of today by an operator; prompts run again."
	return discord.PressAnswer{Update: &text}
}

func (c *controls) approver(p discord.Press) bool { return isApprover(c.cfg, p) }

// sessionKey is the session binding user's prompts continue in channel:
// the channel's, or with SESSION_SCOPE=user their own there.
func (c *controls) sessionKey(channel, guild, user string) string {
	if c.bot == nil {
		return channel
	}
	return c.bot.SessionKeyOf(channel, guild, user)
}

// isApprover reports whether the presser is one of the gateway's
// approvers: APPROVER_IDS or a member of APPROVER_ROLE_IDS; without
// either, ALLOWED_USER_IDS or a member of ALLOWED_ROLE_IDS; without any,
// members who can manage the server.
func isApprover(cfg *config.Config, p discord.Press) bool {
	switch {
	case len(cfg.ApproverIDs) > 0 || len(cfg.ApproverRoleIDs) > 0:
		return slices.Contains(cfg.ApproverIDs, p.UserID) || holdsAny(p.Roles, cfg.ApproverRoleIDs)
	case len(cfg.AllowedUserIDs) > 0 || len(cfg.AllowedRoleIDs) > 0:
		return slices.Contains(cfg.AllowedUserIDs, p.UserID) || holdsAny(p.Roles, cfg.AllowedRoleIDs)
	}
	return p.ManageGuild
}

// holdsAny reports whether any of a member's roles is listed.
func holdsAny(roles, listed []string) bool {
	return slices.ContainsFunc(roles, func(r string) bool { return slices.Contains(listed, r) })
}

func randomToken() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
