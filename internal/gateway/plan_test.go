package gateway

import (
	"testing"

	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/discord"
	"github.com/agentgateway/gateway/internal/queue"
)

// /plan's marks do not hide the queue's abilities from the bot: without
// Submit every message would wait for the disk before the next is read,
// and without Keep a prompt sent during a shutdown would be lost.
func TestPlanIntakeKeepsTheQueuesAbilities(t *testing.T) {
	q := queue.New(queue.Options{}, nil)
	in := newPlanModes(q.Enqueue, zerolog.Nop()).intake(q)
	if _, ok := in.(discord.Submitter); !ok {
		t.Error("the intake with /plan is not a Submitter")
	}
	if _, ok := in.(discord.Keeper); !ok {
		t.Error("the intake with /plan is not a Keeper")
	}
}

// A kept prompt of an armed channel carries the plan mode to the next
// start.
func TestPlanMarkTravelsWithAKeptPrompt(t *testing.T) {
	var journal keptEvents
	q := queue.New(queue.Options{Journal: &journal}, nil)
	p := newPlanModes(q.Enqueue, zerolog.Nop())
	p.rearm("10")
	kept, err := p.intake(q).(discord.Keeper).Keep(queue.Event{Kind: queue.KindMessage, Source: discord.Source, ChannelID: "10", Text: "plan it"})
	if err != nil {
		t.Fatal(err)
	}
	if kept.PermissionMode != planModeName || len(journal) != 1 || journal[0].PermissionMode != planModeName {
		t.Errorf("kept prompt's mode = %q, journalled %+v; want %q", kept.PermissionMode, journal, planModeName)
	}
}

// keptEvents is a journal that keeps what it is given.
type keptEvents []queue.Event

func (k *keptEvents) Append(e queue.Event) error {
	*k = append(*k, e)
	return nil
}
