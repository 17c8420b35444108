package main

import (
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
