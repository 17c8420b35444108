package fakediscord

import (
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/diamondburned/arikawa/v3/discord"
)

// LimitEdits makes the fake answer an edit of a message that comes less
// than every after the message's previous accepted edit with a 429 and
// its retry_after, as Discord's per-route limits do to a bot that edits
// too fast. Zero lifts the limit.
func (s *Server) LimitEdits(every time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.editEvery = every
}

// RateLimited counts the edits answered with a 429 by LimitEdits.
func (s *Server) RateLimited() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rateLimited
}

// editLimitedLocked reports whether an edit of m now breaks the limit, and
// how long is left until it would not.
func (s *Server) editLimitedLocked(m *Message) (time.Duration, bool) {
	if s.editEvery <= 0 || len(m.Edits) == 0 {
		return 0, false
	}
	since := time.Since(m.Edits[len(m.Edits)-1].Time)
	if since >= s.editEvery {
		return 0, false
	}
	s.rateLimited++
	return s.editEvery - since, true
}

// editedLocked records an accepted edit of m.
func (s *Server) editedLocked(m *Message) {
	now := time.Now()
	m.EditedTimestamp = discord.NewTimestamp(now)
	m.Edits = append(m.Edits, Edit{Time: now, Content: m.Content, Buttons: m.Buttons()})
}

// Edits returns the accepted edits of a message in a channel, or of an
// interaction's response when ch is zero and id is the interaction's id.
func (s *Server) Edits(ch discord.ChannelID, id discord.MessageID) []Edit {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.channels[ch]; ok {
		if m := c.message(id); m != nil {
			return slices.Clone(m.Edits)
		}
	}
	return nil
}

// AnswerEdits returns the accepted edits of an interaction's response.
func (s *Server) AnswerEdits(interaction string) []Edit {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.answers {
		if a.Interaction == interaction && a.Original {
			return slices.Clone(a.Edits)
		}
	}
	return nil
}

// deleteMessageLocked serves DELETE /channels/{c}/messages/{id}.
func (s *Server) deleteMessageLocked(c *channel, id string) (int, any) {
	mid, _ := discord.ParseSnowflake(id)
	i := slices.IndexFunc(c.messages, func(m *Message) bool { return m.ID == discord.MessageID(mid) })
	if i < 0 {
		return http.StatusNotFound, apiError{Message: "Unknown Message", Code: 10008}
	}
	c.messages = append(c.messages[:i], c.messages[i+1:]...)
	if s.deleted == nil {
		s.deleted = map[discord.ChannelID][]discord.MessageID{}
	}
	s.deleted[c.ID] = append(s.deleted[c.ID], discord.MessageID(mid))
	ev := map[string]any{"id": id, "channel_id": c.ID.String()}
	if c.GuildID.IsValid() {
		ev["guild_id"] = c.GuildID.String()
	}
	s.dispatchLocked("MESSAGE_DELETE", ev)
	return http.StatusNoContent, nil
}

// Deleted returns the ids of the messages deleted in a channel, in order.
func (s *Server) Deleted(ch discord.ChannelID) []discord.MessageID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.deleted[ch])
}

// botReactionLocked records the bot's own reaction (PUT) or its removal.
func (s *Server) botReactionLocked(c *channel, msg, emoji string, add bool) {
	mid, _ := discord.ParseSnowflake(msg)
	m := c.message(discord.MessageID(mid))
	if m == nil {
		return
	}
	if e, err := url.PathUnescape(emoji); err == nil {
		emoji = e
	}
	if add {
		addReaction(m, emoji, s.Bot.ID)
		return
	}
	if m.Reactions == nil {
		return // removing a reaction that is not there is no error on Discord
	}
	m.Reactions[emoji] = slices.DeleteFunc(m.Reactions[emoji], func(u discord.UserID) bool { return u == s.Bot.ID })
}

func addReaction(m *Message, emoji string, user discord.UserID) {
	if m.Reactions == nil {
		m.Reactions = map[string][]discord.UserID{}
	}
	if !slices.Contains(m.Reactions[emoji], user) {
		m.Reactions[emoji] = append(m.Reactions[emoji], user)
	}
}

// React has user react to a message with a unicode emoji: Discord records
// it and dispatches MESSAGE_REACTION_ADD, with the member in a guild.
func (s *Server) React(ch discord.ChannelID, msg discord.MessageID, user discord.User, emoji string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.mustChannel(ch)
	m := c.message(msg)
	if m == nil {
		panic("fakediscord: React on a message that does not exist")
	}
	addReaction(m, emoji, user.ID)
	ev := map[string]any{
		"user_id":           user.ID.String(),
		"channel_id":        ch.String(),
		"message_id":        msg.String(),
		"message_author_id": m.Author.ID.String(),
		"emoji":             map[string]any{"id": nil, "name": emoji},
		"burst":             false,
		"type":              0,
	}
	if c.GuildID.IsValid() {
		ev["guild_id"] = c.GuildID.String()
		ev["member"] = s.memberJSONLocked(c.GuildID, user, nil, true)
	}
	s.dispatchLocked("MESSAGE_REACTION_ADD", ev)
}

// Reactions returns who reacted to a message, by emoji.
func (s *Server) Reactions(ch discord.ChannelID, msg discord.MessageID) map[string][]discord.UserID {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]discord.UserID{}
	if c, ok := s.channels[ch]; ok {
		if m := c.message(msg); m != nil {
			for k, v := range m.Reactions {
				out[k] = slices.Clone(v)
			}
		}
	}
	return out
}
