// Package kvdeferred keeps the agent's deferred prompts (the defer
// action) in a JetStream key-value bucket when the gateway runs on NATS:
// whichever process's agent defers a prompt writes it there, and one
// process fires them all, the holder of the schedule's lease, so that a
// prompt deferred on a worker runs when it is due even if that worker is
// gone by then. A prompt stays in the bucket until the queue has taken
// it; the event it becomes has a key of its own (the prompt's id), so a
// new lease holder that fires it again after a failover is refused as a
// duplicate by the stream.
package kvdeferred

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/deferred"
	"github.com/agentgateway/gateway/internal/jsinbox"
)

// Bucket keeps the pending prompts, one key per prompt (its id).
const Bucket = "gateway-deferred"

// retryFire is how long a prompt the queue refused waits for another try.
const retryFire = 30 * time.Second

// maxPrompt bounds a stored prompt: the defer action's own limit on the
// text is far below it.
const maxPrompt = 64 << 10

// BucketConfig is the bucket's configuration (doctor checks it).
func BucketConfig(replicas int) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:       Bucket,
		Description:  "the agent's deferred prompts, fired by the holder of the schedule's lease",
		History:      1,
		Replicas:     replicas,
		Storage:      jetstream.FileStorage,
		MaxValueSize: maxPrompt,
	}
}

// Options configure a Store.
type Options struct {
	// Replicas is NATS_REPLICAS.
	Replicas int
	// Clock is the store's time; nil is the real clock.
	Clock clockwork.Clock
	Log   zerolog.Logger
}

// Store is the bucket of deferred prompts. It is safe for concurrent use.
type Store struct {
	kv    jetstream.KeyValue
	clock clockwork.Clock
	log   zerolog.Logger

	// The firing loop's view of the bucket (Run).
	mu      sync.Mutex
	pending map[string]deferred.Prompt
	waiting int // 1 while the loop waits on a timer, for tests
	failed  int // fires the queue refused, for tests
	// loadedOnce: the loop has read the bucket, for tests.
	loadedOnce bool
}

// Open creates the bucket when missing and checks it when present.
func Open(ctx context.Context, js jetstream.JetStream, opts Options) (*Store, error) {
	kv, err := jsinbox.EnsureBucket(ctx, js, BucketConfig(opts.Replicas))
	if err != nil {
		return nil, err
	}
	clock := opts.Clock
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	return &Store{kv: kv, clock: clock, log: opts.Log, pending: map[string]deferred.Prompt{}}, nil
}

// Now is the time on the store's clock: a prompt's Due is set from it.
func (s *Store) Now() time.Time { return s.clock.Now() }

// Add keeps p (its ID and Set are filled in). It refuses a prompt when
// max are waiting already, counting every process's.
func (s *Store) Add(p deferred.Prompt, max int) (deferred.Prompt, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if max > 0 {
		n, err := s.count(ctx)
		if err != nil {
			return deferred.Prompt{}, err
		}
		if n >= max {
			return deferred.Prompt{}, fmt.Errorf("%w (at most %d)", deferred.ErrTooMany, max)
		}
	}
	var b [6]byte
	rand.Read(b[:])
	p.ID = hex.EncodeToString(b[:])
	p.Set = s.clock.Now()
	data, err := json.Marshal(p)
	if err != nil {
		return deferred.Prompt{}, err
	}
	if _, err := s.kv.Create(ctx, p.ID, data); err != nil {
		return deferred.Prompt{}, fmt.Errorf("keep the deferred prompt on NATS: %w", err)
	}
	return p, nil
}

// count is how many prompts wait in the bucket.
func (s *Store) count(ctx context.Context) (int, error) {
	lister, err := s.kv.ListKeys(ctx)
	if err != nil {
		return 0, fmt.Errorf("count the deferred prompts on NATS: %w", err)
	}
	defer lister.Stop()
	n := 0
	for range lister.Keys() {
		n++
	}
	return n, nil
}

// Pending is how many prompts the firing loop knows of (0 when it does
// not run).
func (s *Store) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

// Run fires the prompts as they fall due until ctx ends: each is handed to
// fire and removed from the bucket once the queue has it. Run it on one
// process at a time (under the schedule's lease).
func (s *Store) Run(ctx context.Context, fire deferred.Fire) error {
	w, err := s.kv.WatchAll(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("watch the deferred prompts on NATS: %w", err)
	}
	defer w.Stop()
	s.mu.Lock()
	clear(s.pending)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		clear(s.pending)
		s.mu.Unlock()
	}()
	retryAt := map[string]time.Time{}
	// fired are taken by the queue, their removal not seen yet.
	fired := map[string]bool{}
	ready := false
	for {
		var timer clockwork.Timer
		var wake <-chan time.Time
		if ready {
			id, at, ok := s.next(retryAt, fired)
			if ok && !at.After(s.clock.Now()) {
				s.fireOne(ctx, id, fire, retryAt, fired)
				continue
			}
			if ok {
				timer = s.clock.NewTimer(at.Sub(s.clock.Now()))
				wake = timer.Chan()
				s.setWaiting(1)
			}
		}
		select {
		case <-ctx.Done():
			stopTimer(timer)
			s.setWaiting(0)
			return nil
		case e, open := <-w.Updates():
			stopTimer(timer)
			s.setWaiting(0)
			if !open {
				if ctx.Err() != nil {
					return nil
				}
				return errors.New("the watch on the deferred prompts ended")
			}
			if e == nil {
				ready = true
				s.mu.Lock()
				s.loadedOnce = true
				s.mu.Unlock()
				continue
			}
			s.update(e, retryAt, fired)
		case <-wake:
			s.setWaiting(0)
		}
	}
}

func stopTimer(t clockwork.Timer) {
	if t != nil {
		t.Stop()
	}
}

func (s *Store) setWaiting(n int) {
	s.mu.Lock()
	s.waiting = n
	s.mu.Unlock()
}

// update applies a change of the bucket to the loop's view.
func (s *Store) update(e jetstream.KeyValueEntry, retryAt map[string]time.Time, fired map[string]bool) {
	id := e.Key()
	s.mu.Lock()
	defer s.mu.Unlock()
	if op := e.Operation(); op == jetstream.KeyValueDelete || op == jetstream.KeyValuePurge {
		delete(s.pending, id)
		delete(retryAt, id)
		delete(fired, id)
		return
	}
	var p deferred.Prompt
	if err := json.Unmarshal(e.Value(), &p); err != nil || p.ID != id {
		s.log.Warn().Str("id", id).Msg("an entry in the deferred prompts bucket is not a prompt: ignored")
		return
	}
	s.pending[id] = p
}

// next is the prompt to fire first and when.
func (s *Store) next(retryAt map[string]time.Time, fired map[string]bool) (id string, at time.Time, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for pid, p := range s.pending {
		if fired[pid] {
			continue
		}
		due := p.Due
		if r, has := retryAt[pid]; has {
			due = r
		}
		if !ok || due.Before(at) || (due.Equal(at) && pid < id) {
			id, at, ok = pid, due, true
		}
	}
	return id, at, ok
}

// fireOne hands a due prompt to the queue and removes it from the bucket.
func (s *Store) fireOne(ctx context.Context, id string, fire deferred.Fire, retryAt map[string]time.Time, fired map[string]bool) {
	s.mu.Lock()
	p := s.pending[id]
	s.mu.Unlock()
	log := s.log.With().Str("id", id).Str("channel", p.ChannelID).Logger()
	if err := fire(p); err != nil {
		s.mu.Lock()
		s.failed++
		s.mu.Unlock()
		retryAt[id] = s.clock.Now().Add(retryFire)
		log.Warn().Err(err).Msg("deferred prompt not queued; trying again")
		return
	}
	fired[id] = true
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.kv.Delete(dctx, id); err != nil {
		// It stays in the bucket: the next holder of the lease fires it
		// again, and the stream refuses the event as a duplicate.
		log.Error().Err(err).Msg("could not remove a deferred prompt the queue took")
	}
}

// armed and tries are for tests: whether the loop waits on a timer, and
// how many fires the queue refused.
func (s *Store) armed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting
}

func (s *Store) tries() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

func (s *Store) loaded() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.loadedOnce
}
