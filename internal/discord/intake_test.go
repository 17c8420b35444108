package discord

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/jonboulle/clockwork"

	"github.com/agentgateway/gateway/internal/fakediscord"
	"github.com/agentgateway/gateway/internal/queue"
)

// A flood of prompts into a full queue gets one busy notice per channel per
// busyNoticeEvery; the other refused prompts are marked with refusedEmoji.
// Every refusal is logged with the queue's depth.
func TestBusyNoticeAtMostOncePerChannelPerInterval(t *testing.T) {
	clock := clockwork.NewFakeClock()
	tb := startBot(t, Options{Clock: clock})
	other := tb.fd.AddChannel(fakediscord.Channel{GuildID: tb.guild, Type: discord.GuildText, Name: "other"})
	tb.intake.setRefuse(&queue.FullError{Depth: 7})

	var flood []discord.Message
	for i := range 5 {
		flood = append(flood, tb.mention(tb.channel, "prompt "+string(rune('a'+i))))
	}
	tb.mention(other, "elsewhere")
	refusals := func() int { return len(tb.logs.lines("prompt refused: the queue is full")) }
	reactions := func(ch discord.ChannelID) int {
		n := 0
		for _, r := range tb.requests("PUT", "/channels/"+ch.String()+"/messages/") {
			if strings.HasSuffix(r.Path, "/reactions/"+refusedEmoji+"/@me") {
				n++
			}
		}
		return n
	}
	tb.fd.Wait(t, "six refusals, four marks, two notices", waitLong, func() bool {
		return refusals() == 6 && reactions(tb.channel) == 4 &&
			len(tb.fd.BotMessages(tb.channel)) == 1 && len(tb.fd.BotMessages(other)) == 1
	})
	notice := tb.fd.BotMessages(tb.channel)[0]
	if notice.Content != "I'm busy: 7 prompts are already waiting. Please try again in a minute." {
		t.Errorf("notice = %q", notice.Content)
	}
	if notice.Reference == nil || notice.Reference.MessageID != flood[0].ID {
		t.Errorf("the notice answers %+v, want the first refused prompt", notice.Reference)
	}
	if n := reactions(other); n != 0 {
		t.Errorf("%d marks in the other channel; its first refusal gets the notice", n)
	}
	for _, line := range tb.logs.lines("prompt refused: the queue is full") {
		var v struct {
			Depth   int  `json:"depth"`
			Channel bool `json:"channel_limit"`
		}
		if err := json.Unmarshal([]byte(line), &v); err != nil || v.Depth != 7 || v.Channel {
			t.Errorf("refusal log lacks the depth: %s", line)
		}
	}

	// After the interval the channel is told again, with the channel's own
	// limit named when that is what refused.
	clock.Advance(busyNoticeEvery)
	tb.intake.setRefuse(&queue.FullError{Depth: 3, Lane: true})
	tb.mention(tb.channel, "later")
	tb.fd.Wait(t, "a second notice", waitLong, func() bool { return len(tb.fd.BotMessages(tb.channel)) == 2 })
	if got := tb.fd.BotMessages(tb.channel)[1].Content; !strings.HasPrefix(got, "This channel already has 3 prompts waiting.") {
		t.Errorf("channel-limit notice = %q", got)
	}
	tb.fd.Wait(t, "the refusal logged", waitLong, func() bool { return refusals() == 7 })
	if n := reactions(tb.channel); n != 4 {
		t.Errorf("%d marks, want still 4", n)
	}
}

// A refused slash command is answered (ephemerally: only its user sees it)
// and logged with the depth.
func TestSlashPromptRefusedByAFullQueueIsLogged(t *testing.T) {
	tb := startBot(t, Options{})
	tb.intake.setRefuse(&queue.FullError{Depth: 4, Lane: true})
	id := tb.fd.Interact(tb.channel, tb.user, "claude", map[string]string{"prompt": "hi"})
	tb.fd.Wait(t, "the refusal", waitLong, func() bool { return len(tb.fd.Callbacks(id)) == 1 })
	for _, a := range tb.fd.Answers() {
		if a.Interaction == id && (!a.Ephemeral || !strings.HasPrefix(a.Content, "This channel already has 4 prompts waiting.")) {
			t.Errorf("answer = %+v, want an ephemeral channel-limit notice", a)
		}
	}
	tb.waitLog("slash prompt refused: the queue is full")
	line := tb.logs.lines("slash prompt refused")[0]
	if !strings.Contains(line, `"depth":4`) || !strings.Contains(line, `"channel_limit":true`) {
		t.Errorf("refusal log = %s, want the depth and which limit", line)
	}
}

// A prompt the journal could not store (a full disk) is answered in words:
// nothing was kept, so its user must send it again.
func TestPromptNotStoredIsToldSo(t *testing.T) {
	tb := startBot(t, Options{})
	tb.intake.setRefuse(fmt.Errorf("journal event: %w", errors.New("write the inbox: no space left on device")))
	m := tb.mention(tb.channel, "remember this")
	tb.fd.Wait(t, "the notice", waitLong, func() bool { return len(tb.fd.BotMessages(tb.channel)) == 1 })
	got := tb.fd.BotMessages(tb.channel)[0]
	if got.Content != notStored || got.Reference == nil || got.Reference.MessageID != m.ID {
		t.Errorf("notice = %q (reply to %v), want %q on the prompt", got.Content, got.Reference, notStored)
	}
	if strings.Contains(got.Content, "no space left") {
		t.Error("the notice shows the error itself")
	}
}
