package main

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestFootprintLinesMarkEachBudget(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		f    footprint
		want []string
	}{
		{"within", footprint{BinaryBytes: 10 << 20, Modules: 48, Start: []time.Duration{8 * time.Millisecond}, Idle10KB: []int{11 * 1024}, Split: map[string]int{"RssAnon": 4096, "RssFile": 7168},
			IdleTLSKB: []int{14 * 1024}, SplitTLS: map[string]int{"RssAnon": 6144, "RssFile": 8192}}, []string{
			"footprint: stripped binary 10.0 MB (budget 12 MB) OK",
			"footprint: modules 48 (budget 60) OK",
			"footprint: start to READY 8ms",
			"footprint: idle RSS after 10 s 11.0 MB (budget 12 MB) OK: anonymous 4.0 MB, file-backed 7.0 MB",
			"footprint: idle RSS over TLS after 10 s 14.0 MB (budget 15 MB) OK: anonymous 6.0 MB, file-backed 8.0 MB",
		}},
		{"over", footprint{BinaryBytes: 16 << 20, Modules: 61, Start: []time.Duration{8 * time.Millisecond}, Idle10KB: []int{13 * 1024}, Split: map[string]int{"RssAnon": 5120, "RssFile": 8192},
			IdleTLSKB: []int{16 * 1024}, SplitTLS: map[string]int{"RssAnon": 7168, "RssFile": 9216}}, []string{
			"footprint: stripped binary 16.0 MB (budget 12 MB) OVER BUDGET",
			"footprint: modules 61 (budget 60) OVER BUDGET",
			"footprint: start to READY 8ms",
			"footprint: idle RSS after 10 s 13.0 MB (budget 12 MB) OVER BUDGET: anonymous 5.0 MB, file-backed 8.0 MB",
			"footprint: idle RSS over TLS after 10 s 16.0 MB (budget 15 MB) OVER BUDGET: anonymous 7.0 MB, file-backed 9.0 MB",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, footprintLines(tt.f)); diff != "" {
				t.Errorf("footprintLines (-want +got):\n%s", diff)
			}
		})
	}
}
