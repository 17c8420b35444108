package discord

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/agent"
)

// A CLI retrying the model API is on the card with the attempt and the
// reason, and the line goes once the model answers.
func TestCardShowsRetriesUntilTheModelAnswers(t *testing.T) {
	tb := startBot(t, Options{CardDelay: time.Millisecond, CardEvery: time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	prompt := tb.fd.Post(tb.channel, tb.user, "a prompt")
	e := tb.event(1, tb.channel, prompt.ID)
	finished := tb.Started(ctx, e)
	defer finished()
	card := func() string {
		if ms := tb.fd.BotMessages(tb.channel); len(ms) > 0 {
			return ms[0].Content
		}
		return ""
	}
	const retrying = "🔁 retrying the model API (attempt 2 of 10): no response"
	tb.Observe(e, backends.Event{Kind: backends.EventRetry, Attempt: 1, MaxAttempts: 10, Err: &backends.Error{Kind: backends.KindUnreachable}})
	tb.Observe(e, backends.Event{Kind: backends.EventRetry, Attempt: 2, MaxAttempts: 10, Err: &backends.Error{Kind: backends.KindUnreachable}})
	if err := tb.fd.WaitUntil(ctx, func() bool { return strings.Contains(card(), retrying) }); err != nil {
		t.Fatalf("card = %q, want %q: %v", card(), retrying, err)
	}
	tb.Observe(e, backends.Event{Kind: backends.EventText, Text: "MARK-7f3a9c answer"})
	if err := tb.fd.WaitUntil(ctx, func() bool { return strings.Contains(card(), "MARK-7f3a9c") }); err != nil {
		t.Fatalf("card = %q, want the answer's text: %v", card(), err)
	}
	if strings.Contains(card(), "retrying") {
		t.Errorf("card = %q: still retrying after the model answered", card())
	}
	tb.Finished(e, agent.Outcome{Reply: "answer"})
}
