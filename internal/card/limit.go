package card

import (
	"fmt"
	"time"
)

// LimitNote is the card's second line while a prompt waits for a usage
// limit to reset.
const LimitNote = "It runs by itself then. Cancel drops it."

// LimitHeader is the first line of the card of a prompt that waits for
// the login's usage limit to reset: its own run met the limit (own), or
// it waits behind a limit another prompt met. Both times are Discord
// timestamps, shown in each reader's own time zone, and the countdown
// ("in 2 hours") is kept current by the reader's client: the card is not
// edited while it waits, which over hours would run into Discord's limit
// on edits of messages older than an hour.
func LimitHeader(resetAt time.Time, own bool) string {
	what := "Waiting behind the usage limit"
	if own {
		what = "Usage limit reached"
	}
	return fmt.Sprintf("⏸️ **%s**; resumes at %s (%s)", what, Clock(resetAt), Relative(resetAt))
}

// LimitCancelled is the receipt of a prompt cancelled while it waited for
// a usage limit to reset.
func LimitCancelled(resetAt time.Time, by string) string {
	s := "🛑 Cancelled while waiting for the usage limit (it resets at " + Clock(resetAt) + "); this prompt will not run"
	if by != "" {
		s += ". Cancelled by " + oneLine(by, 40)
	}
	return s + "."
}

// LimitStatus is the one line /status shows about the login's usage
// limit: when it resets and how many prompts wait for it.
func LimitStatus(resetAt time.Time, left time.Duration, waiting int) string {
	s := fmt.Sprintf("Usage limit reached; resumes at %s (in %s)", Clock(resetAt), Until(left))
	switch waiting {
	case 0:
	case 1:
		s += "; 1 prompt waits for it"
	default:
		s += fmt.Sprintf("; %d prompts wait for it", waiting)
	}
	return s
}

// Clock is t as a Discord timestamp of the hour and minute (<t:unix:t>),
// which each reader's client shows in their own time zone.
func Clock(t time.Time) string {
	return fmt.Sprintf("<t:%d:t>", t.Unix())
}

// Relative is t as a Discord timestamp relative to now (<t:unix:R>):
// "in 2 hours", "in 5 minutes", kept current by the reader's client.
func Relative(t time.Time) string {
	return fmt.Sprintf("<t:%d:R>", t.Unix())
}

// Until says how long a wait has left, rounded up to the minute: "1h 12m",
// "45m", "2d 3h", or "under a minute".
func Until(d time.Duration) string {
	if d < time.Minute {
		return "under a minute"
	}
	m := int((d + time.Minute - 1) / time.Minute) // whole minutes, rounded up
	days, hours, mins := m/(24*60), m/60%24, m%60
	switch {
	case days > 0:
		return fmt.Sprintf("%dd %dh", days, hours)
	case hours > 0:
		return fmt.Sprintf("%dh %dm", hours, mins)
	}
	return fmt.Sprintf("%dm", mins)
}
