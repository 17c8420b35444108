package backends

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The retries claude printed against an unreachable or failing model API
// read, on a status line, as what is retried, which attempt and why.
func TestClaudeRetryStatusFromRecordings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file string
		want []string // the first two retries' statuses
	}{
		{"unreachable_full.jsonl", []string{
			"retrying the model API (attempt 1 of 10): no response",
			"retrying the model API (attempt 2 of 10): no response",
		}},
		{"server_error_retry.jsonl", []string{
			"retrying the model API (attempt 1 of 10): HTTP 500 server error",
			"retrying the model API (attempt 2 of 10): HTTP 500 server error",
		}},
		{"overloaded_retry.jsonl", []string{
			"retrying the model API (attempt 1 of 10): HTTP 529 overloaded",
			"retrying the model API (attempt 2 of 10): HTTP 529 overloaded",
		}},
		{"auth_retry.jsonl", []string{
			"retrying the model API (attempt 1 of 10): HTTP 401 authentication failed",
			"retrying the model API (attempt 2 of 10): HTTP 401 authentication failed",
		}},
		{"limits/rate_limit_retry.jsonl", []string{
			"retrying the model API (attempt 1 of 2): HTTP 429 rate limited",
			"retrying the model API (attempt 2 of 2): HTTP 429 rate limited",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			stream, err := os.ReadFile(filepath.Join(claudeTestdata, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			events, _, _, _ := parseAll(t, stream)
			var got []string
			for _, e := range events {
				if s := e.RetryStatus(); s != "" {
					got = append(got, s)
				}
			}
			if len(got) > 2 {
				got = got[:2]
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("retry statuses (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRetryStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ev   Event
		want string
	}{
		{"not a retry", Event{Kind: EventText, Text: "hi", Attempt: 2, MaxAttempts: 3}, ""},
		{"no attempt numbers", Event{Kind: EventRetry, Err: &Error{Kind: KindAPI, Message: "stream disconnected"}},
			"retrying the model API: server error"},
		{"no maximum", Event{Kind: EventRetry, Attempt: 3, Err: &Error{Kind: KindUnreachable}},
			"retrying the model API (attempt 3): no response"},
		{"an unnamed status", Event{Kind: EventRetry, Attempt: 1, MaxAttempts: 5, Err: &Error{Kind: KindExecution, Status: 418}},
			"retrying the model API (attempt 1 of 5): HTTP 418"},
		{"no error", Event{Kind: EventRetry, Attempt: 1, MaxAttempts: 2}, "retrying the model API (attempt 1 of 2)"},
		{"the process, not the API", Event{Kind: EventRetry, Attempt: 1, MaxAttempts: 1,
			Err: &Error{Kind: KindCrashed, Message: "the agent's process stopped responding; retrying on a fresh one"}},
			"retrying on a fresh agent process (attempt 1 of 1): the agent's process stopped responding"},
		{"CLI output is not shown", Event{Kind: EventRetry, Attempt: 1, MaxAttempts: 10,
			Err: &Error{Kind: KindAuth, Status: 401, Message: "key sk-ant-SECRET refused"}},
			"retrying the model API (attempt 1 of 10): HTTP 401 authentication failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.ev.RetryStatus(); got != tt.want {
				t.Errorf("RetryStatus() = %q, want %q", got, tt.want)
			}
		})
	}
}
