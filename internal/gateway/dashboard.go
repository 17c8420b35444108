package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/admin"
	"github.com/agentgateway/gateway/internal/cost"
	"github.com/agentgateway/gateway/internal/dashboard"
	"github.com/agentgateway/gateway/internal/queue"
	"github.com/agentgateway/gateway/internal/schedule"
	"github.com/agentgateway/gateway/internal/session"
)

// dashboardSource is the dashboard's view of the gateway
// (dashboard.Source): the admin hub's events for the turns running now and
// the activity, the queue, the ledger, the schedule and the sessions for
// the rest.
type dashboardSource struct {
	hub       *admin.Hub
	queue     *queue.Queue
	sessions  *session.Store
	ledger    *cost.Ledger
	sched     *schedule.Scheduler
	activity  *dashboard.ActivityLog
	ready     func() error
	connected func() bool
	// name is a channel's name for display ("" when unknown).
	name    func(channelID string) string
	backend string
	log     zerolog.Logger

	mu      sync.Mutex // guards running and finished
	running map[uint64]dashboard.Turn
	// finished are the turns that ended lately. Each page reads the hub
	// at its own pace, so one may read a turn's start after the follower
	// read its end; the turn must not be listed again then.
	finished recentIDs
}

// finishedKept bounds recentIDs. A subscriber falls at most a hub buffer
// (admin.DefaultHubBuffer) and its page's stream behind the others before
// it loses events and resyncs instead, so a start read late is never more
// than that many ends behind.
const finishedKept = 4 * admin.DefaultHubBuffer

// recentIDs is a bounded set of event ids: past finishedKept, the oldest
// added is forgotten. The zero value is empty.
type recentIDs struct {
	set  map[uint64]struct{}
	ring []uint64
	next int // where the next id goes in ring once it is full
}

func (r *recentIDs) add(id uint64) {
	if _, ok := r.set[id]; ok {
		return
	}
	if r.set == nil {
		r.set = map[uint64]struct{}{}
	}
	if len(r.ring) < finishedKept {
		r.ring = append(r.ring, id)
	} else {
		delete(r.set, r.ring[r.next])
		r.ring[r.next] = id
		r.next = (r.next + 1) % finishedKept
	}
	r.set[id] = struct{}{}
}

func (r *recentIDs) has(id uint64) bool {
	_, ok := r.set[id]
	return ok
}

// started lists a turn as running, unless it has finished already; it
// reports whether it did.
func (d *dashboardSource) started(t dashboard.Turn) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.finished.has(t.EventID) {
		return false
	}
	d.running[t.EventID] = t
	return true
}

// ended takes a turn off the running list for good.
func (d *dashboardSource) ended(id uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.running, id)
	d.finished.add(id)
}

// follow keeps the running turns and the activity log current from the
// hub until ctx ends.
func (d *dashboardSource) follow(ctx context.Context) {
	for ev := range d.hub.Subscribe(ctx) {
		switch ev.Type {
		case admin.TurnStarted:
			d.started(d.named(turnOf(ev)))
		case admin.ToolUsed:
			d.mu.Lock()
			if t, ok := d.running[ev.EventID]; ok {
				t.Tool = ev.Tool
				d.running[ev.EventID] = t
			}
			d.mu.Unlock()
		case admin.TurnFinished:
			d.ended(ev.EventID)
			e := entryOf(ev)
			e.ChannelName = d.name(e.ChannelID)
			if err := d.activity.Append(e); err != nil {
				d.log.Warn().Err(err).Msg("could not keep a finished event in the activity log")
			}
		case admin.Resync:
			// Turns whose end was missed would stay "running": keep only
			// those the queue still runs.
			d.mu.Lock()
			for id, t := range d.running {
				if cur, ok, _ := d.queue.Lane(laneOf(t.ChannelID)); !ok || cur.ID != id {
					delete(d.running, id)
				}
			}
			d.mu.Unlock()
		}
	}
}

// named adds the channel's name to a turn.
func (d *dashboardSource) named(t dashboard.Turn) dashboard.Turn {
	t.ChannelName = d.name(t.ChannelID)
	return t
}

func turnOf(ev admin.Event) dashboard.Turn {
	return dashboard.Turn{EventID: ev.EventID, ChannelID: ev.Channel, Kind: ev.Kind, Name: ev.Name, Prompt: ev.Prompt, StartedAt: ev.Time}
}

func entryOf(ev admin.Event) dashboard.Entry {
	return dashboard.Entry{EventID: ev.EventID, Time: ev.Time, ChannelID: ev.Channel, Kind: ev.Kind, Name: ev.Name,
		Outcome: ev.Outcome, Duration: ev.Duration, CostUSD: ev.CostUSD}
}

// laneOf is the queue lane of a channel's events.
func laneOf(channel string) string {
	if channel == "" {
		return queue.SystemLane
	}
	return channel
}

// Snapshot implements dashboard.Source.
func (d *dashboardSource) Snapshot() dashboard.State {
	var s dashboard.State
	d.mu.Lock()
	for _, t := range d.running {
		s.Running = append(s.Running, t)
	}
	d.mu.Unlock()
	slices.SortFunc(s.Running, func(a, b dashboard.Turn) int { return a.StartedAt.Compare(b.StartedAt) })
	s.Queue = lanesOf(d.queue.Waiting())
	for i := range s.Queue {
		s.Queue[i].Name = d.name(s.Queue[i].Lane)
	}
	s.Activity = d.activity.Recent()
	s.Costs = d.costs()
	s.Schedule = d.jobs()
	for _, ch := range d.sessions.Channels() {
		if b, ok := d.sessions.Get(ch); ok {
			s.Sessions = append(s.Sessions, dashboard.Session{ChannelID: ch, ChannelName: d.name(ch), SessionID: b.SessionID, Started: b.Updated,
				Model: d.sessions.Settings(ch).Model})
		}
	}
	s.Health = dashboard.Health{Discord: d.connected(), CLI: d.backend, Ready: d.ready() == nil}
	return s
}

func lanesOf(ws []queue.LaneWaiting) []dashboard.Lane {
	out := make([]dashboard.Lane, 0, len(ws))
	for _, w := range ws {
		out = append(out, dashboard.Lane{Lane: w.Lane, Waiting: w.Waiting, Oldest: w.Oldest})
	}
	return out
}

func (d *dashboardSource) costs() dashboard.Costs {
	if d.ledger == nil {
		return dashboard.Costs{}
	}
	now := time.Now()
	r := d.ledger.Report(now, "")
	today, week := d.ledger.ByChannel(now)
	today, week = d.byName(today), d.byName(week)
	return dashboard.Costs{
		Today: dashboard.Spend{Total: r.GatewayToday.USD, ByChannel: today, ByKind: r.GatewayToday.ByKind, Estimate: r.GatewayToday.Estimate},
		Week:  dashboard.Spend{Total: r.GatewayWeek.USD, ByChannel: week, ByKind: r.GatewayWeek.ByKind, Estimate: r.GatewayWeek.Estimate},
	}
}

// byName keys spending by the channels' display names.
func (d *dashboardSource) byName(m map[string]float64) map[string]float64 {
	out := make(map[string]float64, len(m))
	for id, usd := range m {
		key := "(no channel)"
		if id != "" {
			key = firstNonEmptyName(d.name(id), id)
		}
		out[key] += usd
	}
	return out
}

func (d *dashboardSource) jobs() []dashboard.Job {
	if d.sched == nil {
		return nil
	}
	var out []dashboard.Job
	for _, j := range d.sched.Jobs() {
		kind := dashboard.ScheduleCron
		if j.Kind == queue.KindHeartbeat {
			kind = dashboard.ScheduleHeartbeat
		}
		job := dashboard.Job{Kind: kind, Name: j.Name, Schedule: j.Schedule, NextRun: j.Next, LastRun: j.Last, Paused: j.Paused}
		if j.Channel != "" {
			job.ChannelName = firstNonEmptyName(d.name(j.Channel), j.Channel)
		}
		out = append(out, job)
	}
	return out
}

func firstNonEmptyName(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Subscribe implements dashboard.Source: the hub's events as the page's
// updates.
func (d *dashboardSource) Subscribe(ctx context.Context) <-chan dashboard.Update {
	in := d.hub.Subscribe(ctx)
	out := make(chan dashboard.Update, 16)
	go func() {
		defer close(out)
		for ev := range in {
			var us []dashboard.Update
			switch ev.Type {
			case admin.TurnStarted:
				// Recorded here as well as in follow (another
				// subscriber, which may not have seen it yet): a Stop
				// pressed on this update must find the turn. A turn
				// that has ended by now is not shown at all.
				t := d.named(turnOf(ev))
				if d.started(t) {
					us = append(us, dashboard.TurnStarted(t))
				}
			case admin.ToolUsed:
				us = append(us, dashboard.ToolUsed(ev.EventID, ev.Tool))
			case admin.TurnFinished:
				d.ended(ev.EventID)
				e := entryOf(ev)
				e.ChannelName = d.name(e.ChannelID)
				us = append(us, dashboard.TurnFinished(e), dashboard.CostsChanged(d.costs()))
			case admin.QueueChanged:
				var lanes []dashboard.Lane
				for _, l := range ev.Lanes {
					lanes = append(lanes, dashboard.Lane{Lane: l.Lane, Name: d.name(l.Lane), Waiting: l.Waiting, Oldest: l.Oldest})
				}
				us = append(us, dashboard.QueueChanged(lanes))
			case admin.Resync:
				us = append(us, dashboard.Update{Resync: true})
			}
			for _, u := range us {
				select {
				case out <- u:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out
}

// Stop implements dashboard.Source: what the Discord Stop button does.
func (d *dashboardSource) Stop(eventID uint64) error {
	d.mu.Lock()
	t, ok := d.running[eventID]
	d.mu.Unlock()
	if !ok || !d.queue.Cancel(laneOf(t.ChannelID), eventID) {
		return fmt.Errorf("turn %d: %w", eventID, dashboard.ErrNotFound)
	}
	d.log.Info().Uint64("event", eventID).Msg("turn stopped from the dashboard")
	return nil
}

// RunNow implements dashboard.Source for cron jobs.
func (d *dashboardSource) RunNow(kind, name string) error {
	if d.sched == nil {
		return fmt.Errorf("no schedule: %w", dashboard.ErrNotFound)
	}
	var err error
	switch kind {
	case dashboard.ScheduleCron:
		err = d.sched.Trigger(name)
	case dashboard.ScheduleHeartbeat:
		err = d.sched.TriggerHeartbeat(name)
	default:
		return fmt.Errorf("%q: %w", kind, dashboard.ErrNotFound)
	}
	switch {
	case errors.Is(err, schedule.ErrNoCronJob):
		return fmt.Errorf("%s %q: %w", kind, name, dashboard.ErrNotFound)
	case errors.Is(err, schedule.ErrBusy):
		return fmt.Errorf("%s %q is running: %w", kind, name, dashboard.ErrConflict)
	case err != nil:
		return err
	}
	d.log.Info().Str("kind", kind).Str("job", name).Msg("scheduled job run from the dashboard")
	return nil
}

// ResetSession implements dashboard.Source, as /claude-reset does.
func (d *dashboardSource) ResetSession(channelID string) error {
	removed, err := d.sessions.Delete(channelID)
	switch {
	case err != nil:
		return err
	case !removed:
		return fmt.Errorf("session of %s: %w", channelID, dashboard.ErrNotFound)
	}
	d.log.Info().Str("channel", channelID).Msg("session reset from the dashboard")
	return nil
}

// ActivityFile keeps the dashboard's recent activity across restarts.
const ActivityFile = "activity.jsonl"

// mountDashboard serves the dashboard at / on the admin server, behind
// its auth; the returned function stops it.
func mountDashboard(srv *admin.Server, d *dashboardSource, path string) (func(), error) {
	log, err := dashboard.OpenActivityLog(path)
	if err != nil {
		return nil, err
	}
	d.activity, d.running = log, map[uint64]dashboard.Turn{}
	ctx, cancel := context.WithCancel(context.Background())
	go d.follow(ctx)
	srv.Handle("/", dashboard.Handler(d, dashboard.Options{Prefix: "/", Log: d.log}))
	return func() {
		cancel()
		if err := log.Close(); err != nil {
			d.log.Warn().Err(err).Msg("closing the activity log")
		}
	}, nil
}
