package schedule

import (
	"errors"
	"testing"
	"time"

	"github.com/agentgateway/gateway/internal/queue"
)

// Jobs lists heartbeats and cron jobs with their next run, paused ones
// too; a heartbeat can be run now without overlapping itself.
func TestJobsAndTriggerHeartbeat(t *testing.T) {
	t.Parallel()
	hb := Heartbeat{Name: "inbox", Interval: 30 * time.Minute, Instruction: "Check.", Channel: "7"}
	jobs := []CronJob{
		{Name: "report", Cron: "0 9 * * *", Instruction: "Report.", Channel: "42"},
		{Name: "off", Cron: "0 3 * * 0", Instruction: "Off.", Paused: true},
	}
	h := start(t, epoch, time.UTC, Config{Heartbeats: []Heartbeat{hb}, Agents: Agents{CronJobs: jobs}})
	nine := time.Date(epoch.Year(), epoch.Month(), epoch.Day(), 9, 0, 0, 0, time.UTC)
	if !nine.After(epoch) {
		nine = nine.AddDate(0, 0, 1)
	}
	h.waitNext(t, queue.KindCron, "report", nine)
	list := h.sched.Jobs()
	if len(list) != 3 {
		t.Fatalf("jobs = %+v, want 3", list)
	}
	byName := map[string]JobInfo{}
	for _, j := range list {
		byName[j.Name] = j
	}
	if j := byName["report"]; j.Kind != queue.KindCron || !j.Next.Equal(nine) || j.Channel != "42" {
		t.Errorf("report = %+v", j)
	}
	if j := byName["off"]; !j.Paused || !j.Next.IsZero() {
		t.Errorf("off = %+v, want paused with no next run", j)
	}
	if j := byName["inbox"]; j.Kind != queue.KindHeartbeat || j.Next.IsZero() {
		t.Errorf("inbox = %+v, want a heartbeat with a next run", j)
	}

	if err := h.sched.TriggerHeartbeat("inbox"); err != nil {
		t.Fatal(err)
	}
	got := h.queue.next(t)
	if got.Kind != queue.KindHeartbeat || got.Name != "inbox" || got.ChannelID != "7" {
		t.Errorf("triggered = %+v", got)
	}
	if err := h.sched.TriggerHeartbeat("inbox"); !errors.Is(err, ErrBusy) {
		t.Errorf("second trigger: %v, want ErrBusy", err)
	}
	if err := h.sched.TriggerHeartbeat("nope"); !errors.Is(err, ErrNoCronJob) {
		t.Errorf("unknown heartbeat: %v", err)
	}
}
