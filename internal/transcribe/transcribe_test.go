package transcribe_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentgateway/gateway/internal/fakeapi"
	"github.com/agentgateway/gateway/internal/fakediscord"
	"github.com/agentgateway/gateway/internal/transcribe"
)

const key = "sk-test-0123456789abcdef"

func voice() transcribe.Audio {
	return transcribe.Audio{Name: "voice-message.ogg", ContentType: "audio/ogg", Data: fakediscord.OggOpus(3 * time.Second)}
}

func TestTranscribeSendsTheFormAndReadsTheText(t *testing.T) {
	t.Parallel()
	fake := fakeapi.StartTranscribe(t, key, fakeapi.Transcript{Text: "  deploy the staging branch \n"})
	c := transcribe.New(fake.Root(), key, "whisper-1")
	got, err := c.Transcribe(context.Background(), voice())
	if err != nil {
		t.Fatal(err)
	}
	if got != "deploy the staging branch" {
		t.Errorf("transcript = %q", got)
	}
	reqs := fake.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	want := fakeapi.TranscribeRequest{
		Method: "POST", Path: fakeapi.TranscriptionsPath, Authorization: "Bearer " + key,
		Model: "whisper-1", ResponseFormat: "json", FileName: "voice-message.ogg", FileType: "audio/ogg",
		File: voice().Data,
	}
	if diff := cmp.Diff(want, reqs[0]); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}
}

func TestTranscribeWithoutKeySendsNoAuthorization(t *testing.T) {
	t.Parallel()
	fake := fakeapi.StartTranscribe(t, "", fakeapi.Transcript{Text: "hello"})
	c := transcribe.New(fake.URL(), "", "large-v3")
	if _, err := c.Transcribe(context.Background(), voice()); err != nil {
		t.Fatal(err)
	}
	if r := fake.Requests()[0]; r.Authorization != "" || r.Model != "large-v3" {
		t.Errorf("authorization %q, model %q; want none and large-v3", r.Authorization, r.Model)
	}
}

func TestEndpoint(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://api.openai.com/v1/audio/transcriptions": "https://api.openai.com/v1/audio/transcriptions",
		"https://api.openai.com/v1":                      "https://api.openai.com/v1/audio/transcriptions",
		"https://api.openai.com/v1/":                     "https://api.openai.com/v1/audio/transcriptions",
		"http://localhost:8000":                          "http://localhost:8000/v1/audio/transcriptions",
		"http://whisper.lan:9000/":                       "http://whisper.lan:9000/v1/audio/transcriptions",
		"http://gpu:8080/inference/v1":                   "http://gpu:8080/inference/v1/audio/transcriptions",
	} {
		if got := transcribe.Endpoint(in); got != want {
			t.Errorf("Endpoint(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestTranscribeErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		clientKey string
		answer    fakeapi.Transcript
		audio     transcribe.Audio
		is        error
		status    int
		transient bool
		requests  int
	}{
		{name: "wrong key", clientKey: "sk-wrong-key-000000", answer: fakeapi.Transcript{Text: "x"}, status: 401, requests: 1},
		{name: "server error", answer: fakeapi.Transcript{Status: 500, Message: "model crashed"}, status: 500, transient: true, requests: 1},
		{name: "overloaded", answer: fakeapi.Transcript{Status: 503}, status: 503, transient: true, requests: 1},
		{name: "rate limited", answer: fakeapi.Transcript{Status: 429, Message: "slow down"}, status: 429, transient: true, requests: 1},
		{name: "bad audio", answer: fakeapi.Transcript{Status: 400, Message: "Invalid file format."}, status: 400, requests: 1},
		{name: "endpoint's size limit", answer: fakeapi.Transcript{Status: 413, Message: "too big"}, is: transcribe.ErrTooLarge, status: 413, requests: 1},
		{name: "empty transcript", answer: fakeapi.Transcript{Text: " \n "}, is: transcribe.ErrEmpty, requests: 1},
		{name: "over 25 MB", audio: transcribe.Audio{Name: "v.ogg", Data: make([]byte, transcribe.MaxUpload+1)}, is: transcribe.ErrTooLarge},
		{name: "no audio", audio: transcribe.Audio{Name: "v.ogg"}, is: transcribe.ErrNoAudio},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fake := fakeapi.StartTranscribe(t, key, tt.answer)
			k := key
			if tt.clientKey != "" {
				k = tt.clientKey
			}
			audio := tt.audio
			if audio.Name == "" {
				audio = voice()
			}
			_, err := transcribe.New(fake.Root(), k, "whisper-1").Transcribe(context.Background(), audio)
			if err == nil {
				t.Fatal("no error")
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %v, want %v", err, tt.is)
			}
			var se *transcribe.StatusError
			switch {
			case tt.status != 0 && !errors.As(err, &se):
				t.Errorf("error %v is no StatusError", err)
			case tt.status != 0 && (se.Status != tt.status || se.Transient() != tt.transient):
				t.Errorf("status %d transient %v, want %d %v", se.Status, se.Transient(), tt.status, tt.transient)
			}
			if strings.Contains(err.Error(), k) {
				t.Errorf("error %q carries the key", err)
			}
			if n := len(fake.Requests()); n != tt.requests {
				t.Errorf("%d requests, want %d", n, tt.requests)
			}
		})
	}
}

// An endpoint that echoes the key in its error message: the error the
// caller logs has it cut out.
func TestTranscribeScrubsAnEchoedKey(t *testing.T) {
	t.Parallel()
	fake := fakeapi.StartTranscribe(t, "", fakeapi.Transcript{Status: 401, Message: "Incorrect API key provided: " + key})
	_, err := transcribe.New(fake.URL(), key, "whisper-1").Transcribe(context.Background(), voice())
	if err == nil || strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "Incorrect API key provided") {
		t.Errorf("error %v: want the endpoint's message without the key", err)
	}
}

func TestTranscribeUnreachable(t *testing.T) {
	t.Parallel()
	fake := fakeapi.NewTranscribe("")
	url := fake.URL()
	fake.Close()
	_, err := transcribe.New(url, key, "whisper-1").Transcribe(context.Background(), voice())
	if !errors.Is(err, transcribe.ErrUnreachable) {
		t.Errorf("error %v, want ErrUnreachable", err)
	}
}

// A server that never answers: the client's own timeout ends the call as
// unreachable; the caller's cancellation ends it as cancelled.
func TestTranscribeStalled(t *testing.T) {
	t.Parallel()
	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		fake := fakeapi.StartTranscribe(t, "", fakeapi.Transcript{Stall: true})
		c := transcribe.New(fake.URL(), "", "whisper-1")
		c.Timeout = 50 * time.Millisecond
		_, err := c.Transcribe(context.Background(), voice())
		if !errors.Is(err, transcribe.ErrUnreachable) {
			t.Errorf("error %v, want ErrUnreachable", err)
		}
	})
	t.Run("cancel", func(t *testing.T) {
		t.Parallel()
		fake := fakeapi.StartTranscribe(t, "", fakeapi.Transcript{Stall: true})
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			_, err := transcribe.New(fake.URL(), "", "whisper-1").Transcribe(ctx, voice())
			errc <- err
		}()
		wait, done := context.WithTimeout(context.Background(), 10*time.Second)
		defer done()
		if _, err := fake.WaitFor(wait, func(r []fakeapi.TranscribeRequest) bool { return len(r) == 1 }); err != nil {
			t.Fatal(err)
		}
		cancel()
		err := <-errc
		if !errors.Is(err, context.Canceled) || errors.Is(err, transcribe.ErrUnreachable) {
			t.Errorf("error %v, want context.Canceled only", err)
		}
	})
}

// A server that ignores response_format and answers plain text, or JSON
// without a text field.
func TestTranscribeAnswerShapes(t *testing.T) {
	t.Parallel()
	for name, tt := range map[string]struct {
		body, want string
		ok         bool
	}{
		"plain text":   {body: "hello there\n", want: "hello there", ok: true},
		"json":         {body: `{"text":"hi","duration":1.5}`, want: "hi", ok: true},
		"json no text": {body: `{"segments":[]}`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(tt.body)) }))
			t.Cleanup(srv.Close)
			got, err := transcribe.New(srv.URL, "", "").Transcribe(context.Background(), voice())
			if (err == nil) != tt.ok || got != tt.want {
				t.Errorf("got %q, %v; want %q ok=%v", got, err, tt.want, tt.ok)
			}
		})
	}
}

func TestOggDuration(t *testing.T) {
	t.Parallel()
	for _, d := range []time.Duration{0, 1500 * time.Millisecond, 59 * time.Second, 10 * time.Minute} {
		got, ok := transcribe.OggDuration(fakediscord.OggOpus(d))
		if !ok || got.Round(time.Millisecond) != d {
			t.Errorf("OggDuration(%v) = %v, %v", d, got, ok)
		}
	}
	truncated := fakediscord.OggOpus(time.Minute)
	for name, data := range map[string][]byte{
		"empty":       nil,
		"not ogg":     []byte("ID3\x04 an mp3"),
		"headers cut": truncated[:30],
	} {
		if d, ok := transcribe.OggDuration(data); ok {
			t.Errorf("%s: OggDuration = %v, want not ok", name, d)
		}
	}
}

func FuzzOggDuration(f *testing.F) {
	f.Add(fakediscord.OggOpus(3 * time.Second))
	f.Add(fakediscord.OggOpus(0))
	f.Add([]byte("OggS"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if d, ok := transcribe.OggDuration(data); ok && d < 0 {
			t.Errorf("negative duration %v", d)
		}
	})
}
