package fakeapi

import (
	"net/http"
	"strconv"
	"time"
)

// Refused is the Kind of a conversation request the fake refused for a
// limit (RefuseUntil, RefuseRetryAfter); it takes no turn of the script.
const Refused Kind = "refused"

// Refusal is how the fake refuses conversation requests while a limit
// lasts.
type Refusal struct {
	// Reset is when a subscription's usage limit resets: the answer
	// carries the anthropic-ratelimit-unified-* headers that say so.
	// Zero for an API key's rate limit.
	Reset time.Time
	// RetryAfter, if set, is sent as the retry-after header.
	RetryAfter time.Duration
	// Message is the error's message.
	Message string
}

// Messages of the real API's 429s.
const (
	usageLimitMessage = "Number of requests has exceeded your rate limit. Please try again later."
	rateLimitMessage  = "Number of request tokens has exceeded your per-minute rate limit"
)

// RefuseUntil makes the fake answer every conversation request as the
// Messages API answers a subscription login (claude.ai OAuth) over its
// 5-hour usage limit, until Lift: HTTP 429, error type
// rate_limit_error, and the headers claude reads the reset from:
//
//	anthropic-ratelimit-unified-status: rejected
//	anthropic-ratelimit-unified-reset: <reset, unix seconds>
//	anthropic-ratelimit-unified-representative-claim: five_hour
//	anthropic-ratelimit-unified-5h-status: rejected, -5h-reset, -5h-utilization: 1.0
//	anthropic-ratelimit-unified-7d-status: allowed, -7d-reset, -7d-utilization
//	anthropic-ratelimit-unified-fallback: available
//	anthropic-ratelimit-unified-overage-status: rejected
//	anthropic-ratelimit-unified-overage-disabled-reason: org_level_disabled
//
// claude 2.1.330 logged in with a token (CLAUDE_CODE_OAUTH_TOKEN) does not
// retry this: it prints a rate_limit_event and fails the turn at once with
// "You've hit your 5-hour limit · resets <time>". With an API key it
// retries it like any 429 (testdata/claude/limits).
func (a *Anthropic) RefuseUntil(reset time.Time) {
	a.refuse(&Refusal{Reset: reset, Message: usageLimitMessage})
}

// RefuseRetryAfter makes the fake answer every conversation request with
// the API's plain rate limit, HTTP 429 rate_limit_error with retry-after,
// until Lift.
func (a *Anthropic) RefuseRetryAfter(after time.Duration) {
	a.refuse(&Refusal{RetryAfter: after, Message: rateLimitMessage})
}

// Lift ends RefuseUntil or RefuseRetryAfter: the script answers again.
func (a *Anthropic) Lift() { a.refuse(nil) }

func (a *Anthropic) refuse(r *Refusal) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.refusing = r
}

func (a *Anthropic) refusal() *Refusal {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.refusing
}

// write answers one request with the refusal.
func (r *Refusal) write(w http.ResponseWriter) {
	h := w.Header()
	if !r.Reset.IsZero() {
		reset := strconv.FormatInt(r.Reset.Unix(), 10)
		week := strconv.FormatInt(r.Reset.Add(3*24*time.Hour).Unix(), 10)
		for k, v := range map[string]string{
			"anthropic-ratelimit-unified-status":                  "rejected",
			"anthropic-ratelimit-unified-reset":                   reset,
			"anthropic-ratelimit-unified-representative-claim":    "five_hour",
			"anthropic-ratelimit-unified-5h-status":               "rejected",
			"anthropic-ratelimit-unified-5h-reset":                reset,
			"anthropic-ratelimit-unified-5h-utilization":          "1.0",
			"anthropic-ratelimit-unified-7d-status":               "allowed",
			"anthropic-ratelimit-unified-7d-reset":                week,
			"anthropic-ratelimit-unified-7d-utilization":          "0.42",
			"anthropic-ratelimit-unified-fallback":                "available",
			"anthropic-ratelimit-unified-overage-status":          "rejected",
			"anthropic-ratelimit-unified-overage-disabled-reason": "org_level_disabled",
		} {
			h.Set(k, v)
		}
	}
	if r.RetryAfter > 0 {
		h.Set("retry-after", strconv.Itoa(int((r.RetryAfter+time.Second-1)/time.Second)))
	}
	writeError(w, APIError{Status: http.StatusTooManyRequests, Type: "rate_limit_error", Message: r.Message})
}

// RefuseUntil makes the fake answer every conversation request as the
// Responses API answers a ChatGPT plan over its usage limit, until Lift:
// HTTP 429 with the error type usage_limit_reached, plan_type, resets_at
// (unix seconds) and resets_in_seconds. codex 0.169.0 does not retry it
// and fails the turn with "You’ve hit your usage limit. … or try again at
// <local time>." (testdata/codex/limits).
func (s *Responses) RefuseUntil(reset time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refusingUntil = reset
}

// Lift ends RefuseUntil: the script answers again.
func (s *Responses) Lift() { s.RefuseUntil(time.Time{}) }

func (s *Responses) refusal() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refusingUntil
}

// writeUsageLimitReached answers one request with the Responses API's
// usage limit.
func writeUsageLimitReached(w http.ResponseWriter, reset time.Time) {
	type detail struct {
		Type            string `json:"type"`
		Message         string `json:"message"`
		PlanType        string `json:"plan_type"`
		ResetsAt        int64  `json:"resets_at"`
		ResetsInSeconds int64  `json:"resets_in_seconds"`
	}
	in := int64(time.Until(reset).Seconds())
	writeJSON(w, http.StatusTooManyRequests, struct {
		Error detail `json:"error"`
	}{detail{"usage_limit_reached", "The usage limit has been reached", "plus", reset.Unix(), max(in, 0)}})
}
