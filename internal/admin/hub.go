package admin

import (
	"context"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// EventType says what a hub Event reports.
type EventType string

// The hub's event types.
const (
	// TurnStarted: an event's turn began (its first CLI run).
	TurnStarted EventType = "turn_started"
	// ToolUsed: a running turn called a tool.
	ToolUsed EventType = "tool"
	// TurnFinished: an event left the queue after it ran (or was refused
	// by a budget), with its outcome.
	TurnFinished EventType = "turn_finished"
	// QueueChanged: the events waiting per lane, after a change.
	QueueChanged EventType = "queue"
	// Resync: the subscriber was too slow and missed events; it should
	// read the whole state afresh.
	Resync EventType = "resync"
)

// PromptExcerpt is the most runes of a prompt an Event carries.
const PromptExcerpt = 120

// Event is one change the gateway publishes for the dashboard. Which
// fields are set follows Type.
type Event struct {
	Type EventType `json:"type"`
	Time time.Time `json:"time"`

	// EventID is the queue event of a turn or a tool.
	EventID uint64 `json:"event_id,omitempty"`
	// Channel, Kind and Name describe the event (TurnStarted,
	// TurnFinished).
	Channel string `json:"channel,omitempty"`
	Kind    string `json:"kind,omitempty"`
	Name    string `json:"name,omitempty"`
	// Prompt is the start of the prompt, at most PromptExcerpt runes on
	// one line, mentions defused (TurnStarted).
	Prompt  string `json:"prompt,omitempty"`
	Backend string `json:"backend,omitempty"`
	Model   string `json:"model,omitempty"`
	// Tool is the tool's name and Summary what it works on: the command,
	// the path (ToolUsed).
	Tool    string `json:"tool,omitempty"`
	Summary string `json:"summary,omitempty"`
	// Outcome is ok, error, stopped, interrupted or refused; Duration
	// and CostUSD are the turn's (TurnFinished).
	Outcome  string        `json:"outcome,omitempty"`
	Duration time.Duration `json:"duration_ns,omitempty"`
	CostUSD  float64       `json:"cost_usd,omitempty"`
	// Lanes are the lanes with events waiting (QueueChanged).
	Lanes []Lane `json:"lanes,omitempty"`
}

// Lane is one lane of the queue with events waiting.
type Lane struct {
	Lane    string    `json:"lane"`
	Waiting int       `json:"waiting"`
	Oldest  time.Time `json:"oldest"`
}

// Hub hands the gateway's events to subscribers (the dashboard's
// streams). Publish never blocks: each subscriber has a bounded buffer,
// and one that falls behind loses events and then gets a Resync event
// before the next it receives. It is safe for concurrent use.
type Hub struct {
	buffer, max int

	mu   sync.Mutex // guards subs and the subscribers' fields
	subs map[*subscriber]struct{}
}

type subscriber struct {
	ch chan Event
	// lost is set when an event was dropped: Resync goes first.
	lost bool
}

// Defaults for NewHub.
const (
	DefaultHubBuffer      = 256
	DefaultHubSubscribers = 32
)

// NewHub returns a hub whose subscribers each buffer up to buffer events;
// at most max subscribe at once. Zero values take the defaults.
func NewHub(buffer, max int) *Hub {
	if buffer < 2 {
		buffer = DefaultHubBuffer
	}
	if max <= 0 {
		max = DefaultHubSubscribers
	}
	return &Hub{buffer: buffer, max: max, subs: map[*subscriber]struct{}{}}
}

// Subscribe returns the events published from now until ctx ends, when
// the channel is closed. With the most subscribers already, the channel
// is closed at once.
func (h *Hub) Subscribe(ctx context.Context) <-chan Event {
	s := &subscriber{ch: make(chan Event, h.buffer)}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.subs) >= h.max || ctx.Err() != nil {
		close(s.ch)
		return s.ch
	}
	h.subs[s] = struct{}{}
	context.AfterFunc(ctx, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.subs, s)
		close(s.ch)
	})
	return s.ch
}

// Subscribers is how many subscribe now: with none, a publisher may skip
// the work of building its events.
func (h *Hub) Subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

// Publish hands e to every subscriber that has room for it.
func (h *Hub) Publish(e Event) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		room := cap(s.ch) - len(s.ch)
		switch {
		case s.lost && room >= 2:
			s.ch <- Event{Type: Resync, Time: e.Time}
			s.ch <- e
			s.lost = false
		case !s.lost && room >= 1:
			s.ch <- e
		default:
			s.lost = true
		}
	}
}

// excerpt is the start of a prompt for display: on one line, at most
// PromptExcerpt runes, with what Discord would render as a mention broken
// by a zero-width space, so that the text cannot ping anyone wherever it
// is shown.
func excerpt(s string) string {
	s = defuse(strings.Join(strings.Fields(s), " "))
	if utf8.RuneCountInString(s) > PromptExcerpt {
		r := []rune(s)
		s = string(r[:PromptExcerpt-1]) + "…"
	}
	return s
}

// defuse breaks @everyone, @here, <@user>, <@&role> and <#channel>.
func defuse(s string) string {
	if !strings.ContainsAny(s, "@<") {
		return s
	}
	return mentions.Replace(s)
}

var mentions = strings.NewReplacer("@everyone", "@\u200beveryone", "@here", "@\u200bhere", "<@", "<\u200b@", "<#", "<\u200b#")
