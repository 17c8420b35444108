package discord

import (
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/agentgateway/gateway/internal/queue"
)

// doneMention names the author of a turn that ran longer than
// NotifyAfter, measured on the bot's clock from the turn's start; never
// a scheduled run, nor the answer to its question, nor anyone when
// NotifyAfter is off.
func TestDoneMention(t *testing.T) {
	prompt := queue.Event{ID: 1, Kind: queue.KindMessage, Source: Source, ChannelID: "10", UserID: "42"}
	cron := queue.Event{ID: 1, Kind: queue.KindCron, ChannelID: "10"}
	answer := prompt
	answer.Restricted = true
	tests := []struct {
		name   string
		after  time.Duration
		e      queue.Event
		ran    time.Duration
		want   uint64
		noTurn bool
	}{
		{name: "long prompt", after: 2 * time.Minute, e: prompt, ran: 3 * time.Minute, want: 42},
		{name: "short prompt", after: 2 * time.Minute, e: prompt, ran: time.Minute},
		{name: "exactly the threshold", after: 2 * time.Minute, e: prompt, ran: 2 * time.Minute},
		{name: "off", e: prompt, ran: time.Hour},
		{name: "scheduled run", after: time.Minute, e: cron, ran: time.Hour},
		{name: "answer to a scheduled run's question", after: time.Minute, e: answer, ran: time.Hour},
		{name: "no turn followed", after: time.Minute, e: prompt, ran: time.Hour, noTurn: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := clockwork.NewFakeClock()
			b := &Bot{opts: Options{NotifyAfter: tt.after}, clock: clock, turns: map[uint64]*turn{}}
			if !tt.noTurn {
				b.turns[tt.e.ID] = &turn{e: tt.e, started: clock.Now()}
			}
			clock.Advance(tt.ran)
			if got := uint64(b.doneMention(tt.e)); got != tt.want {
				t.Errorf("doneMention = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestMentioning(t *testing.T) {
	if got := mentioning(42, "Done."); got != "<@42> Done." {
		t.Errorf("mentioning = %q", got)
	}
	if got := mentioning(42, ""); got != "<@42>" {
		t.Errorf("mentioning an empty answer = %q", got)
	}
}
