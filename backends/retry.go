package backends

import "fmt"

// RetryStatus describes an EventRetry in one short line for a status
// display: what is being retried, which attempt, and why, e.g.
// "retrying the model API (attempt 2 of 10): HTTP 529 overloaded". It is
// built from the event's Kind, Status and attempt numbers only, never
// from CLI output, so it is safe to show. It is "" for other events.
func (e Event) RetryStatus() string {
	if e.Kind != EventRetry {
		return ""
	}
	s := "retrying the model API"
	if e.Err != nil && e.Err.Kind == KindCrashed {
		s = "retrying on a fresh agent process"
	}
	switch {
	case e.Attempt > 0 && e.MaxAttempts > 0:
		s += fmt.Sprintf(" (attempt %d of %d)", e.Attempt, e.MaxAttempts)
	case e.Attempt > 0:
		s += fmt.Sprintf(" (attempt %d)", e.Attempt)
	}
	if e.Err != nil {
		if why := failureWords(e.Err.Kind, e.Err.Status); why != "" {
			s += ": " + why
		}
	}
	return s
}

// failureWords says in a few words why a model API call failed: "no
// response" when no HTTP status came back (claude's retry lines say no
// more than that: connection refused, DNS and time-outs look alike),
// else the status and what it means ("HTTP 529 overloaded").
func failureWords(kind ErrorKind, status int) string {
	var words string
	switch kind {
	case KindUnreachable:
		return "no response"
	case KindCrashed:
		return "the agent's process stopped responding"
	case KindAuth:
		words = "authentication failed"
	case KindRateLimit:
		words = "rate limited"
	case KindOverloaded:
		words = "overloaded"
	case KindAPI:
		words = "server error"
	case KindInvalid:
		words = "request refused"
	case KindTimeout:
		words = "timed out"
	}
	switch {
	case status == 0:
		return words
	case words == "":
		return fmt.Sprintf("HTTP %d", status)
	}
	return fmt.Sprintf("HTTP %d %s", status, words)
}
