package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/jsinbox"
)

// Roles of a gateway process.
const (
	// RoleRun is `gateway run`: Discord, webhooks, the schedule, and turns
	// when it has slots.
	RoleRun = "run"
	// RoleWorker is `gateway worker`: turns only.
	RoleWorker = "worker"
)

// Worker is one gateway process as its heartbeat entry describes it.
type Worker struct {
	Name    string    `json:"name"`
	Role    string    `json:"role"`
	Version string    `json:"version,omitempty"`
	Started time.Time `json:"started"`
	// Slots is how many turns it runs at once (MAX_CONCURRENT_QUERIES).
	Slots int `json:"slots"`
	// Turns are the turns it ran at its last heartbeat.
	Turns []Turn `json:"turns,omitempty"`
	// Beat is when the entry was last written, by the server's clock.
	Beat time.Time `json:"-"`
}

// Turn is a turn a process runs.
type Turn struct {
	// Lane is the channel (or thread) the turn belongs to, or "system".
	Lane  string    `json:"lane"`
	Event uint64    `json:"event"`
	Since time.Time `json:"since"`
}

// RegistryOptions configure a Registry. Every process sharing the bucket
// must agree on Replicas and TTL: the bucket is checked against them.
type RegistryOptions struct {
	// Replicas is how many servers keep the bucket (NATS_REPLICAS); 1 when
	// zero.
	Replicas int
	// TTL is how long a process stays listed after its last heartbeat
	// (DefaultWorkerTTL when zero).
	TTL time.Duration
	// Every is how often a process writes its heartbeat (TTL/6 when zero;
	// at most TTL/2, so one lost heartbeat does not drop it from the list).
	Every time.Duration
	// Self describes this process: Name (DefaultName when empty), Role,
	// Version, Started (the registry's opening when zero) and Slots. Its
	// Turns and Beat are ignored.
	Self Worker
	// Turns, when set, returns the turns this process runs now; each
	// heartbeat reads it. It must be safe to call from another goroutine.
	Turns func() []Turn
	Clock clockwork.Clock
	Log   zerolog.Logger
}

// Registry keeps this process's heartbeat entry in the bucket
// BucketWorkers, under its name, and lists every process's entry.
type Registry struct {
	kv    jetstream.KeyValue
	every time.Duration
	self  Worker
	turns func() []Turn
	clock clockwork.Clock
	log   zerolog.Logger

	// mu guards rev, the revision of this process's last heartbeat, so a
	// clean stop deletes only its own entry.
	mu  sync.Mutex
	rev uint64
}

// OpenRegistry creates the heartbeat bucket, or checks the one there
// against o.
func OpenRegistry(ctx context.Context, js jetstream.JetStream, o RegistryOptions) (*Registry, error) {
	if o.TTL == 0 {
		o.TTL = DefaultWorkerTTL
	}
	if o.Every == 0 {
		o.Every = o.TTL / 6
	}
	if o.Every <= 0 || 2*o.Every > o.TTL {
		return nil, fmt.Errorf("heartbeat every %s with a TTL of %s: beat at least twice per TTL", o.Every, o.TTL)
	}
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
	}
	self := o.Self
	if self.Name == "" {
		self.Name = DefaultName()
	}
	if err := checkName(self.Name); err != nil {
		return nil, fmt.Errorf("worker name: %w", err)
	}
	if self.Started.IsZero() {
		self.Started = o.Clock.Now().UTC()
	}
	self.Turns, self.Beat = nil, time.Time{}
	kv, err := jsinbox.EnsureBucket(ctx, js, WorkerBucket(o.TTL, o.Replicas))
	if err != nil {
		return nil, err
	}
	return &Registry{kv: kv, every: o.Every, self: self, turns: o.Turns, clock: o.Clock,
		log: o.Log.With().Str("worker", self.Name).Logger()}, nil
}

// Name is the name this process is listed under.
func (r *Registry) Name() string { return r.self.Name }

// Beat writes this process's heartbeat now and every Every until ctx
// ends, then deletes it, so the process leaves the list at once. A
// heartbeat that cannot be written is logged and tried again at the next
// beat. It returns nil when ctx ends.
func (r *Registry) Beat(ctx context.Context) error {
	tick := r.clock.NewTicker(r.every)
	defer tick.Stop()
	warned := false
	for {
		switch err := r.beat(ctx); {
		case err == nil:
			warned = false
		case ctx.Err() == nil && !warned:
			// Once per outage: NATS being away is logged by the connection.
			r.log.Warn().Err(err).Msg("could not write this process's heartbeat; trying again")
			warned = true
		}
		select {
		case <-ctx.Done():
			r.leave(ctx)
			return nil
		case <-tick.Chan():
		}
	}
}

// beat writes the heartbeat once.
func (r *Registry) beat(ctx context.Context) error {
	w := r.self
	if r.turns != nil {
		w.Turns = r.turns()
	}
	value, err := json.Marshal(w)
	if err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	c, cancel := context.WithTimeout(ctx, r.every)
	defer cancel()
	rev, err := r.kv.Put(c, w.Name, value)
	if err != nil {
		return fmt.Errorf("write heartbeat to bucket %s: %w", BucketWorkers, err)
	}
	r.mu.Lock()
	r.rev = rev
	r.mu.Unlock()
	return nil
}

// leave deletes the heartbeat if it is still this process's last one: a
// process started since under the same name keeps its entry.
func (r *Registry) leave(ctx context.Context) {
	r.mu.Lock()
	rev := r.rev
	r.mu.Unlock()
	if rev == 0 {
		return
	}
	c, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.every)
	defer cancel()
	if err := r.kv.Delete(c, r.self.Name, jetstream.LastRevision(rev)); err != nil && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		r.log.Debug().Err(err).Msg("could not delete this process's heartbeat; it lapses on its own")
	}
}

// List returns the processes whose heartbeat has not lapsed, by name.
// Give ctx a deadline: a request lost as a server dies is never answered.
func (r *Registry) List(ctx context.Context) ([]Worker, error) {
	return list(ctx, r.kv)
}

// ReadWorkers lists the processes in the heartbeat bucket, creating
// nothing (doctor): a missing bucket is jsinbox.ErrNotSetUp, which means
// no process has started with this NATS yet.
func ReadWorkers(ctx context.Context, js jetstream.JetStream, o RegistryOptions) ([]Worker, error) {
	if o.TTL == 0 {
		o.TTL = DefaultWorkerTTL
	}
	kv, err := jsinbox.CheckBucket(ctx, js, WorkerBucket(o.TTL, o.Replicas))
	if err != nil {
		return nil, err
	}
	return list(ctx, kv)
}

// listStall is how long a listing waits for the next entry of its
// watch's replay. A heartbeat that reaches its age limit between the
// watch's start and its delivery is never delivered, and the replay's
// end marker never comes (seen under load: a listing that waited for its
// context's deadline); such a watch is started again.
const listStall = 2 * time.Second

// listTries bounds the watches one listing starts.
const listTries = 3

// errListStalled is a watch whose replay stopped short of its end.
var errListStalled = errors.New("the watch stopped before the end of its replay")

func list(ctx context.Context, kv jetstream.KeyValue) ([]Worker, error) {
	for try := 1; ; try++ {
		out, err := listOnce(ctx, kv)
		if !errors.Is(err, errListStalled) || try == listTries {
			return out, err
		}
	}
}

func listOnce(ctx context.Context, kv jetstream.KeyValue) ([]Worker, error) {
	w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("read bucket %s: %w", BucketWorkers, err)
	}
	defer func() { _ = w.Stop() }()
	stall := time.NewTimer(listStall)
	defer stall.Stop()
	var out []Worker
	var bad []string
	for {
		var e jetstream.KeyValueEntry
		ok := true
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("read bucket %s: %w", BucketWorkers, ctx.Err())
		case <-stall.C:
			return nil, fmt.Errorf("read bucket %s: %w", BucketWorkers, errListStalled)
		case e, ok = <-w.Updates():
			stall.Reset(listStall)
		}
		if !ok {
			return nil, fmt.Errorf("read bucket %s: the watch ended early", BucketWorkers)
		}
		if e == nil {
			break // every entry there was when the watch began
		}
		var wk Worker
		if err := json.Unmarshal(e.Value(), &wk); err != nil {
			bad = append(bad, e.Key())
			continue
		}
		wk.Name, wk.Beat = e.Key(), e.Created()
		out = append(out, wk)
	}
	// sort.Slice, not slices.SortFunc: each struct type given to the generic
	// sort compiles to ~12 KB of its own code.
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	if len(bad) > 0 {
		return out, fmt.Errorf("bucket %s: unreadable heartbeat of %s", BucketWorkers, strings.Join(bad, ", "))
	}
	return out, nil
}
