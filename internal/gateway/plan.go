package gateway

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/diamondburned/arikawa/v3/api"
	arikawa "github.com/diamondburned/arikawa/v3/discord"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/discord"
	"github.com/agentgateway/gateway/internal/queue"
)

// commandPlan is the /plan slash command.
const commandPlan = "plan"

// planModeName is claude's permission mode in which the agent only plans
// and asks for the plan's approval (ExitPlanMode) before it changes
// anything.
const planModeName = "plan"

// Texts of /plan.
const (
	planArmed     = "📋 The next prompt in this channel runs in plan mode: the agent plans first, and shows the plan here for approval before it changes anything."
	planQueued    = "📋 Planning: the agent plans first, and shows the plan here for approval before it changes anything."
	planNotQueued = "The prompt could not be queued right now; try again in a moment."
	maxPlanPrompt = 4000
)

// planModes is /plan: a prompt run in plan mode now, or the channel's next
// prompt marked to run in plan mode. Safe for concurrent use.
type planModes struct {
	enqueue func(queue.Event) (queue.Receipt, error)
	log     zerolog.Logger

	mu sync.Mutex // guards armed
	// armed are the channels whose next prompt runs in plan mode.
	armed map[string]bool
}

func newPlanModes(enqueue func(queue.Event) (queue.Receipt, error), log zerolog.Logger) *planModes {
	return &planModes{enqueue: enqueue, log: log, armed: map[string]bool{}}
}

// register installs /plan on the bot.
func (p *planModes) register(bot *discord.Bot) {
	max := maxPlanPrompt
	bot.HandleCommand(api.CreateCommandData{
		Name: commandPlan, Description: "Have the agent plan first and ask before changing anything",
		Options: arikawa.CommandOptions{&arikawa.StringOption{OptionName: "prompt",
			Description: "What to plan; without it, the channel's next prompt is planned", MaxLength: &max}},
	}, p.command)
}

// command answers /plan.
func (p *planModes) command(_ context.Context, cmd discord.Command) discord.CommandAnswer {
	prompt := strings.TrimSpace(cmd.String("prompt"))
	if prompt == "" {
		p.mu.Lock()
		p.armed[cmd.ChannelID] = true
		p.mu.Unlock()
		return discord.CommandAnswer{Text: planArmed}
	}
	e := queue.Event{Kind: queue.KindMessage, Source: discord.Source, ChannelID: cmd.ChannelID, GuildID: cmd.GuildID,
		UserID: cmd.UserID, Text: prompt, PermissionMode: planModeName}
	if _, err := p.enqueue(e); err != nil {
		var full *queue.FullError
		if !errors.As(err, &full) && !errors.Is(err, queue.ErrClosed) {
			p.log.Error().Err(err).Str("channel", cmd.ChannelID).Msg("/plan prompt not queued")
		}
		return discord.CommandAnswer{Text: planNotQueued, Ephemeral: true}
	}
	return discord.CommandAnswer{Text: planQueued + "\n" + quoteLines(prompt, 1500)}
}

// quoteLines shows text as a block quote, at most max characters.
func quoteLines(text string, max int) string {
	if r := []rune(text); len(r) > max {
		text = string(r[:max-1]) + "…"
	}
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		lines[i] = "> " + l
	}
	return strings.Join(lines, "\n")
}

// mark sets a prompt from Discord in an armed channel to run in plan mode
// (discord.Bot.SetPromptMark); its undo arms the channel again for a
// prompt the intake refused.
func (p *planModes) mark(e *queue.Event) (undo func()) {
	if e.Source != discord.Source || e.Kind != queue.KindMessage || e.PermissionMode != "" || !p.take(e.ChannelID) {
		return nil
	}
	e.PermissionMode = planModeName
	channel := e.ChannelID
	return func() { p.rearm(channel) }
}

// take disarms channel, reporting whether it was armed.
func (p *planModes) take(channel string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	armed := p.armed[channel]
	delete(p.armed, channel)
	return armed
}

// rearm arms channel again (its prompt was not queued).
func (p *planModes) rearm(channel string) {
	p.mu.Lock()
	p.armed[channel] = true
	p.mu.Unlock()
}
