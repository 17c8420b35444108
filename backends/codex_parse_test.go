package backends

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// codexTestdata is where the recorded codex 0.169.0 streams live.
const codexTestdata = "../testdata/codex"

// codexParseAll feeds every line of stream to a fresh parser and returns
// the events in order, the final result, its error, and how many lines
// were rejected.
func codexParseAll(t testing.TB, stream []byte) (events []Event, res Result, err error, bad int) {
	t.Helper()
	var p CodexParser
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

func TestCodexParseGolden(t *testing.T) {
	t.Parallel()
	const (
		sText      = "01a1ffc4-269c-72f3-8fe1-0de7f7b0cc1b"
		sResume    = "01a1ffc4-279d-7233-ab81-f441afc436aa"
		sTool      = "01a1ffc4-2b8f-7cc3-9114-e97973adacf6"
		sPlan      = "01a1ffc4-2cd3-7810-97f2-8ca43632d020"
		sAuth      = "01a1ffc4-2f44-75c3-a170-fae02c601c30"
		sAuthRetry = "01a20a35-f1b4-7502-94ff-b3da74423ec0"
		sHang      = "01a1ffc4-303f-7e20-a510-8309e39867f5"
		sServer    = "01a1ffc4-5b7d-70f3-a883-34c988f24e07"
		sRate      = "01a1ffc4-5c95-7653-8459-62b29199d0cb"
		sModel     = "01a1ffc4-5da2-72a1-81f0-eaeef1636ed1"
		sCommand   = "01a1ffc4-5ebb-7eb2-a8a1-1ab5fa471e06"
		sStall     = "01a1ffc4-6064-7c43-ad91-e863808d7a78"
		sKey       = "01a1ffc4-666c-78a2-aaae-16264fcede1b"
	)
	one := Usage{InputTokens: 100, OutputTokens: 10}
	two := Usage{InputTokens: 200, OutputTokens: 20}
	tests := []struct {
		file     string
		events   []string
		result   Result
		kind     ErrorKind // "" for success
		status   int
		msgHas   string
		errIs    error
		noResult bool
	}{
		{
			file:   "text.jsonl",
			events: []string{"init " + sText, `text "Hello from the fake model."`, `result "Hello from the fake model."`},
			result: Result{SessionID: sText, Text: "Hello from the fake model.", Usage: one},
		},
		{
			file:   "resume_first.jsonl",
			events: []string{"init " + sResume, `text "The first answer is 42."`, `result "The first answer is 42."`},
			result: Result{SessionID: sResume, Text: "The first answer is 42.", Usage: one},
		},
		{
			// The same thread; usage is the thread's total (two turns).
			file:   "resume.jsonl",
			events: []string{"init " + sResume, `text "You asked about 42."`, `result "You asked about 42."`},
			result: Result{SessionID: sResume, Text: "You asked about 42.", Usage: two},
		},
		{
			file: "tool_write.jsonl",
			events: []string{
				"init " + sTool,
				`tool_use apply_patch item_0 {"changes":[{"path":"/CONFIG_DIR/memory.md","kind":"update"}]}`,
				"tool_result apply_patch item_0 ok",
				`text "Saved to memory."`,
				`result "Saved to memory."`,
			},
			result: Result{SessionID: sTool, Text: "Saved to memory.", Usage: two},
		},
		{
			// The read-only sandbox refused the patch: only stderr says so
			// (plan_denied.stderr); the stream shows no item for it.
			file:   "plan_denied.jsonl",
			events: []string{"init " + sPlan, `text "I could not save that."`, `result "I could not save that."`},
			result: Result{SessionID: sPlan, Text: "I could not save that.", Usage: two},
		},
		{
			file: "command.jsonl",
			events: []string{
				"init " + sCommand,
				`text "Let me look."`,
				`tool_use exec_command item_1 {"command":"/bin/bash -lc 'echo hi-there; ls /nonexistent'"}`,
				"tool_result exec_command item_1 error",
				`text "\n\nRan it."`,
				`result "Ran it."`,
			},
			result: Result{SessionID: sCommand, Text: "Ran it.", Usage: two},
		},
		{
			// An error item is a warning: the turn goes on.
			file:   "unknown_model.jsonl",
			events: []string{"init " + sModel, `text "Fine."`, `result "Fine."`},
			result: Result{SessionID: sModel, Text: "Fine.", Usage: one},
		},
		{
			file:   "auth_error.jsonl",
			events: []string{"init " + sAuth, `result "" error authentication_error`},
			result: Result{SessionID: sAuth},
			kind:   KindAuth, status: 401, errIs: ErrAuth,
			msgHas: "unexpected status 401 Unauthorized: Incorrect API key provided",
		},
		{
			// codex's default retries (no request_max_retries or
			// stream_max_retries): five "Reconnecting... n/5" error lines
			// about 1 s apart, then turn.failed with the 401.
			file: "auth_retry.jsonl",
			events: []string{"init " + sAuthRetry, "retry 1/5 authentication_error", "retry 2/5 authentication_error",
				"retry 3/5 authentication_error", "retry 4/5 authentication_error", "retry 5/5 authentication_error",
				`result "" error authentication_error`},
			result: Result{SessionID: sAuthRetry},
			kind:   KindAuth, status: 401, errIs: ErrAuth,
			msgHas: "unexpected status 401 Unauthorized: Incorrect API key provided",
		},
		{
			file:   "missing_key.jsonl",
			events: []string{"init " + sKey, `result "" error authentication_error`},
			result: Result{SessionID: sKey},
			kind:   KindAuth, errIs: ErrAuth,
			msgHas: "Missing environment variable",
		},
		{
			// codex 0.169.0 hides a 500's message behind this text.
			file:   "server_error.jsonl",
			events: []string{"init " + sServer, `result "" error api_error`},
			result: Result{SessionID: sServer},
			kind:   KindAPI,
			msgHas: "high demand",
		},
		{
			file:   "rate_limit.jsonl",
			events: []string{"init " + sRate, `result "" error rate_limit_error`},
			result: Result{SessionID: sRate},
			kind:   KindRateLimit, status: 429,
			msgHas: "last status: 429",
		},
		{
			file:   "stall_midstream.jsonl",
			events: []string{"init " + sStall, `result "" error api_error`},
			result: Result{SessionID: sStall},
			kind:   KindAPI,
			msgHas: "idle timeout waiting for SSE",
		},
		{
			// Killed by the gateway's timer while the API hung.
			file:     "hang_killed.jsonl",
			events:   []string{"init " + sHang},
			result:   Result{SessionID: sHang},
			noResult: true,
		},
		{
			// An unknown thread: stdout is empty, stderr says why
			// (stale_session.stderr, see TestCodexStderrError).
			file:     "stale_session.jsonl",
			noResult: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			stream, err := os.ReadFile(filepath.Join(codexTestdata, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			events, res, err, bad := codexParseAll(t, stream)
			if bad != 0 {
				t.Errorf("%d lines rejected", bad)
			}
			var got []string
			for _, e := range events {
				got = append(got, summarize(e))
			}
			if diff := cmp.Diff(tt.events, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.result, res); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			if tt.noResult {
				if !errors.Is(err, errNoResult) {
					t.Errorf("Result error = %v, want errNoResult", err)
				}
				return
			}
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

// TestCodexParseGoldenFilesCovered makes sure every recorded stream is in
// the golden table.
func TestCodexParseGoldenFilesCovered(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join(codexTestdata, "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded streams in %s (%v)", codexTestdata, err)
	}
	covered := map[string]bool{
		"text.jsonl": true, "resume_first.jsonl": true, "resume.jsonl": true, "tool_write.jsonl": true,
		"plan_denied.jsonl": true, "command.jsonl": true, "unknown_model.jsonl": true,
		"auth_error.jsonl": true, "auth_retry.jsonl": true, "missing_key.jsonl": true, "server_error.jsonl": true,
		"rate_limit.jsonl": true, "stall_midstream.jsonl": true, "hang_killed.jsonl": true,
		"stale_session.jsonl": true,
	}
	for _, f := range files {
		if !covered[filepath.Base(f)] {
			t.Errorf("%s has no golden expectations in TestCodexParseGolden", filepath.Base(f))
		}
	}
}

func TestCodexStderrError(t *testing.T) {
	t.Parallel()
	stale, err := os.ReadFile(filepath.Join(codexTestdata, "stale_session.stderr"))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := os.ReadFile(filepath.Join(codexTestdata, "plan_denied.stderr"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		stderr string
		kind   ErrorKind // "" for nil
		msgHas string
	}{
		{name: "recorded stale resume", stderr: string(stale), kind: KindStaleSession, msgHas: "no rollout found for thread id 82492204-a7a1-45c8-b27d-4acf849f2603"},
		{name: "recorded warning and patch refusal", stderr: string(plan)},
		{name: "empty", stderr: ""},
		{name: "config error", stderr: "Error loading config.toml: model_providers.gateway-openai: provider name must not be empty\nin `model_providers`\n",
			kind: KindInvalid, msgHas: "provider name must not be empty"},
		{name: "other error", stderr: "Error: something we have never seen\n", kind: KindCrashed, msgHas: "never seen"},
		{name: "auth words", stderr: "Error: Not logged in. Run codex login.\n", kind: KindAuth, msgHas: "Not logged in"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := CodexStderrError(tt.stderr)
			if tt.kind == "" {
				if e != nil {
					t.Errorf("CodexStderrError = %v, want nil", e)
				}
				return
			}
			if e == nil || e.Kind != tt.kind || !strings.Contains(e.Message, tt.msgHas) {
				t.Errorf("CodexStderrError = %v, want kind %s with %q", e, tt.kind, tt.msgHas)
			}
		})
	}
	if got := codexStderrDenials(string(plan)); !cmp.Equal(got, []string{"apply_patch"}) {
		t.Errorf("codexStderrDenials = %v, want [apply_patch]", got)
	}
}

func TestCodexParseHandWritten(t *testing.T) {
	t.Parallel()
	const start = `{"type":"thread.started","thread_id":"t1"}`
	tests := []struct {
		name   string
		lines  []string
		events []string
		kind   ErrorKind
		status int
		bad    int
		res    *Result
		noRes  bool
	}{
		{
			name: "cached tokens are counted apart from input",
			lines: []string{start,
				`{"type":"item.completed","item":{"id":"i0","type":"reasoning","text":"thinking"}}`,
				`{"type":"item.completed","item":{"id":"i1","type":"agent_message","text":"Hi."}}`,
				`{"type":"turn.completed","usage":{"input_tokens":1000,"cached_input_tokens":800,"cache_write_input_tokens":5,"output_tokens":"7"}}`},
			events: []string{"init t1", `text "Hi."`, `result "Hi."`},
			res:    &Result{SessionID: "t1", Text: "Hi.", Usage: Usage{InputTokens: 200, CacheReadTokens: 800, CacheCreationTokens: 5, OutputTokens: 7}},
		},
		{
			name: "garbage, blank lines, unknown types, odd field types",
			lines: []string{"", "  ", "not json", "[1]", "{broken", "\x00\xff", start,
				`{"type":"future.thing","x":1}`,
				`{"type":"item.completed","item":{"id":"i1","type":"agent_message","text":7}}`,
				`{"type":"item.completed","item":{"id":"i2","type":"agent_message","text":"kept"}}`,
				`{"type":"turn.completed","usage":"none"}`},
			bad:    4,
			events: []string{"init t1", `text "kept"`, `result "kept"`},
			res:    &Result{SessionID: "t1", Text: "kept"},
		},
		{
			name: "one turn per run; later lines ignored",
			lines: []string{start,
				`{"type":"turn.completed","usage":{}}`,
				`{"type":"item.completed","item":{"id":"i1","type":"agent_message","text":"late"}}`,
				`{"type":"turn.failed","error":{"message":"late"}}`},
			events: []string{"init t1", `result ""`},
		},
		{
			name: "mcp, web search and declined command",
			lines: []string{start,
				`{"type":"item.started","item":{"id":"m1","type":"mcp_tool_call","server":"docs","tool":"search","arguments":{"q":"x"},"status":"in_progress"}}`,
				`{"type":"item.completed","item":{"id":"m1","type":"mcp_tool_call","server":"docs","tool":"search","arguments":{"q":"x"},"error":{"message":"down"},"status":"failed"}}`,
				`{"type":"item.completed","item":{"id":"w1","type":"web_search","query":"weather"}}`,
				`{"type":"item.completed","item":{"id":"c1","type":"command_execution","command":"rm -rf /","exit_code":null,"status":"declined"}}`,
				`{"type":"item.updated","item":{"id":"td","type":"todo_list","items":[]}}`,
				`{"type":"turn.completed"}`},
			events: []string{"init t1",
				`tool_use mcp__docs__search m1 {"q":"x"}`, "tool_result mcp__docs__search m1 error",
				`tool_use web_search w1 {"query":"weather"}`, "tool_result web_search w1 ok",
				`tool_use exec_command c1 {"command":"rm -rf /"}`, "tool_result exec_command c1 error",
				`result ""`},
			res: &Result{SessionID: "t1", PermissionDenials: []string{"exec_command"}},
		},
		{
			name:   "turn.failed without a message uses the last error line",
			lines:  []string{start, `{"type":"error","message":"unexpected status 403 Forbidden: no"}`, `{"type":"turn.failed"}`},
			events: []string{"init t1", `result "" error authentication_error`},
			kind:   KindAuth, status: 403,
		},
		{
			name:   "an error line and no turn end is still a failure",
			lines:  []string{start, `{"type":"error","message":"unexpected status 400 Bad Request: context window exceeded"}`},
			events: []string{"init t1"},
			kind:   KindInvalid, status: 400,
			res: &Result{SessionID: "t1"},
		},
		{
			name:   "quota",
			lines:  []string{start, `{"type":"turn.failed","error":{"message":"Quota exceeded. Check your plan and billing details."}}`},
			events: []string{"init t1", `result "" error rate_limit_error`},
			kind:   KindRateLimit,
		},
		{
			name:   "context window without status",
			lines:  []string{start, `{"type":"turn.failed","error":{"message":"Codex ran out of room in the model's context window."}}`},
			events: []string{"init t1", `result "" error invalid_request_error`},
			kind:   KindInvalid,
		},
		{
			name:   "unknown failure",
			lines:  []string{start, `{"type":"turn.failed","error":{"message":"something odd"}}`},
			events: []string{"init t1", `result "" error execution_error`},
			kind:   KindExecution,
		},
		{
			name:   "nothing but a start",
			lines:  []string{start, `{"type":"turn.started"}`},
			events: []string{"init t1"},
			noRes:  true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			events, res, err, bad := codexParseAll(t, []byte(strings.Join(tt.lines, "\n")))
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
			switch {
			case tt.noRes:
				if !errors.Is(err, errNoResult) {
					t.Errorf("Result error = %v, want errNoResult", err)
				}
			case tt.kind != "":
				var e *Error
				if !errors.As(err, &e) || e.Kind != tt.kind || e.Status != tt.status {
					t.Errorf("Result error = %#v, want kind %s status %d", err, tt.kind, tt.status)
				}
			case err != nil:
				t.Errorf("Result error = %v, want none", err)
			}
		})
	}
}

// codexSeedLines returns every line of the recorded streams.
func codexSeedLines(tb testing.TB) [][]byte {
	tb.Helper()
	files, _ := filepath.Glob(filepath.Join(codexTestdata, "*.jsonl"))
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

// FuzzCodexParse feeds the parser a stream of lines (the input split on
// newlines). It must never panic, must report at most one result, must
// never return an empty text event, and every error must have a kind.
func FuzzCodexParse(f *testing.F) {
	for _, l := range codexSeedLines(f) {
		f.Add(l)
	}
	for _, name := range []string{"text.jsonl", "tool_write.jsonl", "command.jsonl", "auth_error.jsonl", "auth_retry.jsonl", "unknown_model.jsonl"} {
		b, err := os.ReadFile(filepath.Join(codexTestdata, name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var p CodexParser
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
					if e.Tool == nil || e.Tool.Name == "" {
						t.Fatal("tool event without a tool name")
					}
				case EventInit:
					if e.SessionID == "" {
						t.Fatal("init event without a session id")
					}
				case EventRetry:
					if e.Err == nil || e.Attempt < 0 || e.MaxAttempts < 0 || e.RetryStatus() == "" {
						t.Fatalf("retry event %+v", e)
					}
				default:
					t.Fatalf("unknown event kind %v", e.Kind)
				}
			}
		}
		if results > 1 {
			t.Fatalf("%d result events, want at most one", results)
		}
		if results == 1 != p.Finished() {
			t.Fatalf("%d result events but Finished() = %v", results, p.Finished())
		}
		res, err := p.Result()
		if results == 1 && errors.Is(err, errNoResult) {
			t.Fatal("result event but Result() says none")
		}
		if err != nil && !errors.Is(err, errNoResult) {
			var e *Error
			if !errors.As(err, &e) || e.Kind == "" {
				t.Fatalf("error %v without a kind", err)
			}
		}
		_ = res
		if e := CodexStderrError(string(data)); e != nil && e.Kind == "" {
			t.Fatal("stderr error without a kind")
		}
	})
}
