package schedule

import (
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/agentgateway/gateway/internal/queue"
)

// NextRun describes one scheduled job for a listing such as `gateway doctor`.
type NextRun struct {
	Kind     queue.Kind // queue.KindHeartbeat or queue.KindCron
	Name     string
	Schedule string    // "every 30m0s" or "0 9 * * 1-5 (Europe/Berlin)"
	Next     time.Time // zero until Run has started the timers
}

// NextRuns lists every scheduled heartbeat and cron job with its next run
// time, ordered by kind ("cron" before "heartbeat") and name.
func (s *Scheduler) NextRuns() []NextRun {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	keys := sortedKeys(s.jobs)
	out := make([]NextRun, 0, len(keys))
	for _, key := range keys {
		j := s.jobs[key]
		r := NextRun{Kind: key.kind, Name: key.name, Schedule: j.spec}
		if j.handle != nil {
			if next, err := j.handle.NextRun(); err == nil {
				r.Next = next
			}
		}
		out = append(out, r)
	}
	return out
}

// NextAfter is the job's first run after now, in its Timezone or else in
// def; it needs no running scheduler (`gateway doctor`).
func (c CronJob) NextAfter(now time.Time, def *time.Location) (time.Time, error) {
	loc := def
	if c.Timezone != "" {
		l, err := time.LoadLocation(c.Timezone)
		if err != nil {
			return time.Time{}, err
		}
		loc = l
	}
	cron := gocron.NewDefaultCron(false)
	if err := cron.IsValid(c.Cron, loc, now); err != nil {
		return time.Time{}, err
	}
	return cron.Next(now.In(loc)), nil
}
