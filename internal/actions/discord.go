package actions

import (
	"context"
	"time"
)

// Discord is what the actions need of Discord's REST API; the Discord bot
// implements it (internal/discord). Ids are decimal strings. Calls go
// through the bot's client: its rate limits, retries and nonces.
type Discord interface {
	// BotID is the bot's own user id.
	BotID() string

	Channels(ctx context.Context, guildID string) ([]Channel, error)
	CreateChannel(ctx context.Context, guildID string, c NewChannel) (Channel, error)
	// EditChannel changes what is not nil.
	EditChannel(ctx context.Context, channelID string, name, topic *string) (Channel, error)
	DeleteChannel(ctx context.Context, channelID string) error
	// CreateThread starts a thread in a channel, from a message when
	// messageID is set.
	CreateThread(ctx context.Context, channelID, messageID, name string) (Channel, error)
	ArchivedThreads(ctx context.Context, channelID string) ([]Channel, error)

	// Send posts a message (files: absolute paths to upload) with no
	// pings, and returns its id.
	Send(ctx context.Context, channelID, content string, files []string) (string, error)
	React(ctx context.Context, channelID, messageID, emoji string) error
	Unreact(ctx context.Context, channelID, messageID, emoji string) error
	// Messages returns the channel's last limit messages, newest first.
	Messages(ctx context.Context, channelID string, limit int) ([]Message, error)
	Message(ctx context.Context, channelID, messageID string) (Message, error)
	EditMessage(ctx context.Context, channelID, messageID, content string) error
	DeleteMessage(ctx context.Context, channelID, messageID string) error
	Pin(ctx context.Context, channelID, messageID string) error
	Unpin(ctx context.Context, channelID, messageID string) error
	Pins(ctx context.Context, channelID string) ([]Message, error)
	CreatePoll(ctx context.Context, channelID string, p Poll) (string, error)

	Member(ctx context.Context, guildID, userID string) (Member, error)
	Roles(ctx context.Context, guildID string) ([]Role, error)
	AddRole(ctx context.Context, guildID, userID, roleID, reason string) error
	RemoveRole(ctx context.Context, guildID, userID, roleID, reason string) error
	CreateEvent(ctx context.Context, guildID string, e Event) (Event, error)
	Events(ctx context.Context, guildID string) ([]Event, error)

	Timeout(ctx context.Context, guildID, userID string, until time.Time, reason string) error
	Kick(ctx context.Context, guildID, userID, reason string) error
	Ban(ctx context.Context, guildID, userID, reason string) error

	SetNickname(ctx context.Context, guildID, nickname string) error
}

// Channel is a channel as the actions show it.
type Channel struct {
	ID, Name, Topic string
	// ParentID is the category (or, for a thread, the channel) it is in.
	ParentID string
	// Type is Discord's channel type: 0 text, 2 voice, 4 category, 5
	// announcement, 11 public thread, 15 forum...
	Type int
}

// NewChannel is a channel to create.
type NewChannel struct {
	Name, Topic string
	// ParentID is the category to create it in; empty for none.
	ParentID string
}

// Message is a message as the actions show it.
type Message struct {
	ID, ChannelID, AuthorID, Author, Content string
	Time                                     time.Time
	Pinned                                   bool
	Attachments                              []string
}

// Member is a server member.
type Member struct {
	UserID, Username, Nick string
	RoleIDs                []string
	Joined                 time.Time
}

// Role is a server role.
type Role struct {
	ID, Name string
	Position int
}

// Event is a scheduled server event (external: it has a location).
type Event struct {
	ID, Name, Description, Location string
	Start, End                      time.Time
}

// Poll is a poll to post.
type Poll struct {
	Question    string
	Answers     []string
	Duration    time.Duration
	MultiSelect bool
}
