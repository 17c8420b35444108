package backends

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/rs/zerolog"
)

// opencodeFakeEnv is the gateway's environment as a test pretends it.
func opencodeFakeEnv(extra ...string) []string {
	return append(append(os.Environ(),
		"DISCORD_BOT_TOKEN=discord-secret",
		"WEBHOOK_SECRET=webhook-secret",
		"GATEWAY_UNRELATED=nope",
		"AWS_SECRET_ACCESS_KEY=aws-secret",
		"NODE_OPTIONS=--require /tmp/evil.js",
		"OPENAI_API_KEY=sk-openai",
		"ANTHROPIC_API_KEY=sk-ant",
		"OPENCODE_DISABLE_MODELS_FETCH=1",
	), extra...)
}

func newTestOpencode(t *testing.T, bin string, extraEnv ...string) *Opencode {
	t.Helper()
	return NewOpencode(Options{
		Binary:    bin,
		Env:       opencodeFakeEnv(extraEnv...),
		KillGrace: 500 * time.Millisecond,
		Log:       zerolog.New(zerolog.NewTestWriter(t)),
	})
}

// opencodeRecorded is the path of a recorded opencode stream.
func opencodeRecorded(t *testing.T, name string) (stream, stderr string) {
	t.Helper()
	stream, err := filepath.Abs(filepath.Join(opencodeTestdata, name+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stream); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(opencodeTestdata, name+".stderr")); err == nil {
		stderr = string(b)
	}
	return stream, stderr
}

func opencodeEnvMap(env []string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

func TestOpencodeRegistered(t *testing.T) {
	b, err := New("opencode", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Name() != "opencode" {
		t.Errorf("Name = %q", b.Name())
	}
	if _, ok := b.(*Opencode); !ok {
		t.Errorf("New(opencode) = %T, want *Opencode", b)
	}
}

func TestOpencodeArgsStdinEnvCwd(t *testing.T) {
	t.Parallel()
	workDir := t.TempDir()
	sysFile := filepath.Join(t.TempDir(), "system.md")
	if err := os.WriteFile(sysFile, []byte("You are Ada."), 0o600); err != nil {
		t.Fatal(err)
	}
	prompt := "hello --model x; $(rm -rf /) \"quoted\"\nsecond line " + strings.Repeat("long ", 40000) // > 128 KiB
	title := `hello --model x; $(rm -rf /) "quoted"`
	base := []string{"run", "--format", "json", "--pure", "--title", title}

	tests := []struct {
		name      string
		req       Request
		env       []string
		wantArgs  []string
		wantInstr []string
		// wantConfig is OPENCODE_CONFIG_CONTENT without "instructions";
		// nil means the variable is absent.
		wantConfig map[string]any
		// wantPerm is OPENCODE_PERMISSION; nil means absent.
		wantPerm map[string]any
	}{
		{
			name:       "minimal: default mode asks, so run mode refuses",
			req:        Request{Prompt: prompt, WorkDir: workDir},
			wantArgs:   base,
			wantConfig: nil,
			wantPerm:   map[string]any{"edit": "ask", "bash": "ask", "webfetch": "ask"},
		},
		{
			name: "everything",
			req: Request{
				Prompt: prompt, WorkDir: workDir, SystemPromptFile: sysFile,
				SessionID: "ses_42", Model: "anthropic/claude-x", AllowedTools: []string{"Read", "Write", "Bash(git *)", "WebFetch"},
				PermissionMode: "acceptEdits", MaxTurns: 7,
			},
			wantArgs:   []string{"run", "--format", "json", "--pure", "--session", "ses_42", "--model", "anthropic/claude-x"},
			wantInstr:  []string{"You are Ada."},
			wantConfig: map[string]any{"agent": map[string]any{"build": map[string]any{"steps": 7.0}}},
			wantPerm: map[string]any{"edit": "allow", "read": "allow", "webfetch": "allow",
				"bash": map[string]any{"*": "ask", "git *": "allow"}},
		},
		{
			name:      "system prompt text only goes to a temp file",
			req:       Request{Prompt: prompt, WorkDir: workDir, SystemPrompt: "Persona text", PermissionMode: "acceptEdits"},
			wantArgs:  base,
			wantInstr: []string{"Persona text"},
			wantPerm:  map[string]any{"edit": "allow", "bash": "ask", "webfetch": "ask"},
		},
		{
			name:      "plan: the plan agent, edits and bash denied even when allowed",
			req:       Request{Prompt: prompt, WorkDir: workDir, SystemPromptFile: sysFile, PermissionMode: "plan", AllowedTools: []string{"Write", "Bash", "Grep"}},
			wantArgs:  append(slices.Clone(base), "--agent", "plan"),
			wantInstr: []string{"You are Ada."},
			wantConfig: map[string]any{"agent": map[string]any{"plan": map[string]any{
				"permission": map[string]any{"edit": "deny", "bash": "deny", "webfetch": "ask", "grep": "allow"}}}},
			wantPerm: map[string]any{"edit": "deny", "bash": "deny", "webfetch": "ask", "grep": "allow"},
		},
		{
			name:      "bypassPermissions: --auto, the operator's rules untouched",
			req:       Request{Prompt: prompt, WorkDir: workDir, SystemPromptFile: sysFile, PermissionMode: "bypassPermissions"},
			env:       []string{`OPENCODE_PERMISSION={"bash":{"rm *":"deny"}}`},
			wantArgs:  append(slices.Clone(base), "--auto"),
			wantInstr: []string{"You are Ada."},
			wantPerm:  map[string]any{"bash": map[string]any{"rm *": "deny"}},
		},
		{
			name: "the operator's config content and permissions are kept",
			req:  Request{Prompt: prompt, WorkDir: workDir, SystemPromptFile: sysFile, PermissionMode: "acceptEdits"},
			env: []string{
				`OPENCODE_CONFIG_CONTENT={"model":"fake/m","instructions":["` + sysFile + `"],"agent":{"build":{"temperature":0.5}}}`,
				`OPENCODE_PERMISSION={"webfetch":"allow","edit":"deny","lsp":"allow"}`,
			},
			wantArgs:   base,
			wantInstr:  []string{"You are Ada.", "You are Ada."},
			wantConfig: map[string]any{"model": "fake/m", "agent": map[string]any{"build": map[string]any{"temperature": 0.5}}},
			wantPerm:   map[string]any{"edit": "allow", "bash": "ask", "webfetch": "ask", "lsp": "allow"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stream, _ := opencodeRecorded(t, "text")
			bin, dir := opencodeFakeCLI(t, opencodeFakeStream, map[string]string{"STREAM": stream})
			res, err := newTestOpencode(t, bin, tt.env...).Run(t.Context(), tt.req, nil)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res.Text != "Hello from the fake model." {
				t.Errorf("result text = %q", res.Text)
			}
			rec := opencodeReadRecord(t, dir)
			if diff := cmp.Diff(tt.wantArgs, rec.Args); diff != "" {
				t.Errorf("argv (-want +got):\n%s", diff)
			}
			for _, a := range rec.Args {
				if strings.Contains(a, "second line") || len(a) > 100 {
					t.Errorf("prompt leaked onto argv: %.60q", a)
				}
			}
			if rec.Stdin != tt.req.Prompt {
				t.Errorf("stdin: got %d bytes, want the %d-byte prompt", len(rec.Stdin), len(tt.req.Prompt))
			}
			if diff := cmp.Diff(tt.wantInstr, rec.Instructions, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("instructions files (-want +got):\n%s", diff)
			}
			if rec.Cwd != workDir {
				t.Errorf("cwd = %q, want %q", rec.Cwd, workDir)
			}

			env := opencodeEnvMap(rec.Env)
			for _, k := range []string{"DISCORD_BOT_TOKEN", "WEBHOOK_SECRET", "GATEWAY_UNRELATED", "AWS_SECRET_ACCESS_KEY", "NODE_OPTIONS"} {
				if _, ok := env[k]; ok {
					t.Errorf("%s reached the CLI", k)
				}
			}
			for k, want := range map[string]string{"OPENAI_API_KEY": "sk-openai", "ANTHROPIC_API_KEY": "sk-ant",
				"OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1"} {
				if env[k] != want {
					t.Errorf("%s = %q in the CLI, want %q", k, env[k], want)
				}
			}
			if env["PATH"] == "" {
				t.Error("PATH did not reach the CLI")
			}

			config, hasConfig := env["OPENCODE_CONFIG_CONTENT"]
			var gotConfig map[string]any
			if hasConfig {
				if err := json.Unmarshal([]byte(config), &gotConfig); err != nil {
					t.Fatalf("OPENCODE_CONFIG_CONTENT %q: %v", config, err)
				}
				delete(gotConfig, "instructions")
				if len(gotConfig) == 0 {
					gotConfig = nil
				}
			}
			if diff := cmp.Diff(tt.wantConfig, gotConfig); diff != "" {
				t.Errorf("OPENCODE_CONFIG_CONTENT (-want +got):\n%s", diff)
			}
			var gotPerm map[string]any
			if perm, ok := env["OPENCODE_PERMISSION"]; ok {
				if err := json.Unmarshal([]byte(perm), &gotPerm); err != nil {
					t.Fatalf("OPENCODE_PERMISSION %q: %v", perm, err)
				}
			}
			if diff := cmp.Diff(tt.wantPerm, gotPerm); diff != "" {
				t.Errorf("OPENCODE_PERMISSION (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOpencodeTempSystemPromptRemoved(t *testing.T) {
	t.Parallel()
	stream, _ := opencodeRecorded(t, "text")
	bin, dir := opencodeFakeCLI(t, opencodeFakeStream, map[string]string{"STREAM": stream})
	if _, err := newTestOpencode(t, bin).Run(t.Context(), Request{Prompt: "hi", SystemPrompt: "Persona"}, nil); err != nil {
		t.Fatal(err)
	}
	var config struct {
		Instructions []string `json:"instructions"`
	}
	rec := opencodeReadRecord(t, dir)
	if err := json.Unmarshal([]byte(opencodeEnvMap(rec.Env)["OPENCODE_CONFIG_CONTENT"]), &config); err != nil || len(config.Instructions) != 1 {
		t.Fatalf("instructions = %v (%v)", config.Instructions, err)
	}
	if _, err := os.Stat(config.Instructions[0]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temp system prompt file %s left behind (err %v)", config.Instructions[0], err)
	}
}

func TestOpencodeTitle(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"Say hello.":                       "Say hello.",
		"  first line\nsecond":             "first line",
		"":                                 "gateway",
		"--help me":                        "gateway --help me",
		"tab\there":                        "tab here",
		strings.Repeat("é", 70):            strings.Repeat("é", 60) + "…",
		"## Update: memory.md changed\nhi": "## Update: memory.md changed",
	}
	for in, want := range tests {
		if got := opencodeTitle(in); got != want {
			t.Errorf("opencodeTitle(%.20q) = %q, want %q", in, got, want)
		}
	}
}

func TestOpencodeEvents(t *testing.T) {
	t.Parallel()
	stream, _ := opencodeRecorded(t, "tool_write")
	bin, _ := opencodeFakeCLI(t, opencodeFakeStream, map[string]string{"STREAM": stream})
	var got collected
	res, err := newTestOpencode(t, bin).Run(t.Context(), Request{Prompt: "hi"}, got.emit)
	if err != nil {
		t.Fatal(err)
	}
	want := []EventKind{EventInit, EventToolUse, EventToolResult, EventToolUse, EventToolResult, EventText, EventResult}
	if diff := cmp.Diff(want, got.kinds()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	wantRes := Result{SessionID: "ses_e003b49acffeEi4jhx25Kw3kVl", Text: "Saved to memory.", CostUSD: 0.00135, Turns: 3,
		Usage: Usage{InputTokens: 300, OutputTokens: 30}}
	if diff := cmp.Diff(wantRes, res, opencodeApprox, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
}

func TestOpencodeErrorsFromTheStream(t *testing.T) {
	t.Parallel()
	tests := []struct {
		recording string
		exit      string
		session   string
		wantKind  ErrorKind
		wantIs    error
		status    int
	}{
		// opencode exits 1 on these, but the exit code is not what decides.
		{"auth_error", "1", "", KindAuth, ErrAuth, 401},
		{"auth_error", "0", "", KindAuth, ErrAuth, 401},
		{"stale_session", "1", "ses_gone", KindStaleSession, ErrStaleSession, 0},
		{"stale_session", "0", "ses_gone", KindStaleSession, ErrStaleSession, 0},
		{"stale_session", "1", "", KindCrashed, nil, 0}, // a new session cannot be stale
		{"text", "1", "", "", nil, 0},                   // a finished stream is a success
		{"default_denied", "0", "", "", nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.recording+"/exit"+tt.exit+"/"+tt.session, func(t *testing.T) {
			t.Parallel()
			stream, stderr := opencodeRecorded(t, tt.recording)
			bin, _ := opencodeFakeCLI(t, opencodeFakeStream, map[string]string{"STREAM": stream, "EXIT": tt.exit, "STDERR": stderr})
			res, err := newTestOpencode(t, bin).Run(t.Context(), Request{Prompt: "hi", SessionID: tt.session}, nil)
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
			if e.Stderr != strings.TrimSpace(stderr) {
				t.Errorf("stderr tail = %q, want %q", e.Stderr, strings.TrimSpace(stderr))
			}
			if tt.wantKind == KindCrashed && !strings.Contains(e.Message, "Error: Session not found") {
				t.Errorf("message = %q, want the CLI's error line", e.Message)
			}
		})
	}
}

func TestOpencodeNoOutput(t *testing.T) {
	t.Parallel()
	bin, _ := opencodeFakeCLI(t, opencodeFakeStream, map[string]string{"STREAM": streamFile(t, ""), "EXIT": "0"})
	_, err := newTestOpencode(t, bin).Run(t.Context(), Request{Prompt: "hi"}, nil)
	if KindOf(err) != KindCrashed || !strings.Contains(err.Error(), "exit status 0") {
		t.Errorf("Run error = %v, want KindCrashed mentioning exit status 0", err)
	}
}

func TestOpencodeTimeoutKillsGroup(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{opencodeFakeGrandchild, opencodeFakeHangIgnoreTerm} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			bin, dir := opencodeFakeCLI(t, mode, nil)
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
			defer cancel()
			deadline, _ := ctx.Deadline()
			var got collected
			_, err := newTestOpencode(t, bin).Run(ctx, Request{Prompt: "hi"}, got.emit)
			late := time.Since(deadline)
			if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Run error = %v, want KindTimeout wrapping DeadlineExceeded", err)
			}
			// The fake was running (it printed its first line) when the
			// deadline hit; otherwise this test proves nothing.
			if diff := cmp.Diff([]EventKind{EventInit}, got.kinds()); diff != "" {
				t.Fatalf("events (-want +got):\n%s", diff)
			}
			if late > 2*time.Second {
				t.Errorf("Run returned %v after the deadline", late)
			}
			rec := opencodeReadRecord(t, dir)
			if !processGone(rec.Pid) {
				t.Errorf("fake CLI %d still running after Run returned", rec.Pid)
			}
			if rec.GrandchildPid != 0 {
				waitFor(t, 5*time.Second, "the grandchild to die", func() bool { return processGone(rec.GrandchildPid) })
			}
		})
	}
}

// opencode prints no final line: a run killed between two steps must not
// pass for a finished one.
func TestOpencodeTimeoutBetweenSteps(t *testing.T) {
	t.Parallel()
	bin, _ := opencodeFakeCLI(t, opencodeFakeStepThenHang, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	var got collected
	res, err := newTestOpencode(t, bin).Run(ctx, Request{Prompt: "hi"}, got.emit)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("Run = %+v, %v; want KindTimeout", res, err)
	}
	if res.SessionID != "ses_fake" {
		t.Errorf("session = %q, want the one seen", res.SessionID)
	}
	if diff := cmp.Diff([]EventKind{EventInit, EventText}, got.kinds()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestOpencodeCancel(t *testing.T) {
	t.Parallel()
	bin, dir := opencodeFakeCLI(t, opencodeFakeHang, nil)
	ctx, cancel := context.WithCancel(t.Context())
	emit := func(e Event) {
		if e.Kind == EventInit {
			cancel()
		}
	}
	_, err := newTestOpencode(t, bin).Run(ctx, Request{Prompt: "hi"}, emit)
	if KindOf(err) != KindCanceled || !errors.Is(err, context.Canceled) {
		t.Fatalf("Run error = %v, want KindCanceled wrapping context.Canceled", err)
	}
	if rec := opencodeReadRecord(t, dir); !processGone(rec.Pid) {
		t.Errorf("fake CLI %d still running", rec.Pid)
	}
}

func TestOpencodeNotFound(t *testing.T) {
	t.Parallel()
	for _, bin := range []string{"/nonexistent/opencode", "opencode-definitely-not-installed"} {
		_, err := NewOpencode(Options{Binary: bin}).Run(t.Context(), Request{Prompt: "hi"}, nil)
		var e *Error
		if !errors.As(err, &e) || e.Kind != KindNotFound {
			t.Fatalf("Run(%s) error = %v, want KindNotFound", bin, err)
		}
		if !strings.Contains(e.Message, "npm install --prefix .tools/opencode opencode-ai@"+Tested["opencode"]) || !strings.Contains(e.Message, "AGENT_CLI_PATH") {
			t.Errorf("message %q does not say how to fix it", e.Message)
		}
	}
}

func TestOpencodeBadSettings(t *testing.T) {
	t.Parallel()
	stream, _ := opencodeRecorded(t, "text")
	bin, _ := opencodeFakeCLI(t, opencodeFakeStream, map[string]string{"STREAM": stream})
	_, err := newTestOpencode(t, bin).Run(t.Context(), Request{Prompt: "hi", WorkDir: "/nonexistent/dir"}, nil)
	if KindOf(err) != KindExecution || !strings.Contains(err.Error(), "/nonexistent/dir") {
		t.Errorf("Run error = %v, want a work dir error", err)
	}
	for _, env := range []string{"OPENCODE_CONFIG_CONTENT={not json", "OPENCODE_CONFIG_CONTENT=null", "OPENCODE_PERMISSION=[1]"} {
		_, err := newTestOpencode(t, bin, env).Run(t.Context(), Request{Prompt: "hi", SystemPrompt: "p"}, nil)
		name, _, _ := strings.Cut(env, "=")
		if KindOf(err) != KindExecution || !strings.Contains(err.Error(), name+" must be a JSON object") {
			t.Errorf("%s: Run error = %v, want a settings error", env, err)
		}
	}
}

func TestOpencodePermissions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		mode    string
		allowed []string
		want    opencodePerm
	}{
		{"", nil, opencodePerm{rules: map[string]any{"edit": "ask", "bash": "ask", "webfetch": "ask"}}},
		{"default", []string{"Edit"}, opencodePerm{rules: map[string]any{"edit": "allow", "bash": "ask", "webfetch": "ask"}}},
		{"acceptEdits", []string{"Bash", "TodoWrite", " "}, opencodePerm{rules: map[string]any{"edit": "allow", "bash": "allow", "webfetch": "ask", "todowrite": "allow"}}},
		{"plan", []string{"MultiEdit", "Bash(ls)", "Read"}, opencodePerm{agent: "plan", rules: map[string]any{"edit": "deny", "bash": "deny", "webfetch": "ask", "read": "allow"}}},
		{"bypassPermissions", []string{"Write"}, opencodePerm{auto: true}},
	}
	for _, tt := range tests {
		got := opencodePermissions(tt.mode, tt.allowed)
		if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(opencodePerm{})); diff != "" {
			t.Errorf("opencodePermissions(%q, %v) (-want +got):\n%s", tt.mode, tt.allowed, diff)
		}
	}
}
