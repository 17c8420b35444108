package schedule

import (
	"strings"
	"testing"
)

// checkFuzzProblems asserts what holds for any input: problems name the
// file and a line that exists, and carry a message.
func checkFuzzProblems(t *testing.T, file, text string, problems []Problem) {
	t.Helper()
	lines := strings.Count(text, "\n") + 1
	for _, p := range problems {
		if p.File != file || p.Line < 1 || p.Line > lines || p.Message == "" {
			t.Errorf("bad problem %+v for a %d-line input", p, lines)
		}
	}
}

func FuzzParseHeartbeats(f *testing.F) {
	for _, tt := range heartbeatTests {
		f.Add(tt.text)
	}
	f.Add("<!-- unclosed\n## a\n")
	f.Add("## a\nInterval: 60\nInstruction: x\n```\n")
	f.Fuzz(func(t *testing.T, text string) {
		checks, problems := ParseHeartbeats(text)
		checkFuzzProblems(t, HeartbeatFile, text, problems)
		seen := map[string]bool{}
		for _, h := range checks {
			if h.Name == "" || h.Instruction == "" || h.Interval < MinInterval || seen[h.Name] {
				t.Errorf("invalid check parsed: %+v", h)
			}
			seen[h.Name] = true
			if h.Channel != "" && checkChannel(h.Channel) != nil {
				t.Errorf("check %q has a bad channel %q", h.Name, h.Channel)
			}
		}
	})
}

func FuzzParseAgents(f *testing.F) {
	for _, tt := range agentsTests {
		f.Add(tt.text)
	}
	f.Add("## Cron Jobs\n### a\nCron: 0 0 31 2 *\nInstruction: x\n")
	f.Add("## Webhooks\n### w\nSecret-Env: X\nInstruction: {{payload}}\n<!--\n")
	f.Fuzz(func(t *testing.T, text string) {
		a, problems := ParseAgents(text)
		checkFuzzProblems(t, AgentsFile, text, problems)
		for _, j := range a.CronJobs {
			if j.Name == "" || j.Instruction == "" || checkCron(j.Cron) != nil {
				t.Errorf("invalid cron job parsed: %+v", j)
			}
		}
		for h, instr := range a.Hooks {
			if instr == "" || !containsHook(h) {
				t.Errorf("invalid hook parsed: %q: %q", h, instr)
			}
		}
		for _, w := range a.Webhooks {
			if !webhookRE().MatchString(w.Name) || !envNameRE().MatchString(w.SecretEnv) || w.Instruction == "" {
				t.Errorf("invalid webhook parsed: %+v", w)
			}
		}
	})
}

func containsHook(h Hook) bool {
	for _, x := range HookNames {
		if x == h {
			return true
		}
	}
	return false
}
