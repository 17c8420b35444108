package card

import (
	"testing"
	"time"
)

func TestReceiptShowsTheContextMeter(t *testing.T) {
	t.Parallel()
	base := Receipt{Phase: Finished, Elapsed: 12 * time.Second, CostUSD: 0.0123}
	for _, tc := range []struct {
		percent int
		want    string
	}{
		{0, "✅ Done in 12s · $0.0123"},
		{62, "✅ Done in 12s · $0.0123 · context 62%"},
		{79, "✅ Done in 12s · $0.0123 · context 79%"},
		{84, "✅ Done in 12s · $0.0123 · context 84% — /compact to summarise"},
	} {
		r := base
		r.ContextPercent = tc.percent
		if got := r.String(); got != tc.want {
			t.Errorf("receipt at %d%% = %q, want %q", tc.percent, got, tc.want)
		}
	}
}
