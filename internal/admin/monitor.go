package admin

import (
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/agent"
	"github.com/agentgateway/gateway/internal/inbox"
	"github.com/agentgateway/gateway/internal/queue"
)

// Bounds on what the Monitor keeps per running turn.
const (
	maxTurns        = 4096
	maxPendingTools = 256
)

// Monitor is the one place the gateway reports what happens to: each
// report records metrics and, for the dashboard, publishes to the Hub.
// Its methods fit the seams of the queue (Enqueued, Started, Done, Left),
// the runtime (agent.RunObserver, agent.Observer, agent.CostRecorder),
// the Discord bot (discord.Monitor) and the webhook handler. It keeps a
// little state per running turn (when it started, its tools awaiting a
// result), bounded and dropped when the turn ends.
//
// A Monitor is safe for concurrent use. A nil *Monitor does nothing, so
// the gateway reports the same way with the admin server off.
type Monitor struct {
	metrics *Metrics
	hub     *Hub
	backend string
	now     func() time.Time

	mu sync.Mutex // guards the fields below
	// turns are the turns running now: queue events from Started to
	// Done, and hook turns run inline from RunStarted to Spent.
	turns map[turnKey]*turnState
	// waiting reads the queue (Sources.Waiting); nil until Watch.
	waiting func() []queue.LaneWaiting
	// connected is set once Discord was first connected: later
	// connections are reconnects.
	connected bool
}

// turnKey names a turn: a hook run inline around an event has the
// event's id and its own kind.
type turnKey struct {
	id   uint64
	kind queue.Kind
}

type turnState struct {
	// queued is set for a queue event (Started), as opposed to a hook
	// run inline; only those reach the hub.
	queued    bool
	published bool // TurnStarted went out
	started   time.Time
	// ran is when the first CLI run started; first is the time from then
	// to the first output, set once there was some.
	ran, first time.Time
	model      string
	took       time.Duration // from Spent
	spent      bool
	// tools are the tool calls awaiting their result, by id.
	tools map[string]string
}

// NewMonitor returns a monitor recording into m and publishing to hub,
// for turns run by the named backend.
func NewMonitor(backend string, m *Metrics, hub *Hub) *Monitor {
	mo := &Monitor{metrics: m, hub: hub, backend: backend, now: time.Now, turns: map[turnKey]*turnState{}}
	// Counters without labels show from the start, at 0.
	for _, name := range []string{discordDisconnects, discordReconnects, discordResumes, discordCatchUp} {
		m.Counter(name)
	}
	return mo
}

// Metrics is what the monitor records, for /metrics.
func (m *Monitor) Metrics() *Metrics { return m.metrics }

// Hub is where the monitor publishes, for the dashboard.
func (m *Monitor) Hub() *Hub { return m.hub }

// Metric names, without Prefix (see the README's list).
const (
	eventsAccepted     = "events_accepted_total"
	eventsRefused      = "events_refused_total"
	eventsDuplicate    = "events_duplicate_total"
	eventsFinished     = "events_finished_total"
	eventsRunning      = "events_running"
	queueWaiting       = "queue_waiting"
	queueWait          = "queue_wait_seconds"
	turnDuration       = "turn_duration_seconds"
	turnFirstOutput    = "turn_first_output_seconds"
	toolCalls          = "tool_calls_total"
	tokens             = "tokens_total"
	costUSD            = "cost_usd_total"
	cliProcesses       = "cli_processes"
	cliWarm            = "cli_warm_processes"
	cliWarmRSS         = "cli_warm_rss_bytes"
	cliWarmPSS         = "cli_warm_pss_bytes"
	discordConnected   = "discord_connected"
	discordRequests    = "discord_requests_total"
	discordRateLimited = "discord_rate_limited_total"
	discordDisconnects = "discord_disconnects_total"
	discordReconnects  = "discord_reconnects_total"
	discordResumes     = "discord_resumes_total"
	discordCatchUp     = "discord_catchup_messages_total"
	webhookRequests    = "webhook_requests_total"
	inboxBytes         = "inbox_bytes"
	inboxEntries       = "inbox_entries"
	inboxResumed       = "inbox_resumed_total"
)

// Sources are what the metrics read at each scrape. Nil fields are left
// out.
type Sources struct {
	// Waiting lists the lanes with events waiting (queue.Queue.Waiting);
	// the hub's queue events read it too. Running is how many events run.
	Waiting func() []queue.LaneWaiting
	Running func() int
	// Inbox describes the inbox.
	Inbox func() inbox.Stats
	// Processes is how many agent CLI processes run (proc.Running).
	Processes func() int
	// Warm describes the backend's kept processes (claude).
	Warm func() backends.WarmStats
	// Connected reports whether Discord is connected.
	Connected func() bool
}

// Watch registers the values read at each scrape. Call it once, before
// events flow.
func (m *Monitor) Watch(src Sources) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.waiting = src.Waiting
	m.mu.Unlock()
	gauge := func(name string, f func() int) {
		if f != nil {
			m.metrics.Gauge(name, func() float64 { return float64(f()) })
		}
	}
	gauge(eventsRunning, src.Running)
	gauge(cliProcesses, src.Processes)
	if src.Connected != nil {
		m.metrics.Gauge(discordConnected, func() float64 {
			if src.Connected() {
				return 1
			}
			return 0
		})
	}
	if src.Waiting != nil {
		m.metrics.Writer(func(w io.Writer) {
			var channel, system int
			for _, l := range src.Waiting() {
				if l.Lane == queue.SystemLane {
					system += l.Waiting
				} else {
					channel += l.Waiting
				}
			}
			f := NewFamily(w, queueWaiting, "gauge")
			f.Sample(float64(channel), "lane_kind", "channel")
			f.Sample(float64(system), "lane_kind", "system")
		})
	}
	if src.Inbox != nil {
		m.metrics.Writer(func(w io.Writer) {
			st := src.Inbox()
			NewFamily(w, inboxBytes, "gauge").Sample(float64(st.Bytes))
			f := NewFamily(w, inboxEntries, "gauge")
			f.Sample(float64(st.Waiting), "state", "accepted")
			f.Sample(float64(st.Running), "state", "running")
			f.Sample(float64(st.Failed), "state", "failed")
			f.Sample(float64(st.Entries-st.Waiting-st.Running-st.Failed), "state", "done")
		})
	}
	if src.Warm != nil {
		m.metrics.Writer(func(w io.Writer) {
			st := src.Warm()
			NewFamily(w, cliWarm, "gauge").Sample(float64(st.Processes))
			NewFamily(w, cliWarmRSS, "gauge").Sample(float64(st.RSSBytes))
			NewFamily(w, cliWarmPSS, "gauge").Sample(float64(st.PSSBytes))
		})
	}
}

// Enqueued is queue.Options.Enqueued: an event accepted, refused, or
// offered again (a duplicate, taken once).
func (m *Monitor) Enqueued(e queue.Event, err error) {
	if m == nil {
		return
	}
	kind := string(e.Kind)
	var full *queue.FullError
	switch {
	case err == nil:
		m.metrics.Counter(eventsAccepted, "kind", kind).Inc()
		m.publishQueue()
	case errors.Is(err, queue.ErrDuplicate):
		m.metrics.Counter(eventsDuplicate, "kind", kind).Inc()
	case errors.As(err, &full) && full.Lane:
		m.metrics.Counter(eventsRefused, "kind", kind, "reason", "lane_full").Inc()
	case errors.As(err, &full):
		m.metrics.Counter(eventsRefused, "kind", kind, "reason", "queue_full").Inc()
	case errors.Is(err, queue.ErrClosed):
		m.metrics.Counter(eventsRefused, "kind", kind, "reason", "shutting_down").Inc()
	default:
		m.metrics.Counter(eventsRefused, "kind", kind, "reason", "not_stored").Inc()
	}
}

// Started is told that a queue event leaves the queue to run
// (CoreOptions.OnStart): how long it waited.
func (m *Monitor) Started(e queue.Event) {
	if m == nil {
		return
	}
	now := m.now()
	if !e.Time.IsZero() {
		m.metrics.Histogram(queueWait, waitBuckets, "lane_kind", laneKind(e)).Update(now.Sub(e.Time).Seconds())
	}
	m.mu.Lock()
	if len(m.turns) < maxTurns {
		m.turns[turnKey{e.ID, e.Kind}] = &turnState{queued: true, started: now}
	}
	m.mu.Unlock()
	m.publishQueue()
}

// RunStarted implements agent.RunObserver: a CLI run of e starts. The
// first run of a queue event publishes TurnStarted.
func (m *Monitor) RunStarted(e queue.Event, info agent.RunInfo) {
	if m == nil {
		return
	}
	now := m.now()
	m.mu.Lock()
	key := turnKey{e.ID, e.Kind}
	st := m.turns[key]
	if st == nil {
		if len(m.turns) >= maxTurns {
			m.mu.Unlock()
			return
		}
		st = &turnState{started: now}
		m.turns[key] = st
	}
	if st.ran.IsZero() {
		st.ran, st.model = now, info.Model
	}
	publish := st.queued && !st.published
	st.published = true
	m.mu.Unlock()
	if publish {
		m.hub.Publish(Event{Type: TurnStarted, Time: now, EventID: e.ID, Channel: e.ChannelID, Kind: string(e.Kind),
			Name: e.Name, Prompt: excerpt(e.Text), Backend: m.backend, Model: info.Model})
	}
}

// Observe implements agent.Observer: the CLI's live events give the time
// to the first output, the model it uses, and its tool calls.
func (m *Monitor) Observe(e queue.Event, ev backends.Event) {
	if m == nil {
		return
	}
	now := m.now()
	m.mu.Lock()
	st := m.turns[turnKey{e.ID, e.Kind}]
	if st == nil {
		m.mu.Unlock()
		return
	}
	switch ev.Kind {
	case backends.EventText, backends.EventThinking, backends.EventToolUse, backends.EventToolResult:
		if st.first.IsZero() {
			st.first = now
		}
	case backends.EventInit:
		if ev.Model != "" {
			st.model = ev.Model
		}
	}
	var tool, outcome string
	if ev.Tool != nil {
		switch ev.Kind {
		case backends.EventToolUse:
			if st.tools == nil {
				st.tools = map[string]string{}
			}
			if len(st.tools) < maxPendingTools {
				st.tools[ev.Tool.ID] = ev.Tool.Name
			}
		case backends.EventToolResult:
			tool, outcome = ev.Tool.Name, "ok"
			if tool == "" {
				tool = st.tools[ev.Tool.ID]
			}
			if ev.Tool.IsError {
				outcome = "error"
			}
			delete(st.tools, ev.Tool.ID)
		}
	}
	queued := st.queued
	m.mu.Unlock()
	if outcome != "" {
		m.metrics.Counter(toolCalls, "tool", orUnknown(tool), "outcome", outcome).Inc()
	}
	if queued && ev.Kind == backends.EventToolUse && ev.Tool != nil {
		summary := agent.ToolSummary(backends.Approval{Tool: ev.Tool.Name, Input: json.RawMessage(ev.Tool.Input)}, PromptExcerpt)
		m.hub.Publish(Event{Type: ToolUsed, Time: now, EventID: e.ID, Tool: ev.Tool.Name, Summary: defuse(summary)})
	}
}

// Spent implements agent.CostRecorder: a turn ended (hooks run inline
// included), with what it cost and how long it took.
func (m *Monitor) Spent(e queue.Event, out agent.Outcome, took time.Duration) {
	if m == nil {
		return
	}
	key := turnKey{e.ID, e.Kind}
	m.mu.Lock()
	st := m.turns[key]
	var ran, first time.Time
	var model string
	var unfinished []string
	if st != nil {
		ran, first, model = st.ran, st.first, st.model
		for _, name := range st.tools {
			unfinished = append(unfinished, name)
		}
		st.tools = nil
		st.took, st.spent = took, true
		if !st.queued {
			delete(m.turns, key) // a hook run inline: Done does not follow
		}
	}
	m.mu.Unlock()

	r := out.Result
	if r.Model != "" {
		model = r.Model
	}
	model = orUnknown(model)
	start := "cold"
	if r.Warm {
		start = "warm"
	}
	if !ran.IsZero() {
		m.metrics.Histogram(turnDuration, turnBuckets, "backend", m.backend, "start", start).Update(took.Seconds())
		if !first.IsZero() {
			m.metrics.Histogram(turnFirstOutput, firstOutputBuckets, "backend", m.backend, "start", start).Update(first.Sub(ran).Seconds())
		}
	}
	for _, name := range unfinished {
		m.metrics.Counter(toolCalls, "tool", orUnknown(name), "outcome", "unfinished").Inc()
	}
	for _, t := range []struct {
		typ string
		n   int64
	}{
		{"input", r.Usage.InputTokens},
		{"output", r.Usage.OutputTokens},
		{"cache_read", r.Usage.CacheReadTokens},
		{"cache_creation", r.Usage.CacheCreationTokens},
	} {
		if t.n > 0 {
			m.metrics.Counter(tokens, "backend", m.backend, "model", model, "type", t.typ).Add(int(t.n))
		}
	}
	if r.CostUSD > 0 {
		m.metrics.FloatCounter(costUSD, "backend", m.backend, "model", model, "estimate", strconv.FormatBool(r.CostEstimated)).Add(r.CostUSD)
	}
}

// Done is told how a queue event that ran ended (CoreOptions.OnDone).
func (m *Monitor) Done(e queue.Event, out agent.Outcome) {
	if m == nil {
		return
	}
	outcome := Outcome(out)
	m.metrics.Counter(eventsFinished, "kind", string(e.Kind), "outcome", outcome).Inc()
	now := m.now()
	key := turnKey{e.ID, e.Kind}
	m.mu.Lock()
	st := m.turns[key]
	delete(m.turns, key)
	m.mu.Unlock()
	var took time.Duration
	switch {
	case st == nil:
	case st.spent:
		took = st.took
	default:
		took = now.Sub(st.started)
	}
	m.hub.Publish(Event{Type: TurnFinished, Time: now, EventID: e.ID, Channel: e.ChannelID, Kind: string(e.Kind),
		Name: e.Name, Outcome: outcome, Duration: took, CostUSD: out.Result.CostUSD})
}

// Left is queue.Options.Left: an event dropped without running is
// finished too (dropped by a stop, or postponed at shutdown to the next
// start).
func (m *Monitor) Left(e queue.Event, fate queue.Fate) {
	if m == nil {
		return
	}
	switch fate {
	case queue.Stopped:
		m.metrics.Counter(eventsFinished, "kind", string(e.Kind), "outcome", "dropped").Inc()
	case queue.Dropped:
		m.metrics.Counter(eventsFinished, "kind", string(e.Kind), "outcome", "postponed").Inc()
	default:
		return
	}
	m.publishQueue()
}

// Resumed counts what the start took up of the events a previous run
// left unfinished: run again, replies to deliver, turns interrupted
// after a tool (a Retry is offered), dead letters.
func (m *Monitor) Resumed(rerun, deliver, interrupted, dead int) {
	if m == nil {
		return
	}
	for action, n := range map[string]int{"rerun": rerun, "deliver": deliver, "retry_offered": interrupted, "dead_letter": dead} {
		if n > 0 {
			m.metrics.Counter(inboxResumed, "action", action).Add(n)
		}
	}
}

// Request implements discord.Monitor.
func (m *Monitor) Request(method, route string, status int) {
	if m == nil {
		return
	}
	m.metrics.Counter(discordRequests, "method", method, "route", route, "status", strconv.Itoa(status)).Inc()
	if status == 429 {
		m.metrics.Counter(discordRateLimited, "route", route).Inc()
	}
}

// Connection implements discord.Monitor.
func (m *Monitor) Connection(up, resumed bool) {
	if m == nil {
		return
	}
	if !up {
		m.metrics.Counter(discordDisconnects).Inc()
		return
	}
	m.mu.Lock()
	again := m.connected
	m.connected = true
	m.mu.Unlock()
	if again {
		m.metrics.Counter(discordReconnects).Inc()
		if resumed {
			m.metrics.Counter(discordResumes).Inc()
		}
	}
}

// CaughtUp implements discord.Monitor.
func (m *Monitor) CaughtUp(messages int) {
	if m == nil {
		return
	}
	m.metrics.Counter(discordCatchUp).Add(messages)
}

// WebhookAnswered is told the status of every webhook request
// (webhook.Options.Answered).
func (m *Monitor) WebhookAnswered(status int) {
	if m == nil {
		return
	}
	m.metrics.Counter(webhookRequests, "status", strconv.Itoa(status)).Inc()
}

// publishQueue publishes the queue's lanes, when someone listens.
func (m *Monitor) publishQueue() {
	m.mu.Lock()
	waiting := m.waiting
	m.mu.Unlock()
	if waiting == nil || m.hub.Subscribers() == 0 {
		return
	}
	lanes := waiting()
	ev := Event{Type: QueueChanged, Time: m.now(), Lanes: make([]Lane, len(lanes))}
	for i, l := range lanes {
		ev.Lanes[i] = Lane{Lane: l.Lane, Waiting: l.Waiting, Oldest: l.Oldest}
	}
	m.hub.Publish(ev)
}

// Outcome names how an event ended: ok, error, stopped, interrupted
// (by a shutdown that did not wait; the next start runs it) or refused
// (over budget).
func Outcome(out agent.Outcome) string {
	switch {
	case out.Refused:
		return "refused"
	case out.Stopped:
		return "stopped"
	case out.Interrupted:
		return "interrupted"
	case out.Err != nil:
		return "error"
	}
	return "ok"
}

// laneKind is "system" for the system lane and "channel" for the others.
func laneKind(e queue.Event) string {
	if e.Lane == queue.SystemLane {
		return "system"
	}
	return "channel"
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
