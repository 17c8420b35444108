package actions

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// roleDiscord is a Discord with one role that records AddRole calls.
type roleDiscord struct {
	Discord // nil: any other call panics
	added   *[]string
}

func (d roleDiscord) Roles(context.Context, string) ([]Role, error) {
	return []Role{{ID: "700000000000000007", Name: "admin"}}, nil
}

func (d roleDiscord) AddRole(_ context.Context, _, user, role, _ string) error {
	*d.added = append(*d.added, user+" "+role)
	return nil
}

// roleAdd gives away access: a scheduled or webhook run, whose prompt a
// payload may have written, may not use it; a person's run may.
func TestRoleAddNotInScheduledRuns(t *testing.T) {
	block := cronBlock(`{"type":"roleAdd","userId":"500000000000000005","role":"admin"}`)
	tests := []struct {
		name      string
		scheduled bool
		lines     []string
		added     []string
	}{
		{name: "a person asked", lines: []string{"Done: gave the role admin"}, added: []string{"500000000000000005 700000000000000007"}},
		{name: "scheduled", scheduled: true, lines: []string{"Failed: roleAdd: " + ErrScheduled.Error()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var added []string
			env := Env{Discord: roleDiscord{added: &added}, Flags: DefaultFlags()}
			turn := Turn{GuildID: cronGuild, ChannelID: cronHere, Scheduled: tt.scheduled}
			lines, _ := runCronActions(env, turn, block)
			if diff := cmp.Diff(tt.lines, lines); diff != "" {
				t.Errorf("report (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.added, added); diff != "" {
				t.Errorf("roles given (-want +got):\n%s", diff)
			}
			offered := false
			for _, s := range env.Available(turn) {
				offered = offered || s.Type == "roleAdd"
			}
			if offered == tt.scheduled {
				t.Errorf("roleAdd offered = %v in a run with scheduled = %v", offered, tt.scheduled)
			}
		})
	}
	if err := DefaultFlags().Check(Context{GuildID: "1", Scheduled: true}, byType["roleAdd"]); !errors.Is(err, ErrScheduled) {
		t.Errorf("Check(roleAdd, scheduled) = %v, want ErrScheduled", err)
	}
}

// The cron actions reach only the jobs of the conversation's server that
// post in a channel the bot may use: a job of another server (or of a
// channel off the allowlist) is "not found", as one that does not exist,
// and no change reaches the store.
func TestCronActionsStayInTheirServer(t *testing.T) {
	const (
		otherServer = "600000000000000006"
		output      = "800000000000000008"
	)
	jobs := []CronJob{
		{Name: "ours", Schedule: "@daily", Prompt: "Ours.", Channel: cronReports},
		{Name: "theirs", Schedule: "@hourly", Prompt: "Their secret plans.", Channel: otherServer},
		{Name: "hidden", Schedule: "@hourly", Prompt: "Off the allowlist.", Channel: cronSecret},
		{Name: "default", Schedule: "@weekly", Prompt: "To the output channel."},
	}
	turn := Turn{GuildID: cronGuild, ChannelID: cronHere, UserID: "500000000000000005"}
	tests := []struct {
		name   string
		output string // Env.OutputChannel
		reply  string
		lines  []string
		calls  []string
		data   string
	}{
		{
			name:  "list shows only this server's jobs",
			reply: cronBlock(`{"type":"cronList"}`),
			lines: []string{"Done: listed 1 cron jobs"},
			data:  "- ours: @daily, posts in #reports (" + cronReports + "): Ours.\n",
		},
		{
			name:   "a job without a channel is the output channel's",
			output: cronHere,
			reply:  cronBlock(`{"type":"cronList"}`) + cronBlock(`{"type":"cronPause","id":"default"}`),
			lines:  []string{"Done: listed 2 cron jobs", "Done: paused the cron job default"},
			calls:  []string{"paused default true"},
			data: "- ours: @daily, posts in #reports (" + cronReports + "): Ours.\n" +
				"- default: @weekly, posts in the gateway's output channel: To the output channel.\n",
		},
		{
			name:   "the output channel of another server",
			output: output,
			reply:  cronBlock(`{"type":"cronTrigger","id":"default"}`),
			lines:  []string{`Failed: cronTrigger: no cron job "default"`},
		},
		{
			name: "another server's job is not found",
			reply: cronBlock(`{"type":"cronUpdate","id":"theirs","prompt":"Mine now."}`) +
				cronBlock(`{"type":"cronDelete","id":"theirs"}`) +
				cronBlock(`{"type":"cronPause","id":"theirs"}`) +
				cronBlock(`{"type":"cronResume","id":"theirs"}`) +
				cronBlock(`{"type":"cronTrigger","id":"theirs"}`) +
				cronBlock(`{"type":"cronDelete","id":"nosuchjob"}`),
			lines: []string{
				`Failed: cronUpdate: no cron job "theirs"`,
				`Failed: cronDelete: no cron job "theirs"`,
				`Failed: cronPause: no cron job "theirs"`,
				`Failed: cronResume: no cron job "theirs"`,
				`Failed: cronTrigger: no cron job "theirs"`,
				`Failed: cronDelete: no cron job "nosuchjob"`,
			},
		},
		{
			name:  "a job in a channel off the allowlist is not found",
			reply: cronBlock(`{"type":"cronTrigger","id":"hidden"}`),
			lines: []string{`Failed: cronTrigger: no cron job "hidden"`},
		},
		{
			name:  "this server's job",
			reply: cronBlock(`{"type":"cronUpdate","id":"ours","prompt":"Still ours."}`) + cronBlock(`{"type":"cronTrigger","id":"ours"}`),
			lines: []string{"Done: changed the prompt of the cron job ours", "Done: started a run of the cron job ours now"},
			calls: []string{`update ours schedule=nil prompt="Still ours." channel=nil model=nil`, "trigger ours"},
		},
		{
			name:  "create or move a job into another server",
			reply: cronBlock(`{"type":"cronCreate","name":"spy","schedule":"@daily","prompt":"P.","channel":"<#`+otherServer+`>"}`) + cronBlock(`{"type":"cronUpdate","id":"ours","channel":"`+otherServer+`"}`),
			lines: []string{
				`Failed: cronCreate: no channel "<#` + otherServer + `>" in this server`,
				`Failed: cronUpdate: no channel "` + otherServer + `" in this server`,
			},
		},
		{
			name:  "a name another server's job has",
			reply: cronBlock(`{"type":"cronCreate","name":"theirs","schedule":"@daily","prompt":"P."}`),
			lines: []string{`Failed: cronCreate: the name "theirs" is not available: pick another`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			crons := &fakeCrons{jobs: jobs}
			env := cronEnv(crons, true)
			env.OutputChannel = tt.output
			lines, data := runCronActions(env, turn, tt.reply)
			if diff := cmp.Diff(tt.lines, lines); diff != "" {
				t.Errorf("report (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.calls, crons.calls); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.data, data); diff != "" {
				t.Errorf("data (-want +got):\n%s", diff)
			}
			if strings.Contains(data, "secret plans") {
				t.Error("another server's job was shown")
			}
		})
	}
}

// Without Discord to list the server's channels, the cron actions reach
// only the conversation's own channel.
func TestCronActionsWithoutDiscordStayInTheChannel(t *testing.T) {
	crons := &fakeCrons{jobs: []CronJob{
		{Name: "here", Schedule: "@daily", Prompt: "Here.", Channel: cronHere},
		{Name: "elsewhere", Schedule: "@daily", Prompt: "Elsewhere.", Channel: cronReports},
	}}
	turn := Turn{GuildID: cronGuild, ChannelID: cronHere}
	lines, data := runCronActions(cronEnv(crons, false), turn,
		cronBlock(`{"type":"cronList"}`)+
			cronBlock(`{"type":"cronTrigger","id":"elsewhere"}`)+
			cronBlock(`{"type":"cronTrigger","id":"here"}`)+
			cronBlock(`{"type":"cronCreate","name":"a","schedule":"@daily","prompt":"P.","channel":"`+cronReports+`"}`))
	want := []string{
		"Done: listed 1 cron jobs",
		`Failed: cronTrigger: no cron job "elsewhere"`,
		"Done: started a run of the cron job here now",
		"Failed: cronCreate: without Discord a cron job can only post in this conversation's channel",
	}
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
	if want := "- here: @daily, posts in channel " + cronHere + ": Here.\n"; data != want {
		t.Errorf("data = %q, want %q", data, want)
	}
	if diff := cmp.Diff([]string{"trigger here"}, crons.calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}
