package schedule

import (
	"slices"
	"strings"
)

// CronJob is one scheduled job from the "## Cron Jobs" section of agents.md
// (R18.1).
type CronJob struct {
	Name string
	// Cron is a standard five-field expression (minute hour day-of-month
	// month day-of-week) or a named schedule such as @daily.
	Cron        string
	Instruction string
	Channel     string // empty: the scheduler's default output channel
	Model       string // empty: the backend's default model
	// Timezone is the IANA zone the expression is read in; empty means the
	// scheduler's default location.
	Timezone string
	// Paused jobs ("Paused: yes") are listed but not scheduled: the line
	// stops a job without losing its definition.
	Paused bool
}

// Hook names a lifecycle point that can run an instruction (R19).
type Hook string

// The lifecycle hooks. Startup and Shutdown go through the queue;
// AgentBegin and AgentStop run inline around every other event.
const (
	HookStartup    Hook = "startup"
	HookAgentBegin Hook = "agent_begin"
	HookAgentStop  Hook = "agent_stop"
	HookShutdown   Hook = "shutdown"
)

// HookNames lists every hook in lifecycle order. Callers must not modify it.
var HookNames = []Hook{HookStartup, HookAgentBegin, HookAgentStop, HookShutdown}

// Webhook is one HTTP intake from the "## Webhooks" section of agents.md,
// served at POST /hooks/{Name}.
type Webhook struct {
	// Name is URL-safe: lower-case letters, digits, '_' and '-'.
	Name string
	// SecretEnv names the environment variable that holds the shared
	// secret; the secret itself never appears in a config file.
	SecretEnv string
	// Instruction is a template: "{{payload}}" marks where the payload goes;
	// without it the payload is appended.
	Instruction string
	Channel     string // empty: the event only logs its result
}

// PayloadMarker is the placeholder for the payload in a webhook Instruction.
const PayloadMarker = "{{payload}}"

// Agents is the scheduled work defined in agents.md.
type Agents struct {
	CronJobs []CronJob
	// Hooks maps a hook to its instruction; a hook without one is absent.
	Hooks    map[Hook]string
	Webhooks []Webhook
}

// The sections of agents.md the parser reads, by lower-case heading.
const (
	sectionCron     = "cron jobs"
	sectionHooks    = "hooks"
	sectionWebhooks = "webhooks"
)

var (
	cronKeys    = []string{keyCron, keyInstruction, keyChannel, keyModel, keyTimezone, keyPaused}
	hookKeys    = []string{keyInstruction}
	webhookKeys = []string{keySecretEnv, keyInstruction, keyChannel}
)

// ParseAgents parses the scheduled work in agents.md:
//
//	## Cron Jobs
//	### morning-briefing
//	Cron: 0 9 * * 1-5
//	Timezone: Europe/Berlin
//	Instruction: Summarise my open tasks.
//
//	## Hooks
//	### startup
//	Instruction: Say that you are back online.
//
//	## Webhooks
//	### deploy
//	Secret-Env: DEPLOY_WEBHOOK_SECRET
//	Instruction: A deploy finished. Summarise it: {{payload}}
//
// Section headings and keys are case-insensitive. Cron jobs take Cron and
// Instruction, and optionally Channel, Model, Timezone and Paused (yes or
// no; a paused job is parsed but not scheduled); hooks (startup,
// agent_begin, agent_stop, shutdown) take Instruction; webhooks take
// Secret-Env and Instruction, and optionally Channel. Every other "##"
// section is persona text and ignored. Comments and code blocks are
// handled as in ParseHeartbeats. An item with any problem is left out
// and the problem reported; of two items with the same name the first wins.
func ParseAgents(text string) (Agents, []Problem) {
	lines, problems := scan(AgentsFile, text)
	var (
		a       Agents
		section string
		cur     *item
		seen    = map[string]map[string]bool{}
	)
	finish := func() {
		if cur == nil {
			return
		}
		if seen[section] == nil {
			seen[section] = map[string]bool{}
		}
		switch section {
		case sectionCron:
			if j, ok := buildCronJob(cur, seen[section]); ok {
				a.CronJobs = append(a.CronJobs, j)
			}
		case sectionHooks:
			if h, instr, ok := buildHook(cur, seen[section]); ok {
				if a.Hooks == nil {
					a.Hooks = map[Hook]string{}
				}
				a.Hooks[h] = instr
			}
		case sectionWebhooks:
			if w, ok := buildWebhook(cur, seen[section]); ok {
				a.Webhooks = append(a.Webhooks, w)
			}
		}
		problems = append(problems, cur.problems...)
		cur = nil
	}
	for _, l := range lines {
		level, name := 0, ""
		if !l.code {
			level, name = heading(l.text)
		}
		switch {
		case level == 0:
			if cur != nil {
				cur.add(l)
			}
		case level <= 2:
			finish()
			section = ""
			if level == 2 {
				section = sectionName(name)
			}
		case level == 3 && section != "":
			finish()
			cur = newSectionItem(section, name, l.num)
		case section != "":
			if cur != nil {
				cur.problemf(l.num, "%s %q: unexpected heading %q (items are \"### name\" sections)", cur.kind, cur.name, l.text)
				finish()
			}
		}
	}
	finish()
	return a, problems
}

// sectionName returns the scheduled-work section a "##" heading opens, or
// "" for persona text.
func sectionName(heading string) string {
	s := strings.ToLower(strings.Join(strings.Fields(heading), " "))
	switch s {
	case sectionCron, sectionHooks, sectionWebhooks:
		return s
	}
	return ""
}

func newSectionItem(section, name string, line int) *item {
	switch section {
	case sectionCron:
		return newItem(AgentsFile, "cron job", name, line, cronKeys...)
	case sectionHooks:
		return newItem(AgentsFile, "hook", name, line, hookKeys...)
	default:
		return newItem(AgentsFile, "webhook", name, line, webhookKeys...)
	}
}

// checkName reports an empty or repeated name and records the name as seen.
func checkName(it *item, seen map[string]bool) {
	switch {
	case it.name == "":
		it.problemf(it.line, "a %s has an empty name", it.kind)
	case seen[it.name]:
		it.problemf(it.line, "%s %q is defined twice: the first one counts", it.kind, it.name)
	default:
		seen[it.name] = true
	}
}

func buildCronJob(it *item, seen map[string]bool) (CronJob, bool) {
	checkName(it, seen)
	j := CronJob{Name: it.name}
	var line int
	if expr, line, ok := it.require(keyCron); ok {
		if err := checkCron(expr); err != nil {
			it.problemf(line, "cron job %q: %v", it.name, err)
		}
		j.Cron = expr
	}
	j.Instruction, _, _ = it.require(keyInstruction)
	if j.Channel, line = it.get(keyChannel); j.Channel != "" {
		if err := checkChannel(j.Channel); err != nil {
			it.problemf(line, "cron job %q: %v", it.name, err)
		}
	}
	j.Model, _ = it.get(keyModel)
	if j.Timezone, line = it.get(keyTimezone); j.Timezone != "" {
		if err := checkTimezone(j.Timezone); err != nil {
			it.problemf(line, "cron job %q: %v", it.name, err)
		}
	}
	if v, line := it.get(keyPaused); v != "" {
		switch strings.ToLower(v) {
		case "yes":
			j.Paused = true
		case "no":
		default:
			it.problemf(line, "cron job %q: Paused is %q, want yes or no", it.name, v)
		}
	}
	if len(it.problems) > 0 {
		return CronJob{}, false
	}
	return j, true
}

func buildHook(it *item, seen map[string]bool) (Hook, string, bool) {
	it.name = strings.ToLower(it.name)
	h := Hook(it.name)
	if it.name != "" && !slices.Contains(HookNames, h) {
		it.problemf(it.line, "unknown hook %q (known: startup, agent_begin, agent_stop, shutdown)", it.name)
	} else {
		checkName(it, seen)
	}
	instr, _, _ := it.require(keyInstruction)
	if len(it.problems) > 0 {
		return "", "", false
	}
	return h, instr, true
}

func buildWebhook(it *item, seen map[string]bool) (Webhook, bool) {
	if it.name != "" && !webhookRE().MatchString(it.name) {
		it.problemf(it.line, "webhook name %q is not URL-safe: use 1-64 of a-z, 0-9, '_' and '-'", it.name)
	} else {
		checkName(it, seen)
	}
	w := Webhook{Name: it.name}
	var line int
	if env, line, ok := it.require(keySecretEnv); ok {
		if !envNameRE().MatchString(env) {
			// The value is not quoted: it may be a secret pasted by mistake.
			it.problemf(line, "webhook %q: Secret-Env is not an environment variable name (it names the variable that holds the secret, never the secret itself)", it.name)
		}
		w.SecretEnv = env
	}
	w.Instruction, _, _ = it.require(keyInstruction)
	if w.Channel, line = it.get(keyChannel); w.Channel != "" {
		if err := checkChannel(w.Channel); err != nil {
			it.problemf(line, "webhook %q: %v", it.name, err)
		}
	}
	if len(it.problems) > 0 {
		return Webhook{}, false
	}
	return w, true
}
