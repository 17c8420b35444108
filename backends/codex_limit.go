package backends

import (
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// codexUsageReset reads when a usage limit ends from codex's message for
// it, and the zero time when the message gives none. codex 0.169.0
// (recorded in testdata/codex/limits) says "You’ve hit your usage limit.
// Upgrade to Pro (…) or try again at 8:50 AM." for a reset later the
// same day and "… try again at Nov 30th, 2026 10:38 AM." for a later day,
// in the local time of codex's process (loc: the gateway's, which codex
// inherits), to the minute: the reset is taken a minute later, so that
// the prompt does not run again before it. Older versions said "Try
// again in 3 hours 5 minutes."
func codexUsageReset(msg string, now time.Time, loc *time.Location) time.Time {
	if m := codexTryAgainAt().FindStringSubmatch(msg); m != nil {
		return codexClock(m[1], now, loc)
	}
	if m := codexTryAgainIn().FindStringSubmatch(msg); m != nil {
		return codexIn(m[1], now)
	}
	return time.Time{}
}

var (
	codexTryAgainAt = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?i)try again at ((?:[A-Z][a-z]{2} [0-9]{1,2}(?:st|nd|rd|th)?, [0-9]{4} )?[0-9]{1,2}:[0-9]{2} ?[AP]M)`)
	})
	codexTryAgainIn = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?i)try again in ((?:[0-9]+ (?:days?|hours?|minutes?|seconds?)[ ,]*(?:and )?)+)`)
	})
	codexOrdinal = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`([0-9])(?:st|nd|rd|th),`) })
	codexSpan    = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`([0-9]+) (day|hour|minute|second)`)
	})
)

// codexClock reads "8:50 AM" (today, or tomorrow when that has passed) or
// "Nov 30th, 2026 10:38 AM" in loc.
func codexClock(s string, now time.Time, loc *time.Location) time.Time {
	s = strings.NewReplacer(" AM", "AM", " PM", "PM", " am", "AM", " pm", "PM").Replace(s)
	if strings.Contains(s, ",") {
		t, err := time.ParseInLocation("Jan 2, 2006 3:04PM", codexOrdinal().ReplaceAllString(s, "$1,"), loc)
		if err != nil {
			return time.Time{}
		}
		return t.Add(time.Minute)
	}
	clock, err := time.ParseInLocation("3:04PM", strings.ToUpper(s), loc)
	if err != nil {
		return time.Time{}
	}
	local := now.In(loc)
	t := time.Date(local.Year(), local.Month(), local.Day(), clock.Hour(), clock.Minute(), 0, 0, loc).Add(time.Minute)
	if !t.After(now) {
		t = t.AddDate(0, 0, 1)
	}
	return t
}

// codexIn reads "3 hours 5 minutes" from now.
func codexIn(s string, now time.Time) time.Time {
	var d time.Duration
	for _, m := range codexSpan().FindAllStringSubmatch(strings.ToLower(s), -1) {
		n, err := strconv.Atoi(m[1])
		if err != nil || n > 1000 {
			return time.Time{}
		}
		unit := map[string]time.Duration{"day": 24 * time.Hour, "hour": time.Hour, "minute": time.Minute, "second": time.Second}[m[2]]
		d += time.Duration(n) * unit
	}
	if d <= 0 || d > 400*24*time.Hour {
		return time.Time{}
	}
	return now.Add(d).Truncate(time.Second).Add(time.Second)
}
