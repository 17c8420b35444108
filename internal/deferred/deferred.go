// Package deferred keeps the prompts the agent asked to run later (the
// defer action) until they are due, across restarts: each one is in
// CONFIG_DIR/deferred.json, written atomically, from the moment it is
// accepted until the queue has taken it. A prompt that fell due while the
// gateway was down runs at the next start.
package deferred

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/atomicfile"
)

// FileName is the store's file in CONFIG_DIR.
const FileName = "deferred.json"

// Prompt is one deferred prompt.
type Prompt struct {
	ID        string    `json:"id"`
	ChannelID string    `json:"channel_id"`
	Prompt    string    `json:"prompt"`
	Due       time.Time `json:"due"`
	// Set is when the agent asked for it, and UserID who sent the prompt
	// the agent was answering.
	Set    time.Time `json:"set"`
	UserID string    `json:"user_id,omitempty"`
}

// ErrTooMany refuses a prompt past the pending limit.
var ErrTooMany = errors.New("too many deferred prompts are waiting")

// Fire hands a due prompt to the queue. It returns nil once the queue has
// it (or had it already): the store then forgets it. An error keeps it for
// another try.
type Fire func(Prompt) error

// retryFire is how long a prompt the queue refused waits for another try.
const retryFire = 30 * time.Second

// Store holds the pending prompts and their timers. It is safe for
// concurrent use.
type Store struct {
	path  string
	clock clockwork.Clock
	fire  Fire
	log   zerolog.Logger

	mu      sync.Mutex
	pending []Prompt
	timers  map[string]clockwork.Timer
	closed  bool
}

// Open loads the store at path (a missing file is an empty store) and
// sets a timer for every prompt; overdue ones fire at once.
func Open(path string, clock clockwork.Clock, fire Fire, log zerolog.Logger) (*Store, error) {
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	s := &Store{path: path, clock: clock, fire: fire, log: log, timers: map[string]clockwork.Timer{}}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("read deferred prompts: %w", err)
	default:
		if err := json.Unmarshal(data, &s.pending); err != nil {
			return nil, fmt.Errorf("read deferred prompts: %s is not valid JSON: %w", FileName, err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.pending {
		s.armLocked(p)
	}
	if len(s.pending) > 0 {
		log.Info().Int("pending", len(s.pending)).Msg("deferred prompts waiting")
	}
	return s, nil
}

// Add keeps p (its ID and Set are filled in) and sets its timer. It
// refuses a prompt when max are waiting already.
func (s *Store) Add(p Prompt, max int) (Prompt, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return Prompt{}, errors.New("the gateway is stopping")
	}
	if max > 0 && len(s.pending) >= max {
		return Prompt{}, fmt.Errorf("%w (at most %d)", ErrTooMany, max)
	}
	var b [6]byte
	rand.Read(b[:])
	p.ID = hex.EncodeToString(b[:])
	p.Set = s.clock.Now()
	next := append(slices.Clone(s.pending), p)
	if err := s.saveLocked(next); err != nil {
		return Prompt{}, err
	}
	s.pending = next
	s.armLocked(p)
	return p, nil
}

// Now is the time on the store's clock, the one its timers run on: a
// prompt's Due is set from it.
func (s *Store) Now() time.Time { return s.clock.Now() }

// Pending is how many prompts wait.
func (s *Store) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

// Close stops the timers; the prompts stay in the file for the next start.
func (s *Store) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for id, t := range s.timers {
		t.Stop()
		delete(s.timers, id)
	}
}

// armLocked sets p's timer. s.mu must be held.
func (s *Store) armLocked(p Prompt) {
	wait := max(p.Due.Sub(s.clock.Now()), 0)
	s.timers[p.ID] = s.clock.AfterFunc(wait, func() { s.due(p) })
}

// due hands p to the queue and forgets it once taken.
func (s *Store) due(p Prompt) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	delete(s.timers, p.ID)
	s.mu.Unlock()
	if err := s.fire(p); err != nil {
		s.log.Warn().Err(err).Str("id", p.ID).Str("channel", p.ChannelID).Msg("deferred prompt not queued; trying again")
		s.mu.Lock()
		if !s.closed {
			s.timers[p.ID] = s.clock.AfterFunc(retryFire, func() { s.due(p) })
		}
		s.mu.Unlock()
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	next := slices.DeleteFunc(slices.Clone(s.pending), func(q Prompt) bool { return q.ID == p.ID })
	if err := s.saveLocked(next); err != nil {
		// It stays in the file: the next start queues it again, and the
		// queue's journal refuses it as a duplicate.
		s.log.Error().Err(err).Str("id", p.ID).Msg("could not forget a deferred prompt the queue took")
	}
	s.pending = next
}

func (s *Store) saveLocked(list []Prompt) error {
	if list == nil {
		list = []Prompt{}
	}
	data, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(s.path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("save deferred prompts: %w", err)
	}
	return nil
}
