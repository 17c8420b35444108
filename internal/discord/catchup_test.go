package discord

import (
	"fmt"
	"testing"
)

// When more than a page was missed, the catch-up takes the newest
// messages (up to catchUpLimit), not the oldest.
func TestMissedTakesTheNewestWhenManyWereMissed(t *testing.T) {
	tb := startBot(t, Options{})
	known := tb.fd.Post(tb.channel, tb.user, "the last message the bot saw")
	var last string
	for i := range catchUpLimit + 120 {
		last = tb.fd.Post(tb.channel, tb.user, fmt.Sprint("missed ", i)).Content
	}
	msgs, err := tb.missed(tb.client(tb.ctx), tb.channel, known.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != catchUpLimit {
		t.Fatalf("%d messages taken, want %d", len(msgs), catchUpLimit)
	}
	if msgs[0].Content != last {
		t.Errorf("newest taken = %q, want %q", msgs[0].Content, last)
	}
	for _, m := range msgs {
		if m.ID <= known.ID {
			t.Fatalf("a message the bot saw before was taken again: %q", m.Content)
		}
	}

	// A few missed: one page, all of them.
	few := tb.fd.Post(tb.channel, tb.user, "seen")
	tb.fd.Post(tb.channel, tb.user, "one")
	tb.fd.Post(tb.channel, tb.user, "two")
	msgs, err = tb.missed(tb.client(tb.ctx), tb.channel, few.ID)
	if err != nil || len(msgs) != 2 {
		t.Fatalf("few missed: %d messages, %v; want 2", len(msgs), err)
	}
}
