package agent

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/queue"
	"github.com/agentgateway/gateway/internal/session"
)

// steerable is a backend whose turns wait for release and which takes
// steered messages while one runs.
type steerable struct {
	mu      sync.Mutex
	runs    []string
	steered []string
	started chan struct{}
	release chan error
}

func (s *steerable) Name() string { return "steerable" }

func (s *steerable) Run(ctx context.Context, req backends.Request, emit func(backends.Event)) (backends.Result, error) {
	s.mu.Lock()
	s.runs = append(s.runs, req.Prompt)
	s.mu.Unlock()
	s.started <- struct{}{}
	if err := <-s.release; err != nil {
		return backends.Result{}, err
	}
	return backends.Result{Text: "done", SessionID: "s1"}, nil
}

func (s *steerable) Steer(key, text string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.steered = append(s.steered, key+":"+text)
	return nil
}

func TestSteeredPromptIsAnsweredByTheTurnItJoined(t *testing.T) {
	for _, tc := range []struct {
		name    string
		turnErr error
		runsB   bool
	}{
		{"the turn answered: the prompt is not run again", nil, false},
		{"the turn failed: the prompt runs on its own", errors.New("boom"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &steerable{started: make(chan struct{}, 2), release: make(chan error, 2)}
			sessions, _, err := session.Open(t.TempDir() + "/sessions.json")
			if err != nil {
				t.Fatal(err)
			}
			r := New(Options{ConfigDir: t.TempDir(), Timeout: time.Minute}, b, sessions, &replies{}, nil, zerolog.New(zerolog.NewTestWriter(t)))
			a := queue.Event{ID: 1, Kind: queue.KindMessage, ChannelID: "7", Lane: "7", Text: "first"}
			second := queue.Event{ID: 2, Kind: queue.KindMessage, ChannelID: "7", Lane: "7", Text: "also this"}
			if r.Steer(second) {
				t.Fatal("steered with no turn running")
			}
			done := make(chan struct{})
			go func() { r.Process(context.Background(), a); close(done) }()
			<-b.started
			if !r.Steer(second) {
				t.Fatal("not steered into the running turn")
			}
			b.release <- tc.turnErr
			<-done
			if tc.runsB {
				b.release <- nil
			}
			r.Process(context.Background(), second)
			b.mu.Lock()
			defer b.mu.Unlock()
			if len(b.steered) != 1 || b.steered[0] != "7:also this" {
				t.Errorf("steered %q", b.steered)
			}
			if ran := len(b.runs) == 2; ran != tc.runsB {
				t.Errorf("runs %q: second prompt run on its own = %v, want %v", b.runs, ran, tc.runsB)
			}
		})
	}
}
