package schedule

import (
	"time"

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
