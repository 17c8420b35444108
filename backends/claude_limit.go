package backends

import (
	"encoding/json"
	"regexp"
	"strconv"
	"sync"
	"time"
)

// claudeLimit is a usage limit claude reported: when it resets and which
// window it is. The zero value is no limit.
//
// claude 2.1.330 on a subscription login (recorded in
// testdata/claude/limits/usage_limit.jsonl) reports a refused request
// three times: a rate_limit_event line whose rate_limit_info has
// status "rejected", resetsAt (unix seconds) and rateLimitType; the
// synthetic assistant line's api_error_params.rate_limit_info; and a
// result with api_error "usage_limit_reached" and the text "You've hit
// your 5-hour limit · resets 8:34am (UTC)". Versions before 2.x ended
// the result text with "Claude AI usage limit reached|<unix seconds>".
// With an API key the same 429 is retried like any other and no reset
// time is reported.
type claudeLimit struct {
	resetAt time.Time
	window  string
}

// claudeLimitInfo is rate_limit_info.
type claudeLimitInfo struct {
	Status        string          `json:"status"`
	ResetsAt      json.RawMessage `json:"resetsAt"`
	RateLimitType string          `json:"rateLimitType"`
}

// note reads a rate_limit_info object. Only a refusal counts: claude
// reports the windows of allowed requests too ("allowed",
// "allowed_warning"), and those hold nothing back.
func (c *claudeLimit) note(raw json.RawMessage) {
	var info claudeLimitInfo
	if isJSONNull(raw) || unmarshalLenient(raw, &info) != nil || info.Status != "rejected" {
		return
	}
	c.set(unixSeconds(jsonInt(info.ResetsAt)), info.RateLimitType)
}

// noteParams reads api_error_params, which carries rate_limit_info.
func (c *claudeLimit) noteParams(raw json.RawMessage) {
	var params struct {
		RateLimitInfo json.RawMessage `json:"rate_limit_info"`
	}
	if isJSONNull(raw) || unmarshalLenient(raw, &params) != nil {
		return
	}
	c.note(params.RateLimitInfo)
}

// noteText reads the reset time from the result text of older claude
// versions, "Claude AI usage limit reached|1700000000".
func (c *claudeLimit) noteText(text string) {
	m := legacyUsageLimit().FindStringSubmatch(text)
	if m == nil {
		return
	}
	secs, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return
	}
	c.set(unixSeconds(secs), "")
}

// set keeps the latest reset seen: a later window outranks an earlier one
// (the request stays refused until both have passed).
func (c *claudeLimit) set(at time.Time, window string) {
	if at.IsZero() || !at.After(c.resetAt) {
		return
	}
	c.resetAt = at
	if window != "" {
		c.window = window
	}
}

// unixSeconds is a plausible reset time (after 2001 and before 2286), or
// the zero time: a millisecond value or garbage is not taken for a date
// centuries away.
func unixSeconds(secs int64) time.Time {
	if secs < 1e9 || secs >= 1e10 {
		return time.Time{}
	}
	return time.Unix(secs, 0).UTC()
}

var legacyUsageLimit = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)usage limit reached\|([0-9]{9,11})\b`)
})
