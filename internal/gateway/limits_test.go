package gateway

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/jonboulle/clockwork"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/fakediscord"
	"github.com/agentgateway/gateway/internal/limit"
)

// limitStart is the fake clock's time when the limit is met; the limit
// resets 1h 12m later.
var limitStart = time.Date(2026, 11, 27, 13, 48, 0, 0, time.UTC)

const limitWait = 72 * time.Minute

// limitedLogin stands in for a CLI on a subscription login that has
// reached its usage limit: until the fake clock passes the reset, every
// run fails as claude reports it (a rate_limit_error with the reset
// time); then it answers.
type limitedLogin struct {
	clock clockwork.Clock
	reset time.Time
	// noTime leaves the reset time out, as claude does with an API key.
	noTime bool

	mu      sync.Mutex // guards refused
	refused []string
}

func (l *limitedLogin) respond(_ context.Context, req backends.Request, _ func(backends.Event)) (backends.Result, error) {
	if l.clock.Now().Before(l.reset) {
		l.mu.Lock()
		l.refused = append(l.refused, req.Prompt)
		l.mu.Unlock()
		e := &backends.Error{Kind: backends.KindRateLimit, Status: 429, Message: "You've hit your 5-hour limit · resets 3pm (UTC)"}
		if !l.noTime {
			e.ResetAt, e.LimitWindow = l.reset, "five_hour"
		}
		return backends.Result{}, e
	}
	return backends.Result{Text: "answered: " + req.Prompt}, nil
}

func (l *limitedLogin) refusals() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.refused)
}

func startLimited(t *testing.T, login *limitedLogin, o harnessOptions) *harness {
	t.Helper()
	o.respond, o.clock = login.respond, login.clock
	o.env = withEnv(o.env, config.EnvTurnCard, config.TurnCardReceipt)
	h := startGateway(t, o)
	t.Cleanup(func() {
		if t.Failed() {
			h.dumpMessages(h.channel)
			for _, l := range strings.Split(h.logs.String(), "\n") {
				if strings.Contains(l, "limit") || strings.Contains(l, "event") {
					t.Log(l)
				}
			}
		}
	})
	return h
}

// isCard tells a turn card (or its receipt) from an answer by its first
// sign.
func isCard(text string) bool {
	for _, sign := range []string{"⏸️", "⏳", "✅", "❌", "🛑", "⏹️"} {
		if strings.HasPrefix(text, sign) {
			return true
		}
	}
	return false
}

// waitAnswerBesideCard waits for the bot's reply to prompt that is not
// its card, and returns it.
func (h *harness) waitAnswerBesideCard(ch discord.ChannelID, prompt discord.MessageID) fakediscord.Message {
	h.t.Helper()
	var answer fakediscord.Message
	h.fd.Wait(h.t, "the answer to "+prompt.String(), waitLong, func() bool {
		for _, m := range h.fd.BotMessages(ch) {
			if m.Reference != nil && m.Reference.MessageID == prompt && !isCard(m.Content) {
				answer = m
				return true
			}
		}
		return false
	})
	return answer
}

// waitCard waits until the card replying to prompt says want, and returns it.
func (h *harness) waitCard(ch discord.ChannelID, prompt discord.MessageID, want string) fakediscord.Message {
	h.t.Helper()
	var card fakediscord.Message
	h.fd.Wait(h.t, "a card saying "+want, waitLong, func() bool {
		m, ok := h.card(ch, prompt)
		if !ok {
			return false
		}
		card, _ = h.fd.Message(ch, m.ID)
		return strings.Contains(card.Content, want)
	})
	return card
}

// A prompt refused for a usage limit with a reset time waits: its card
// says until when, with a Cancel button; a prompt of another channel
// waits behind the same limit instead of failing; /status shows it; at
// the reset both run by themselves and are answered.
func TestUsageLimitWaitsAndResumesByItself(t *testing.T) {
	clock := clockwork.NewFakeClockAt(limitStart)
	login := &limitedLogin{clock: clock, reset: limitStart.Add(limitWait)}
	h := startLimited(t, login, harnessOptions{})
	other := h.fd.AddChannel(fakediscord.Channel{GuildID: h.guild, Name: "other", Type: discord.GuildText})

	first := h.mention(h.channel, "summarise the plan")
	card := h.waitCard(h.channel, first.ID, "Usage limit reached")
	if !strings.Contains(card.Content, "(<t:1795791600:R>)") || !strings.Contains(card.Content, "<t:1795791600:t>") {
		t.Errorf("card = %q, want the reset time and how long until it", card.Content)
	}
	if b := card.Buttons(); len(b) != 1 || b[0].Label != "Cancel" {
		t.Errorf("buttons = %+v, want Cancel alone", b)
	}

	second := h.mention(other, "and the budget")
	h.waitCard(other, second.ID, "Waiting behind the usage limit")
	if n := login.refusals(); n != 1 {
		t.Errorf("the CLI was run %d times during the limit, want 1: the second prompt waits before it runs", n)
	}
	status := h.command(h.channel, "status")
	if !strings.Contains(status.Content, "Usage limit reached; resumes at <t:1795791600:t> (in 1h 12m); 2 prompts wait for it") {
		t.Errorf("/status = %q", status.Content)
	}
	for _, m := range h.fd.BotMessages(h.channel) {
		if strings.Contains(m.Content, "could not answer") {
			t.Fatalf("a failure was posted during the wait: %q", m.Content)
		}
	}

	clock.Advance(limitWait)
	for _, p := range []struct {
		ch     discord.ChannelID
		prompt discord.Message
	}{{h.channel, first}, {other, second}} {
		answer := h.waitAnswerBesideCard(p.ch, p.prompt.ID)
		if !strings.Contains(answer.Content, "answered:") {
			t.Errorf("answer = %q", answer.Content)
		}
	}
	h.waitCard(h.channel, first.ID, "✅ Done")
}

// Cancel on a waiting card ends the prompt with a clear line and without
// running it again; its author or an approver may press it, nobody else.
func TestUsageLimitWaitCancelled(t *testing.T) {
	clock := clockwork.NewFakeClockAt(limitStart)
	login := &limitedLogin{clock: clock, reset: limitStart.Add(limitWait)}
	var approver discord.User
	h := startLimited(t, login, harnessOptions{setup: func(h *harness) map[string]string {
		approver = h.fd.User("dana")
		h.fd.AddMember(h.guild, approver)
		return map[string]string{config.EnvApproverIDs: approver.ID.String()}
	}})
	prompt := h.mention(h.channel, "summarise the plan")
	card := h.waitCard(h.channel, prompt.ID, "Usage limit reached")

	stranger := h.fd.User("mallory")
	h.fd.AddMember(h.guild, stranger)
	h.fd.Press(card.ChannelID, card.ID, stranger, button(t, card, "Cancel"), 0)
	h.fd.Wait(t, "the stranger told it is not theirs", waitLong, func() bool {
		for _, a := range h.fd.Answers() {
			if a.Ephemeral && strings.Contains(a.Content, "Only the person who asked") {
				return true
			}
		}
		return false
	})
	h.fd.Press(card.ChannelID, card.ID, approver, button(t, card, "Cancel"), 0)
	final := h.waitCard(h.channel, prompt.ID, "Cancelled while waiting for the usage limit")
	if !strings.Contains(h.logs.String(), `"by":"`+approver.ID.String()+`"`) {
		t.Error("the approver's press is not what stopped it")
	}
	if len(final.Buttons()) != 0 {
		t.Errorf("the cancelled card keeps buttons: %+v", final.Buttons())
	}
	clock.Advance(limitWait)
	// A later prompt runs (the limit is over) and is the only other run.
	next := h.mention(h.channel, "next")
	h.waitAnswerBesideCard(h.channel, next.ID)
	if runs := len(h.backend.Requests()); runs != 0 {
		// The in-process Fake records only when Respond is unset; the
		// login counts the runs instead.
		t.Logf("fake recorded %d runs", runs)
	}
	if n := login.refusals(); n != 1 {
		t.Errorf("the CLI was refused %d times, want 1 (the cancelled prompt did not run again)", n)
	}
	for _, a := range h.fd.BotMessages(h.channel) {
		if strings.Contains(a.Content, "answered: summarise the plan") {
			t.Errorf("the cancelled prompt was answered: %q", a.Content)
		}
	}
}

// Without a reset time the failure stands, and says the prompt was not kept.
func TestUsageLimitWithoutResetTimeFails(t *testing.T) {
	clock := clockwork.NewFakeClockAt(limitStart)
	login := &limitedLogin{clock: clock, reset: limitStart.Add(limitWait), noTime: true}
	h := startLimited(t, login, harnessOptions{})
	prompt := h.mention(h.channel, "summarise the plan")
	answer := h.waitAnswerBesideCard(h.channel, prompt.ID)
	if !strings.Contains(answer.Content, "rate_limit_error") || !strings.Contains(answer.Content, limit.NoResetNote) {
		t.Errorf("answer = %q", answer.Content)
	}
}

// A gateway restarted during the wait runs the prompt again: it meets the
// limit again and waits again, and is answered after the reset.
func TestUsageLimitWaitSurvivesRestart(t *testing.T) {
	clock := clockwork.NewFakeClockAt(limitStart)
	login := &limitedLogin{clock: clock, reset: limitStart.Add(limitWait)}
	first := startLimited(t, login, harnessOptions{})
	prompt := first.mention(first.channel, "summarise the plan")
	first.waitCard(first.channel, prompt.ID, "Usage limit reached")
	// The drain does not wait for the reset (the harness allows it 20 s,
	// the reset is 72 minutes away).
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	first.waitCard(first.channel, prompt.ID, "Interrupted")

	second := startLimited(t, login, harnessOptions{fd: first.fd, configDir: first.cfg.ConfigDir})
	second.guild, second.channel, second.user = first.guild, first.channel, first.user
	second.fd.Wait(t, "the prompt refused again after the restart", waitLong, func() bool { return login.refusals() >= 2 })
	// The rerun's card is the first one (Discord hands the message back for
	// the card's nonce); its next frame goes out a card interval later.
	second.fd.Wait(t, "a card of the rerun saying it waits", waitLong, func() bool {
		clock.Advance(time.Second)
		for _, m := range second.fd.BotMessages(second.channel) {
			if strings.Contains(m.Content, "Usage limit reached") {
				return true
			}
		}
		return false
	})
	clock.Advance(limitWait)
	second.fd.Wait(t, "the answer after the reset", waitLong, func() bool {
		for _, m := range second.fd.BotMessages(second.channel) {
			if m.Reference != nil && m.Reference.MessageID == prompt.ID && m.Content == "answered: summarise the plan" {
				return true
			}
		}
		return false
	})
}

// dumpMessages logs what the bot posted in ch, for a failing test.
func (h *harness) dumpMessages(ch discord.ChannelID) {
	for _, m := range h.fd.BotMessages(ch) {
		ref := ""
		if m.Reference != nil {
			ref = m.Reference.MessageID.String()
		}
		h.t.Logf("bot message %s (reply to %s): %q buttons %v", m.ID, ref, m.Content, m.Buttons())
	}
}
