package gateway

import (
	"context"
	"fmt"
	"time"

	"github.com/agentgateway/gateway/internal/actions"
	"github.com/agentgateway/gateway/internal/hold"
	"github.com/agentgateway/gateway/internal/queue"
	"github.com/agentgateway/gateway/internal/schedule"
)

// cronActions are the cron actions' jobs (actions.CronJobs): changes are
// edits of agents.md's "## Cron Jobs" made through the hold gate, which
// writes them as the gateway's own (applied, never held) and reloads the
// scheduler before returning; the listing and Trigger are the scheduler's.
type cronActions struct {
	gate  *hold.Gate
	sched *schedule.Scheduler
}

var _ actions.CronJobs = cronActions{}

// newCronActions returns the cron actions' jobs. gate must have been
// started with sched (gate.Start(sched)).
func newCronActions(gate *hold.Gate, sched *schedule.Scheduler) actions.CronJobs {
	return cronActions{gate: gate, sched: sched}
}

// List returns the jobs the scheduler runs from (agents.md as last
// applied), paused ones included, with their next runs.
func (c cronActions) List() ([]actions.CronJob, error) {
	next := map[string]time.Time{}
	for _, r := range c.sched.NextRuns() {
		if r.Kind == queue.KindCron {
			next[r.Name] = r.Next
		}
	}
	jobs := c.sched.CronJobs()
	out := make([]actions.CronJob, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, actions.CronJob{
			Name: j.Name, Schedule: j.Cron, Timezone: j.Timezone, Prompt: j.Instruction,
			Channel: j.Channel, Model: j.Model, Paused: j.Paused, Next: next[j.Name],
		})
	}
	return out, nil
}

func (c cronActions) Create(j actions.CronJob) error {
	return c.edit(func(text string) (string, error) {
		return schedule.AddCronJob(text, schedule.CronJob{
			Name: j.Name, Cron: j.Schedule, Timezone: j.Timezone, Instruction: j.Prompt,
			Channel: j.Channel, Model: j.Model, Paused: j.Paused,
		})
	})
}

func (c cronActions) Update(id string, change actions.CronChange) error {
	return c.edit(func(text string) (string, error) {
		return schedule.UpdateCronJob(text, id, schedule.CronChange{
			Cron: change.Schedule, Instruction: change.Prompt, Channel: change.Channel, Model: change.Model,
		})
	})
}

func (c cronActions) Delete(id string) error {
	return c.edit(func(text string) (string, error) { return schedule.DeleteCronJob(text, id) })
}

func (c cronActions) SetPaused(id string, paused bool) error {
	return c.edit(func(text string) (string, error) {
		return schedule.UpdateCronJob(text, id, schedule.CronChange{Paused: &paused})
	})
}

func (c cronActions) Trigger(id string) error { return c.sched.Trigger(id) }

// edit changes agents.md through the gate. A result with any problem is
// not written: the scheduler keeps the last good schedule of a file with
// problems, so the edit would be silently ignored. The gate bounds its own
// Discord calls (a stale hold's message), so no deadline is needed here.
func (c cronActions) edit(change func(text string) (string, error)) error {
	return c.gate.EditAgents(context.Background(), func(text string) (string, error) {
		out, err := change(text)
		if err != nil {
			return "", err
		}
		if _, problems := schedule.ParseAgents(out); len(problems) > 0 {
			return "", fmt.Errorf("agents.md has a problem to fix by hand first (%s; %d in all): until then the scheduler ignores changes to it", problems[0], len(problems))
		}
		return out, nil
	})
}
