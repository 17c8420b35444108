package discord

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/diamondburned/arikawa/v3/api"
	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/diamondburned/arikawa/v3/utils/httputil"

	"github.com/agentgateway/gateway/internal/actions"
	"github.com/agentgateway/gateway/internal/files"
)

// The Discord actions (internal/actions) run through the bot's REST
// client: the transport's rate-limit handling, and for messages enforced
// nonces. Each method takes ids as decimal strings and returns what
// Discord answered, converted to the actions' types.

var _ actions.Discord = (*Bot)(nil)

// RefusedError is Discord answering a call with an error status. Callers
// that do not know this package read it through the methods HTTPStatus and
// DiscordCode (errors.As with an interface); it wraps arikawa's
// *httputil.HTTPError.
type RefusedError struct {
	// Status is the HTTP status: 403 for missing permissions, 404 for an
	// unknown id.
	Status int
	// Code is Discord's JSON error code (50013 missing permissions, 10003
	// unknown channel...); 0 when the answer had none.
	Code    int
	Message string
	// Detail is Discord's field errors for a 400, compact JSON.
	Detail string
	// err is the failed call's error, an *httputil.HTTPError or one that
	// wraps it.
	err error
}

func (e *RefusedError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	s := fmt.Sprintf("Discord refused: %s (%d", msg, e.Status)
	if e.Code != 0 {
		s += fmt.Sprintf(", code %d", e.Code)
	}
	s += ")"
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

func (e *RefusedError) Unwrap() error { return e.err }

// HTTPStatus is the HTTP status of Discord's answer.
func (e *RefusedError) HTTPStatus() int { return e.Status }

// DiscordCode is Discord's JSON error code; 0 for none.
func (e *RefusedError) DiscordCode() int { return e.Code }

// maxErrorDetail bounds the field errors an error repeats.
const maxErrorDetail = 300

// refused turns arikawa's HTTP error into a RefusedError; other errors
// (the network, a context) are returned as they are.
func refused(err error) error {
	var herr *httputil.HTTPError
	if !errors.As(err, &herr) {
		return err
	}
	e := &RefusedError{Status: herr.Status, Code: int(herr.Code), Message: herr.Message, err: err}
	if len(herr.Errors) > 0 {
		d := string(herr.Errors)
		if len(d) > maxErrorDetail {
			cut := maxErrorDetail
			for cut > 0 && !utf8.RuneStart(d[cut]) {
				cut--
			}
			d = d[:cut] + "…"
		}
		e.Detail = d
	}
	return e
}

// errNoAnswer is a successful call whose answer held nothing (JSON null).
var errNoAnswer = errors.New("Discord's answer was empty")

// BotID is the bot's own user id; "" before the first READY.
func (b *Bot) BotID() string { return b.me().String() }

// ids parses the ids of a call, named for its error, in order.
func ids(pairs ...string) ([]discord.Snowflake, error) {
	out := make([]discord.Snowflake, 0, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		id, err := parseID(pairs[i], pairs[i+1])
		if err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, nil
}

// auditReason is an audit-log reason as Discord takes it in the
// X-Audit-Log-Reason header: at most 512 characters, URL-encoded (a raw
// line break would make the request invalid).
func auditReason(reason string) api.AuditLogReason {
	if utf8.RuneCountInString(reason) > 512 {
		reason = string([]rune(reason)[:512])
	}
	return api.AuditLogReason(url.PathEscape(reason))
}

// Channels lists a guild's channels (threads are not among them).
func (b *Bot) Channels(ctx context.Context, guildID string) ([]actions.Channel, error) {
	g, err := parseID("guild", guildID)
	if err != nil {
		return nil, err
	}
	chs, err := b.client(ctx).Channels(discord.GuildID(g))
	if err != nil {
		return nil, fmt.Errorf("list the channels of guild %s: %w", guildID, refused(err))
	}
	return channelsOf(chs), nil
}

// CreateChannel creates a text channel.
func (b *Bot) CreateChannel(ctx context.Context, guildID string, c actions.NewChannel) (actions.Channel, error) {
	g, err := parseID("guild", guildID)
	if err != nil {
		return actions.Channel{}, err
	}
	data := api.CreateChannelData{Name: c.Name, Type: discord.GuildText, Topic: c.Topic}
	if c.ParentID != "" {
		p, err := parseID("category", c.ParentID)
		if err != nil {
			return actions.Channel{}, err
		}
		data.CategoryID = discord.ChannelID(p)
	}
	ch, err := b.client(ctx).CreateChannel(discord.GuildID(g), data)
	if err == nil && ch == nil {
		err = errNoAnswer
	}
	if err != nil {
		return actions.Channel{}, fmt.Errorf("create channel %q: %w", c.Name, refused(err))
	}
	return channelOf(*ch), nil
}

// channelEdit is the body of PATCH /channels/{id}: only what changes.
// arikawa's ModifyChannel drops the answer, and its Name cannot be set to
// "" to have Discord refuse it.
type channelEdit struct {
	Name  *string `json:"name,omitempty"`
	Topic *string `json:"topic,omitempty"`
}

// EditChannel renames a channel or changes its topic ("" clears it);
// nil leaves a field as it is.
func (b *Bot) EditChannel(ctx context.Context, channelID string, name, topic *string) (actions.Channel, error) {
	ch, err := parseID("channel", channelID)
	if err != nil {
		return actions.Channel{}, err
	}
	var out discord.Channel
	err = b.client(ctx).RequestJSON(&out, "PATCH", api.EndpointChannels+ch.String(),
		httputil.WithJSONBody(channelEdit{Name: name, Topic: topic}))
	if err != nil {
		return actions.Channel{}, fmt.Errorf("edit channel %s: %w", channelID, refused(err))
	}
	return channelOf(out), nil
}

// DeleteChannel deletes a channel (or thread).
func (b *Bot) DeleteChannel(ctx context.Context, channelID string) error {
	ch, err := parseID("channel", channelID)
	if err != nil {
		return err
	}
	if err := b.client(ctx).DeleteChannel(discord.ChannelID(ch), ""); err != nil {
		return fmt.Errorf("delete channel %s: %w", channelID, refused(err))
	}
	return nil
}

// threadArchive is how long a thread the bot starts stays open without
// activity.
const threadArchive = discord.OneDayArchive

// CreateThread starts a public thread in a channel, from a message when
// messageID is set.
func (b *Bot) CreateThread(ctx context.Context, channelID, messageID, name string) (actions.Channel, error) {
	ch, err := parseID("channel", channelID)
	if err != nil {
		return actions.Channel{}, err
	}
	data := api.StartThreadData{Name: name, AutoArchiveDuration: threadArchive}
	var th *discord.Channel
	if messageID != "" {
		var msg discord.Snowflake
		if msg, err = parseID("message", messageID); err != nil {
			return actions.Channel{}, err
		}
		th, err = b.client(ctx).StartThreadWithMessage(discord.ChannelID(ch), discord.MessageID(msg), data)
	} else {
		// API v9 makes a private thread when no type is given.
		data.Type = discord.GuildPublicThread
		th, err = b.client(ctx).StartThreadWithoutMessage(discord.ChannelID(ch), data)
	}
	if err == nil && th == nil {
		err = errNoAnswer
	}
	if err != nil {
		return actions.Channel{}, fmt.Errorf("start thread %q in channel %s: %w", name, channelID, refused(err))
	}
	return channelOf(*th), nil
}

// ArchivedThreads lists a channel's archived public threads, most
// recently archived first (Discord's first page: at most 50).
func (b *Bot) ArchivedThreads(ctx context.Context, channelID string) ([]actions.Channel, error) {
	ch, err := parseID("channel", channelID)
	if err != nil {
		return nil, err
	}
	ts, err := b.client(ctx).PublicArchivedThreads(discord.ChannelID(ch), discord.Timestamp{}, 0)
	if err != nil {
		return nil, fmt.Errorf("list the archived threads of channel %s: %w", channelID, refused(err))
	}
	if ts == nil {
		return []actions.Channel{}, nil
	}
	return channelsOf(ts.Threads), nil
}

// Send posts content with files (absolute paths) attached, pinging
// nobody, and returns the id of its first message. Content past Discord's
// limit is split into messages as a reply is, the files attached to the
// last. Each message's nonce is derived from the channel, the content and
// the files, and enforced: a retry after an ambiguous failure (a 5xx, a
// dropped connection; at most buttonAttempts tries), or the same call
// again within Discord's nonce window, posts it once.
func (b *Bot) Send(ctx context.Context, channelID, content string, paths []string) (string, error) {
	ch, err := parseID("channel", channelID)
	if err != nil {
		return "", err
	}
	attached, err := b.uploads(paths)
	if err != nil {
		return "", fmt.Errorf("send in channel %s: %w", channelID, err)
	}
	parts := withFiles(planReply(content, b.opts.MaxReplyMessages, b.opts.UploadLimit), attached)
	if len(parts) == 0 {
		return "", fmt.Errorf("send in channel %s: nothing to send", channelID)
	}
	key := contentKey(channelID, content, paths)
	var first discord.MessageID
	for i, p := range parts {
		nonce := b.noncePrefix + "s" + key + strconv.Itoa(i)
		id, err := b.postRetrying(ctx, discord.ChannelID(ch), p, nonce)
		if err != nil {
			return "", fmt.Errorf("send in channel %s, message %d of %d: %w", channelID, i+1, len(parts), refused(err))
		}
		if i == 0 {
			first = id
		}
	}
	return first.String(), nil
}

// contentKey is a short digest of a message's channel, content and more
// (its files, a poll's answers), for its nonce.
func contentKey(channelID, content string, more []string) string {
	sum := sha256.New()
	fmt.Fprintf(sum, "%s\x00%s", channelID, content)
	for _, m := range more {
		fmt.Fprintf(sum, "\x00%s", m)
	}
	return hex.EncodeToString(sum.Sum(nil))[:12]
}

// uploads reads the files to send: absolute paths of regular, non-empty
// files, at most MaxFilesPerMessage of them and UploadLimit bytes in all.
// Each is opened once, without following a link on any part of its path,
// checked (opts.Files: as the agent could read it, not the gateway's
// state, no secret in it) and read from that open file; what is uploaded
// is what was checked, with no second lookup. Errors name the file, not
// where it is.
func (b *Bot) uploads(paths []string) ([]files.Outgoing, error) {
	if len(paths) > files.MaxFilesPerMessage {
		return nil, fmt.Errorf("%d files; Discord takes %d per message", len(paths), files.MaxFilesPerMessage)
	}
	guard := b.opts.Files
	if guard == nil {
		guard = &files.Guard{}
	}
	var out []files.Outgoing
	var total int64
	for _, p := range paths {
		name := files.SafeName(filepath.Base(p))
		if !filepath.IsAbs(p) {
			return nil, fmt.Errorf("file %s: not an absolute path", name)
		}
		data, err := guard.Read(p, "/", int64(b.opts.UploadLimit)-total)
		switch {
		case errors.Is(err, files.ErrTooLarge):
			return nil, fmt.Errorf("file %s: over Discord's upload limit of %s", name, byteSize(b.opts.UploadLimit))
		case err != nil:
			return nil, fmt.Errorf("file %s: %w", name, files.WithoutPath(err))
		case len(data) == 0:
			return nil, fmt.Errorf("file %s: empty", name)
		}
		total += int64(len(data))
		out = append(out, files.Outgoing{Name: name, Path: p, Size: int64(len(data)), Data: data})
	}
	return out, nil
}

// postRetrying posts one message (b.post: an enforced nonce, no pings,
// its files uploaded) and tries again, at most buttonAttempts tries, when
// Discord failed in a way that may pass; the nonce makes that safe.
func (b *Bot) postRetrying(ctx context.Context, ch discord.ChannelID, p part, nonce string) (discord.MessageID, error) {
	return b.retrying(ctx, func() (discord.MessageID, error) { return b.post(ctx, ch, 0, p, nonce) })
}

// apiEmoji is an emoji as the API's reaction routes take it: unicode as
// it is, a custom emoji as name:id, also when written as Discord shows it
// in a message (<:name:id>, <a:name:id> when animated).
func apiEmoji(e string) discord.APIEmoji {
	e = strings.TrimSpace(e)
	if strings.HasPrefix(e, "<") && strings.HasSuffix(e, ">") {
		e = strings.TrimPrefix(strings.TrimSuffix(e[1:], ">"), "a:")
	}
	return discord.APIEmoji(strings.Trim(e, ":"))
}

// React adds the bot's reaction to a message.
func (b *Bot) React(ctx context.Context, channelID, messageID, emoji string) error {
	id, err := ids("channel", channelID, "message", messageID)
	if err != nil {
		return err
	}
	if err := b.client(ctx).React(discord.ChannelID(id[0]), discord.MessageID(id[1]), apiEmoji(emoji)); err != nil {
		return fmt.Errorf("react %s to message %s: %w", emoji, messageID, refused(err))
	}
	return nil
}

// Unreact removes the bot's reaction from a message.
func (b *Bot) Unreact(ctx context.Context, channelID, messageID, emoji string) error {
	id, err := ids("channel", channelID, "message", messageID)
	if err != nil {
		return err
	}
	if err := b.client(ctx).Unreact(discord.ChannelID(id[0]), discord.MessageID(id[1]), apiEmoji(emoji)); err != nil {
		return fmt.Errorf("remove reaction %s from message %s: %w", emoji, messageID, refused(err))
	}
	return nil
}

// Bounds of Messages: one request of Discord's (at most 100); arikawa's
// limit 0 would page through the whole history.
const (
	defaultMessages = 50
	maxMessages     = 100
)

// Messages returns a channel's last limit messages, newest first: 50 when
// limit is 0 or less, at most 100.
func (b *Bot) Messages(ctx context.Context, channelID string, limit int) ([]actions.Message, error) {
	ch, err := parseID("channel", channelID)
	if err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = defaultMessages
	}
	limit = min(limit, maxMessages)
	msgs, err := b.client(ctx).Messages(discord.ChannelID(ch), uint(limit))
	if err != nil {
		return nil, fmt.Errorf("read the messages of channel %s: %w", channelID, refused(err))
	}
	return messagesOf(msgs), nil
}

// Message returns one message.
func (b *Bot) Message(ctx context.Context, channelID, messageID string) (actions.Message, error) {
	id, err := ids("channel", channelID, "message", messageID)
	if err != nil {
		return actions.Message{}, err
	}
	m, err := b.client(ctx).Message(discord.ChannelID(id[0]), discord.MessageID(id[1]))
	if err == nil && m == nil {
		err = errNoAnswer
	}
	if err != nil {
		return actions.Message{}, fmt.Errorf("read message %s: %w", messageID, refused(err))
	}
	return messageOf(*m), nil
}

// DeleteMessage deletes a message.
func (b *Bot) DeleteMessage(ctx context.Context, channelID, messageID string) error {
	id, err := ids("channel", channelID, "message", messageID)
	if err != nil {
		return err
	}
	if err := b.client(ctx).DeleteMessage(discord.ChannelID(id[0]), discord.MessageID(id[1]), ""); err != nil {
		return fmt.Errorf("delete message %s: %w", messageID, refused(err))
	}
	return nil
}

// Pin pins a message.
func (b *Bot) Pin(ctx context.Context, channelID, messageID string) error {
	id, err := ids("channel", channelID, "message", messageID)
	if err != nil {
		return err
	}
	if err := b.client(ctx).PinMessage(discord.ChannelID(id[0]), discord.MessageID(id[1]), ""); err != nil {
		return fmt.Errorf("pin message %s: %w", messageID, refused(err))
	}
	return nil
}

// Unpin unpins a message.
func (b *Bot) Unpin(ctx context.Context, channelID, messageID string) error {
	id, err := ids("channel", channelID, "message", messageID)
	if err != nil {
		return err
	}
	if err := b.client(ctx).UnpinMessage(discord.ChannelID(id[0]), discord.MessageID(id[1]), ""); err != nil {
		return fmt.Errorf("unpin message %s: %w", messageID, refused(err))
	}
	return nil
}

// Pins returns a channel's pinned messages, last pinned first.
func (b *Bot) Pins(ctx context.Context, channelID string) ([]actions.Message, error) {
	ch, err := parseID("channel", channelID)
	if err != nil {
		return nil, err
	}
	msgs, err := b.client(ctx).PinnedMessages(discord.ChannelID(ch))
	if err != nil {
		return nil, fmt.Errorf("list the pins of channel %s: %w", channelID, refused(err))
	}
	return messagesOf(msgs), nil
}

// pollMessage is a message with a poll: arikawa v3.6.0 knows no polls.
type pollMessage struct {
	Nonce           string               `json:"nonce"`
	EnforceNonce    bool                 `json:"enforce_nonce"`
	AllowedMentions *api.AllowedMentions `json:"allowed_mentions"`
	Poll            pollRequest          `json:"poll"`
}

type pollRequest struct {
	Question    pollMedia    `json:"question"`
	Answers     []pollAnswer `json:"answers"`
	Hours       int          `json:"duration"`
	MultiSelect bool         `json:"allow_multiselect"`
}

type pollMedia struct {
	Text string `json:"text"`
}

type pollAnswer struct {
	Media pollMedia `json:"poll_media"`
}

// CreatePoll posts a poll and returns its message's id. The duration is
// rounded up to whole hours (Discord's unit); zero means Discord's
// default, a day. The nonce comes from the poll, as Send's does.
func (b *Bot) CreatePoll(ctx context.Context, channelID string, p actions.Poll) (string, error) {
	ch, err := parseID("channel", channelID)
	if err != nil {
		return "", err
	}
	hours := int((p.Duration + time.Hour - 1) / time.Hour)
	if p.Duration <= 0 {
		hours = 24
	}
	body := pollMessage{
		EnforceNonce:    true,
		AllowedMentions: noPings(false),
		Poll:            pollRequest{Question: pollMedia{p.Question}, Hours: hours, MultiSelect: p.MultiSelect},
	}
	for _, a := range p.Answers {
		body.Poll.Answers = append(body.Poll.Answers, pollAnswer{pollMedia{a}})
	}
	key := append([]string{strconv.Itoa(hours), strconv.FormatBool(p.MultiSelect)}, p.Answers...)
	body.Nonce = b.noncePrefix + "p" + contentKey(channelID, p.Question, key)
	id, err := b.postMessage(ctx, ch, body)
	if err != nil {
		return "", fmt.Errorf("post poll in channel %s: %w", channelID, refused(err))
	}
	return id.String(), nil
}

// Member returns a guild member.
func (b *Bot) Member(ctx context.Context, guildID, userID string) (actions.Member, error) {
	id, err := ids("guild", guildID, "user", userID)
	if err != nil {
		return actions.Member{}, err
	}
	m, err := b.client(ctx).Member(discord.GuildID(id[0]), discord.UserID(id[1]))
	if err == nil && m == nil {
		err = errNoAnswer
	}
	if err != nil {
		return actions.Member{}, fmt.Errorf("look up member %s: %w", userID, refused(err))
	}
	out := actions.Member{UserID: m.User.ID.String(), Username: m.User.Username, Nick: m.Nick, Joined: m.Joined.Time()}
	for _, r := range m.RoleIDs {
		out.RoleIDs = append(out.RoleIDs, r.String())
	}
	return out, nil
}

// Roles lists a guild's roles as Discord's role list shows them, highest
// first (@everyone last).
func (b *Bot) Roles(ctx context.Context, guildID string) ([]actions.Role, error) {
	g, err := parseID("guild", guildID)
	if err != nil {
		return nil, err
	}
	roles, err := b.client(ctx).Roles(discord.GuildID(g))
	if err != nil {
		return nil, fmt.Errorf("list the roles of guild %s: %w", guildID, refused(err))
	}
	sort.SliceStable(roles, func(i, j int) bool {
		if roles[i].Position != roles[j].Position {
			return roles[i].Position > roles[j].Position
		}
		return roles[i].ID < roles[j].ID
	})
	out := make([]actions.Role, len(roles))
	for i, r := range roles {
		out[i] = actions.Role{ID: r.ID.String(), Name: r.Name, Position: r.Position}
	}
	return out, nil
}

// AddRole gives a member a role; reason goes to the audit log.
func (b *Bot) AddRole(ctx context.Context, guildID, userID, roleID, reason string) error {
	id, err := ids("guild", guildID, "user", userID, "role", roleID)
	if err != nil {
		return err
	}
	err = b.client(ctx).AddRole(discord.GuildID(id[0]), discord.UserID(id[1]), discord.RoleID(id[2]),
		api.AddRoleData{AuditLogReason: auditReason(reason)})
	if err != nil {
		return fmt.Errorf("give role %s to member %s: %w", roleID, userID, refused(err))
	}
	return nil
}

// RemoveRole takes a role from a member; reason goes to the audit log.
func (b *Bot) RemoveRole(ctx context.Context, guildID, userID, roleID, reason string) error {
	id, err := ids("guild", guildID, "user", userID, "role", roleID)
	if err != nil {
		return err
	}
	err = b.client(ctx).RemoveRole(discord.GuildID(id[0]), discord.UserID(id[1]), discord.RoleID(id[2]), auditReason(reason))
	if err != nil {
		return fmt.Errorf("take role %s from member %s: %w", roleID, userID, refused(err))
	}
	return nil
}

// Defaults of an external event, which Discord requires to have an end and
// a location.
const (
	defaultEventLength   = time.Hour
	defaultEventLocation = "To be announced"
)

// eventCreate is the body of POST /guilds/{id}/scheduled-events for an
// external event: no channel. arikawa's CreateScheduledEventData always
// sends channel_id and image, null when unset.
type eventCreate struct {
	Name         string            `json:"name"`
	Description  string            `json:"description,omitempty"`
	PrivacyLevel int               `json:"privacy_level"`
	EntityType   int               `json:"entity_type"`
	Metadata     eventMetadata     `json:"entity_metadata"`
	Start        discord.Timestamp `json:"scheduled_start_time"`
	End          discord.Timestamp `json:"scheduled_end_time"`
}

type eventMetadata struct {
	Location string `json:"location"`
}

// CreateEvent schedules an external event (a place, not a voice channel),
// visible to the guild's members. Without an end it lasts an hour; without
// a location it says "To be announced".
func (b *Bot) CreateEvent(ctx context.Context, guildID string, e actions.Event) (actions.Event, error) {
	g, err := parseID("guild", guildID)
	if err != nil {
		return actions.Event{}, err
	}
	end := e.End
	if end.IsZero() {
		end = e.Start.Add(defaultEventLength)
	}
	loc := e.Location
	if strings.TrimSpace(loc) == "" {
		loc = defaultEventLocation
	}
	body := eventCreate{
		Name:         e.Name,
		Description:  e.Description,
		PrivacyLevel: int(discord.GuildOnly),
		EntityType:   int(discord.ExternalEntity),
		Metadata:     eventMetadata{Location: loc},
		Start:        discord.NewTimestamp(e.Start),
		End:          discord.NewTimestamp(end),
	}
	var out discord.GuildScheduledEvent
	err = b.client(ctx).RequestJSON(&out, "POST", api.EndpointGuilds+g.String()+"/scheduled-events", httputil.WithJSONBody(body))
	if err != nil {
		return actions.Event{}, fmt.Errorf("schedule event %q: %w", e.Name, refused(err))
	}
	return eventOf(out), nil
}

// Events lists a guild's scheduled events.
func (b *Bot) Events(ctx context.Context, guildID string) ([]actions.Event, error) {
	g, err := parseID("guild", guildID)
	if err != nil {
		return nil, err
	}
	evs, err := b.client(ctx).ListScheduledEvents(discord.GuildID(g), false)
	if err != nil {
		return nil, fmt.Errorf("list the events of guild %s: %w", guildID, refused(err))
	}
	out := make([]actions.Event, len(evs))
	for i, e := range evs {
		out[i] = eventOf(e)
	}
	return out, nil
}

// Timeout times a member out until then (Discord allows 28 days at
// most); a zero until lifts a timeout. reason goes to the audit log.
func (b *Bot) Timeout(ctx context.Context, guildID, userID string, until time.Time, reason string) error {
	id, err := ids("guild", guildID, "user", userID)
	if err != nil {
		return err
	}
	// A zero Timestamp is sent as null, which lifts the timeout.
	ts := discord.Timestamp{}
	if !until.IsZero() {
		ts = discord.NewTimestamp(until)
	}
	err = b.client(ctx).ModifyMember(discord.GuildID(id[0]), discord.UserID(id[1]), api.ModifyMemberData{
		CommunicationDisabledUntil: &ts,
		AuditLogReason:             auditReason(reason),
	})
	if err != nil {
		return fmt.Errorf("time out member %s: %w", userID, refused(err))
	}
	return nil
}

// Kick removes a member from a guild; reason goes to the audit log.
func (b *Bot) Kick(ctx context.Context, guildID, userID, reason string) error {
	id, err := ids("guild", guildID, "user", userID)
	if err != nil {
		return err
	}
	if err := b.client(ctx).Kick(discord.GuildID(id[0]), discord.UserID(id[1]), auditReason(reason)); err != nil {
		return fmt.Errorf("kick member %s: %w", userID, refused(err))
	}
	return nil
}

// Ban bans a user from a guild, keeping their messages; reason goes to
// the audit log.
func (b *Bot) Ban(ctx context.Context, guildID, userID, reason string) error {
	id, err := ids("guild", guildID, "user", userID)
	if err != nil {
		return err
	}
	err = b.client(ctx).Ban(discord.GuildID(id[0]), discord.UserID(id[1]), api.BanData{AuditLogReason: auditReason(reason)})
	if err != nil {
		return fmt.Errorf("ban user %s: %w", userID, refused(err))
	}
	return nil
}

// SetNickname sets the bot's nickname in a guild; "" removes it.
func (b *Bot) SetNickname(ctx context.Context, guildID, nickname string) error {
	g, err := parseID("guild", guildID)
	if err != nil {
		return err
	}
	if err := b.client(ctx).ModifyCurrentMember(discord.GuildID(g), nickname); err != nil {
		return fmt.Errorf("set the nickname in guild %s: %w", guildID, refused(err))
	}
	return nil
}

func channelOf(c discord.Channel) actions.Channel {
	out := actions.Channel{ID: c.ID.String(), Name: c.Name, Topic: c.Topic, Type: int(c.Type)}
	if c.ParentID.IsValid() {
		out.ParentID = c.ParentID.String()
	}
	return out
}

func channelsOf(cs []discord.Channel) []actions.Channel {
	out := make([]actions.Channel, len(cs))
	for i, c := range cs {
		out[i] = channelOf(c)
	}
	return out
}

// messageOf is a message as the actions show it; its attachments by URL
// (or name when Discord gave no URL).
func messageOf(m discord.Message) actions.Message {
	out := actions.Message{
		ID:        m.ID.String(),
		ChannelID: m.ChannelID.String(),
		AuthorID:  m.Author.ID.String(),
		Author:    displayName(m.Author, nil),
		Content:   m.Content,
		Time:      m.Timestamp.Time(),
		Pinned:    m.Pinned,
	}
	for _, a := range m.Attachments {
		if a.URL != "" {
			out.Attachments = append(out.Attachments, string(a.URL))
		} else {
			out.Attachments = append(out.Attachments, a.Filename)
		}
	}
	return out
}

func messagesOf(ms []discord.Message) []actions.Message {
	out := make([]actions.Message, len(ms))
	for i, m := range ms {
		out[i] = messageOf(m)
	}
	return out
}

func eventOf(e discord.GuildScheduledEvent) actions.Event {
	out := actions.Event{ID: e.ID.String(), Name: e.Name, Description: e.Description, Start: e.StartTime.Time()}
	if e.EndTime.IsValid() {
		out.End = e.EndTime.Time()
	}
	if e.EntityMetadata != nil {
		out.Location = e.EntityMetadata.Location
	}
	return out
}
