package fakediscord

import (
	"cmp"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/gorilla/websocket"
)

// conn is one gateway WebSocket connection.
type conn struct {
	ws *websocket.Conn
	// wmu serializes writes; gorilla allows one writer at a time.
	wmu   sync.Mutex
	ready bool
}

type frame struct {
	Op   int             `json:"op"`
	Data json.RawMessage `json:"d"`
	Seq  int64           `json:"s,omitempty"`
	Type string          `json:"t,omitempty"`
}

func (s *Server) serveGateway(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	offline := s.offline
	s.mu.Unlock()
	if offline {
		http.Error(w, "gateway unavailable", http.StatusServiceUnavailable)
		return
	}
	ws, err := s.upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	c := &conn{ws: ws}
	s.mu.Lock()
	if old := s.conn; old != nil {
		old.ws.Close()
	}
	s.conn = c
	s.connects++
	s.sendLocked(c, 10, "", 0, map[string]any{"heartbeat_interval": heartbeatEvery})
	s.notifyLocked()
	s.mu.Unlock()

	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			s.mu.Lock()
			if s.conn == c {
				s.conn = nil
				s.notifyLocked()
			}
			s.mu.Unlock()
			return
		}
		var f frame
		if json.Unmarshal(data, &f) != nil {
			continue
		}
		s.mu.Lock()
		s.frames = append(s.frames, Frame{FromBot: true, Op: f.Op, Data: f.Data, Time: time.Now()})
		if s.conn == c {
			s.handleLocked(c, f)
		}
		s.notifyLocked()
		s.mu.Unlock()
	}
}

// handleLocked answers one frame from the bot.
func (s *Server) handleLocked(c *conn, f frame) {
	switch f.Op {
	case 1: // heartbeat
		s.sendLocked(c, 11, "", 0, nil)
	case 2: // identify
		var id struct {
			Token   string `json:"token"`
			Intents uint64 `json:"intents"`
		}
		json.Unmarshal(f.Data, &id)
		if strings.TrimPrefix(id.Token, "Bot ") != s.Token {
			s.closeLocked(c, 4004, "Authentication failed.")
			return
		}
		s.identifies++
		s.session = &gwSession{id: s.id().String(), resumable: true}
		guilds := make([]map[string]any, 0, len(s.guilds))
		for _, g := range s.guilds {
			guilds = append(guilds, map[string]any{"id": g.String(), "unavailable": true})
		}
		c.ready = true
		s.dispatchLocked("READY", map[string]any{
			"v":                  9,
			"session_id":         s.session.id,
			"resume_gateway_url": s.GatewayURL(),
			"user":               s.Bot,
			"guilds":             guilds,
			"application":        map[string]any{"id": s.App.String(), "flags": 0},
		})
		for _, g := range s.guilds {
			s.dispatchLocked("GUILD_CREATE", s.guildLocked(g))
		}
	case 6: // resume
		var rs struct {
			Token     string `json:"token"`
			SessionID string `json:"session_id"`
			Seq       int64  `json:"seq"`
		}
		json.Unmarshal(f.Data, &rs)
		if s.session == nil || !s.session.resumable || rs.SessionID != s.session.id ||
			strings.TrimPrefix(rs.Token, "Bot ") != s.Token {
			s.sendLocked(c, 9, "", 0, false)
			return
		}
		s.resumes++
		c.ready = true
		for _, missed := range s.session.log {
			if missed.Seq > rs.Seq {
				s.writeLocked(c, missed)
			}
		}
		s.dispatchLocked("RESUMED", map[string]any{})
	}
}

// dispatchLocked sends an event in the current session, or keeps it in
// the session's log for a RESUME if the bot is away.
func (s *Server) dispatchLocked(t string, d any) {
	if s.session == nil {
		return
	}
	raw, err := json.Marshal(d)
	if err != nil {
		panic(err)
	}
	s.session.seq++
	f := Frame{Op: 0, Type: t, Seq: s.session.seq, Data: raw}
	s.session.log = append(s.session.log, f)
	if s.conn != nil && s.conn.ready {
		s.writeLocked(s.conn, f)
	}
}

func (s *Server) sendLocked(c *conn, op int, t string, seq int64, d any) {
	raw, err := json.Marshal(d)
	if err != nil {
		panic(err)
	}
	s.writeLocked(c, Frame{Op: op, Type: t, Seq: seq, Data: raw})
}

func (s *Server) writeLocked(c *conn, f Frame) {
	f.Time = time.Now()
	s.frames = append(s.frames, f)
	b, _ := json.Marshal(frame{Op: f.Op, Data: f.Data, Seq: f.Seq, Type: f.Type})
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	c.ws.WriteMessage(websocket.TextMessage, b)
}

func (s *Server) closeLocked(c *conn, code int, reason string) {
	c.wmu.Lock()
	c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(time.Second))
	c.wmu.Unlock()
	c.ws.Close()
	if s.conn == c {
		s.conn = nil
	}
}

// guildLocked is GUILD_CREATE's guild, with what arikawa's state needs
// to compute the bot's permissions: the owner (not the bot), the roles
// with @everyone, the channels with their overwrites and the bot's own
// member. Like Discord, threads lists the active threads only.
func (s *Server) guildLocked(g discord.GuildID) map[string]any {
	chans := []discord.Channel{}
	for _, c := range s.channels {
		if c.GuildID == g && !isThread(c.Type) {
			chans = append(chans, s.channelOut(c.Channel))
		}
	}
	slices.SortFunc(chans, func(a, b discord.Channel) int { return cmp.Compare(a.ID, b.ID) })
	return map[string]any{
		"id":           g.String(),
		"name":         "guild " + g.String(),
		"owner_id":     s.Owner.ID.String(),
		"roles":        s.rolesLocked(g),
		"channels":     chans,
		"threads":      s.activeThreadsLocked(g),
		"members":      []discord.Member{s.botMemberLocked(g).out()},
		"member_count": len(s.gstateLocked().members[g]),
		"joined_at":    time.Now().Format(time.RFC3339),
	}
}

func (s *Server) announceGuild(g discord.GuildID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dispatchLocked("GUILD_CREATE", s.guildLocked(g))
}

// Disconnect drops the bot's connection: code 1006 drops the TCP
// connection without a close frame; other codes are sent as a close frame.
// With resumable false the session is gone and a RESUME is refused (op 9),
// so the bot must IDENTIFY again and missed dispatches are not replayed.
func (s *Server) Disconnect(code int, resumable bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.session != nil && !resumable {
		s.session.resumable = false
	}
	c := s.conn
	if c == nil {
		return
	}
	if code == websocket.CloseAbnormalClosure {
		c.ws.Close()
		s.conn = nil
	} else {
		s.closeLocked(c, code, "")
	}
	s.notifyLocked()
}

// Offline refuses new gateway connections until Online; with a connection
// dropped, what happens meanwhile is missed by the bot.
func (s *Server) Offline() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.offline = true
}

// Online accepts gateway connections again.
func (s *Server) Online() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.offline = false
}
