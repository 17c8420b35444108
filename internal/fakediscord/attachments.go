package fakediscord

import (
	"net/http"
	"net/url"
	"time"

	"github.com/diamondburned/arikawa/v3/discord"
)

// Upload is a file a user attaches to a message or a slash command.
type Upload struct {
	Name        string
	ContentType string
	Data        []byte
}

// attachLocked stores up and returns it as Discord describes an
// attachment, its URL on the fake's own host (Discord serves attachments
// from its CDN; the gateway also takes the host of DISCORD_API_BASE_URL).
func (s *Server) attachLocked(up Upload) discord.Attachment {
	id := s.id()
	path := "/attachments/" + id.String() + "/" + url.PathEscape(up.Name)
	if s.uploads == nil {
		s.uploads = map[string]Upload{}
	}
	s.uploads[path] = up
	return discord.Attachment{
		ID: discord.AttachmentID(id), Filename: up.Name, ContentType: up.ContentType, Size: uint64(len(up.Data)),
		URL: discord.URL(s.HTTP.URL + path), Proxy: discord.URL(s.HTTP.URL + path),
	}
}

// serveAttachment serves an uploaded file's bytes, like Discord's CDN,
// to anyone with the link (no token), and counts the downloads.
func (s *Server) serveAttachment(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	up, ok := s.uploads[r.URL.EscapedPath()]
	if ok {
		s.downloads++
	}
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	if up.ContentType != "" {
		w.Header().Set("Content-Type", up.ContentType)
	}
	w.Write(up.Data)
}

// Downloads is how many attachment downloads the fake served.
func (s *Server) Downloads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.downloads
}

// PostFiles is Post with files attached, served by the fake.
func (s *Server) PostFiles(ch discord.ChannelID, author discord.User, content string, uploads []Upload, mentions ...discord.User) discord.Message {
	s.mu.Lock()
	var atts []discord.Attachment
	for _, up := range uploads {
		atts = append(atts, s.attachLocked(up))
	}
	s.mu.Unlock()
	return s.PostAttachments(ch, author, content, atts, mentions...)
}

// PostAttachments is Post with attachments as given: their URLs may point
// anywhere (a foreign host, a lying size). In an archived thread the
// message unarchives it first (THREAD_UPDATE), as Discord does; it panics
// in a locked thread, where a member cannot post.
func (s *Server) PostAttachments(ch discord.ChannelID, author discord.User, content string, atts []discord.Attachment, mentions ...discord.User) discord.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.mustChannel(ch)
	m := &Message{Message: discord.Message{
		ID:          discord.MessageID(s.id()),
		ChannelID:   ch,
		GuildID:     c.GuildID,
		Type:        discord.DefaultMessage,
		Author:      author,
		Content:     content,
		Attachments: atts,
		Timestamp:   discord.NewTimestamp(time.Now()),
	}}
	for _, u := range mentions {
		m.Mentions = append(m.Mentions, discord.GuildUser{User: u})
	}
	s.userPostingLocked(c, author.ID)
	c.messages = append(c.messages, m)
	s.dispatchLocked("MESSAGE_CREATE", s.messageCreateLocked(m))
	s.notifyLocked()
	return m.Message
}
