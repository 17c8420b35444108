package main

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentgateway/gateway/backends"
)

func ms(v ...int) []time.Duration {
	var out []time.Duration
	for _, n := range v {
		out = append(out, time.Duration(n)*time.Millisecond)
	}
	return out
}

// benchRows are a measured, a skipped and a failed backend.
func benchRows() []backendWarm {
	return []backendWarm{
		{Name: "gemini", Version: "0.61.0", Mode: "ACP: gemini --acp", ColdFirst: ms(1900, 1800, 2000), WarmFirst: ms(6, 5, 8),
			ColdTurn: ms(2000, 1950, 2100), WarmTurn: ms(8, 7, 9), ColdKind: backends.EventText, WarmKind: backends.EventThinking},
		{Name: "pi", Skipped: "no pi CLI at .tools/pi/node_modules/.bin/pi (set PI_BIN, or run make clis)"},
		{Name: "codex", Version: "0.169.0", Mode: "codex app-server", Failed: "warm: turn 2: exit status 1 | see log\nline two"},
	}
}

func TestBackendsMarkdownHasOneRowPerBackend(t *testing.T) {
	t.Parallel()
	got := backendsMarkdown(benchRows())
	table := got[4:9]
	want := []string{
		"| backend | CLI | warm mode | first output cold | first output warm | sooner | whole turn cold | whole turn warm | sooner |",
		"|---|---|---|---|---|---|---|---|---|",
		"| gemini | 0.61.0 | ACP: gemini --acp | 1.9s (text) | 6ms (thinking) | 316.7x | 2s | 8ms | 250.0x |",
		"| pi | - | - | skipped: no pi CLI at .tools/pi/node_modules/.bin/pi (set PI_BIN, or run make clis) | | | | | |",
		`| codex | 0.169.0 | codex app-server | failed: warm: turn 2: exit status 1 \| see log line two | | | | | |`,
	}
	if diff := cmp.Diff(want, table); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
	if got[0] != "## Cold vs warm per backend" || got[len(got)-1] != "" {
		t.Errorf("section = %q ... %q, want its heading first and a blank line last", got[0], got[len(got)-1])
	}
}

func TestBackendsLines(t *testing.T) {
	t.Parallel()
	want := []string{
		"gemini cold vs warm: first output cold 1.9s, warm 6ms: 316.7x sooner; whole turn cold 2s, warm 8ms: 250.0x (medians of 3; first event text cold, thinking warm; gemini 0.61.0)",
		"pi cold vs warm: skipped: no pi CLI at .tools/pi/node_modules/.bin/pi (set PI_BIN, or run make clis)",
		"codex cold vs warm: FAILED: warm: turn 2: exit status 1 | see log\nline two",
	}
	if diff := cmp.Diff(want, backendsLines(benchRows())); diff != "" {
		t.Errorf("backendsLines (-want +got):\n%s", diff)
	}
}

func TestVersionIn(t *testing.T) {
	t.Parallel()
	for out, want := range map[string]string{
		"codex-cli 0.169.0\n":     "0.169.0",
		"2.1.330 (Claude Code)\n": "2.1.330",
		"0.73.1":                  "0.73.1",
		"\n1.18.33\nmore\n":       "1.18.33",
		"":                        "unknown",
		"no version here":         "unknown",
	} {
		if got := versionIn(out); got != want {
			t.Errorf("versionIn(%q) = %q, want %q", out, got, want)
		}
	}
}

func TestBackendWithoutCLIIsSkipped(t *testing.T) {
	t.Setenv("OPENCODE_BIN", t.TempDir()+"/no-such-opencode")
	r := measureBackend(cliBench{name: "opencode", setup: opencodeBenchSetup})
	if r.Skipped == "" || r.Failed != "" {
		t.Fatalf("measureBackend = %+v, want a skip", r)
	}
	if !strings.HasPrefix(r.Skipped, "no opencode CLI at ") || !strings.HasSuffix(r.Skipped, "(set OPENCODE_BIN, or run make clis)") {
		t.Errorf("Skipped = %q", r.Skipped)
	}
}
