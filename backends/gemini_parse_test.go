package backends

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// geminiTestdata is where the recorded gemini 0.61.0 streams live.
const geminiTestdata = "../testdata/gemini"

// geminiParseAll feeds every line of stream to a fresh parser and returns
// the events, the result, its error and how many lines were rejected.
func geminiParseAll(t testing.TB, stream []byte) (events []Event, res Result, err error, bad int) {
	t.Helper()
	var p GeminiParser
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

func geminiSummaries(events []Event) []string {
	var got []string
	for _, e := range events {
		got = append(got, summarize(e))
	}
	return got
}

func TestGeminiParseGolden(t *testing.T) {
	t.Parallel()
	const (
		sText    = "73008593-57e0-44af-bab5-786e1d81ebe0"
		sResume  = "925ecb59-118d-423d-b379-773bddf125c4"
		sPersona = "c0d50141-2604-4cb7-967e-7144c071b7fc"
		sTool    = "2a119520-e624-429a-8fb6-3a30378e685a"
		sPlan    = "68b1fc28-42e7-48b8-8bda-61b151b86bfe"
		sAuth    = "9fa439a7-4012-4157-bab7-fa6f10f12ab0"
		sServer  = "e160fc3e-84b9-4066-ae9f-f043498b0e88"
		sHung    = "9c98714e-31ce-4bcc-ab11-62ae2780cc88"
		readID   = "read_file__read_file_1795292634523_0"
		writeID  = "write_file__write_file_1795292635227_0"
		planID   = "write_file__write_file_1795292642414_0"
	)
	usage := Usage{InputTokens: 100, OutputTokens: 10}
	tests := []struct {
		file     string
		events   []string
		result   Result
		kind     ErrorKind
		status   int
		msgHas   string
		errIs    error
		noResult bool
	}{
		{
			file:   "text.jsonl",
			events: []string{"init " + sText, `text "Hello fro"`, `text "m the fak"`, `text "e model."`, `result "Hello from the fake model."`},
			result: Result{SessionID: sText, Text: "Hello from the fake model.", Usage: usage, Turns: 1, Duration: 129 * time.Millisecond},
		},
		{
			file:   "resume.jsonl",
			events: []string{"init " + sResume, `text "You ask"`, `text "ed abou"`, `text "t 42."`, `result "You asked about 42."`},
			result: Result{SessionID: sResume, Text: "You asked about 42.", Usage: usage, Turns: 1, Duration: 143 * time.Millisecond},
		},
		{
			// The runtime's persona change note is in the user message line,
			// which is not reply text.
			file:   "persona_resume.jsonl",
			events: []string{"init " + sPersona, `text "Your bu"`, `text "ild use"`, `text "s make."`, `result "Your build uses make."`},
			result: Result{SessionID: sPersona, Text: "Your build uses make.", Usage: usage, Turns: 1, Duration: 195 * time.Millisecond},
		},
		{
			file: "tool_write.jsonl",
			events: []string{
				"init " + sTool,
				`tool_use read_file ` + readID + ` {"file_path":"/CONFIG_DIR/memory.md"}`,
				"tool_result read_file " + readID + " ok",
				`text "I'll "`, `text "save "`, `text "that."`,
				`tool_use write_file ` + writeID + ` {"content":"# Memory\n\n- favourite colour: teal\n- deploys happen on Fridays\n","file_path":"/CONFIG_DIR/memory.md"}`,
				"tool_result write_file " + writeID + " ok",
				`text "\n\nSaved "`, `text "to mem"`, `text "ory."`,
				`result "Saved to memory."`,
			},
			result: Result{SessionID: sTool, Text: "Saved to memory.", Usage: Usage{InputTokens: 300, OutputTokens: 30}, Turns: 3, Duration: 868 * time.Millisecond},
		},
		{
			file: "plan_denied.jsonl",
			events: []string{
				"init " + sPlan,
				`tool_use write_file ` + planID + ` {"content":"# Memory\n\n- overwritten\n","file_path":"/CONFIG_DIR/memory.md"}`,
				"tool_result write_file " + planID + " error",
				`text "I could "`, `text "not save"`, `text " that."`,
				`result "I could not save that."`,
			},
			result: Result{SessionID: sPlan, Text: "I could not save that.", Usage: Usage{InputTokens: 200, OutputTokens: 20}, Turns: 2,
				Duration: 293 * time.Millisecond, PermissionDenials: []string{"write_file"}},
		},
		{
			file:   "auth_error.jsonl",
			events: []string{"init " + sAuth, `result "" error authentication_error`},
			result: Result{SessionID: sAuth},
			kind:   KindAuth, status: 401, errIs: ErrAuth,
			msgHas: "API key not valid",
		},
		{
			file:   "server_error.jsonl",
			events: []string{"init " + sServer, `result "" error api_error`},
			result: Result{SessionID: sServer},
			kind:   KindAPI, status: 500,
			msgHas: "Internal error encountered.",
		},
		{
			// Killed while the API hung: init and the user message only.
			file:     "hung.jsonl",
			events:   []string{"init " + sHung},
			noResult: true,
		},
		{
			// The stale resume fails before any line (see stale_session.stderr).
			file:     "stale_session.jsonl",
			noResult: true,
		},
		{
			file:     "stale_no_sessions.jsonl",
			noResult: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			stream, err := os.ReadFile(filepath.Join(geminiTestdata, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			events, res, err, bad := geminiParseAll(t, stream)
			if bad != 0 {
				t.Errorf("%d lines rejected", bad)
			}
			if diff := cmp.Diff(tt.events, geminiSummaries(events)); diff != "" {
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
				t.Fatalf("Result error = %v, want *Error", err)
			}
			if e.Kind != tt.kind || e.Status != tt.status {
				t.Errorf("error kind %s status %d, want %s %d", e.Kind, e.Status, tt.kind, tt.status)
			}
			if !strings.Contains(e.Message, tt.msgHas) {
				t.Errorf("message %q lacks %q", e.Message, tt.msgHas)
			}
			if tt.errIs != nil && !errors.Is(err, tt.errIs) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.errIs)
			}
			if last.Err != e {
				t.Errorf("result event error %v is not the Result error", last.Err)
			}
		})
	}

	// Every recording has expectations.
	files, _ := filepath.Glob(filepath.Join(geminiTestdata, "*.jsonl"))
	covered := map[string]bool{}
	for _, tt := range tests {
		covered[tt.file] = true
	}
	for _, f := range files {
		if !covered[filepath.Base(f)] {
			t.Errorf("%s has no golden expectations in TestGeminiParseGolden", filepath.Base(f))
		}
	}
}

// The stderr of the recorded runs without a result line.
func TestGeminiClassifyStderrRecorded(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file   string
		kind   ErrorKind // "" for nil
		msgHas string
	}{
		{"stale_session.stderr", KindStaleSession, "Invalid session identifier"},
		{"stale_no_sessions.stderr", KindStaleSession, "No previous sessions found"},
		{"hung.stderr", "", ""},
		{"text.stderr", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(geminiTestdata, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			e := ClassifyGeminiStderr(string(b))
			if tt.kind == "" {
				if e != nil {
					t.Errorf("ClassifyGeminiStderr = %v, want nil", e)
				}
				return
			}
			if e == nil || e.Kind != tt.kind || !strings.Contains(e.Message, tt.msgHas) {
				t.Errorf("ClassifyGeminiStderr = %#v, want kind %s with %q", e, tt.kind, tt.msgHas)
			}
		})
	}
}

func TestGeminiClassifyStderrHandWritten(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		stderr string
		kind   ErrorKind
		status int
	}{
		{"auth method missing (exit 41)", "Please set an Auth method in your /h/.gemini/settings.json or specify one of the following environment variables before running: GEMINI_API_KEY", KindAuth, 0},
		{"invalid auth method", "Invalid auth method selected.", KindAuth, 0},
		{"untrusted folder (exit 55)", "Gemini CLI is not running in a trusted folder. To proceed, add it to trusted folders", KindPermission, 0},
		{"json error body (-o json)", "{\n  \"error\": {\n    \"type\": \"Error\",\n    \"message\": \"[API Error: {\\\"error\\\":{\\\"code\\\":429}}]\",\n    \"code\": 429\n  }\n}", KindRateLimit, 429},
		{"nothing known", "Warning: 256-color support not detected.\nRipgrep is not available.", "", 0},
		{"empty", "", "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := ClassifyGeminiStderr(tt.stderr)
			if tt.kind == "" {
				if e != nil {
					t.Errorf("got %v, want nil", e)
				}
				return
			}
			if e == nil || e.Kind != tt.kind || e.Status != tt.status {
				t.Errorf("got %#v, want kind %s status %d", e, tt.kind, tt.status)
			}
		})
	}
}

func TestGeminiParseHandWritten(t *testing.T) {
	t.Parallel()
	const init = `{"type":"init","timestamp":"2026-11-21T20:00:00.000Z","session_id":"s1","model":"gemini-2.5-pro"}`
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
			name: "garbage, blank lines, user messages, unknown types, odd field types",
			lines: []string{
				"", "  ", "Warning: not json", "[1]", `"s"`, "{broken",
				init,
				`{"type":"message","role":"user","content":"hello"}`,
				`{"type":"future","payload":1}`,
				`{"type":"message","role":"assistant","content":7,"delta":true}`,
				`{"type":"message","role":"assistant","content":"kept","delta":true}`,
				`{"type":"result","status":"success","stats":{"input_tokens":"50","output_tokens":5.0,"cached":20,"duration_ms":"1500"}}`,
			},
			bad:    4,
			events: []string{"init s1", `text "kept"`, `result "kept"`},
			res:    &Result{SessionID: "s1", Text: "kept", Turns: 1, Duration: 1500 * time.Millisecond, Usage: Usage{InputTokens: 30, OutputTokens: 5, CacheReadTokens: 20}},
		},
		{
			name: "input and cached as gemini reports them",
			lines: []string{init,
				`{"type":"result","status":"success","stats":{"total_tokens":160,"input_tokens":150,"output_tokens":10,"cached":100,"input":50,"duration_ms":9}}`},
			events: []string{"init s1", `result ""`},
			res:    &Result{SessionID: "s1", Turns: 1, Duration: 9 * time.Millisecond, Usage: Usage{InputTokens: 50, OutputTokens: 10, CacheReadTokens: 100}},
		},
		{
			name: "a run that ends on a tool call has no reply",
			lines: []string{init,
				`{"type":"message","role":"assistant","content":"Let me look.","delta":true}`,
				`{"type":"tool_use","tool_name":"run_shell_command","tool_id":"t1","parameters":{"command":"ls"}}`,
				`{"type":"tool_result","tool_id":"t1","status":"error","output":"","error":{"type":"TOOL_EXECUTION_ERROR","message":"exit 1"}}`,
				`{"type":"result","status":"success","stats":{}}`},
			events: []string{"init s1", `text "Let me look."`, `tool_use run_shell_command t1 {"command":"ls"}`, "tool_result run_shell_command t1 error", `result ""`},
			res:    &Result{SessionID: "s1", Turns: 1},
		},
		{
			name: "a policy denial is a permission denial",
			lines: []string{init,
				`{"type":"tool_use","tool_name":"run_shell_command","tool_id":"t2","parameters":null}`,
				`{"type":"tool_result","tool_id":"t2","status":"error","error":{"type":"policy_violation","message":"Tool execution denied by policy."}}`,
				`{"type":"result","status":"success","stats":{}}`},
			events: []string{"init s1", "tool_use run_shell_command t2 ", "tool_result run_shell_command t2 error", `result ""`},
			res:    &Result{SessionID: "s1", Turns: 1, PermissionDenials: []string{"run_shell_command"}},
		},
		{
			name: "only one result; later lines ignored",
			lines: []string{init,
				`{"type":"result","status":"success","stats":{}}`,
				`{"type":"result","status":"error","error":{"type":"unknown","message":"late"}}`,
				`{"type":"message","role":"assistant","content":"late","delta":true}`},
			events: []string{"init s1", `result ""`},
		},
		{
			name:   "rate limit without a code (429 with retries off)",
			lines:  []string{init, `{"type":"result","status":"error","error":{"type":"unknown","message":"[API Error: Resource exhausted.]\nPlease wait and try again later. To increase your limits, request a quota increase through AI Studio, or switch to another /auth method"},"stats":{}}`},
			events: []string{"init s1", `result "" error rate_limit_error`},
			kind:   KindRateLimit,
		},
		{
			name:   "status word without a code",
			lines:  []string{init, `{"type":"result","status":"error","error":{"type":"unknown","message":"[API Error: {\"error\":{\"message\":\"nope\",\"status\":\"PERMISSION_DENIED\"}}]"}}`},
			events: []string{"init s1", `result "" error authentication_error`},
			kind:   KindAuth,
		},
		{
			name:   "connection refused",
			lines:  []string{init, `{"type":"result","status":"error","error":{"type":"unknown","message":"[API Error: exception TypeError: fetch failed sending request]"}}`},
			events: []string{"init s1", `result "" error api_error`},
			kind:   KindAPI,
		},
		{
			name:   "turn limit",
			lines:  []string{init, `{"type":"result","status":"error","error":{"type":"FatalTurnLimitedError","message":"Reached max session turns for this session."}}`},
			events: []string{"init s1", `result "" error max_turns`},
			kind:   KindMaxTurns,
		},
		{
			name: "invalid stream: the message comes from the error line",
			lines: []string{init,
				`{"type":"error","severity":"error","message":"Model stream ended with an empty response."}`,
				`{"type":"result","status":"error","stats":{}}`},
			events: []string{"init s1", `result "" error execution_error`},
			kind:   KindExecution,
		},
		{
			name:   "an unknown status is a failure",
			lines:  []string{init, `{"type":"result","status":"cancelled"}`},
			events: []string{"init s1", `result "" error execution_error`},
			kind:   KindExecution,
		},
		{
			name:   "a changed session id is announced again",
			lines:  []string{init, `{"type":"init","session_id":"s2"}`, `{"type":"init","session_id":"s2"}`},
			events: []string{"init s1", "init s2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			events, res, err, bad := geminiParseAll(t, []byte(strings.Join(tt.lines, "\n")))
			if diff := cmp.Diff(tt.events, geminiSummaries(events)); diff != "" {
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
				if !errors.As(err, &e) || e.Kind != tt.kind || e.Status != tt.status || e.Message == "" {
					t.Errorf("Result error = %#v, want kind %s status %d with a message", err, tt.kind, tt.status)
				}
			}
		})
	}
}

// geminiSeedLines returns every line of the recorded streams.
func geminiSeedLines(tb testing.TB) [][]byte {
	tb.Helper()
	files, _ := filepath.Glob(filepath.Join(geminiTestdata, "*.jsonl"))
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

// FuzzGeminiParse feeds the parser a stream of lines. It must never panic,
// must report at most one result, never an empty text event, and a failed
// result always has a kind; ClassifyGeminiStderr must not panic either.
func FuzzGeminiParse(f *testing.F) {
	for _, l := range geminiSeedLines(f) {
		f.Add(l)
	}
	for _, name := range []string{"text.jsonl", "tool_write.jsonl", "auth_error.jsonl", "plan_denied.jsonl"} {
		b, err := os.ReadFile(filepath.Join(geminiTestdata, name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_ = ClassifyGeminiStderr(string(data))
		var p GeminiParser
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
					t.Fatalf("unknown event kind %v", e.Kind)
				}
			}
		}
		if results > 1 {
			t.Fatalf("%d result events", results)
		}
		res, err := p.Result()
		if results == 0 && !errors.Is(err, errNoResult) {
			t.Fatalf("no result event but Result() = %+v, %v", res, err)
		}
		if results == 1 && errors.Is(err, errNoResult) {
			t.Fatal("result event but Result() says none")
		}
		var e *Error
		if errors.As(err, &e) && (e.Kind == "" || e.Message == "") {
			t.Fatalf("error without a kind or message: %#v", e)
		}
	})
}
