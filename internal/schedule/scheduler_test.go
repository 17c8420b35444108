package schedule

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	_ "time/tzdata" // the cron tests name zones; do not depend on the host's zoneinfo

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/queue"
)

// waitTimeout bounds every wait in these tests; nothing sleeps.
const waitTimeout = 10 * time.Second

// fakeQueue records enqueued events and hands them to the test.
type fakeQueue struct {
	mu     sync.Mutex // guards nextID, events and err
	nextID uint64
	events []queue.Event
	err    error // returned by Enqueue when set

	ch chan queue.Event // every accepted event, for waiting
}

func newFakeQueue() *fakeQueue { return &fakeQueue{ch: make(chan queue.Event, 100)} }

func (q *fakeQueue) Enqueue(e queue.Event) (queue.Receipt, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err != nil {
		return queue.Receipt{}, q.err
	}
	q.nextID++
	e.ID = q.nextID
	q.events = append(q.events, e)
	q.ch <- e
	return queue.Receipt{Event: e}, nil
}

func (q *fakeQueue) count() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.events)
}

// next waits for the next enqueued event.
func (q *fakeQueue) next(t *testing.T) queue.Event {
	t.Helper()
	select {
	case e := <-q.ch:
		return e
	case <-time.After(waitTimeout):
		t.Fatal("no event enqueued before the deadline")
		return queue.Event{}
	}
}

// logLines is a log sink that lets a test wait for a message.
type logLines struct {
	mu    sync.Mutex // guards buf
	buf   bytes.Buffer
	wrote chan struct{} // signalled after each write
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.buf.Write(p)
	l.mu.Unlock()
	select {
	case l.wrote <- struct{}{}:
	default:
	}
	return len(p), nil
}

// count returns how many log lines contain s.
func (l *logLines) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.buf.String(), s)
}

// waitFor waits until n log lines contain s.
func (l *logLines) waitFor(t *testing.T, s string, n int) {
	t.Helper()
	deadline := time.After(waitTimeout)
	for l.count(s) < n {
		select {
		case <-l.wrote:
		case <-deadline:
			t.Fatalf("log never had %d lines with %q; log:\n%s", n, s, l.buf.String())
		}
	}
}

type harness struct {
	sched *Scheduler
	clock *clockwork.FakeClock
	queue *fakeQueue
	logs  *logLines
}

// start builds a scheduler on a fake clock at now, applies cfg and runs it
// until the test ends.
func start(t *testing.T, now time.Time, loc *time.Location, cfg Config) *harness {
	t.Helper()
	h := &harness{clock: clockwork.NewFakeClockAt(now), queue: newFakeQueue(), logs: &logLines{wrote: make(chan struct{}, 1)}}
	log := zerolog.New(zerolog.MultiLevelWriter(zerolog.NewTestWriter(t), h.logs))
	s, err := New(Options{Enqueue: h.queue.Enqueue, DefaultChannel: "100", Location: loc, Clock: h.clock, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	h.sched = s
	if err := s.Apply(cfg); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return h
}

// waitNext waits until the job's next run is at want. gocron sets a job's
// next run and its timer in one step, so the timer is armed on the fake clock
// once this returns and an Advance past want fires it.
func (h *harness) waitNext(t *testing.T, kind queue.Kind, name string, want time.Time) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		var got time.Time
		for _, r := range h.sched.NextRuns() {
			if r.Kind == kind && r.Name == name {
				got = r.Next
			}
		}
		if got.Equal(want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s %q: next run %v, want %v", kind, name, got, want)
		}
		runtime.Gosched()
	}
}

var epoch = time.Date(2025, time.March, 3, 8, 0, 0, 0, time.UTC) // a Monday

func TestHeartbeatFiresAtItsInterval(t *testing.T) {
	t.Parallel()
	hb := Heartbeat{Name: "inbox", Interval: 90 * time.Second, Instruction: "Check the inbox.", Model: "haiku"}
	h := start(t, epoch, time.UTC, Config{Heartbeats: []Heartbeat{hb}})

	h.waitNext(t, queue.KindHeartbeat, "inbox", epoch.Add(90*time.Second))
	h.clock.Advance(89 * time.Second)
	h.clock.Advance(time.Second)
	got := h.queue.next(t)
	want := queue.Event{ID: 1, Kind: queue.KindHeartbeat, Source: "heartbeat", Name: "inbox", Text: "Check the inbox.", ChannelID: "100", Model: "haiku"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("heartbeat event (-want +got):\n%s", diff)
	}
	h.sched.Done(got.ID)

	h.waitNext(t, queue.KindHeartbeat, "inbox", epoch.Add(180*time.Second))
	h.clock.Advance(90 * time.Second)
	if got := h.queue.next(t); got.ID != 2 || got.Name != "inbox" {
		t.Errorf("second heartbeat = %+v, want event 2 for inbox", got)
	}
}

func TestHeartbeatSkipsWhilePreviousRunUnfinished(t *testing.T) {
	t.Parallel()
	hb := Heartbeat{Name: "inbox", Interval: time.Minute, Instruction: "Check.", Channel: "555"}
	h := start(t, epoch, time.UTC, Config{Heartbeats: []Heartbeat{hb}})

	h.waitNext(t, queue.KindHeartbeat, "inbox", epoch.Add(time.Minute))
	h.clock.Advance(time.Minute)
	first := h.queue.next(t)
	if first.ChannelID != "555" {
		t.Errorf("ChannelID = %q, want the check's own channel 555", first.ChannelID)
	}

	// Not done: the next two ticks are skipped.
	for i := 1; i <= 2; i++ {
		h.waitNext(t, queue.KindHeartbeat, "inbox", epoch.Add(time.Duration(i+1)*time.Minute))
		h.clock.Advance(time.Minute)
		h.logs.waitFor(t, "heartbeat skipped", i)
	}
	if n := h.queue.count(); n != 1 {
		t.Fatalf("%d events enqueued while the first was unfinished, want 1", n)
	}

	h.sched.Done(first.ID)
	h.sched.Done(first.ID) // a repeated Done is harmless
	h.waitNext(t, queue.KindHeartbeat, "inbox", epoch.Add(4*time.Minute))
	h.clock.Advance(time.Minute)
	if got := h.queue.next(t); got.ID != 2 {
		t.Errorf("after Done: event %d, want 2", got.ID)
	}
}

func TestCronFiresInItsTimezone(t *testing.T) {
	t.Parallel()
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	jobs := []CronJob{
		{Name: "berlin", Cron: "30 9 * * 1-5", Instruction: "Morning in Berlin.", Timezone: "Europe/Berlin"},
		{Name: "default", Cron: "0 10 * * *", Instruction: "Ten in the default zone.", Channel: "777"},
	}
	// The default location is New York, so "default" runs at 10:00 there.
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	h := start(t, epoch, ny, Config{Agents: Agents{CronJobs: jobs}})

	berlinAt := time.Date(2025, time.March, 3, 9, 30, 0, 0, berlin) // 08:30 UTC
	h.waitNext(t, queue.KindCron, "berlin", berlinAt)
	nyAt := time.Date(2025, time.March, 3, 10, 0, 0, 0, ny) // 15:00 UTC
	h.waitNext(t, queue.KindCron, "default", nyAt)

	h.clock.Advance(berlinAt.Sub(epoch))
	got := h.queue.next(t)
	want := queue.Event{ID: 1, Kind: queue.KindCron, Source: "cron", Name: "berlin", Text: "Morning in Berlin.", ChannelID: "100"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("cron event (-want +got):\n%s", diff)
	}
	// Tuesday 09:30 Berlin is next for this job.
	h.waitNext(t, queue.KindCron, "berlin", berlinAt.AddDate(0, 0, 1))

	h.clock.Advance(nyAt.Sub(berlinAt))
	got = h.queue.next(t)
	if got.Name != "default" || got.ChannelID != "777" {
		t.Errorf("second cron event = %+v, want job default in channel 777", got)
	}
}

func TestApplyReschedulesOnlyWhatChanged(t *testing.T) {
	t.Parallel()
	a := Heartbeat{Name: "a", Interval: 2 * time.Minute, Instruction: "A."}
	b := Heartbeat{Name: "b", Interval: 5 * time.Minute, Instruction: "B."}
	c := CronJob{Name: "c", Cron: "0 12 * * *", Instruction: "C."}
	h := start(t, epoch, time.UTC, Config{Heartbeats: []Heartbeat{a, b}, Agents: Agents{CronJobs: []CronJob{c}}})
	h.waitNext(t, queue.KindHeartbeat, "a", epoch.Add(2*time.Minute))
	h.waitNext(t, queue.KindHeartbeat, "b", epoch.Add(5*time.Minute))

	h.clock.Advance(time.Minute)
	a.Interval = 3 * time.Minute
	d := Heartbeat{Name: "d", Interval: time.Hour, Instruction: "D."}
	if err := h.sched.Apply(Config{Heartbeats: []Heartbeat{a, b, d}}); err != nil {
		t.Fatal(err)
	}
	now := epoch.Add(time.Minute)
	h.waitNext(t, queue.KindHeartbeat, "a", now.Add(3*time.Minute)) // restarted from now
	h.waitNext(t, queue.KindHeartbeat, "d", now.Add(time.Hour))     // added

	got := h.sched.NextRuns()
	want := []NextRun{
		{Kind: queue.KindHeartbeat, Name: "a", Schedule: "every 3m0s", Next: now.Add(3 * time.Minute)},
		{Kind: queue.KindHeartbeat, Name: "b", Schedule: "every 5m0s", Next: epoch.Add(5 * time.Minute)}, // untouched
		{Kind: queue.KindHeartbeat, Name: "d", Schedule: "every 1h0m0s", Next: now.Add(time.Hour)},
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateApproxTime(0)); diff != "" {
		t.Errorf("NextRuns after Apply (-want +got):\n%s", diff)
	}
	for _, msg := range []string{"scheduled job changed", "scheduled job added", "scheduled job removed"} {
		h.logs.waitFor(t, msg, 1)
	}

	h.clock.Advance(3 * time.Minute) // a fires at now+3m; b (epoch+5m = now+4m) not yet
	if e := h.queue.next(t); e.Name != "a" {
		t.Errorf("first event after Apply is %q, want a", e.Name)
	}
	h.clock.Advance(time.Minute)
	if e := h.queue.next(t); e.Name != "b" {
		t.Errorf("second event after Apply is %q, want b", e.Name)
	}
}

func TestApplyRejectsShortInterval(t *testing.T) {
	t.Parallel()
	h := start(t, epoch, time.UTC, Config{})
	err := h.sched.Apply(Config{Heartbeats: []Heartbeat{
		{Name: "fast", Interval: 59 * time.Second, Instruction: "Too often."},
		{Name: "ok", Interval: time.Minute, Instruction: "Fine."},
	}})
	if err == nil || !strings.Contains(err.Error(), `"fast"`) {
		t.Errorf("Apply error = %v, want one naming the check \"fast\"", err)
	}
	var names []string
	for _, r := range h.sched.NextRuns() {
		names = append(names, r.Name)
	}
	if diff := cmp.Diff([]string{"ok"}, names); diff != "" {
		t.Errorf("scheduled (-want +got):\n%s", diff)
	}
}

func writeFile(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestReloadKeepsLastGoodScheduleOfBrokenFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, HeartbeatFile, "## inbox\nInterval: 120\nInstruction: Check.\n")
	writeFile(t, dir, AgentsFile, `# Rules

## Cron Jobs
### daily
Cron: 0 9 * * *
Instruction: Daily.

## Hooks
### startup
Instruction: Hello.

## Webhooks
### deploy
Secret-Env: DEPLOY_SECRET
Instruction: Deployed: {{payload}}
`)
	h := start(t, epoch, time.UTC, Config{})
	if err := h.sched.Reload(dir); err != nil {
		t.Fatal(err)
	}
	h.waitNext(t, queue.KindHeartbeat, "inbox", epoch.Add(2*time.Minute))
	if got := h.sched.Hook(HookStartup); got != "Hello." {
		t.Errorf("startup hook = %q, want Hello.", got)
	}

	// Break heartbeat.md (interval too short) and edit agents.md cleanly.
	writeFile(t, dir, HeartbeatFile, "## inbox\nInterval: 30\nInstruction: Check more often.\n")
	writeFile(t, dir, AgentsFile, "## Cron Jobs\n### nightly\nCron: 0 2 * * *\nInstruction: Nightly.\n")
	if err := h.sched.Reload(dir); err != nil {
		t.Fatal(err)
	}
	h.logs.waitFor(t, "keeping the last good schedule", 1)
	h.logs.waitFor(t, `"line":2`, 1)

	var got []string
	for _, r := range h.sched.NextRuns() {
		got = append(got, string(r.Kind)+":"+r.Name+" "+r.Schedule)
	}
	want := []string{"cron:nightly 0 2 * * * (UTC)", "heartbeat:inbox every 2m0s"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("schedule after a broken reload (-want +got):\n%s", diff)
	}
	if _, ok := h.sched.Webhook("deploy"); ok {
		t.Error("webhook deploy still served after agents.md dropped it")
	}
	if got := h.sched.Hook(HookStartup); got != "" {
		t.Errorf("startup hook = %q after agents.md dropped it", got)
	}

	// The kept heartbeat still fires at its old interval.
	h.clock.Advance(2 * time.Minute)
	if e := h.queue.next(t); e.Name != "inbox" || e.Text != "Check." {
		t.Errorf("event after broken reload = %+v, want the last good inbox check", e)
	}

	// Deleting heartbeat.md removes the heartbeats.
	if err := os.Remove(filepath.Join(dir, HeartbeatFile)); err != nil {
		t.Fatal(err)
	}
	if err := h.sched.Reload(dir); err != nil {
		t.Fatal(err)
	}
	h.logs.waitFor(t, "config file not found", 1)
	for _, r := range h.sched.NextRuns() {
		if r.Kind == queue.KindHeartbeat {
			t.Errorf("heartbeat %q still scheduled after heartbeat.md was removed", r.Name)
		}
	}
}

func TestReloadFirstLoadAppliesValidItems(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, HeartbeatFile, "## bad\nInterval: 10\nInstruction: x\n\n## good\nInterval: 60\nInstruction: y\n")
	h := start(t, epoch, time.UTC, Config{})
	if err := h.sched.Reload(dir); err != nil {
		t.Fatal(err)
	}
	got := h.sched.NextRuns()
	if len(got) != 1 || got[0].Name != "good" {
		t.Errorf("NextRuns = %+v, want only the valid check good", got)
	}
}

func TestPausedCronJobIsListedButNotScheduled(t *testing.T) {
	t.Parallel()
	jobs := []CronJob{
		{Name: "off", Cron: "* * * * *", Instruction: "Off.", Paused: true},
		{Name: "on", Cron: "* * * * *", Instruction: "On."},
	}
	h := start(t, epoch, time.UTC, Config{Agents: Agents{CronJobs: jobs}})
	if diff := cmp.Diff(jobs, h.sched.CronJobs()); diff != "" {
		t.Errorf("CronJobs (-want +got):\n%s", diff)
	}
	h.waitNext(t, queue.KindCron, "on", epoch.Add(time.Minute))
	for _, r := range h.sched.NextRuns() {
		if r.Name == "off" {
			t.Fatalf("the paused job is scheduled: %+v", r)
		}
	}
	h.clock.Advance(time.Minute)
	if e := h.queue.next(t); e.Name != "on" {
		t.Errorf("event for %q, want on", e.Name)
	}

	// Resuming schedules it; pausing "on" removes its timer.
	jobs[0].Paused, jobs[1].Paused = false, true
	if err := h.sched.Apply(Config{Agents: Agents{CronJobs: jobs}}); err != nil {
		t.Fatal(err)
	}
	h.waitNext(t, queue.KindCron, "off", epoch.Add(2*time.Minute))
	var names []string
	for _, r := range h.sched.NextRuns() {
		names = append(names, r.Name)
	}
	if diff := cmp.Diff([]string{"off"}, names); diff != "" {
		t.Errorf("scheduled after Apply (-want +got):\n%s", diff)
	}
}

func TestTriggerRunsACronJobNowWithoutOverlap(t *testing.T) {
	t.Parallel()
	jobs := []CronJob{
		{Name: "report", Cron: "* * * * *", Instruction: "Report.", Channel: "42", Model: "haiku"},
		{Name: "off", Cron: "0 9 * * *", Instruction: "Off.", Paused: true},
	}
	h := start(t, epoch, time.UTC, Config{Agents: Agents{CronJobs: jobs}})
	h.waitNext(t, queue.KindCron, "report", epoch.Add(time.Minute))

	if err := h.sched.Trigger("report"); err != nil {
		t.Fatal(err)
	}
	got := h.queue.next(t)
	want := queue.Event{ID: 1, Kind: queue.KindCron, Source: "cron", Name: "report", Text: "Report.", ChannelID: "42", Model: "haiku"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("triggered event (-want +got):\n%s", diff)
	}
	if err := h.sched.Trigger("report"); !errors.Is(err, ErrBusy) {
		t.Errorf("second Trigger while the first runs: %v, want ErrBusy", err)
	}
	// The timer does not overlap the triggered run either.
	h.clock.Advance(time.Minute)
	h.logs.waitFor(t, "cron skipped", 1)
	if n := h.queue.count(); n != 1 {
		t.Fatalf("%d events while the triggered run was unfinished, want 1", n)
	}

	h.sched.Done(got.ID)
	h.waitNext(t, queue.KindCron, "report", epoch.Add(2*time.Minute))
	h.clock.Advance(time.Minute)
	timed := h.queue.next(t)
	if timed.Name != "report" {
		t.Fatalf("timed event = %+v, want report", timed)
	}
	// ...and a triggered run does not overlap the timed one.
	if err := h.sched.Trigger("report"); !errors.Is(err, ErrBusy) {
		t.Errorf("Trigger during a timed run: %v, want ErrBusy", err)
	}
	h.sched.Done(timed.ID)
	if err := h.sched.Trigger("report"); err != nil {
		t.Errorf("Trigger after Done: %v", err)
	}

	// A paused job can still be run by hand; an unknown one cannot.
	if err := h.sched.Trigger("off"); err != nil {
		t.Errorf("Trigger(paused job): %v", err)
	}
	for _, want := range []string{"report", "off"} {
		if e := h.queue.next(t); e.Name != want {
			t.Errorf("event for %q, want %q", e.Name, want)
		}
	}
	if err := h.sched.Trigger("nope"); !errors.Is(err, ErrNoCronJob) || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("Trigger(unknown) = %v, want ErrNoCronJob naming it", err)
	}
}

// On a gateway spread over several processes the event runs elsewhere:
// Done never comes, and Finished tells when the previous event is over.
// Lead fires only while it runs, and can run again.
func TestFinishedElsewhereAndLeadAgain(t *testing.T) {
	t.Parallel()
	clock := clockwork.NewFakeClockAt(epoch)
	q := newFakeQueue()
	logs := &logLines{wrote: make(chan struct{}, 1)}
	var mu sync.Mutex
	finished := map[uint64]bool{}
	s, err := New(Options{Enqueue: q.Enqueue, DefaultChannel: "100", Location: time.UTC, Clock: clock,
		Log: zerolog.New(zerolog.MultiLevelWriter(zerolog.NewTestWriter(t), logs)),
		Finished: func(id uint64) bool {
			mu.Lock()
			defer mu.Unlock()
			return finished[id]
		}})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{clock: clock, queue: q, logs: logs, sched: s}
	if err := s.Apply(Config{Heartbeats: []Heartbeat{{Name: "inbox", Interval: time.Minute, Instruction: "Check."}}}); err != nil {
		t.Fatal(err)
	}
	lead := func() (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Lead(ctx) }()
		return func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Lead: %v", err)
			}
		}
	}
	stop := lead()
	h.waitNext(t, queue.KindHeartbeat, "inbox", epoch.Add(time.Minute))
	clock.Advance(time.Minute)
	first := q.next(t)
	h.waitNext(t, queue.KindHeartbeat, "inbox", epoch.Add(2*time.Minute))
	clock.Advance(time.Minute)
	logs.waitFor(t, "heartbeat skipped", 1)
	mu.Lock()
	finished[first.ID] = true
	mu.Unlock()
	h.waitNext(t, queue.KindHeartbeat, "inbox", epoch.Add(3*time.Minute))
	clock.Advance(time.Minute)
	if got := q.next(t); got.ID != first.ID+1 {
		t.Fatalf("after the first finished elsewhere: event %d, want %d", got.ID, first.ID+1)
	}
	stop()
	stop = lead()
	defer stop()
	h.waitNext(t, queue.KindHeartbeat, "inbox", epoch.Add(4*time.Minute))
}
