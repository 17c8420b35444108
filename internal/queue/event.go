// Package queue is the gateway's single event queue.
//
// Every input (Discord messages, heartbeats, cron jobs, hooks, webhooks)
// becomes an Event with a monotonically increasing id and an enqueue time.
// Events run in lanes: a Discord channel is a lane, and scheduled events share
// the system lane unless they target a channel. Within a lane events run one
// at a time in enqueue order; across lanes up to a configured number run at
// once. A Queue is safe for concurrent use.
package queue

import "time"

// Kind is the type of an event.
type Kind string

// The five event kinds (R11.1).
const (
	KindMessage   Kind = "message"
	KindHeartbeat Kind = "heartbeat"
	KindCron      Kind = "cron"
	KindHook      Kind = "hook"
	KindWebhook   Kind = "webhook"
)

// Kinds lists every event kind.
var Kinds = []Kind{KindMessage, KindHeartbeat, KindCron, KindHook, KindWebhook}

// SystemLane is the lane of events that target no channel.
const SystemLane = "system"

// Event is one unit of work. ID and Time are assigned by Enqueue.
type Event struct {
	ID   uint64
	Time time.Time
	Kind Kind
	// Source names the producer, e.g. "discord", "heartbeat", "chat".
	Source string
	// Lane orders events: same lane, strictly one at a time in order.
	// Empty means the channel's lane, or SystemLane without a channel.
	Lane string
	// ChannelID is where the reply goes and which session the event uses.
	// Empty for events that only log their result.
	ChannelID string
	// Text is the prompt (message) or the instruction (everything else).
	Text string
	// Name is the heartbeat check, cron job, hook or webhook name.
	Name string
	// UserID and GuildID describe a message's author.
	UserID  string
	GuildID string
	// ReplyTo identifies the message being answered (transport-specific).
	ReplyTo string
	// ReplyIn is the channel ReplyTo's message was posted in when the
	// answer goes elsewhere: a prompt that opens a thread is answered in
	// the thread (ChannelID), but was posted in the thread's channel.
	ReplyIn string `json:",omitempty"`
	// ThreadName is set on a prompt that opens a thread of its own: the
	// thread is opened, with this name, before the turn posts anything.
	ThreadName string `json:",omitempty"`
	// Model overrides the backend's model for this event.
	Model string
	// PermissionMode overrides PERMISSION_MODE for this event: "plan"
	// for a prompt given with /plan.
	PermissionMode string `json:",omitempty"`
	// Voice marks a prompt transcribed from a voice message: Text is the
	// transcript, which its card quotes.
	Voice bool `json:",omitempty"`
	// SessionKey picks the session binding; empty means ChannelID. Events
	// without either run in a fresh session that is not kept.
	SessionKey string
	// Author is the display name of a message's author (the archive
	// shows it); UserID stays the identity.
	Author string `json:",omitempty"`
	// Attachments are the files attached to a prompt, fetched when its
	// turn runs.
	Attachments []Attachment `json:",omitempty"`
	// Restricted gives a message the restrictions of a scheduled run: it
	// answers a question a heartbeat, cron job, hook or webhook run asked
	// (a reaction prompt), and may do no more than that run could. It is
	// journalled with the event, so a restart keeps it.
	Restricted bool `json:",omitempty"`
	// Interaction lets another process answer the slash command that
	// made the event (a gateway on NATS, where a worker runs the turn):
	// Discord's interaction token, good for this interaction only and for
	// 15 minutes. Nil on one machine. Never logged.
	Interaction *Interaction `json:",omitempty"`
	// Key identifies the source event (a Discord message or interaction
	// id, a webhook delivery, a scheduled run), so that a durable journal
	// can refuse the same source event twice. Empty: never de-duplicated.
	Key string
}

// Interaction is what answering a Discord slash command takes.
type Interaction struct {
	App     string    `json:"app"`
	Token   string    `json:"token"`
	Expires time.Time `json:"expires"`
}

// Scheduled reports whether e runs with the restrictions of a scheduled
// run: it is a heartbeat, cron job, hook or webhook, or a message that
// answers one's question (Restricted). Such a run may not use the actions
// scheduled runs may not, runs in a fresh session with the gateway's
// defaults, not in a channel's conversation or its settings.
func (e Event) Scheduled() bool { return e.Kind != KindMessage || e.Restricted }

// Attachment is a file attached to a prompt, as Discord describes it.
type Attachment struct {
	Name        string `json:"name"`
	URL         string `json:"url"`
	ContentType string `json:"content_type,omitempty"`
	Size        int64  `json:"size"`
}

// lane returns the lane the event runs in.
func (e *Event) lane() string {
	switch {
	case e.Lane != "":
		return e.Lane
	case e.ChannelID != "":
		return e.ChannelID
	default:
		return SystemLane
	}
}
