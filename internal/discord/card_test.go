package discord

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/agent"
)

// heldEdits holds the card's edits (PATCH requests) until released, as a
// slow Discord would.
type heldEdits struct {
	held    chan struct{} // gets one value per held request
	release chan struct{}
}

func newHeldEdits() *heldEdits {
	return &heldEdits{held: make(chan struct{}, 16), release: make(chan struct{})}
}

func (h *heldEdits) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPatch {
		h.held <- struct{}{}
		select {
		case <-h.release:
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

// The answer of a turn whose card (a message of its own) is being edited
// is posted without waiting for the edit: the edit goes on beside it, and
// the card still ends as the turn's receipt.
func TestReplyDoesNotWaitForTheCardsEditInFlight(t *testing.T) {
	edits := newHeldEdits()
	tb := startBot(t, Options{Transport: edits, CardDelay: time.Millisecond, CardEvery: time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	prompt := tb.fd.Post(tb.channel, tb.user, "a prompt")
	e := tb.event(1, tb.channel, prompt.ID)
	finished := tb.Started(ctx, e)
	defer finished()
	if err := tb.fd.WaitUntil(ctx, func() bool { return len(tb.fd.BotMessages(tb.channel)) == 1 }); err != nil {
		t.Fatalf("no card: %v", err)
	}
	card := tb.fd.BotMessages(tb.channel)[0]
	tb.Observe(e, backends.Event{Kind: backends.EventToolUse, Tool: &backends.ToolCall{ID: "t1", Name: "Bash", Input: `{"command":"make"}`}})
	select {
	case <-edits.held:
	case <-ctx.Done():
		t.Fatal("the card was not edited")
	}

	// Under the 5 s a reply used to wait for the card's edit (with room
	// for a loaded machine running the race detector).
	soon, cancelSoon := context.WithTimeout(ctx, 4500*time.Millisecond)
	defer cancelSoon()
	replied := make(chan error, 1)
	go func() { replied <- tb.Reply(ctx, e, "the answer") }()
	answered := func() bool {
		for _, m := range tb.fd.BotMessages(tb.channel) {
			if m.Content == "the answer" {
				return true
			}
		}
		return false
	}
	if err := tb.fd.WaitUntil(soon, answered); err != nil {
		t.Fatalf("the answer waited for the card's edit in flight: %v", err)
	}

	close(edits.release)
	if err := <-replied; err != nil {
		t.Fatal(err)
	}
	tb.Finished(e, agent.Outcome{Reply: "the answer", Result: backends.Result{CostUSD: 0.01}})
	for _, m := range tb.fd.Messages(tb.channel) {
		if m.ID == card.ID && !strings.HasPrefix(m.Content, "✅ Done") {
			t.Errorf("card = %q, want the receipt", m.Content)
		}
	}
}
