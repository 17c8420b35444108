package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jonboulle/clockwork"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/admin"
	"github.com/agentgateway/gateway/internal/cluster"
	"github.com/agentgateway/gateway/internal/dashboard"
	"github.com/agentgateway/gateway/internal/queue"
	"github.com/agentgateway/gateway/internal/session"
)

// sseEvents reads the dashboard's event stream: each event's name and
// data, in order.
func sseEvents(t *testing.T, ctx context.Context, url string) <-chan [2]string {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /events: %s", resp.Status)
	}
	out := make(chan [2]string, 64)
	go func() {
		defer resp.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
		var name string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				out <- [2]string{name, strings.TrimPrefix(line, "data: ")}
			}
		}
	}()
	return out
}

// The dashboard is served behind the admin server's auth, shows a running
// turn live, and its Stop does what the Discord Stop does.
func TestDashboardShowsAndStopsARunningTurn(t *testing.T) {
	g := startAdminGateway(t, harnessOptions{respond: func(ctx context.Context, req backends.Request, emit func(backends.Event)) (backends.Result, error) {
		emit(backends.Event{Kind: backends.EventInit, SessionID: "s"})
		emit(backends.Event{Kind: backends.EventToolUse, Tool: &backends.ToolCall{ID: "t1", Name: "Bash", Input: `{"command":"sleep 600"}`}})
		<-ctx.Done() // until stopped
		return backends.Result{}, ctx.Err()
	}})
	if code, body := g.status("/"); code != http.StatusOK || !strings.Contains(body, "<html") {
		t.Fatalf("GET / = %d %.80q", code, body)
	}
	resp, err := http.Get(g.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET / without the token = %d, want 401", resp.StatusCode)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := sseEvents(t, ctx, g.url+"/events")
	g.mention(g.channel, "work for a long time")
	var id uint64
	deadline := time.After(waitLong)
	for id == 0 {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("event stream ended")
			}
			if ev[0] != dashboard.KindTurnStarted {
				continue
			}
			var turn dashboard.Turn
			if err := json.Unmarshal([]byte(ev[1]), &turn); err != nil {
				t.Fatalf("turn_started %s: %v", ev[1], err)
			}
			if turn.ChannelID != g.channel.String() || turn.Prompt != "work for a long time" {
				t.Errorf("turn = %+v", turn)
			}
			id = turn.EventID
		case <-deadline:
			t.Fatal("no turn_started on the dashboard")
		}
	}

	stop := func(header bool) int {
		req, _ := http.NewRequest(http.MethodPost, g.url+"/turns/"+strconv.FormatUint(id, 10)+"/stop", nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		if header {
			req.Header.Set(dashboard.CSRFHeader, dashboard.CSRFValue)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := stop(false); code != http.StatusForbidden {
		t.Errorf("stop without the CSRF header = %d, want 403", code)
	}
	if code := stop(true); code != http.StatusOK {
		t.Fatalf("stop = %d", code)
	}
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("event stream ended before the turn finished")
			}
			if ev[0] != dashboard.KindTurnFinished {
				continue
			}
			var e dashboard.Entry
			json.Unmarshal([]byte(ev[1]), &e)
			if e.EventID != id || e.Outcome != "stopped" {
				t.Fatalf("finished = %+v, want event %d stopped", e, id)
			}
			if code := stop(true); code != http.StatusNotFound {
				t.Errorf("a second stop = %d, want 404", code)
			}
			return
		case <-deadline:
			t.Fatal("the stopped turn did not finish")
		}
	}
}

// Several subscribers read the hub, each at its own pace: the dashboard's
// own follower and one per open page. A page that reads a turn's start
// after the follower has read its end must not list the finished turn as
// running again; when that page then misses the end (it fell behind, and
// gets a resync instead), the turn would stay "running" for good.
func TestDashboardForgetsAFinishedTurnReadLate(t *testing.T) {
	hub := admin.NewHub(2, 0) // every subscriber buffers two events
	activity, err := dashboard.OpenActivityLog(filepath.Join(t.TempDir(), ActivityFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { activity.Close() })
	d := &dashboardSource{
		hub: hub, queue: queue.New(queue.Options{}, nil), activity: activity,
		name: func(string) string { return "" }, log: zerolog.New(zerolog.NewTestWriter(t)),
		running: map[uint64]dashboard.Turn{},
	}
	deadline := time.Now().Add(waitLong)
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			runtime.Gosched()
		}
	}
	running := func(id uint64) bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		_, ok := d.running[id]
		return ok
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go d.follow(ctx)
	waitFor("the follower to subscribe", func() bool { return hub.Subscribers() == 1 })
	page := d.Subscribe(ctx)
	waitFor("the page to subscribe", func() bool { return hub.Subscribers() == 2 })

	// finish publishes a turn's end and waits for the follower to read it,
	// so that the follower never falls behind.
	finish := func(id uint64) {
		t.Helper()
		hub.Publish(admin.Event{Type: admin.TurnFinished, EventID: id, Kind: "message", Outcome: "ok"})
		waitFor("the follower to record the end", func() bool {
			r := activity.Recent()
			return len(r) > 0 && r[0].EventID == id
		})
	}
	// The page's stream takes 16 updates (2 per finished turn) and nobody
	// reads it: its reader blocks, then the hub drops what the page has no
	// room for.
	for i := range 8 {
		finish(uint64(101 + i))
		waitFor("the page's stream to fill", func() bool { return len(page) == 2*(i+1) })
	}
	finish(109)
	hub.Publish(admin.Event{Type: admin.TurnStarted, EventID: 7, Channel: "100", Kind: "message", Prompt: "hi"})
	waitFor("the follower to list turn 7", func() bool { return running(7) })
	finish(110) // the page's buffer is full now
	finish(7)   // so the page never gets this end
	if running(7) {
		t.Fatal("turn 7 still runs after the follower read its end")
	}

	// The page catches up: turn 7's start, read late, then a resync for
	// the end it lost.
	next := uint64(111)
	for resynced := false; !resynced; {
		select {
		case u := <-page:
			resynced = u.Resync
		default:
			finish(next) // a resync comes with the next event the page has room for
			next++
		}
		if time.Now().After(deadline) {
			t.Fatal("the page got no resync")
		}
	}
	if running(7) {
		t.Error("turn 7, finished, is listed as running again after a page read its start late")
	}
}

// procList is a processes function that counts its reads and answers
// what the test sets.
type procList struct {
	mu      sync.Mutex // guards the fields below
	workers []cluster.Worker
	err     error
	reads   int
}

func (p *procList) set(ws []cluster.Worker, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.workers, p.err = ws, err
}

func (p *procList) list(ctx context.Context) ([]cluster.Worker, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reads++
	return slices.Clone(p.workers), p.err
}

func (p *procList) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reads
}

// testDashboard is a dashboardSource over an empty gateway, following its
// hub until the test ends; processes and self are as given (nil and "" on
// one machine).
func testDashboard(t *testing.T, processes func(context.Context) ([]cluster.Worker, error), self string, clock clockwork.Clock) (*dashboardSource, *admin.Hub) {
	t.Helper()
	hub := admin.NewHub(64, 0)
	activity, err := dashboard.OpenActivityLog(filepath.Join(t.TempDir(), ActivityFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { activity.Close() })
	sessions, _, err := session.Open("")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{"100": "general", "200": hostileChannel}
	d := &dashboardSource{
		hub: hub, queue: queue.New(queue.Options{}, nil), sessions: sessions, activity: activity,
		ready: func() error { return nil }, connected: func() bool { return true },
		name: func(id string) string { return names[id] }, backend: "claude",
		log:       zerolog.New(zerolog.NewTestWriter(t)),
		running:   map[uint64]dashboard.Turn{},
		processes: processes, self: self, clock: clock,
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go d.follow(ctx)
	waitUntil(t, "the follower to subscribe", func() bool { return hub.Subscribers() == 1 })
	return d, hub
}

// hostileChannel is a thread name (users name threads) written to be
// taken for markup; the page shows it as text (internal/dashboard's
// tests), so the source passes it on as it is.
const hostileChannel = `<img src=x onerror=alert(1)>`

// waitUntil fails the test unless cond holds within waitLong.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLong)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		runtime.Gosched()
	}
}

// On several processes the page lists every process with its turns by
// channel name, and a turn of this process names it; this process's own
// turns are the live ones, not its last heartbeat's.
func TestDashboardListsProcesses(t *testing.T) {
	t0 := time.Date(2025, 6, 2, 14, 0, 0, 0, time.UTC)
	clock := clockwork.NewFakeClockAt(t0)
	procs := &procList{}
	procs.set([]cluster.Worker{
		{Name: "run-1", Role: cluster.RoleRun, Version: "1.4.0", Started: t0.Add(-time.Hour), Slots: 1, Beat: t0.Add(-2 * time.Second),
			Turns: []cluster.Turn{{Lane: "300", Event: 5, Since: t0.Add(-time.Hour)}}}, // finished since that heartbeat
		{Name: "worker-a", Role: cluster.RoleWorker, Version: "1.4.0", Started: t0.Add(-time.Hour), Slots: 4, Beat: t0.Add(-4 * time.Second),
			Turns: []cluster.Turn{
				{Lane: "200", Event: 8, Since: t0.Add(-time.Minute)},
				{Lane: queue.SystemLane, Event: 9, Since: t0.Add(-10 * time.Second)},
			}},
	}, nil)
	d, hub := testDashboard(t, procs.list, "run-1", clock)

	hub.Publish(admin.Event{Type: admin.TurnStarted, EventID: 7, Channel: "100", Kind: "message", Prompt: "hi", Time: t0.Add(-30 * time.Second)})
	waitUntil(t, "turn 7 to be listed", func() bool { return len(d.Snapshot().Running) == 1 })

	s := d.Snapshot()
	want := &dashboard.Processes{Self: "run-1", Read: t0, List: []dashboard.Process{
		{Name: "run-1", Role: "run", Version: "1.4.0", Started: t0.Add(-time.Hour), Slots: 1, Beat: t0.Add(-2 * time.Second),
			Turns: []dashboard.ProcessTurn{{EventID: 7, Lane: "100", ChannelName: "general", Since: t0.Add(-30 * time.Second)}}},
		{Name: "worker-a", Role: "worker", Version: "1.4.0", Started: t0.Add(-time.Hour), Slots: 4, Beat: t0.Add(-4 * time.Second),
			Turns: []dashboard.ProcessTurn{
				{EventID: 8, Lane: "200", ChannelName: hostileChannel, Since: t0.Add(-time.Minute)},
				{EventID: 9, Lane: queue.SystemLane, Since: t0.Add(-10 * time.Second)},
			}},
	}}
	if d := cmp.Diff(want, s.Processes); d != "" {
		t.Errorf("processes (-want +got):\n%s", d)
	}
	if got := s.Running[0]; got.Process != "run-1" || got.ChannelName != "general" {
		t.Errorf("running turn on %q in %q, want run-1 in general", got.Process, got.ChannelName)
	}
}

// On one machine nothing changes: no processes, no process on a turn, and
// nothing to read.
func TestDashboardOnOneMachineHasNoProcesses(t *testing.T) {
	d, hub := testDashboard(t, nil, "", nil)
	hub.Publish(admin.Event{Type: admin.TurnStarted, EventID: 7, Channel: "100", Kind: "message", Prompt: "hi", Time: time.Now()})
	waitUntil(t, "turn 7 to be listed", func() bool { return len(d.Snapshot().Running) == 1 })
	s := d.Snapshot()
	if s.Processes != nil || s.Running[0].Process != "" {
		t.Errorf("one machine: processes %+v, turn on %q", s.Processes, s.Running[0].Process)
	}
}

// However many pages are open, NATS is read at most once per
// processEvery: the pages share what was read, and each gets it again
// every processEvery.
func TestDashboardReadsProcessesAtMostOncePerInterval(t *testing.T) {
	clock := clockwork.NewFakeClock()
	procs := &procList{}
	procs.set([]cluster.Worker{{Name: "run-1", Role: cluster.RoleRun, Slots: 2}}, nil)
	d, _ := testDashboard(t, procs.list, "run-1", clock)

	const pages = 8
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var subs []<-chan dashboard.Update
	var wg sync.WaitGroup
	for range pages {
		subs = append(subs, d.Subscribe(ctx))
		wg.Add(1)
		go func() { defer wg.Done(); d.Snapshot() }() // each page's first snapshot
	}
	wg.Wait()
	if n := procs.count(); n != 1 {
		t.Fatalf("%d pages' snapshots read NATS %d times, want once", pages, n)
	}
	// Every page waits for its next refresh.
	if err := clock.BlockUntilContext(ctxWithin(t, waitLong), pages); err != nil {
		t.Fatalf("the pages' refresh timers: %v", err)
	}
	procs.set([]cluster.Worker{{Name: "run-1", Role: cluster.RoleRun, Slots: 2}, {Name: "worker-a", Role: cluster.RoleWorker, Slots: 4}}, nil)
	for round := 1; round <= 3; round++ {
		clock.Advance(processEvery)
		for i, sub := range subs {
			u := nextUpdate(t, sub, dashboard.KindProcesses)
			// A page whose refresh comes while another page reads gets
			// the list as last read: the new one from the next round on.
			if p := u.Payload.(dashboard.Processes); round > 1 && len(p.List) != 2 {
				t.Errorf("round %d, page %d: %d processes, want 2", round, i, len(p.List))
			}
		}
		if n := procs.count(); n != 1+round {
			t.Errorf("after %d refreshes of %d pages: %d reads of NATS, want %d", round, pages, n, 1+round)
		}
	}
}

// ctxWithin is a context that ends after d or with the test.
func ctxWithin(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// nextUpdate returns the next update of the given kind from sub.
func nextUpdate(t *testing.T, sub <-chan dashboard.Update, kind string) dashboard.Update {
	t.Helper()
	deadline := time.After(waitLong)
	for {
		select {
		case u, ok := <-sub:
			if !ok {
				t.Fatal("the subscription ended")
			}
			if u.Kind == kind {
				return u
			}
		case <-deadline:
			t.Fatalf("no %s update", kind)
		}
	}
}

// When NATS cannot be read the page keeps the last list, says so in plain
// words (not the client's error, which may name servers), and says when
// it was read; once NATS answers again the note goes.
func TestDashboardKeepsTheLastProcessesWhenNATSIsAway(t *testing.T) {
	t0 := time.Date(2025, 6, 2, 14, 0, 0, 0, time.UTC)
	clock := clockwork.NewFakeClockAt(t0)
	procs := &procList{}
	ok := []cluster.Worker{{Name: "run-1", Role: cluster.RoleRun, Slots: 2, Beat: t0}}
	procs.set(ok, nil)
	d, _ := testDashboard(t, procs.list, "run-1", clock)

	tests := []struct {
		name    string
		workers []cluster.Worker
		err     error
		wantN   int
		wantErr bool
		read    time.Time
	}{
		{"read", ok, nil, 1, false, t0},
		{"nats away", nil, errors.New("nats: no servers available for connection: nats://admin:s3cret@10.0.0.5:4222"), 1, true, t0},
		{"one heartbeat unreadable", []cluster.Worker{ok[0], {Name: "worker-a", Role: cluster.RoleWorker, Slots: 4}},
			errors.New("bucket gateway-workers: unreadable heartbeat of worker-b"), 2, true, t0.Add(2 * processEvery)},
		{"back", ok, nil, 1, false, t0.Add(3 * processEvery)},
	}
	for i, tt := range tests {
		if i > 0 {
			clock.Advance(processEvery)
		}
		procs.set(tt.workers, tt.err)
		p := d.Snapshot().Processes
		if len(p.List) != tt.wantN || (p.Error != "") != tt.wantErr || !p.Read.Equal(tt.read) {
			t.Errorf("%s: %d processes, error %q, read %v; want %d, an error: %t, read %v", tt.name, len(p.List), p.Error, p.Read, tt.wantN, tt.wantErr, tt.read)
		}
		if strings.Contains(p.Error, "nats:") || strings.Contains(p.Error, "s3cret") {
			t.Errorf("%s: the page is told %q", tt.name, p.Error)
		}
	}
}

// Against a real NATS server: two processes' heartbeats, as the process
// serving the page reads them.
func TestDashboardProcessesFromTheRegistry(t *testing.T) {
	srv := runNATS(t)
	ctx := ctxWithin(t, waitLong)
	open := func(name, role string, slots int, turns []cluster.Turn) *cluster.Registry {
		nc, err := nats.Connect(srv.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		r, err := cluster.OpenRegistry(ctx, js, cluster.RegistryOptions{
			Self:  cluster.Worker{Name: name, Role: role, Version: "test", Slots: slots},
			Turns: func() []cluster.Turn { return turns },
			Log:   zerolog.New(zerolog.NewTestWriter(t)),
		})
		if err != nil {
			t.Fatal(err)
		}
		beatCtx, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); r.Beat(beatCtx) }()
		t.Cleanup(func() { stop(); <-done })
		return r
	}
	self := open("run-1", cluster.RoleRun, 0, nil)
	open("worker-a", cluster.RoleWorker, 2, []cluster.Turn{{Lane: "100", Event: 12, Since: time.Now().Add(-time.Minute)}})
	waitUntil(t, "both heartbeats", func() bool {
		ws, err := self.List(ctx)
		return err == nil && len(ws) == 2
	})

	d, _ := testDashboard(t, self.List, self.Name(), nil)
	p := d.Snapshot().Processes
	var got []string
	for _, w := range p.List {
		line := fmt.Sprintf("%s %s %d/%d", w.Name, w.Role, len(w.Turns), w.Slots)
		for _, tr := range w.Turns {
			line += fmt.Sprintf(" #%s event %d", tr.ChannelName, tr.EventID)
		}
		got = append(got, line)
	}
	want := []string{"run-1 run 0/0", "worker-a worker 1/2 #general event 12"}
	if d := cmp.Diff(want, got); d != "" || p.Error != "" {
		t.Errorf("processes (-want +got):\n%s\nerror %q", d, p.Error)
	}
}

// A page's stream never waits for NATS: while another page's snapshot
// waits for a read, the page's refresh gives the list as last read, and
// this process's turns reach it at once.
func TestDashboardPagesDoNotWaitForNATS(t *testing.T) {
	clock := clockwork.NewFakeClock()
	reading, answer := make(chan struct{}), make(chan struct{})
	var reads atomic.Int32
	list := func(ctx context.Context) ([]cluster.Worker, error) {
		if reads.Add(1) > 1 { // the first snapshot's read answers at once
			reading <- struct{}{}
			<-answer
		}
		return []cluster.Worker{{Name: "run-1", Role: cluster.RoleRun, Slots: 1}}, nil
	}
	d, hub := testDashboard(t, list, "run-1", clock)
	d.Snapshot()
	clock.Advance(processEvery) // the list is due for a read
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	page := d.Subscribe(ctx)
	waitUntil(t, "the page to subscribe", func() bool { return hub.Subscribers() == 2 })
	if err := clock.BlockUntilContext(ctxWithin(t, waitLong), 1); err != nil {
		t.Fatalf("the page's refresh timer: %v", err)
	}
	snapshot := make(chan struct{})
	go func() { defer close(snapshot); d.Snapshot() }()
	<-reading // another page's snapshot reads, and NATS does not answer yet

	clock.Advance(processEvery) // the page's refresh
	if p := nextUpdate(t, page, dashboard.KindProcesses).Payload.(dashboard.Processes); len(p.List) != 1 {
		t.Errorf("refresh during a read: %+v, want the last list", p)
	}
	hub.Publish(admin.Event{Type: admin.TurnStarted, EventID: 7, Channel: "100", Kind: "message", Prompt: "hi", Time: clock.Now()})
	nextUpdate(t, page, dashboard.KindTurnStarted)
	p := nextUpdate(t, page, dashboard.KindProcesses).Payload.(dashboard.Processes)
	if len(p.List) != 1 || len(p.List[0].Turns) != 1 || p.List[0].Turns[0].EventID != 7 {
		t.Errorf("processes after turn 7 started: %+v", p)
	}
	close(answer)
	<-snapshot
	if n := reads.Load(); n != 2 {
		t.Errorf("%d reads of NATS, want 2", n)
	}
}
