package discord

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/jonboulle/clockwork"

	"github.com/agentgateway/gateway/internal/actions"
	"github.com/agentgateway/gateway/internal/fakediscord"
)

// confirmResult is what Confirm returned.
type confirmResult struct {
	ok  bool
	err error
}

// confirm asks in the background for what and returns the answer's
// channel and the confirmation once it is posted.
func (tb *testBot) confirm(ctx context.Context, what string) (<-chan confirmResult, fakediscord.Message) {
	tb.t.Helper()
	turn := actions.Turn{GuildID: tb.guild.String(), ChannelID: tb.channel.String(), UserID: tb.user.ID.String()}
	done := make(chan confirmResult, 1)
	go func() {
		ok, err := tb.Confirm(ctx, turn, what)
		done <- confirmResult{ok, err}
	}()
	var ask fakediscord.Message
	tb.fd.Wait(tb.t, "the confirmation", waitLong, func() bool {
		for _, m := range tb.fd.BotMessages(tb.channel) {
			if strings.Contains(m.Content, "**"+what+"**") && len(m.Buttons()) == 2 {
				ask = m
				return true
			}
		}
		return false
	})
	return done, ask
}

func (tb *testBot) result(done <-chan confirmResult) confirmResult {
	tb.t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(waitLong):
		tb.t.Fatal("Confirm did not return")
		return confirmResult{}
	}
}

// A confirmation nobody answers expires after ConfirmTimeout on the bot's
// clock: the action is not done and the message says so, without buttons.
// Answered a second before, it stands.
func TestConfirmExpires(t *testing.T) {
	clock := clockwork.NewFakeClock()
	tb := startBot(t, Options{Clock: clock})

	done, ask := tb.confirm(actionCtx(t), "kick <@1>")
	advance(t, clock, ConfirmTimeout)
	if r := tb.result(done); r.ok || !errors.Is(r.err, ErrConfirmExpired) {
		t.Errorf("Confirm = %v, %v; want false, ErrConfirmExpired", r.ok, r.err)
	}
	tb.fd.Wait(t, "the expired confirmation closed", waitLong, func() bool {
		return len(tb.message(tb.channel, ask.ID).Buttons()) == 0
	})
	if got, want := tb.message(tb.channel, ask.ID).Content, "⌛ Not done: nobody confirmed that the agent may **kick <@1>** within 10 minutes."; got != want {
		t.Errorf("expired confirmation = %q, want %q", got, want)
	}

	done, ask = tb.confirm(actionCtx(t), "kick <@2>")
	advance(t, clock, ConfirmTimeout-time.Second)
	tb.press(tb.channel, ask.ID, tb.user, ask.Buttons()[0].ID, 0)
	if r := tb.result(done); !r.ok || r.err != nil {
		t.Errorf("Confirm answered before the expiry = %v, %v; want true, nil", r.ok, r.err)
	}
}

// A turn that ends while its confirmation waits closes it: the action is
// not done.
func TestConfirmEndsWithTheTurn(t *testing.T) {
	clock := clockwork.NewFakeClock()
	tb := startBot(t, Options{Clock: clock})
	ctx, cancel := context.WithCancel(context.Background())
	done, ask := tb.confirm(ctx, "ban <@1>")
	// Its expiry timer is set once the confirmation is posted.
	wait, stop := context.WithTimeout(context.Background(), waitLong)
	defer stop()
	if err := clock.BlockUntilContext(wait, 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if r := tb.result(done); r.ok || !errors.Is(r.err, context.Canceled) {
		t.Errorf("Confirm = %v, %v; want false, context.Canceled", r.ok, r.err)
	}
	tb.fd.Wait(t, "the confirmation closed", waitLong, func() bool {
		m := tb.message(tb.channel, ask.ID)
		return len(m.Buttons()) == 0 && strings.HasPrefix(m.Content, "Not done: the turn that asked to **ban <@1>** ended")
	})
}

// A confirmation's buttons answer that confirmation only. A Confirm left
// with its buttons by an earlier run of the gateway (which numbered its
// confirmations from 1, as a new run did) and a button with the live
// confirmation's id on another message are both answered, only to the
// presser, that they no longer apply; the live confirmation stays open
// for its own buttons.
func TestConfirmButtonsAreTiedToTheirMessage(t *testing.T) {
	tb := startBot(t, Options{})
	stale := tb.postButtons(tb.channel, []Button{
		{ID: confirmPrefix + "1:yes", Label: "Confirm", Style: ButtonDanger},
		{ID: confirmPrefix + "1:no", Label: "Cancel", Style: ButtonSecondary},
	})
	done, ask := tb.confirm(actionCtx(t), "ban <@1>")
	copied := tb.postButtons(tb.channel, []Button{{ID: ask.Buttons()[0].ID, Label: "Confirm", Style: ButtonDanger}})

	for _, tc := range []struct {
		name   string
		msg    discord.MessageID
		button string
	}{
		{"left by an earlier run", stale, confirmPrefix + "1:yes"},
		{"the live id on another message", copied, ask.Buttons()[0].ID},
	} {
		a := tb.answer(tb.press(tb.channel, tc.msg, tb.user, tc.button, 0))
		if !a.Ephemeral || a.Content != confirmGone {
			t.Errorf("%s: answer = %q (ephemeral %v), want %q only to the presser", tc.name, a.Content, a.Ephemeral, confirmGone)
		}
	}
	select {
	case r := <-done:
		t.Fatalf("a stale button decided the live confirmation: %+v", r)
	default:
	}
	if got := tb.message(tb.channel, ask.ID); len(got.Buttons()) != 2 {
		t.Errorf("the live confirmation lost its buttons: %q", got.Content)
	}
	tb.press(tb.channel, ask.ID, tb.user, ask.Buttons()[1].ID, 0)
	if r := tb.result(done); r.ok || r.err != nil {
		t.Errorf("Confirm after Cancel = %v, %v; want false, nil", r.ok, r.err)
	}
}

// Confirmation ids do not repeat from one run of the gateway to the next:
// two bots' first confirmations have different buttons.
func TestConfirmIDsDifferAcrossRuns(t *testing.T) {
	first := startBot(t, Options{})
	_, a := first.confirm(actionCtx(t), "kick <@1>")
	second := first.restart(Options{})
	_, b := second.confirm(actionCtx(t), "kick <@2>")
	if a.Buttons()[0].ID == b.Buttons()[0].ID {
		t.Errorf("both runs' first confirmation is %q", a.Buttons()[0].ID)
	}
}
