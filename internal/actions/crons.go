package actions

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// CronJobs are the gateway's cron jobs (the "## Cron Jobs" of agents.md),
// changed on the gateway's behalf: a change applies at once, like an
// operator's edit. A job is named by its Name, the actions' "id".
type CronJobs interface {
	// List returns every job, paused ones included.
	List() ([]CronJob, error)
	Create(j CronJob) error
	Update(id string, change CronChange) error
	Delete(id string) error
	SetPaused(id string, paused bool) error
	// Trigger runs the job once, now, as its timer would.
	Trigger(id string) error
}

// CronJob is one cron job.
type CronJob struct {
	Name string
	// Schedule is a five-field cron expression or a name such as @daily,
	// read in Timezone (an IANA zone; empty: the gateway's local time).
	Schedule string
	Timezone string
	Prompt   string
	Channel  string // a channel id; empty: the gateway's output channel
	Model    string // empty: the default model
	Paused   bool
	Next     time.Time // the next run; zero when paused or not known
}

// CronChange names what cronUpdate changes; a nil field stays as it is.
// An empty Channel or Model goes back to the default.
type CronChange struct {
	Schedule, Prompt, Channel, Model *string
}

// The cron actions see and change only the jobs of the conversation's
// server: a job is the server's when it posts in one of the server's
// channels the bot may use (a job without a channel posts in
// Env.OutputChannel). Every other job is treated as one that does not
// exist, so an agent in one server learns nothing of another's.

// errNoCronJob is what a job out of reach (or missing) gives; the store
// says the same of a job it does not have.
func errNoCronJob(id string) error { return fmt.Errorf("no cron job %q", id) }

// jobs lists the cron jobs of the conversation's server.
func (x *run) jobs(ctx context.Context) ([]CronJob, error) {
	all, err := x.env.Crons.List()
	if err != nil {
		return nil, err
	}
	var out []CronJob
	for _, j := range all {
		if x.jobHere(ctx, j) {
			out = append(out, j)
		}
	}
	return out, nil
}

// cronJob checks that id names a job of the conversation's server. Names
// are unique, but the store acts on every job of that name: each must be
// in reach.
func (x *run) cronJob(ctx context.Context, id string) error {
	all, err := x.env.Crons.List()
	if err != nil {
		return err
	}
	found := false
	for _, j := range all {
		if j.Name != id {
			continue
		}
		if !x.jobHere(ctx, j) {
			return errNoCronJob(id)
		}
		found = true
	}
	if !found {
		return errNoCronJob(id)
	}
	return nil
}

// jobHere reports whether j posts in a channel of the conversation's
// server that the bot may use: the conversation's own channel (a thread
// included), or one the server lists. Without Discord to list the server,
// only the conversation's channel is known to be in it.
func (x *run) jobHere(ctx context.Context, j CronJob) bool {
	ch := j.Channel
	if ch == "" {
		ch = x.env.OutputChannel
	}
	switch {
	case ch == "":
		return false // posts nowhere: no server's
	case ch == x.ev.ChannelID:
		return true
	case x.env.Discord == nil:
		return false
	}
	if x.channels == nil {
		chs, err := x.env.Discord.Channels(ctx, x.ev.GuildID)
		if err != nil {
			return false
		}
		x.channels = chs
	}
	for _, c := range x.channels {
		if c.ID == ch {
			return x.env.ChannelAllowed == nil || x.env.ChannelAllowed(c.ID)
		}
	}
	return false
}

func cronList(ctx context.Context, x *run, _ Action) (string, string, error) {
	jobs, err := x.jobs(ctx)
	if err != nil {
		return "", "", err
	}
	var b strings.Builder
	for _, j := range jobs {
		fmt.Fprintf(&b, "- %s: %s", j.Name, j.Schedule)
		if j.Timezone != "" {
			fmt.Fprintf(&b, " (%s)", j.Timezone)
		}
		switch {
		case j.Paused:
			b.WriteString(", paused")
		case !j.Next.IsZero():
			fmt.Fprintf(&b, ", next run %s", j.Next.Format(cronTime))
		}
		fmt.Fprintf(&b, ", posts in %s", x.channelName(ctx, j.Channel))
		if j.Model != "" {
			fmt.Fprintf(&b, ", model %s", j.Model)
		}
		fmt.Fprintf(&b, ": %s\n", excerpt(j.Prompt, 300))
	}
	if len(jobs) == 0 {
		b.WriteString("(no cron jobs)\n")
	}
	return fmt.Sprintf("listed %d cron jobs", len(jobs)), b.String(), nil
}

// cronTime is how a run's time is shown: in the scheduler's zone, named.
const cronTime = "2006-01-02 15:04 MST"

func cronCreate(ctx context.Context, x *run, a Action) (string, string, error) {
	channel, label, err := x.cronChannel(ctx, a.String("channel"))
	if err != nil {
		return "", "", err
	}
	name := strings.TrimSpace(a.String("name"))
	if err := x.nameFree(ctx, name); err != nil {
		return "", "", err
	}
	j := CronJob{
		Name:     name,
		Schedule: strings.TrimSpace(a.String("schedule")),
		Prompt:   a.String("prompt"),
		Channel:  channel,
		Model:    strings.TrimSpace(a.String("model")),
	}
	if err := x.env.Crons.Create(j); err != nil {
		return "", "", err
	}
	return fmt.Sprintf("created the cron job %s (%s), posting in %s%s", j.Name, j.Schedule, label, x.nextRun(j.Name)), "", nil
}

func cronUpdate(ctx context.Context, x *run, a Action) (string, string, error) {
	id := strings.TrimSpace(a.String("id"))
	if err := x.cronJob(ctx, id); err != nil {
		return "", "", err
	}
	var c CronChange
	var what []string
	if a.Has("schedule") {
		v := strings.TrimSpace(a.String("schedule"))
		c.Schedule, what = &v, append(what, "schedule")
	}
	if a.Has("prompt") {
		v := a.String("prompt")
		c.Prompt, what = &v, append(what, "prompt")
	}
	if a.Has("channel") {
		channel, label, err := x.cronChannel(ctx, a.String("channel"))
		if err != nil {
			return "", "", err
		}
		c.Channel, what = &channel, append(what, "channel (now "+label+")")
	}
	if a.Has("model") {
		v := strings.TrimSpace(a.String("model"))
		c.Model, what = &v, append(what, "model")
	}
	if len(what) == 0 {
		return "", "", errors.New("nothing to change: give schedule, prompt, channel or model")
	}
	if err := x.env.Crons.Update(id, c); err != nil {
		return "", "", err
	}
	return fmt.Sprintf("changed the %s of the cron job %s%s", strings.Join(what, ", "), id, x.nextRun(id)), "", nil
}

func cronDelete(ctx context.Context, x *run, a Action) (string, string, error) {
	id := strings.TrimSpace(a.String("id"))
	if err := x.cronJob(ctx, id); err != nil {
		return "", "", err
	}
	if err := x.env.Crons.Delete(id); err != nil {
		return "", "", err
	}
	return "deleted the cron job " + id, "", nil
}

func cronPause(ctx context.Context, x *run, a Action) (string, string, error) {
	id := strings.TrimSpace(a.String("id"))
	if err := x.cronJob(ctx, id); err != nil {
		return "", "", err
	}
	if err := x.env.Crons.SetPaused(id, true); err != nil {
		return "", "", err
	}
	return "paused the cron job " + id, "", nil
}

func cronResume(ctx context.Context, x *run, a Action) (string, string, error) {
	id := strings.TrimSpace(a.String("id"))
	if err := x.cronJob(ctx, id); err != nil {
		return "", "", err
	}
	if err := x.env.Crons.SetPaused(id, false); err != nil {
		return "", "", err
	}
	return "resumed the cron job " + id + x.nextRun(id), "", nil
}

func cronTrigger(ctx context.Context, x *run, a Action) (string, string, error) {
	id := strings.TrimSpace(a.String("id"))
	if err := x.cronJob(ctx, id); err != nil {
		return "", "", err
	}
	if err := x.env.Crons.Trigger(id); err != nil {
		return "", "", err
	}
	return "started a run of the cron job " + id + " now", "", nil
}

// cronChannel resolves a cron job's channel field to a channel id, as the
// other actions' channel fields: a name, "#name", a mention or an id of a
// channel of this server the bot may use; empty is this conversation's
// channel. It also returns how to show the channel. Without Discord only
// the conversation's own channel is taken, by its id or a mention.
func (x *run) cronChannel(ctx context.Context, ref string) (id, label string, err error) {
	if x.env.Discord == nil {
		ref = strings.TrimSpace(ref)
		if ref == "" {
			ref = x.ev.ChannelID
		}
		id, err := snowflake("channel", strings.TrimSuffix(strings.TrimPrefix(ref, "<#"), ">"))
		if err != nil {
			return "", "", fmt.Errorf("%w: give the channel's id", err)
		}
		if id != x.ev.ChannelID {
			// Nothing says which server another channel is in.
			return "", "", errors.New("without Discord a cron job can only post in this conversation's channel")
		}
		return id, "<#" + id + ">", nil
	}
	c, err := x.channel(ctx, ref)
	if err != nil {
		return "", "", err
	}
	if c.Name == "" {
		return c.ID, "<#" + c.ID + ">", nil // a thread: not in the server's list
	}
	return c.ID, "#" + c.Name, nil
}

// nameFree refuses a new job's name that a job out of reach has: the
// store would say it exists, which tells of a job the agent may not see.
// A name a job in reach has is left to the store's own refusal.
func (x *run) nameFree(ctx context.Context, name string) error {
	all, err := x.env.Crons.List()
	if err != nil {
		return err
	}
	for _, j := range all {
		if strings.EqualFold(j.Name, name) && !x.jobHere(ctx, j) {
			return fmt.Errorf("the name %q is not available: pick another", name)
		}
	}
	return nil
}

// channelName shows a job's channel by its name where this server has
// it, else by its id.
func (x *run) channelName(ctx context.Context, id string) string {
	if id == "" {
		return "the gateway's output channel"
	}
	if x.channels == nil && x.env.Discord != nil {
		if chs, err := x.env.Discord.Channels(ctx, x.ev.GuildID); err == nil {
			x.channels = chs
		}
	}
	for _, c := range x.channels {
		if c.ID == id {
			return "#" + c.Name + " (" + id + ")"
		}
	}
	return "channel " + id
}

// nextRun is ", next run <time>" for a summary, or "" when the job is
// paused or its next run is not known.
func (x *run) nextRun(id string) string {
	jobs, err := x.env.Crons.List()
	if err != nil {
		return ""
	}
	for _, j := range jobs {
		if j.Name == id && !j.Paused && !j.Next.IsZero() {
			return ", next run " + j.Next.Format(cronTime)
		}
	}
	return ""
}
