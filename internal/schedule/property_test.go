package schedule

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/queue"
)

// Property tests: random valid configs are rendered as markdown in random
// but legal ways (key order and case, blank lines, decoy comments, code
// blocks and persona text) and must parse back to exactly what was
// generated. Each case has its own seed, printed on failure.

const propertyRuns = 300

func forEachSeed(t *testing.T, f func(t *testing.T, r *rand.Rand)) {
	t.Helper()
	for seed := uint64(1); seed <= propertyRuns; seed++ {
		r := rand.New(rand.NewPCG(seed, 0x5eed))
		t.Run(fmt.Sprint(seed), func(t *testing.T) { f(t, r) })
	}
}

// md builds a markdown file and remembers line numbers.
type md struct {
	b    strings.Builder
	line int // lines written so far
}

func (m *md) add(lines ...string) {
	for _, l := range lines {
		for part := range strings.SplitSeq(l, "\n") {
			m.b.WriteString(part)
			m.b.WriteByte('\n')
			m.line++
		}
	}
}

// next is the number the next added line will have.
func (m *md) next() int { return m.line + 1 }

func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

// randCase spells a key in a random case.
func randCase(r *rand.Rand, key string) string {
	switch r.IntN(3) {
	case 0:
		return strings.ToLower(key)
	case 1:
		return strings.ToUpper(key)
	}
	return key
}

const nameChars = "abcdefghijklmnopqrstuvwxyz0123456789-_"

func randWord(r *rand.Rand, chars string, minLen, maxLen int) string {
	n := minLen + r.IntN(maxLen-minLen+1)
	b := make([]byte, n)
	for i := range b {
		b[i] = chars[r.IntN(len(chars))]
	}
	return string(b)
}

// randName returns a unique item name: words, maybe with inner spaces.
func randName(r *rand.Rand, seen map[string]bool, chars string, spaces bool) string {
	for {
		name := randWord(r, chars, 1, 12)
		if spaces && r.IntN(3) == 0 {
			name += " " + randWord(r, chars, 1, 8)
		}
		if !seen[name] {
			seen[name] = true
			return name
		}
	}
}

// randInstruction returns one to five lines of instruction text. The first
// word of each line is plain, so no line reads as a key, heading, fence or
// comment; the rest may hold colons, hashes and backticks. It may contain
// blank lines, an unknown "Key:" line and a fenced block holding things that
// would otherwise be structure.
func randInstruction(r *rand.Rand) string {
	words := []string{"check", "the", "inbox:", "#urgent", "`code`", "a:b", "HEARTBEAT_OK", "ünïcode", "{{payload}}", "->", "50%", "<b>"}
	starts := []string{"Check", "Summarise", "If", "Then", "Reply", "Look"}
	var lines []string
	for i := 0; i < 1+r.IntN(5); i++ {
		switch {
		case i > 0 && r.IntN(6) == 0:
			lines = append(lines, "")
		case i > 0 && r.IntN(6) == 0:
			lines = append(lines, "Note: "+pick(r, words...))
		case i > 0 && r.IntN(8) == 0:
			lines = append(lines, "```", "## not a heading", "Interval: 1", "<!-- not a comment -->", "```")
		}
		line := pick(r, starts...)
		for j := 0; j < r.IntN(8); j++ {
			line += " " + pick(r, words...)
		}
		if i > 0 && r.IntN(4) == 0 {
			line = "  " + line // indentation is kept
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}

func randChannel(r *rand.Rand) string {
	if r.IntN(2) == 0 {
		return ""
	}
	return randWord(r, "0123456789", 17, 20)
}

func randModel(r *rand.Rand) string {
	if r.IntN(2) == 0 {
		return ""
	}
	return pick(r, "sonnet", "opus", "haiku", "gpt-5.1-codex", "claude-sonnet-4-5@20250929")
}

// decoy returns something the parsers must skip: a comment or a code block
// holding a would-be item, or a blank line. After an item (afterItem) it is
// never a code block: that would continue the item's Instruction.
func decoy(r *rand.Rand, heading string, afterItem bool) string {
	n := 4
	if afterItem {
		n = 3
	}
	switch (r.IntN(n) + 1) % 4 {
	case 1:
		return "<!--\n" + heading + " decoy\nInterval: 60\nCron: 0 9 * * *\nInstruction: never\n-->"
	case 0:
		return "```markdown\n" + heading + " decoy\nInterval: 60\nCron: 0 9 * * *\nInstruction: never\n```"
	case 2:
		return "<!-- a note --> "
	}
	return ""
}

// keyLines renders an item's keys in random order and case. Instruction may
// come anywhere: it ends at the next key.
func keyLines(r *rand.Rand, m *md, kv [][2]string) map[string]int {
	at := map[string]int{}
	r.Shuffle(len(kv), func(i, j int) { kv[i], kv[j] = kv[j], kv[i] })
	for _, p := range kv {
		if p[1] == "" {
			continue
		}
		at[p[0]] = m.next()
		sep := pick(r, ": ", ":  ", " : ")
		if p[0] == "Instruction" && r.IntN(4) == 0 {
			m.add(randCase(r, p[0])+":", p[1]) // instruction on the next line
		} else {
			m.add(randCase(r, p[0]) + sep + p[1])
		}
		if r.IntN(3) == 0 {
			m.add("")
		}
	}
	return at
}

func randHeartbeats(r *rand.Rand) []Heartbeat {
	seen := map[string]bool{}
	var checks []Heartbeat
	for i := 0; i < r.IntN(6); i++ {
		checks = append(checks, Heartbeat{
			Name:        randName(r, seen, nameChars+"ABC", true),
			Interval:    time.Duration(60+r.IntN(7*86400)) * time.Second,
			Instruction: randInstruction(r),
			Channel:     randChannel(r),
			Model:       randModel(r),
		})
	}
	return checks
}

func renderHeartbeats(r *rand.Rand, checks []Heartbeat) string {
	var m md
	if r.IntN(2) == 0 {
		m.add("# Heartbeat", "", "Checks the agent runs on its own.", "")
	}
	for i, h := range checks {
		m.add(decoy(r, "##", i > 0))
		m.add("## " + h.Name + pick(r, "", " ##", "  "))
		keyLines(r, &m, [][2]string{
			{"Interval", fmt.Sprint(int(h.Interval / time.Second))},
			{"Instruction", h.Instruction},
			{"Channel", h.Channel},
			{"Model", h.Model},
		})
	}
	m.add(decoy(r, "##", true))
	return m.b.String()
}

// Property 22: heartbeat config parsing.
func TestPropertyHeartbeatParsing(t *testing.T) {
	t.Parallel()
	forEachSeed(t, func(t *testing.T, r *rand.Rand) {
		want := randHeartbeats(r)
		text := renderHeartbeats(r, want)
		got, problems := ParseHeartbeats(text)
		if len(problems) > 0 {
			t.Fatalf("problems:\n%s\ntext:\n%s", problemList(problems), text)
		}
		if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("ParseHeartbeats (-want +got):\n%s\ntext:\n%s", diff, text)
		}
	})
}

// Property 23: a check below the minimum interval is rejected, at parse
// time with a problem naming it and at Apply time without a timer, while
// the valid checks among it are kept.
func TestPropertyHeartbeatMinimumInterval(t *testing.T) {
	t.Parallel()
	forEachSeed(t, func(t *testing.T, r *rand.Rand) {
		valid := randHeartbeats(r)
		fast := Heartbeat{Name: "fast-check", Interval: time.Duration(1+r.IntN(59)) * time.Second, Instruction: "Too often."}
		all := append([]Heartbeat(nil), valid...)
		pos := r.IntN(len(all) + 1)
		all = append(all[:pos], append([]Heartbeat{fast}, all[pos:]...)...)

		text := renderHeartbeats(r, all)
		got, problems := ParseHeartbeats(text)
		if diff := cmp.Diff(valid, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("ParseHeartbeats (-want +got):\n%s\ntext:\n%s", diff, text)
		}
		if len(problems) != 1 || !strings.Contains(problems[0].Message, `"fast-check"`) || !strings.Contains(problems[0].Message, "minimum") {
			t.Errorf("problems = %v, want one about the minimum naming fast-check", problems)
		}

		s := idleScheduler(t)
		if err := s.Apply(Config{Heartbeats: all}); err == nil {
			t.Error("Apply accepted a check below the minimum interval")
		}
		var names []string
		for _, nr := range s.NextRuns() {
			names = append(names, nr.Name)
		}
		var wantNames []string
		for _, h := range valid {
			wantNames = append(wantNames, h.Name)
		}
		if diff := cmp.Diff(wantNames, names, cmpopts.EquateEmpty(), cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
			t.Errorf("scheduled checks (-want +got):\n%s", diff)
		}
	})
}

var zones = []string{"", "UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe"}

func randCron(r *rand.Rand) string {
	if r.IntN(10) == 0 {
		return pick(r, "@daily", "@hourly", "@weekly", "@monthly", "@yearly", "@midnight")
	}
	return strings.Join([]string{
		pick(r, "*", "0", "59", "*/5", "0-30", "15,45", "1-59/7"),
		pick(r, "*", "0", "23", "9", "8-18", "*/2", "6,18"),
		pick(r, "*", "1", "31", "1-15", "*/10"),
		pick(r, "*", "1", "12", "1-6", "JAN", "*/3"),
		pick(r, "*", "0", "6", "1-5", "MON-FRI", "SUN"),
	}, pick(r, " ", "  ", "\t"))
}

func randAgents(r *rand.Rand) Agents {
	var a Agents
	seen := map[string]bool{}
	for i := 0; i < r.IntN(5); i++ {
		a.CronJobs = append(a.CronJobs, CronJob{
			Name:        randName(r, seen, nameChars+"XYZ", true),
			Cron:        randCron(r),
			Instruction: randInstruction(r),
			Channel:     randChannel(r),
			Model:       randModel(r),
			Timezone:    pick(r, zones...),
		})
	}
	for _, h := range HookNames {
		if r.IntN(2) == 0 {
			if a.Hooks == nil {
				a.Hooks = map[Hook]string{}
			}
			a.Hooks[h] = randInstruction(r)
		}
	}
	seen = map[string]bool{}
	for i := 0; i < r.IntN(4); i++ {
		a.Webhooks = append(a.Webhooks, Webhook{
			Name:        randName(r, seen, nameChars, false),
			SecretEnv:   strings.ToUpper(randWord(r, "abcdefghijklmnopqrstuvwxyz_", 1, 10)) + "_SECRET",
			Instruction: randInstruction(r),
			Channel:     randChannel(r),
		})
	}
	return a
}

// renderAgents renders a in random section order between persona text. It
// returns the text and, per cron job, the line of its Cron key.
func renderAgents(r *rand.Rand, a Agents) (string, map[string]int) {
	var m md
	cronLines := map[string]int{}
	m.add("# Operating Rules", "", "- Be concise.", "")
	sections := []func(){
		func() {
			m.add(pick(r, "## Cron Jobs", "## cron jobs", "##  CRON JOBS  "), "", "Jobs run unattended.")
			for i, c := range a.CronJobs {
				m.add(decoy(r, "###", i > 0))
				m.add("### " + c.Name)
				at := keyLines(r, &m, [][2]string{{"Cron", c.Cron}, {"Instruction", c.Instruction}, {"Channel", c.Channel}, {"Model", c.Model}, {"Timezone", c.Timezone}})
				cronLines[c.Name] = at["Cron"]
			}
		},
		func() {
			m.add(pick(r, "## Hooks", "## hooks"))
			first := true
			for _, h := range HookNames {
				if instr, ok := a.Hooks[h]; ok {
					m.add(decoy(r, "###", !first))
					first = false
					m.add("### " + pick(r, string(h), strings.ToUpper(string(h))))
					keyLines(r, &m, [][2]string{{"Instruction", instr}})
				}
			}
		},
		func() {
			m.add(pick(r, "## Webhooks", "## WEBHOOKS"))
			for _, w := range a.Webhooks {
				m.add("### " + w.Name)
				keyLines(r, &m, [][2]string{{"Secret-Env", w.SecretEnv}, {"Instruction", w.Instruction}, {"Channel", w.Channel}})
			}
		},
		func() {
			m.add("## Style", "### Cron: not a job", "Cron: * * *", "Instruction: persona text, ignored")
		},
	}
	r.Shuffle(len(sections), func(i, j int) { sections[i], sections[j] = sections[j], sections[i] })
	for _, s := range sections {
		s()
		m.add(decoy(r, "##", true))
	}
	return m.b.String(), cronLines
}

// Property 24 (and the hook and webhook parts of agents.md): cron job
// config parsing.
func TestPropertyAgentsParsing(t *testing.T) {
	t.Parallel()
	forEachSeed(t, func(t *testing.T, r *rand.Rand) {
		want := randAgents(r)
		text, _ := renderAgents(r, want)
		got, problems := ParseAgents(text)
		if len(problems) > 0 {
			t.Fatalf("problems:\n%s\ntext:\n%s", problemList(problems), text)
		}
		if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("ParseAgents (-want +got):\n%s\ntext:\n%s", diff, text)
		}
	})
}

var invalidCrons = []string{
	"61 * * * *", "* 24 * * *", "* * 0 * *", "* * 32 * *", "* * * 13 *", "* * * * 8",
	"* * * *", "* * * * * *", "a b c d e", "*/0 * * * *", "5-1 * * * *", "0 0 30 2 *",
	"@every 1m", "@sometimes", "TZ=UTC 0 9 * * *",
}

// Property 25: a job with an invalid cron expression is reported with its
// name and line and left out; every valid job around it still parses and is
// scheduled.
func TestPropertyInvalidCronRejected(t *testing.T) {
	t.Parallel()
	forEachSeed(t, func(t *testing.T, r *rand.Rand) {
		valid := randAgents(r)
		all := valid
		all.CronJobs = append([]CronJob(nil), valid.CronJobs...)
		bad := map[string]bool{}
		for i := 0; i < 1+r.IntN(3); i++ {
			name := fmt.Sprintf("broken-%d", i)
			bad[name] = true
			pos := r.IntN(len(all.CronJobs) + 1)
			job := CronJob{Name: name, Cron: pick(r, invalidCrons...), Instruction: randInstruction(r)}
			all.CronJobs = append(all.CronJobs[:pos], append([]CronJob{job}, all.CronJobs[pos:]...)...)
		}
		text, cronLines := renderAgents(r, all)
		got, problems := ParseAgents(text)
		if diff := cmp.Diff(valid, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("ParseAgents (-want +got):\n%s\ntext:\n%s", diff, text)
		}
		if len(problems) != len(bad) {
			t.Fatalf("%d problems, want %d:\n%s\ntext:\n%s", len(problems), len(bad), problemList(problems), text)
		}
		for _, p := range problems {
			var name string
			for n := range bad {
				if strings.Contains(p.Message, fmt.Sprintf("cron job %q", n)) {
					name = n
				}
			}
			if name == "" || p.Line != cronLines[name] || p.File != AgentsFile {
				t.Errorf("problem %s: want one naming a broken job at its Cron line", p)
			}
		}

		s := idleScheduler(t)
		if err := s.Apply(Config{Agents: got}); err != nil {
			t.Errorf("Apply(valid jobs): %v", err)
		}
		if n := len(s.NextRuns()); n != len(valid.CronJobs) {
			t.Errorf("%d jobs scheduled, want %d", n, len(valid.CronJobs))
		}
	})
}

// Property 26 is the runtime's (agent_begin and agent_stop fire around
// every event); this side of it is that every hook defined in agents.md is
// exposed by the scheduler after Apply, and no other.
func TestPropertyHooksExposed(t *testing.T) {
	t.Parallel()
	forEachSeed(t, func(t *testing.T, r *rand.Rand) {
		a := randAgents(r)
		text, _ := renderAgents(r, a)
		parsed, problems := ParseAgents(text)
		if len(problems) > 0 {
			t.Fatalf("problems:\n%s", problemList(problems))
		}
		s := idleScheduler(t)
		if err := s.Apply(Config{Agents: parsed}); err != nil {
			t.Fatal(err)
		}
		for _, h := range HookNames {
			if got, want := s.Hook(h), a.Hooks[h]; got != want {
				t.Errorf("Hook(%s) = %q, want %q", h, got, want)
			}
		}
		for _, w := range a.Webhooks {
			if got, ok := s.Webhook(w.Name); !ok || got != w {
				t.Errorf("Webhook(%q) = %+v, %v; want %+v", w.Name, got, ok, w)
			}
		}
	})
}

// idleScheduler returns a scheduler whose timers never start; it is shut
// down when the test ends.
func idleScheduler(t *testing.T) *Scheduler {
	t.Helper()
	s, err := New(Options{Enqueue: func(queue.Event) (queue.Receipt, error) { return queue.Receipt{}, nil }, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := s.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return s
}
