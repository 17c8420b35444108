package schedule

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/queue"
)

// Config is everything the scheduler runs or exposes: heartbeat.md's checks
// and agents.md's scheduled work.
type Config struct {
	Heartbeats []Heartbeat
	Agents     Agents
}

// Options configures a Scheduler.
type Options struct {
	// Enqueue hands an event to the queue (queue.Queue.Enqueue). It is
	// called with the scheduler's lock held, so it must not call Done itself;
	// the queue calls Done later, from the event's handler.
	Enqueue func(queue.Event) (queue.Receipt, error)
	// DefaultChannel receives heartbeat and cron replies when the item names
	// no Channel (OUTPUT_CHANNEL_ID). Empty: such events only log.
	DefaultChannel string
	// Location is the time zone of cron jobs without a Timezone; nil means
	// time.Local.
	Location *time.Location
	// Clock drives every timer; nil means the real clock. Tests pass a
	// clockwork fake clock.
	Clock clockwork.Clock
	Log   zerolog.Logger
	// Finished, if set, reports whether an event the scheduler enqueued
	// has finished, for events that run on other processes (a gateway on
	// NATS), whose Done never comes here: a heartbeat or cron job whose
	// previous event is still unfinished is skipped, as with Done.
	Finished func(id uint64) bool
}

// Scheduler runs heartbeats and cron jobs on gocron and holds the hooks and
// webhooks of the last applied Config. Build it with New, give it a Config
// with Apply or Reload (before or after Run), and call Done for every event
// it enqueued (by timer or Trigger) once that event has finished.
type Scheduler struct {
	opts Options
	log  zerolog.Logger
	cron gocron.Scheduler

	// applyMu serialises Apply and Reload and guards current and loaded.
	applyMu sync.Mutex
	current Config          // the last applied config
	loaded  map[string]bool // files applied at least once (see Reload)

	// mu guards the fields below. jobs is only written by Apply with both
	// mutexes held, so holding either one is enough to read it.
	mu       sync.Mutex
	jobs     map[jobKey]*job
	busy     map[jobKey]uint64 // job -> id of its unfinished event
	inflight map[uint64]jobKey // id of an unfinished event -> its job
	hooks    map[Hook]string
	webhooks map[string]Webhook
}

// jobKey names a scheduled job: heartbeats and cron jobs have separate
// name spaces.
type jobKey struct {
	kind queue.Kind // queue.KindHeartbeat or queue.KindCron
	name string
}

// job is one heartbeat or cron job as scheduled.
type job struct {
	key    jobKey
	def    any         // the Heartbeat or CronJob it was built from; compared on Apply
	event  queue.Event // what each run enqueues; ID and Time are set by the queue
	spec   string      // the schedule, for NextRuns and logs
	handle gocron.Job  // nil if gocron refused it
}

// New returns a Scheduler with nothing scheduled. Nothing fires before Run.
func New(opts Options) (*Scheduler, error) {
	if opts.Enqueue == nil {
		return nil, errors.New("schedule: Options.Enqueue is required")
	}
	if opts.Location == nil {
		opts.Location = time.Local
	}
	if opts.Clock == nil {
		opts.Clock = clockwork.NewRealClock()
	}
	log := opts.Log.With().Str("component", "schedule").Logger()
	cron, err := gocron.NewScheduler(
		gocron.WithClock(opts.Clock),
		gocron.WithLocation(opts.Location),
		gocron.WithLogger(gocronLogger{log}),
	)
	if err != nil {
		return nil, fmt.Errorf("create gocron scheduler: %w", err)
	}
	return &Scheduler{
		opts:     opts,
		log:      log,
		cron:     cron,
		loaded:   map[string]bool{},
		jobs:     map[jobKey]*job{},
		busy:     map[jobKey]uint64{},
		inflight: map[uint64]jobKey{},
	}, nil
}

// Run starts the timers and blocks until ctx is done, then stops them. It
// does not wait for the events already enqueued.
func (s *Scheduler) Run(ctx context.Context) error {
	s.cron.Start()
	<-ctx.Done()
	if err := s.cron.Shutdown(); err != nil {
		return fmt.Errorf("stop scheduler: %w", err)
	}
	return nil
}

// stillBusy returns the unfinished event of key, if any (s.mu held).
func (s *Scheduler) stillBusy(key jobKey) (uint64, bool) {
	id, ok := s.busy[key]
	if ok && s.opts.Finished != nil && s.opts.Finished(id) {
		delete(s.busy, key)
		delete(s.inflight, id)
		return 0, false
	}
	return id, ok
}

// Lead fires heartbeats and cron jobs until ctx ends, then stops them and
// can be called again: the schedule of a gateway on several processes
// runs on whichever holds the schedule's lease at the time.
func (s *Scheduler) Lead(ctx context.Context) error {
	s.cron.Start()
	<-ctx.Done()
	if err := s.cron.StopJobs(); err != nil {
		return fmt.Errorf("stop the scheduled jobs: %w", err)
	}
	return nil
}

// Done tells the scheduler that the event with this id has finished, so
// its heartbeat or cron job may fire again. Ids the scheduler did not
// enqueue are ignored, so the queue may report every event.
func (s *Scheduler) Done(id uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key, ok := s.inflight[id]
	if !ok {
		return
	}
	delete(s.inflight, id)
	if s.busy[key] == id {
		delete(s.busy, key)
	}
}

// Errors of Trigger (and of the agents.md editors, for ErrNoCronJob).
var (
	ErrNoCronJob = errors.New("no cron job")
	ErrBusy      = errors.New("its previous run has not finished")
)

// CronJobs returns the cron jobs of the last applied config in file order,
// paused ones included.
func (s *Scheduler) CronJobs() []CronJob {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	return slices.Clone(s.current.Agents.CronJobs)
}

// Trigger enqueues the event of the cron job name now, as its timer would,
// whether or not the job is paused. It fails with ErrNoCronJob when the
// last applied config has no such job and with ErrBusy while the job's
// previous event, timed or triggered, has not been reported Done; a
// triggered event, in turn, makes the job's ticks skip until it is Done.
func (s *Scheduler) Trigger(name string) error {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	var def *CronJob
	for i, c := range s.current.Agents.CronJobs {
		if c.Name == name {
			def = &s.current.Agents.CronJobs[i] // the last counts, as in Apply
		}
	}
	if def == nil {
		return fmt.Errorf("%w %q", ErrNoCronJob, name)
	}
	j := s.cronJob(*def)
	s.mu.Lock()
	defer s.mu.Unlock()
	if id, ok := s.stillBusy(j.key); ok {
		return fmt.Errorf("cron job %q (event %d): %w", name, id, ErrBusy)
	}
	r, err := s.opts.Enqueue(j.event)
	if err != nil {
		return fmt.Errorf("enqueue cron job %q: %w", name, err)
	}
	s.log.Info().Str(string(j.key.kind), name).Uint64("event", r.Event.ID).Msg("cron job triggered: event enqueued")
	s.busy[j.key] = r.Event.ID
	s.inflight[r.Event.ID] = j.key
	return nil
}

// Hook returns the instruction of a lifecycle hook, "" when none is set.
func (s *Scheduler) Hook(h Hook) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hooks[h]
}

// Webhook returns the webhook definition with this name. It reads the last
// applied config, so reloads reach the HTTP intake.
func (s *Scheduler) Webhook(name string) (Webhook, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.webhooks[name]
	return w, ok
}

// Webhooks returns the webhook definitions of the last applied config,
// sorted by name.
func (s *Scheduler) Webhooks() []Webhook {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Webhook, 0, len(s.webhooks))
	for _, w := range s.webhooks {
		out = append(out, w)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name }) // not slices.SortFunc: see sortedKeys
	return out
}

// fire runs on gocron's goroutine at each of j's times and enqueues its
// event. A job whose previous event is unfinished skips the tick.
func (s *Scheduler) fire(j *job) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.jobs[j.key] != j {
		return // removed or replaced after the timer fired
	}
	log := s.log.With().Str(string(j.key.kind), j.key.name).Logger()
	if id, ok := s.stillBusy(j.key); ok {
		log.Info().Uint64("event", id).Msg(string(j.key.kind) + " skipped: its previous event has not finished")
		return
	}
	r, err := s.opts.Enqueue(j.event)
	if err != nil {
		log.Warn().Err(err).Msg("scheduled event not enqueued")
		return
	}
	log.Info().Uint64("event", r.Event.ID).Msg("scheduled event enqueued")
	s.busy[j.key] = r.Event.ID
	s.inflight[r.Event.ID] = j.key
}
