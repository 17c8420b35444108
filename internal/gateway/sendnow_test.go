package gateway

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/diamondburned/arikawa/v3/discord"

	"github.com/agentgateway/gateway/internal/config"
)

// A prompt waiting behind a hung turn is offered Send now (⏩ next to ⏳):
// a stranger's ⏩ changes nothing; its author's stops the running turn and
// runs the prompt next, ahead of one sent before it.
func TestSendNowRunsAWaitingPromptNext(t *testing.T) {
	claude, logs := newCardClaude(t)
	h := startGateway(t, harnessOptions{backend: claude, cardEvery: 50 * time.Millisecond,
		env: map[string]string{config.EnvTurnCard: config.TurnCardReceipt}})
	hung := h.mention(h.channel, "LOG:"+logs+" hang please")
	h.fd.Wait(t, "the hung CLI", waitLong, func() bool { _, err := os.Stat(filepath.Join(logs, "pid")); return err == nil })
	first := h.mention(h.channel, "LOG:"+logs+" first in line")
	urgent := h.mention(h.channel, "LOG:"+logs+" urgent")
	h.fd.Wait(t, "the Send now offers", waitLong, func() bool {
		return len(h.fd.Reactions(h.channel, urgent.ID)["⏩"]) == 1 && len(h.fd.Reactions(h.channel, first.ID)["⏩"]) == 1
	})

	h.fd.React(h.channel, urgent.ID, stranger(h), "⏩")
	h.fd.React(h.channel, urgent.ID, h.user, "⏩")
	h.fd.Wait(t, "the hung turn stopped", waitLong, func() bool {
		card, ok := h.card(h.channel, hung.ID)
		m, _ := h.fd.Message(h.channel, card.ID)
		return ok && strings.HasPrefix(m.Content, "🛑 Stopped")
	})
	// answered returns the id of the answer to prompt (a reply that is not
	// its card), zero while there is none.
	answered := func(prompt discord.MessageID) discord.MessageID {
		card, _ := h.card(h.channel, prompt)
		for _, m := range h.fd.BotMessages(h.channel) {
			if m.Reference != nil && m.Reference.MessageID == prompt && m.ID != card.ID && !strings.HasPrefix(m.Content, "⏳") {
				return m.ID
			}
		}
		return 0
	}
	h.fd.Wait(t, "both answers", waitLong, func() bool { return answered(urgent.ID) != 0 && answered(first.ID) != 0 })
	if answered(urgent.ID) > answered(first.ID) {
		t.Errorf("the prompt sent first was answered before the one sent now")
	}
	// The offers are gone once the prompts ran.
	h.fd.Wait(t, "the waiting marks removed", waitLong, func() bool {
		r := h.fd.Reactions(h.channel, urgent.ID)
		return !slices.Contains(r["⏩"], h.fd.Bot.ID) && !slices.Contains(r["⏳"], h.fd.Bot.ID)
	})
	if !strings.Contains(h.logs.String(), "Send now refused") {
		t.Error("the stranger's ⏩ was not refused")
	}
}
