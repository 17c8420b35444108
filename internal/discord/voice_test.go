package discord

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/jonboulle/clockwork"

	"github.com/agentgateway/gateway/internal/files"
	"github.com/agentgateway/gateway/internal/transcribe"
)

// scriptedTranscriber answers each call with the next of its errors, then
// with text.
type scriptedTranscriber struct {
	mu    sync.Mutex
	errs  []error
	calls int
	text  string
}

func (s *scriptedTranscriber) Transcribe(ctx context.Context, a transcribe.Audio) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if len(s.errs) > 0 {
		err := s.errs[0]
		s.errs = s.errs[1:]
		return "", err
	}
	return s.text, nil
}

// A failure on the endpoint's side is tried again after the backoff,
// doubled each time; one the endpoint will repeat is not.
func TestTranscribeRetrying(t *testing.T) {
	t.Parallel()
	unavailable := &transcribe.StatusError{Status: 503}
	tests := []struct {
		name      string
		errs      []error
		wantTries int
		wantErr   error
	}{
		{name: "first try", wantTries: 1},
		{name: "down, then up", errs: []error{transcribe.ErrUnreachable, unavailable}, wantTries: 3},
		{name: "down for good", errs: []error{transcribe.ErrUnreachable, unavailable, &transcribe.StatusError{Status: 429}}, wantTries: 3, wantErr: &transcribe.StatusError{}},
		{name: "bad recording", errs: []error{&transcribe.StatusError{Status: 400}}, wantTries: 1, wantErr: &transcribe.StatusError{}},
		{name: "no words", errs: []error{transcribe.ErrEmpty}, wantTries: 1, wantErr: transcribe.ErrEmpty},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clock := clockwork.NewFakeClock()
			tr := &scriptedTranscriber{errs: tt.errs, text: "hello"}
			v := VoiceOptions{Transcriber: tr, RetryBackoff: time.Second}
			type result struct {
				text  string
				tries int
				err   error
			}
			done := make(chan result, 1)
			go func() {
				text, tries, err := transcribeRetrying(context.Background(), clock, v, transcribe.Audio{Data: []byte("x")})
				done <- result{text, tries, err}
			}()
			// The waits are 1 s, then 2 s: advancing by each ends it.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			for i, wait := 0, time.Second; i < tt.wantTries-1; i, wait = i+1, wait*2 {
				if err := clock.BlockUntilContext(ctx, 1); err != nil {
					t.Fatalf("wait %d: %v", i+1, err)
				}
				clock.Advance(wait)
			}
			var r result
			select {
			case r = <-done:
			case <-ctx.Done():
				t.Fatal("the transcription did not end")
			}
			if r.tries != tt.wantTries || tr.calls != tt.wantTries {
				t.Errorf("%d tries (%d calls), want %d", r.tries, tr.calls, tt.wantTries)
			}
			var se *transcribe.StatusError
			switch {
			case tt.wantErr == nil && (r.err != nil || r.text != "hello"):
				t.Errorf("got %q, %v", r.text, r.err)
			case errors.As(tt.wantErr, &se) && !errors.As(r.err, &se):
				t.Errorf("error %v, want a StatusError", r.err)
			case tt.wantErr != nil && !errors.As(tt.wantErr, &se) && !errors.Is(r.err, tt.wantErr):
				t.Errorf("error %v, want %v", r.err, tt.wantErr)
			}
		})
	}
}

// A stop while waiting to try again ends the transcription at once.
func TestTranscribeRetryingCancelled(t *testing.T) {
	t.Parallel()
	clock := clockwork.NewFakeClock()
	tr := &scriptedTranscriber{errs: []error{transcribe.ErrUnreachable}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, _, err := transcribeRetrying(ctx, clock, VoiceOptions{Transcriber: tr}, transcribe.Audio{Data: []byte("x")})
		done <- err
	}()
	wait, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	if err := clock.BlockUntilContext(wait, 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want context.Canceled", err)
	}
}

func TestTranscriptionFailureTellsWhatToDo(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		err   error
		tries int
		want  string
	}{
		{transcribe.ErrEmpty, 1, "could not make out any words"},
		{fmt.Errorf("%w: %w", transcribe.ErrTooLarge, &transcribe.StatusError{Status: 413}), 1, "too large"},
		{fmt.Errorf("%w: dial tcp: connection refused", transcribe.ErrUnreachable), 3, "could not be reached; tried 3 times"},
		{&transcribe.StatusError{Status: 401}, 1, "check TRANSCRIBE_API_KEY"},
		{&transcribe.StatusError{Status: 503}, 3, "failed (it answered 503; tried 3 times)"},
		{&transcribe.StatusError{Status: 400, Message: "Invalid file format."}, 1, "could not read this recording (it answered 400)"},
		{&transcribe.StatusError{Status: 200, Message: "the answer has no transcript"}, 1, "check TRANSCRIBE_URL"},
		{errors.New("something else"), 1, "send it again"},
	} {
		got := transcriptionFailure(tt.err, tt.tries)
		if !strings.Contains(got, tt.want) || !strings.Contains(got, "nothing was run") {
			t.Errorf("transcriptionFailure(%v) = %q, want %q and that nothing was run", tt.err, got, tt.want)
		}
		if strings.Contains(got, "dial tcp") || strings.Contains(got, "Invalid file format") {
			t.Errorf("transcriptionFailure(%v) = %q shows the technical error", tt.err, got)
		}
	}
}

func TestVoiceAttachment(t *testing.T) {
	t.Parallel()
	ogg := discord.Attachment{Filename: "voice-message.ogg", ContentType: "audio/ogg", Size: 4000}
	tests := []struct {
		name string
		m    discord.Message
		want bool
	}{
		{"voice message", discord.Message{Flags: voiceMessageFlag, Attachments: []discord.Attachment{ogg}}, true},
		{"audio file without the flag", discord.Message{Attachments: []discord.Attachment{ogg}}, false},
		{"flag without audio", discord.Message{Flags: voiceMessageFlag, Attachments: []discord.Attachment{{Filename: "a.png", ContentType: "image/png"}}}, false},
		{"flag, no attachment", discord.Message{Flags: voiceMessageFlag}, false},
	}
	for _, tt := range tests {
		if _, ok := voiceAttachment(tt.m); ok != tt.want {
			t.Errorf("%s: voiceAttachment = %v, want %v", tt.name, ok, tt.want)
		}
	}
}

func TestVoiceRefusal(t *testing.T) {
	t.Parallel()
	fetcher := func(mb int64) *files.Fetcher { return files.NewFetcher("", mb<<20, mb<<20) }
	for _, tt := range []struct {
		name string
		v    VoiceOptions
		size uint64
		want string
	}{
		{"within", VoiceOptions{Fetcher: fetcher(25)}, 1 << 20, ""},
		{"over MAX_ATTACHMENT_MB", VoiceOptions{Fetcher: fetcher(1)}, 2 << 20, "This voice message is 2 MB; I transcribe recordings up to 1 MB"},
		{"over the endpoint's 25 MB", VoiceOptions{Fetcher: fetcher(100)}, 30 << 20, "up to 25 MB"},
		{"no attachments", VoiceOptions{Fetcher: fetcher(0)}, 10, "MAX_ATTACHMENT_MB is 0"},
		{"no fetcher", VoiceOptions{}, 10, "MAX_ATTACHMENT_MB is 0"},
	} {
		got := tt.v.refusal(discord.Attachment{Size: tt.size})
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("%s: refusal = %q, want %q", tt.name, got, tt.want)
		}
	}
}
