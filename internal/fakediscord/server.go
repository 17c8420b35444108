// Package fakediscord is an in-process Discord for tests: the Gateway
// WebSocket (HELLO, IDENTIFY, READY, dispatches, heartbeats, RESUME with
// replay, invalid sessions) and the REST v9 endpoints the gateway uses
// (messages with nonces, file uploads and buttons, message edits, typing,
// reactions, slash commands, button presses, string select menus and
// modals (components.go), interaction callbacks including UPDATE_MESSAGE
// and MODAL, interaction webhooks, history), and those of
// the Discord actions (guild.go: channels, threads, pins, polls, members,
// roles, scheduled events, moderation, the bot's nickname). The real
// arikawa client connects to it.
//
// Tests drive it like users would (Post, Interact, Press, ChooseOptions,
// SubmitModal, StartThreadAsUser; SetRoles gives a member roles), break
// it like Discord does (Fail with 429/5xx, Disconnect, Offline, DenyBot),
// and inspect what the bot did (Requests, Frames, Messages, Message,
// Answers, Callbacks, ModalOpened, and for the actions Pins, Polls,
// AuditLog, Events, Threads, Nick). A Server is safe for concurrent use.
//
// # Threads
//
// A thread is made from a message (it takes the message's id; a slash
// command's visible response counts, and GET
// /webhooks/{app}/{token}/messages/@original gives its id) or without
// one, by the bot over REST (POST /channels/{id}/messages/{mid}/threads,
// POST /channels/{id}/threads: the bot owns it) or by a user
// (StartThreadAsUser, StartThreadOnMessage, AddChannel: the user owns it).
// Each is announced with THREAD_CREATE carrying newly_created, guild_id,
// parent_id, owner_id, member_count and thread_metadata (archived,
// auto_archive_duration as requested, archive_timestamp, locked). GET
// /channels/{thread} shows the same. Archiving (ArchiveThread, PATCH with
// archived), unarchiving and locking (LockThread, PATCH with locked) are
// announced with THREAD_UPDATE; deleting (DeleteThread, DELETE
// /channels/{thread}) with THREAD_DELETE (id, guild_id, parent_id, type),
// after which the API answers 404, code 10003 (Unknown Channel), for the
// thread. GUILD_CREATE lists the active threads, not archived ones.
//
// A message in an archived thread, a user's (Post) or the bot's, first
// unarchives it with a THREAD_UPDATE, as Discord does. In a locked thread
// only Manage Threads may post or unarchive: the bot, which lacks it
// unless AllowBot gives it, gets 400 with code 50083 (Thread is archived)
// when the thread is archived and 403 with code 160005 (Thread is locked)
// when it is not; Post panics there. PATCH of a thread follows Discord's
// rules: an archived thread takes only a request that unarchives it (400,
// 50083), locking and unlocking need Manage Threads, archiving needs it
// unless the bot owns the thread (403, 50013).
//
// Messages and interactions in a thread are as in a text channel:
// channel_id is the thread, guild_id is set. An interaction in a guild
// also carries its channel (with a thread's parent and metadata) and
// app_permissions, the bot's permissions there.
//
// # Permissions
//
// Every guild is owned by Owner, a human, so the bot's permissions are
// computed like any member's: the @everyone role has a new server's text
// permissions (Manage Threads not among them), the bot is a member with no
// roles, and channels carry permission overwrites. GUILD_CREATE has all of
// that (owner_id, roles with @everyone, the bot's own member, each
// channel's permission_overwrites), and GET /guilds/{id}/members/{bot}
// answers, so arikawa's state.Permissions works with or without the Guild
// Members intent. DenyBot and AllowBot put an overwrite for the bot on a
// channel (CHANNEL_UPDATE); the fake then refuses with 403, code 50013
// (Missing Permissions): a thread without Create Public Threads (Create
// Private Threads for a private one), a message without Send Messages
// (Send Messages in Threads in a thread). Threads follow their parent's
// overwrites.
//
// # What Discord does that the fake does not
//
//   - Threads never archive by themselves after auto_archive_duration;
//     a test archives them with ArchiveThread.
//   - Thread members only in part: PUT /thread-members/{user} adds one
//     (ThreadMembers lists them), but there is no THREAD_MEMBERS_UPDATE,
//     THREAD_MEMBER_UPDATE or THREAD_LIST_SYNC, no GET or DELETE of
//     members, no leaving. member_count counts the creator, whoever
//     posted and whoever was added, without Discord's cap at 50;
//     message_count is not kept.
//   - A thread started without a message posts no "started a thread"
//     system message (type 18) in its parent, and a message a thread
//     started from does not show the thread (thread field, HAS_THREAD).
//   - No forum or media channels (posts, tags), no private-thread
//     visibility (the bot sees every thread), no limit on active threads
//     (160006), no slowmode or rate limits per thread.
//   - Permissions are enforced only where said above: View Channel (50001
//     Missing Access), Manage Messages, Attach Files and the like are not
//     checked, and edits, reactions, pins and deletions in archived or
//     locked threads go through, where Discord refuses some with 50083.
//   - Discord's status for a message in a locked thread that is not
//     archived is not documented; 403 with 160005 is the fake's choice.
package fakediscord

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/gorilla/websocket"
)

// Defaults for a started server.
const (
	DefaultToken   = "MTIzNDU2Nzg5MDEyMzQ1Njc4OQ.GfAkEs.fake-discord-bot-token-for-tests"
	BotUsername    = "gatewaybot"
	heartbeatEvery = 41250 // ms, Discord's usual interval
)

// Request is one REST call the bot made.
type Request struct {
	Method string
	// Path is the path after /api/v9, e.g. /channels/1/messages.
	Path  string
	Query string
	Body  []byte
	// Status is what the fake answered.
	Status int
	Time   time.Time
}

// Frame is one gateway message in either direction.
type Frame struct {
	// FromBot is true for frames the bot sent.
	FromBot bool
	Op      int
	Type    string
	Seq     int64
	Data    json.RawMessage
	// Time is when the frame was sent or received.
	Time time.Time
}

// Message is a message as the fake stores it. Its Components are the
// message's buttons as the bot last set them; Buttons lists them.
type Message struct {
	discord.Message
	// Nonce and AllowedMentions are what the bot sent (bot messages only).
	Nonce           string
	AllowedMentions json.RawMessage
	// Interaction is set on answers to a slash command: the interaction id.
	Interaction string
	// Original marks an interaction's response (as opposed to a follow-up).
	Original  bool
	Ephemeral bool
	Edited    bool
	// Files are the files uploaded with the message, in order.
	Files []File
	// Edits are the message's accepted edits, in order.
	Edits []Edit
	// Reactions are the users who reacted, by emoji (the bot's own
	// reactions included).
	Reactions map[string][]discord.UserID
}

// Edit is one accepted edit of a message.
type Edit struct {
	Time    time.Time
	Content string
	// Buttons are the message's buttons after the edit.
	Buttons []Button
}

// Button is a button under a message.
type Button struct {
	// ID is the button's custom_id.
	ID    string
	Label string
	// Style is Discord's style number: 1-4, 5 for a link.
	Style int
}

// Buttons returns the message's buttons, row by row; none when its
// components were removed.
func (m Message) Buttons() []Button {
	var out []Button
	for _, c := range m.Components {
		row, ok := c.(*discord.ActionRowComponent)
		if !ok {
			continue
		}
		for _, ic := range *row {
			if b, ok := ic.(*discord.ButtonComponent); ok {
				out = append(out, Button{ID: string(b.CustomID), Label: b.Label, Style: buttonStyle(b)})
			}
		}
	}
	return out
}

// buttonStyle is a button's style number, which arikawa keeps unexported.
func buttonStyle(b *discord.ButtonComponent) int {
	c := *b
	raw, err := json.Marshal(&c)
	if err != nil {
		return 0
	}
	var v struct {
		Style int `json:"style"`
	}
	json.Unmarshal(raw, &v)
	return v.Style
}

// File is a file the bot uploaded (multipart/form-data files[n]).
type File struct {
	// Field is the form field it came in, e.g. "files[0]".
	Field       string
	Name        string
	ContentType string
	Data        []byte
}

// Channel describes a channel to create.
type Channel struct {
	ID       discord.ChannelID
	GuildID  discord.GuildID
	ParentID discord.ChannelID
	Type     discord.ChannelType
	Name     string
	// OwnerID is a thread's creator; zero means Owner.
	OwnerID discord.UserID
}

// Fault makes matching REST calls fail.
type Fault struct {
	Method string
	// Path is matched as a prefix of the path after /api/v9.
	Path   string
	Status int
	// RetryAfter is sent as the Retry-After header (e.g. "0.05").
	RetryAfter string
	// Times is how many calls fail; 0 means 1.
	Times int
	// Apply carries out the request before failing it, like a 5xx from a
	// proxy after Discord acted.
	Apply bool
}

// Server is the fake Discord.
type Server struct {
	HTTP  *httptest.Server
	Token string
	Bot   discord.User
	App   discord.AppID
	// Owner owns every guild. It is a human, not the bot, so the bot's
	// permissions come from its roles and overwrites, as they do for a
	// bot invited to a server (arikawa gives a guild's owner every
	// permission).
	Owner discord.User

	upgrader websocket.Upgrader

	// mu guards everything below.
	mu       sync.Mutex
	nextID   uint64
	guilds   []discord.GuildID
	channels map[discord.ChannelID]*channel
	roles    map[discord.GuildID][]discord.Role
	requests []Request
	frames   []Frame
	faults   []*Fault
	commands json.RawMessage
	// answers are interaction responses and follow-ups, in order.
	answers []Message
	// callbacks are interaction callback types by interaction id.
	callbacks map[string][]int
	// pressed is the message each button press (by interaction id) was on.
	pressed map[string]pressedMessage
	// interactionChannel is the channel of each slash command, by id.
	interactionChannel map[string]discord.ChannelID
	// completions are the autocomplete interactions, by id (autocomplete.go).
	completions                   map[string]*completion
	conn                          *conn
	offline                       bool
	session                       *gwSession
	identifies, resumes, connects int
	botMessages                   int
	// editEvery, when set, is Discord's least time between two edits of
	// one message: quicker edits get a 429 (LimitEdits).
	editEvery   time.Duration
	rateLimited int
	// deleted are the ids of deleted messages, by channel.
	deleted map[discord.ChannelID][]discord.MessageID
	// uploads are the files users attached, by URL path; downloads
	// counts the times they were fetched.
	uploads   map[string]Upload
	downloads int
	// changed is closed and replaced whenever state changes (Wait).
	changed chan struct{}
	// gstate is what guild.go keeps: members, events, pins, polls.
	gstate *guildState
	// comp is what components.go keeps: interactions' origins, modals.
	comp *componentState
}

// pressedMessage is where a pressed button is.
type pressedMessage struct {
	channel discord.ChannelID
	message discord.MessageID
}

type channel struct {
	Channel
	messages []*Message
	nonces   map[string]*Message
}

// gwSession is a gateway session: its dispatches are replayed on RESUME.
type gwSession struct {
	id        string
	seq       int64
	log       []Frame
	resumable bool
}

// Start runs a fake Discord until the test ends.
func Start(tb testing.TB) *Server {
	tb.Helper()
	s := New()
	tb.Cleanup(s.Close)
	return s
}

// New runs a fake Discord until Close (benchmarks, tools).
func New() *Server {
	s := newServer()
	s.HTTP.Start()
	return s
}

// NewTLS runs a fake Discord over TLS with cert until Close: its URLs are
// https:// and wss://, and a client must trust cert's issuer.
func NewTLS(cert tls.Certificate) *Server {
	s := newServer()
	s.HTTP.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	s.HTTP.StartTLS()
	return s
}

// newServer is a fake Discord whose HTTP server is not started yet.
func newServer() *Server {
	s := &Server{
		Token:     DefaultToken,
		channels:  map[discord.ChannelID]*channel{},
		roles:     map[discord.GuildID][]discord.Role{},
		callbacks: map[string][]int{},
		pressed:   map[string]pressedMessage{},
		changed:   make(chan struct{}),
		nextID:    uint64(discord.NewSnowflake(time.Now())),
	}
	s.Bot = discord.User{ID: discord.UserID(s.id()), Username: BotUsername, Bot: true}
	s.App = discord.AppID(s.id())
	s.Owner = discord.User{ID: discord.UserID(s.id()), Username: "owner"}
	mux := http.NewServeMux()
	mux.HandleFunc("/gateway", s.serveGateway)
	mux.HandleFunc("/api/v9/", s.serveREST)
	mux.HandleFunc("/attachments/", s.serveAttachment)
	s.HTTP = httptest.NewUnstartedServer(mux)
	return s
}

// Close stops the server.
func (s *Server) Close() {
	s.mu.Lock()
	c := s.conn
	s.conn = nil
	s.mu.Unlock()
	if c != nil {
		c.ws.Close()
	}
	s.HTTP.Close()
}

// APIBaseURL is the REST base, for DISCORD_API_BASE_URL.
func (s *Server) APIBaseURL() string { return s.HTTP.URL + "/api/v9" }

// GatewayURL is the gateway, for DISCORD_GATEWAY_URL.
func (s *Server) GatewayURL() string {
	return "ws" + strings.TrimPrefix(s.HTTP.URL, "http") + "/gateway"
}

// id returns a new snowflake, greater than every earlier one.
// id returns a new snowflake. Like Discord's, ids carry the time they
// were made (a catch-up asks for messages after a point in time) and grow.
func (s *Server) id() discord.Snowflake {
	if now := uint64(discord.NewSnowflake(time.Now())); now > s.nextID {
		s.nextID = now
	} else {
		s.nextID++
	}
	return discord.Snowflake(s.nextID)
}

// NewID returns a fresh snowflake.
func (s *Server) NewID() discord.Snowflake {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id()
}

// AddGuild creates a guild with a text channel and returns both ids. The
// guild is owned by Owner and has the bot as a member without roles; it
// is announced (GUILD_CREATE) to a connected bot.
func (s *Server) AddGuild(name string) (discord.GuildID, discord.ChannelID) {
	s.mu.Lock()
	g := discord.GuildID(s.id())
	s.guilds = append(s.guilds, g)
	s.botMemberLocked(g)
	s.mu.Unlock()
	ch := s.AddChannel(Channel{GuildID: g, Type: discord.GuildText, Name: "general"})
	s.announceGuild(g)
	return g, ch
}

// AddChannel creates a channel (a thread when ParentID is set and Type is
// a thread type; a DM when GuildID is zero) and returns its id. A guild
// channel is announced (CHANNEL_CREATE, or for a thread THREAD_CREATE as
// StartThreadAsUser does).
func (s *Server) AddChannel(c Channel) discord.ChannelID {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !c.ID.IsValid() {
		c.ID = discord.ChannelID(s.id())
	}
	if c.Type == 0 && !c.GuildID.IsValid() {
		c.Type = discord.DirectMessage
	}
	if isThread(c.Type) && c.GuildID.IsValid() {
		owner := c.OwnerID
		if !owner.IsValid() {
			owner = s.Owner.ID
		}
		s.addThreadLocked(c, owner, defaultArchive)
		return c.ID
	}
	s.channels[c.ID] = &channel{Channel: c, nonces: map[string]*Message{}}
	if c.GuildID.IsValid() {
		s.dispatchLocked("CHANNEL_CREATE", s.channelOut(c))
	}
	return c.ID
}

// AddRole creates a role in a guild.
func (s *Server) AddRole(g discord.GuildID, name string) discord.RoleID {
	s.mu.Lock()
	// Each new role sits above the earlier ones (@everyone is 0).
	r := discord.Role{ID: discord.RoleID(s.id()), Name: name, Position: len(s.roles[g]) + 1}
	s.roles[g] = append(s.roles[g], r)
	s.mu.Unlock()
	s.announceGuild(g)
	return r.ID
}

func (s *Server) channelJSON(c Channel) discord.Channel {
	return discord.Channel{ID: c.ID, GuildID: c.GuildID, ParentID: c.ParentID, Type: c.Type, Name: c.Name}
}

// User returns a new human user.
func (s *Server) User(name string) discord.User {
	return discord.User{ID: discord.UserID(s.NewID()), Username: name}
}

// BotUser returns a new user with the bot flag, another bot.
func (s *Server) BotUser(name string) discord.User {
	return discord.User{ID: discord.UserID(s.NewID()), Username: name, Bot: true}
}

// Mention is the mention syntax for a user.
func Mention(u discord.User) string { return "<@" + u.ID.String() + ">" }

// Post has author write content in a channel: the message is stored in
// the history and dispatched (MESSAGE_CREATE) to the bot's session, now or,
// if the bot is disconnected, on RESUME. mentions are the users the
// content mentions.
func (s *Server) Post(ch discord.ChannelID, author discord.User, content string, mentions ...discord.User) discord.Message {
	return s.PostAttachments(ch, author, content, nil, mentions...)
}

// Interact has user run a slash command in a channel; options are the
// command's string options. It returns the interaction id.
func (s *Server) Interact(ch discord.ChannelID, user discord.User, command string, options map[string]string) string {
	var opts []Option
	for k, v := range options {
		opts = append(opts, Option{Name: k, Type: 3, Value: v})
	}
	return s.InteractOptions(ch, user, command, opts...)
}

// Option is a slash command option: Type 3 string, 4 integer, 5 boolean,
// 11 attachment (File: its value is the attachment's id, and the
// attachment is in the interaction's resolved data).
type Option struct {
	Name  string
	Type  int
	Value any
	File  *Upload
}

// InteractOptions is Interact with typed options.
func (s *Server) InteractOptions(ch discord.ChannelID, user discord.User, command string, options ...Option) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.interactLocked(2, ch, user, command, options, "")
}

// interactLocked dispatches an application command interaction of type typ
// (2 a slash command, 4 an autocomplete) and returns its id; focused names
// the option the user is typing in (type 4).
func (s *Server) interactLocked(typ int, ch discord.ChannelID, user discord.User, command string, options []Option, focused string) string {
	c := s.mustChannel(ch)
	id := s.id().String()
	var opts []map[string]any
	resolved := map[string]any{}
	for _, o := range options {
		if o.File != nil {
			a := s.attachLocked(*o.File)
			o.Type, o.Value = 11, a.ID.String()
			resolved[a.ID.String()] = a
		}
		opt := map[string]any{"name": o.Name, "type": o.Type, "value": o.Value}
		if focused != "" && o.Name == focused {
			opt["focused"] = true
		}
		opts = append(opts, opt)
	}
	if s.interactionChannel == nil {
		s.interactionChannel = map[string]discord.ChannelID{}
	}
	s.interactionChannel[id] = ch
	ev := map[string]any{
		"id":             id,
		"application_id": s.App.String(),
		"type":           typ,
		"token":          "itoken-" + id,
		"version":        1,
		"channel_id":     ch.String(),
		"data":           map[string]any{"id": s.id().String(), "name": command, "type": 1, "options": opts, "resolved": map[string]any{"attachments": resolved}},
	}
	perms := s.memberPermsLocked(c, user)
	if typ == 2 {
		s.compLocked().origins[id] = origin{channel: ch, user: user, perms: perms}
	}
	if c.GuildID.IsValid() {
		ev["guild_id"] = c.GuildID.String()
		ev["member"] = s.memberJSONLocked(c.GuildID, user, &perms, true)
		s.whereLocked(c, ev)
	} else {
		ev["user"] = user
	}
	s.dispatchLocked("INTERACTION_CREATE", ev)
	return id
}

// whereLocked adds to a guild interaction what Discord sends of its
// channel: the channel itself (a thread's parent and metadata included)
// and the bot's permissions there (app_permissions, a decimal string).
func (s *Server) whereLocked(c *channel, ev map[string]any) {
	ev["channel"] = s.channelOut(c.Channel)
	ev["app_permissions"] = strconv.FormatUint(uint64(s.botPermsLocked(c)), 10)
}

// Press has user click the button with customID under a message, like
// Discord does: an INTERACTION_CREATE of type 3 (MESSAGE_COMPONENT) with
// the message, and in a guild the member with its permissions in the
// channel (a decimal string), in a DM the user. The interaction's
// callback may update the message (type 7). It returns the interaction
// id, and panics when the message has no such button.
func (s *Server) Press(ch discord.ChannelID, message discord.MessageID, user discord.User, customID string, permissions discord.Permissions) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.mustChannel(ch)
	m := c.message(message)
	if m == nil {
		// An interaction's response with buttons.
		if m = s.answerLocked(message); m == nil || m.ChannelID != ch {
			panic(fmt.Sprintf("fakediscord: no message %s in channel %s", message, ch))
		}
	}
	if !slices.ContainsFunc(m.Buttons(), func(b Button) bool { return b.ID == customID }) {
		panic(fmt.Sprintf("fakediscord: message %s has no button %q", message, customID))
	}
	return s.componentInteractionLocked(c, m, user, permissions, map[string]any{"custom_id": customID, "component_type": 2})
}

// answerLocked finds an interaction response by message id.
func (s *Server) answerLocked(id discord.MessageID) *Message {
	for i := range s.answers {
		if s.answers[i].ID == id {
			return &s.answers[i]
		}
	}
	return nil
}

// message finds a message of the channel by id; nil if there is none.
func (c *channel) message(id discord.MessageID) *Message {
	for _, m := range c.messages {
		if m.ID == id {
			return m
		}
	}
	return nil
}

func (s *Server) mustChannel(id discord.ChannelID) *channel {
	c, ok := s.channels[id]
	if !ok {
		panic(fmt.Sprintf("fakediscord: no channel %s", id))
	}
	return c
}

// Fail adds a fault for matching REST calls.
func (s *Server) Fail(f Fault) {
	if f.Times == 0 {
		f.Times = 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &f)
}

// ClearFaults removes every fault: Discord works again.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// Requests returns the REST calls made so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Frames returns the gateway frames exchanged so far.
func (s *Server) Frames() []Frame {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Frame(nil), s.frames...)
}

// Messages returns the messages in a channel, oldest first.
func (s *Server) Messages(ch discord.ChannelID) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, m := range s.mustChannel(ch).messages {
		out = append(out, m.copy())
	}
	return out
}

// copy is m with its own slices and maps, safe to read while the fake
// changes m.
func (m *Message) copy() Message {
	c := *m
	c.Edits = slices.Clone(m.Edits)
	if m.Reactions != nil {
		c.Reactions = make(map[string][]discord.UserID, len(m.Reactions))
		for k, v := range m.Reactions {
			c.Reactions[k] = slices.Clone(v)
		}
	}
	return c
}

// Message returns a message of a channel by id, as it is now.
func (s *Server) Message(ch discord.ChannelID, id discord.MessageID) (Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.mustChannel(ch).message(id)
	if m == nil {
		return Message{}, false
	}
	return m.copy(), true
}

// BotMessages returns the bot's messages in a channel, oldest first.
func (s *Server) BotMessages(ch discord.ChannelID) []Message {
	var out []Message
	for _, m := range s.Messages(ch) {
		if m.Author.ID == s.Bot.ID {
			out = append(out, m)
		}
	}
	return out
}

// BotMessageCount is how many messages the bot has posted in all channels.
func (s *Server) BotMessageCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.botMessages
}

// Answers returns interaction responses and follow-ups, in order.
func (s *Server) Answers() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Message, len(s.answers))
	for i := range s.answers {
		out[i] = s.answers[i].copy()
	}
	return out
}

// Callbacks returns the interaction callback types sent for an interaction.
func (s *Server) Callbacks(interaction string) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.callbacks[interaction]...)
}

// Commands returns the registered application commands (raw JSON).
func (s *Server) Commands() json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.commands
}

// Counts returns how many IDENTIFYs, RESUMEs and connections there were.
func (s *Server) Counts() (identifies, resumes, connects int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.identifies, s.resumes, s.connects
}

// Connected reports whether a bot session is open and ready.
func (s *Server) Connected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conn != nil && s.conn.ready
}

// Wait blocks until cond holds, failing the test after the deadline. cond
// is evaluated without the server's lock held.
func (s *Server) Wait(tb testing.TB, what string, timeout time.Duration, cond func() bool) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := s.WaitUntil(ctx, cond); err != nil {
		tb.Fatalf("fakediscord: timed out after %v waiting for %s", timeout, what)
	}
}

// WaitUntil blocks until cond holds or ctx ends. cond is evaluated whenever
// the server's state changes, and every 20 ms for conditions that depend
// on state outside the server.
func (s *Server) WaitUntil(ctx context.Context, cond func() bool) error {
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if cond() {
			return nil
		}
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-ch:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
		t.Stop()
	}
}

func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}
