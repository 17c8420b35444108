package backends

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestCodexUsageReset(t *testing.T) {
	utc := time.UTC
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skip("no time zone data:", err)
	}
	now := time.Date(2026, 11, 27, 7, 38, 21, 0, utc)
	const pro = "You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), visit https://chatgpt.com/settings/usage to purchase more credits or try again at "
	tests := []struct {
		name string
		msg  string
		loc  *time.Location
		want time.Time
	}{
		{"later today", pro + "8:50 AM.", utc, time.Date(2026, 11, 27, 8, 51, 0, 0, utc)},
		{"the clock passed: tomorrow", pro + "7:10 AM.", utc, time.Date(2026, 11, 28, 7, 11, 0, 0, utc)},
		{"another day", pro + "Nov 30th, 2026 10:38 AM.", utc, time.Date(2026, 11, 30, 10, 39, 0, 0, utc)},
		{"the 1st", pro + "Dec 1st, 2026 9:05 PM.", utc, time.Date(2026, 12, 1, 21, 6, 0, 0, utc)},
		{"codex's own time zone", pro + "3:50 AM.", ny, time.Date(2026, 11, 27, 3, 51, 0, 0, ny)},
		{"older wording", "You've hit your usage limit. Try again in 3 hours 5 minutes.", utc, now.Add(3*time.Hour + 5*time.Minute + time.Second)},
		{"no time", "You've hit your usage limit.", utc, time.Time{}},
		{"garbage clock", pro + "99:99 AM.", utc, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := codexUsageReset(tt.msg, now, tt.loc); !got.Equal(tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// The recorded turn of codex 0.169.0 refused for a usage limit
// (testdata/codex/limits/usage_limit.jsonl): a rate limit that resets a
// minute after the "8:52 AM" it names, local time.
func TestCodexParseUsageLimitRecorded(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "testdata", "codex", "limits", "usage_limit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var p CodexParser
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if _, err := p.Parse(sc.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
	_, err = p.Result()
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindRateLimit {
		t.Fatalf("err = %v, want a rate limit", err)
	}
	at, ok := ResetOf(err)
	if local := at.In(time.Local); !ok || local.Hour() != 8 || local.Minute() != 53 {
		t.Errorf("reset = %v, %t; want 8:53 local", at, ok)
	}
}

func FuzzCodexUsageReset(f *testing.F) {
	f.Add("try again at 8:50 AM.")
	f.Add("try again at Nov 30th, 2026 10:38 AM.")
	f.Add("Try again in 3 hours 5 minutes.")
	f.Add("try again in 99999999999999 days")
	now := time.Date(2026, 11, 27, 7, 38, 21, 0, time.UTC)
	f.Fuzz(func(t *testing.T, msg string) {
		got := codexUsageReset(msg, now, time.UTC)
		if !got.IsZero() && got.Before(now.Add(-366*24*time.Hour)) {
			t.Fatalf("%q: reset %v long before now", msg, got)
		}
	})
}
