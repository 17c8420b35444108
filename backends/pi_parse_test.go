package backends

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// piParseAll feeds every line of stream to a fresh PiParser and returns the
// events in order, the final result, its error, and how many lines were
// rejected.
func piParseAll(t testing.TB, stream []byte) (events []Event, res Result, err error, bad int) {
	t.Helper()
	var p PiParser
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

// piTestdata is where the recorded pi 0.73.1 streams live.
const piTestdata = "../testdata/pi"

func TestPiParseGolden(t *testing.T) {
	t.Parallel()
	const (
		sText    = "01a1ffc2-9b24-7101-8740-0cb6d63f60f6"
		sResume  = "01a1ffc2-a4ff-7742-b95c-d052c937ae31"
		sPersona = "01a1ffc2-af55-7632-a355-0ade81c255e0"
		sTool    = "01a1ffc2-b85a-7504-9212-fb08dec05861"
		sPlan    = "01a1ffc2-bcfd-70dc-869b-cb2bbd668e09"
		sAuth    = "01a1ffc2-c1b8-7783-9806-9dfbe5340115"
		sServer  = "01a1ffc2-c657-77f0-b96a-d63feb0873be"
		sHang    = "01a1ffc2-cb43-7401-b57f-72c45ca38127"
		sRetry   = "01a1ffc3-50af-7121-a925-98454e9cba8b"
	)
	// The fake model answers every call with 100 input and 10 output
	// tokens; the test's models.json prices them at $3 and $15 a million.
	const oneCall = 0.00045000000000000004
	usage := func(calls int64) Usage { return Usage{InputTokens: 100 * calls, OutputTokens: 10 * calls} }
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
			events: []string{"init " + sText, `text "Hello fro"`, `text "m the fak"`, `text "e model."`},
			result: Result{SessionID: sText, Text: "Hello from the fake model.", CostUSD: oneCall, Usage: usage(1), Turns: 1},
		},
		{
			// A resumed run reports the same session id and only its own
			// messages, usage and cost.
			file:   "resume.jsonl",
			events: []string{"init " + sResume, `text "You ask"`, `text "ed abou"`, `text "t 42."`},
			result: Result{SessionID: sResume, Text: "You asked about 42.", CostUSD: oneCall, Usage: usage(1), Turns: 1},
		},
		{
			file:   "persona_resume.jsonl",
			events: []string{"init " + sPersona, `text "Your bu"`, `text "ild use"`, `text "s make."`},
			result: Result{SessionID: sPersona, Text: "Your build uses make.", CostUSD: oneCall, Usage: usage(1), Turns: 1},
		},
		{
			file: "tool_write.jsonl",
			events: []string{
				"init " + sTool,
				`tool_use read toolu_fake_0001 {"path":"/CONFIG_DIR/memory.md"}`,
				"tool_result read toolu_fake_0001 ok",
				`tool_use write toolu_fake_0002 {"content":"# Memory\n\n- favourite colour: teal\n- deploys happen on Fridays\n","path":"/CONFIG_DIR/memory.md"}`,
				"tool_result write toolu_fake_0002 ok",
				`text "Saved "`, `text "to mem"`, `text "ory."`,
			},
			result: Result{SessionID: sTool, Text: "Saved to memory.", CostUSD: 0.00135, Usage: usage(3), Turns: 3},
		},
		{
			// --tools without write: pi answers the call with "Tool write
			// not found", which is a permission denial.
			file: "plan_denied.jsonl",
			events: []string{
				"init " + sPlan,
				`tool_use write toolu_fake_0001 {"content":"# Memory\n\n- overwritten\n","path":"/CONFIG_DIR/memory.md"}`,
				"tool_result write toolu_fake_0001 error",
				`text "I coul"`, `text "d not "`, `text "write."`,
			},
			result: Result{SessionID: sPlan, Text: "I could not write.", CostUSD: 0.0009000000000000001, Usage: usage(2), Turns: 2,
				PermissionDenials: []string{"write"}},
		},
		{
			// pi exits 0; the error is in the assistant message.
			file:   "auth_error.jsonl",
			events: []string{"init " + sAuth},
			result: Result{SessionID: sAuth, Turns: 1},
			kind:   KindAuth, status: 401, errIs: ErrAuth,
			msgHas: "invalid x-api-key",
		},
		{
			file:   "server_error.jsonl",
			events: []string{"init " + sServer},
			result: Result{SessionID: sServer, Turns: 1},
			kind:   KindAPI, status: 500,
			msgHas: "upstream exploded",
		},
		{
			// pi's own retry: the failed attempt's agent_end is not the
			// outcome; the retried attempt's is.
			file:   "retry_success.jsonl",
			events: []string{"init " + sRetry, "retry 1/2 api_error", `text "Second"`, `text " time "`, `text "lucky."`},
			result: Result{SessionID: sRetry, Text: "Second time lucky.", CostUSD: oneCall, Usage: usage(1), Turns: 2},
		},
		{
			// Killed while the API hung: no agent_end.
			file:     "hang_killed.jsonl",
			events:   []string{"init " + sHang},
			noResult: true,
		},
		{
			// pi refuses an unknown --session before any output (see
			// stale_session.stderr and piFailure).
			file:     "stale_session.jsonl",
			noResult: true,
		},
		{
			// A session of another directory: pi asks on stdin and gives
			// up, on stderr (other_directory.stderr).
			file:     "other_directory.jsonl",
			noResult: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			stream, err := os.ReadFile(filepath.Join(piTestdata, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			events, res, err, bad := piParseAll(t, stream)
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
			if tt.noResult {
				if !errors.Is(err, errNoResult) {
					t.Errorf("Result error = %v, want errNoResult", err)
				}
				return
			}
			if diff := cmp.Diff(tt.result, res); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			if tt.kind == "" {
				if err != nil {
					t.Errorf("error = %v, want none", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Result error = %v (%T), want *Error", err, err)
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

// TestPiParseGoldenFilesCovered makes sure every recorded stream is in the
// golden table, so a new recording cannot go untested.
func TestPiParseGoldenFilesCovered(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join(piTestdata, "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded streams in %s (%v)", piTestdata, err)
	}
	covered := map[string]bool{
		"text.jsonl": true, "resume.jsonl": true, "persona_resume.jsonl": true, "tool_write.jsonl": true,
		"plan_denied.jsonl": true, "auth_error.jsonl": true, "server_error.jsonl": true,
		"retry_success.jsonl": true, "hang_killed.jsonl": true, "stale_session.jsonl": true,
		"other_directory.jsonl": true,
	}
	for _, f := range files {
		if !covered[filepath.Base(f)] {
			t.Errorf("%s has no golden expectations in TestPiParseGolden", filepath.Base(f))
		}
	}
}

// TestPiFailureRecorded classifies what pi printed on stderr when it
// stopped before its agent events.
func TestPiFailureRecorded(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file   string
		kind   ErrorKind
		msgHas string
	}{
		{"stale_session.stderr", KindStaleSession, "No session found matching"},
		{"other_directory.stderr", KindStaleSession, "Session found in different project"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			b, err := os.ReadFile(filepath.Join(piTestdata, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			e := piFailure(string(b), "")
			if e == nil || e.Kind != tt.kind || !strings.Contains(e.Message, tt.msgHas) {
				t.Fatalf("piFailure = %#v, want kind %s with %q", e, tt.kind, tt.msgHas)
			}
			if !errors.Is(e, ErrStaleSession) {
				t.Errorf("errors.Is(%v, ErrStaleSession) = false", e)
			}
		})
	}
}

func TestPiFailure(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name           string
		stderr, stdout string
		kind           ErrorKind // "" for nil
	}{
		{name: "nothing", kind: ""},
		{name: "unrelated crash", stderr: "TypeError: x is undefined\n    at main (cli.js:1:1)", kind: ""},
		{name: "no key", stderr: "No API key found for anthropic.\n\nUse /login to log into a provider", kind: KindAuth},
		{name: "no models", stderr: "No models available. Use /login to log into a provider", kind: KindAuth},
		{name: "session cwd gone", stderr: "Stored session working directory does not exist: /gone\nSession file: /h/s.jsonl", kind: KindStaleSession},
		{name: "question on stdout", stdout: "Session found in different project: /elsewhere", kind: KindStaleSession},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := piFailure(tt.stderr, tt.stdout)
			if tt.kind == "" {
				if e != nil {
					t.Errorf("piFailure = %v, want nil", e)
				}
				return
			}
			if e == nil || e.Kind != tt.kind || e.Message == "" {
				t.Errorf("piFailure = %#v, want kind %s", e, tt.kind)
			}
		})
	}
}

func TestPiParseHandWritten(t *testing.T) {
	t.Parallel()
	const (
		session = `{"type":"session","version":3,"id":"s1","cwd":"/w"}`
		start   = `{"type":"agent_start"}`
	)
	assistant := func(content, stop, errMsg string) string {
		m := `{"role":"assistant","content":` + content + `,"usage":{"input":1,"output":2,"cacheRead":3,"cacheWrite":4,"cost":{"total":0.25}},"stopReason":"` + stop + `"`
		if errMsg != "" {
			m += `,"errorMessage":` + strconv.Quote(errMsg)
		}
		return m + `}`
	}
	end := func(msgs ...string) string {
		return `{"type":"agent_end","messages":[` + strings.Join(msgs, ",") + `]}`
	}
	failed := func(msg string) []string {
		a := assistant(`[]`, "error", msg)
		return []string{session, start, `{"type":"message_end","message":` + a + `}`, end(a)}
	}
	tests := []struct {
		name     string
		lines    []string
		events   []string
		bad      int
		res      *Result
		kind     ErrorKind
		status   int
		noResult bool
	}{
		{
			name: "two text blocks read as a transcript; thinking is not text",
			lines: []string{
				session, start,
				`{"type":"message_update","assistantMessageEvent":{"type":"thinking_delta","delta":"hmm"}}`,
				`{"type":"message_update","assistantMessageEvent":{"type":"text_start","contentIndex":0}}`,
				`{"type":"message_update","assistantMessageEvent":{"type":"text_delta","delta":"First."}}`,
				`{"type":"message_update","assistantMessageEvent":{"type":"text_delta","delta":""}}`,
				`{"type":"message_update","assistantMessageEvent":{"type":"text_start","contentIndex":2}}`,
				`{"type":"message_update","assistantMessageEvent":{"type":"text_delta","delta":"Second."}}`,
				`{"type":"message_end","message":` + assistant(`[{"type":"text","text":"First."},{"type":"thinking","thinking":"hmm"},{"type":"text","text":"Second."}]`, "stop", "") + `}`,
				end(`{"role":"user","content":"hi"}`, assistant(`[{"type":"text","text":"First."},{"type":"text","text":"Second."}]`, "stop", "")),
			},
			events: []string{"init s1", `text "First."`, `text "\n\nSecond."`},
			res: &Result{SessionID: "s1", Text: "First.\n\nSecond.", CostUSD: 0.25, Turns: 1,
				Usage: Usage{InputTokens: 1, OutputTokens: 2, CacheReadTokens: 3, CacheCreationTokens: 4}},
		},
		{
			name: "garbage, blank lines, unknown types, odd field types",
			lines: []string{
				"", "   ", "not json", "[1,2,3]", `"a string"`, "{broken", "\x00\xff",
				`{"type":"future_thing","payload":{"x":1}}`,
				session, start,
				`{"type":"message_update","assistantMessageEvent":{"type":"text_delta","delta":7}}`,
				`{"type":"message_end","message":{"role":"assistant","content":"plain","usage":{"input":"5","output":1.0,"cost":{"total":"x"}},"stopReason":"stop"}}`,
				`{"type":"tool_execution_start","toolCallId":"t1","toolName":"bash","args":null}`,
				`{"type":"tool_execution_end","toolCallId":"t1","toolName":"bash","result":"odd","isError":true}`,
				`{"type":"agent_end","messages":"odd"}`,
			},
			bad:    5,
			events: []string{"init s1", "tool_use bash t1 ", "tool_result bash t1 error"},
			res:    &Result{SessionID: "s1", Text: "plain", Turns: 1, Usage: Usage{InputTokens: 5, OutputTokens: 1}},
		},
		{
			name:   "rate limit by status",
			lines:  failed(`429 {"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`),
			events: []string{"init s1"},
			kind:   KindRateLimit, status: 429,
		},
		{
			name:   "overloaded by status",
			lines:  failed(`529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`),
			events: []string{"init s1"},
			kind:   KindOverloaded, status: 529,
		},
		{
			name:   "invalid request",
			lines:  failed(`400 {"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long"}}`),
			events: []string{"init s1"},
			kind:   KindInvalid, status: 400,
		},
		{
			name:   "error type in a body without status",
			lines:  failed(`{"type":"error","error":{"type":"authentication_error","message":"nope"}}`),
			events: []string{"init s1"},
			kind:   KindAuth,
		},
		{
			name:   "no key for the provider",
			lines:  failed("No API key for provider: openai"),
			events: []string{"init s1"},
			kind:   KindAuth,
		},
		{
			name:   "connection error, no status",
			lines:  failed("Connection error."),
			events: []string{"init s1"},
			kind:   KindAPI,
		},
		{
			name:   "error without a message",
			lines:  failed(""),
			events: []string{"init s1"},
			kind:   KindExecution,
		},
		{
			name: "aborted",
			lines: []string{session, start,
				end(assistant(`[]`, "aborted", "Request was aborted")),
			},
			events: []string{"init s1"},
			kind:   KindCanceled,
		},
		{
			name: "retries run out: the final failure counts",
			lines: []string{session, start,
				end(assistant(`[]`, "error", "503 overloaded")),
				`{"type":"auto_retry_start","attempt":1,"maxAttempts":1,"delayMs":10,"errorMessage":"503 overloaded"}`,
				start,
				end(assistant(`[]`, "error", "502 bad gateway")),
				`{"type":"auto_retry_end","success":false,"attempt":1,"finalError":"502 bad gateway"}`,
			},
			events: []string{"init s1", "retry 1/1 api_error"},
			kind:   KindAPI, status: 502,
		},
		{
			name: "killed while waiting to retry",
			lines: []string{session, start,
				end(assistant(`[]`, "error", "503 overloaded")),
				`{"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":2000,"errorMessage":"503 overloaded"}`,
			},
			events:   []string{"init s1", "retry 1/3 api_error"},
			noResult: true,
		},
		{
			name: "agent_end without messages falls back to the last message_end",
			lines: []string{session, start,
				`{"type":"message_end","message":` + assistant(`[{"type":"text","text":"Done."}]`, "stop", "") + `}`,
				`{"type":"agent_end"}`,
			},
			events: []string{"init s1"},
			res: &Result{SessionID: "s1", Text: "Done.", CostUSD: 0.25, Turns: 1,
				Usage: Usage{InputTokens: 1, OutputTokens: 2, CacheReadTokens: 3, CacheCreationTokens: 4}},
		},
		{
			name: "a tool error that is not a missing tool is no denial",
			lines: []string{session, start,
				`{"type":"tool_execution_start","toolCallId":"t1","toolName":"edit","args":{"path":"x"}}`,
				`{"type":"tool_execution_end","toolCallId":"t1","toolName":"edit","result":{"content":[{"type":"text","text":"Could not find oldText"}]},"isError":true}`,
				`{"type":"tool_execution_start","toolCallId":"t2","toolName":"bash","args":{}}`,
				`{"type":"tool_execution_end","toolCallId":"t2","toolName":"bash","result":{"content":[{"type":"text","text":"Tool bash not found"}]},"isError":true}`,
				end(),
			},
			events: []string{"init s1", `tool_use edit t1 {"path":"x"}`, "tool_result edit t1 error", "tool_use bash t2 {}", "tool_result bash t2 error"},
			res:    &Result{SessionID: "s1", PermissionDenials: []string{"bash"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			events, res, err, bad := piParseAll(t, []byte(strings.Join(tt.lines, "\n")))
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
			if tt.noResult {
				if !errors.Is(err, errNoResult) {
					t.Errorf("Result error = %v, want errNoResult", err)
				}
				return
			}
			if tt.res != nil {
				if diff := cmp.Diff(*tt.res, res); diff != "" {
					t.Errorf("result (-want +got):\n%s", diff)
				}
			}
			if tt.kind == "" {
				if err != nil {
					t.Errorf("Result error = %v, want none", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Kind != tt.kind || e.Status != tt.status || e.Message == "" {
				t.Errorf("Result error = %#v, want kind %s status %d with a message", err, tt.kind, tt.status)
			}
		})
	}
}

func TestPiParseNoResult(t *testing.T) {
	t.Parallel()
	var p PiParser
	p.Parse([]byte(`{"type":"session","id":"s1"}`))
	p.Parse([]byte(`{"type":"agent_start"}`))
	res, err := p.Result()
	if !errors.Is(err, errNoResult) {
		t.Errorf("Result error = %v, want errNoResult", err)
	}
	if res.SessionID != "s1" || p.SessionID() != "s1" {
		t.Errorf("session id = %q / %q, want s1", res.SessionID, p.SessionID())
	}
}

// piSeedLines returns every line of the recorded streams.
func piSeedLines(tb testing.TB) [][]byte {
	tb.Helper()
	files, _ := filepath.Glob(filepath.Join(piTestdata, "*.jsonl"))
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

// FuzzPiParse feeds the parser a stream of lines (the input split on
// newlines). It must never panic, never return a result event (the
// outcome comes from Result), never return an empty text event, and
// Result must agree with itself.
func FuzzPiParse(f *testing.F) {
	for _, l := range piSeedLines(f) {
		f.Add(l)
	}
	for _, name := range []string{"text.jsonl", "tool_write.jsonl", "auth_error.jsonl", "retry_success.jsonl", "plan_denied.jsonl"} {
		b, err := os.ReadFile(filepath.Join(piTestdata, name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var p PiParser
		inits := 0
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
				case EventToolUse, EventToolResult:
					if e.Tool == nil {
						t.Fatal("tool event without a tool")
					}
				case EventInit:
					inits++
					if e.SessionID == "" {
						t.Fatal("init event without a session id")
					}
				case EventRetry:
					if e.Err == nil || e.Attempt < 0 || e.MaxAttempts < 0 || e.RetryStatus() == "" {
						t.Fatalf("retry event %+v", e)
					}
				default:
					t.Fatalf("unexpected event kind %v", e.Kind)
				}
			}
		}
		res, err := p.Result()
		if res.SessionID != p.SessionID() {
			t.Fatalf("result session %q, parser session %q", res.SessionID, p.SessionID())
		}
		if inits == 0 && p.SessionID() != "" {
			t.Fatal("a session id without an init event")
		}
		var e *Error
		if errors.As(err, &e) && (e.Kind == "" || e.Message == "") {
			t.Fatalf("error without a kind or message: %#v", e)
		}
		if err != nil && e == nil && !errors.Is(err, errNoResult) {
			t.Fatalf("unexpected error %v", err)
		}
	})
}

// BenchmarkPiParse parses a realistic run: the tool_write recording.
func BenchmarkPiParse(b *testing.B) {
	stream, err := os.ReadFile(filepath.Join(piTestdata, "tool_write.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(stream), []byte("\n"))
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		var p PiParser
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
