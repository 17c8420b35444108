package admin

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// receive takes n events from c, failing after a deadline.
func receive(t *testing.T, c <-chan Event, n int) []Event {
	t.Helper()
	var got []Event
	deadline := time.After(10 * time.Second)
	for len(got) < n {
		select {
		case e, ok := <-c:
			if !ok {
				t.Fatalf("channel closed after %d events, want %d", len(got), n)
			}
			got = append(got, e)
		case <-deadline:
			t.Fatalf("got %d events, want %d", len(got), n)
		}
	}
	return got
}

func types(events []Event) []EventType {
	var out []EventType
	for _, e := range events {
		out = append(out, e.Type)
	}
	return out
}

func TestHubDeliversInOrderToEverySubscriber(t *testing.T) {
	h := NewHub(8, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, b := h.Subscribe(ctx), h.Subscribe(ctx)
	if h.Subscribers() != 2 {
		t.Fatalf("Subscribers() = %d, want 2", h.Subscribers())
	}
	for i := range 3 {
		h.Publish(Event{Type: ToolUsed, EventID: uint64(i + 1)})
	}
	for _, c := range []<-chan Event{a, b} {
		got := receive(t, c, 3)
		for i, e := range got {
			if e.EventID != uint64(i+1) || e.Time.IsZero() {
				t.Errorf("event %d = %+v, want id %d with a time", i, e, i+1)
			}
		}
	}
}

func TestSlowSubscriberGetsResyncNotABlockedHub(t *testing.T) {
	h := NewHub(4, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	slow := h.Subscribe(ctx)
	// Nobody reads: publishing more than the buffer must not block.
	for i := range 10 {
		h.Publish(Event{Type: ToolUsed, EventID: uint64(i + 1)})
	}
	got := receive(t, slow, 4)
	if diff := cmp.Diff([]uint64{1, 2, 3, 4}, ids(got)); diff != "" {
		t.Errorf("buffered events (-want +got):\n%s", diff)
	}
	// The next event comes after a Resync that says some were lost.
	h.Publish(Event{Type: ToolUsed, EventID: 11})
	got = receive(t, slow, 2)
	if diff := cmp.Diff([]EventType{Resync, ToolUsed}, types(got)); diff != "" || got[1].EventID != 11 {
		t.Errorf("after the loss (-want +got):\n%s%+v", diff, got)
	}
	// Caught up: no more Resync.
	h.Publish(Event{Type: ToolUsed, EventID: 12})
	if got := receive(t, slow, 1); got[0].Type != ToolUsed || got[0].EventID != 12 {
		t.Errorf("then %+v, want event 12", got[0])
	}
}

func ids(events []Event) []uint64 {
	var out []uint64
	for _, e := range events {
		out = append(out, e.EventID)
	}
	return out
}

func TestSubscriptionEndsWithItsContext(t *testing.T) {
	h := NewHub(4, 1)
	ctx, cancel := context.WithCancel(context.Background())
	c := h.Subscribe(ctx)
	// At the limit, another subscriber gets a closed channel.
	if _, ok := <-h.Subscribe(context.Background()); ok {
		t.Fatal("a subscriber beyond the limit got an open channel")
	}
	cancel()
	select {
	case _, ok := <-c:
		if ok {
			t.Fatal("an event after the context ended")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the channel was not closed when the context ended")
	}
	if h.Subscribers() != 0 {
		t.Errorf("Subscribers() = %d after the only one left", h.Subscribers())
	}
	h.Publish(Event{Type: ToolUsed}) // nobody listens: nothing happens
}

func TestExcerpt(t *testing.T) {
	tests := []struct{ in, want string }{
		{"hello  world\n\tagain", "hello world again"},
		{"ping @everyone and <@123> in <#456> or @here", "ping @\u200beveryone and <\u200b@123> in <\u200b#456> or @\u200bhere"},
		{"<@&789> role", "<\u200b@&789> role"},
	}
	for _, tt := range tests {
		if got := excerpt(tt.in); got != tt.want {
			t.Errorf("excerpt(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	long := excerpt(strings.Repeat("@everyone ", 50))
	if n := utf8.RuneCountInString(long); n != PromptExcerpt || !strings.HasSuffix(long, "…") {
		t.Errorf("a long prompt gave %d runes: %q", n, long)
	}
	if strings.Contains(long, "@everyone") {
		t.Errorf("a mention survived the cut: %q", long)
	}
}
