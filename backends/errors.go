package backends

import (
	"errors"
	"fmt"
	"time"
)

// ErrorKind classifies a failed turn in words a user can act on.
type ErrorKind string

const (
	KindAuth         ErrorKind = "authentication_error"
	KindRateLimit    ErrorKind = "rate_limit_error"
	KindOverloaded   ErrorKind = "overloaded_error"
	KindAPI          ErrorKind = "api_error"
	KindInvalid      ErrorKind = "invalid_request_error"
	KindStaleSession ErrorKind = "stale_session"
	KindTimeout      ErrorKind = "timeout"
	KindCanceled     ErrorKind = "canceled"
	KindCrashed      ErrorKind = "cli_crashed"
	KindNotFound     ErrorKind = "cli_not_found"
	KindMaxTurns     ErrorKind = "max_turns"
	KindPermission   ErrorKind = "permission_error"
	KindExecution    ErrorKind = "execution_error"
	// KindUnreachable means the CLI could not connect to the model API at
	// all (connection refused, DNS, reset): no HTTP status came back.
	KindUnreachable ErrorKind = "api_unreachable"
)

// Sentinel errors for errors.Is; an *Error matches the sentinel of its Kind.
var (
	ErrStaleSession = &Error{Kind: KindStaleSession}
	ErrTimeout      = &Error{Kind: KindTimeout}
	ErrAuth         = &Error{Kind: KindAuth}
	ErrUnreachable  = &Error{Kind: KindUnreachable}
)

// Error is a failed turn. Message is meant for logs (it may hold CLI output);
// only Kind and Status are safe to show to a user as they are.
type Error struct {
	Kind ErrorKind
	// Status is the model API's HTTP status when the CLI reported one.
	Status int
	// Message is the CLI's own description, for logs.
	Message string
	// Stderr is the tail of the CLI's stderr, for logs.
	Stderr string
	// Err is the underlying cause, if any.
	Err error
	// ModelOutput is set when the model produced output before the
	// failure (text or a tool call; for claude any streamed message,
	// thinking included): a timeout after output is a long task, a
	// timeout without any is a model API that never answered.
	ModelOutput bool
	// ResetAt is when a usage or rate limit that refused the turn ends,
	// when the CLI said (Kind is KindRateLimit); zero when it did not.
	ResetAt time.Time
	// LimitWindow names the limit claude reported ("five_hour",
	// "seven_day", ...); empty when it did not say.
	LimitWindow string
}

func (e *Error) Error() string {
	s := string(e.Kind)
	if e.Status != 0 {
		s += fmt.Sprintf(" (HTTP %d)", e.Status)
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrStaleSession) match any *Error of that kind.
func (e *Error) Is(target error) bool {
	var t *Error
	if !errors.As(target, &t) {
		return false
	}
	return t.Message == "" && t.Status == 0 && t.Err == nil && !t.ModelOutput && t.ResetAt.IsZero() && t.Kind == e.Kind
}

// ResetOf returns when the usage or rate limit that failed err ends, and
// false when err is not such a limit or the CLI gave no time: only then
// is waiting for it and running the prompt again worth it.
func ResetOf(err error) (time.Time, bool) {
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindRateLimit || e.ResetAt.IsZero() {
		return time.Time{}, false
	}
	return e.ResetAt, true
}

// KindOf returns the kind of a backend error, or KindExecution for others.
func KindOf(err error) ErrorKind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindExecution
}
