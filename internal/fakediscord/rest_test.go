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
)

// upload posts a message with one file as Discord takes it and returns the
// status and the decoded answer.
func upload(t *testing.T, s *Server, ch discord.ChannelID, field string, data []byte) (int, map[string]any) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="payload_json"`)
	h.Set("Content-Type", "application/json")
	w, _ := mw.CreatePart(h)
	w.Write([]byte(`{"content":"see file","nonce":"n1","enforce_nonce":true,"attachments":[{"id":0,"filename":"answer.md"}]}`))
	fw, _ := mw.CreateFormFile(field, "answer.md")
	fw.Write(data)
	mw.Close()
	req, _ := http.NewRequest("POST", s.APIBaseURL()+"/channels/"+ch.String()+"/messages", &buf)
	req.Header.Set("Authorization", "Bot "+s.Token)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func TestUploadsAreRecordedAndLimited(t *testing.T) {
	s := Start(t)
	_, ch := s.AddGuild("g")

	status, out := upload(t, s, ch, "files[0]", []byte("# the answer\n"))
	if status != 200 {
		t.Fatalf("status %d: %v", status, out)
	}
	if atts, _ := out["attachments"].([]any); len(atts) != 1 {
		t.Errorf("answer lists attachments %v, want one", out["attachments"])
	}
	msgs := s.BotMessages(ch)
	if len(msgs) != 1 || len(msgs[0].Files) != 1 {
		t.Fatalf("messages = %+v, want one with one file", msgs)
	}
	if f := msgs[0].Files[0]; f.Field != "files[0]" || f.Name != "answer.md" || string(f.Data) != "# the answer\n" || msgs[0].Nonce != "n1" {
		t.Errorf("recorded file %+v, nonce %q", f, msgs[0].Nonce)
	}

	status, out = upload(t, s, ch, "files[0]", make([]byte, MaxUploadSize+1))
	if status != http.StatusRequestEntityTooLarge || out["code"] != float64(40005) {
		t.Errorf("a file over the limit: status %d, %v; want 413 with code 40005", status, out)
	}
	if n := len(s.BotMessages(ch)); n != 1 {
		t.Errorf("%d messages after a refused upload, want 1", n)
	}
}

// Edits are recorded with their time; an edit sooner than LimitEdits
// allows gets a 429 with retry_after and changes nothing; deletes remove
// the message and are dispatched.
func TestEditsLimitsAndDeletes(t *testing.T) {
	s := Start(t)
	_, ch := s.AddGuild("g")
	post := func(method, path, body string) (int, string) {
		req, _ := http.NewRequest(method, s.APIBaseURL()+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bot "+s.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	status, body := post("POST", "/channels/"+ch.String()+"/messages", `{"content":"card"}`)
	if status != 200 {
		t.Fatalf("post = %d %s", status, body)
	}
	msgs := s.Messages(ch)
	id := msgs[len(msgs)-1].ID
	path := "/channels/" + ch.String() + "/messages/" + id.String()
	s.LimitEdits(time.Hour)
	if status, _ := post("PATCH", path, `{"content":"one"}`); status != 200 {
		t.Fatalf("first edit = %d", status)
	}
	status, body = post("PATCH", path, `{"content":"two"}`)
	if status != 429 || !strings.Contains(body, `"retry_after"`) || s.RateLimited() != 1 {
		t.Fatalf("quick second edit = %d %s (rate limited %d)", status, body, s.RateLimited())
	}
	edits := s.Edits(ch, id)
	if len(edits) != 1 || edits[0].Content != "one" || edits[0].Time.IsZero() {
		t.Fatalf("edits = %+v", edits)
	}
	if m, _ := s.Message(ch, id); m.EditedTimestamp.Time().IsZero() {
		t.Fatal("no edited timestamp")
	}
	if status, _ := post("DELETE", path, ""); status != 204 {
		t.Fatalf("delete = %d", status)
	}
	if status, _ := post("DELETE", path, ""); status != 404 {
		t.Fatalf("second delete = %d, want 404", status)
	}
	if d := s.Deleted(ch); len(d) != 1 || d[0] != id {
		t.Fatalf("Deleted = %v", d)
	}
}
