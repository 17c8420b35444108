package main

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentgateway/gateway/backends"
)

func TestWarmLinesMarkTheBudget(t *testing.T) {
	t.Parallel()
	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, n := range v {
			out = append(out, time.Duration(n)*time.Millisecond)
		}
		return out
	}
	tests := []struct {
		name string
		r    warmResult
		want []string
		row  string
	}{
		{"within", warmResult{Version: "2.1.330", ColdFirst: ms(300, 310, 290), WarmFirst: ms(9, 8, 10), ColdTurn: ms(400, 380, 390),
			WarmTurn: ms(22, 21, 23), ColdKind: backends.EventInit, WarmKind: backends.EventInit, IdleRSSBytes: 250 << 20, AnonKB: 150 * 1024, FileKB: 100 * 1024}, []string{
			"claude cold vs warm: first output cold 300ms, warm 9ms (medians of 3): 33.3x sooner (budget 5x) OK",
			"claude cold vs warm: whole turn cold 390ms, warm 22ms (medians); first event init cold, init warm",
			"claude cold vs warm: one idle warm process 250.0 MB RSS: anonymous 150.0 MB, file-backed 100.0 MB (claude 2.1.330)",
		}, "| claude warm first output >= 5x sooner than cold | cold 300ms, warm 9ms (medians): 33.3x | PASS |"},
		{"over", warmResult{Version: "2.1.330", ColdFirst: ms(300), WarmFirst: ms(100), ColdTurn: ms(400), WarmTurn: ms(200),
			ColdKind: backends.EventInit, WarmKind: backends.EventText, IdleRSSBytes: 100 << 20, AnonKB: 60 * 1024, FileKB: 40 * 1024}, []string{
			"claude cold vs warm: first output cold 300ms, warm 100ms (medians of 1): 3.0x sooner (budget 5x) OVER BUDGET",
			"claude cold vs warm: whole turn cold 400ms, warm 200ms (medians); first event init cold, text warm",
			"claude cold vs warm: one idle warm process 100.0 MB RSS: anonymous 60.0 MB, file-backed 40.0 MB (claude 2.1.330)",
		}, "| claude warm first output >= 5x sooner than cold | cold 300ms, warm 100ms (medians): 3.0x | FAIL |"},
		{"skipped", warmResult{Skipped: "no claude CLI at x"}, []string{
			"claude cold vs warm: skipped: no claude CLI at x",
		}, "| claude warm first output >= 5x sooner than cold | not measured: no claude CLI at x | - |"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, warmLines(tt.r)); diff != "" {
				t.Errorf("warmLines (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.row, warmBudgetRow(tt.r)); diff != "" {
				t.Errorf("warmBudgetRow (-want +got):\n%s", diff)
			}
		})
	}
}

func TestClaudeBinaryMissingIsSkipped(t *testing.T) {
	t.Setenv("CLAUDE_BIN", t.TempDir()+"/no-such-claude")
	r, err := runWarm()
	if err != nil || r.Skipped == "" {
		t.Fatalf("runWarm() = %+v, %v; want a skip", r, err)
	}
}

func TestWarmFitMarkdown(t *testing.T) {
	t.Parallel()
	proc := fitProc{PSS: 125 << 20, PSSAnon: 115 << 20, PSSFile: 10 << 20, RSS: 192 << 20, RSSAnon: 115 << 20, RSSFile: 77 << 20}
	r := warmFitResult{Version: "2.1.330", CapMiB: 1024, Started: 9, Kept: 8, Evicted: true}
	for range 8 {
		r.Procs = append(r.Procs, proc)
	}
	want := []string{"## Warm claude processes per GiB", "",
		"The real claude CLI (2.1.330) against the in-process fake Anthropic API, one channel per process, one turn each, through the claude adapter's pool with MAX_WARM_MEMORY_MB=1024, until the pool stopped one: 8 stayed warm of 9 started. " +
			"Memory is read once the stopped process group was gone; PSS from /proc/<pid>/smaps_rollup, RSS from /proc/<pid>/status.",
		"",
		"| kept processes | PSS (what the cap counts) | of it anonymous | of it file-backed | RSS | of it anonymous | of it file-backed |",
		"|---|---|---|---|---|---|---|",
		"| all 8, summed | 1000.0 MB | 920.0 MB | 80.0 MB | 1536.0 MB | 920.0 MB | 616.0 MB |",
		"| one, on average | 125.0 MB | 115.0 MB | 10.0 MB | 192.0 MB | 115.0 MB | 77.0 MB |",
		"",
		"RSS counts the file-backed pages (claude's binary, shared by every warm process) once per process: the kept processes' summed RSS is 1536.0 MB, 1.5x their summed PSS; a cap on summed RSS would have held 5 of them.",
		"",
	}
	if diff := cmp.Diff(want, warmFitMarkdown(r)); diff != "" {
		t.Errorf("warmFitMarkdown (-want +got):\n%s", diff)
	}
	wantLines := []string{
		"claude warm per GiB: 8 kept of 9 started under MAX_WARM_MEMORY_MB=1024 (evicted: true); summed PSS 1000.0 MB, summed RSS 1536.0 MB",
		"claude warm per GiB: one process on average PSS 125.0 MB (anonymous 115.0, file-backed 10.0), RSS 192.0 MB (anonymous 115.0, file-backed 77.0) (claude 2.1.330)",
	}
	if diff := cmp.Diff(wantLines, warmFitLines(r)); diff != "" {
		t.Errorf("warmFitLines (-want +got):\n%s", diff)
	}
}

func TestWarmFitMarkdownSaysWhatItDidNotMeasure(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		r    warmFitResult
		want string
	}{
		{"no claude", warmFitResult{Skipped: "no claude CLI at x"}, "Not measured: no claude CLI at x."},
		{"no eviction", warmFitResult{Version: "v", CapMiB: 1024, Started: 24, Kept: 24, Procs: []fitProc{{PSS: 1, RSS: 1}}}, "at least 24 (the pool had not stopped one after 24 channels)"},
		{"smaps_rollup unreadable", warmFitResult{Version: "v", CapMiB: 1024, Started: 2, Kept: 1, Evicted: true, RSSOnly: 1, Procs: []fitProc{{PSS: 1, RSS: 1}}}, "1 processes' smaps_rollup could not be read"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := strings.Join(warmFitMarkdown(tt.r), "\n"); !strings.Contains(got, tt.want) {
				t.Errorf("warmFitMarkdown:\n%s\nwant it to contain %q", got, tt.want)
			}
		})
	}
}

func TestWarmFitMissingClaudeIsSkipped(t *testing.T) {
	t.Setenv("CLAUDE_BIN", t.TempDir()+"/no-such-claude")
	r, err := runWarmFit()
	if err != nil || r.Skipped == "" {
		t.Fatalf("runWarmFit() = %+v, %v; want a skip", r, err)
	}
}

func TestStatPgrp(t *testing.T) {
	t.Parallel()
	tests := []struct {
		stat string
		pgrp int
		live bool
	}{
		{"12 (claude) S 1 12 12 0", 12, true},
		{"13 (a (b) c) R 12 12 12 0", 12, true},
		{"14 (claude) Z 1 12 12 0", 0, false},
		{"garbage", 0, false},
	}
	for _, tt := range tests {
		pgrp, live := statPgrp([]byte(tt.stat))
		if pgrp != tt.pgrp || live != tt.live {
			t.Errorf("statPgrp(%q) = %d, %v; want %d, %v", tt.stat, pgrp, live, tt.pgrp, tt.live)
		}
	}
}
