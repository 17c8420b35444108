package fakediscord

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/google/go-cmp/cmp"
	"github.com/gorilla/websocket"
)

// rowJSON is one action row of an Apply and a Discard button.
const rowJSON = `[{"type":1,"components":[` +
	`{"type":2,"style":3,"label":"Apply","custom_id":"apply:7"},` +
	`{"type":2,"style":4,"label":"Discard","custom_id":"discard:7"}]}]`

var applyDiscard = []Button{{ID: "apply:7", Label: "Apply", Style: 3}, {ID: "discard:7", Label: "Discard", Style: 4}}

// call makes a REST call as the bot and returns the status and the decoded
// answer.
func call(t *testing.T, s *Server, method, path, ctype string, body []byte) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, s.APIBaseURL()+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bot "+s.Token)
	req.Header.Set("Content-Type", ctype)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s %s answered %d with %q: %v", method, path, resp.StatusCode, raw, err)
		}
	}
	return resp.StatusCode, out
}

// multipartJSON is payload as multipart/form-data with only payload_json.
func multipartJSON(t *testing.T, payload string) (string, []byte) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="payload_json"`)
	h.Set("Content-Type", "application/json")
	w, _ := mw.CreatePart(h)
	w.Write([]byte(payload))
	mw.Close()
	return mw.FormDataContentType(), buf.Bytes()
}

func messageID(t *testing.T, out map[string]any) discord.MessageID {
	t.Helper()
	id, _ := out["id"].(string)
	sf, err := discord.ParseSnowflake(id)
	if err != nil {
		t.Fatalf("answer has no message id: %v", out)
	}
	return discord.MessageID(sf)
}

func TestMessageComponentsRoundTrip(t *testing.T) {
	s := Start(t)
	_, ch := s.AddGuild("g")
	path := "/channels/" + ch.String() + "/messages"

	status, out := call(t, s, "POST", path, "application/json",
		[]byte(`{"content":"Apply the change?","nonce":"b1","enforce_nonce":true,"components":`+rowJSON+`}`))
	if status != 200 {
		t.Fatalf("POST with components: %d %v", status, out)
	}
	if comps, _ := out["components"].([]any); len(comps) != 1 {
		t.Errorf("the created message carries components %v, want one row", out["components"])
	}
	jsonMsg := messageID(t, out)

	ctype, body := multipartJSON(t, `{"content":"Upload and apply?","components":`+rowJSON+`}`)
	status, out = call(t, s, "POST", path, ctype, body)
	if status != 200 {
		t.Fatalf("multipart POST with components: %d %v", status, out)
	}
	formMsg := messageID(t, out)

	for _, id := range []discord.MessageID{jsonMsg, formMsg} {
		m, ok := s.Message(ch, id)
		if !ok {
			t.Fatalf("message %s not stored", id)
		}
		if diff := cmp.Diff(applyDiscard, m.Buttons()); diff != "" {
			t.Errorf("buttons of %s (-want +got):\n%s", id, diff)
		}
	}

	// An edit without components keeps them; components [] removes them.
	status, out = call(t, s, "PATCH", path+"/"+jsonMsg.String(), "application/json", []byte(`{"content":"Still open"}`))
	if status != 200 {
		t.Fatalf("PATCH content: %d %v", status, out)
	}
	if m, _ := s.Message(ch, jsonMsg); m.Content != "Still open" || len(m.Buttons()) != 2 || !m.Edited {
		t.Errorf("after a content edit: %q, buttons %v, edited %v; want the new content and both buttons", m.Content, m.Buttons(), m.Edited)
	}
	ctype, body = multipartJSON(t, `{"content":"Applied.","components":[]}`)
	status, out = call(t, s, "PATCH", path+"/"+jsonMsg.String(), ctype, body)
	if status != 200 {
		t.Fatalf("PATCH components []: %d %v", status, out)
	}
	if m, _ := s.Message(ch, jsonMsg); m.Content != "Applied." || len(m.Buttons()) != 0 {
		t.Errorf("after removing components: %q, buttons %v; want Applied. and none", m.Content, m.Buttons())
	}
	if m, _ := s.Message(ch, formMsg); len(m.Buttons()) != 2 {
		t.Errorf("the other message lost its buttons: %v", m.Buttons())
	}

	refused := []struct{ name, components string }{
		{"six buttons", `[{"type":1,"components":[` + strings.Repeat(`{"type":2,"style":1,"label":"x","custom_id":"a"},`, 5) + `{"type":2,"style":1,"label":"x","custom_id":"b"}]}]`},
		{"duplicate id", `[{"type":1,"components":[{"type":2,"style":1,"label":"x","custom_id":"a"},{"type":2,"style":1,"label":"y","custom_id":"a"}]}]`},
		{"no id", `[{"type":1,"components":[{"type":2,"style":1,"label":"x"}]}]`},
		{"long label", `[{"type":1,"components":[{"type":2,"style":1,"label":"` + strings.Repeat("x", 81) + `","custom_id":"a"}]}]`},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			status, out := call(t, s, "POST", path, "application/json", []byte(`{"content":"x","components":`+tc.components+`}`))
			if status != 400 || out["code"] != float64(50035) {
				t.Errorf("got %d %v, want 400 with code 50035", status, out)
			}
		})
	}
}

// botGateway is a minimal bot session on the fake's gateway.
type botGateway struct {
	t  *testing.T
	ws *websocket.Conn
}

func dialGateway(t *testing.T, s *Server) *botGateway {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(s.GatewayURL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	g := &botGateway{t: t, ws: ws}
	g.next("") // HELLO
	ws.WriteJSON(map[string]any{"op": 2, "d": map[string]any{"token": s.Token, "intents": 0}})
	g.next("READY")
	return g
}

// next reads frames until a dispatch of type t (any frame when t is "").
func (g *botGateway) next(t string) json.RawMessage {
	g.t.Helper()
	g.ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		var f frame
		if err := g.ws.ReadJSON(&f); err != nil {
			g.t.Fatalf("waiting for %q: %v", t, err)
		}
		if t == "" || f.Type == t {
			return f.Data
		}
	}
}

func TestPressAndUpdateMessage(t *testing.T) {
	s := Start(t)
	g, ch := s.AddGuild("g")
	dm := s.AddChannel(Channel{})
	gw := dialGateway(t, s)
	alice := s.User("alice")

	post := func(ch discord.ChannelID) discord.MessageID {
		status, out := call(t, s, "POST", "/channels/"+ch.String()+"/messages", "application/json",
			[]byte(`{"content":"Apply the change?","components":`+rowJSON+`}`))
		if status != 200 {
			t.Fatalf("POST: %d %v", status, out)
		}
		return messageID(t, out)
	}
	msg := post(ch)
	gw.next("MESSAGE_CREATE")

	perms := discord.PermissionManageGuild | discord.PermissionSendMessages
	id := s.Press(ch, msg, alice, "apply:7", perms)
	raw := gw.next("INTERACTION_CREATE")
	var ev discord.InteractionEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	press, ok := ev.Data.(*discord.ButtonInteraction)
	if !ok || press.CustomID != "apply:7" {
		t.Fatalf("interaction data %#v, want a press of apply:7", ev.Data)
	}
	if ev.ID.String() != id || ev.ChannelID != ch || ev.GuildID != g || ev.Message == nil || ev.Message.ID != msg ||
		ev.Member == nil || ev.Member.User.ID != alice.ID || ev.Token != "itoken-"+id {
		t.Errorf("interaction %+v: want id %s in channel %s of guild %s on message %s by alice", ev, id, ch, g, msg)
	}
	var member struct {
		Member struct {
			Permissions string `json:"permissions"`
		} `json:"member"`
	}
	json.Unmarshal(raw, &member)
	if want := "2080"; member.Member.Permissions != want {
		t.Errorf("member.permissions = %q, want %q (a decimal string)", member.Member.Permissions, want)
	}

	callback := func(id, body string) (int, map[string]any) {
		return call(t, s, "POST", "/interactions/"+id+"/itoken-"+id+"/callback", "application/json", []byte(body))
	}
	status, out := callback(id, `{"type":7,"data":{"content":"Applied by alice.","components":[]}}`)
	if status != http.StatusNoContent {
		t.Fatalf("UPDATE_MESSAGE: %d %v", status, out)
	}
	m, _ := s.Message(ch, msg)
	if m.Content != "Applied by alice." || len(m.Buttons()) != 0 || !m.Edited {
		t.Errorf("after UPDATE_MESSAGE: %q, buttons %v, edited %v", m.Content, m.Buttons(), m.Edited)
	}
	if diff := cmp.Diff([]int{7}, s.Callbacks(id)); diff != "" {
		t.Errorf("callbacks (-want +got):\n%s", diff)
	}
	if a := s.Answers(); len(a) != 0 {
		t.Errorf("UPDATE_MESSAGE created answers %+v", a)
	}
	if status, out := callback(id, `{"type":4,"data":{"content":"again"}}`); status != 400 || out["code"] != float64(40060) {
		t.Errorf("a second callback: %d %v, want 400 with code 40060", status, out)
	}

	// In a DM the presser is a user, and an ephemeral notice is an answer.
	dmMsg := post(dm)
	id = s.Press(dm, dmMsg, alice, "discard:7", 0)
	raw = gw.next("INTERACTION_CREATE")
	ev = discord.InteractionEvent{}
	json.Unmarshal(raw, &ev)
	if ev.User == nil || ev.User.ID != alice.ID || ev.Member != nil || ev.GuildID.IsValid() {
		t.Errorf("DM press %+v: want user alice and no member or guild", ev)
	}
	if status, out := callback(id, `{"type":4,"data":{"content":"Only you see this.","flags":64}}`); status != http.StatusNoContent {
		t.Fatalf("ephemeral answer: %d %v", status, out)
	}
	if a := s.Answers(); len(a) != 1 || a[0].Interaction != id || !a[0].Ephemeral || a[0].Content != "Only you see this." {
		t.Errorf("answers %+v, want the ephemeral notice", a)
	}
	if m, _ := s.Message(dm, dmMsg); m.Edited || len(m.Buttons()) != 2 {
		t.Errorf("an ephemeral answer changed the message: %+v", m)
	}

	// UPDATE_MESSAGE answers presses only.
	cmd := s.Interact(ch, alice, "claude", map[string]string{"prompt": "hi"})
	if status, _ := callback(cmd, `{"type":7,"data":{"content":"x"}}`); status != 400 {
		t.Errorf("UPDATE_MESSAGE on a slash command: %d, want 400", status)
	}
}

func TestPressRefusesAMissingButton(t *testing.T) {
	s := Start(t)
	_, ch := s.AddGuild("g")
	plain := s.Post(ch, s.User("bob"), "no buttons here")
	defer func() {
		if recover() == nil {
			t.Error("Press on a message without that button did not panic")
		}
	}()
	s.Press(ch, plain.ID, s.User("alice"), "apply:7", 0)
}
