package gateway

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/admin"
	"github.com/agentgateway/gateway/internal/cluster"
	"github.com/agentgateway/gateway/internal/cost"
	"github.com/agentgateway/gateway/internal/dashboard"
	"github.com/agentgateway/gateway/internal/limit"
	"github.com/agentgateway/gateway/internal/queue"
	"github.com/agentgateway/gateway/internal/schedule"
	"github.com/agentgateway/gateway/internal/session"
)

// dashboardSource is the dashboard's view of the gateway
// (dashboard.Source): the admin hub's events for the turns running now and
// the activity, the queue, the ledger, the schedule and the sessions for
// the rest, and on several processes their heartbeats.
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
	// limits is the login's usage limit gate; nil shows none.
	limits *limit.Gate

	// processes, when set, lists the gateway's processes
	// (cluster.Registry.List): the gateway runs on several (NATS_URL) and
	// the page shows them. nil on one machine.
	processes func(context.Context) ([]cluster.Worker, error)
	// self is this process's name among them, which its own turns carry.
	self string
	// clock paces the reads of processes; nil means the real clock.
	clock clockwork.Clock
	procs processCache

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

// named adds the channel's name to a turn, and the process running it.
func (d *dashboardSource) named(t dashboard.Turn) dashboard.Turn {
	t.ChannelName = d.name(t.ChannelID)
	t.Process = d.self
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
	sort.SliceStable(s.Running, func(i, j int) bool { return s.Running[i].StartedAt.Before(s.Running[j].StartedAt) })
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
	if l, ok := d.limits.Current(); ok {
		s.Health.Limit = &dashboard.Limit{ResetAt: l.ResetAt, Window: l.Window, Waiting: d.limits.Waiting()}
	}
	if d.processes != nil {
		p := d.processList(readWait)
		s.Processes = &p
	}
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
// updates, and on several processes their list every processEvery.
func (d *dashboardSource) Subscribe(ctx context.Context) <-chan dashboard.Update {
	in := d.hub.Subscribe(ctx)
	out := make(chan dashboard.Update, 16)
	var refresh <-chan time.Time
	stop := func() {}
	if d.processes != nil {
		// Made here, not in the goroutine, so that a page is on the
		// clock as soon as it has subscribed.
		tick := d.clk().NewTicker(processEvery)
		refresh, stop = tick.Chan(), tick.Stop
	}
	go func() {
		defer close(out)
		defer stop()
		for {
			var us []dashboard.Update
			select {
			case ev, ok := <-in:
				if !ok {
					return
				}
				us = d.updatesOf(ev)
			case <-refresh:
				us = append(us, dashboard.ProcessesChanged(d.processList(readIfIdle)))
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

// updatesOf is what a hub event changes on a page.
func (d *dashboardSource) updatesOf(ev admin.Event) []dashboard.Update {
	var us []dashboard.Update
	switch ev.Type {
	case admin.TurnStarted:
		// Recorded here as well as in follow (another subscriber, which
		// may not have seen it yet): a Stop pressed on this update must
		// find the turn. A turn that has ended by now is not shown at all.
		t := d.named(turnOf(ev))
		if d.started(t) {
			us = append(us, dashboard.TurnStarted(t))
			us = d.withProcesses(us)
		}
	case admin.ToolUsed:
		us = append(us, dashboard.ToolUsed(ev.EventID, ev.Tool))
	case admin.TurnFinished:
		d.ended(ev.EventID)
		e := entryOf(ev)
		e.ChannelName = d.name(e.ChannelID)
		us = append(us, dashboard.TurnFinished(e), dashboard.CostsChanged(d.costs()))
		us = d.withProcesses(us)
	case admin.QueueChanged:
		var lanes []dashboard.Lane
		for _, l := range ev.Lanes {
			lanes = append(lanes, dashboard.Lane{Lane: l.Lane, Name: d.name(l.Lane), Waiting: l.Waiting, Oldest: l.Oldest})
		}
		us = append(us, dashboard.QueueChanged(lanes))
	case admin.Resync:
		us = append(us, dashboard.Update{Resync: true})
	}
	return us
}

// withProcesses adds the list of processes, as last read, to a change of
// this process's turns, which that list shows too. It reads nothing.
func (d *dashboardSource) withProcesses(us []dashboard.Update) []dashboard.Update {
	if d.processes == nil {
		return us
	}
	return append(us, dashboard.ProcessesChanged(d.processList(readNone)))
}

// processEvery is how often the page's list of processes is refreshed, and
// how old the list read from NATS may be: each process writes its
// heartbeat every 5 s (cluster.DefaultWorkerTTL/6).
const processEvery = 5 * time.Second

// processRead bounds one read of the processes, so that a page waits at
// most that long for NATS.
const processRead = 2 * time.Second

// processesAway is what the page says when the processes cannot be read.
const processesAway = "The processes cannot be read from NATS right now; this is the last list read."

// processRefresh says whether processList reads NATS first.
type processRefresh int

const (
	readNone processRefresh = iota // the list as last read
	// readIfIdle reads unless another read runs: a page's periodic
	// refresh, which must not hold up its stream.
	readIfIdle
	// readWait reads, or waits for the read running: a page's first
	// snapshot, which should not come without the list.
	readWait
)

// processCache is the list of processes last read, shared by every page
// so that NATS is read at most once per processEvery whatever their
// number. The zero value has read nothing.
type processCache struct {
	// reading is held across a read, so that a page that asks while
	// another reads waits for that read rather than reading again.
	reading sync.Mutex
	// mu guards the fields below; it is never held across a read, so
	// that a turn's update never waits for NATS.
	mu      sync.Mutex
	tried   time.Time // when it was last read, or tried
	workers []cluster.Worker
	read    time.Time // when workers was read
	err     error     // why the last read failed
}

func (d *dashboardSource) clk() clockwork.Clock {
	if d.clock == nil {
		return clockwork.NewRealClock()
	}
	return d.clock
}

// processList is the gateway's processes for the page. It reads them
// again first when the last read is processEvery old, as readProcesses
// does, if refresh is readWait or readIfIdle. This process's turns are its
// live ones rather than those of its last heartbeat.
func (d *dashboardSource) processList(refresh processRefresh) dashboard.Processes {
	c := &d.procs
	if refresh != readNone {
		d.readProcesses(refresh == readWait)
	}
	c.mu.Lock()
	workers, read, err := c.workers, c.read, c.err
	c.mu.Unlock()

	p := dashboard.Processes{Self: d.self, Read: read, List: make([]dashboard.Process, 0, len(workers))}
	if err != nil {
		p.Error = processesAway
	}
	for _, w := range workers {
		proc := dashboard.Process{Name: w.Name, Role: w.Role, Version: w.Version, Started: w.Started, Slots: w.Slots, Beat: w.Beat}
		if w.Name == d.self {
			proc.Turns = d.ownTurns()
		} else {
			for _, t := range w.Turns {
				proc.Turns = append(proc.Turns, d.processTurn(t))
			}
		}
		p.List = append(p.List, proc)
	}
	return p
}

// readProcesses reads the processes from NATS into the cache, unless
// they were read (or tried) less than processEvery ago. While another
// read runs it waits for that one when wait is set, and otherwise leaves
// the cache as it is.
func (d *dashboardSource) readProcesses(wait bool) {
	c := &d.procs
	if wait {
		c.reading.Lock()
	} else if !c.reading.TryLock() {
		return
	}
	defer c.reading.Unlock()
	now := d.clk().Now()
	c.mu.Lock()
	fresh := !c.tried.IsZero() && now.Sub(c.tried) < processEvery
	failing := c.err != nil
	c.mu.Unlock()
	if fresh {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), processRead)
	ws, err := d.processes(ctx)
	cancel()
	switch {
	case err != nil && !failing:
		d.log.Warn().Err(err).Msg("the gateway's processes cannot be read from NATS; the dashboard shows the last list read")
	case err == nil && failing:
		d.log.Info().Msg("the gateway's processes can be read from NATS again")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tried, c.err = now, err
	// A heartbeat that cannot be decoded still leaves the others.
	if err == nil || ws != nil {
		c.workers, c.read = ws, now
	}
}

// ownTurns are the turns this process runs now, oldest first.
func (d *dashboardSource) ownTurns() []dashboard.ProcessTurn {
	d.mu.Lock()
	var out []dashboard.ProcessTurn
	for _, t := range d.running {
		out = append(out, dashboard.ProcessTurn{EventID: t.EventID, Lane: laneOf(t.ChannelID), ChannelName: t.ChannelName, Since: t.StartedAt})
	}
	d.mu.Unlock()
	sort.SliceStable(out, func(i, j int) bool { return out[i].Since.Before(out[j].Since) })
	return out
}

// processTurn is a turn of another process, named by its channel.
func (d *dashboardSource) processTurn(t cluster.Turn) dashboard.ProcessTurn {
	pt := dashboard.ProcessTurn{EventID: t.Event, Lane: t.Lane, Since: t.Since}
	if t.Lane != queue.SystemLane {
		pt.ChannelName = d.name(t.Lane)
	}
	return pt
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
