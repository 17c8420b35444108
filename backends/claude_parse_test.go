package backends

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// claudeTestdata is where the recorded claude 2.1.330 streams live.
const claudeTestdata = "../testdata/claude"

// parseAll feeds every line of stream to a fresh parser and returns the
// events in order, the final result, its error, and how many lines were
// rejected.
func parseAll(t testing.TB, stream []byte) (events []Event, res Result, err error, bad int) {
	t.Helper()
	var p ClaudeParser
	sc := bufio.NewScanner(bytes.NewReader(stream))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		evs, perr := p.Parse(sc.Bytes())
		if perr != nil {
			if !errors.Is(perr, errNotJSON) {
				t.Errorf("Parse error %v does not wrap errNotJSON", perr)
			}
			bad++
			continue
		}
		events = append(events, evs...)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	res, err = p.Result()
	return events, res, err, bad
}

// summarize renders an event as one readable line for golden comparison.
func summarize(e Event) string {
	switch e.Kind {
	case EventInit:
		if e.Model != "" || e.KeySource != "" {
			return fmt.Sprintf("init %s %s %s", e.SessionID, e.Model, e.KeySource)
		}
		return "init " + e.SessionID
	case EventThinking:
		return "thinking"
	case EventRetry:
		return fmt.Sprintf("retry %d/%d %s", e.Attempt, e.MaxAttempts, e.Err.Kind)
	case EventText:
		return fmt.Sprintf("text %q", e.Text)
	case EventToolUse:
		return fmt.Sprintf("tool_use %s %s %s", e.Tool.Name, e.Tool.ID, e.Tool.Input)
	case EventToolResult:
		status := "ok"
		if e.Tool.IsError {
			status = "error"
		}
		return fmt.Sprintf("tool_result %s %s %s", e.Tool.Name, e.Tool.ID, status)
	case EventResult:
		s := fmt.Sprintf("result %q", e.Result.Text)
		if e.Err != nil {
			s += " error " + string(e.Err.Kind)
		}
		return s
	}
	return "unknown"
}

// initOpus is what the recordings' system/init lines name: the fake API's
// model and an API key.
const initOpus = " claude-opus-5-5 ANTHROPIC_API_KEY"

func TestClaudeParseGolden(t *testing.T) {
	t.Parallel()
	const (
		sText    = "1cb5c157-32df-440d-adfb-3d7c73b3217b"
		sTool    = "0d98b416-6100-4178-a672-817b7de9c7a3"
		sMax     = "cd29c7b0-6b45-46d1-9f72-6f498b49cee9"
		sSandbox = "00259b92-2c5d-451d-8177-16dfc5121866"
		sAuth    = "a26dd5e1-2f17-48ae-856f-9d8b6f542e40"
		sServer  = "7c4ea917-ac57-4e2f-ab1a-d26be1184739"
		sStale   = "0b1e6f7c-3d2a-4c5b-9e8f-7a6b5c4d3e2f"
		sDenied  = "0be43ca2-0da6-493f-8ded-c9aa130342e9"

		sAuthRetry          = "9b8f6137-8b53-4c58-a25f-21784aafb8fe"
		sAuthRetryPartial   = "2d1bc736-2851-4d02-a418-b84086236fb4"
		sUnreachable        = "ca13ef97-848d-48fb-bfcc-40393019764f"
		sUnreachablePartial = "57909b4c-fc4d-46fe-b9f3-3980b3b69274"
		sUnreachableFull    = "f22741c9-85c9-4a54-b3ec-a7f8d53fa0f4"
		sServerRetry        = "df93ef4a-8f0b-4c29-9409-1492ba1ad795"
		sOverloadedRetry    = "7ecc236b-fe8d-47f2-9c49-5eb6f4be00bd"
	)
	retries := func(n int, kind ErrorKind) []string {
		var evs []string
		for i := 1; i <= n; i++ {
			evs = append(evs, fmt.Sprintf("retry %d/10 %s", i, kind))
		}
		return evs
	}
	usage := Usage{InputTokens: 100, OutputTokens: 10}
	tests := []struct {
		file       string
		events     []string
		result     Result
		kind       ErrorKind // "" for success
		status     int
		msgHas     string
		errIs      error
		noResult   bool
		rejectLine int
	}{
		{
			file: "text.jsonl",
			events: []string{
				"init " + sText + initOpus,
				`text "Hello! I'm Tova,"`, `text " running against"`, `text " the fake API."`,
				`result "Hello! I'm Tova, running against the fake API."`,
			},
			result: Result{SessionID: sText, Model: "claude-opus-5-5", Text: "Hello! I'm Tova, running against the fake API.", CostUSD: 0.0006000000000000001, SessionCostUSD: 0.0006000000000000001,
				Usage: usage, ContextTokens: 100, ContextWindow: 1_000_000, Turns: 1, Duration: 185 * time.Millisecond},
		},
		{
			file: "resume.jsonl",
			events: []string{
				"init " + sText + initOpus,
				`text "Yes, this is the "`, `text "second turn of th"`, `text "e same session."`,
				`result "Yes, this is the second turn of the same session."`,
			},
			result: Result{SessionID: sText, Model: "claude-opus-5-5", Text: "Yes, this is the second turn of the same session.", CostUSD: 0.0012000000000000001, SessionCostUSD: 0.0012000000000000001,
				Usage: usage, ContextTokens: 100, ContextWindow: 1_000_000, Turns: 1, Duration: 138 * time.Millisecond},
		},
		{
			file: "tool_write.jsonl",
			events: []string{
				"init " + sTool + initOpus,
				`tool_use Read toolu_fake_0001 {"file_path":"/CONFIG_DIR/memory.md"}`,
				"tool_result Read toolu_fake_0001 ok",
				`text "I'll add"`, `text " that to"`, `text " memory."`,
				`tool_use Write toolu_fake_0002 {"file_path":"/CONFIG_DIR/memory.md","content":"# Memory\n- The team meets on Mondays.\n- Ana prefers tea over coffee.\n"}`,
				"tool_result Write toolu_fake_0002 ok",
				`text "\n\nNoted: A"`, `text "na prefe"`, `text "rs tea."`,
				`result "Noted: Ana prefers tea."`,
			},
			result: Result{SessionID: sTool, Model: "claude-opus-5-5", Text: "Noted: Ana prefers tea.", CostUSD: 0.0018000000000000002, SessionCostUSD: 0.0018000000000000002,
				Usage: Usage{InputTokens: 300, OutputTokens: 30}, ContextTokens: 100, ContextWindow: 1_000_000, Turns: 3, Duration: 316 * time.Millisecond},
		},
		{
			file: "max_turns.jsonl",
			events: []string{
				"init " + sMax + initOpus,
				`tool_use Read toolu_fake_0001 {"file_path":"/CONFIG_DIR/memory.md"}`,
				"tool_result Read toolu_fake_0001 ok",
				`result "" error max_turns`,
			},
			result: Result{SessionID: sMax, Model: "claude-opus-5-5", CostUSD: 0.0006000000000000001, SessionCostUSD: 0.0006000000000000001, Usage: usage, ContextTokens: 100, ContextWindow: 1_000_000, Turns: 2, Duration: 215 * time.Millisecond},
			kind:   KindMaxTurns,
			msgHas: "Reached maximum number of turns (1)",
		},
		{
			file: "root_bypass_sandbox.jsonl",
			events: []string{
				"init " + sSandbox + initOpus,
				`text "Hello f"`, `text "rom a s"`, `text "andbox."`,
				`result "Hello from a sandbox."`,
			},
			result: Result{SessionID: sSandbox, Model: "claude-opus-5-5", Text: "Hello from a sandbox.", CostUSD: 0.0006000000000000001, SessionCostUSD: 0.0006000000000000001,
				Usage: usage, ContextTokens: 100, ContextWindow: 1_000_000, Turns: 1, Duration: 202 * time.Millisecond},
		},
		{
			// is_error with subtype "success"; the API error text shows up
			// as a synthetic assistant message, which is not reply text.
			file:   "auth_error.jsonl",
			events: []string{"init " + sAuth + initOpus, `result "Invalid API key · Fix external API key" error authentication_error`},
			result: Result{SessionID: sAuth, Model: "claude-opus-5-5", Text: "Invalid API key · Fix external API key", Turns: 1, Duration: 155 * time.Millisecond},
			kind:   KindAuth, status: 401, errIs: ErrAuth,
			msgHas: "Invalid API key",
		},
		{
			file:   "server_error.jsonl",
			events: []string{"init " + sServer + initOpus, `result "API Error: 500 Internal server error. This is a server-side issue, usually temporary — try again in a moment. If it persists, check your inference gateway (127.0.0.1:PORT)." error api_error`},
			result: Result{SessionID: sServer, Model: "claude-opus-5-5", Text: "API Error: 500 Internal server error. This is a server-side issue, usually temporary — try again in a moment. If it persists, check your inference gateway (127.0.0.1:PORT).",
				Turns: 1, Duration: 213 * time.Millisecond},
			kind: KindAPI, status: 500,
			msgHas: "API Error: 500",
		},
		{
			file:   "stale_session.jsonl",
			events: []string{"init " + sStale, `result "" error stale_session`},
			result: Result{SessionID: sStale},
			kind:   KindStaleSession, errIs: ErrStaleSession,
			msgHas: "No conversation found with session ID: " + sStale,
		},
		{
			// claude refuses before printing anything (the message is on
			// stderr, root_bypass.stderr): the parser sees no result.
			file:     "root_bypass.jsonl",
			noResult: true,
		},
		{
			// --permission-mode default in -p mode: Write and Bash are
			// refused (tool_result is_error) and listed in
			// permission_denials; the turn itself succeeds.
			file: "default_denied.jsonl",
			events: []string{
				"init " + sDenied + initOpus,
				`tool_use Write toolu_fake_0001 {"file_path":"/CONFIG_DIR/notes.md","content":"hello\n"}`,
				"tool_result Write toolu_fake_0001 error",
				`tool_use Bash toolu_fake_0002 {"command":"touch /CONFIG_DIR/made-by-bash","description":"make a file"}`,
				"tool_result Bash toolu_fake_0002 error",
				`text "I could n"`, `text "ot write "`, `text "the file."`,
				`result "I could not write the file."`,
			},
			result: Result{SessionID: sDenied, Model: "claude-opus-5-5", Text: "I could not write the file.", CostUSD: 0.0018000000000000002, SessionCostUSD: 0.0018000000000000002,
				Usage: Usage{InputTokens: 300, OutputTokens: 30}, ContextTokens: 100, ContextWindow: 1_000_000, Turns: 3, Duration: 282 * time.Millisecond,
				PermissionDenials: []string{"Write", "Bash"}},
		},
		// Default retries (CLAUDE_CODE_MAX_RETRIES unset): claude retries a
		// refused key or an unreachable API for minutes and prints no
		// result; TestClaudeParseRetries checks what the parser makes of
		// the system/api_retry lines.
		{file: "auth_retry.jsonl", events: []string{"init " + sAuthRetry + initOpus, "retry 1/10 authentication_error", "retry 2/10 authentication_error", "retry 3/10 authentication_error", "retry 4/10 authentication_error", "retry 5/10 authentication_error", "retry 6/10 authentication_error"}, noResult: true},
		{file: "auth_retry_partial.jsonl", events: []string{"init " + sAuthRetryPartial + initOpus, "retry 1/10 authentication_error", "retry 2/10 authentication_error", "retry 3/10 authentication_error", "retry 4/10 authentication_error", "retry 5/10 authentication_error", "retry 6/10 authentication_error", "retry 7/10 authentication_error", "retry 8/10 authentication_error", "retry 9/10 authentication_error", "retry 10/10 authentication_error"}, noResult: true},
		{file: "unreachable.jsonl", events: []string{"init " + sUnreachable + initOpus, "retry 1/10 api_unreachable", "retry 2/10 api_unreachable", "retry 3/10 api_unreachable", "retry 4/10 api_unreachable", "retry 5/10 api_unreachable", "retry 6/10 api_unreachable"}, noResult: true},
		{
			// SIGINT while the model API hung: an aborted result, no text.
			file:   "interrupted.jsonl",
			events: []string{"init dc3f1054-ad46-4427-aa30-883199874984" + initOpus, `result "" error execution_error`},
			result: Result{SessionID: "dc3f1054-ad46-4427-aa30-883199874984", Model: "claude-opus-5-5", Turns: 2, Duration: 123 * time.Millisecond},
			kind:   KindExecution,
			msgHas: "ede_diagnostic",
		},
		{file: "unreachable_partial.jsonl", events: []string{"init " + sUnreachablePartial + initOpus, "retry 1/10 api_unreachable", "retry 2/10 api_unreachable", "retry 3/10 api_unreachable", "retry 4/10 api_unreachable", "retry 5/10 api_unreachable", "retry 6/10 api_unreachable"}, noResult: true},
		// Default retries run to the end (claude gave up by itself): ten
		// retries over about three minutes, then claude's own error result.
		{
			file: "unreachable_full.jsonl",
			events: append(append([]string{"init " + sUnreachableFull + initOpus}, retries(10, KindUnreachable)...),
				`result "API Error: Connection refused — a firewall or proxy may be blocking it (ECONNREFUSED)" error api_unreachable`),
			result: Result{SessionID: sUnreachableFull, Model: "claude-opus-5-5", Text: "API Error: Connection refused — a firewall or proxy may be blocking it (ECONNREFUSED)",
				Turns: 1, Duration: 187952 * time.Millisecond},
			kind: KindUnreachable, errIs: ErrUnreachable,
			msgHas: "ECONNREFUSED",
		},
		{
			file: "server_error_retry.jsonl",
			events: append(append([]string{"init " + sServerRetry + initOpus}, retries(10, KindAPI)...),
				`result "API Error: 500 Internal server error. This is a server-side issue, usually temporary — try again in a moment. If it persists, check your inference gateway (127.0.0.1:PORT)." error api_error`),
			result: Result{SessionID: sServerRetry, Model: "claude-opus-5-5", Text: "API Error: 500 Internal server error. This is a server-side issue, usually temporary — try again in a moment. If it persists, check your inference gateway (127.0.0.1:PORT).",
				Turns: 1, Duration: 175228 * time.Millisecond},
			kind: KindAPI, status: 500,
			msgHas: "API Error: 500",
		},
		{
			// 529: claude gives up after two retries although the lines
			// say max_retries 10.
			file: "overloaded_retry.jsonl",
			events: append(append([]string{"init " + sOverloadedRetry + initOpus}, retries(2, KindOverloaded)...),
				`result "API Error: Repeated 529 Overloaded errors. The API is at capacity — this is usually temporary. Try again in a moment. If it persists, check your inference gateway (127.0.0.1:PORT)." error overloaded_error`),
			result: Result{SessionID: sOverloadedRetry, Model: "claude-opus-5-5", Text: "API Error: Repeated 529 Overloaded errors. The API is at capacity — this is usually temporary. Try again in a moment. If it persists, check your inference gateway (127.0.0.1:PORT).",
				Turns: 1, Duration: 3579 * time.Millisecond},
			kind: KindOverloaded, status: 529,
			msgHas: "Repeated 529 Overloaded",
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			stream, err := os.ReadFile(filepath.Join(claudeTestdata, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			events, res, err, bad := parseAll(t, stream)
			if bad != tt.rejectLine {
				t.Errorf("%d lines rejected, want %d", bad, tt.rejectLine)
			}
			var got []string
			for _, e := range events {
				got = append(got, summarize(e))
			}
			if diff := cmp.Diff(tt.events, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if tt.noResult {
				if !errors.Is(err, errNoResult) {
					t.Errorf("Result error = %v, want errNoResult", err)
				}
				return
			}
			if diff := cmp.Diff(tt.result, res); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			// The result event carries the same result and error.
			last := events[len(events)-1]
			if diff := cmp.Diff(&res, last.Result); diff != "" {
				t.Errorf("result event (-want +got):\n%s", diff)
			}
			if tt.kind == "" {
				if err != nil || last.Err != nil {
					t.Errorf("error = %v / %v, want none", err, last.Err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Result error = %v (%T), want *Error", err, err)
			}
			if e != last.Err {
				t.Errorf("result event error %v differs from Result error %v", last.Err, e)
			}
			if e.Kind != tt.kind || e.Status != tt.status {
				t.Errorf("kind, status = %s, %d; want %s, %d", e.Kind, e.Status, tt.kind, tt.status)
			}
			if !strings.Contains(e.Message, tt.msgHas) {
				t.Errorf("message %q does not contain %q", e.Message, tt.msgHas)
			}
			if tt.errIs != nil && !errors.Is(err, tt.errIs) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.errIs)
			}
		})
	}
}

// TestClaudeParseGoldenFilesCovered makes sure every recorded stream is in
// the golden table, so a new recording cannot go untested.
func TestClaudeParseGoldenFilesCovered(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join(claudeTestdata, "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded streams in %s (%v)", claudeTestdata, err)
	}
	covered := map[string]bool{
		"text.jsonl": true, "resume.jsonl": true, "tool_write.jsonl": true, "max_turns.jsonl": true,
		"root_bypass_sandbox.jsonl": true, "auth_error.jsonl": true, "server_error.jsonl": true,
		"stale_session.jsonl": true, "root_bypass.jsonl": true, "default_denied.jsonl": true,
		"auth_retry.jsonl": true, "auth_retry_partial.jsonl": true, "unreachable.jsonl": true, "unreachable_partial.jsonl": true,
		"unreachable_full.jsonl": true, "server_error_retry.jsonl": true, "overloaded_retry.jsonl": true,
		"interrupted.jsonl": true,
		// Several turns of one process each: TestClaudeCompactRecordings.
		"compact_warm.jsonl": true, "compact_resume.jsonl": true, "compact_print.jsonl": true,
	}
	for _, f := range files {
		if !covered[filepath.Base(f)] {
			t.Errorf("%s has no golden expectations in TestClaudeParseGolden", filepath.Base(f))
		}
	}
}

func TestClaudeParseHandWritten(t *testing.T) {
	t.Parallel()
	const sid = `"session_id":"s1"`
	tests := []struct {
		name   string
		lines  []string
		events []string
		kind   ErrorKind
		status int
		bad    int
		res    *Result
	}{
		{
			name: "no partial messages: assistant text blocks are the text",
			lines: []string{
				`{"type":"system","subtype":"init",` + sid + `}`,
				`{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"First."},{"type":"thinking","thinking":"hmm"},{"type":"text","text":""},{"type":"text","text":"Second."}]},` + sid + `,"parent_tool_use_id":null}`,
				`{"type":"result","subtype":"success","is_error":false,"result":"First. Second.",` + sid + `}`,
			},
			events: []string{"init s1", `text "First."`, `text "\n\nSecond."`, `result "First. Second."`},
		},
		{
			name: "subagent text is not the reply; its tools still show",
			lines: []string{
				`{"type":"stream_event","event":{"type":"content_block_delta","delta":{"type":"text_delta","text":"sub"}},` + sid + `,"parent_tool_use_id":"toolu_task"}`,
				`{"type":"assistant","message":{"id":"m2","content":[{"type":"text","text":"sub text"},{"type":"tool_use","id":"t9","name":"Grep","input":{"pattern":"x"}}]},` + sid + `,"parent_tool_use_id":"toolu_task"}`,
				`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t9","content":"no matches","is_error":true}]},` + sid + `,"parent_tool_use_id":"toolu_task"}`,
				`{"type":"user","message":{"role":"user","content":"plain string content"},` + sid + `}`,
			},
			events: []string{"init s1", `tool_use Grep t9 {"pattern":"x"}`, "tool_result Grep t9 error"},
		},
		{
			name: "garbage, blank lines, unknown types, odd field types",
			lines: []string{
				"", "   ", "not json", "[1,2,3]", `"a string"`, "{broken", "\x00\xff",
				`{"type":"future_thing","payload":{"x":1}}`,
				`{"type":"system","subtype":"hook_started",` + sid + `}`,
				`{"type":"assistant","message":{"id":"m3","content":[{"type":"text","text":7},{"type":"text","text":"kept"}]},` + sid + `}`,
				`{"type":"result","subtype":"success","is_error":false,"result":"ok",` + sid + `,"total_cost_usd":"0.5","num_turns":"2","duration_ms":1.5e3,"usage":{"input_tokens":3.0,"output_tokens":"x"},"permission_denials":[{"tool_name":"Write","tool_use_id":"t1","tool_input":{}},"Bash",{"other":1}]}`,
			},
			bad:    5,
			events: []string{"init s1", `text "kept"`, `result "ok"`},
			res:    &Result{SessionID: "s1", Text: "ok", Turns: 2, Duration: 1500 * time.Millisecond, Usage: Usage{InputTokens: 3}, PermissionDenials: []string{"Write", "Bash"}},
		},
		{
			name: "only one result; later lines ignored",
			lines: []string{
				`{"type":"result","subtype":"success","is_error":false,"result":"one",` + sid + `}`,
				`{"type":"result","subtype":"success","is_error":false,"result":"two",` + sid + `}`,
				`{"type":"assistant","message":{"id":"m4","content":[{"type":"text","text":"late"}]},` + sid + `}`,
			},
			events: []string{"init s1", `result "one"`},
		},
		{
			name:   "rate limit by status",
			lines:  []string{`{"type":"result","subtype":"success","is_error":true,"api_error_status":429,"result":"API Error: 429 slow down",` + sid + `}`},
			events: []string{"init s1", `result "API Error: 429 slow down" error rate_limit_error`},
			kind:   KindRateLimit, status: 429,
		},
		{
			name:   "overloaded by status in the text only",
			lines:  []string{`{"type":"result","subtype":"success","is_error":true,"result":"API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}",` + sid + `}`},
			events: []string{"init s1", `result "API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}" error overloaded_error`},
			kind:   KindOverloaded, status: 529,
		},
		{
			name:   "invalid request 400",
			lines:  []string{`{"type":"result","subtype":"success","is_error":true,"api_error_status":"400","result":"prompt is too long",` + sid + `}`},
			events: []string{"init s1", `result "prompt is too long" error invalid_request_error`},
			kind:   KindInvalid, status: 400,
		},
		{
			name:   "api error type without status",
			lines:  []string{`{"type":"result","subtype":"success","is_error":true,"api_error_status":null,"api_error_type":"authentication_error","result":"nope",` + sid + `}`},
			events: []string{"init s1", `result "nope" error authentication_error`},
			kind:   KindAuth,
		},
		{
			// claude's last word after its retries got no HTTP response
			// (unreachable_full.jsonl): the same kind as the retries.
			name:   "connection refused, no status",
			lines:  []string{`{"type":"result","subtype":"success","is_error":true,"api_error_status":null,"api_error":"connection_failed","result":"API Error: Connection refused — a firewall or proxy may be blocking it (ECONNREFUSED)",` + sid + `}`},
			events: []string{"init s1", `result "API Error: Connection refused — a firewall or proxy may be blocking it (ECONNREFUSED)" error api_unreachable`},
			kind:   KindUnreachable,
		},
		{
			name:   "rate limit words, no status",
			lines:  []string{`{"type":"result","subtype":"error_during_execution","is_error":true,"errors":[{"message":"Rate limit reached for requests"}],` + sid + `}`},
			events: []string{"init s1", `result "" error rate_limit_error`},
			kind:   KindRateLimit,
		},
		{
			name:   "execution error without hints",
			lines:  []string{`{"type":"result","subtype":"error_during_execution","is_error":true,"errors":["something odd"],` + sid + `}`},
			events: []string{"init s1", `result "" error execution_error`},
			kind:   KindExecution,
		},
		{
			name:   "max turns without is_error",
			lines:  []string{`{"type":"result","subtype":"error_max_turns","is_error":false,` + sid + `}`},
			events: []string{"init s1", `result "" error max_turns`},
			kind:   KindMaxTurns,
		},
		{
			name:   "root refusal inside a result",
			lines:  []string{`{"type":"result","subtype":"error_during_execution","is_error":true,"errors":["--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons"],` + sid + `}`},
			events: []string{"init s1", `result "" error permission_error`},
			kind:   KindPermission,
		},
		{
			name: "a changed session id is announced again",
			lines: []string{
				`{"type":"system","subtype":"init","session_id":"old"}`,
				`{"type":"system","subtype":"init","session_id":"new"}`,
				`{"type":"system","subtype":"status","session_id":"new"}`,
			},
			events: []string{"init old", "init new"},
		},
		{
			name: "duplicate tool_use ids are reported once",
			lines: []string{
				`{"type":"assistant","message":{"id":"m5","content":[{"type":"tool_use","id":"t1","name":"Bash","input":null}]},` + sid + `}`,
				`{"type":"assistant","message":{"id":"m5","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}}]},` + sid + `}`,
			},
			events: []string{"init s1", "tool_use Bash t1 "},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			events, res, err, bad := parseAll(t, []byte(strings.Join(tt.lines, "\n")))
			var got []string
			for _, e := range events {
				got = append(got, summarize(e))
			}
			if diff := cmp.Diff(tt.events, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if bad != tt.bad {
				t.Errorf("%d lines rejected, want %d", bad, tt.bad)
			}
			if tt.res != nil {
				if diff := cmp.Diff(*tt.res, res); diff != "" {
					t.Errorf("result (-want +got):\n%s", diff)
				}
			}
			if tt.kind != "" {
				var e *Error
				if !errors.As(err, &e) || e.Kind != tt.kind || e.Status != tt.status {
					t.Errorf("Result error = %#v, want kind %s status %d", err, tt.kind, tt.status)
				}
			}
		})
	}
}

// TestClaudeParseRetries reads claude's system/api_retry lines: a refused
// key is fatal at the first retry, no HTTP response is fatal after
// claudeUnreachableAfter in a row, and whatever is still being retried is
// what Retrying reports; a model answer clears it.
func TestClaudeParseRetries(t *testing.T) {
	t.Parallel()
	retry := func(attempt int, status string, reason string) string {
		return fmt.Sprintf(`{"type":"system","subtype":"api_retry","attempt":%d,"max_retries":10,"retry_delay_ms":500,"error_status":%s,"error":%q,"session_id":"s1"}`, attempt, status, reason)
	}
	conn := func(n int) []string {
		var lines []string
		for i := 1; i <= n; i++ {
			lines = append(lines, retry(i, "null", "unknown"))
		}
		return lines
	}
	recorded := func(name string) []string {
		b, err := os.ReadFile(filepath.Join(claudeTestdata, name))
		if err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSpace(string(b)), "\n")
	}
	const answer = `{"type":"stream_event","event":{"type":"message_start","message":{"id":"msg_1"}},"session_id":"s1","parent_tool_use_id":null}`
	type want struct {
		Kind   ErrorKind
		Status int
	}
	tests := []struct {
		name     string
		lines    []string
		fatal    *want
		retrying *want
		answered bool
	}{
		{name: "auth_retry.jsonl", lines: recorded("auth_retry.jsonl"), fatal: &want{KindAuth, 401}, retrying: &want{KindAuth, 401}},
		{name: "auth_retry_partial.jsonl", lines: recorded("auth_retry_partial.jsonl"), fatal: &want{KindAuth, 401}, retrying: &want{KindAuth, 401}},
		{name: "unreachable.jsonl", lines: recorded("unreachable.jsonl"), fatal: &want{KindUnreachable, 0}, retrying: &want{KindUnreachable, 0}},
		{name: "unreachable_partial.jsonl", lines: recorded("unreachable_partial.jsonl"), fatal: &want{KindUnreachable, 0}, retrying: &want{KindUnreachable, 0}},
		{name: "text.jsonl", lines: recorded("text.jsonl"), answered: true},
		{name: "auth reason without status", lines: []string{retry(1, "null", "authentication_failed")}, fatal: &want{KindAuth, 0}, retrying: &want{KindAuth, 0}},
		{name: "forbidden", lines: []string{retry(1, "403", "unknown")}, fatal: &want{KindAuth, 403}, retrying: &want{KindAuth, 403}},
		{name: "connection blip", lines: conn(claudeUnreachableAfter - 1), retrying: &want{KindUnreachable, 0}},
		{name: "unreachable", lines: conn(claudeUnreachableAfter), fatal: &want{KindUnreachable, 0}, retrying: &want{KindUnreachable, 0}},
		{name: "a status breaks the run", lines: append(append(conn(3), retry(4, "500", "server_error")), conn(claudeUnreachableAfter-1)...), retrying: &want{KindUnreachable, 0}},
		{name: "server errors", lines: []string{retry(1, "500", "server_error"), retry(2, "529", "overloaded")}, retrying: &want{KindOverloaded, 529}},
		{name: "rate limited", lines: []string{retry(1, "429", "rate_limit")}, retrying: &want{KindRateLimit, 429}},
		{name: "answered after retries", lines: append(conn(2), answer), answered: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var p ClaudeParser
			for _, l := range tt.lines {
				if _, err := p.Parse([]byte(l)); err != nil {
					t.Fatalf("Parse(%s): %v", l, err)
				}
			}
			got := func(e *Error) *want {
				if e == nil {
					return nil
				}
				if e.Message == "" {
					t.Errorf("%s error without a message", e.Kind)
				}
				return &want{e.Kind, e.Status}
			}
			if diff := cmp.Diff(tt.fatal, got(p.Fatal())); diff != "" {
				t.Errorf("Fatal (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.retrying, got(p.Retrying())); diff != "" {
				t.Errorf("Retrying (-want +got):\n%s", diff)
			}
			if p.Answered() != tt.answered {
				t.Errorf("Answered = %t, want %t", p.Answered(), tt.answered)
			}
		})
	}
}

func TestClaudeParseNoResult(t *testing.T) {
	t.Parallel()
	var p ClaudeParser
	p.Parse([]byte(`{"type":"system","subtype":"init","session_id":"s1"}`))
	res, err := p.Result()
	if !errors.Is(err, errNoResult) {
		t.Errorf("Result error = %v, want errNoResult", err)
	}
	if res.SessionID != "s1" || p.SessionID() != "s1" {
		t.Errorf("session id = %q / %q, want s1", res.SessionID, p.SessionID())
	}
}

// claudeSeedLines returns every line of the recorded streams.
func claudeSeedLines(tb testing.TB) [][]byte {
	tb.Helper()
	files, _ := filepath.Glob(filepath.Join(claudeTestdata, "*.jsonl"))
	var lines [][]byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		for l := range bytes.SplitSeq(b, []byte("\n")) {
			if len(bytes.TrimSpace(l)) > 0 {
				lines = append(lines, l)
			}
		}
	}
	if len(lines) == 0 {
		tb.Fatal("no seed lines")
	}
	return lines
}

// FuzzClaudeParse feeds the parser a stream of lines (the input split on
// newlines). It must never panic, must report at most one result, and must
// never return an empty text event.
func FuzzClaudeParse(f *testing.F) {
	lines := claudeSeedLines(f)
	for _, l := range lines {
		f.Add(l)
	}
	for _, name := range []string{"text.jsonl", "tool_write.jsonl", "auth_error.jsonl", "max_turns.jsonl", "auth_retry.jsonl", "unreachable_partial.jsonl", "default_denied.jsonl"} {
		b, err := os.ReadFile(filepath.Join(claudeTestdata, name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(streamText))
	f.Fuzz(func(t *testing.T, data []byte) {
		var p ClaudeParser
		results := 0
		for line := range bytes.SplitSeq(data, []byte("\n")) {
			evs, err := p.Parse(line)
			if err != nil && len(evs) != 0 {
				t.Fatalf("error %v with %d events", err, len(evs))
			}
			for _, e := range evs {
				switch e.Kind {
				case EventText:
					if e.Text == "" {
						t.Fatal("empty text event")
					}
				case EventResult:
					results++
					if e.Result == nil {
						t.Fatal("result event without a result")
					}
				case EventToolUse, EventToolResult:
					if e.Tool == nil {
						t.Fatal("tool event without a tool")
					}
				case EventInit:
					if e.SessionID == "" {
						t.Fatal("init event without a session id")
					}
				default:
					if e.Kind != EventThinking && e.Kind != EventRetry {
						t.Fatalf("unknown event kind %v", e.Kind)
					}
				}
			}
		}
		if results > 1 {
			t.Fatalf("%d result events, want at most one", results)
		}
		res, err := p.Result()
		if results == 0 && !errors.Is(err, errNoResult) {
			t.Fatalf("no result event but Result() = %+v, %v", res, err)
		}
		if results == 1 && errors.Is(err, errNoResult) {
			t.Fatal("result event but Result() says none")
		}
		var e *Error
		if errors.As(err, &e) && e.Kind == "" {
			t.Fatal("error without a kind")
		}
		for _, e := range []*Error{p.Fatal(), p.Retrying()} {
			if e != nil && (e.Kind == "" || e.Message == "") {
				t.Fatalf("retry error without a kind or message: %+v", e)
			}
		}
		if f := p.Fatal(); f != nil && f.Kind != KindAuth && f.Kind != KindUnreachable {
			t.Fatalf("fatal error of kind %s", f.Kind)
		}
	})
}

// BenchmarkClaudeParse parses a realistic run: the tool_write recording
// (init, partial deltas, two tool calls, three messages, result).
func BenchmarkClaudeParse(b *testing.B) {
	stream, err := os.ReadFile(filepath.Join(claudeTestdata, "tool_write.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(stream), []byte("\n"))
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		var p ClaudeParser
		n := 0
		for _, l := range lines {
			evs, _ := p.Parse(l)
			n += len(evs)
		}
		if _, err := p.Result(); err != nil || n == 0 {
			b.Fatal(err, n)
		}
	}
}

// A subscription login (apiKeySource "none") makes the cost an estimate;
// a thinking block is announced once, when it starts.
func TestClaudeParseThinkingAndSubscription(t *testing.T) {
	stream := strings.Join([]string{
		`{"type":"system","subtype":"init","session_id":"s1","model":"claude-sonnet-x","apiKeySource":"none"}`,
		`{"type":"stream_event","session_id":"s1","event":{"type":"message_start","message":{"id":"m1"}}}`,
		`{"type":"stream_event","session_id":"s1","event":{"type":"content_block_start","content_block":{"type":"thinking"}}}`,
		`{"type":"stream_event","session_id":"s1","event":{"type":"content_block_delta","delta":{"type":"thinking_delta","thinking":"hmm"}}}`,
		`{"type":"stream_event","session_id":"s1","event":{"type":"content_block_start","content_block":{"type":"text"}}}`,
		`{"type":"stream_event","session_id":"s1","event":{"type":"content_block_delta","delta":{"type":"text_delta","text":"Hi"}}}`,
		`{"type":"result","subtype":"success","session_id":"s1","result":"Hi","total_cost_usd":0.5}`,
	}, "\n")
	events, res, err, _ := parseAll(t, []byte(stream))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range events {
		got = append(got, summarize(e))
	}
	want := []string{"init s1 claude-sonnet-x none", "thinking", `text "Hi"`, `result "Hi"`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if !res.CostEstimated || res.Model != "claude-sonnet-x" {
		t.Errorf("result = %+v, want an estimated cost from claude-sonnet-x", res)
	}
}
