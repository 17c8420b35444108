package backends

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"
)

// Hand-written streams in the shape claude 2.1.330 prints.
const (
	streamText = `{"type":"system","subtype":"init","cwd":"/w","session_id":"sess-1","tools":["Read","Write"],"model":"claude-x","permissionMode":"acceptEdits"}
{"type":"stream_event","event":{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[]}},"session_id":"sess-1","parent_tool_use_id":null}
{"type":"stream_event","event":{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}},"session_id":"sess-1","parent_tool_use_id":null}
{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}},"session_id":"sess-1","parent_tool_use_id":null}
{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":", world"}},"session_id":"sess-1","parent_tool_use_id":null}
{"type":"assistant","message":{"id":"msg_1","model":"claude-x","role":"assistant","content":[{"type":"text","text":"Hello, world"}]},"session_id":"sess-1","parent_tool_use_id":null}
{"type":"stream_event","event":{"type":"content_block_stop","index":0},"session_id":"sess-1","parent_tool_use_id":null}
{"type":"stream_event","event":{"type":"message_stop"},"session_id":"sess-1","parent_tool_use_id":null}
{"type":"result","subtype":"success","is_error":false,"duration_ms":1234,"num_turns":1,"result":"Hello, world","session_id":"sess-1","total_cost_usd":0.0123,"usage":{"input_tokens":10,"cache_creation_input_tokens":5,"cache_read_input_tokens":100,"output_tokens":7},"permission_denials":[]}
`
)

// fakeEnv is the gateway's environment as a test pretends it: secrets that
// must stay behind, credentials that must go through.
func fakeEnv() []string {
	return append(os.Environ(),
		"DISCORD_BOT_TOKEN=discord-secret",
		"WEBHOOK_SECRET=webhook-secret",
		"GATEWAY_UNRELATED=nope",
		"AWS_SECRET_ACCESS_KEY=aws-secret",
		"ANTHROPIC_API_KEY=sk-test",
		"ANTHROPIC_BASE_URL=http://127.0.0.1:9",
		"CLAUDE_CODE_MAX_RETRIES=0",
		"IS_SANDBOX=1",
	)
}

func newTestClaude(t *testing.T, bin string) *Claude {
	t.Helper()
	return NewClaude(Options{
		Binary:    bin,
		Env:       fakeEnv(),
		KillGrace: 500 * time.Millisecond,
		Log:       zerolog.New(zerolog.NewTestWriter(t)),
	})
}

// streamFile writes a stream for the fake CLI to print.
func streamFile(t *testing.T, stream string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "stream.jsonl")
	if err := os.WriteFile(p, []byte(stream), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

type collected struct {
	events []Event
}

func (c *collected) emit(e Event) { c.events = append(c.events, e) }

func (c *collected) kinds() []EventKind {
	var ks []EventKind
	for _, e := range c.events {
		ks = append(ks, e.Kind)
	}
	return ks
}

func TestClaudeRegistered(t *testing.T) {
	b, err := New("claude", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Name() != "claude" {
		t.Errorf("Name = %q", b.Name())
	}
	if _, ok := b.(*Claude); !ok {
		t.Errorf("New(claude) = %T, want *Claude", b)
	}
}

func TestClaudeArgsStdinEnvCwd(t *testing.T) {
	t.Parallel()
	workDir := t.TempDir()
	sysFile := filepath.Join(t.TempDir(), "system.md")
	if err := os.WriteFile(sysFile, []byte("You are Ada."), 0o600); err != nil {
		t.Fatal(err)
	}
	prompt := "hello --model opus; $(rm -rf /) \"quoted\"\nsecond line " + strings.Repeat("long ", 40000) // > 128 KiB

	base := []string{"-p", "--output-format", "stream-json", "--verbose", "--include-partial-messages"}
	tests := []struct {
		name     string
		req      Request
		wantArgs []string
		wantSys  string
	}{
		{
			name:     "minimal",
			req:      Request{Prompt: prompt, WorkDir: workDir},
			wantArgs: base,
		},
		{
			name: "everything",
			req: Request{
				Prompt: prompt, WorkDir: workDir, SystemPromptFile: sysFile,
				SessionID: "sess-42", Model: "opus", AllowedTools: []string{"Read", "Write", "Bash(git *)"},
				PermissionMode: "acceptEdits", MaxTurns: 7,
			},
			wantArgs: append(slices.Clone(base),
				"--append-system-prompt-file", sysFile,
				"--allowedTools", "Read,Write,Bash(git *)",
				"--permission-mode", "acceptEdits",
				"--max-turns", "7",
				"--resume", "sess-42",
				"--model", "opus"),
			wantSys: "You are Ada.",
		},
		{
			name:     "system prompt text only goes to a temp file",
			req:      Request{Prompt: prompt, WorkDir: workDir, SystemPrompt: "Persona text"},
			wantArgs: append(slices.Clone(base), "--append-system-prompt-file", "<temp>"),
			wantSys:  "Persona text",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			bin, dir := fakeCLI(t, fakeStream, map[string]string{"STREAM": streamFile(t, streamText)})
			var got collected
			res, err := newTestClaude(t, bin).Run(t.Context(), tt.req, got.emit)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res.Text != "Hello, world" {
				t.Errorf("result text = %q", res.Text)
			}
			rec := readRecord(t, dir)

			args := slices.Clone(rec.Args)
			if i := slices.Index(args, "--append-system-prompt-file"); i >= 0 && tt.wantArgs[len(tt.wantArgs)-1] == "<temp>" {
				if _, err := os.Stat(args[i+1]); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("temp system prompt file %s left behind (err %v)", args[i+1], err)
				}
				args[i+1] = "<temp>"
			}
			if diff := cmp.Diff(tt.wantArgs, args); diff != "" {
				t.Errorf("argv (-want +got):\n%s", diff)
			}
			for _, a := range rec.Args {
				if strings.Contains(a, "hello") {
					t.Errorf("prompt leaked onto argv: %.40q", a)
				}
			}
			if rec.Stdin != tt.req.Prompt {
				t.Errorf("stdin: got %d bytes, want the %d-byte prompt", len(rec.Stdin), len(tt.req.Prompt))
			}
			if rec.SystemPrompt != tt.wantSys {
				t.Errorf("system prompt file content = %q, want %q", rec.SystemPrompt, tt.wantSys)
			}
			if rec.Cwd != workDir {
				t.Errorf("cwd = %q, want %q", rec.Cwd, workDir)
			}

			env := map[string]string{}
			for _, kv := range rec.Env {
				k, v, _ := strings.Cut(kv, "=")
				env[k] = v
			}
			for _, k := range []string{"DISCORD_BOT_TOKEN", "WEBHOOK_SECRET", "GATEWAY_UNRELATED", "AWS_SECRET_ACCESS_KEY"} {
				if _, ok := env[k]; ok {
					t.Errorf("%s reached the CLI", k)
				}
			}
			for k, want := range map[string]string{"ANTHROPIC_API_KEY": "sk-test", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9", "CLAUDE_CODE_MAX_RETRIES": "0", "IS_SANDBOX": "1"} {
				if env[k] != want {
					t.Errorf("%s = %q in the CLI, want %q", k, env[k], want)
				}
			}
			if env["PATH"] == "" {
				t.Error("PATH did not reach the CLI")
			}
		})
	}
}

func TestClaudeEvents(t *testing.T) {
	t.Parallel()
	bin, _ := fakeCLI(t, fakeStream, map[string]string{"STREAM": streamFile(t, streamText)})
	var got collected
	res, err := newTestClaude(t, bin).Run(t.Context(), Request{Prompt: "hi"}, got.emit)
	if err != nil {
		t.Fatal(err)
	}
	wantRes := Result{
		SessionID: "sess-1", Text: "Hello, world", CostUSD: 0.0123, SessionCostUSD: 0.0123, Turns: 1, Duration: 1234 * time.Millisecond,
		Model: "claude-x",
		Usage: Usage{InputTokens: 10, OutputTokens: 7, CacheReadTokens: 100, CacheCreationTokens: 5},
	}
	want := []Event{
		{Kind: EventInit, SessionID: "sess-1", Model: "claude-x"},
		{Kind: EventText, SessionID: "sess-1", Text: "Hello"},
		{Kind: EventText, SessionID: "sess-1", Text: ", world"},
		{Kind: EventResult, SessionID: "sess-1", Result: &wantRes},
	}
	if diff := cmp.Diff(want, got.events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantRes, res); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
}

// recorded returns the path of a recorded claude stream, and the recorded
// stderr next to it if there is one.
func recorded(t *testing.T, name string) (stream, stderr string) {
	t.Helper()
	stream = filepath.Join(claudeTestdata, name+".jsonl")
	if _, err := os.Stat(stream); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(claudeTestdata, name+".stderr")); err == nil {
		stderr = string(b)
	}
	return stream, stderr
}

func TestClaudeErrorsFromTheStream(t *testing.T) {
	t.Parallel()
	tests := []struct {
		recording string
		exit      string
		wantKind  ErrorKind
		wantIs    error
		status    int
	}{
		// The CLI exits 1 on these, but the exit code is not what decides.
		{"auth_error", "1", KindAuth, ErrAuth, 401},
		{"auth_error", "0", KindAuth, ErrAuth, 401},
		{"server_error", "1", KindAPI, nil, 500},
		{"max_turns", "1", KindMaxTurns, nil, 0},
		{"stale_session", "1", KindStaleSession, ErrStaleSession, 0},
		{"root_bypass", "1", KindPermission, nil, 0},
		{"text", "1", "", nil, 0}, // a result line that says success is a success
	}
	for _, tt := range tests {
		t.Run(tt.recording+"/exit"+tt.exit, func(t *testing.T) {
			t.Parallel()
			stream, stderr := recorded(t, tt.recording)
			bin, _ := fakeCLI(t, fakeStream, map[string]string{"STREAM": stream, "EXIT": tt.exit, "STDERR": stderr})
			res, err := newTestClaude(t, bin).Run(t.Context(), Request{Prompt: "hi", SessionID: "0b1e6f7c-3d2a-4c5b-9e8f-7a6b5c4d3e2f"}, nil)
			if tt.wantKind == "" {
				if err != nil || res.Text == "" {
					t.Fatalf("Run = %+v, %v; want a result", res, err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Run error = %v (%T), want *Error", err, err)
			}
			if e.Kind != tt.wantKind || e.Status != tt.status {
				t.Errorf("kind, status = %s, %d; want %s, %d (%v)", e.Kind, e.Status, tt.wantKind, tt.status, err)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.wantIs)
			}
			if tt.wantKind == KindPermission && e.Message != rootRefusalMessage {
				t.Errorf("root refusal message = %q, want %q", e.Message, rootRefusalMessage)
			}
			if e.Stderr != strings.TrimSpace(stderr) {
				t.Errorf("stderr tail = %q, want %q", e.Stderr, strings.TrimSpace(stderr))
			}
		})
	}
}

func TestClaudeNoOutput(t *testing.T) {
	t.Parallel()
	bin, _ := fakeCLI(t, fakeStream, map[string]string{"STREAM": streamFile(t, ""), "EXIT": "0"})
	_, err := newTestClaude(t, bin).Run(t.Context(), Request{Prompt: "hi"}, nil)
	if KindOf(err) != KindCrashed || !strings.Contains(err.Error(), "exit status 0") {
		t.Errorf("Run error = %v, want KindCrashed mentioning exit status 0", err)
	}
}

func TestClaudeCrashMidStream(t *testing.T) {
	t.Parallel()
	bin, _ := fakeCLI(t, fakeCrash, nil)
	var got collected
	_, err := newTestClaude(t, bin).Run(t.Context(), Request{Prompt: "hi"}, got.emit)
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindCrashed {
		t.Fatalf("Run error = %v, want KindCrashed", err)
	}
	if !strings.Contains(e.Stderr, "Error: fake crash") {
		t.Errorf("stderr tail = %q, want the CLI's stderr", e.Stderr)
	}
	if !strings.Contains(e.Message, "exit status 3") || !strings.Contains(e.Message, "at main (cli.js:1:1)") {
		t.Errorf("message = %q, want the exit status and the last stderr line", e.Message)
	}
	if diff := cmp.Diff([]EventKind{EventInit, EventText}, got.kinds()); diff != "" {
		t.Errorf("events before the crash (-want +got):\n%s", diff)
	}
}

func TestClaudeGarbageLinesAreSkipped(t *testing.T) {
	t.Parallel()
	bin, _ := fakeCLI(t, fakeGarbage, map[string]string{"STREAM": streamFile(t, streamText)})
	var got collected
	res, err := newTestClaude(t, bin).Run(t.Context(), Request{Prompt: "hi"}, got.emit)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "Hello, world" || res.SessionID != "sess-1" {
		t.Errorf("result = %+v", res)
	}
	if diff := cmp.Diff([]EventKind{EventInit, EventText, EventText, EventResult}, got.kinds()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestClaudeLongLines(t *testing.T) {
	t.Parallel()
	bin, _ := fakeCLI(t, fakeLongLine, nil)
	var got collected
	res, err := newTestClaude(t, bin).Run(t.Context(), Request{Prompt: "hi"}, got.emit)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Text != "done" || res.CostUSD != 0.5 {
		t.Errorf("result = %+v, want the result after the long lines", res)
	}
	// The 10 MB line arrives whole; the 20 MB line (over the 16 MiB limit)
	// is skipped, not fatal.
	var texts []int
	for _, e := range got.events {
		if e.Kind == EventText {
			texts = append(texts, len(e.Text))
		}
	}
	if diff := cmp.Diff([]int{10 << 20}, texts); diff != "" {
		t.Errorf("text event sizes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]EventKind{EventInit, EventText, EventResult}, got.kinds()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestClaudeTimeoutKillsGroup(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{fakeGrandchild, fakeHangIgnoreTerm} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			bin, dir := fakeCLI(t, mode, nil)
			c := newTestClaude(t, bin)
			const timeout = 3 * time.Second
			ctx, cancel := context.WithTimeout(t.Context(), timeout)
			defer cancel()
			deadline, _ := ctx.Deadline()
			var got collected
			_, err := c.Run(ctx, Request{Prompt: "hi"}, got.emit)
			late := time.Since(deadline)
			if !errors.Is(err, ErrTimeout) {
				t.Fatalf("Run error = %v, want KindTimeout", err)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Run error = %v, want it to wrap context.DeadlineExceeded", err)
			}
			// The fake was running (it printed its init line) when the
			// deadline hit; otherwise this test proves nothing.
			if diff := cmp.Diff([]EventKind{EventInit}, got.kinds()); diff != "" {
				t.Fatalf("events (-want +got):\n%s", diff)
			}
			// SIGTERM works at once; SIGTERM ignored costs the 500 ms grace.
			if late > 2*time.Second {
				t.Errorf("Run returned %v after the deadline", late)
			}
			rec := readRecord(t, dir)
			if !processGone(rec.Pid) {
				t.Errorf("fake CLI %d still running after Run returned", rec.Pid)
			}
			if rec.GrandchildPid != 0 {
				waitFor(t, 5*time.Second, "the grandchild to die", func() bool { return processGone(rec.GrandchildPid) })
			}
		})
	}
}

func TestClaudeCancel(t *testing.T) {
	t.Parallel()
	bin, dir := fakeCLI(t, fakeHang, nil)
	ctx, cancel := context.WithCancel(t.Context())
	emit := func(e Event) {
		if e.Kind == EventInit {
			cancel() // the user pressed stop as soon as the run began
		}
	}
	_, err := newTestClaude(t, bin).Run(ctx, Request{Prompt: "hi"}, emit)
	if KindOf(err) != KindCanceled {
		t.Fatalf("Run error = %v, want KindCanceled", err)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Run error = %v, want it to wrap context.Canceled", err)
	}
	if rec := readRecord(t, dir); !processGone(rec.Pid) {
		t.Errorf("fake CLI %d still running", rec.Pid)
	}
}

func TestClaudeNotFound(t *testing.T) {
	t.Parallel()
	for _, bin := range []string{"/nonexistent/claude", "claude-definitely-not-installed"} {
		_, err := NewClaude(Options{Binary: bin}).Run(t.Context(), Request{Prompt: "hi"}, nil)
		var e *Error
		if !errors.As(err, &e) || e.Kind != KindNotFound {
			t.Fatalf("Run(%s) error = %v, want KindNotFound", bin, err)
		}
		if !strings.Contains(e.Message, "npm install --prefix .tools/claude @anthropic-ai/claude-code@"+Tested["claude"]) || !strings.Contains(e.Message, "AGENT_CLI_PATH") {
			t.Errorf("message %q does not say how to fix it", e.Message)
		}
	}
}

func TestClaudeBadWorkDir(t *testing.T) {
	t.Parallel()
	bin, _ := fakeCLI(t, fakeStream, map[string]string{"STREAM": streamFile(t, streamText)})
	_, err := newTestClaude(t, bin).Run(t.Context(), Request{Prompt: "hi", WorkDir: "/nonexistent/dir"}, nil)
	if KindOf(err) != KindExecution || !strings.Contains(err.Error(), "/nonexistent/dir") {
		t.Errorf("Run error = %v, want a work dir error", err)
	}
}

func TestLineSplitter(t *testing.T) {
	t.Parallel()
	// Exercised end to end by TestClaudeLongLines; here the edges.
	s := &lineSplitter{max: 8}
	var got []string
	data := "ab\r\n0123456789abc\nok\n01234567\nlast"
	for len(data) > 0 {
		// Offer at most max bytes, as a Scanner with that buffer would.
		chunk := data[:min(len(data), 8)]
		adv, tok, err := s.split([]byte(chunk), len(data) <= 8)
		if err != nil {
			t.Fatal(err)
		}
		if adv == 0 {
			t.Fatalf("no progress at %q", data)
		}
		if tok != nil {
			got = append(got, string(tok))
		}
		data = data[adv:]
	}
	if diff := cmp.Diff([]string{"ab", "ok", "last"}, got); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
	if s.skipped != 2 {
		t.Errorf("skipped = %d, want 2", s.skipped)
	}
}

// Retry lines in the shape claude 2.1.330 prints while it retries the model
// API with its default settings (testdata/claude/auth_retry.jsonl,
// unreachable.jsonl).
const (
	retryConnLine = `{"type":"system","subtype":"api_retry","attempt":%d,"max_retries":10,"retry_delay_ms":504,"error_status":null,"error":"unknown","session_id":"sess-1"}`
	textDeltaLine = `{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Working on it"}},"session_id":"sess-1","parent_tool_use_id":null}`
)

// With claude's default retries a refused key or an unreachable model API
// keeps claude retrying for minutes; the adapter reads the retry lines,
// stops claude and names the failure. When the deadline comes first, the
// error says what claude was retrying and whether the model had answered.
func TestClaudeRetriesEndOrNameTheTurn(t *testing.T) {
	t.Parallel()
	recorded := func(name string) string {
		b, err := os.ReadFile(filepath.Join(claudeTestdata, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	tests := []struct {
		name     string
		stream   string
		deadline time.Duration // the gateway's query timeout
		kind     ErrorKind
		status   int
		is       error // errors.Is(err, is) must hold
		output   bool  // Error.ModelOutput
	}{
		{name: "auth refused, recorded", stream: recorded("auth_retry.jsonl"), deadline: time.Minute, kind: KindAuth, status: 401, is: ErrAuth},
		{name: "auth refused, partial messages, recorded", stream: recorded("auth_retry_partial.jsonl"), deadline: time.Minute, kind: KindAuth, status: 401, is: ErrAuth},
		{name: "unreachable, recorded", stream: recorded("unreachable.jsonl"), deadline: time.Minute, kind: KindUnreachable, is: ErrUnreachable},
		{name: "unreachable, partial messages, recorded", stream: recorded("unreachable_partial.jsonl"), deadline: time.Minute, kind: KindUnreachable, is: ErrUnreachable},
		{
			name:     "unreachable at the deadline",
			stream:   fakeInit + "\n" + fmt.Sprintf(retryConnLine, 1) + "\n" + fmt.Sprintf(retryConnLine, 2) + "\n",
			deadline: 1500 * time.Millisecond,
			kind:     KindUnreachable, is: context.DeadlineExceeded,
		},
		{
			name:     "silent timeout",
			stream:   fakeInit + "\n",
			deadline: 1500 * time.Millisecond,
			kind:     KindTimeout, is: ErrTimeout,
		},
		{
			// Thinking streams no text, but the model is at work.
			name:     "timeout after the model started",
			stream:   fakeInit + "\n" + `{"type":"stream_event","event":{"type":"message_start","message":{"id":"msg_1"}},"session_id":"sess-1","parent_tool_use_id":null}` + "\n",
			deadline: 1500 * time.Millisecond,
			kind:     KindTimeout, is: ErrTimeout, output: true,
		},
		{
			name:     "timeout after output",
			stream:   fakeInit + "\n" + textDeltaLine + "\n",
			deadline: 1500 * time.Millisecond,
			kind:     KindTimeout, is: ErrTimeout, output: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			bin, dir := fakeCLI(t, fakeStreamHang, map[string]string{"STREAM": streamFile(t, tt.stream)})
			ctx, cancel := context.WithTimeout(t.Context(), tt.deadline)
			defer cancel()
			start := time.Now()
			_, err := newTestClaude(t, bin).Run(ctx, Request{Prompt: "hi"}, nil)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Run error = %v, want *Error", err)
			}
			if e.Kind != tt.kind || e.Status != tt.status || e.ModelOutput != tt.output {
				t.Errorf("kind, status, output = %s, %d, %t; want %s, %d, %t (%v)", e.Kind, e.Status, e.ModelOutput, tt.kind, tt.status, tt.output, err)
			}
			if !errors.Is(err, tt.is) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.is)
			}
			if tt.deadline == time.Minute && time.Since(start) > 15*time.Second {
				t.Errorf("took %v: the turn should end as soon as the retries show it cannot succeed", time.Since(start))
			}
			if rec := readRecord(t, dir); !processGone(rec.Pid) {
				t.Errorf("fake CLI %d still running", rec.Pid)
			}
		})
	}
}
