package backends

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"
)

func TestCodexRegistered(t *testing.T) {
	t.Parallel()
	b, err := New("codex", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Name() != "codex" {
		t.Errorf("Name = %q", b.Name())
	}
}

func TestCodexSandbox(t *testing.T) {
	t.Parallel()
	tests := []struct {
		mode    string
		allowed []string
		want    string
	}{
		{"bypassPermissions", nil, "danger-full-access"},
		{"acceptEdits", nil, "workspace-write"},
		{"plan", []string{"Write"}, "read-only"},
		{"default", []string{"Read", "Glob"}, "read-only"},
		{"default", []string{"Read", "Write"}, "workspace-write"},
		{"default", []string{"Edit"}, "workspace-write"},
		{"default", []string{"apply_patch"}, "workspace-write"},
		{"", []string{"Write"}, ""},
		{"unknownMode", nil, ""},
	}
	for _, tt := range tests {
		if got := CodexSandbox(tt.mode, tt.allowed); got != tt.want {
			t.Errorf("CodexSandbox(%q, %v) = %q, want %q", tt.mode, tt.allowed, got, tt.want)
		}
	}
}

func TestCodexArgs(t *testing.T) {
	t.Parallel()
	const uuid = "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
	keyEnv := []string{"HOME=/h", "OPENAI_API_KEY=sk-1"}
	provider := []string{
		"-c", `model_provider="gateway-openai"`,
		"-c", `model_providers.gateway-openai.name="OpenAI (agent gateway)"`,
		"-c", `model_providers.gateway-openai.base_url="https://api.openai.com/v1"`,
		"-c", `model_providers.gateway-openai.env_key="OPENAI_API_KEY"`,
		"-c", `model_providers.gateway-openai.wire_api="responses"`,
	}
	head := []string{"exec", "--json", "--skip-git-repo-check", "-c", `approval_policy="never"`}
	cat := func(parts ...[]string) []string { return slices.Concat(parts...) }
	tests := []struct {
		name     string
		req      Request
		env      []string
		profile  string
		persona  string
		provider string // the user's, from config.toml
		want     []string
	}{
		{
			name: "bare: codex's own config and login",
			want: cat(head, []string{"-"}),
		},
		{
			name:    "new session with key, persona profile, model and mode",
			req:     Request{Model: "gpt-5.5", PermissionMode: "acceptEdits"},
			env:     keyEnv,
			profile: "gateway-persona-1",
			persona: "ignored: the profile has it",
			want: cat(head, []string{"-c", `sandbox_mode="workspace-write"`}, provider,
				[]string{"-p", "gateway-persona-1", "-m", "gpt-5.5", "-"}),
		},
		{
			name:    "resume; base URL from OPENAI_BASE_URL",
			req:     Request{SessionID: uuid, PermissionMode: "bypassPermissions"},
			env:     []string{"OPENAI_API_KEY=sk-1", "OPENAI_BASE_URL=http://127.0.0.1:9/v1"},
			profile: "gateway-persona-2",
			want: cat(head, []string{"-c", `sandbox_mode="danger-full-access"`}, provider[:4],
				[]string{"-c", `model_providers.gateway-openai.base_url="http://127.0.0.1:9/v1"`}, provider[6:],
				[]string{"-p", "gateway-persona-2", "resume", uuid, "-"}),
		},
		{
			// A proxy, Azure or a local model the user set up: the key
			// and OPENAI_BASE_URL must not send the turn elsewhere.
			name:     "the user's own provider wins over the key",
			req:      Request{Model: "gpt-5.5"},
			env:      []string{"HOME=/h", "OPENAI_API_KEY=sk-1", "OPENAI_BASE_URL=http://127.0.0.1:9/v1"},
			profile:  "gateway-persona-3",
			provider: "corp-proxy",
			want:     cat(head, []string{"-c", `model_provider="corp-proxy"`, "-p", "gateway-persona-3", "-m", "gpt-5.5", "-"}),
		},
		{
			name:     "the user's provider without a key",
			provider: "ollama",
			want:     cat(head, []string{"-c", `model_provider="ollama"`, "-"}),
		},
		{
			// codex's built-in openai provider reads no key from the
			// environment: the gateway's provider carries it.
			name:     "the user chose the built-in openai",
			env:      keyEnv,
			provider: "openai",
			want:     cat(head, provider, []string{"-"}),
		},
		{
			name:    "no CODEX_HOME or HOME: the persona goes on argv",
			req:     Request{PermissionMode: "plan"},
			persona: "Be \"brief\".\n",
			want: cat(head, []string{"-c", `sandbox_mode="read-only"`,
				"-c", `developer_instructions="Be \"brief\".\n"`, "-"}),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := codexArgs(tt.req, tt.env, tt.profile, tt.persona, tt.provider)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("args (-want +got):\n%s", diff)
			}
		})
	}
}

// codexUserProviderTests are config.toml files and the provider each
// selects; they seed FuzzCodexUserProvider.
var codexUserProviderTests = []struct {
	name    string
	config  string
	want    string
	wantKey string // env_key of the selected provider
	wantErr bool
}{
	{name: "empty", config: ""},
	{name: "no provider", config: "model = \"gpt-5.5\"\n[model_providers.x]\nbase_url = \"http://x\"\n"},
	{name: "top level", config: "model_provider = \"corp\"\n[model_providers.corp]\nbase_url = \"http://proxy/v1\"\n", want: "corp"},
	{name: "with its key variable", config: "model_provider = \"azure\"\n[model_providers.other]\nenv_key = \"NO\"\n[model_providers.azure]\nenv_key = \"AZURE_OPENAI_API_KEY\"\n", want: "azure", wantKey: "AZURE_OPENAI_API_KEY"},
	{name: "key variable of the wrong type", config: "model_provider = \"azure\"\n[model_providers.azure]\nenv_key = 1\n", wantErr: true},
	{name: "spaces, comment, literal string", config: "# mine\n  model_provider   =   'azure'   # trailing\n", want: "azure"},
	{name: "only inside a table", config: "[model_providers.x]\nmodel_provider = \"nope\"\n[profiles.p]\nmodel_provider = \"inactive\"\n"},
	{name: "active profile", config: "model_provider = \"a\"\nprofile = \"work\"\n[profiles.work]\nmodel_provider = \"b\"\n", want: "b"},
	{name: "active profile without one", config: "model_provider = \"a\"\nprofile = \"work\"\n[profiles.work]\nmodel = \"m\"\n", want: "a"},
	{name: "profile names a missing table", config: "model_provider = \"a\"\nprofile = \"gone\"\n", want: "a"},
	{name: "dotted key", config: "profiles.work.model_provider = \"b\"\nprofile = \"work\"\n", want: "b"},
	{name: "multi-line string before", config: "developer_instructions = \"\"\"\nmodel_provider = \"fake\"\n\"\"\"\nmodel_provider = \"real\"\n", want: "real"},
	{name: "quoted key", config: "\"model_provider\" = \"q\"\n", want: "q"},
	{name: "escapes", config: "model_provider = \"a\\\"b\"\n", want: "a\"b"},
	{name: "invalid toml", config: "model_provider = \n", wantErr: true},
	{name: "wrong type", config: "model_provider = 3\n", wantErr: true},
	// go-toml v2.2.4 panics on this when decoding into a struct that
	// types profile as a string (found by FuzzCodexUserProvider).
	{name: "a table under a string key", config: "[profile.0]0", wantErr: true},
	{name: "profile is a table", config: "model_provider = \"a\"\n[profile]\nx = 1\n", wantErr: true},
}

func TestCodexUserProvider(t *testing.T) {
	t.Parallel()
	for _, tt := range codexUserProviderTests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := codexUserProvider([]byte(tt.config))
			if (err != nil) != tt.wantErr {
				t.Fatalf("codexUserProvider error = %v, want error %t", err, tt.wantErr)
			}
			if want := (codexProvider{ID: tt.want, EnvKey: tt.wantKey}); got != want {
				t.Errorf("codexUserProvider = %+v, want %+v", got, want)
			}
		})
	}
}

func TestReadCodexUserProvider(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	if got, err := readCodexUserProvider(home); got != (codexProvider{}) || err != nil {
		t.Errorf("no config.toml: %q, %v; want none", got, err)
	}
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte("model_provider = \"corp\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := readCodexUserProvider(home); got.ID != "corp" || err != nil {
		t.Errorf("readCodexUserProvider = %q, %v; want corp", got, err)
	}
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte("model_provider = [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readCodexUserProvider(home); err == nil {
		t.Error("broken config.toml: no error")
	}
}

// FuzzCodexUserProvider: any config either fails to parse or yields a
// provider that, written back as a top-level key, reads back the same.
func FuzzCodexUserProvider(f *testing.F) {
	for _, tt := range codexUserProviderTests {
		f.Add([]byte(tt.config))
	}
	f.Fuzz(func(t *testing.T, config []byte) {
		got, err := codexUserProvider(config)
		if err != nil {
			if got != (codexProvider{}) {
				t.Fatalf("provider %+v with error %v", got, err)
			}
			return
		}
		if got.ID == "" && got.EnvKey != "" {
			t.Fatalf("a key variable without a provider: %+v", got)
		}
		back, err := codexUserProvider([]byte("model_provider = " + codexTOMLString(got.ID) + "\n"))
		if err != nil || (back.ID != got.ID && utf8.ValidString(got.ID)) {
			t.Fatalf("provider %q reads back as %q, %v", got.ID, back.ID, err)
		}
	})
}

func TestCodexTOMLString(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		"", "plain", `quote " and backslash \`, "lines\nand\ttabs\r\n", "bell \a del \x7f nul \x00",
		"unicode: 日本語 🎉 \u2028", "invalid \xff utf-8",
	} {
		q := codexTOMLString(s)
		if strings.ContainsAny(q[1:len(q)-1], "\n\r\x00\x7f") {
			t.Errorf("%q: raw control characters in %q", s, q)
		}
		// The escapes used are a subset of Go's, so Go can read it back.
		back, err := strconv.Unquote(q)
		if err != nil {
			t.Errorf("%q: %q does not read back: %v", s, q, err)
			continue
		}
		if want := strings.ToValidUTF8(s, "\uFFFD"); back != want {
			t.Errorf("round trip %q -> %q -> %q", s, q, back)
		}
	}
}

// codexTestLog is a logger writing to the test log.
func codexTestLog(t *testing.T) zerolog.Logger { return zerolog.New(zerolog.NewTestWriter(t)) }

func TestCodexRunFakeCLI(t *testing.T) {
	t.Parallel()
	stream := codexWriteStream(t,
		`{"type":"thread.started","thread_id":"0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"}`,
		`{"type":"turn.started"}`,
		`{"type":"item.completed","item":{"id":"item_0","type":"agent_message","text":"Done."}}`,
		`{"type":"turn.completed","usage":{"input_tokens":10,"cached_input_tokens":0,"output_tokens":2}}`,
	)
	bin, dir := codexFakeCLI(t, codexFakeStream, map[string]string{"STREAM": stream})
	home := t.TempDir()
	work := t.TempDir()
	sysFile := filepath.Join(t.TempDir(), "system.md")
	persona := "# Identity\nYou are \"Tova\".\n" + strings.Repeat("memory line\n", 20000) // > 128 KiB
	if err := os.WriteFile(sysFile, []byte(persona), 0o600); err != nil {
		t.Fatal(err)
	}
	prompt := strings.Repeat("long prompt ", 30000) + "END" // > 128 KiB
	c := NewCodex(Options{Binary: bin, Log: codexTestLog(t), Env: []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home,
		"OPENAI_API_KEY=sk-test", "OPENAI_BASE_URL=http://127.0.0.1:1/v1",
		"DISCORD_BOT_TOKEN=secret", "WEBHOOK_X_SECRET=secret", "AWS_SECRET_ACCESS_KEY=secret",
	}})
	var events []string
	res, err := c.Run(context.Background(), Request{
		Prompt: prompt, SystemPrompt: persona, SystemPromptFile: sysFile,
		WorkDir: work, Model: "gpt-5.5", PermissionMode: "default", AllowedTools: []string{"Read", "Write"},
	}, func(e Event) { events = append(events, summarize(e)) })
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := []string{"init 0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", `text "Done."`, `result "Done."`}
	if diff := cmp.Diff(want, events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if res.Text != "Done." || res.SessionID != "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b" || res.Usage.InputTokens != 10 || res.Duration <= 0 {
		t.Errorf("result = %+v", res)
	}

	rec := codexReadRecord(t, dir)
	if rec.Stdin != prompt {
		t.Errorf("stdin has %d bytes, want the %d-byte prompt", len(rec.Stdin), len(prompt))
	}
	if rec.Cwd != work {
		t.Errorf("cwd = %q, want %q", rec.Cwd, work)
	}
	for _, a := range rec.Args {
		if len(a) > 4096 {
			t.Errorf("an argument of %d bytes: long text must not go on argv", len(a))
		}
	}
	i := slices.Index(rec.Args, "-p")
	if i < 0 || !strings.HasPrefix(rec.Args[i+1], codexPersonaPrefix) {
		t.Fatalf("no persona profile in args %q", rec.Args)
	}
	if !slices.Contains(rec.Args, `sandbox_mode="workspace-write"`) || !slices.Contains(rec.Args, "gpt-5.5") || rec.Args[len(rec.Args)-1] != "-" {
		t.Errorf("args = %q", rec.Args)
	}
	value, ok := strings.CutPrefix(strings.TrimSpace(rec.Profile[strings.Index(rec.Profile, "developer_instructions"):]), "developer_instructions = ")
	if !ok {
		t.Fatalf("profile = %.200q", rec.Profile)
	}
	if got, err := strconv.Unquote(value); err != nil || got != persona {
		t.Errorf("profile's developer_instructions is not the persona (%v)", err)
	}
	if left, _ := filepath.Glob(filepath.Join(home, ".codex", codexPersonaPrefix+"*")); len(left) > 0 {
		t.Errorf("persona profile left behind: %v", left)
	}
	env := strings.Join(rec.Env, "\n")
	for _, leak := range []string{"DISCORD_BOT_TOKEN", "WEBHOOK_X_SECRET", "AWS_SECRET_ACCESS_KEY"} {
		if strings.Contains(env, leak) {
			t.Errorf("the CLI saw %s", leak)
		}
	}
	if !slices.Contains(rec.Env, "OPENAI_API_KEY=sk-test") {
		t.Errorf("the CLI did not get OPENAI_API_KEY")
	}
}

// The stream decides, not the exit code.
func TestCodexRunErrorsFromContent(t *testing.T) {
	t.Parallel()
	const start = `{"type":"thread.started","thread_id":"0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"}`
	staleStderr, err := os.ReadFile(filepath.Join(codexTestdata, "stale_session.stderr"))
	if err != nil {
		t.Fatal(err)
	}
	planStderr, err := os.ReadFile(filepath.Join(codexTestdata, "plan_denied.stderr"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		lines   []string // nil: no stream at all
		stderr  string
		exit    string
		session string
		kind    ErrorKind // "" for success
		status  int
		denials []string
	}{
		{
			name:  "turn.failed with exit 0",
			lines: []string{start, `{"type":"error","message":"unexpected status 401 Unauthorized: bad key"}`, `{"type":"turn.failed","error":{"message":"unexpected status 401 Unauthorized: bad key"}}`},
			exit:  "0", kind: KindAuth, status: 401,
		},
		{
			name:  "turn.completed with exit 1",
			lines: []string{start, `{"type":"item.completed","item":{"id":"i","type":"agent_message","text":"ok"}}`, `{"type":"turn.completed","usage":{}}`},
			exit:  "1",
		},
		{
			name:   "a patch refused by the sandbox is a denial",
			lines:  []string{start, `{"type":"item.completed","item":{"id":"i","type":"agent_message","text":"no"}}`, `{"type":"turn.completed","usage":{}}`},
			stderr: string(planStderr), exit: "0", denials: []string{"apply_patch"},
		},
		{
			name:   "stale resume: empty stdout, the reason on stderr",
			stderr: string(staleStderr), exit: "1", session: "82492204-a7a1-45c8-b27d-4acf849f2603",
			kind: KindStaleSession,
		},
		{
			name:   "stale resume reported with exit 0",
			stderr: string(staleStderr), exit: "0", session: "82492204-a7a1-45c8-b27d-4acf849f2603",
			kind: KindStaleSession,
		},
		{
			name:  "a crash mid-stream",
			lines: []string{start, `{"type":"turn.started"}`, `{"type":"item.comp`},
			exit:  "0", stderr: "thread 'main' panicked at core/src/x.rs:1:1\n", kind: KindCrashed,
		},
		{
			name:  "an error line and a crash",
			lines: []string{start, `{"type":"error","message":"stream disconnected before completion: boom"}`},
			exit:  "101", kind: KindAPI,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			vars := map[string]string{"STDERR": tt.stderr, "EXIT": tt.exit}
			if tt.lines != nil {
				vars["STREAM"] = codexWriteStream(t, tt.lines...)
			}
			bin, _ := codexFakeCLI(t, codexFakeStream, vars)
			c := NewCodex(Options{Binary: bin, Log: codexTestLog(t), Env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}})
			res, err := c.Run(context.Background(), Request{Prompt: "hi", SessionID: tt.session, SystemPrompt: "persona"}, nil)
			if tt.kind == "" {
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
				if diff := cmp.Diff(tt.denials, res.PermissionDenials); diff != "" {
					t.Errorf("denials (-want +got):\n%s", diff)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Run error = %v (%T), want *Error", err, err)
			}
			if e.Kind != tt.kind || e.Status != tt.status {
				t.Errorf("kind, status = %s, %d; want %s, %d (%v)", e.Kind, e.Status, tt.kind, tt.status, e)
			}
			if strings.TrimSpace(tt.stderr) != "" && e.Stderr == "" {
				t.Errorf("the error lacks the stderr tail")
			}
		})
	}
}

// A session id codex cannot have issued is stale before anything runs.
func TestCodexRunNonUUIDSessionIsStale(t *testing.T) {
	t.Parallel()
	bin, dir := codexFakeCLI(t, codexFakeStream, nil)
	c := NewCodex(Options{Binary: bin, Env: []string{"PATH=" + os.Getenv("PATH")}})
	_, err := c.Run(context.Background(), Request{Prompt: "hi", SessionID: "my-thread-name"}, nil)
	if !errors.Is(err, ErrStaleSession) {
		t.Errorf("err = %v, want a stale session", err)
	}
	if _, serr := os.Stat(filepath.Join(dir, "record.json")); serr == nil {
		t.Error("the CLI was started")
	}
}

func TestCodexRunNotFound(t *testing.T) {
	t.Parallel()
	c := NewCodex(Options{Binary: filepath.Join(t.TempDir(), "no-codex")})
	_, err := c.Run(context.Background(), Request{Prompt: "hi"}, nil)
	if KindOf(err) != KindNotFound {
		t.Errorf("err = %v, want %s", err, KindNotFound)
	}
}

// The timeout kills the whole process group: the CLI, a grandchild it
// started, and a CLI that ignores SIGTERM.
func TestCodexRunTimeoutKillsGroup(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{codexFakeGrandchild, codexFakeHangIgnoreTerm} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			bin, dir := codexFakeCLI(t, mode, nil)
			home := t.TempDir()
			c := NewCodex(Options{Binary: bin, KillGrace: 300 * time.Millisecond, Log: codexTestLog(t),
				Env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home}})
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			var sessions []string
			started := time.Now()
			_, err := c.Run(ctx, Request{Prompt: "hang", SystemPrompt: "persona"}, func(e Event) {
				if e.Kind == EventInit {
					sessions = append(sessions, e.SessionID)
				}
			})
			if !errors.Is(err, ErrTimeout) {
				t.Fatalf("err = %v, want a timeout", err)
			}
			if took := time.Since(started); took > 5*time.Second {
				t.Errorf("Run took %v", took)
			}
			if len(sessions) != 1 {
				t.Errorf("init events = %v: the thread id should be announced before the hang", sessions)
			}
			rec := codexReadRecord(t, dir)
			waitFor(t, 5*time.Second, "the CLI to die", func() bool { return processGone(rec.Pid) })
			if rec.GrandchildPid != 0 {
				waitFor(t, 5*time.Second, "the grandchild to die", func() bool { return processGone(rec.GrandchildPid) })
			}
			if left, _ := filepath.Glob(filepath.Join(home, ".codex", codexPersonaPrefix+"*")); len(left) > 0 {
				t.Errorf("persona profile left behind: %v", left)
			}
		})
	}
}

func TestCodexRunCanceled(t *testing.T) {
	t.Parallel()
	bin, dir := codexFakeCLI(t, codexFakeHang, nil)
	c := NewCodex(Options{Binary: bin, KillGrace: 300 * time.Millisecond, Env: []string{"PATH=" + os.Getenv("PATH")}})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		// Cancel once the CLI runs (or after a while, failing the kind).
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if _, err := os.Stat(filepath.Join(dir, "record.json")); err == nil {
				break
			}
			time.Sleep(5 * time.Millisecond) // polling a file; no event to wait on
		}
		cancel()
	}()
	_, err := c.Run(ctx, Request{Prompt: "hang"}, nil)
	if KindOf(err) != KindCanceled {
		t.Errorf("err = %v, want %s", err, KindCanceled)
	}
}

// With a home codex's profile cannot be written to, the persona still
// arrives: as developer_instructions on argv.
func TestCodexRunPersonaOnArgvWhenHomeUnwritable(t *testing.T) {
	t.Parallel()
	stream := codexWriteStream(t, `{"type":"thread.started","thread_id":"0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"}`, `{"type":"turn.completed","usage":{}}`)
	bin, dir := codexFakeCLI(t, codexFakeStream, map[string]string{"STREAM": stream})
	c := NewCodex(Options{Binary: bin, Log: codexTestLog(t), Env: []string{"PATH=" + os.Getenv("PATH"), "HOME=/dev/null"}})
	if _, err := c.Run(context.Background(), Request{Prompt: "hi", SystemPrompt: "Be brief."}, nil); err != nil {
		t.Fatalf("Run: %v", err)
	}
	rec := codexReadRecord(t, dir)
	if !slices.Contains(rec.Args, `developer_instructions="Be brief."`) || slices.Contains(rec.Args, "-p") {
		t.Errorf("args = %q", rec.Args)
	}
}

// A provider the user selected in config.toml is kept, and the variable its
// env_key names reaches codex; the gateway's provider is not defined and
// its secrets stay behind.
func TestCodexRunKeepsUserProvider(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".codex"), 0o700); err != nil {
		t.Fatal(err)
	}
	config := "model_provider = \"azure\"\n[model_providers.azure]\nbase_url = \"https://example.openai.azure.com/openai\"\nenv_key = \"AZURE_OPENAI_API_KEY\"\n"
	if err := os.WriteFile(filepath.Join(home, ".codex", "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	bin, dir := codexFakeCLI(t, codexFakeStream, map[string]string{"STREAM": codexWriteStream(t, codexFakeStart, `{"type":"turn.completed","usage":{}}`), "EXIT": "0"})
	c := NewCodex(Options{Binary: bin, Log: codexTestLog(t), Env: []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home,
		"OPENAI_API_KEY=sk-1", "OPENAI_BASE_URL=http://127.0.0.1:9/v1",
		"AZURE_OPENAI_API_KEY=az-1", "DISCORD_BOT_TOKEN=discord-secret", "UNRELATED=x",
	}})
	if _, err := c.Run(t.Context(), Request{Prompt: "hi", SystemPrompt: "persona"}, nil); err != nil {
		t.Fatalf("Run: %v", err)
	}
	rec := codexReadRecord(t, dir)
	if !slices.Contains(rec.Args, `model_provider="azure"`) {
		t.Errorf("args %q do not keep the user's provider", rec.Args)
	}
	for _, a := range rec.Args {
		if strings.Contains(a, CodexProviderID) {
			t.Errorf("args define the gateway's provider: %q", rec.Args)
			break
		}
	}
	if !slices.Contains(rec.Env, "AZURE_OPENAI_API_KEY=az-1") {
		t.Error("the user's provider's key variable did not reach codex")
	}
	for _, kv := range rec.Env {
		if strings.HasPrefix(kv, "DISCORD_") || strings.HasPrefix(kv, "UNRELATED=") {
			t.Errorf("codex got %s", kv)
		}
	}
}

func TestCodexArgsAddDirs(t *testing.T) {
	got := strings.Join(codexArgs(Request{AddDirs: []string{"/cfg"}, SessionID: "s1"}, nil, "", "", ""), " ")
	if !strings.Contains(got, "--add-dir /cfg resume s1") {
		t.Errorf("args = %s; want --add-dir before resume", got)
	}
}

func TestCodexNamesItsSandboxTier(t *testing.T) {
	c := NewCodex(Options{})
	for mode, want := range map[string]string{"bypassPermissions": "danger-full-access", "acceptEdits": "workspace-write", "plan": "read-only"} {
		if got := c.Sandbox(Request{PermissionMode: mode}); got != want {
			t.Errorf("Sandbox(%s) = %q, want %q", mode, got, want)
		}
	}
}
