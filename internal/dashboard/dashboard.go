// Package dashboard serves the operator's live web page: the turns running
// now, the queue, recent activity, costs, the schedule, sessions and health,
// with buttons to stop a turn, run a scheduled job now and reset a session.
// When the gateway runs on several processes it also lists them, with the
// turns each runs, and every running turn names its process.
//
// The page is one embedded HTML document with its script and styles inline,
// so it works offline and needs no build step. It stays current over
// Server-Sent Events: a snapshot first, then every change the Source
// publishes. The package reads the gateway only through Source, which its
// caller adapts from the gateway's internals.
//
// Handler does no authentication and checks no Host: it is mounted behind
// the admin server's, which answers only its own address (so that a page
// re-resolved to it by DNS rebinding gets nothing). Because that auth may
// be a cookie, the state-changing POSTs require a header a cross-site form
// cannot send. Handler and ActivityLog are safe for
// concurrent use.
package dashboard

import (
	"context"
	"errors"
	"time"
)

// Source is what the page shows and what its buttons do.
type Source interface {
	// Snapshot returns everything the page shows now.
	Snapshot() State
	// Subscribe returns the changes from now on. The channel is closed
	// when ctx ends. A Source should not block on a slow reader: it may
	// drop its pending changes and send Update{Resync: true} instead,
	// and the page then takes a fresh Snapshot.
	Subscribe(ctx context.Context) <-chan Update
	// Stop stops the turn of event eventID, as the Discord Stop button
	// does.
	Stop(eventID uint64) error
	// RunNow runs a heartbeat check or a cron job (kind is
	// ScheduleHeartbeat or ScheduleCron) now.
	RunNow(kind, name string) error
	// ResetSession forgets the channel's session, as /claude-reset does.
	ResetSession(channelID string) error
}

// Errors a Source returns (wrapped) so that the page can say what went
// wrong: they answer 404 and 409. Any other error answers 500.
var (
	// ErrNotFound: no such turn (it may have just finished), job or
	// session.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the thing exists but cannot do that now (a cron job
	// already running, a turn already stopping).
	ErrConflict = errors.New("conflict")
)

// The kinds of scheduled jobs RunNow takes.
const (
	ScheduleHeartbeat = "heartbeat"
	ScheduleCron      = "cron"
)

// State is everything the page shows at one moment.
type State struct {
	// Now is the gateway's clock when the snapshot was sent; the page
	// measures elapsed times against it rather than the viewer's clock.
	// The handler sets it; a Source may leave it zero.
	Now time.Time `json:"now"`
	// Running are the turns running now, oldest first.
	Running []Turn `json:"running"`
	// Queue is the events waiting, per lane.
	Queue []Lane `json:"queue"`
	// Activity is the recent finished events, newest first (at most
	// Keep).
	Activity []Entry   `json:"activity"`
	Costs    Costs     `json:"costs"`
	Schedule []Job     `json:"schedule"`
	Sessions []Session `json:"sessions"`
	Health   Health    `json:"health"`
	// Processes are the gateway's processes when it runs on several
	// (NATS_URL); nil on one machine, and the page then has no such
	// section.
	Processes *Processes `json:"processes,omitempty"`
}

// Turn is an agent turn running now.
type Turn struct {
	EventID     uint64 `json:"event_id"`
	ChannelID   string `json:"channel_id,omitempty"`
	ChannelName string `json:"channel_name,omitempty"`
	// Kind is the event's kind: message, heartbeat, cron, hook, webhook.
	Kind string `json:"kind"`
	// Name is the heartbeat check, cron job, hook or webhook name.
	Name string `json:"name,omitempty"`
	// Prompt is the start of the prompt; the handler cuts it to
	// PromptExcerpt runes whatever the Source gives.
	Prompt    string    `json:"prompt"`
	StartedAt time.Time `json:"started_at"`
	// Tool is the tool the agent is using now, if any.
	Tool string `json:"tool,omitempty"`
	// Process names the gateway process running the turn when the
	// gateway runs on several; empty on one machine.
	Process string `json:"process,omitempty"`
}

// Processes are the gateway's processes as their heartbeats describe them.
type Processes struct {
	// Self is the name of the process serving the page.
	Self string `json:"self"`
	// List is every process with a live heartbeat, by name. The handler
	// sends an empty list, never null.
	List []Process `json:"list"`
	// Read is when List was read.
	Read time.Time `json:"read,omitzero"`
	// Error says, in words for the operator, why the last read failed:
	// List is then the last one read.
	Error string `json:"error,omitempty"`
}

// Process is one gateway process: `gateway run` or `gateway worker`.
type Process struct {
	Name    string    `json:"name"`
	Role    string    `json:"role"` // run or worker
	Version string    `json:"version,omitempty"`
	Started time.Time `json:"started,omitzero"`
	// Slots is how many turns it runs at once; a `gateway run` with none
	// only takes prompts.
	Slots int `json:"slots"`
	// Beat is its last heartbeat.
	Beat  time.Time     `json:"beat,omitzero"`
	Turns []ProcessTurn `json:"turns,omitempty"`
}

// ProcessTurn is a turn a process runs.
type ProcessTurn struct {
	EventID uint64 `json:"event_id"`
	// Lane is the channel's id, or "system" for heartbeat checks and cron
	// jobs without a channel.
	Lane        string    `json:"lane"`
	ChannelName string    `json:"channel_name,omitempty"`
	Since       time.Time `json:"since"`
}

// Lane is one lane of the queue: a channel, or the system lane.
type Lane struct {
	Lane string `json:"lane"`
	// Name is the channel's name, for display.
	Name    string `json:"name,omitempty"`
	Waiting int    `json:"waiting"`
	// Oldest is when the longest-waiting event was enqueued.
	Oldest time.Time `json:"oldest,omitzero"`
}

// Entry is one finished event, in the activity list and the activity log.
type Entry struct {
	EventID     uint64        `json:"event_id"`
	Time        time.Time     `json:"time"` // when it finished
	ChannelID   string        `json:"channel_id,omitempty"`
	ChannelName string        `json:"channel_name,omitempty"`
	Kind        string        `json:"kind"`
	Name        string        `json:"name,omitempty"`
	Outcome     string        `json:"outcome"` // ok, stopped, interrupted, error
	Duration    time.Duration `json:"duration_ns"`
	CostUSD     float64       `json:"cost_usd"`
}

// Costs is spending today and this week (from Monday).
type Costs struct {
	Today Spend `json:"today"`
	Week  Spend `json:"week"`
}

// Spend is spending over one period, in USD.
type Spend struct {
	Total float64 `json:"total_usd"`
	// ByChannel is keyed by the channel's display name.
	ByChannel map[string]float64 `json:"by_channel,omitempty"`
	ByKind    map[string]float64 `json:"by_kind,omitempty"`
	// Estimate is set when any of it is an estimate (a subscription
	// login reports no real price).
	Estimate bool `json:"estimate,omitempty"`
}

// Job is a heartbeat check or a cron job.
type Job struct {
	Kind string `json:"kind"` // ScheduleHeartbeat or ScheduleCron
	Name string `json:"name"`
	// Schedule says when it runs, as written: "every 30m", "0 9 * * 1-5".
	Schedule    string    `json:"schedule,omitempty"`
	ChannelName string    `json:"channel_name,omitempty"`
	NextRun     time.Time `json:"next_run,omitzero"`
	LastRun     time.Time `json:"last_run,omitzero"`
	LastOutcome string    `json:"last_outcome,omitempty"`
	Paused      bool      `json:"paused,omitempty"`
}

// Session is the agent session a channel resumes.
type Session struct {
	ChannelID   string `json:"channel_id"`
	ChannelName string `json:"channel_name,omitempty"`
	// SessionID is shown as given: a short prefix is enough.
	SessionID string    `json:"session_id"`
	Started   time.Time `json:"started,omitzero"`
	Model     string    `json:"model,omitempty"`
}

// Health is whether the gateway can work.
type Health struct {
	Discord    bool   `json:"discord"` // connected
	CLI        string `json:"cli,omitempty"`
	CLIVersion string `json:"cli_version,omitempty"`
	Ready      bool   `json:"ready"`
	// Reason says why it is not ready.
	Reason string `json:"reason,omitempty"`
	// Limit is the login's usage limit while it holds prompts back; nil
	// when there is none.
	Limit *Limit `json:"limit,omitempty"`
}

// Limit is a usage limit the model API reported for the gateway's login:
// prompts wait until ResetAt and then run by themselves.
type Limit struct {
	ResetAt time.Time `json:"reset_at"`
	// Window names the limit when the CLI did ("five_hour", ...).
	Window string `json:"window,omitempty"`
	// Waiting is how many prompts wait for it.
	Waiting int `json:"waiting"`
}

// Update is one change to State. Payload's type follows Kind; build
// updates with the functions below.
type Update struct {
	Kind    string `json:"kind"`
	Payload any    `json:"payload,omitempty"`
	// Resync says changes were dropped: the reader takes a fresh
	// Snapshot instead. Kind and Payload are empty.
	Resync bool `json:"resync,omitempty"`
}

// The kinds of Update.
const (
	KindTurnStarted  = "turn_started"  // Turn
	KindTool         = "tool"          // ToolChange
	KindTurnFinished = "turn_finished" // Entry
	KindQueue        = "queue"         // []Lane
	KindSchedule     = "schedule"      // []Job
	KindSessions     = "sessions"      // []Session
	KindCosts        = "costs"         // Costs
	KindHealth       = "health"        // Health
	KindProcesses    = "processes"     // Processes
)

// ToolChange is a running turn's current tool; empty when the agent is
// between tools.
type ToolChange struct {
	EventID uint64 `json:"event_id"`
	Tool    string `json:"tool"`
}

// TurnStarted says a turn began.
func TurnStarted(t Turn) Update { return Update{Kind: KindTurnStarted, Payload: t} }

// ToolUsed says a running turn is now using tool.
func ToolUsed(eventID uint64, tool string) Update {
	return Update{Kind: KindTool, Payload: ToolChange{EventID: eventID, Tool: tool}}
}

// TurnFinished says a turn ended: it leaves the running list and heads
// the activity list.
func TurnFinished(e Entry) Update { return Update{Kind: KindTurnFinished, Payload: e} }

// QueueChanged gives the whole queue after a change.
func QueueChanged(lanes []Lane) Update { return Update{Kind: KindQueue, Payload: lanes} }

// ScheduleChanged gives the whole schedule after a change.
func ScheduleChanged(jobs []Job) Update { return Update{Kind: KindSchedule, Payload: jobs} }

// SessionsChanged gives every session after a change.
func SessionsChanged(s []Session) Update { return Update{Kind: KindSessions, Payload: s} }

// CostsChanged gives the spending after a change.
func CostsChanged(c Costs) Update { return Update{Kind: KindCosts, Payload: c} }

// HealthChanged gives the health after a change.
func HealthChanged(h Health) Update { return Update{Kind: KindHealth, Payload: h} }

// ProcessesChanged gives the gateway's processes as last read.
func ProcessesChanged(p Processes) Update { return Update{Kind: KindProcesses, Payload: p} }
