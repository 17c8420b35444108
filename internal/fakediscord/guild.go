package fakediscord

import (
	"encoding/json"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/diamondburned/arikawa/v3/discord"
)

// This file serves what the gateway's Discord actions call: guild channels
// and threads, pins, polls, single messages, members and their roles,
// scheduled events, moderation and the bot's nickname. Like Discord, it
// checks what is easy to check (a missing name, unknown ids, limits) and
// answers with Discord's error codes.

// Member is a guild member as the fake keeps it.
type Member struct {
	User   discord.User
	Nick   string
	Roles  []discord.RoleID
	Joined time.Time
	// TimedOutUntil is when the member's timeout ends; zero for none.
	TimedOutUntil time.Time
	// Protected marks a member the bot may not manage (the owner, or one
	// above the bot's highest role): role changes, timeouts, kicks and
	// bans get 403, code 50013.
	Protected bool
}

// AuditEntry is a moderation call the bot made, with its audit-log reason.
type AuditEntry struct {
	// Action is "role_add", "role_remove", "timeout", "kick" or "ban".
	Action string
	User   discord.UserID
	// Role is the role added or removed.
	Role discord.RoleID
	// Until is a timeout's end; zero when the timeout was lifted.
	Until time.Time
	// Reason is the X-Audit-Log-Reason header, URL-decoded.
	Reason string
}

// Poll is a poll the bot posted.
type Poll struct {
	Message     discord.MessageID
	Question    string
	Answers     []string
	Hours       int
	MultiSelect bool
	// AllowedMentions is what the bot sent.
	AllowedMentions json.RawMessage
}

// Event is a guild's scheduled event.
type Event struct {
	ID                          discord.EventID
	Name, Description, Location string
	Start, End                  time.Time
	// EntityType is 1 stage, 2 voice, 3 external; PrivacyLevel is 2.
	EntityType, PrivacyLevel int
}

// guildState is what the fake keeps beyond channels, messages and roles
// (guarded by Server.mu, made on first use by gstateLocked).
type guildState struct {
	members map[discord.GuildID]map[discord.UserID]*Member
	nicks   map[discord.GuildID]string
	audit   map[discord.GuildID][]AuditEntry
	events  map[discord.GuildID][]Event
	// extra is what a channel has beyond Channel.
	extra map[discord.ChannelID]*channelExtra
}

// channelExtra is a channel's topic and permission overwrites, a
// thread's archive state and members, pins and polls.
type channelExtra struct {
	topic string
	// overwrites are the channel's permission overwrites (DenyBot).
	overwrites []discord.Overwrite
	// archiveAfter is a thread's auto-archive duration in minutes;
	// archivedAt is when it was archived, zero while it is active; stamp
	// is its archive_timestamp, when it was made or last archived or
	// unarchived.
	archiveAfter int
	archivedAt   time.Time
	stamp        time.Time
	// locked is set on a thread only Manage Threads may post in or
	// unarchive (LockThread).
	locked bool
	// members are a thread's members: its creator and whoever posted.
	members []discord.UserID
	// pins are the pinned messages, in the order they were pinned.
	pins  []discord.MessageID
	polls []Poll
}

// Discord's limits checked here.
const (
	maxChannelName = 100
	maxTopic       = 1024
	maxPins        = 50
	maxNick        = 32
	maxPollAnswers = 10
	maxPollHours   = 768
	maxTimeout     = 28 * 24 * time.Hour
)

func (s *Server) gstateLocked() *guildState {
	if s.gstate == nil {
		s.gstate = &guildState{
			members: map[discord.GuildID]map[discord.UserID]*Member{},
			nicks:   map[discord.GuildID]string{},
			audit:   map[discord.GuildID][]AuditEntry{},
			events:  map[discord.GuildID][]Event{},
			extra:   map[discord.ChannelID]*channelExtra{},
		}
	}
	return s.gstate
}

func (s *Server) extraLocked(ch discord.ChannelID) *channelExtra {
	gs := s.gstateLocked()
	x := gs.extra[ch]
	if x == nil {
		x = &channelExtra{}
		gs.extra[ch] = x
	}
	return x
}

// Errors as Discord words them.
var (
	unknownGuild   = apiError{Message: "Unknown Guild", Code: 10004}
	unknownChannel = apiError{Message: "Unknown Channel", Code: 10003}
	unknownMessage = apiError{Message: "Unknown Message", Code: 10008}
	unknownMember  = apiError{Message: "Unknown Member", Code: 10007}
	unknownRole    = apiError{Message: "Unknown Role", Code: 10011}
	unknownEmoji   = apiError{Message: "Unknown Emoji", Code: 10014}
	missingPerms   = apiError{Message: "Missing Permissions", Code: 50013}
	wrongType      = apiError{Message: "Cannot execute action on this channel type", Code: 50024}
	notFound       = apiError{Message: "404: Not Found", Code: 0}
)

// formError is Discord's 400 for an invalid field (code 50035), with the
// field named in errors as Discord does.
func formError(field, code, message string) map[string]any {
	return map[string]any{
		"message": "Invalid Form Body",
		"code":    50035,
		"errors":  map[string]any{field: map[string]any{"_errors": []map[string]string{{"code": code, "message": message}}}},
	}
}

// checkLength answers formError unless s has min-max characters.
func checkLength(field, s string, min, max int) map[string]any {
	n := utf8.RuneCountInString(s)
	switch {
	case n == 0 && min > 0:
		return formError(field, "BASE_TYPE_REQUIRED", "This field is required")
	case n < min || n > max:
		return formError(field, "BASE_TYPE_BAD_LENGTH", "Must be between "+strconv.Itoa(min)+" and "+strconv.Itoa(max)+" in length.")
	}
	return nil
}

func isThread(t discord.ChannelType) bool {
	return t == discord.GuildAnnouncementThread || t == discord.GuildPublicThread || t == discord.GuildPrivateThread
}

// channelOut is a channel as the REST API and dispatches show it: with
// its topic and overwrites and, for a thread, its owner, member count and
// metadata.
func (s *Server) channelOut(c Channel) discord.Channel {
	out := s.channelJSON(c)
	x := s.extraLocked(c.ID)
	out.Topic = x.topic
	out.Overwrites = slices.Clone(x.overwrites)
	if isThread(c.Type) {
		out.OwnerID = c.OwnerID
		out.MemberCount = len(x.members)
		out.ThreadMetadata = &discord.ThreadMetadata{
			Archived:            !x.archivedAt.IsZero(),
			AutoArchiveDuration: discord.ArchiveDuration(x.archiveAfter),
			ArchiveTimestamp:    discord.NewTimestamp(x.stamp),
			Locked:              x.locked,
		}
	}
	return out
}

func (s *Server) hasGuildLocked(g discord.GuildID) bool {
	return slices.Contains(s.guilds, g)
}

// auditReason reads the X-Audit-Log-Reason header, which Discord takes
// URL-encoded.
func auditReason(h http.Header) string {
	r := h.Get("X-Audit-Log-Reason")
	if d, err := url.PathUnescape(r); err == nil {
		return d
	}
	return r
}

// guildEndpointLocked serves /guilds/{id}/...; parts starts at the id.
func (s *Server) guildEndpointLocked(r *http.Request, parts []string, body []byte) (int, any) {
	id, _ := discord.ParseSnowflake(parts[0])
	g := discord.GuildID(id)
	if !s.hasGuildLocked(g) {
		return http.StatusNotFound, unknownGuild
	}
	rest := parts[1:]
	method, reason := r.Method, auditReason(r.Header)
	switch {
	case method == "GET" && len(rest) == 1 && rest[0] == "channels":
		return 200, s.guildChannelsLocked(g)
	case method == "POST" && len(rest) == 1 && rest[0] == "channels":
		return s.createChannelLocked(g, body)
	case method == "GET" && len(rest) == 1 && rest[0] == "roles":
		return 200, s.rolesLocked(g)
	case method == "GET" && len(rest) == 1 && rest[0] == "scheduled-events":
		return 200, s.eventsOut(g)
	case method == "POST" && len(rest) == 1 && rest[0] == "scheduled-events":
		return s.createEventLocked(g, body)
	case method == "PATCH" && len(rest) == 2 && rest[0] == "members" && rest[1] == "@me":
		return s.setNickLocked(g, body)
	case len(rest) >= 2 && rest[0] == "members":
		return s.memberEndpointLocked(g, method, rest[1], rest[2:], reason, body)
	case method == "PUT" && len(rest) == 2 && rest[0] == "bans":
		return s.banLocked(g, rest[1], reason)
	}
	return http.StatusNotFound, notFound
}

// guildChannelsLocked lists a guild's channels, threads left out, as
// GET /guilds/{id}/channels does.
func (s *Server) guildChannelsLocked(g discord.GuildID) []discord.Channel {
	out := []discord.Channel{}
	for _, c := range s.channels {
		if c.GuildID == g && !isThread(c.Type) {
			out = append(out, s.channelOut(c.Channel))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// createChannelLocked serves POST /guilds/{id}/channels.
func (s *Server) createChannelLocked(g discord.GuildID, body []byte) (int, any) {
	var in struct {
		Name     string              `json:"name"`
		Type     discord.ChannelType `json:"type"`
		Topic    string              `json:"topic"`
		ParentID discord.ChannelID   `json:"parent_id"`
	}
	if json.Unmarshal(body, &in) != nil {
		return http.StatusBadRequest, apiError{Message: "400: Bad Request", Code: 50109}
	}
	if e := checkLength("name", in.Name, 1, maxChannelName); e != nil {
		return http.StatusBadRequest, e
	}
	if e := checkLength("topic", in.Topic, 0, maxTopic); e != nil {
		return http.StatusBadRequest, e
	}
	if isThread(in.Type) || in.Type == discord.DirectMessage || in.Type == discord.GroupDM {
		return http.StatusBadRequest, formError("type", "BASE_TYPE_CHOICES", "Value must be one of the guild channel types.")
	}
	if in.ParentID.IsValid() {
		p, ok := s.channels[in.ParentID]
		if !ok || p.GuildID != g || p.Type != discord.GuildCategory {
			return http.StatusBadRequest, formError("parent_id", "CHANNEL_PARENT_INVALID", "Not a category")
		}
	}
	c := Channel{ID: discord.ChannelID(s.id()), GuildID: g, ParentID: in.ParentID, Type: in.Type, Name: in.Name}
	s.channels[c.ID] = &channel{Channel: c, nonces: map[string]*Message{}}
	s.extraLocked(c.ID).topic = in.Topic
	out := s.channelOut(c)
	s.dispatchLocked("CHANNEL_CREATE", out)
	return http.StatusCreated, out
}

// editChannelLocked serves PATCH /channels/{id}: the name and topic when
// sent (a null topic clears it), and a thread's archived, locked and
// auto_archive_duration (threads.go checks them as Discord does).
func (s *Server) editChannelLocked(c *channel, body []byte) (int, any) {
	var in struct {
		Name  *string         `json:"name"`
		Topic json.RawMessage `json:"topic"`
	}
	if json.Unmarshal(body, &in) != nil {
		return http.StatusBadRequest, apiError{Message: "400: Bad Request", Code: 50109}
	}
	if isThread(c.Type) {
		if status, e, refused := s.editThreadRefusedLocked(c, body); refused {
			return status, e
		}
	}
	if in.Name != nil {
		if e := checkLength("name", *in.Name, 1, maxChannelName); e != nil {
			return http.StatusBadRequest, e
		}
	}
	var topic *string
	if len(in.Topic) > 0 {
		var t string
		if string(in.Topic) != "null" && json.Unmarshal(in.Topic, &t) != nil {
			return http.StatusBadRequest, formError("topic", "BASE_TYPE_STRING", "Must be a string.")
		}
		if e := checkLength("topic", t, 0, maxTopic); e != nil {
			return http.StatusBadRequest, e
		}
		topic = &t
	}
	if in.Name != nil {
		c.Name = *in.Name
	}
	if topic != nil {
		s.extraLocked(c.ID).topic = *topic
	}
	if isThread(c.Type) {
		s.applyThreadEditLocked(c, body)
	}
	out := s.channelOut(c.Channel)
	if c.GuildID.IsValid() {
		s.dispatchLocked(updateEvent(c.Type), out)
	}
	return 200, out
}

func updateEvent(t discord.ChannelType) string {
	if isThread(t) {
		return "THREAD_UPDATE"
	}
	return "CHANNEL_UPDATE"
}

// deleteChannelLocked serves DELETE /channels/{id}: the channel and its
// messages are gone, and so are its threads. A thread's deletion is
// announced as Discord does, with THREAD_DELETE and only the thread's id,
// guild, parent and type.
func (s *Server) deleteChannelLocked(c *channel) (int, any) {
	out := s.channelOut(c.Channel)
	for id, t := range s.channels {
		if t.ParentID == c.ID && isThread(t.Type) {
			delete(s.channels, id)
		}
	}
	delete(s.channels, c.ID)
	switch {
	case c.GuildID.IsValid() && isThread(c.Type):
		s.dispatchLocked("THREAD_DELETE", threadDelete{ID: c.ID, GuildID: c.GuildID, ParentID: c.ParentID, Type: c.Type})
	case c.GuildID.IsValid():
		s.dispatchLocked("CHANNEL_DELETE", out)
	}
	return 200, out
}

// startThreadLocked serves POST /channels/{id}/threads (from, zero) and
// /channels/{id}/messages/{from}/threads. A thread from a message has the
// message's id; without one, API v9 makes a private thread unless the
// type says otherwise. The bot owns the thread, and needs Create Public
// Threads (Create Private Threads for a private one) in the channel.
func (s *Server) startThreadLocked(c *channel, from string, body []byte) (int, any) {
	var in struct {
		Name        string              `json:"name"`
		Type        discord.ChannelType `json:"type"`
		ArchiveTime int                 `json:"auto_archive_duration"`
	}
	if json.Unmarshal(body, &in) != nil {
		return http.StatusBadRequest, apiError{Message: "400: Bad Request", Code: 50109}
	}
	if c.Type != discord.GuildText && c.Type != discord.GuildAnnouncement {
		return http.StatusBadRequest, wrongType
	}
	if e := checkLength("name", in.Name, 1, maxChannelName); e != nil {
		return http.StatusBadRequest, e
	}
	if in.ArchiveTime == 0 {
		in.ArchiveTime = defaultArchive
	}
	if !validArchive(in.ArchiveTime) {
		return http.StatusBadRequest, archiveChoices()
	}
	t := Channel{GuildID: c.GuildID, ParentID: c.ID, Name: in.Name}
	if from != "" {
		mid, _ := discord.ParseSnowflake(from)
		m := c.message(discord.MessageID(mid))
		if m == nil {
			// A slash command's visible response is a message of its
			// channel too.
			if a := s.answerLocked(discord.MessageID(mid)); a != nil && a.ChannelID == c.ID && !a.Ephemeral {
				m = a
			}
		}
		if m == nil {
			return http.StatusNotFound, unknownMessage
		}
		if _, taken := s.channels[discord.ChannelID(mid)]; taken {
			return http.StatusBadRequest, apiError{Message: "A thread has already been created for this message", Code: 160004}
		}
		t.ID, t.Type = discord.ChannelID(mid), discord.GuildPublicThread
		if c.Type == discord.GuildAnnouncement {
			t.Type = discord.GuildAnnouncementThread
		}
	} else {
		t.ID, t.Type = discord.ChannelID(s.id()), in.Type
		if t.Type == 0 {
			t.Type = discord.GuildPrivateThread
		}
		if !isThread(t.Type) {
			return http.StatusBadRequest, formError("type", "BASE_TYPE_CHOICES", "Value must be one of {10, 11, 12}.")
		}
	}
	need := discord.PermissionCreatePublicThreads
	if t.Type == discord.GuildPrivateThread {
		need = discord.PermissionCreatePrivateThreads
	}
	if !s.botPermsLocked(c).Has(need) {
		return http.StatusForbidden, missingPerms
	}
	return http.StatusCreated, s.addThreadLocked(t, s.Bot.ID, in.ArchiveTime)
}

// addThreadMemberLocked serves PUT /channels/{thread}/thread-members/{user}:
// the user joins the thread (it shows in their list and notifies them),
// as Discord does for a thread that is not archived.
func (s *Server) addThreadMemberLocked(c *channel, user string) (int, any) {
	if !isThread(c.Type) {
		return http.StatusBadRequest, wrongType
	}
	x := s.extraLocked(c.ID)
	if !x.archivedAt.IsZero() {
		return http.StatusBadRequest, apiError{Message: "Thread is archived", Code: 50083}
	}
	id, err := discord.ParseSnowflake(user)
	if err != nil {
		return http.StatusNotFound, apiError{Message: "Unknown User", Code: 10013}
	}
	if !slices.Contains(x.members, discord.UserID(id)) {
		x.members = append(x.members, discord.UserID(id))
	}
	return http.StatusNoContent, nil
}

// ThreadMembers returns a thread's members: its creator, whoever posted
// in it, and whoever was added.
func (s *Server) ThreadMembers(th discord.ChannelID) []discord.UserID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.extraLocked(th).members)
}

// archivedThreadsLocked serves GET /channels/{id}/threads/archived/public:
// the channel's archived public threads, most recently archived first.
func (s *Server) archivedThreadsLocked(c *channel) (int, any) {
	threads := []discord.Channel{}
	for _, t := range s.channels {
		public := t.Type == discord.GuildPublicThread || t.Type == discord.GuildAnnouncementThread
		if t.ParentID == c.ID && public && !s.extraLocked(t.ID).archivedAt.IsZero() {
			threads = append(threads, s.channelOut(t.Channel))
		}
	}
	sort.Slice(threads, func(i, j int) bool {
		return threads[i].ThreadMetadata.ArchiveTimestamp.Time().After(threads[j].ThreadMetadata.ArchiveTimestamp.Time())
	})
	return 200, map[string]any{"threads": threads, "members": []any{}, "has_more": false}
}

// channelActionLocked serves the channel endpoints of this file; 404 for
// any other.
func (s *Server) channelActionLocked(c *channel, method string, rest []string, body []byte) (int, any) {
	switch {
	case method == "PATCH" && len(rest) == 0:
		return s.editChannelLocked(c, body)
	case method == "DELETE" && len(rest) == 0:
		return s.deleteChannelLocked(c)
	case method == "POST" && len(rest) == 1 && rest[0] == "threads":
		return s.startThreadLocked(c, "", body)
	case method == "POST" && len(rest) == 3 && rest[0] == "messages" && rest[2] == "threads":
		return s.startThreadLocked(c, rest[1], body)
	case method == "GET" && len(rest) == 3 && rest[0] == "threads" && rest[1] == "archived" && rest[2] == "public":
		return s.archivedThreadsLocked(c)
	case method == "PUT" && len(rest) == 2 && rest[0] == "thread-members":
		return s.addThreadMemberLocked(c, rest[1])
	case method == "GET" && len(rest) == 2 && rest[0] == "messages":
		mid, _ := discord.ParseSnowflake(rest[1])
		m := c.message(discord.MessageID(mid))
		if m == nil {
			return http.StatusNotFound, unknownMessage
		}
		return 200, s.messageOut(c, m)
	case method == "GET" && len(rest) == 1 && rest[0] == "pins":
		return 200, s.pinsLocked(c)
	case (method == "PUT" || method == "DELETE") && len(rest) == 2 && rest[0] == "pins":
		return s.pinLocked(c, rest[1], method == "PUT")
	}
	return http.StatusNotFound, notFound
}

// messageOut is a stored message as GET shows it, with its poll if any.
func (s *Server) messageOut(c *channel, m *Message) any {
	for _, p := range s.extraLocked(c.ID).polls {
		if p.Message == m.ID {
			return pollMessage{Message: m.Message, Poll: pollOut(p)}
		}
	}
	return m.Message
}

// pinLocked pins (PUT) or unpins a message, as PUT and DELETE
// /channels/{id}/pins/{message} do.
func (s *Server) pinLocked(c *channel, msg string, pin bool) (int, any) {
	mid, _ := discord.ParseSnowflake(msg)
	m := c.message(discord.MessageID(mid))
	if m == nil {
		return http.StatusNotFound, unknownMessage
	}
	x := s.extraLocked(c.ID)
	i := slices.Index(x.pins, m.ID)
	switch {
	case pin && i < 0:
		if len(x.pins) >= maxPins {
			return http.StatusBadRequest, apiError{Message: "Maximum number of pins reached (50)", Code: 30003}
		}
		x.pins = append(x.pins, m.ID)
	case !pin && i >= 0:
		x.pins = slices.Delete(x.pins, i, i+1)
	}
	m.Pinned = pin
	ev := map[string]any{"channel_id": c.ID.String(), "last_pin_timestamp": time.Now().Format(time.RFC3339)}
	if c.GuildID.IsValid() {
		ev["guild_id"] = c.GuildID.String()
	}
	s.dispatchLocked("CHANNEL_PINS_UPDATE", ev)
	return http.StatusNoContent, nil
}

// pinsLocked lists a channel's pinned messages, last pinned first.
func (s *Server) pinsLocked(c *channel) []discord.Message {
	out := []discord.Message{}
	pins := s.extraLocked(c.ID).pins
	for i := len(pins) - 1; i >= 0; i-- {
		if m := c.message(pins[i]); m != nil {
			out = append(out, m.Message)
		}
	}
	return out
}

// reactionRefused answers Discord's error for a reaction on a
// message that does not exist or with an emoji that is neither unicode nor
// name:id; ok is false when the reaction may go ahead.
func reactionRefused(c *channel, msg, emoji string) (int, apiError, bool) {
	mid, _ := discord.ParseSnowflake(msg)
	if c.message(discord.MessageID(mid)) == nil {
		return http.StatusNotFound, unknownMessage, true
	}
	e, err := url.PathUnescape(emoji)
	if err != nil || !validEmoji(e) {
		return http.StatusBadRequest, unknownEmoji, true
	}
	return 0, apiError{}, false
}

// validEmoji reports whether e names an emoji as the API takes it: a
// custom one as name:id, or unicode, which is not plain ASCII (Discord
// refuses names such as "thumbsup" or ":+1:").
func validEmoji(e string) bool {
	if name, id, ok := strings.Cut(e, ":"); ok && name != "" {
		sf, err := discord.ParseSnowflake(id)
		return err == nil && sf.IsValid()
	}
	for _, r := range e {
		if r > unicode.MaxASCII {
			return !strings.ContainsAny(e, ": ")
		}
	}
	return false
}

// pollBody is a message with a poll, as the bot sends it.
type pollBody struct {
	Content         string          `json:"content"`
	Nonce           json.RawMessage `json:"nonce"`
	EnforceNonce    bool            `json:"enforce_nonce"`
	AllowedMentions json.RawMessage `json:"allowed_mentions"`
	Poll            *struct {
		Question struct {
			Text string `json:"text"`
		} `json:"question"`
		Answers []struct {
			PollMedia struct {
				Text string `json:"text"`
			} `json:"poll_media"`
		} `json:"answers"`
		Duration    *int `json:"duration"`
		MultiSelect bool `json:"allow_multiselect"`
	} `json:"poll"`
}

// isPoll reports whether a message body (JSON) carries a poll.
func isPoll(ctype string, body []byte) bool {
	if mt, _, _ := mime.ParseMediaType(ctype); mt != "application/json" {
		return false
	}
	var in pollBody
	return json.Unmarshal(body, &in) == nil && in.Poll != nil
}

// pollMessage is a message with its poll, as Discord shows it.
type pollMessage struct {
	discord.Message
	Poll map[string]any `json:"poll"`
}

func pollOut(p Poll) map[string]any {
	answers := make([]map[string]any, len(p.Answers))
	for i, a := range p.Answers {
		answers[i] = map[string]any{"answer_id": i + 1, "poll_media": map[string]string{"text": a}}
	}
	return map[string]any{
		"question":          map[string]string{"text": p.Question},
		"answers":           answers,
		"allow_multiselect": p.MultiSelect,
		"layout_type":       1,
	}
}

// createPollLocked posts the bot's message with a poll. Like a message,
// a repeated nonce with enforce_nonce returns the first one.
func (s *Server) createPollLocked(c *channel, body []byte) (int, any) {
	if status, e, refused := s.sendRefusedLocked(c); refused {
		return status, e
	}
	var in pollBody
	if json.Unmarshal(body, &in) != nil || in.Poll == nil {
		return http.StatusBadRequest, apiError{Message: "400: Bad Request", Code: 50109}
	}
	p := Poll{Question: in.Poll.Question.Text, Hours: 24, MultiSelect: in.Poll.MultiSelect, AllowedMentions: in.AllowedMentions}
	if e := checkLength("poll.question.text", p.Question, 1, 300); e != nil {
		return http.StatusBadRequest, e
	}
	if n := len(in.Poll.Answers); n < 1 || n > maxPollAnswers {
		return http.StatusBadRequest, formError("poll.answers", "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 10 in length.")
	}
	for _, a := range in.Poll.Answers {
		if e := checkLength("poll.answers.poll_media.text", a.PollMedia.Text, 1, 55); e != nil {
			return http.StatusBadRequest, e
		}
		p.Answers = append(p.Answers, a.PollMedia.Text)
	}
	if in.Poll.Duration != nil {
		p.Hours = *in.Poll.Duration
	}
	if p.Hours < 1 || p.Hours > maxPollHours {
		return http.StatusBadRequest, formError("poll.duration", "NUMBER_TYPE_MAX", "Must be between 1 and 768.")
	}
	if e := checkLength("content", in.Content, 0, maxContent); e != nil {
		return http.StatusBadRequest, e
	}
	nonce := strings.Trim(string(in.Nonce), `"`)
	x := s.extraLocked(c.ID)
	if in.EnforceNonce && nonce != "" {
		if m, ok := c.nonces[nonce]; ok {
			return 200, s.messageOut(c, m)
		}
	}
	m := &Message{
		Message: discord.Message{
			ID: discord.MessageID(s.id()), ChannelID: c.ID, GuildID: c.GuildID, Type: discord.DefaultMessage,
			Author: s.Bot, Content: in.Content, Timestamp: discord.NewTimestamp(time.Now()),
		},
		Nonce:           nonce,
		AllowedMentions: in.AllowedMentions,
	}
	p.Message = m.ID
	s.postingLocked(c, s.Bot.ID)
	c.messages = append(c.messages, m)
	x.polls = append(x.polls, p)
	s.botMessages++
	if nonce != "" {
		c.nonces[nonce] = m
	}
	out := pollMessage{Message: m.Message, Poll: pollOut(p)}
	s.dispatchLocked("MESSAGE_CREATE", out)
	return 200, out
}

// rolesLocked lists a guild's roles, @everyone (the guild's id, with a new
// server's permissions) first.
func (s *Server) rolesLocked(g discord.GuildID) []discord.Role {
	return append([]discord.Role{{ID: discord.RoleID(g), Name: "@everyone", Permissions: everyonePerms}}, s.roles[g]...)
}

func (s *Server) hasRoleLocked(g discord.GuildID, r discord.RoleID) bool {
	return slices.ContainsFunc(s.roles[g], func(x discord.Role) bool { return x.ID == r })
}

func (m *Member) out() discord.Member {
	dm := discord.Member{User: m.User, Nick: m.Nick, RoleIDs: slices.Clone(m.Roles), Joined: discord.NewTimestamp(m.Joined)}
	if dm.RoleIDs == nil {
		dm.RoleIDs = []discord.RoleID{}
	}
	if m.TimedOutUntil.After(time.Now()) {
		dm.CommunicationDisabledUntil = discord.NewTimestamp(m.TimedOutUntil)
	}
	return dm
}

// memberEndpointLocked serves /guilds/{g}/members/{user}[/roles/{role}].
func (s *Server) memberEndpointLocked(g discord.GuildID, method, user string, rest []string, reason string, body []byte) (int, any) {
	uid, _ := discord.ParseSnowflake(user)
	members := s.gstateLocked().members[g]
	m := members[discord.UserID(uid)]
	if m == nil {
		return http.StatusNotFound, unknownMember
	}
	audit := func(e AuditEntry) {
		e.User, e.Reason = m.User.ID, reason
		s.gstate.audit[g] = append(s.gstate.audit[g], e)
	}
	switch {
	case method == "GET" && len(rest) == 0:
		return 200, m.out()
	case (method == "PUT" || method == "DELETE") && len(rest) == 2 && rest[0] == "roles":
		rid, _ := discord.ParseSnowflake(rest[1])
		role := discord.RoleID(rid)
		if !s.hasRoleLocked(g, role) {
			return http.StatusNotFound, unknownRole
		}
		if m.Protected {
			return http.StatusForbidden, missingPerms
		}
		i := slices.Index(m.Roles, role)
		if method == "PUT" {
			if i < 0 {
				m.Roles = append(m.Roles, role)
			}
			audit(AuditEntry{Action: "role_add", Role: role})
		} else {
			if i >= 0 {
				m.Roles = slices.Delete(m.Roles, i, i+1)
			}
			audit(AuditEntry{Action: "role_remove", Role: role})
		}
		return http.StatusNoContent, nil
	case method == "PATCH" && len(rest) == 0:
		return s.modifyMemberLocked(m, body, audit)
	case method == "DELETE" && len(rest) == 0:
		if m.Protected {
			return http.StatusForbidden, missingPerms
		}
		delete(members, m.User.ID)
		audit(AuditEntry{Action: "kick"})
		return http.StatusNoContent, nil
	}
	return http.StatusNotFound, notFound
}

// modifyMemberLocked serves PATCH /guilds/{g}/members/{user}: a timeout
// (communication_disabled_until; null lifts it) and a nickname.
func (s *Server) modifyMemberLocked(m *Member, body []byte, audit func(AuditEntry)) (int, any) {
	var in map[string]json.RawMessage
	if json.Unmarshal(body, &in) != nil {
		return http.StatusBadRequest, apiError{Message: "400: Bad Request", Code: 50109}
	}
	if m.Protected {
		return http.StatusForbidden, missingPerms
	}
	if raw, ok := in["communication_disabled_until"]; ok {
		var until time.Time
		if string(raw) != "null" {
			if json.Unmarshal(raw, &until) != nil {
				return http.StatusBadRequest, formError("communication_disabled_until", "DATE_TIME_TYPE_PARSE", "Could not parse the date.")
			}
			if until.After(time.Now().Add(maxTimeout)) {
				return http.StatusBadRequest, formError("communication_disabled_until", "DATE_TIME_TYPE_MAX", "Cannot be more than 28 days in the future.")
			}
		}
		m.TimedOutUntil = until
		audit(AuditEntry{Action: "timeout", Until: until})
	}
	if raw, ok := in["nick"]; ok {
		var nick string
		json.Unmarshal(raw, &nick)
		if e := checkLength("nick", nick, 0, maxNick); e != nil {
			return http.StatusBadRequest, e
		}
		m.Nick = nick
	}
	return 200, m.out()
}

// banLocked serves PUT /guilds/{g}/bans/{user}: the user, member or not,
// is banned and leaves the guild.
func (s *Server) banLocked(g discord.GuildID, user, reason string) (int, any) {
	uid, err := discord.ParseSnowflake(user)
	if err != nil || !uid.IsValid() {
		return http.StatusNotFound, apiError{Message: "Unknown User", Code: 10013}
	}
	members := s.gstateLocked().members[g]
	if m := members[discord.UserID(uid)]; m != nil {
		if m.Protected {
			return http.StatusForbidden, missingPerms
		}
		delete(members, m.User.ID)
	}
	s.gstate.audit[g] = append(s.gstate.audit[g], AuditEntry{Action: "ban", User: discord.UserID(uid), Reason: reason})
	return http.StatusNoContent, nil
}

// setNickLocked serves PATCH /guilds/{g}/members/@me: the bot's nickname.
func (s *Server) setNickLocked(g discord.GuildID, body []byte) (int, any) {
	var in struct {
		Nick *string `json:"nick"`
	}
	if json.Unmarshal(body, &in) != nil {
		return http.StatusBadRequest, apiError{Message: "400: Bad Request", Code: 50109}
	}
	if in.Nick != nil {
		if e := checkLength("nick", *in.Nick, 0, maxNick); e != nil {
			return http.StatusBadRequest, e
		}
		s.gstateLocked().nicks[g] = *in.Nick
	}
	return 200, discord.Member{User: s.Bot, Nick: s.gstateLocked().nicks[g], RoleIDs: []discord.RoleID{}}
}

// eventBody is a scheduled event as the bot creates it.
type eventBody struct {
	Name           string            `json:"name"`
	Description    string            `json:"description"`
	ChannelID      discord.ChannelID `json:"channel_id"`
	PrivacyLevel   int               `json:"privacy_level"`
	EntityType     int               `json:"entity_type"`
	EntityMetadata *struct {
		Location string `json:"location"`
	} `json:"entity_metadata"`
	Start *time.Time `json:"scheduled_start_time"`
	End   *time.Time `json:"scheduled_end_time"`
}

// createEventLocked serves POST /guilds/{g}/scheduled-events. An external
// event (type 3) needs a location and an end, and no channel; a stage or
// voice event needs a channel of the guild. The start must be ahead.
func (s *Server) createEventLocked(g discord.GuildID, body []byte) (int, any) {
	var in eventBody
	if json.Unmarshal(body, &in) != nil {
		return http.StatusBadRequest, apiError{Message: "400: Bad Request", Code: 50109}
	}
	if e := checkLength("name", in.Name, 1, 100); e != nil {
		return http.StatusBadRequest, e
	}
	if e := checkLength("description", in.Description, 0, 1000); e != nil {
		return http.StatusBadRequest, e
	}
	if in.PrivacyLevel != 2 {
		return http.StatusBadRequest, formError("privacy_level", "BASE_TYPE_CHOICES", "Value must be one of {2}.")
	}
	now := time.Now()
	switch {
	case in.Start == nil:
		return http.StatusBadRequest, formError("scheduled_start_time", "BASE_TYPE_REQUIRED", "This field is required")
	case !in.Start.After(now):
		return http.StatusBadRequest, formError("scheduled_start_time", "GUILD_SCHEDULED_EVENT_SCHEDULE_PAST", "Cannot schedule event in the past.")
	case in.End != nil && !in.End.After(*in.Start):
		return http.StatusBadRequest, formError("scheduled_end_time", "GUILD_SCHEDULED_EVENT_END_BEFORE_START", "Cannot schedule event to end before starting.")
	}
	e := Event{ID: discord.EventID(s.id()), Name: in.Name, Description: in.Description, Start: *in.Start, EntityType: in.EntityType, PrivacyLevel: in.PrivacyLevel}
	if in.End != nil {
		e.End = *in.End
	}
	switch in.EntityType {
	case 3:
		if in.ChannelID.IsValid() {
			return http.StatusBadRequest, formError("channel_id", "BASE_TYPE_NULL", "Must be null for external events.")
		}
		if in.EntityMetadata == nil {
			return http.StatusBadRequest, formError("entity_metadata.location", "BASE_TYPE_REQUIRED", "This field is required")
		}
		if err := checkLength("entity_metadata.location", in.EntityMetadata.Location, 1, 100); err != nil {
			return http.StatusBadRequest, err
		}
		if in.End == nil {
			return http.StatusBadRequest, formError("scheduled_end_time", "BASE_TYPE_REQUIRED", "This field is required")
		}
		e.Location = in.EntityMetadata.Location
	case 1, 2:
		if c, ok := s.channels[in.ChannelID]; !ok || c.GuildID != g {
			return http.StatusBadRequest, formError("channel_id", "CHANNEL_INVALID", "Unknown channel.")
		}
	default:
		return http.StatusBadRequest, formError("entity_type", "BASE_TYPE_CHOICES", "Value must be one of {1, 2, 3}.")
	}
	s.gstateLocked().events[g] = append(s.gstate.events[g], e)
	return 200, s.eventOut(g, e)
}

func (s *Server) eventOut(g discord.GuildID, e Event) discord.GuildScheduledEvent {
	out := discord.GuildScheduledEvent{
		ID: e.ID, GuildID: g, CreatorID: s.Bot.ID, Name: e.Name, Description: e.Description,
		StartTime: discord.NewTimestamp(e.Start), PrivacyLevel: discord.ScheduledEventPrivacyLevel(e.PrivacyLevel),
		Status: discord.ScheduledEvent, EntityType: discord.EntityType(e.EntityType),
	}
	if !e.End.IsZero() {
		out.EndTime = discord.NewTimestamp(e.End)
	}
	if e.Location != "" {
		out.EntityMetadata = &discord.EntityMetadata{Location: e.Location}
	}
	return out
}

func (s *Server) eventsOut(g discord.GuildID) []discord.GuildScheduledEvent {
	out := []discord.GuildScheduledEvent{}
	for _, e := range s.gstateLocked().events[g] {
		out = append(out, s.eventOut(g, e))
	}
	return out
}

// AddMember makes user a member of a guild with roles, joined now.
func (s *Server) AddMember(g discord.GuildID, user discord.User, roles ...discord.RoleID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	gs := s.gstateLocked()
	if gs.members[g] == nil {
		gs.members[g] = map[discord.UserID]*Member{}
	}
	gs.members[g][user.ID] = &Member{User: user, Roles: slices.Clone(roles), Joined: time.Now().UTC().Truncate(time.Second)}
}

// Protect marks a member as one the bot may not manage: role changes,
// timeouts, kicks and bans of them get 403, code 50013.
func (s *Server) Protect(g discord.GuildID, user discord.UserID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.gstateLocked().members[g][user]; m != nil {
		m.Protected = true
	}
}

// Member returns a guild's member as it is now; false when user is not
// (or no longer) a member.
func (s *Server) Member(g discord.GuildID, user discord.UserID) (Member, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.gstateLocked().members[g][user]
	if m == nil {
		return Member{}, false
	}
	c := *m
	c.Roles = slices.Clone(m.Roles)
	return c, true
}

// MemberRoles returns the roles of a guild's member; nil when user is not
// a member.
func (s *Server) MemberRoles(g discord.GuildID, user discord.UserID) []discord.RoleID {
	m, _ := s.Member(g, user)
	return m.Roles
}

// AuditLog returns the moderation calls the bot made in a guild, in order.
func (s *Server) AuditLog(g discord.GuildID) []AuditEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.gstateLocked().audit[g])
}

func (s *Server) auditOf(g discord.GuildID, action string) []AuditEntry {
	var out []AuditEntry
	for _, e := range s.AuditLog(g) {
		if e.Action == action {
			out = append(out, e)
		}
	}
	return out
}

// Bans returns the bans the bot made in a guild, in order.
func (s *Server) Bans(g discord.GuildID) []AuditEntry { return s.auditOf(g, "ban") }

// Kicked returns the kicks the bot made in a guild, in order.
func (s *Server) Kicked(g discord.GuildID) []AuditEntry { return s.auditOf(g, "kick") }

// Timeouts returns the timeouts the bot set or lifted in a guild, in order.
func (s *Server) Timeouts(g discord.GuildID) []AuditEntry { return s.auditOf(g, "timeout") }

// Nick returns the bot's nickname in a guild; "" for none.
func (s *Server) Nick(g discord.GuildID) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gstateLocked().nicks[g]
}

// Events returns a guild's scheduled events, in the order they were made.
func (s *Server) Events(g discord.GuildID) []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.gstateLocked().events[g])
}

// Pins returns the pinned messages of a channel, in the order they were
// pinned.
func (s *Server) Pins(ch discord.ChannelID) []discord.MessageID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.extraLocked(ch).pins)
}

// Polls returns the polls the bot posted in a channel, in order.
func (s *Server) Polls(ch discord.ChannelID) []Poll {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.extraLocked(ch).polls)
	for i := range out {
		out[i].Answers = slices.Clone(out[i].Answers)
	}
	return out
}

// ChannelInfo returns a channel as the API shows it (with its topic, and
// a thread's metadata); false once it is deleted or if it never existed.
func (s *Server) ChannelInfo(ch discord.ChannelID) (discord.Channel, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.channels[ch]
	if !ok {
		return discord.Channel{}, false
	}
	return s.channelOut(c.Channel), true
}

// Channels returns a guild's channels, threads left out, oldest first.
func (s *Server) Channels(g discord.GuildID) []discord.Channel {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.guildChannelsLocked(g)
}

// Threads returns the threads of a channel, archived or not, oldest first.
func (s *Server) Threads(ch discord.ChannelID) []discord.Channel {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []discord.Channel
	for _, c := range s.channels {
		if c.ParentID == ch && isThread(c.Type) {
			out = append(out, s.channelOut(c.Channel))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// ArchiveThread archives a thread now, as Discord does after its
// inactivity period (THREAD_UPDATE). A new message unarchives it unless it
// is locked (LockThread).
func (s *Server) ArchiveThread(th discord.ChannelID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setArchivedLocked(s.mustThread(th), true)
	s.notifyLocked()
}
