package schedule

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// wantProblem is an expected problem: its line and a fragment of its
// message.
type wantProblem struct {
	line int
	has  string
}

func checkProblems(t *testing.T, file string, got []Problem, want []wantProblem) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%s", len(got), len(want), problemList(got))
	}
	for i, w := range want {
		g := got[i]
		if g.File != file || g.Line != w.line || !strings.Contains(g.Message, w.has) {
			t.Errorf("problem %d = %s; want %s:%d containing %q", i, g, file, w.line, w.has)
		}
	}
}

func problemList(ps []Problem) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p.String())
		b.WriteByte('\n')
	}
	return b.String()
}

var heartbeatTests = []struct {
	name     string
	text     string
	want     []Heartbeat
	problems []wantProblem
}{
	{
		name: "seed example",
		text: "## check-email\nInterval: 1800\nInstruction: Check my inbox for anything urgent. If nothing, reply HEARTBEAT_OK.\n",
		want: []Heartbeat{{Name: "check-email", Interval: 30 * time.Minute, Instruction: "Check my inbox for anything urgent. If nothing, reply HEARTBEAT_OK."}},
	},
	{
		name: "all keys, any case, multi-line instruction with a code block",
		text: "# Heartbeat\n\nIntro text is ignored.\n\n## news\ninterval: 3600\nCHANNEL: 1475008084022788312\nInstruction: Read the feeds.\n  Summarise in bullets:\nFormat: not a key here\n```\n## not a heading\nInterval: 5\n```\n\nmodel: sonnet\n",
		want: []Heartbeat{{
			Name: "news", Interval: time.Hour, Channel: "1475008084022788312", Model: "sonnet",
			Instruction: "Read the feeds.\n  Summarise in bullets:\nFormat: not a key here\n```\n## not a heading\nInterval: 5\n```",
		}},
	},
	{
		name: "instruction starting on the next line",
		text: "## a\nInterval: 60\nInstruction:\n\n  Line one.\n  Line two.\n\n## b\nInstruction: B\nInterval: 61\n",
		want: []Heartbeat{
			{Name: "a", Interval: time.Minute, Instruction: "Line one.\n  Line two."},
			{Name: "b", Interval: 61 * time.Second, Instruction: "B"},
		},
	},
	{
		name: "comments and code blocks are skipped",
		text: "<!--\n## hidden\nInterval: 60\nInstruction: no\n-->\n```md\n## also hidden\nInterval: 60\nInstruction: no\n```\n## shown <!-- a note -->\nInterval: 60 <!-- one minute -->\nInstruction: yes <!-- multi\nline comment --> and more\n",
		want: []Heartbeat{{Name: "shown", Interval: time.Minute, Instruction: "yes\n and more"}},
	},
	{
		name:     "interval below the minimum is rejected, others parse",
		text:     "## fast\nInterval: 59\nInstruction: too often\n\n## slow\nInterval: 60\nInstruction: fine\n",
		want:     []Heartbeat{{Name: "slow", Interval: time.Minute, Instruction: "fine"}},
		problems: []wantProblem{{2, "below the minimum"}},
	},
	{
		name:     "missing keys name the check",
		text:     "## no-interval\nInstruction: x\n\n## no-instruction\nInterval: 60\n\n## empty-instruction\nInterval: 60\nInstruction:\n",
		problems: []wantProblem{{1, `"no-interval" has no Interval`}, {4, `"no-instruction" has no Instruction`}, {9, `"empty-instruction": Instruction is empty`}},
	},
	{
		name:     "bad values",
		text:     "## a\nInterval: soon\nInstruction: x\n## b\nInterval: 60\nInstruction: x\nChannel: #general\n## c\nInterval: 99999999999999\nInstruction: x\n",
		problems: []wantProblem{{2, "not a positive number"}, {7, "not a Discord channel id"}, {9, "longer than a year"}},
	},
	{
		name:     "duplicate name: first wins",
		text:     "## a\nInterval: 60\nInstruction: first\n## a\nInterval: 120\nInstruction: second\n",
		want:     []Heartbeat{{Name: "a", Interval: time.Minute, Instruction: "first"}},
		problems: []wantProblem{{4, "defined twice"}},
	},
	{
		name:     "unknown key, stray text, duplicate key, sub-heading",
		text:     "## a\nIntervall: 60\nInstruction: x\n## b\nsome text\nInterval: 60\nInstruction: x\n## c\nInterval: 60\nInterval: 90\nInstruction: x\n## d\nInterval: 60\nInstruction: x\n### detail\n## e\nInterval: 60\nInstruction: e\n",
		want:     []Heartbeat{{Name: "e", Interval: time.Minute, Instruction: "e"}},
		problems: []wantProblem{{2, `unknown key "intervall"`}, {1, "has no Interval"}, {5, "expected a \"Key: value\" line"}, {10, "sets Interval twice"}, {15, "unexpected heading"}},
	},
	{
		name:     "unclosed comment hides the rest",
		text:     "## a\nInterval: 60\nInstruction: x\n<!-- oops\n## b\nInterval: 60\nInstruction: y\n",
		want:     []Heartbeat{{Name: "a", Interval: time.Minute, Instruction: "x"}},
		problems: []wantProblem{{4, "never closed"}},
	},
	{
		name:     "unclosed fence hides the rest",
		text:     "## a\nInterval: 60\nInstruction: x\n\n## b\n~~~\nInterval: 60\n",
		want:     []Heartbeat{{Name: "a", Interval: time.Minute, Instruction: "x"}},
		problems: []wantProblem{{6, "never closed"}, {5, "has no Interval"}, {5, "has no Instruction"}},
	},
	{
		name: "a comment-only line inside an instruction leaves no blank line",
		text: "## a\nInterval: 60\nInstruction: one\n<!-- aside -->\n  <!-- multi\n  line -->\ntwo\n<!-- last -->",
		want: []Heartbeat{{Name: "a", Interval: time.Minute, Instruction: "one\ntwo"}},
	},
	{
		name: "CRLF, BOM and closing hashes",
		text: "\uFEFF## a ##\r\nInterval: 60\r\nInstruction: x\r\n  y\r\n",
		want: []Heartbeat{{Name: "a", Interval: time.Minute, Instruction: "x\n  y"}},
	},
}

func TestParseHeartbeats(t *testing.T) {
	t.Parallel()
	for _, tt := range heartbeatTests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, problems := ParseHeartbeats(tt.text)
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("checks (-want +got):\n%s", diff)
			}
			checkProblems(t, HeartbeatFile, problems, tt.problems)
		})
	}
}

var agentsTests = []struct {
	name     string
	text     string
	want     Agents
	problems []wantProblem
}{
	{
		name: "seed examples",
		text: "# Operating Rules\nBe nice.\n\n## Cron Jobs\n\n### morning-briefing\nCron: 0 9 * * *\nInstruction: Good morning! Check email and give me a brief summary.\n\n## Hooks\n\n### startup\nInstruction: Say hello, you just came online.\n\n### shutdown\nInstruction: Save important context to memory.md before shutting down.\n",
		want: Agents{
			CronJobs: []CronJob{{Name: "morning-briefing", Cron: "0 9 * * *", Instruction: "Good morning! Check email and give me a brief summary."}},
			Hooks: map[Hook]string{
				HookStartup:  "Say hello, you just came online.",
				HookShutdown: "Save important context to memory.md before shutting down.",
			},
		},
	},
	{
		name: "every key, case-insensitive headings and keys",
		text: "## CRON   JOBS\n### weekly\ncron: 30 8 * * 1\nTIMEZONE: Europe/Berlin\nchannel: 42\nModel: opus\nInstruction: Plan\n  the week.\n### nightly\nCron: @daily\nInstruction: n\n## hooks\n### Agent_Begin\nInstruction: begin\n### agent_stop\nInstruction: stop\n## WebHooks\n### deploy-1\nSecret-Env: DEPLOY_SECRET\nSECRET-ENV: x\n",
		want: Agents{
			CronJobs: []CronJob{
				{Name: "weekly", Cron: "30 8 * * 1", Timezone: "Europe/Berlin", Channel: "42", Model: "opus", Instruction: "Plan\n  the week."},
				{Name: "nightly", Cron: "@daily", Instruction: "n"},
			},
			Hooks: map[Hook]string{HookAgentBegin: "begin", HookAgentStop: "stop"},
		},
		problems: []wantProblem{{20, "sets Secret-Env twice"}, {18, "has no Instruction"}},
	},
	{
		name: "webhooks",
		text: "## Webhooks\n### github_push\nSecret-Env: GITHUB_HOOK_SECRET\nChannel: 99\nInstruction: A push happened:\n{{payload}}\nSummarise it.\n### bare\nSecret-Env: BARE\nInstruction: Look at this.\n",
		want: Agents{Webhooks: []Webhook{
			{Name: "github_push", SecretEnv: "GITHUB_HOOK_SECRET", Channel: "99", Instruction: "A push happened:\n{{payload}}\nSummarise it."},
			{Name: "bare", SecretEnv: "BARE", Instruction: "Look at this."},
		}},
	},
	{
		name: "invalid cron is a problem naming the job, the others remain",
		text: "## Cron Jobs\n### good\nCron: */5 * * * *\nInstruction: g\n### bad\nCron: 61 * * * *\nInstruction: b\n### short\nCron: * * * *\nInstruction: s\n### never\nCron: 0 0 30 2 *\nInstruction: n\n### tz-inline\nCron: CRON_TZ=UTC 0 9 * * *\nInstruction: t\n### every\nCron: @every 1s\nInstruction: e\n### zone\nCron: 0 9 * * *\nTimezone: Mars/Olympus\nInstruction: z\n",
		want: Agents{CronJobs: []CronJob{{Name: "good", Cron: "*/5 * * * *", Instruction: "g"}}},
		problems: []wantProblem{
			{6, `cron job "bad": the Cron "61 * * * *" is invalid`},
			{9, `cron job "short": the Cron "* * * *" has 4 fields`},
			{12, `cron job "never"`},
			{15, `cron job "tz-inline"`},
			{18, `cron job "every"`},
			{22, `cron job "zone": the Timezone "Mars/Olympus"`},
		},
	},
	{
		name:     "unknown hook, bad webhook names and env names",
		text:     "## Hooks\n### on_message\nInstruction: x\n### startup\nInstruction: a\n### STARTUP\nInstruction: b\n## Webhooks\n### Deploy\nSecret-Env: S\nInstruction: x\n### ok\nSecret-Env: sk-live-123\nInstruction: x\n### nosecret\nInstruction: x\n",
		want:     Agents{Hooks: map[Hook]string{HookStartup: "a"}},
		problems: []wantProblem{{2, `unknown hook "on_message"`}, {6, "defined twice"}, {9, "not URL-safe"}, {13, "not an environment variable name"}, {15, "has no Secret-Env"}},
	},
	{
		name: "paused jobs are parsed with their flag",
		text: "## Cron Jobs\n### off\nCron: 0 1 * * *\nPaused: yes\nInstruction: o\n### on\nCron: 0 2 * * *\npaused: NO\nInstruction: n\n### odd\nCron: 0 3 * * *\nPaused: maybe\nInstruction: x\n",
		want: Agents{CronJobs: []CronJob{
			{Name: "off", Cron: "0 1 * * *", Instruction: "o", Paused: true},
			{Name: "on", Cron: "0 2 * * *", Instruction: "n"},
		}},
		problems: []wantProblem{{12, `cron job "odd": Paused is "maybe", want yes or no`}},
	},
	{
		name: "persona sections and sub-headings there are ignored",
		text: "## Style\n### Cron: 1\nCron: nonsense\n#### deep\n## Tools\nInstruction: none\n",
	},
	{
		name:     "a deeper heading ends an item",
		text:     "## Cron Jobs\nIntro text.\n### a\nCron: 0 1 * * *\nInstruction: a\n#### notes\n### b\nCron: 0 2 * * *\nInstruction: b\n",
		want:     Agents{CronJobs: []CronJob{{Name: "b", Cron: "0 2 * * *", Instruction: "b"}}},
		problems: []wantProblem{{6, "unexpected heading"}},
	},
	{
		name: "commented and fenced examples",
		text: "<!--\n## Cron Jobs\n### x\nCron: 0 9 * * *\nInstruction: x\n-->\n````\n## Hooks\n### startup\nInstruction: hi\n````\n",
	},
}

func TestParseAgents(t *testing.T) {
	t.Parallel()
	for _, tt := range agentsTests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, problems := ParseAgents(tt.text)
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("agents (-want +got):\n%s", diff)
			}
			checkProblems(t, AgentsFile, problems, tt.problems)
		})
	}
}

func TestProblemString(t *testing.T) {
	t.Parallel()
	p := Problem{File: AgentsFile, Line: 12, Message: "bad"}
	if got, want := p.String(), "agents.md:12: bad"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
