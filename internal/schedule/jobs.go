package schedule

import (
	"cmp"
	"fmt"
	"sort"
	"time"

	"github.com/agentgateway/gateway/internal/queue"
)

// JobInfo describes one heartbeat check or cron job as scheduled, for the
// operator's dashboard.
type JobInfo struct {
	Kind     queue.Kind // queue.KindHeartbeat or queue.KindCron
	Name     string
	Schedule string // as written: "every 30m0s", "0 9 * * 1-5"
	Channel  string
	// Next and Last are the next and the last run; zero when unknown
	// (never ran since the start, or paused).
	Next, Last time.Time
	Paused     bool
}

// Jobs lists the scheduled heartbeat checks and cron jobs, paused ones
// included, by kind and name.
func (s *Scheduler) Jobs() []JobInfo {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	s.mu.Lock()
	var out []JobInfo
	for _, j := range s.jobs {
		info := JobInfo{Kind: j.key.kind, Name: j.key.name, Schedule: j.spec, Channel: j.event.ChannelID}
		if j.handle != nil {
			info.Next, _ = j.handle.NextRun()
			info.Last, _ = j.handle.LastRunStartedAt()
		}
		out = append(out, info)
	}
	s.mu.Unlock()
	for _, c := range s.current.Agents.CronJobs {
		if c.Paused {
			out = append(out, JobInfo{Kind: queue.KindCron, Name: c.Name, Schedule: c.Cron, Channel: c.Channel, Paused: true})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { // not slices.SortFunc: see sortedKeys
		return cmp.Or(cmp.Compare(out[i].Kind, out[j].Kind), cmp.Compare(out[i].Name, out[j].Name)) < 0
	})
	return out
}

// TriggerHeartbeat enqueues the heartbeat check name now, as its timer
// would; ErrNoCronJob when there is no such check, ErrBusy while its last
// run is unfinished.
func (s *Scheduler) TriggerHeartbeat(name string) error {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[jobKey{kind: queue.KindHeartbeat, name: name}]
	if !ok {
		return fmt.Errorf("%w: no heartbeat check %q", ErrNoCronJob, name)
	}
	if id, busy := s.stillBusy(j.key); busy {
		return fmt.Errorf("heartbeat %q (event %d): %w", name, id, ErrBusy)
	}
	r, err := s.opts.Enqueue(j.event)
	if err != nil {
		return fmt.Errorf("enqueue heartbeat %q: %w", name, err)
	}
	s.log.Info().Str("heartbeat", name).Uint64("event", r.Event.ID).Msg("heartbeat triggered: event enqueued")
	s.busy[j.key] = r.Event.ID
	s.inflight[r.Event.ID] = j.key
	return nil
}
