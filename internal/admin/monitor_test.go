package admin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/admin/admintest"
	"github.com/agentgateway/gateway/internal/agent"
	"github.com/agentgateway/gateway/internal/inbox"
	"github.com/agentgateway/gateway/internal/queue"
)

// stepClock is a clock the test moves by hand.
type stepClock struct{ t time.Time }

func (c *stepClock) now() time.Time              { return c.t }
func (c *stepClock) advance(d time.Duration)     { c.t = c.t.Add(d) }
func newStepClock() *stepClock                   { return &stepClock{t: time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)} }
func at(c *stepClock, d time.Duration) time.Time { return c.t.Add(d) }

func TestMonitorRecordsATurn(t *testing.T) {
	clock := newStepClock()
	m := NewMonitor("claude", NewMetrics(), NewHub(64, 0))
	m.now = clock.now
	lanes := []queue.LaneWaiting{{Lane: "c1", Waiting: 1, Oldest: clock.t}}
	m.Watch(Sources{
		Waiting:   func() []queue.LaneWaiting { return lanes },
		Running:   func() int { return 1 },
		Inbox:     func() inbox.Stats { return inbox.Stats{Bytes: 4096, Entries: 10, Waiting: 1, Running: 1, Failed: 2} },
		Processes: func() int { return 3 },
		Warm: func() backends.WarmStats {
			return backends.WarmStats{Processes: 2, Busy: 1, RSSBytes: 1 << 20, PSSBytes: 1 << 19}
		},
		Connected: func() bool { return true },
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := m.Hub().Subscribe(ctx)

	prompt := queue.Event{Kind: queue.KindMessage, ChannelID: "c1", Text: "fix it <@42>"}
	accepted := prompt
	accepted.ID, accepted.Lane, accepted.Time = 7, "c1", clock.t
	m.Enqueued(accepted, nil)
	m.Enqueued(queue.Event{Kind: queue.KindHeartbeat, ID: 8, Lane: queue.SystemLane, Time: clock.t}, nil)
	m.Enqueued(prompt, &queue.FullError{Depth: 3, Lane: true})
	m.Enqueued(prompt, &queue.FullError{Depth: 100})
	m.Enqueued(prompt, queue.ErrClosed)
	m.Enqueued(queue.Event{Kind: queue.KindWebhook}, fmt.Errorf("journal: %w", queue.ErrDuplicate))
	m.Enqueued(prompt, errors.New("disk full"))

	clock.advance(2 * time.Second) // waited in the queue
	m.Started(accepted)
	m.RunStarted(accepted, agent.RunInfo{Model: "opus"})
	clock.advance(500 * time.Millisecond)
	m.Observe(accepted, backends.Event{Kind: backends.EventInit, Model: "claude-opus-4"})
	m.Observe(accepted, backends.Event{Kind: backends.EventText, Text: "on it"}) // first output
	clock.advance(time.Second)
	m.Observe(accepted, backends.Event{Kind: backends.EventToolUse, Tool: &backends.ToolCall{ID: "t1", Name: "Bash", Input: `{"command":"go test ./..."}`}})
	m.Observe(accepted, backends.Event{Kind: backends.EventToolResult, Tool: &backends.ToolCall{ID: "t1", Name: "Bash", IsError: true}})
	m.Observe(accepted, backends.Event{Kind: backends.EventToolUse, Tool: &backends.ToolCall{ID: "t2", Name: "Read", Input: `{"file_path":"a.go"}`}})
	// A hook run inline around the event: same id, its own kind.
	hook := queue.Event{ID: 7, Kind: queue.KindHook, Name: "agent_stop"}
	m.RunStarted(hook, agent.RunInfo{})
	m.Observe(hook, backends.Event{Kind: backends.EventToolUse, Tool: &backends.ToolCall{ID: "h1", Name: "Write"}})
	m.Observe(hook, backends.Event{Kind: backends.EventToolResult, Tool: &backends.ToolCall{ID: "h1", Name: "Write"}})
	m.Spent(hook, agent.Outcome{Result: backends.Result{CostUSD: 0.01, Usage: backends.Usage{InputTokens: 5}}}, time.Second)
	m.Spent(accepted, agent.Outcome{Result: backends.Result{
		Model: "claude-opus-4", CostUSD: 0.25, Warm: true,
		Usage: backends.Usage{InputTokens: 100, OutputTokens: 20, CacheReadTokens: 1000},
	}}, 4*time.Second)
	m.Done(accepted, agent.Outcome{Result: backends.Result{CostUSD: 0.25}})
	m.Left(queue.Event{ID: 9, Kind: queue.KindMessage, Lane: "c1"}, queue.Stopped)
	m.Left(queue.Event{ID: 10, Kind: queue.KindCron, Lane: queue.SystemLane}, queue.Dropped)
	m.Left(accepted, queue.Ran)

	m.Request("POST", "/channels/{id}/messages", 429)
	m.Request("POST", "/channels/{id}/messages", 200)
	m.Request("PATCH", "/channels/{id}/messages/{id}", 0)
	for _, c := range []struct{ up, resumed bool }{{true, false}, {false, false}, {true, true}, {false, false}, {true, false}} {
		m.Connection(c.up, c.resumed)
	}
	m.CaughtUp(3)
	m.WebhookAnswered(202)
	m.WebhookAnswered(401)
	m.Resumed(1, 0, 2, 0)

	var b bytes.Buffer
	m.Metrics().WritePrometheus(&b)
	s, err := admintest.Parse(&b)
	if err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	want := map[string]float64{
		`gateway_events_accepted_total{kind="message"}`:                                    1,
		`gateway_events_accepted_total{kind="heartbeat"}`:                                  1,
		`gateway_events_refused_total{kind="message",reason="lane_full"}`:                  1,
		`gateway_events_refused_total{kind="message",reason="queue_full"}`:                 1,
		`gateway_events_refused_total{kind="message",reason="shutting_down"}`:              1,
		`gateway_events_refused_total{kind="message",reason="not_stored"}`:                 1,
		`gateway_events_duplicate_total{kind="webhook"}`:                                   1,
		`gateway_events_finished_total{kind="message",outcome="ok"}`:                       1,
		`gateway_events_finished_total{kind="message",outcome="dropped"}`:                  1,
		`gateway_events_finished_total{kind="cron",outcome="postponed"}`:                   1,
		`gateway_events_running`:                                                           1,
		`gateway_queue_waiting{lane_kind="channel"}`:                                       1,
		`gateway_queue_waiting{lane_kind="system"}`:                                        0,
		`gateway_queue_wait_seconds_sum{lane_kind="channel"}`:                              2,
		`gateway_queue_wait_seconds_count{lane_kind="channel"}`:                            1,
		`gateway_turn_duration_seconds_sum{backend="claude",start="warm"}`:                 4,
		`gateway_turn_duration_seconds_count{backend="claude",start="warm"}`:               1,
		`gateway_turn_duration_seconds_count{backend="claude",start="cold"}`:               1, // the hook
		`gateway_turn_first_output_seconds_sum{backend="claude",start="warm"}`:             0.5,
		`gateway_turn_first_output_seconds_bucket{backend="claude",start="warm",le="0.5"}`: 1,
		`gateway_tool_calls_total{tool="Bash",outcome="error"}`:                            1,
		`gateway_tool_calls_total{tool="Read",outcome="unfinished"}`:                       1,
		`gateway_tool_calls_total{tool="Write",outcome="ok"}`:                              1,
		`gateway_tokens_total{backend="claude",model="claude-opus-4",type="input"}`:        100,
		`gateway_tokens_total{backend="claude",model="claude-opus-4",type="output"}`:       20,
		`gateway_tokens_total{backend="claude",model="claude-opus-4",type="cache_read"}`:   1000,
		`gateway_tokens_total{backend="claude",model="unknown",type="input"}`:              5,
		`gateway_cost_usd_total{backend="claude",model="claude-opus-4",estimate="false"}`:  0.25,
		`gateway_cost_usd_total{backend="claude",model="unknown",estimate="false"}`:        0.01,
		`gateway_cli_processes`:      3,
		`gateway_cli_warm_processes`: 2,
		`gateway_cli_warm_rss_bytes`: 1 << 20,
		`gateway_cli_warm_pss_bytes`: 1 << 19,
		`gateway_discord_connected`:  1,
		`gateway_discord_requests_total{method="POST",route="/channels/{id}/messages",status="429"}`:     1,
		`gateway_discord_requests_total{method="POST",route="/channels/{id}/messages",status="200"}`:     1,
		`gateway_discord_requests_total{method="PATCH",route="/channels/{id}/messages/{id}",status="0"}`: 1,
		`gateway_discord_rate_limited_total{route="/channels/{id}/messages"}`:                            1,
		`gateway_discord_disconnects_total`:                                                              2,
		`gateway_discord_reconnects_total`:                                                               2,
		`gateway_discord_resumes_total`:                                                                  1,
		`gateway_discord_catchup_messages_total`:                                                         3,
		`gateway_webhook_requests_total{status="202"}`:                                                   1,
		`gateway_webhook_requests_total{status="401"}`:                                                   1,
		`gateway_inbox_bytes`:                                 4096,
		`gateway_inbox_entries{state="accepted"}`:             1,
		`gateway_inbox_entries{state="running"}`:              1,
		`gateway_inbox_entries{state="failed"}`:               2,
		`gateway_inbox_entries{state="done"}`:                 6,
		`gateway_inbox_resumed_total{action="rerun"}`:         1,
		`gateway_inbox_resumed_total{action="retry_offered"}`: 2,
	}
	for series, v := range want {
		if got := s.Get(series); got != v || !s.Has(series) {
			t.Errorf("%s = %v (present %v), want %v", series, got, s.Has(series), v)
		}
	}

	// The hub saw the queue event's turn, in order, and not the hook's.
	cancel()
	var got []Event
	for e := range events {
		e.Time = time.Time{}
		got = append(got, e)
	}
	queueNow := Event{Type: QueueChanged, Lanes: []Lane{{Lane: "c1", Waiting: 1, Oldest: at(clock, -3500*time.Millisecond)}}}
	wantEvents := []Event{
		queueNow, // accepted
		queueNow, // accepted
		queueNow, // started
		{Type: TurnStarted, EventID: 7, Channel: "c1", Kind: "message", Prompt: "fix it <\u200b@42>", Backend: "claude", Model: "opus"},
		{Type: ToolUsed, EventID: 7, Tool: "Bash", Summary: "go test ./..."},
		{Type: ToolUsed, EventID: 7, Tool: "Read", Summary: "a.go"},
		{Type: TurnFinished, EventID: 7, Channel: "c1", Kind: "message", Outcome: "ok", Duration: 4 * time.Second, CostUSD: 0.25},
		queueNow, // dropped by a stop
		queueNow, // postponed at shutdown
	}
	if diff := cmp.Diff(wantEvents, got); diff != "" {
		t.Errorf("hub events (-want +got):\n%s", diff)
	}
}

func TestMonitorTurnsThatNeverRan(t *testing.T) {
	clock := newStepClock()
	m := NewMonitor("fake", NewMetrics(), NewHub(8, 0))
	m.now = clock.now
	ctx, cancel := context.WithCancel(context.Background())
	events := m.Hub().Subscribe(ctx)
	e := queue.Event{ID: 1, Kind: queue.KindMessage, ChannelID: "c", Lane: "c", Time: clock.t}
	m.Started(e)
	clock.advance(time.Second)
	m.Done(e, agent.Outcome{Refused: true}) // over budget: no run, no Spent
	cancel()
	var got []Event
	for ev := range events {
		ev.Time = time.Time{}
		got = append(got, ev)
	}
	want := []Event{{Type: TurnFinished, EventID: 1, Channel: "c", Kind: "message", Outcome: "refused", Duration: time.Second}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("hub events (-want +got):\n%s", diff)
	}
	var b bytes.Buffer
	m.Metrics().WritePrometheus(&b)
	s, err := admintest.Parse(&b)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Get(`gateway_events_finished_total{kind="message",outcome="refused"}`); got != 1 {
		t.Errorf("refused = %v, want 1", got)
	}
	if s.Sum("gateway_turn_duration_seconds_count") != 0 {
		t.Error("a turn that never ran a CLI has a duration")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.turns) != 0 {
		t.Errorf("%d turns kept after they ended", len(m.turns))
	}
}

func TestOutcome(t *testing.T) {
	tests := []struct {
		out  agent.Outcome
		want string
	}{
		{agent.Outcome{}, "ok"},
		{agent.Outcome{Err: errors.New("x")}, "error"},
		{agent.Outcome{Err: errors.New("x"), Stopped: true}, "stopped"},
		{agent.Outcome{Err: errors.New("x"), Interrupted: true}, "interrupted"},
		{agent.Outcome{Refused: true}, "refused"},
	}
	for _, tt := range tests {
		if got := Outcome(tt.out); got != tt.want {
			t.Errorf("Outcome(%+v) = %q, want %q", tt.out, got, tt.want)
		}
	}
}

func TestNilMonitorDoesNothing(t *testing.T) {
	var m *Monitor
	e := queue.Event{ID: 1, Kind: queue.KindMessage}
	m.Watch(Sources{})
	m.Enqueued(e, nil)
	m.Started(e)
	m.RunStarted(e, agent.RunInfo{})
	m.Observe(e, backends.Event{Kind: backends.EventText})
	m.Spent(e, agent.Outcome{}, time.Second)
	m.Done(e, agent.Outcome{})
	m.Left(e, queue.Stopped)
	m.Resumed(1, 1, 1, 1)
	m.Request("GET", "/", 200)
	m.Connection(true, false)
	m.CaughtUp(1)
	m.WebhookAnswered(202)
}
