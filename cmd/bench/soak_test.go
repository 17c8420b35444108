package main

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// samples makes one sample a minute over len(rss) minutes.
func samples(rss, goroutines []int) []soakSample {
	var out []soakSample
	for i := range rss {
		out = append(out, soakSample{Elapsed: time.Duration(i+1) * time.Minute, RSSKB: rss[i], AnonKB: rss[i] / 4, Goroutines: goroutines[i]})
	}
	return out
}

func TestSoakFlatComparesTheLastQuarterWithTheSecond(t *testing.T) {
	t.Parallel()
	flatG := []int{30, 30, 31, 30, 30, 32, 30, 31}
	tests := []struct {
		name                string
		rss, goroutines     []int
		wantRSS, wantGorout bool
	}{
		// The first quarter is the warm-up: growth there is not a leak.
		{"warm-up growth then flat", []int{10000, 14000, 15000, 15100, 15000, 15200, 15300, 16400}, flatG, true, true},
		{"rss keeps growing", []int{10000, 11000, 12000, 13000, 14000, 15000, 16000, 17000}, flatG, false, true},
		{"goroutines keep growing", []int{15000, 15000, 15000, 15000, 15000, 15000, 15000, 15000}, []int{30, 40, 50, 60, 70, 80, 90, 100}, true, false},
		// A handful of goroutines more (turns in flight) is not a leak.
		{"goroutines jitter", []int{15000, 15000, 15000, 15000, 15000, 15000, 15000, 15000}, []int{20, 20, 20, 21, 20, 20, 24, 25}, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// The last sample comes a little after the end.
			r := soakResult{Duration: 8*time.Minute - time.Second, Samples: samples(tt.rss, tt.goroutines)}
			if got := r.rssFlat(); got != tt.wantRSS {
				t.Errorf("rssFlat() = %v, want %v", got, tt.wantRSS)
			}
			if got := r.goroutinesFlat(); got != tt.wantGorout {
				t.Errorf("goroutinesFlat() = %v, want %v", got, tt.wantGorout)
			}
		})
	}
}

func TestSoakBoundsTheMemoryOnlyWhenShorterThanItsFill(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]soakBounds{
		5 * time.Minute: {InboxMaxEvents: 1000, HistoryMessages: 5},
		8 * time.Minute: {InboxMaxEvents: 1600, HistoryMessages: 8},
		time.Hour:       {},
		5 * time.Second: {InboxMaxEvents: 100, HistoryMessages: 1},
	} {
		if got := soakBoundsFor(d); got != want {
			t.Errorf("soakBoundsFor(%v) = %+v, want %+v", d, got, want)
		}
	}
}

func TestSoakLinesSayStartMiddleEndAndTheVerdict(t *testing.T) {
	t.Parallel()
	r := soakResult{
		Duration: 8 * time.Minute,
		Samples:  samples([]int{10240, 14336, 15360, 15360, 15360, 15360, 15360, 16384}, []int{30, 30, 31, 30, 30, 32, 30, 31}),
		Sent:     soakTraffic{Mentions: 900, Status: 50, Prompts: 50, Webhooks: 10},
		Replies:  1000,
		Bounds:   soakBoundsFor(8 * time.Minute),
	}
	want := []string{
		"soak: 8m0s, 1010 events (900 mentions over 200 channels, 50 /claude, 50 /status, 10 webhooks; 0 webhook errors), 1000 bot messages, INBOX_MAX_EVENTS=1600 HISTORY_MESSAGES=8",
		"soak: RSS start 10.0 MB, middle 15.0 MB, end 16.0 MB (anonymous 2.5, 3.8, 4.0 MB); goroutines start 30, middle 30, end 31",
		"soak: RSS flat (last quarter's max 16.0 MB within 10% of the second quarter's 15.0 MB) OK; goroutines flat (31 vs 31) OK",
	}
	if diff := cmp.Diff(want, soakLines(r)); diff != "" {
		t.Errorf("soakLines (-want +got):\n%s", diff)
	}
}
