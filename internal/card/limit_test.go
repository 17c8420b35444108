package card

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestUntil(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, "under a minute"},
		{-time.Hour, "under a minute"},
		{59 * time.Second, "under a minute"},
		{time.Minute, "1m"},
		{61 * time.Second, "2m"},
		{72 * time.Minute, "1h 12m"},
		{71*time.Minute + time.Second, "1h 12m"},
		{5 * time.Hour, "5h 0m"},
		{51*time.Hour + 30*time.Minute, "2d 3h"},
	}
	for _, tt := range tests {
		if got := Until(tt.d); got != tt.want {
			t.Errorf("Until(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

func TestLimitLines(t *testing.T) {
	now := time.Date(2026, 11, 27, 13, 48, 0, 0, time.UTC)
	reset := now.Add(72 * time.Minute)
	tests := []struct {
		name, got, want string
	}{
		{"own", LimitHeader(reset, true), "⏸️ **Usage limit reached**; resumes at <t:1795791600:t> (<t:1795791600:R>)"},
		{"behind", LimitHeader(reset, false), "⏸️ **Waiting behind the usage limit**; resumes at <t:1795791600:t> (<t:1795791600:R>)"},
		{"cancelled", LimitCancelled(reset, ""), "🛑 Cancelled while waiting for the usage limit (it resets at <t:1795791600:t>); this prompt will not run."},
		{"status", LimitStatus(reset, reset.Sub(now), 2), "Usage limit reached; resumes at <t:1795791600:t> (in 1h 12m); 2 prompts wait for it"},
		{"status one", LimitStatus(reset, reset.Sub(now), 1), "Usage limit reached; resumes at <t:1795791600:t> (in 1h 12m); 1 prompt waits for it"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s:\n got %q\nwant %q", tt.name, tt.got, tt.want)
		}
	}
}

// The waiting card fits Discord's limits and pings nobody, whatever the
// canceller's name.
func TestLimitCardWithinLimits(t *testing.T) {
	now := time.Date(2026, 11, 27, 13, 48, 0, 0, time.UTC)
	for _, d := range []time.Duration{0, time.Minute, 7 * 24 * time.Hour} {
		text := Render(State{Header: LimitHeader(now.Add(d), true), Notice: LimitNote, Tools: []Tool{{Name: "Read", Summary: "a.go"}}})
		if n := utf8.RuneCountInString(text); n > Limit || !strings.Contains(text, "Usage limit reached") || !strings.Contains(text, LimitNote) {
			t.Errorf("card (%d characters):\n%s", n, text)
		}
	}
	if s := LimitCancelled(now, "@everyone"); strings.Contains(s, "@everyone") {
		t.Errorf("a mention survives: %q", s)
	}
}
