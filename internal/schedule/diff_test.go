package schedule

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestDiff(t *testing.T) {
	t.Parallel()
	hb := Heartbeat{Name: "inbox", Interval: 30 * time.Minute, Instruction: "Check mail.", Channel: "123"}
	cron := CronJob{Name: "brief", Cron: "0 9 * * 1-5", Instruction: "Summarise.", Channel: "123", Model: "sonnet", Timezone: "Europe/Paris"}
	hook := map[Hook]string{HookStartup: "Say hi."}
	wh := Webhook{Name: "deploy", SecretEnv: "WEBHOOK_DEPLOY", Instruction: "Deployed: {{payload}}", Channel: "456"}
	full := Config{Heartbeats: []Heartbeat{hb}, Agents: Agents{CronJobs: []CronJob{cron}, Hooks: hook, Webhooks: []Webhook{wh}}}

	const (
		hbSettings   = "every 30m0s, channel 123"
		cronSettings = "0 9 * * 1-5 (Europe/Paris), channel 123, model sonnet"
		whSettings   = "POST /hooks/deploy, secret from WEBHOOK_DEPLOY, channel 456"
	)
	with := func(f func(c *Config)) Config {
		c := Config{
			Heartbeats: slices.Clone(full.Heartbeats),
			Agents: Agents{
				CronJobs: slices.Clone(full.Agents.CronJobs),
				Hooks:    map[Hook]string{HookStartup: hook[HookStartup]},
				Webhooks: slices.Clone(full.Agents.Webhooks),
			},
		}
		f(&c)
		return c
	}

	tests := []struct {
		name          string
		before, after Config
		want          []Change
	}{
		{name: "both empty"},
		{name: "equal", before: full, after: with(func(*Config) {})},
		{
			name:   "nil and empty hooks are equal",
			before: Config{Agents: Agents{Hooks: nil}},
			after:  Config{Agents: Agents{Hooks: map[Hook]string{}}},
		},
		{
			name:   "order within a list does not matter",
			before: Config{Heartbeats: []Heartbeat{hb, {Name: "b", Interval: time.Hour, Instruction: "x"}}},
			after:  Config{Heartbeats: []Heartbeat{{Name: "b", Interval: time.Hour, Instruction: "x"}, hb}},
		},
		{
			name:  "heartbeat added",
			after: Config{Heartbeats: []Heartbeat{hb}},
			want:  []Change{{Kind: "heartbeat", Name: "inbox", Op: OpAdded, After: hbSettings, Instruction: "Check mail.", InstructionChanged: true}},
		},
		{
			name:   "heartbeat removed",
			before: Config{Heartbeats: []Heartbeat{hb}},
			want:   []Change{{Kind: "heartbeat", Name: "inbox", Op: OpRemoved, Before: hbSettings, Instruction: "Check mail.", InstructionChanged: true}},
		},
		{
			name:   "heartbeat settings changed",
			before: full,
			after: with(func(c *Config) {
				c.Heartbeats[0].Interval, c.Heartbeats[0].Channel, c.Heartbeats[0].Model = time.Hour, "", "opus"
			}),
			want: []Change{{Kind: "heartbeat", Name: "inbox", Op: OpChanged, Before: hbSettings,
				After: "every 1h0m0s, default channel, model opus", Instruction: "Check mail."}},
		},
		{
			name:   "heartbeat instruction changed",
			before: full,
			after:  with(func(c *Config) { c.Heartbeats[0].Instruction = "Check mail twice." }),
			want: []Change{{Kind: "heartbeat", Name: "inbox", Op: OpChanged, Before: hbSettings, After: hbSettings,
				Instruction: "Check mail twice.", InstructionChanged: true}},
		},
		{
			name:  "cron job added",
			after: Config{Agents: Agents{CronJobs: []CronJob{cron}}},
			want:  []Change{{Kind: "cron job", Name: "brief", Op: OpAdded, After: cronSettings, Instruction: "Summarise.", InstructionChanged: true}},
		},
		{
			name:   "cron job removed",
			before: Config{Agents: Agents{CronJobs: []CronJob{cron}}},
			want:   []Change{{Kind: "cron job", Name: "brief", Op: OpRemoved, Before: cronSettings, Instruction: "Summarise.", InstructionChanged: true}},
		},
		{
			name:   "cron job settings changed",
			before: full,
			after:  with(func(c *Config) { c.Agents.CronJobs[0].Timezone, c.Agents.CronJobs[0].Model = "", "" }),
			want: []Change{{Kind: "cron job", Name: "brief", Op: OpChanged, Before: cronSettings,
				After: "0 9 * * 1-5, channel 123", Instruction: "Summarise."}},
		},
		{
			name:   "cron job instruction changed",
			before: full,
			after:  with(func(c *Config) { c.Agents.CronJobs[0].Instruction = "Summarise briefly." }),
			want: []Change{{Kind: "cron job", Name: "brief", Op: OpChanged, Before: cronSettings, After: cronSettings,
				Instruction: "Summarise briefly.", InstructionChanged: true}},
		},
		{
			name:  "hook added",
			after: Config{Agents: Agents{Hooks: hook}},
			want:  []Change{{Kind: "hook", Name: "startup", Op: OpAdded, Instruction: "Say hi.", InstructionChanged: true}},
		},
		{
			name:   "hook removed",
			before: Config{Agents: Agents{Hooks: hook}},
			after:  Config{Agents: Agents{Hooks: map[Hook]string{}}},
			want:   []Change{{Kind: "hook", Name: "startup", Op: OpRemoved, Instruction: "Say hi.", InstructionChanged: true}},
		},
		{
			name:   "hook changed",
			before: full,
			after:  with(func(c *Config) { c.Agents.Hooks[HookStartup] = "Say hello." }),
			want:   []Change{{Kind: "hook", Name: "startup", Op: OpChanged, Instruction: "Say hello.", InstructionChanged: true}},
		},
		{
			name:  "webhook added",
			after: Config{Agents: Agents{Webhooks: []Webhook{wh}}},
			want:  []Change{{Kind: "webhook", Name: "deploy", Op: OpAdded, After: whSettings, Instruction: "Deployed: {{payload}}", InstructionChanged: true}},
		},
		{
			name:   "webhook removed",
			before: Config{Agents: Agents{Webhooks: []Webhook{wh}}},
			want:   []Change{{Kind: "webhook", Name: "deploy", Op: OpRemoved, Before: whSettings, Instruction: "Deployed: {{payload}}", InstructionChanged: true}},
		},
		{
			name:   "webhook settings changed",
			before: full,
			after:  with(func(c *Config) { c.Agents.Webhooks[0].SecretEnv, c.Agents.Webhooks[0].Channel = "OTHER", "" }),
			want: []Change{{Kind: "webhook", Name: "deploy", Op: OpChanged, Before: whSettings,
				After: "POST /hooks/deploy, secret from OTHER, no channel (the result is only logged)", Instruction: "Deployed: {{payload}}"}},
		},
		{
			name:   "webhook instruction changed",
			before: full,
			after:  with(func(c *Config) { c.Agents.Webhooks[0].Instruction = "Deployed." }),
			want: []Change{{Kind: "webhook", Name: "deploy", Op: OpChanged, Before: whSettings, After: whSettings,
				Instruction: "Deployed.", InstructionChanged: true}},
		},
		{
			name: "order: kinds, hooks in lifecycle order, names",
			before: Config{
				Heartbeats: []Heartbeat{{Name: "z", Interval: time.Minute, Instruction: "z"}, {Name: "keep", Interval: time.Minute, Instruction: "k"}},
				Agents: Agents{
					Hooks:    map[Hook]string{HookStartup: "old"},
					Webhooks: []Webhook{{Name: "b", SecretEnv: "S", Instruction: "b"}},
				},
			},
			after: Config{
				Heartbeats: []Heartbeat{{Name: "keep", Interval: time.Minute, Instruction: "k"}, {Name: "a", Interval: time.Minute, Instruction: "a"}},
				Agents: Agents{
					CronJobs: []CronJob{{Name: "y", Cron: "@daily", Instruction: "y"}, {Name: "x", Cron: "@daily", Instruction: "x"}},
					Hooks:    map[Hook]string{HookShutdown: "bye", HookStartup: "new", HookAgentBegin: "begin"},
					Webhooks: []Webhook{{Name: "a", SecretEnv: "S", Instruction: "a"}},
				},
			},
			want: []Change{
				{Kind: "heartbeat", Name: "a", Op: OpAdded, After: "every 1m0s, default channel", Instruction: "a", InstructionChanged: true},
				{Kind: "heartbeat", Name: "z", Op: OpRemoved, Before: "every 1m0s, default channel", Instruction: "z", InstructionChanged: true},
				{Kind: "cron job", Name: "x", Op: OpAdded, After: "@daily, default channel", Instruction: "x", InstructionChanged: true},
				{Kind: "cron job", Name: "y", Op: OpAdded, After: "@daily, default channel", Instruction: "y", InstructionChanged: true},
				{Kind: "hook", Name: "startup", Op: OpChanged, Instruction: "new", InstructionChanged: true},
				{Kind: "hook", Name: "agent_begin", Op: OpAdded, Instruction: "begin", InstructionChanged: true},
				{Kind: "hook", Name: "shutdown", Op: OpAdded, Instruction: "bye", InstructionChanged: true},
				{Kind: "webhook", Name: "a", Op: OpAdded, After: "POST /hooks/a, secret from S, no channel (the result is only logged)", Instruction: "a", InstructionChanged: true},
				{Kind: "webhook", Name: "b", Op: OpRemoved, Before: "POST /hooks/b, secret from S, no channel (the result is only logged)", Instruction: "b", InstructionChanged: true},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Diff(tt.before, tt.after)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Diff (-want +got):\n%s", diff)
			}
			// The same twice: map iteration must not leak into the order.
			if diff := cmp.Diff(got, Diff(tt.before, tt.after)); diff != "" {
				t.Errorf("Diff is not stable (-first +second):\n%s", diff)
			}
		})
	}
}

func TestRenderChanges(t *testing.T) {
	t.Parallel()
	const z = "\u200b"
	tests := []struct {
		name    string
		changes []Change
		max     int
		want    string
	}{
		{name: "nothing", max: 200, want: ""},
		{
			name: "one of each",
			changes: []Change{
				{Kind: "cron job", Name: "spam", Op: OpAdded, After: "* * * * *, channel 123", Instruction: "Post a joke.", InstructionChanged: true},
				{Kind: "heartbeat", Name: "inbox", Op: OpChanged, Before: "every 30m0s, default channel", After: "every 1h0m0s, default channel", Instruction: "Check mail."},
				{Kind: "hook", Name: "startup", Op: OpChanged, Instruction: "Say hello.", InstructionChanged: true},
				{Kind: "webhook", Name: "deploy", Op: OpRemoved, Before: "POST /hooks/deploy, secret from X, channel 1", Instruction: "Deployed.", InstructionChanged: true},
			},
			max: 2000,
			want: "➕ **cron job** `spam`: `* * * * *, channel 123`\n" +
				"```text\nPost a joke.\n```\n" +
				"✏️ **heartbeat** `inbox`: `every 1h0m0s, default channel` (was: `every 30m0s, default channel`)\n" +
				"Instruction unchanged.\n" +
				"✏️ **hook** `startup`\n" +
				"New instruction:\n```text\nSay hello.\n```\n" +
				"➖ **webhook** `deploy`: `POST /hooks/deploy, secret from X, channel 1`\n" +
				"```text\nDeployed.\n```",
		},
		{
			name: "untrusted text cannot break out or ping",
			changes: []Change{{
				Kind: "cron job", Name: "a`b @everyone", Op: OpAdded, After: "@here, model <@1>\nsecond line",
				Instruction: "```\n@everyone <@&2>\r\n```", InstructionChanged: true,
			}},
			max: 2000,
			want: "➕ **cron job** `aˋb " + z + "@" + z + "everyone`: `" + z + "@" + z + "here, model <" + z + "@" + z + "1> second line`\n" +
				"```text\nˋˋˋ\n" + z + "@" + z + "everyone <" + z + "@" + z + "&2>\nˋˋˋ\n```",
		},
		{
			name:    "long instruction is cut",
			changes: []Change{{Kind: "hook", Name: "startup", Op: OpAdded, Instruction: strings.Repeat("x", 500), InstructionChanged: true}},
			max:     2000,
			want:    "➕ **hook** `startup`\n```text\n" + strings.Repeat("x", 399) + "…\n```",
		},
		{
			name:    "empty instruction and name",
			changes: []Change{{Kind: "hook", Op: OpAdded, InstructionChanged: true}},
			max:     200,
			want:    "➕ **hook** (no name)\n_(no instruction)_",
		},
		{
			name: "the last change that fits is cut shorter",
			changes: []Change{
				{Kind: "hook", Name: "startup", Op: OpAdded, Instruction: strings.Repeat("x", 300), InstructionChanged: true},
				{Kind: "hook", Name: "shutdown", Op: OpAdded, Instruction: "Bye.", InstructionChanged: true},
			},
			max: 200,
			// 200 = 29 for the last line, a newline, 33 of markup and 137
			// of instruction.
			want: "➕ **hook** `startup`\n```text\n" + strings.Repeat("x", 136) + "…\n```\n…and 1 more change not shown.",
		},
		{
			name:    "too small for any change",
			changes: []Change{{Kind: "hook", Name: "startup", Op: OpAdded, Instruction: "x", InstructionChanged: true}},
			max:     10,
			want:    "…and 1 mo…",
		},
		{
			name:    "nothing fits",
			changes: []Change{{Kind: "hook", Name: "startup", Op: OpAdded, Instruction: "x", InstructionChanged: true}},
			max:     0,
			want:    "",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := RenderChanges(tt.changes, tt.max)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("RenderChanges (-want +got):\n%s", diff)
			}
			checkRendered(t, tt.changes, tt.max, got)
		})
	}
}

func TestRenderChangesLeavesOutWhatDoesNotFit(t *testing.T) {
	t.Parallel()
	var changes []Change
	for i := range 20 {
		changes = append(changes, Change{Kind: "cron job", Name: fmt.Sprintf("job-%02d", i), Op: OpAdded,
			After: "@daily, default channel", Instruction: strings.Repeat("y", 100), InstructionChanged: true})
	}
	for _, max := range []int{200, 500, 1000, 2000} {
		got := RenderChanges(changes, max)
		checkRendered(t, changes, max, got)
		lines := strings.Split(got, "\n")
		var shown int
		if _, err := fmt.Sscanf(lines[len(lines)-1], "…and %d more changes not shown.", &shown); err != nil {
			t.Fatalf("max %d: last line %q does not count what is left out", max, lines[len(lines)-1])
		}
		shown = len(changes) - shown
		if shown == 0 {
			t.Errorf("max %d: no change shown", max)
		}
		for i, c := range changes {
			if in := strings.Contains(got, "`"+c.Name+"`"); in != (i < shown) {
				t.Errorf("max %d: %s shown = %v, want %v (the first %d)", max, c.Name, in, i < shown, shown)
			}
		}
		// Nothing more would have fitted whole.
		if whole := RenderChanges(changes[:shown+1], len(changes)*1000); runeCount(whole) <= max {
			t.Errorf("max %d: %d changes fit in %d runes but only %d were shown", max, shown+1, runeCount(whole), shown)
		}
	}
}

// An end-to-end case: what an approver would see for a small edit.
func TestDiffRendered(t *testing.T) {
	t.Parallel()
	before := Config{Agents: Agents{CronJobs: []CronJob{{Name: "brief", Cron: "0 9 * * 1-5", Instruction: "Summarise."}}}}
	after := Config{Agents: Agents{
		CronJobs: []CronJob{{Name: "brief", Cron: "0 8 * * 1-5", Timezone: "Europe/Paris", Instruction: "Summarise."}},
		Hooks:    map[Hook]string{HookAgentStop: "Ping <@123> and @here."},
	}}
	want := "✏️ **cron job** `brief`: `0 8 * * 1-5 (Europe/Paris), default channel` (was: `0 9 * * 1-5, default channel`)\n" +
		"Instruction unchanged.\n" +
		"➕ **hook** `agent_stop`\n" +
		"```text\nPing <\u200b@\u200b123> and \u200b@\u200bhere.\n```"
	if diff := cmp.Diff(want, RenderChanges(Diff(before, after), 2000)); diff != "" {
		t.Errorf("RenderChanges(Diff) (-want +got):\n%s", diff)
	}
}

// checkRendered asserts what holds for any rendering of changes in max
// runes: the limit, paired fences, closed code spans, no mention, and every
// change's name when none was left out.
func checkRendered(t *testing.T, changes []Change, max int, out string) {
	t.Helper()
	if n := runeCount(out); n > max {
		t.Errorf("%d runes, over the limit of %d", n, max)
	}
	inFence, fences := false, 0
	lines := strings.Split(out, "\n")
	for _, l := range lines {
		if !strings.HasPrefix(l, "```") {
			// Outside a fence, code spans open and close on one line.
			if !inFence && strings.Count(l, "`")%2 != 0 {
				t.Errorf("unclosed code span in line %q", l)
			}
			continue
		}
		fences++
		if want := map[bool]string{false: "```text", true: "```"}[inFence]; l != want {
			t.Errorf("fence line %q, want %q", l, want)
		}
		inFence = !inFence
	}
	if inFence {
		t.Errorf("unclosed code block in:\n%s", out)
	}
	if n := strings.Count(out, "```"); n != fences {
		t.Errorf("%d \"```\" in the output but %d fence lines:\n%s", n, fences, out)
	}
	lower := strings.ToLower(out)
	for _, ping := range []string{"@everyone", "@here", "<@"} {
		if strings.Contains(lower, ping) {
			t.Errorf("output contains %q:\n%s", ping, out)
		}
	}
	last := lines[len(lines)-1]
	if strings.HasPrefix(last, "…and ") && strings.HasSuffix(last, " not shown.") || max < 200 {
		return
	}
	for _, c := range changes {
		if !strings.Contains(out, inline(c.Name, nameLimit)) {
			t.Errorf("name %q missing from:\n%s", c.Name, out)
		}
	}
}

func FuzzRenderChanges(f *testing.F) {
	f.Add("cron job", "spam", "* * * * *, channel 123", "every 30m0s", "Post a joke.", uint8(3), uint16(1800))
	f.Add("hook", "a`b @everyone", "@here <@1>", "", "```\n@everyone <@&2>\n```", uint8(1), uint16(0))
	f.Add("webhook", strings.Repeat("n", 150), strings.Repeat("s", 300), "x\ny", strings.Repeat("i@", 500), uint8(9), uint16(300))
	f.Add("heartbeat", "<", "@", "`", "@here\r\n`", uint8(200), uint16(65535))
	f.Add("", "", "", "", "", uint8(0), uint16(5))
	f.Add("hook", "\xff\xfe", "\u200b@", "✏️", "👩‍👩‍👧‍👦", uint8(4), uint16(40))
	ops := []string{OpAdded, OpChanged, OpRemoved, "renamed"}
	f.Fuzz(func(t *testing.T, kind, name, before, after, instr string, n uint8, max uint16) {
		var changes []Change
		for i := range int(n%12) + 1 {
			changes = append(changes, Change{
				Kind:               kind,
				Name:               name + strings.Repeat("`", i%3) + fmt.Sprint(i),
				Op:                 ops[i%len(ops)],
				Before:             before,
				After:              after,
				Instruction:        strings.Repeat(instr, i%4),
				InstructionChanged: i%5 != 0,
			})
		}
		m := 200 + int(max)%3000
		checkRendered(t, changes, m, RenderChanges(changes, m))
	})
}

// Property: Diff(a, a) is nil, however a's lists are ordered, and
// Diff(b, a) lists the items of Diff(a, b), each undone.
func TestPropertyDiffSymmetric(t *testing.T) {
	t.Parallel()
	forEachSeed(t, func(t *testing.T, r *rand.Rand) {
		a, b := smallConfig(r), smallConfig(r)
		if got := Diff(a, a); got != nil {
			t.Errorf("Diff(a, a) = %v, want nil", got)
		}
		if got := Diff(a, shuffled(r, a)); got != nil {
			t.Errorf("Diff(a, a reordered) = %v, want nil", got)
		}

		forward := Diff(a, b)
		var want []Change
		for _, c := range forward {
			u := c
			u.Before, u.After = c.After, c.Before
			switch c.Op {
			case OpAdded:
				u.Op = OpRemoved
			case OpRemoved:
				u.Op = OpAdded
			case OpChanged:
				u.Instruction = instructionOf(a, c.Kind, c.Name)
				if c.Before == c.After && !c.InstructionChanged {
					t.Errorf("change %+v changes nothing", c)
				}
			}
			want = append(want, u)
		}
		if diff := cmp.Diff(want, Diff(b, a)); diff != "" {
			t.Errorf("Diff(b, a) is not Diff(a, b) undone (-want +got):\n%s", diff)
		}
		kinds := []string{kindHeartbeat, kindCron, kindHook, kindWebhook}
		ordered := slices.IsSortedFunc(forward, func(x, y Change) int {
			if k := slices.Index(kinds, x.Kind) - slices.Index(kinds, y.Kind); k != 0 {
				return k
			}
			if x.Kind == kindHook {
				return slices.Index(HookNames, Hook(x.Name)) - slices.Index(HookNames, Hook(y.Name))
			}
			return strings.Compare(x.Name, y.Name)
		})
		if !ordered {
			t.Errorf("Diff(a, b) is out of order: %+v", forward)
		}
		checkRendered(t, forward, 2000, RenderChanges(forward, 2000))
	})
}

// smallConfig returns a config drawn from few names and values, so that
// two of them share items, some equal and some not.
func smallConfig(r *rand.Rand) Config {
	var c Config
	for _, name := range []string{"a", "b", "c"} {
		if r.IntN(2) == 0 {
			c.Heartbeats = append(c.Heartbeats, Heartbeat{Name: name, Interval: pick(r, time.Minute, time.Hour),
				Instruction: pick(r, "x", "y"), Channel: pick(r, "", "1"), Model: pick(r, "", "opus")})
		}
		if r.IntN(2) == 0 {
			c.Agents.CronJobs = append(c.Agents.CronJobs, CronJob{Name: name, Cron: pick(r, "@daily", "0 9 * * *"),
				Instruction: pick(r, "x", "y"), Channel: pick(r, "", "1"), Model: pick(r, "", "opus"), Timezone: pick(r, "", "UTC")})
		}
		if r.IntN(2) == 0 {
			c.Agents.Webhooks = append(c.Agents.Webhooks, Webhook{Name: name, SecretEnv: pick(r, "S", "T"),
				Instruction: pick(r, "x", "y"), Channel: pick(r, "", "1")})
		}
	}
	if r.IntN(2) == 0 {
		c.Agents.Hooks = map[Hook]string{}
	}
	for _, h := range HookNames {
		if r.IntN(2) == 0 {
			if c.Agents.Hooks == nil {
				c.Agents.Hooks = map[Hook]string{}
			}
			c.Agents.Hooks[h] = pick(r, "x", "y")
		}
	}
	return shuffled(r, c)
}

// shuffled returns c with its lists in a random order.
func shuffled(r *rand.Rand, c Config) Config {
	c.Heartbeats = slices.Clone(c.Heartbeats)
	c.Agents.CronJobs = slices.Clone(c.Agents.CronJobs)
	c.Agents.Webhooks = slices.Clone(c.Agents.Webhooks)
	r.Shuffle(len(c.Heartbeats), func(i, j int) { c.Heartbeats[i], c.Heartbeats[j] = c.Heartbeats[j], c.Heartbeats[i] })
	r.Shuffle(len(c.Agents.CronJobs), func(i, j int) {
		c.Agents.CronJobs[i], c.Agents.CronJobs[j] = c.Agents.CronJobs[j], c.Agents.CronJobs[i]
	})
	r.Shuffle(len(c.Agents.Webhooks), func(i, j int) {
		c.Agents.Webhooks[i], c.Agents.Webhooks[j] = c.Agents.Webhooks[j], c.Agents.Webhooks[i]
	})
	return c
}

// instructionOf returns the instruction of the named item of c.
func instructionOf(c Config, kind, name string) string {
	switch kind {
	case kindHeartbeat:
		for _, h := range c.Heartbeats {
			if h.Name == name {
				return h.Instruction
			}
		}
	case kindCron:
		for _, j := range c.Agents.CronJobs {
			if j.Name == name {
				return j.Instruction
			}
		}
	case kindHook:
		return c.Agents.Hooks[Hook(name)]
	case kindWebhook:
		for _, w := range c.Agents.Webhooks {
			if w.Name == name {
				return w.Instruction
			}
		}
	}
	return ""
}
