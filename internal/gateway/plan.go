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

// intake marks the next prompt of an armed channel to run in plan mode on
// its way into the queue.
func (p *planModes) intake(in discord.Intake) discord.Intake {
	if p == nil {
		return in
	}
	if q, ok := in.(fullIntake); ok {
		// The queue's own abilities stay visible to the bot: Submit keeps
		// the intake from waiting on the disk, Keep holds prompts that
		// arrive during a shutdown.
		return planQueueIntake{planIntake{Intake: in, plans: p}, q}
	}
	return planIntake{Intake: in, plans: p}
}

// fullIntake is an intake with the optional abilities the bot looks for
// (queue.Queue).
type fullIntake interface {
	discord.Intake
	discord.Submitter
	discord.Keeper
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

// planIntake is the bot's intake with /plan's marks applied.
type planIntake struct {
	discord.Intake
	plans *planModes
}

// Enqueue marks a prompt from Discord in an armed channel to run in plan
// mode.
func (i planIntake) Enqueue(e queue.Event) (queue.Receipt, error) {
	marked := i.mark(&e)
	rcpt, err := i.Intake.Enqueue(e)
	if err != nil && marked {
		i.plans.rearm(e.ChannelID)
	}
	return rcpt, err
}

// mark sets a prompt from Discord in an armed channel to run in plan mode
// and reports whether it did.
func (i planIntake) mark(e *queue.Event) bool {
	if e.Source == discord.Source && e.Kind == queue.KindMessage && e.PermissionMode == "" && i.plans.take(e.ChannelID) {
		e.PermissionMode = planModeName
		return true
	}
	return false
}

// planQueueIntake is planIntake over the queue itself.
type planQueueIntake struct {
	planIntake
	q fullIntake
}

// Submit marks e as Enqueue does and submits it. A prompt the queue
// refuses after the disk's answer leaves the channel disarmed: its
// author is told it was not taken, and can /plan again.
func (i planQueueIntake) Submit(e queue.Event) (*queue.Pending, error) {
	marked := i.mark(&e)
	p, err := i.q.Submit(e)
	if err != nil && marked {
		i.plans.rearm(e.ChannelID)
	}
	return p, err
}

// Keep marks e as Enqueue does and keeps it for the next start: the
// mark travels with the event.
func (i planQueueIntake) Keep(e queue.Event) (queue.Event, error) {
	marked := i.mark(&e)
	kept, err := i.q.Keep(e)
	if err != nil && marked {
		i.plans.rearm(e.ChannelID)
	}
	return kept, err
}
