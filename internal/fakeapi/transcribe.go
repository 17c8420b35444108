package fakeapi

import (
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TranscriptionsPath is the path of OpenAI's speech-to-text endpoint.
const TranscriptionsPath = "/v1/audio/transcriptions"

// DefaultTranscript is the text the Transcribe fake answers once its
// script has run out.
const DefaultTranscript = "(no transcript scripted)"

// Transcribe is a fake OpenAI-compatible /v1/audio/transcriptions
// endpoint on 127.0.0.1: it checks what a client sends (POST, multipart
// form with a file and a model, the bearer key when Key is set), records
// every request, and answers each valid one with the next Transcript of
// its script. Safe for concurrent use.
type Transcribe struct {
	server *httptest.Server
	// Key, if set, is the bearer token every request must carry; a
	// request without it gets OpenAI's 401.
	key string

	closed    chan struct{}
	closeOnce sync.Once

	mu       sync.Mutex // guards the fields below
	script   []Transcript
	next     int
	requests []TranscribeRequest
	changed  chan struct{} // closed and replaced when requests change
}

// Transcript is one scripted answer.
type Transcript struct {
	// Text is the transcript, answered as {"text": Text} (or as plain
	// text when the request asked for response_format=text).
	Text string
	// Status, if not 0 or 200, is an error answer in OpenAI's shape with
	// Message as error.message.
	Status  int
	Message string
	// Stall holds the answer until the request is cancelled or the fake
	// closes.
	Stall bool
}

// TranscribeRequest is one request as the fake received it.
type TranscribeRequest struct {
	Method, Path  string
	Authorization string
	// Model, ResponseFormat and Language are the form's fields.
	Model, ResponseFormat, Language string
	// FileName, FileType and File are the uploaded file's.
	FileName, FileType string
	File               []byte
	// Problem says why the fake refused the request with 400 or 401;
	// empty for a request it answered from the script.
	Problem string
}

// NewTranscribe starts the fake; key, if set, is the bearer token it
// requires. The caller must Close it. Tests usually want StartTranscribe.
func NewTranscribe(key string, script ...Transcript) *Transcribe {
	f := &Transcribe{key: key, script: script, closed: make(chan struct{}), changed: make(chan struct{})}
	f.server = httptest.NewServer(f)
	return f
}

// StartTranscribe is NewTranscribe for a test: closed when it ends, its
// requests logged if it failed.
func StartTranscribe(tb testing.TB, key string, script ...Transcript) *Transcribe {
	tb.Helper()
	f := NewTranscribe(key, script...)
	tb.Cleanup(func() {
		f.Close()
		if tb.Failed() {
			for i, r := range f.Requests() {
				tb.Logf("fakeapi: transcription %d: %s %s model=%q file=%q (%d B) problem=%q", i, r.Method, r.Path, r.Model, r.FileName, len(r.File), r.Problem)
			}
		}
	})
	return f
}

// URL is the endpoint's full URL (…/v1/audio/transcriptions).
func (f *Transcribe) URL() string { return f.server.URL + TranscriptionsPath }

// Root is the server's root, e.g. http://127.0.0.1:41234.
func (f *Transcribe) Root() string { return f.server.URL }

// Close ends stalls, then shuts the server down. Safe to call twice.
func (f *Transcribe) Close() {
	f.closeOnce.Do(func() { close(f.closed) })
	f.server.Close()
}

// Add appends answers to the script.
func (f *Transcribe) Add(t ...Transcript) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.script = append(f.script, t...)
}

// Requests returns the requests so far, in order.
func (f *Transcribe) Requests() []TranscribeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]TranscribeRequest(nil), f.requests...)
}

// WaitFor waits until done holds for the requests so far, or ctx ends.
func (f *Transcribe) WaitFor(ctx context.Context, done func([]TranscribeRequest) bool) ([]TranscribeRequest, error) {
	for {
		f.mu.Lock()
		reqs := append([]TranscribeRequest(nil), f.requests...)
		changed := f.changed
		f.mu.Unlock()
		if done(reqs) {
			return reqs, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return reqs, fmt.Errorf("fakeapi: %d transcription requests: %w", len(reqs), ctx.Err())
		}
	}
}

// ServeHTTP checks and records one request and answers it.
func (f *Transcribe) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req := readTranscribeRequest(r)
	switch {
	case req.Problem != "":
	case f.key != "" && req.Authorization != "Bearer "+f.key:
		req.Problem = "missing or wrong bearer key"
	}
	f.mu.Lock()
	var t Transcript
	scripted := req.Problem == ""
	if scripted {
		t = Transcript{Text: DefaultTranscript}
		if f.next < len(f.script) {
			t = f.script[f.next]
			f.next++
		}
	}
	f.requests = append(f.requests, req)
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()

	switch {
	case req.Problem == "missing or wrong bearer key":
		writeTranscribeError(w, http.StatusUnauthorized, "Incorrect API key provided.", "invalid_request_error")
		return
	case !scripted:
		writeTranscribeError(w, http.StatusBadRequest, req.Problem, "invalid_request_error")
		return
	}
	if t.Stall {
		select {
		case <-r.Context().Done():
		case <-f.closed:
		}
		return
	}
	if t.Status != 0 && t.Status != http.StatusOK {
		writeTranscribeError(w, t.Status, t.Message, "server_error")
		return
	}
	if req.ResponseFormat == "text" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, t.Text+"\n")
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"text": t.Text})
}

// readTranscribeRequest reads the multipart form as OpenAI does, noting
// the first thing wrong with it.
func readTranscribeRequest(r *http.Request) TranscribeRequest {
	req := TranscribeRequest{Method: r.Method, Path: r.URL.Path, Authorization: r.Header.Get("Authorization")}
	switch {
	case r.Method != http.MethodPost:
		req.Problem = "method " + r.Method + ", want POST"
		return req
	case r.URL.Path != TranscriptionsPath:
		req.Problem = "path " + r.URL.Path + ", want " + TranscriptionsPath
		return req
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "multipart/form-data" {
		req.Problem = "content type " + r.Header.Get("Content-Type") + ", want multipart/form-data"
		return req
	}
	if err := r.ParseMultipartForm(32 << 20); err != nil {
		req.Problem = "unreadable form: " + err.Error()
		return req
	}
	req.Model = r.FormValue("model")
	req.ResponseFormat = r.FormValue("response_format")
	req.Language = r.FormValue("language")
	file, hdr, err := r.FormFile("file")
	if err != nil {
		req.Problem = "no file field"
		return req
	}
	defer file.Close()
	req.FileName, req.FileType = hdr.Filename, hdr.Header.Get("Content-Type")
	req.File, _ = io.ReadAll(file)
	switch {
	case req.Model == "":
		req.Problem = "no model field"
	case len(req.File) == 0:
		req.Problem = "empty file"
	case !strings.Contains(req.FileName, "."):
		req.Problem = "file name " + req.FileName + " has no extension to tell its format"
	case req.ResponseFormat != "" && req.ResponseFormat != "json" && req.ResponseFormat != "text":
		req.Problem = "response_format " + req.ResponseFormat + " not served by the fake"
	}
	return req
}

// writeTranscribeError answers in OpenAI's error shape.
func writeTranscribeError(w http.ResponseWriter, status int, message, typ string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": message, "type": typ, "param": nil, "code": nil}})
}
