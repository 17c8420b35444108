package gateway

import (
	"testing"

	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/discord"
	"github.com/agentgateway/gateway/internal/queue"
)

// /plan without a prompt marks the channel's next prompt from Discord,
// once; a prompt the intake refused gives the mark back; other channels,
// scheduled events and prompts with a mode of their own are left alone.
func TestPlanMarksTheNextPromptOnce(t *testing.T) {
	p := newPlanModes(nil, zerolog.Nop())
	p.rearm("10")
	prompt := func(channel string) queue.Event {
		return queue.Event{Kind: queue.KindMessage, Source: discord.Source, ChannelID: channel, Text: "plan it"}
	}

	other := prompt("11")
	if p.mark(&other) != nil || other.PermissionMode != "" {
		t.Errorf("a prompt of another channel was marked: %+v", other)
	}
	cron := queue.Event{Kind: queue.KindCron, ChannelID: "10"}
	if p.mark(&cron) != nil || cron.PermissionMode != "" {
		t.Errorf("a cron job was marked: %+v", cron)
	}

	first := prompt("10")
	undo := p.mark(&first)
	if undo == nil || first.PermissionMode != planModeName {
		t.Fatalf("the armed channel's prompt = %+v, want it in plan mode", first)
	}
	second := prompt("10")
	if p.mark(&second) != nil || second.PermissionMode != "" {
		t.Errorf("a second prompt was marked too: %+v", second)
	}

	undo() // the first was refused
	third := prompt("10")
	if p.mark(&third) == nil || third.PermissionMode != planModeName {
		t.Errorf("the prompt after a refused one = %+v, want it in plan mode", third)
	}
}
