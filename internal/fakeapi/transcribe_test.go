package fakeapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	"github.com/agentgateway/gateway/internal/fakeapi"
)

// post sends a transcription form: fields, then a file unless name is "".
func post(t *testing.T, url, auth string, fields map[string]string, name string, data []byte) (int, string) {
	t.Helper()
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	for k, v := range fields {
		w.WriteField(k, v)
	}
	if name != "" {
		fw, _ := w.CreateFormFile("file", name)
		fw.Write(data)
	}
	w.Close()
	req, _ := http.NewRequest("POST", url, &body)
	req.Header.Set("Content-Type", w.FormDataContentType())
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

func TestTranscribeFakeScript(t *testing.T) {
	t.Parallel()
	f := fakeapi.StartTranscribe(t, "k-1", fakeapi.Transcript{Text: "one"}, fakeapi.Transcript{Status: 503, Message: "busy"})
	json1 := map[string]string{"model": "whisper-1", "response_format": "json"}
	if code, body := post(t, f.URL(), "Bearer k-1", json1, "a.ogg", []byte("ogg")); code != 200 || !strings.Contains(body, `"text":"one"`) {
		t.Errorf("first: %d %s", code, body)
	}
	if code, body := post(t, f.URL(), "Bearer k-1", json1, "a.ogg", []byte("ogg")); code != 503 || !strings.Contains(body, "busy") {
		t.Errorf("second: %d %s", code, body)
	}
	text := map[string]string{"model": "whisper-1", "response_format": "text"}
	if code, body := post(t, f.URL(), "Bearer k-1", text, "a.ogg", []byte("ogg")); code != 200 || body != fakeapi.DefaultTranscript+"\n" {
		t.Errorf("after the script: %d %q", code, body)
	}
	if n := len(f.Requests()); n != 3 {
		t.Errorf("%d requests recorded, want 3", n)
	}
}

// Requests the fake refuses, and does not answer from its script.
func TestTranscribeFakeChecks(t *testing.T) {
	t.Parallel()
	f := fakeapi.StartTranscribe(t, "k-1", fakeapi.Transcript{Text: "kept for a valid request"})
	ok := map[string]string{"model": "whisper-1"}
	for name, tt := range map[string]struct {
		auth   string
		fields map[string]string
		file   string
		status int
	}{
		"no key":    {fields: ok, file: "a.ogg", status: 401},
		"wrong key": {auth: "Bearer k-2", fields: ok, file: "a.ogg", status: 401},
		"no model":  {auth: "Bearer k-1", fields: map[string]string{}, file: "a.ogg", status: 400},
		"no file":   {auth: "Bearer k-1", fields: ok, status: 400},
		"verbose":   {auth: "Bearer k-1", fields: map[string]string{"model": "m", "response_format": "srt"}, file: "a.ogg", status: 400},
	} {
		code, body := post(t, f.URL(), tt.auth, tt.fields, tt.file, []byte("ogg"))
		var e struct {
			Error struct{ Message string } `json:"error"`
		}
		if code != tt.status || json.Unmarshal([]byte(body), &e) != nil || e.Error.Message == "" {
			t.Errorf("%s: %d %s, want %d with an OpenAI error", name, code, body, tt.status)
		}
	}
	if code, body := post(t, f.Root()+"/v1/audio/translations", "Bearer k-1", ok, "a.ogg", []byte("ogg")); code != 400 {
		t.Errorf("wrong path: %d %s", code, body)
	}
	reqs, err := f.WaitFor(context.Background(), func(r []fakeapi.TranscribeRequest) bool { return len(r) == 6 })
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reqs {
		if r.Problem == "" {
			t.Errorf("request %+v recorded without its problem", r.Path)
		}
	}
	if code, body := post(t, f.URL(), "Bearer k-1", ok, "a.ogg", []byte("ogg")); code != 200 || !strings.Contains(body, "kept for a valid request") {
		t.Errorf("valid request after the refused ones: %d %s", code, body)
	}
}
