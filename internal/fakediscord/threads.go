package fakediscord

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/diamondburned/arikawa/v3/discord"
)

// This file is what the fake does with threads beyond creating them over
// REST (guild.go): their owner, members and archive state, the THREAD_*
// dispatches, unarchiving by a new message, locked threads, and the bot's
// permissions in a channel, which decide whether it may open threads.

// defaultArchive is the auto-archive duration of a thread made without
// one: three days, like a channel whose default was never changed.
const defaultArchive = 4320

// everyonePerms is what @everyone may do in a new Discord server, as far as
// text channels go (Manage Threads is not among them). The bot has no role
// of its own in the fake, so these are its permissions too unless an
// overwrite (DenyBot, AllowBot) changes them in a channel.
const everyonePerms = discord.PermissionCreateInstantInvite | discord.PermissionChangeNickname |
	discord.PermissionViewChannel | discord.PermissionSendMessages | discord.PermissionSendMessagesInThreads |
	discord.PermissionCreatePublicThreads | discord.PermissionCreatePrivateThreads |
	discord.PermissionEmbedLinks | discord.PermissionAttachFiles | discord.PermissionAddReactions |
	discord.PermissionUseExternalEmojis | discord.PermissionUseExternalStickers | discord.PermissionMentionEveryone |
	discord.PermissionReadMessageHistory | discord.PermissionUseSlashCommands | discord.PermissionSendVoiceMessages |
	discord.PermissionConnect | discord.PermissionSpeak | discord.PermissionStream | discord.PermissionUseVAD

// Errors of threads, as Discord words them.
var (
	threadArchived = apiError{Message: "Thread is archived", Code: 50083}
	threadLocked   = apiError{Message: "Thread is locked", Code: 160005}
)

// threadCreate is THREAD_CREATE as Discord sends it: the thread, with
// newly_created when it was just made (arikawa's ThreadCreateEvent has no
// such field; a bot reads it from the raw event if it needs it).
type threadCreate struct {
	discord.Channel
	NewlyCreated bool `json:"newly_created"`
}

// threadDelete is THREAD_DELETE: Discord sends only these fields.
type threadDelete struct {
	ID       discord.ChannelID   `json:"id"`
	GuildID  discord.GuildID     `json:"guild_id"`
	ParentID discord.ChannelID   `json:"parent_id"`
	Type     discord.ChannelType `json:"type"`
}

// addThreadLocked stores a new thread made by owner and announces it
// (THREAD_CREATE). Its creator is its first member.
func (s *Server) addThreadLocked(t Channel, owner discord.UserID, archiveAfter int) discord.Channel {
	t.OwnerID = owner
	s.channels[t.ID] = &channel{Channel: t, nonces: map[string]*Message{}}
	x := s.extraLocked(t.ID)
	x.archiveAfter = archiveAfter
	x.stamp = time.Now().UTC().Truncate(time.Millisecond)
	x.members = []discord.UserID{owner}
	out := s.channelOut(t)
	s.dispatchLocked("THREAD_CREATE", threadCreate{Channel: out, NewlyCreated: true})
	s.notifyLocked()
	return out
}

// StartThreadAsUser has user open a public thread named name in a text
// channel, not from a message, as a member of the server does from the
// channel's thread list: the thread is owned by user (the bot is not its
// owner), archives after three days, and is announced (THREAD_CREATE). It
// returns the thread's id.
func (s *Server) StartThreadAsUser(ch discord.ChannelID, user discord.User, name string) discord.ChannelID {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.mustTextChannel(ch)
	t := Channel{ID: discord.ChannelID(s.id()), GuildID: c.GuildID, ParentID: c.ID, Type: discord.GuildPublicThread, Name: name}
	return s.addThreadLocked(t, user.ID, defaultArchive).ID
}

// StartThreadOnMessage has user open a public thread on a message of a
// text channel, as Discord's "Create Thread" on a message does: the thread
// has the message's id and is owned by user. It panics when the message
// has a thread already.
func (s *Server) StartThreadOnMessage(ch discord.ChannelID, msg discord.MessageID, user discord.User, name string) discord.ChannelID {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.mustTextChannel(ch)
	if c.message(msg) == nil {
		panic(fmt.Sprintf("fakediscord: no message %s in channel %s", msg, ch))
	}
	if _, taken := s.channels[discord.ChannelID(msg)]; taken {
		panic(fmt.Sprintf("fakediscord: message %s has a thread already", msg))
	}
	t := Channel{ID: discord.ChannelID(msg), GuildID: c.GuildID, ParentID: c.ID, Type: discord.GuildPublicThread, Name: name}
	return s.addThreadLocked(t, user.ID, defaultArchive).ID
}

func (s *Server) mustTextChannel(ch discord.ChannelID) *channel {
	c := s.mustChannel(ch)
	if c.Type != discord.GuildText && c.Type != discord.GuildAnnouncement {
		panic(fmt.Sprintf("fakediscord: channel %s is not a text channel of a guild", ch))
	}
	return c
}

func (s *Server) mustThread(th discord.ChannelID) *channel {
	c := s.mustChannel(th)
	if !isThread(c.Type) {
		panic(fmt.Sprintf("fakediscord: channel %s is not a thread", th))
	}
	return c
}

// DeleteThread deletes a thread, as a moderator does: its messages are
// gone, THREAD_DELETE is dispatched, and the API answers 404 (code 10003,
// Unknown Channel) for it from then on. The message it started from, if
// any, stays in the parent channel.
func (s *Server) DeleteThread(th discord.ChannelID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deleteChannelLocked(s.mustThread(th))
	s.notifyLocked()
}

// LockThread locks a thread, as a moderator does (THREAD_UPDATE): only
// members with Manage Threads may post in it or unarchive it, which the
// bot may not unless AllowBot gave it Manage Threads, and Post panics.
func (s *Server) LockThread(th discord.ChannelID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.mustThread(th)
	s.extraLocked(th).locked = true
	s.dispatchLocked("THREAD_UPDATE", s.channelOut(c.Channel))
	s.notifyLocked()
}

// DenyBot puts a deny overwrite for the bot's member on a channel (a text
// channel, not a thread: threads follow their parent's overwrites), as an
// admin does in the channel's permissions: the overwrite is announced
// (CHANNEL_UPDATE), is in the channel from then on (GUILD_CREATE, GET), and
// the fake refuses what perms forbid with 403, code 50013 (Missing
// Permissions): Create Public Threads and Create Private Threads for the
// thread endpoints, Send Messages in the channel, Send Messages in Threads
// in its threads.
func (s *Server) DenyBot(ch discord.ChannelID, perms discord.Permissions) {
	s.overwriteBot(ch, 0, perms)
}

// AllowBot puts an allow overwrite for the bot's member on a channel, as
// DenyBot does a deny one; e.g. Manage Threads lets the bot post in and
// unarchive locked threads.
func (s *Server) AllowBot(ch discord.ChannelID, perms discord.Permissions) {
	s.overwriteBot(ch, perms, 0)
}

func (s *Server) overwriteBot(ch discord.ChannelID, allow, deny discord.Permissions) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.mustChannel(ch)
	if !c.GuildID.IsValid() || isThread(c.Type) {
		panic(fmt.Sprintf("fakediscord: channel %s takes no overwrites: it is a DM or a thread", ch))
	}
	x := s.extraLocked(ch)
	i := slices.IndexFunc(x.overwrites, func(o discord.Overwrite) bool {
		return o.Type == discord.OverwriteMember && o.ID == discord.Snowflake(s.Bot.ID)
	})
	if i < 0 {
		x.overwrites = append(x.overwrites, discord.Overwrite{ID: discord.Snowflake(s.Bot.ID), Type: discord.OverwriteMember})
		i = len(x.overwrites) - 1
	}
	o := &x.overwrites[i]
	o.Allow = (o.Allow &^ deny) | allow
	o.Deny = (o.Deny &^ allow) | deny
	s.dispatchLocked("CHANNEL_UPDATE", s.channelOut(c.Channel))
	s.notifyLocked()
}

// botMemberLocked is the bot as a member of g: no roles, so @everyone's
// permissions.
func (s *Server) botMemberLocked(g discord.GuildID) *Member {
	gs := s.gstateLocked()
	if gs.members[g] == nil {
		gs.members[g] = map[discord.UserID]*Member{}
	}
	m := gs.members[g][s.Bot.ID]
	if m == nil {
		m = &Member{User: s.Bot, Joined: time.Now().UTC().Truncate(time.Second)}
		gs.members[g][s.Bot.ID] = m
	}
	return m
}

// botPermsLocked is what the bot may do in a channel, computed as
// Discord (and arikawa's state) does: @everyone, the bot's roles, then the
// channel's overwrites; a thread takes its parent's. In a DM, everything.
func (s *Server) botPermsLocked(c *channel) discord.Permissions {
	if !c.GuildID.IsValid() {
		return discord.PermissionAll
	}
	base := c
	if isThread(c.Type) {
		if p, ok := s.channels[c.ParentID]; ok {
			base = p
		}
	}
	g := discord.Guild{ID: c.GuildID, OwnerID: s.Owner.ID}
	ch := discord.Channel{ID: base.ID, GuildID: c.GuildID, Overwrites: s.extraLocked(base.ID).overwrites}
	return discord.CalcOverrides(g, ch, s.botMemberLocked(c.GuildID).out(), s.rolesLocked(c.GuildID))
}

// sendRefusedLocked answers Discord's refusal of a message the bot posts
// in c: 403 (50013) without Send Messages (Send Messages in Threads in a
// thread); in a locked thread without Manage Threads, 400 (50083) when it
// is archived and 403 (160005) when not. ok is false when the message may
// go ahead.
func (s *Server) sendRefusedLocked(c *channel) (int, apiError, bool) {
	perms := s.botPermsLocked(c)
	need := discord.PermissionSendMessages
	if isThread(c.Type) {
		need = discord.PermissionSendMessagesInThreads
	}
	if !perms.Has(need) {
		return http.StatusForbidden, missingPerms, true
	}
	if !isThread(c.Type) {
		return 0, apiError{}, false
	}
	x := s.extraLocked(c.ID)
	if x.locked && !perms.Has(discord.PermissionManageThreads) {
		if !x.archivedAt.IsZero() {
			return http.StatusBadRequest, threadArchived, true
		}
		return http.StatusForbidden, threadLocked, true
	}
	return 0, apiError{}, false
}

// postingLocked is what Discord does before a message by author lands in
// c, a thread or not: an archived thread is unarchived (THREAD_UPDATE,
// before the message's MESSAGE_CREATE) and author joins the thread.
func (s *Server) postingLocked(c *channel, author discord.UserID) {
	if !isThread(c.Type) {
		return
	}
	x := s.extraLocked(c.ID)
	if !x.archivedAt.IsZero() {
		s.setArchivedLocked(c, false)
	}
	if !slices.Contains(x.members, author) {
		x.members = append(x.members, author)
	}
}

// userPostingLocked is postingLocked for a user's message (Post), which
// Discord's client would not let a member send in a locked thread.
func (s *Server) userPostingLocked(c *channel, author discord.UserID) {
	if isThread(c.Type) && s.extraLocked(c.ID).locked {
		panic(fmt.Sprintf("fakediscord: thread %s is locked: members without Manage Threads cannot post in it", c.ID))
	}
	s.postingLocked(c, author)
}

// setArchivedLocked archives or unarchives a thread and announces it
// (THREAD_UPDATE); its archive_timestamp is the time of the change.
func (s *Server) setArchivedLocked(c *channel, archived bool) {
	x := s.extraLocked(c.ID)
	now := time.Now().UTC().Truncate(time.Millisecond)
	x.archivedAt, x.stamp = time.Time{}, now
	if archived {
		x.archivedAt = now
	}
	s.dispatchLocked("THREAD_UPDATE", s.channelOut(c.Channel))
}

// threadEdit is what PATCH /channels/{thread} may change beyond the name.
type threadEdit struct {
	Archived     *bool `json:"archived"`
	Locked       *bool `json:"locked"`
	ArchiveAfter *int  `json:"auto_archive_duration"`
}

// editThreadRefusedLocked checks a PATCH of a thread as Discord does: an
// archived thread takes only a request that unarchives it (else 400,
// 50083); locking, unlocking and unarchiving a locked thread need Manage
// Threads, and archiving needs it too unless the bot owns the thread (else
// 403, 50013); the duration is one of Discord's four.
func (s *Server) editThreadRefusedLocked(c *channel, body []byte) (int, any, bool) {
	var in threadEdit
	if json.Unmarshal(body, &in) != nil {
		return http.StatusBadRequest, apiError{Message: "400: Bad Request", Code: 50109}, true
	}
	x := s.extraLocked(c.ID)
	manage := s.botPermsLocked(c).Has(discord.PermissionManageThreads)
	unarchives := in.Archived != nil && !*in.Archived
	switch {
	case !x.archivedAt.IsZero() && !unarchives:
		return http.StatusBadRequest, threadArchived, true
	case in.Locked != nil && *in.Locked != x.locked && !manage:
		return http.StatusForbidden, missingPerms, true
	case unarchives && x.locked && !manage:
		return http.StatusForbidden, missingPerms, true
	case in.Archived != nil && *in.Archived && c.OwnerID != s.Bot.ID && !manage:
		return http.StatusForbidden, missingPerms, true
	}
	if in.ArchiveAfter != nil && !validArchive(*in.ArchiveAfter) {
		return http.StatusBadRequest, archiveChoices(), true
	}
	return 0, nil, false
}

// applyThreadEditLocked carries out a checked PATCH of a thread; the
// caller dispatches THREAD_UPDATE.
func (s *Server) applyThreadEditLocked(c *channel, body []byte) {
	var in threadEdit
	json.Unmarshal(body, &in)
	x := s.extraLocked(c.ID)
	if in.Locked != nil {
		x.locked = *in.Locked
	}
	if in.ArchiveAfter != nil {
		x.archiveAfter = *in.ArchiveAfter
	}
	if in.Archived != nil && *in.Archived == x.archivedAt.IsZero() {
		now := time.Now().UTC().Truncate(time.Millisecond)
		x.archivedAt, x.stamp = time.Time{}, now
		if *in.Archived {
			x.archivedAt = now
		}
	}
}

func validArchive(minutes int) bool {
	return minutes == 60 || minutes == 1440 || minutes == 4320 || minutes == 10080
}

func archiveChoices() map[string]any {
	return formError("auto_archive_duration", "BASE_TYPE_CHOICES", "Value must be one of {60, 1440, 4320, 10080}.")
}

// activeThreadsLocked are a guild's threads that are not archived, as
// GUILD_CREATE lists them.
func (s *Server) activeThreadsLocked(g discord.GuildID) []discord.Channel {
	out := []discord.Channel{}
	for _, c := range s.channels {
		if c.GuildID == g && isThread(c.Type) && s.extraLocked(c.ID).archivedAt.IsZero() {
			out = append(out, s.channelOut(c.Channel))
		}
	}
	slices.SortFunc(out, func(a, b discord.Channel) int { return cmp.Compare(a.ID, b.ID) })
	return out
}
