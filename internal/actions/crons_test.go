package actions

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fakeCrons keeps jobs in memory and records every call.
type fakeCrons struct {
	jobs  []CronJob
	calls []string
	err   error // returned by every change when set
}

func (f *fakeCrons) List() ([]CronJob, error) { return slices.Clone(f.jobs), nil }

func (f *fakeCrons) Create(j CronJob) error {
	f.calls = append(f.calls, fmt.Sprintf("create %+v", j))
	if f.err != nil {
		return f.err
	}
	j.Next = time.Date(2026, 5, 4, 9, 0, 0, 0, time.UTC)
	f.jobs = append(f.jobs, j)
	return nil
}

func (f *fakeCrons) Update(id string, c CronChange) error {
	show := func(p *string) string {
		if p == nil {
			return "nil"
		}
		return fmt.Sprintf("%q", *p)
	}
	f.calls = append(f.calls, fmt.Sprintf("update %s schedule=%s prompt=%s channel=%s model=%s", id, show(c.Schedule), show(c.Prompt), show(c.Channel), show(c.Model)))
	return f.err
}

func (f *fakeCrons) Delete(id string) error {
	f.calls = append(f.calls, "delete "+id)
	return f.err
}

func (f *fakeCrons) SetPaused(id string, paused bool) error {
	f.calls = append(f.calls, fmt.Sprintf("paused %s %v", id, paused))
	return f.err
}

func (f *fakeCrons) Trigger(id string) error {
	f.calls = append(f.calls, "trigger "+id)
	return f.err
}

// cronDiscord is a Discord whose server has channels and nothing else:
// the cron actions only ever list channels.
type cronDiscord struct {
	Discord // nil: any other call panics
	list    []Channel
}

func (d cronDiscord) Channels(context.Context, string) ([]Channel, error) { return d.list, nil }

const (
	cronGuild   = "100000000000000001"
	cronHere    = "200000000000000002"
	cronReports = "300000000000000003"
	cronSecret  = "400000000000000004"
)

func cronEnv(crons *fakeCrons, withDiscord bool) Env {
	env := Env{Crons: crons, Flags: DefaultFlags(), ChannelAllowed: func(id string) bool { return id != cronSecret }}
	if withDiscord {
		env.Discord = cronDiscord{list: []Channel{{ID: cronHere, Name: "general"}, {ID: cronReports, Name: "reports"}, {ID: cronSecret, Name: "secret"}}}
	}
	return env
}

// runActions runs the action blocks in reply and returns the report lines
// and the query data.
func runCronActions(env Env, t Turn, reply string) (lines []string, data string) {
	_, blocks := Parse(reply)
	for _, r := range env.Run(context.Background(), t, blocks) {
		lines = append(lines, r.Line())
		data += r.Data
	}
	return lines, data
}

func cronBlock(json string) string { return OpenTag + json + CloseTag + "\n" }

func TestCronActions(t *testing.T) {
	turn := Turn{GuildID: cronGuild, ChannelID: cronHere, UserID: "500000000000000005"}
	tests := []struct {
		name        string
		withDiscord bool
		reply       string
		err         error
		lines       []string
		calls       []string
	}{
		{
			name:        "create by channel name",
			withDiscord: true,
			reply:       cronBlock(`{"type":"cronCreate","name":"weekly-report","schedule":" 0 9 * * 1 ","prompt":"Summarise the week.","channel":"reports","model":"haiku"}`),
			lines:       []string{"Done: created the cron job weekly-report (0 9 * * 1), posting in #reports, next run 2026-05-04 09:00 UTC"},
			calls:       []string{"create {Name:weekly-report Schedule:0 9 * * 1 Timezone: Prompt:Summarise the week. Channel:" + cronReports + " Model:haiku Paused:false Next:0001-01-01 00:00:00 +0000 UTC}"},
		},
		{
			name:        "create without a channel posts here",
			withDiscord: true,
			reply:       cronBlock(`{"type":"cronCreate","name":"a","schedule":"@daily","prompt":"P."}`),
			lines:       []string{"Done: created the cron job a (@daily), posting in #general, next run 2026-05-04 09:00 UTC"},
			calls:       []string{"create {Name:a Schedule:@daily Timezone: Prompt:P. Channel:" + cronHere + " Model: Paused:false Next:0001-01-01 00:00:00 +0000 UTC}"},
		},
		{
			name:        "a channel the bot may not use, or none by that name",
			withDiscord: true,
			reply:       cronBlock(`{"type":"cronCreate","name":"a","schedule":"@daily","prompt":"P.","channel":"secret"}`) + cronBlock(`{"type":"cronUpdate","id":"a","channel":"nowhere"}`),
			lines: []string{
				"Failed: cronCreate: #secret is not a channel the bot may use (ALLOWED_CHANNEL_IDS)",
				`Failed: cronUpdate: no channel "nowhere" in this server`,
			},
		},
		{
			name:  "without Discord a channel is an id",
			reply: cronBlock(`{"type":"cronCreate","name":"a","schedule":"@daily","prompt":"P.","channel":"reports"}`) + cronBlock(`{"type":"cronUpdate","id":"a","channel":"<#`+cronHere+`>"}`),
			lines: []string{
				`Failed: cronCreate: channel "reports" is not a Discord id: give the channel's id`,
				"Done: changed the channel (now <#" + cronHere + ">) of the cron job a",
			},
			calls: []string{"update a schedule=nil prompt=nil channel=\"" + cronHere + "\" model=nil"},
		},
		{
			name:        "update only what is given",
			withDiscord: true,
			reply:       cronBlock(`{"type":"cronUpdate","id":" a ","schedule":"0 8 * * 1","model":""}`) + cronBlock(`{"type":"cronUpdate","id":"a"}`),
			lines: []string{
				"Done: changed the schedule, model of the cron job a",
				"Failed: cronUpdate: nothing to change: give schedule, prompt, channel or model",
			},
			calls: []string{`update a schedule="0 8 * * 1" prompt=nil channel=nil model=""`},
		},
		{
			name:  "delete, pause, resume, trigger",
			reply: cronBlock(`{"type":"cronDelete","id":"a"}`) + cronBlock(`{"type":"cronPause","id":"b"}`) + cronBlock(`{"type":"cronResume","id":"c"}`) + cronBlock(`{"type":"cronTrigger","id":"d"}`),
			lines: []string{"Done: deleted the cron job a", "Done: paused the cron job b", "Done: resumed the cron job c", "Done: started a run of the cron job d now"},
			calls: []string{"delete a", "paused b true", "paused c false", "trigger d"},
		},
		{
			name:  "the store's refusal is the report",
			reply: cronBlock(`{"type":"cronTrigger","id":"d"}`),
			err:   errors.New(`cron job "d" (event 7): its previous run has not finished`),
			lines: []string{`Failed: cronTrigger: cron job "d" (event 7): its previous run has not finished`},
			calls: []string{"trigger d"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The jobs the changes name, in the conversation's channel.
			var jobs []CronJob
			for _, name := range []string{"a", "b", "c", "d"} {
				jobs = append(jobs, CronJob{Name: name, Schedule: "@daily", Prompt: "P.", Channel: cronHere})
			}
			crons := &fakeCrons{err: tt.err, jobs: jobs}
			lines, _ := runCronActions(cronEnv(crons, tt.withDiscord), turn, tt.reply)
			if diff := cmp.Diff(tt.lines, lines); diff != "" {
				t.Errorf("report (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.calls, crons.calls); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCronList(t *testing.T) {
	berlin := time.FixedZone("CET", 3600)
	crons := &fakeCrons{jobs: []CronJob{
		{Name: "weekly", Schedule: "0 9 * * 1", Prompt: "Summarise\n  the week.", Channel: cronReports, Model: "haiku", Next: time.Date(2026, 5, 4, 9, 0, 0, 0, berlin)},
		{Name: "nightly", Schedule: "0 2 * * *", Timezone: "Europe/Berlin", Prompt: "Clean up.", Paused: true},
		{Name: "elsewhere", Schedule: "@hourly", Prompt: "Ping.", Channel: "600000000000000006"},
	}}
	env := cronEnv(crons, true)
	env.OutputChannel = cronHere
	lines, data := runCronActions(env, Turn{GuildID: cronGuild, ChannelID: cronHere}, cronBlock(`{"type":"cronList"}`))
	if diff := cmp.Diff([]string{"Done: listed 2 cron jobs"}, lines); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
	// "elsewhere" posts in another server: not shown.
	want := "- weekly: 0 9 * * 1, next run 2026-05-04 09:00 CET, posts in #reports (" + cronReports + "), model haiku: Summarise the week.\n" +
		"- nightly: 0 2 * * * (Europe/Berlin), paused, posts in the gateway's output channel: Clean up.\n"
	if diff := cmp.Diff(want, data); diff != "" {
		t.Errorf("data (-want +got):\n%s", diff)
	}

	_, data = runCronActions(cronEnv(&fakeCrons{}, false), Turn{GuildID: cronGuild, ChannelID: cronHere}, cronBlock(`{"type":"cronList"}`))
	if data != "(no cron jobs)\n" {
		t.Errorf("empty list: %q", data)
	}
}

func TestCronActionsAvailability(t *testing.T) {
	crons := &fakeCrons{}
	env := cronEnv(crons, true)
	scheduled := Turn{GuildID: cronGuild, ChannelID: cronHere, Scheduled: true}
	lines, _ := runCronActions(env, scheduled, cronBlock(`{"type":"cronCreate","name":"loop","schedule":"* * * * *","prompt":"Again."}`))
	if len(lines) != 1 || !strings.Contains(lines[0], ErrScheduled.Error()) {
		t.Errorf("a scheduled run's cron action: %q, want it refused", lines)
	}
	env.Flags.Categories[Crons] = false
	lines, _ = runCronActions(env, Turn{GuildID: cronGuild, ChannelID: cronHere}, cronBlock(`{"type":"cronDelete","id":"a"}`))
	if len(lines) != 1 || !strings.Contains(lines[0], "DISCORD_ACTIONS_CRONS") {
		t.Errorf("with the flag off: %q", lines)
	}
	if len(crons.calls) != 0 {
		t.Errorf("refused actions reached the store: %v", crons.calls)
	}

	env = cronEnv(crons, true)
	env.Crons = nil
	for _, s := range env.Available(Turn{GuildID: cronGuild, ChannelID: cronHere}) {
		if s.Category == Crons {
			t.Errorf("%s offered without a cron store", s.Type)
		}
	}
	env.Crons = crons
	var offered []string
	for _, s := range env.Available(Turn{GuildID: cronGuild, ChannelID: cronHere}) {
		if s.Category == Crons {
			offered = append(offered, s.Type)
		}
	}
	if diff := cmp.Diff([]string{"cronList", "cronCreate", "cronUpdate", "cronDelete", "cronPause", "cronResume", "cronTrigger"}, offered); diff != "" {
		t.Errorf("cron actions offered (-want +got):\n%s", diff)
	}
}
