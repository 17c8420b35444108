package fakediscord

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/diamondburned/arikawa/v3/discord"
)

// maxContent is Discord's message length limit, in characters.
const maxContent = 2000

// MaxUploadSize is the largest file the fake takes, like Discord for a bot
// in a guild without boosts (10 MiB); larger ones get 413, code 40005.
const MaxUploadSize = 10 << 20

func (s *Server) serveREST(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimPrefix(r.URL.Path, "/api/v9")
	path = "/" + strings.TrimLeft(path, "/")
	body, _ := io.ReadAll(r.Body)

	s.mu.Lock()
	defer s.mu.Unlock()
	rec := Request{Method: r.Method, Path: path, Query: r.URL.RawQuery, Body: body, Time: time.Now()}
	status, out, hdr := s.routeLocked(r, path, body)
	rec.Status = status
	s.requests = append(s.requests, rec)
	s.notifyLocked()

	for k, v := range hdr {
		w.Header()[k] = v
	}
	if out == nil {
		w.WriteHeader(status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(out)
}

type apiError struct {
	Message    string  `json:"message"`
	Code       int     `json:"code"`
	RetryAfter float64 `json:"retry_after,omitempty"`
	Global     bool    `json:"global,omitempty"`
}

// routeLocked serves one REST call: faults first, then the endpoint.
func (s *Server) routeLocked(r *http.Request, path string, body []byte) (int, any, http.Header) {
	fault := s.faultLocked(r.Method, path)
	if fault != nil && !fault.Apply {
		return faultAnswer(fault)
	}
	status, out := s.endpointLocked(r, path, body)
	if fault != nil {
		return faultAnswer(fault)
	}
	return status, out, nil
}

func (s *Server) faultLocked(method, path string) *Fault {
	for i, f := range s.faults {
		if f.Method == method && strings.HasPrefix(path, f.Path) {
			f.Times--
			if f.Times <= 0 {
				s.faults = append(s.faults[:i], s.faults[i+1:]...)
			}
			return f
		}
	}
	return nil
}

func faultAnswer(f *Fault) (int, any, http.Header) {
	h := http.Header{}
	e := apiError{Message: http.StatusText(f.Status)}
	if f.Status == http.StatusTooManyRequests {
		e.Message = "You are being rate limited."
		if f.RetryAfter != "" {
			h.Set("Retry-After", f.RetryAfter)
			e.RetryAfter, _ = strconv.ParseFloat(f.RetryAfter, 64)
		}
		h.Set("X-RateLimit-Remaining", "0")
		h.Set("X-RateLimit-Scope", "user")
	}
	return f.Status, e, h
}

func (s *Server) endpointLocked(r *http.Request, path string, body []byte) (int, any) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	authed := r.Header.Get("Authorization") == "Bot "+s.Token
	public := parts[0] == "interactions" || parts[0] == "webhooks"
	if !authed && !public {
		return http.StatusUnauthorized, apiError{Message: "401: Unauthorized", Code: 0}
	}
	switch {
	case r.Method == "GET" && path == "/gateway/bot":
		return 200, map[string]any{
			"url": strings.TrimSuffix(s.GatewayURL(), "/gateway") + "/gateway", "shards": 1,
			"session_start_limit": map[string]any{"total": 1000, "remaining": 1000, "reset_after": 0, "max_concurrency": 1},
		}
	case r.Method == "GET" && path == "/gateway":
		return 200, map[string]any{"url": s.GatewayURL()}
	case r.Method == "GET" && path == "/users/@me":
		return 200, s.Bot
	case r.Method == "GET" && path == "/oauth2/applications/@me":
		return 200, map[string]any{"id": s.App.String(), "name": BotUsername}
	case len(parts) >= 2 && parts[0] == "channels":
		return s.channelEndpointLocked(r.Method, parts[1:], r.URL.Query(), r.Header.Get("Content-Type"), body)
	case len(parts) >= 2 && parts[0] == "guilds":
		return s.guildEndpointLocked(r, parts[1:], body)
	case r.Method == "PUT" && len(parts) == 3 && parts[0] == "applications" && parts[2] == "commands":
		return s.putCommandsLocked(body)
	case r.Method == "POST" && len(parts) == 4 && parts[0] == "interactions" && parts[3] == "callback":
		return s.callbackLocked(parts[1], parts[2], body)
	case len(parts) >= 3 && parts[0] == "webhooks":
		return s.webhookLocked(r.Method, parts[2], parts[3:], r.Header.Get("Content-Type"), body)
	}
	return http.StatusNotFound, apiError{Message: "404: Not Found", Code: 0}
}

func (s *Server) channelEndpointLocked(method string, parts []string, q map[string][]string, ctype string, body []byte) (int, any) {
	id, err := discord.ParseSnowflake(parts[0])
	c, ok := s.channels[discord.ChannelID(id)]
	if err != nil || !ok {
		return http.StatusNotFound, apiError{Message: "Unknown Channel", Code: 10003}
	}
	rest := parts[1:]
	switch {
	case method == "GET" && len(rest) == 0:
		return 200, s.channelOut(c.Channel)
	case method == "POST" && len(rest) == 1 && rest[0] == "typing":
		return http.StatusNoContent, nil
	case method == "POST" && len(rest) == 1 && rest[0] == "messages" && isPoll(ctype, body):
		return s.createPollLocked(c, body)
	case method == "POST" && len(rest) == 1 && rest[0] == "messages":
		return s.createMessageLocked(c, ctype, body)
	case method == "GET" && len(rest) == 1 && rest[0] == "messages":
		return 200, history(c, q)
	case method == "PATCH" && len(rest) == 2 && rest[0] == "messages":
		return s.editMessageLocked(c, rest[1], ctype, body)
	case (method == "PUT" || method == "DELETE") && len(rest) == 5 && rest[0] == "messages" && rest[2] == "reactions" && rest[4] == "@me":
		if status, e, refused := reactionRefused(c, rest[1], rest[3]); refused {
			return status, e
		}
		s.botReactionLocked(c, rest[1], rest[3], method == "PUT")
		return http.StatusNoContent, nil
	case method == "DELETE" && len(rest) == 2 && rest[0] == "messages":
		return s.deleteMessageLocked(c, rest[1])
	}
	return s.channelActionLocked(c, method, rest, body)
}

type sentMessage struct {
	Content          string               `json:"content"`
	Nonce            json.RawMessage      `json:"nonce"`
	EnforceNonce     bool                 `json:"enforce_nonce"`
	AllowedMentions  json.RawMessage      `json:"allowed_mentions"`
	Flags            discord.MessageFlags `json:"flags"`
	MessageReference *struct {
		MessageID discord.MessageID `json:"message_id"`
	} `json:"message_reference"`
	Attachments []struct {
		ID       json.RawMessage `json:"id"`
		Filename string          `json:"filename"`
	} `json:"attachments"`
	// Components is nil when absent or null; [] removes a message's.
	Components *discord.ContainerComponents `json:"components"`
}

// present says which fields of a sentMessage were sent, for edits.
type present struct {
	Content *string `json:"content"`
}

// readMessage decodes a message the bot sends (decodeMessage) and answers
// Discord's error for a message with neither content, files nor
// components, or content over maxContent.
func readMessage(ctype string, body []byte) (sentMessage, []File, *apiError, int) {
	in, _, files, aerr, status := decodeMessage(ctype, body)
	if aerr != nil {
		return in, nil, aerr, status
	}
	n := utf8.RuneCountInString(in.Content)
	hasComponents := in.Components != nil && len(*in.Components) > 0
	if (n == 0 && len(files) == 0 && !hasComponents) || n > maxContent {
		return in, nil, &apiError{Message: "Invalid Form Body: content must be 1-2000 characters", Code: 50035}, http.StatusBadRequest
	}
	return in, files, nil, 0
}

// decodeMessage decodes a message body: JSON, or, like Discord,
// multipart/form-data with the JSON in payload_json and files in files[n]
// (or the older file, fileN). It returns the JSON too, and answers
// Discord's error for a malformed body, invalid components or a file over
// MaxUploadSize.
func decodeMessage(ctype string, body []byte) (sentMessage, []byte, []File, *apiError, int) {
	malformed := &apiError{Message: "400: Bad Request", Code: 50109}
	var in sentMessage
	var files []File
	payload := body
	mt, params, _ := mime.ParseMediaType(ctype)
	if mt == "multipart/form-data" {
		mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
		payload = nil
		for {
			p, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				return in, nil, nil, malformed, http.StatusBadRequest
			}
			data, _ := io.ReadAll(p)
			name := p.FormName()
			switch {
			case name == "payload_json":
				if json.Unmarshal(data, &in) != nil {
					return in, nil, nil, malformed, http.StatusBadRequest
				}
				payload = data
			case fileField.MatchString(name):
				if len(data) > MaxUploadSize {
					return in, nil, nil, &apiError{Message: "Request entity too large", Code: 40005}, http.StatusRequestEntityTooLarge
				}
				files = append(files, File{Field: name, Name: p.FileName(), ContentType: p.Header.Get("Content-Type"), Data: data})
			}
		}
		if payload == nil {
			return in, nil, nil, malformed, http.StatusBadRequest
		}
	} else if err := json.Unmarshal(body, &in); err != nil {
		return in, nil, nil, malformed, http.StatusBadRequest
	}
	if in.Components != nil {
		fillLimits(*in.Components, payload)
		if aerr := checkComponents(*in.Components); aerr != nil {
			return in, nil, nil, aerr, http.StatusBadRequest
		}
	}
	return in, payload, files, nil, 0
}

// Discord's limits on a message's buttons.
const (
	maxRows        = 5
	maxRowButtons  = 5
	maxButtonLabel = 80  // characters
	maxCustomID    = 100 // characters
)

// checkComponents answers Discord's error for components it refuses: more
// than 5 rows, a row of 0 or more than 5 buttons, a button without a
// custom_id (links aside) or with one too long or used twice in the
// message, a label too long.
func checkComponents(cc discord.ContainerComponents) *apiError {
	invalid := func(what string) *apiError {
		return &apiError{Message: "Invalid Form Body: components: " + what, Code: 50035}
	}
	if len(cc) > maxRows {
		return invalid("more than 5 rows")
	}
	ids := map[discord.ComponentID]bool{}
	for _, c := range cc {
		row, ok := c.(*discord.ActionRowComponent)
		if !ok {
			return invalid("a top-level component is not an action row")
		}
		if len(*row) == 0 || len(*row) > maxRowButtons {
			return invalid("an action row must hold 1-5 buttons")
		}
		for _, ic := range *row {
			if what := checkRowComponent(ic, len(*row)); what != "" {
				return invalid(what)
			}
			b, ok := ic.(*discord.ButtonComponent)
			if !ok {
				continue
			}
			link := buttonStyle(b) == 5
			switch {
			case !link && (b.CustomID == "" || utf8.RuneCountInString(string(b.CustomID)) > maxCustomID):
				return invalid("custom_id must be 1-100 characters")
			case !link && ids[b.CustomID]:
				return invalid("custom_id " + strconv.Quote(string(b.CustomID)) + " is used twice")
			case utf8.RuneCountInString(b.Label) > maxButtonLabel:
				return invalid("label must be at most 80 characters")
			}
			ids[b.CustomID] = true
		}
	}
	return nil
}

var fileField = regexp.MustCompile(`^(files\[[0-9]+\]|file[0-9]*)$`)

// attachmentsOf describes uploaded files as Discord's attachments.
func (s *Server) attachmentsOf(files []File) []discord.Attachment {
	var out []discord.Attachment
	for _, f := range files {
		out = append(out, discord.Attachment{
			ID: discord.AttachmentID(s.id()), Filename: f.Name, ContentType: f.ContentType, Size: uint64(len(f.Data)),
		})
	}
	return out
}

// createMessageLocked posts the bot's message. Like Discord, a repeated
// nonce with enforce_nonce returns the message created the first time; a
// message in an archived thread unarchives it, and one the bot may not
// send is refused (sendRefusedLocked).
func (s *Server) createMessageLocked(c *channel, ctype string, body []byte) (int, any) {
	if status, e, refused := s.sendRefusedLocked(c); refused {
		return status, e
	}
	in, files, aerr, status := readMessage(ctype, body)
	if aerr != nil {
		return status, *aerr
	}
	nonce := strings.Trim(string(in.Nonce), `"`)
	if in.EnforceNonce && nonce != "" {
		if m, ok := c.nonces[nonce]; ok {
			return 200, m.Message
		}
	}
	m := &Message{
		Message: discord.Message{
			ID: discord.MessageID(s.id()), ChannelID: c.ID, GuildID: c.GuildID, Type: discord.DefaultMessage,
			Author: s.Bot, Content: in.Content, Timestamp: discord.NewTimestamp(time.Now()),
			Attachments: s.attachmentsOf(files),
		},
		Nonce:           nonce,
		AllowedMentions: in.AllowedMentions,
		Files:           files,
	}
	if in.Components != nil {
		m.Components = *in.Components
	}
	if in.MessageReference != nil {
		m.Type = discord.InlinedReplyMessage
		m.Reference = &discord.MessageReference{MessageID: in.MessageReference.MessageID, ChannelID: c.ID}
	}
	s.postingLocked(c, s.Bot.ID)
	c.messages = append(c.messages, m)
	s.botMessages++
	if nonce != "" {
		c.nonces[nonce] = m
	}
	s.dispatchLocked("MESSAGE_CREATE", m.Message)
	return 200, m.Message
}

// editMessageLocked edits one of the bot's messages: the content if sent,
// the components if sent ([] removes them), JSON or multipart.
func (s *Server) editMessageLocked(c *channel, id string, ctype string, body []byte) (int, any) {
	in, payload, _, aerr, status := decodeMessage(ctype, body)
	if aerr != nil {
		return status, *aerr
	}
	var has present
	json.Unmarshal(payload, &has)
	mid, _ := discord.ParseSnowflake(id)
	m := c.message(discord.MessageID(mid))
	if m == nil {
		return http.StatusNotFound, apiError{Message: "Unknown Message", Code: 10008}
	}
	if m.Author.ID != s.Bot.ID {
		return http.StatusForbidden, apiError{Message: "Cannot edit a message authored by another user", Code: 50005}
	}
	if wait, limited := s.editLimitedLocked(m); limited {
		return http.StatusTooManyRequests, apiError{Message: "You are being rate limited.", RetryAfter: wait.Seconds()}
	}
	if aerr := applyEdit(m, in, has); aerr != nil {
		return http.StatusBadRequest, *aerr
	}
	s.editedLocked(m)
	return 200, m.Message
}

// applyEdit changes a stored message as an edit or an UPDATE_MESSAGE
// callback does, or answers Discord's error for content too long.
func applyEdit(m *Message, in sentMessage, has present) *apiError {
	if has.Content != nil && utf8.RuneCountInString(*has.Content) > maxContent {
		return &apiError{Message: "Invalid Form Body: content must be 0-2000 characters", Code: 50035}
	}
	if has.Content != nil {
		m.Content = *has.Content
	}
	if in.Components != nil {
		m.Components = *in.Components
	}
	m.Edited = true
	return nil
}

// history answers GET /channels/{id}/messages?after=&limit= like Discord:
// the oldest messages after the cursor, newest first.
// history serves GET .../messages as Discord does: with after, the oldest
// limit messages after it; with before, the newest limit before it; with
// neither, the newest limit. Newest first in every case.
func history(c *channel, q map[string][]string) []discord.Message {
	limit := 50
	if v := first(q["limit"]); v != "" {
		limit, _ = strconv.Atoi(v)
	}
	var after, before discord.Snowflake
	if v := first(q["after"]); v != "" {
		after, _ = discord.ParseSnowflake(v)
	}
	if v := first(q["before"]); v != "" {
		before, _ = discord.ParseSnowflake(v)
	}
	var in []discord.Message
	for _, m := range c.messages {
		id := discord.Snowflake(m.ID)
		if id > after && (before == 0 || id < before) {
			msg := m.Message
			msg.GuildID = 0 // REST history carries no guild id
			in = append(in, msg)
		}
	}
	sort.Slice(in, func(i, j int) bool { return in[i].ID < in[j].ID })
	if len(in) > limit {
		if after != 0 {
			in = in[:limit]
		} else {
			in = in[len(in)-limit:]
		}
	}
	out := make([]discord.Message, 0, len(in))
	for i := len(in) - 1; i >= 0; i-- {
		out = append(out, in[i])
	}
	return out
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

func (s *Server) putCommandsLocked(body []byte) (int, any) {
	var cmds []map[string]any
	if err := json.Unmarshal(body, &cmds); err != nil {
		return http.StatusBadRequest, apiError{Message: "400: Bad Request", Code: 50109}
	}
	for _, c := range cmds {
		c["id"] = s.id().String()
		c["application_id"] = s.App.String()
		c["version"] = s.id().String()
	}
	s.commands, _ = json.Marshal(cmds)
	return 200, cmds
}

func (s *Server) callbackLocked(id, token string, body []byte) (int, any) {
	if token != "itoken-"+id {
		return http.StatusUnauthorized, apiError{Message: "Invalid interaction token", Code: 50027}
	}
	if len(s.callbacks[id]) > 0 {
		return http.StatusBadRequest, apiError{Message: "Interaction has already been acknowledged.", Code: 40060}
	}
	malformed := apiError{Message: "400: Bad Request", Code: 50109}
	var in struct {
		Type int             `json:"type"`
		Raw  json.RawMessage `json:"data"`
		Data *sentMessage    `json:"-"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return http.StatusBadRequest, malformed
	}
	if _, ok := s.completions[id]; ok || in.Type == 8 {
		return s.completeLocked(id, in.Type, in.Raw)
	}
	if in.Type == 9 {
		return s.openModalLocked(id, in.Raw)
	}
	var has present
	if len(in.Raw) > 0 && string(in.Raw) != "null" {
		in.Data = &sentMessage{}
		if json.Unmarshal(in.Raw, in.Data) != nil || json.Unmarshal(in.Raw, &has) != nil {
			return http.StatusBadRequest, malformed
		}
		if in.Data.Components != nil {
			fillLimits(*in.Data.Components, in.Raw)
			if aerr := checkComponents(*in.Data.Components); aerr != nil {
				return http.StatusBadRequest, *aerr
			}
		}
	}
	if in.Type == 6 || in.Type == 7 {
		// DEFERRED_UPDATE_MESSAGE and UPDATE_MESSAGE answer a press: the
		// pressed message changes (7) or stays (6); no answer is created.
		at, ok := s.pressed[id]
		if !ok {
			return http.StatusBadRequest, apiError{Message: "Interaction callback type is only valid for component interactions", Code: 50035}
		}
		if in.Type == 7 {
			m := s.channels[at.channel].message(at.message)
			if m == nil {
				m = s.answerLocked(at.message)
			}
			if m == nil {
				return http.StatusNotFound, apiError{Message: "Unknown Message", Code: 10008}
			}
			upd := sentMessage{}
			if in.Data != nil {
				upd = *in.Data
			}
			if aerr := applyEdit(m, upd, has); aerr != nil {
				return http.StatusBadRequest, *aerr
			}
		}
		s.callbacks[id] = append(s.callbacks[id], in.Type)
		return http.StatusNoContent, nil
	}
	s.callbacks[id] = append(s.callbacks[id], in.Type)
	// Both a message (4) and a deferral (5) create the original response;
	// a deferral shows "thinking" until the response is edited.
	m := Message{Message: discord.Message{ID: discord.MessageID(s.id()), Author: s.Bot}, Interaction: id, Original: true}
	if in.Data != nil {
		m.Content, m.AllowedMentions = in.Data.Content, in.Data.AllowedMentions
		m.Ephemeral = in.Data.Flags&discord.EphemeralMessage != 0
		if in.Data.Components != nil {
			m.Components = *in.Data.Components
		}
	}
	m.ChannelID = s.interactionChannel[id]
	s.answers = append(s.answers, m)
	return http.StatusNoContent, nil
}

// webhookLocked serves an interaction's webhook: PATCH messages/@original
// edits the (deferred) response; POST sends a follow-up.
func (s *Server) webhookLocked(method, token string, rest []string, ctype string, body []byte) (int, any) {
	id, ok := strings.CutPrefix(token, "itoken-")
	if !ok || len(s.callbacks[id]) == 0 {
		return http.StatusNotFound, apiError{Message: "Unknown Webhook", Code: 10015}
	}
	if method == "GET" && len(rest) == 2 && rest[0] == "messages" && rest[1] == "@original" {
		for i := range s.answers {
			if a := s.answers[i]; a.Interaction == id && a.Original {
				return 200, a.Message
			}
		}
		return http.StatusNotFound, apiError{Message: "Unknown Message", Code: 10008}
	}
	if method == "DELETE" && len(rest) == 2 && rest[0] == "messages" && rest[1] == "@original" {
		for i := range s.answers {
			if a := s.answers[i]; a.Interaction == id && a.Original {
				s.answers = append(s.answers[:i], s.answers[i+1:]...)
				return http.StatusNoContent, nil
			}
		}
		return http.StatusNotFound, apiError{Message: "Unknown Message", Code: 10008}
	}
	in, files, aerr, status := readMessage(ctype, body)
	if aerr != nil {
		return status, *aerr
	}
	switch {
	case method == "PATCH" && len(rest) == 2 && rest[0] == "messages" && rest[1] == "@original":
		for i := range s.answers {
			if a := &s.answers[i]; a.Interaction == id && a.Original {
				if wait, limited := s.editLimitedLocked(a); limited {
					return http.StatusTooManyRequests, apiError{Message: "You are being rate limited.", RetryAfter: wait.Seconds()}
				}
				a.Content, a.AllowedMentions, a.Edited = in.Content, in.AllowedMentions, true
				if in.Components != nil {
					a.Components = *in.Components
				}
				if len(files) > 0 {
					a.Files, a.Attachments = files, s.attachmentsOf(files)
				}
				s.editedLocked(a)
				return 200, a.Message
			}
		}
		return http.StatusNotFound, apiError{Message: "Unknown Message", Code: 10008}
	case method == "POST" && len(rest) == 0:
		m := Message{
			Message: discord.Message{
				ID: discord.MessageID(s.id()), Author: s.Bot, Content: in.Content, Attachments: s.attachmentsOf(files),
			},
			AllowedMentions: in.AllowedMentions, Interaction: id, Files: files,
		}
		s.answers = append(s.answers, m)
		return 200, m.Message
	}
	return http.StatusNotFound, apiError{Message: "404: Not Found", Code: 0}
}
