package schedule

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/go-co-op/gocron/v2"

	"github.com/agentgateway/gateway/internal/queue"
)

// Apply makes cfg the running configuration. Only what changed is touched:
// a heartbeat or cron job that is new is scheduled, one that is gone is
// removed, one whose definition changed is rescheduled (its timer starts
// over), and the rest keep their timers. A paused cron job is not
// scheduled. Each change is logged. Hooks and
// webhooks are replaced as a whole. An item gocron refuses (or a heartbeat
// below MinInterval) is left out and reported in the returned error; the
// rest of cfg still applies.
func (s *Scheduler) Apply(cfg Config) error {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	return s.applyLocked(cfg)
}

// applyLocked is Apply with applyMu held.
func (s *Scheduler) applyLocked(cfg Config) error {
	var errs []error
	want := map[jobKey]*job{}
	for _, h := range cfg.Heartbeats {
		if h.Interval < MinInterval {
			errs = append(errs, fmt.Errorf("heartbeat %q: interval %s is below the minimum %s: not scheduled", h.Name, h.Interval, MinInterval))
			continue
		}
		j := s.heartbeatJob(h)
		want[j.key] = j
	}
	for _, c := range cfg.Agents.CronJobs {
		if c.Paused {
			continue // kept in current (CronJobs, Trigger), never timed
		}
		j := s.cronJob(c)
		want[j.key] = j
	}

	replaced := map[jobKey]bool{}
	for _, key := range sortedKeys(s.jobs) {
		old := s.jobs[key]
		nw, ok := want[key]
		switch {
		case ok && nw.def == old.def:
			delete(want, key) // unchanged: keep its timer
			continue
		case ok:
			replaced[key] = true
		default:
			s.log.Info().Str(string(key.kind), key.name).Msg("scheduled job removed")
		}
		s.remove(old)
	}
	for _, key := range sortedKeys(want) {
		j := want[key]
		if err := s.add(j); err != nil {
			errs = append(errs, err)
			continue
		}
		msg := "scheduled job added"
		if replaced[key] {
			msg = "scheduled job changed"
		}
		s.log.Info().Str(string(key.kind), key.name).Str("schedule", j.spec).Msg(msg)
	}

	hooks := maps.Clone(cfg.Agents.Hooks)
	webhooks := make(map[string]Webhook, len(cfg.Agents.Webhooks))
	for _, w := range cfg.Agents.Webhooks {
		webhooks[w.Name] = w
	}
	s.mu.Lock()
	oldHooks, oldWebhooks := s.hooks, s.webhooks
	s.hooks, s.webhooks = hooks, webhooks
	s.mu.Unlock()
	logChanges(s, "hook", oldHooks, hooks)
	logChanges(s, "webhook", oldWebhooks, webhooks)

	s.current = cfg
	return errors.Join(errs...)
}

// heartbeatJob builds the job for a heartbeat check.
func (s *Scheduler) heartbeatJob(h Heartbeat) *job {
	return &job{
		key: jobKey{kind: queue.KindHeartbeat, name: h.Name},
		def: h,
		event: queue.Event{
			Kind:      queue.KindHeartbeat,
			Source:    "heartbeat",
			Name:      h.Name,
			Text:      h.Instruction,
			ChannelID: orDefault(h.Channel, s.opts.DefaultChannel),
			Model:     h.Model,
		},
		spec: fmt.Sprintf("every %s", h.Interval),
	}
}

// cronJob builds the job for a cron job.
func (s *Scheduler) cronJob(c CronJob) *job {
	spec := c.Cron + " (" + orDefault(c.Timezone, s.opts.Location.String()) + ")"
	return &job{
		key: jobKey{kind: queue.KindCron, name: c.Name},
		def: c,
		event: queue.Event{
			Kind:      queue.KindCron,
			Source:    "cron",
			Name:      c.Name,
			Text:      c.Instruction,
			ChannelID: orDefault(c.Channel, s.opts.DefaultChannel),
			Model:     c.Model,
		},
		spec: spec,
	}
}

// add registers j with gocron and makes it the job that may fire under its
// key. It is published before gocron knows it, so a first run can never find
// it missing.
func (s *Scheduler) add(j *job) error {
	var def gocron.JobDefinition
	switch d := j.def.(type) {
	case Heartbeat:
		def = gocron.DurationJob(d.Interval)
	case CronJob:
		expr := d.Cron
		if d.Timezone != "" {
			expr = "CRON_TZ=" + d.Timezone + " " + expr
		}
		def = gocron.CronJob(expr, false)
	}
	s.mu.Lock()
	s.jobs[j.key] = j
	s.mu.Unlock()
	handle, err := s.cron.NewJob(def, gocron.NewTask(s.fire, j), gocron.WithName(string(j.key.kind)+":"+j.key.name))
	if err != nil {
		s.mu.Lock()
		delete(s.jobs, j.key)
		s.mu.Unlock()
		return fmt.Errorf("schedule %s %q: %w", j.key.kind, j.key.name, err)
	}
	j.handle = handle
	return nil
}

// remove unregisters j. Its timer may already have fired: fire ignores a
// job that is no longer the one under its key.
func (s *Scheduler) remove(j *job) {
	s.mu.Lock()
	if s.jobs[j.key] == j {
		delete(s.jobs, j.key)
	}
	s.mu.Unlock()
	if j.handle == nil {
		return
	}
	if err := s.cron.RemoveJob(j.handle.ID()); err != nil && !errors.Is(err, gocron.ErrJobNotFound) {
		s.log.Warn().Err(err).Str(string(j.key.kind), j.key.name).Msg("remove scheduled job")
	}
}

// logChanges logs which entries of a hook or webhook map were added,
// removed or changed. Only names are logged: values may be long.
func logChanges[K ~string, V comparable](s *Scheduler, kind string, old, nw map[K]V) {
	for _, k := range slices.Sorted(maps.Keys(old)) {
		if _, ok := nw[k]; !ok {
			s.log.Info().Str(kind, string(k)).Msg(kind + " removed")
		}
	}
	for _, k := range slices.Sorted(maps.Keys(nw)) {
		prev, ok := old[k]
		switch {
		case !ok:
			s.log.Info().Str(kind, string(k)).Msg(kind + " added")
		case prev != nw[k]:
			s.log.Info().Str(kind, string(k)).Msg(kind + " changed")
		}
	}
}

// sortedKeys sorts with sort.Slice rather than slices.SortFunc: the generic
// sort compiles to ~12 KB of code for each struct type it is given, and this
// package sorts several.
func sortedKeys(m map[jobKey]*job) []jobKey {
	keys := make([]jobKey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.kind != b.kind {
			return string(a.kind) < string(b.kind)
		}
		return a.name < b.name
	})
	return keys
}

func orDefault(s, def string) string {
	if s != "" {
		return s
	}
	return def
}
