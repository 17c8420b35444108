package backends

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// claudeLimitTestdata holds the recorded claude 2.1.330 streams of refused
// requests (see testdata/claude/README.md, "Usage and rate limits").
const claudeLimitTestdata = "../testdata/claude/limits"

// recordedReset is the reset the fake answered usage_limit.jsonl with.
var recordedReset = time.Unix(1795769386, 0).UTC()

func TestClaudeParseLimitsRecorded(t *testing.T) {
	tests := []struct {
		file    string
		status  int
		resetAt time.Time
		window  string
	}{
		// A subscription login: claude gives up at once and says when.
		{file: "usage_limit.jsonl", status: 429, resetAt: recordedReset, window: "five_hour"},
		// An API key: claude retried the 429 itself (retry-after: 1) and
		// then failed without a time.
		{file: "rate_limit_retry.jsonl", status: 429},
		// retry-after: 3600 is over what claude waits for: no retry, no time.
		{file: "rate_limit_long.jsonl", status: 429},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			stream, err := os.ReadFile(filepath.Join(claudeLimitTestdata, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			_, _, err, bad := parseAll(t, stream)
			if bad != 0 {
				t.Errorf("%d lines rejected", bad)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v, want *Error", err)
			}
			got := limitSummary{e.Kind, e.Status, e.ResetAt, e.LimitWindow}
			want := limitSummary{KindRateLimit, tt.status, tt.resetAt, tt.window}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("limit (-want +got):\n%s", diff)
			}
			reset, ok := ResetOf(err)
			if ok != !tt.resetAt.IsZero() || !reset.Equal(tt.resetAt) {
				t.Errorf("ResetOf = %v, %t", reset, ok)
			}
		})
	}
}

type limitSummary struct {
	Kind    ErrorKind
	Status  int
	ResetAt time.Time
	Window  string
}

// Hand-written lines for what the recordings do not show: older wording,
// a warning that refuses nothing, odd values.
func TestClaudeParseLimitsHandWritten(t *testing.T) {
	const (
		resetSecs = "1795768465"
		later     = "1796027665"
	)
	handReset := time.Unix(1795768465, 0).UTC()
	result429 := `{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"api_error_type":"rate_limit_error","result":"You've hit your limit"}`
	event := func(status, resets, typ string) string {
		return `{"type":"rate_limit_event","rate_limit_info":{"status":"` + status + `","resetsAt":` + resets + `,"rateLimitType":"` + typ + `"}}`
	}
	tests := []struct {
		name    string
		lines   []string
		resetAt time.Time
		window  string
	}{
		{name: "event then result", lines: []string{event("rejected", resetSecs, "five_hour"), result429}, resetAt: handReset, window: "five_hour"},
		{name: "warning refuses nothing", lines: []string{event("allowed_warning", resetSecs, "five_hour"), result429}},
		{name: "allowed refuses nothing", lines: []string{event("allowed", resetSecs, "seven_day"), result429}},
		{name: "the later window wins", lines: []string{event("rejected", later, "seven_day"), event("rejected", resetSecs, "five_hour"), result429},
			resetAt: time.Unix(1796027665, 0).UTC(), window: "seven_day"},
		{name: "reset as a string", lines: []string{event("rejected", `"`+resetSecs+`"`, ""), result429}, resetAt: handReset},
		{name: "milliseconds are not a date", lines: []string{event("rejected", "1795768465000", "five_hour"), result429}},
		{name: "legacy text", lines: []string{`{"type":"result","subtype":"success","is_error":true,"result":"Claude AI usage limit reached|` + resetSecs + `"}`}, resetAt: handReset},
		{name: "params on the result only", lines: []string{`{"type":"result","is_error":true,"api_error_status":429,"api_error_params":{"rate_limit_info":{"status":"rejected","resetsAt":` + resetSecs + `}},"result":"x"}`}, resetAt: handReset},
		{name: "no time", lines: []string{result429}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p ClaudeParser
			for _, l := range tt.lines {
				if _, err := p.Parse([]byte(l)); err != nil {
					t.Fatal(err)
				}
			}
			_, err := p.Result()
			var e *Error
			if !errors.As(err, &e) || e.Kind != KindRateLimit {
				t.Fatalf("err = %v, want a rate limit", err)
			}
			if !e.ResetAt.Equal(tt.resetAt) || e.LimitWindow != tt.window {
				t.Errorf("reset %v %q, want %v %q", e.ResetAt, e.LimitWindow, tt.resetAt, tt.window)
			}
		})
	}
}

// A limit reported while the turn went on does not make a success fail.
func TestClaudeParseLimitEventAloneIsNoFailure(t *testing.T) {
	var p ClaudeParser
	for _, l := range []string{
		`{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1795768465}}`,
		`{"type":"result","subtype":"success","is_error":false,"result":"done"}`,
	} {
		if _, err := p.Parse([]byte(l)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Result(); err != nil {
		t.Errorf("err = %v", err)
	}
}

func TestResetOf(t *testing.T) {
	at := recordedReset
	tests := []struct {
		name string
		err  error
		ok   bool
	}{
		{"limit with a time", &Error{Kind: KindRateLimit, ResetAt: at}, true},
		{"wrapped", errors.Join(errors.New("run"), &Error{Kind: KindRateLimit, ResetAt: at}), true},
		{"no time", &Error{Kind: KindRateLimit}, false},
		{"another kind", &Error{Kind: KindAPI, ResetAt: at}, false},
		{"not a backend error", errors.New("x"), false},
		{"nil", nil, false},
	}
	for _, tt := range tests {
		if _, ok := ResetOf(tt.err); ok != tt.ok {
			t.Errorf("%s: ok = %t", tt.name, ok)
		}
	}
	if !errors.Is(&Error{Kind: KindRateLimit, ResetAt: at}, &Error{Kind: KindRateLimit}) {
		t.Error("a limit with a time does not match its kind's sentinel")
	}
}

// FuzzClaudeLimit feeds arbitrary rate_limit_info values and result texts
// to the limit reader: it must never panic, and a reset it reports is a
// plausible date.
func FuzzClaudeLimit(f *testing.F) {
	f.Add([]byte(`{"status":"rejected","resetsAt":1795768465,"rateLimitType":"five_hour"}`), "Claude AI usage limit reached|1795768465")
	f.Add([]byte(`{"status":"rejected","resetsAt":"17957"}`), "usage limit reached|99999999999")
	f.Add([]byte(`null`), "You've hit your 5-hour limit · resets 8:34am (UTC)")
	if b, err := os.ReadFile(filepath.Join(claudeLimitTestdata, "usage_limit.jsonl")); err == nil {
		for line := range bytes.SplitSeq(b, []byte("\n")) {
			f.Add(line, string(line))
		}
	}
	f.Fuzz(func(t *testing.T, info []byte, text string) {
		var c claudeLimit
		c.note(info)
		c.noteParams(info)
		c.noteText(text)
		if !c.resetAt.IsZero() && (c.resetAt.Year() < 2001 || c.resetAt.Year() > 2287) {
			t.Fatalf("reset %v from %q %q", c.resetAt, info, text)
		}
		var p ClaudeParser
		_, _ = p.Parse(info)
		_, _ = p.Parse([]byte(`{"type":"result","is_error":true,"api_error_status":429,"result":` + strconv.Quote(text) + `}`))
		if _, err := p.Result(); err != nil {
			if r, ok := ResetOf(err); ok && r.IsZero() {
				t.Fatal("ResetOf ok with a zero time")
			}
		}
	})
}
