package backends

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"
)

// The fake gemini CLI is a bash script (the adapter passes only allowlisted
// variables, so its behaviour is baked in when it is written). It records
// what it saw into its directory. Run with GEMINI_WRITE_SYSTEM_MD (the
// adapter's prompt export), it writes a stand-in built-in prompt, prints
// init and the user message and then hangs, as the real one would go on to
// the API: the adapter has to stop it.
type geminiFake struct {
	Mode       string // stream, hang, grandchild, ignoreterm
	Stream     string // printed to stdout in stream mode
	Stderr     string // printed to stderr in stream mode
	Exit       int    // exit status in stream mode
	ExportFail bool   // the export run fails without writing the prompt
}

const geminiFakeScript = `#!/bin/bash
dir=%s
if [ -n "$GEMINI_WRITE_SYSTEM_MD" ]; then
  echo x >> "$dir/exports"
  printf '%%s\n' "$@" > "$dir/export.args"
  env > "$dir/export.env"
  cat > "$dir/export.stdin"
  if [ %s = yes ]; then echo "export: something broke" >&2; exit 1; fi
  printf 'BUILTIN PROMPT. Private memory: %%s/.gemini/tmp/w/memory/MEMORY.md' "$GEMINI_CLI_HOME" > "$GEMINI_WRITE_SYSTEM_MD"
  echo $$ > "$dir/export.pid"
  echo '{"type":"init","session_id":"export-session","model":"m"}'
  echo '{"type":"message","role":"user","content":"."}'
  exec sleep 300
fi
echo x >> "$dir/runs"
printf '%%s\0' "$@" > "$dir/args"
env > "$dir/env"
pwd > "$dir/cwd"
cat > "$dir/stdin"
if [ -n "$GEMINI_SYSTEM_MD" ]; then cp "$GEMINI_SYSTEM_MD" "$dir/system.md"; fi
init='{"type":"init","session_id":"fake-session","model":"m"}'
case %s in
  stream) cat %s; printf '%%s' %s >&2; echo $$ > "$dir/pid"; exit %d ;;
  hang) echo $$ > "$dir/pid"; echo "$init"; exec sleep 300 ;;
  grandchild) sleep 300 & echo $! > "$dir/grandchild"; echo $$ > "$dir/pid"; echo "$init"; wait ;;
  ignoreterm) trap '' TERM; echo $$ > "$dir/pid"; echo "$init"; while :; do sleep 1; done ;;
esac
`

// write installs the fake and returns its path and record directory.
func (f geminiFake) write(t *testing.T) (bin, dir string) {
	t.Helper()
	dir = t.TempDir()
	stream := filepath.Join(dir, "stream.jsonl")
	if err := os.WriteFile(stream, []byte(f.Stream), 0o600); err != nil {
		t.Fatal(err)
	}
	fail := "no"
	if f.ExportFail {
		fail = "yes"
	}
	script := fmt.Sprintf(geminiFakeScript, shellQuote(dir), fail, f.Mode, shellQuote(stream), shellQuote(f.Stderr), f.Exit)
	src := filepath.Join(dir, "gemini.src")
	if err := os.WriteFile(src, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	bin = filepath.Join(dir, "gemini")
	// Installed by a child process, so no fork of a parallel test inherits
	// a descriptor open for writing (ETXTBSY).
	if out, err := exec.Command("install", "-m", "0755", src, bin).CombinedOutput(); err != nil {
		t.Fatalf("install fake gemini: %v: %s", err, out)
	}
	return bin, dir
}

func geminiFakeEnv(home string) []string {
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"GEMINI_API_KEY=AIza-real-key",
		"GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:9",
		"GOOGLE_API_KEY=google-key",
		"GEMINI_WRITE_SYSTEM_MD=/must/not/pass",
		"DISCORD_BOT_TOKEN=discord-secret",
		"WEBHOOK_SECRET=webhook-secret",
		"AWS_SECRET_ACCESS_KEY=aws-secret",
		"ANTHROPIC_API_KEY=sk-other-backend",
		"NODE_OPTIONS=--require /tmp/evil.js",
	}
}

func newTestGemini(t *testing.T, bin string, env []string) *Gemini {
	t.Helper()
	return NewGemini(Options{Binary: bin, Env: env, KillGrace: 300 * time.Millisecond, Log: zerolog.New(zerolog.NewTestWriter(t))})
}

func geminiRead(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatalf("the fake left no %s: %v", name, err)
	}
	return string(b)
}

func geminiEnvMap(s string) map[string]string {
	m := map[string]string{}
	for _, kv := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

func geminiPid(t *testing.T, dir, name string) int {
	t.Helper()
	pid, err := strconv.Atoi(strings.TrimSpace(geminiRead(t, dir, name)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

const geminiFakeText = `{"type":"init","timestamp":"2026-11-21T20:22:29.693Z","session_id":"sess-1","model":"gemini-2.5-pro"}
{"type":"message","timestamp":"2026-11-21T20:22:29.697Z","role":"user","content":"Say hello."}
{"type":"message","timestamp":"2026-11-21T20:22:29.752Z","role":"assistant","content":"Hello","delta":true}
{"type":"message","timestamp":"2026-11-21T20:22:29.754Z","role":"assistant","content":", world","delta":true}
{"type":"result","timestamp":"2026-11-21T20:22:29.821Z","status":"success","stats":{"total_tokens":110,"input_tokens":100,"output_tokens":10,"cached":0,"input":100,"duration_ms":129,"tool_calls":0}}
`

func TestGeminiFakeArgsStdinEnvPersona(t *testing.T) {
	t.Parallel()
	bin, dir := geminiFake{Mode: "stream", Stream: geminiFakeText}.write(t)
	home := t.TempDir()
	workDir := t.TempDir()
	g := newTestGemini(t, bin, geminiFakeEnv(home))
	prompt := "/help @memory.md \"quoted\" $(rm -rf /)\n" + strings.Repeat("long ", 40000) // > 128 KiB
	var got collected
	res, err := g.Run(context.Background(), Request{
		Prompt: prompt, SystemPrompt: "## Identity\n\nYou are Ada.", WorkDir: workDir,
		Model: "gemini-2.5-pro", PermissionMode: "acceptEdits", AllowedTools: []string{"Read", "Write"},
	}, got.emit)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "Hello, world" || res.SessionID != "sess-1" || res.Usage.InputTokens != 100 {
		t.Errorf("result = %+v", res)
	}
	if diff := cmp.Diff([]EventKind{EventInit, EventText, EventText, EventResult}, got.kinds()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}

	// The prompt went on stdin, whole, and not on argv.
	if s := geminiRead(t, dir, "stdin"); s != prompt {
		t.Errorf("stdin has %d bytes, want the %d-byte prompt", len(s), len(prompt))
	}
	args := strings.Split(strings.TrimSuffix(geminiRead(t, dir, "args"), "\x00"), "\x00")
	want := []string{"-p", "", "-o", "stream-json", "--skip-trust", "-m", "gemini-2.5-pro", "--approval-mode", "auto_edit", "--allowed-tools", "read_file,write_file"}
	if diff := cmp.Diff(want, args); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	if cwd := strings.TrimSpace(geminiRead(t, dir, "cwd")); cwd != workDir {
		t.Errorf("cwd = %q, want %q", cwd, workDir)
	}

	env := geminiEnvMap(geminiRead(t, dir, "env"))
	for _, k := range []string{"DISCORD_BOT_TOKEN", "WEBHOOK_SECRET", "AWS_SECRET_ACCESS_KEY", "ANTHROPIC_API_KEY", "NODE_OPTIONS", "GEMINI_WRITE_SYSTEM_MD", "GEMINI_CLI_HOME"} {
		if v, ok := env[k]; ok {
			t.Errorf("the CLI sees %s=%s", k, v)
		}
	}
	for k, v := range map[string]string{"GEMINI_API_KEY": "AIza-real-key", "GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:9", "GOOGLE_API_KEY": "google-key", "HOME": home} {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
	sysFile := env["GEMINI_SYSTEM_MD"]
	if sysFile == "" {
		t.Fatal("GEMINI_SYSTEM_MD is not set")
	}
	if _, err := os.Stat(sysFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the system prompt file %s was not removed: %v", sysFile, err)
	}

	// The system prompt is the exported built-in prompt, its private home
	// rewritten to the real one, then the persona.
	system := geminiRead(t, dir, "system.md")
	wantSys := "BUILTIN PROMPT. Private memory: " + home + "/.gemini/tmp/w/memory/MEMORY.md" + geminiPersonaHeader + "## Identity\n\nYou are Ada."
	if system != wantSys {
		t.Errorf("system prompt:\n%q\nwant\n%q", system, wantSys)
	}

	// The export run: same flags, a private home with API-key settings, a
	// dummy key, a closed port, nothing of the real credentials.
	exportArgs := strings.Fields(geminiRead(t, dir, "export.args"))
	if diff := cmp.Diff([]string{"-p", "-o", "stream-json", "--skip-trust", "-m", "gemini-2.5-pro", "--approval-mode", "auto_edit", "--allowed-tools", "read_file,write_file"}, exportArgs); diff != "" {
		t.Errorf("export args (-want +got):\n%s", diff)
	}
	exportEnv := geminiEnvMap(geminiRead(t, dir, "export.env"))
	if exportEnv["GEMINI_API_KEY"] == "AIza-real-key" || exportEnv["GOOGLE_API_KEY"] != "" || exportEnv["DISCORD_BOT_TOKEN"] != "" {
		t.Errorf("the export run sees credentials: %v", exportEnv)
	}
	if exportEnv["GOOGLE_GEMINI_BASE_URL"] != "http://127.0.0.1:1" || exportEnv["GEMINI_CLI_HOME"] == "" || exportEnv["GEMINI_CLI_HOME"] == home {
		t.Errorf("export env: base url %q, cli home %q", exportEnv["GOOGLE_GEMINI_BASE_URL"], exportEnv["GEMINI_CLI_HOME"])
	}
	if _, err := os.Stat(exportEnv["GEMINI_CLI_HOME"]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the export home %s was not removed", exportEnv["GEMINI_CLI_HOME"])
	}
	// The export run hung after the user message: it was stopped.
	pid := geminiPid(t, dir, "export.pid")
	waitFor(t, 5*time.Second, "the export run to be gone", func() bool { return processGone(pid) })
}

func TestGeminiFakeExportOnceAndResume(t *testing.T) {
	t.Parallel()
	bin, dir := geminiFake{Mode: "stream", Stream: geminiFakeText}.write(t)
	g := newTestGemini(t, bin, geminiFakeEnv(t.TempDir()))
	req := Request{Prompt: "one", SystemPrompt: "persona v1", WorkDir: t.TempDir(), Model: "m", PermissionMode: "plan"}
	if _, err := g.Run(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	req.SessionID, req.SystemPrompt = "sess-1", "persona v2"
	if _, err := g.Run(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(geminiRead(t, dir, "exports"), "x"); n != 1 {
		t.Errorf("%d exports, want 1 (cached across runs and resumes)", n)
	}
	args := geminiRead(t, dir, "args")
	if !strings.Contains(args, "--resume\x00sess-1") || !strings.Contains(args, "--approval-mode\x00plan") {
		t.Errorf("resumed args = %q", args)
	}
	// The resumed run gets the new persona in its system prompt.
	if sys := geminiRead(t, dir, "system.md"); !strings.HasSuffix(sys, "persona v2") || !strings.HasPrefix(sys, "BUILTIN PROMPT") {
		t.Errorf("resumed system prompt = %q", sys)
	}
	// Another approval mode needs another export.
	req.PermissionMode = "bypassPermissions"
	if _, err := g.Run(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(geminiRead(t, dir, "exports"), "x"); n != 2 {
		t.Errorf("%d exports, want 2", n)
	}
}

func TestGeminiFakeNoPersonaKeepsOperatorSystemMD(t *testing.T) {
	t.Parallel()
	bin, dir := geminiFake{Mode: "stream", Stream: geminiFakeText}.write(t)
	own := filepath.Join(t.TempDir(), "own.md")
	if err := os.WriteFile(own, []byte("operator firmware"), 0o600); err != nil {
		t.Fatal(err)
	}
	g := newTestGemini(t, bin, append(geminiFakeEnv(t.TempDir()), "GEMINI_SYSTEM_MD="+own))
	if _, err := g.Run(context.Background(), Request{Prompt: "hi", WorkDir: t.TempDir()}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "exports")); !errors.Is(err, os.ErrNotExist) {
		t.Error("exported a prompt for a run without a persona")
	}
	if got := geminiEnvMap(geminiRead(t, dir, "env"))["GEMINI_SYSTEM_MD"]; got != own {
		t.Errorf("GEMINI_SYSTEM_MD = %q, want the operator's %q", got, own)
	}
}

func TestGeminiFakeExportFailureFallsBack(t *testing.T) {
	t.Parallel()
	bin, dir := geminiFake{Mode: "stream", Stream: geminiFakeText, ExportFail: true}.write(t)
	g := newTestGemini(t, bin, geminiFakeEnv(t.TempDir()))
	req := Request{Prompt: "hi", SystemPrompt: "You are Ada.", WorkDir: t.TempDir()}
	for range 2 {
		if _, err := g.Run(context.Background(), req, nil); err != nil {
			t.Fatal(err)
		}
	}
	if want := geminiFallbackPrompt + geminiPersonaHeader + "You are Ada."; geminiRead(t, dir, "system.md") != want {
		t.Errorf("system prompt = %q, want the fallback and the persona", geminiRead(t, dir, "system.md"))
	}
	if n := strings.Count(geminiRead(t, dir, "exports"), "x"); n != 2 {
		t.Errorf("%d exports, want 2: a failed export is not cached", n)
	}
}

// Errors come from what gemini printed, not from its exit status.
func TestGeminiFakeErrorsFromContent(t *testing.T) {
	t.Parallel()
	const init = `{"type":"init","session_id":"s1","model":"m"}` + "\n"
	tests := []struct {
		name   string
		fake   geminiFake
		kind   ErrorKind // "" for success
		status int
		msgHas string
	}{
		{
			name: "401 in the stream, exit 0",
			fake: geminiFake{Stream: init + `{"type":"result","status":"error","error":{"type":"unknown","message":"[API Error: {\"error\":{\"code\":401,\"message\":\"API key not valid.\",\"status\":\"UNAUTHENTICATED\"}}]"},"stats":{}}` + "\n", Exit: 0},
			kind: KindAuth, status: 401, msgHas: "API key not valid",
		},
		{
			name: "success in the stream, exit 145 and a stack trace",
			fake: geminiFake{Stream: geminiFakeText, Exit: 145, Stderr: "Error when talking to Gemini API\n    at x (cli.js:1:1)\n"},
		},
		{
			name: "stale session on stderr, empty stdout, exit 42",
			fake: geminiFake{Stderr: "Error resuming session: Invalid session identifier \"abc\".\n  Searched for sessions in /h/.gemini/tmp/w/chats.\n", Exit: 42},
			kind: KindStaleSession, msgHas: "Invalid session identifier",
		},
		{
			name: "auth settings missing, exit 41",
			fake: geminiFake{Stderr: "Please set an Auth method in your /h/.gemini/settings.json or specify one of the following environment variables before running: GEMINI_API_KEY\n", Exit: 41},
			kind: KindAuth,
		},
		{
			name: "no result, exit 0",
			fake: geminiFake{Stream: init, Exit: 0},
			kind: KindCrashed, msgHas: "without a result",
		},
		{
			name: "crash mid-stream",
			fake: geminiFake{Stream: init + `{"type":"message","role":"assistant","content":"par` + "\nnot json either\n", Stderr: "TypeError: boom\n", Exit: 1},
			kind: KindCrashed, msgHas: "TypeError: boom",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fake.Mode = "stream"
			bin, _ := tt.fake.write(t)
			g := newTestGemini(t, bin, geminiFakeEnv(t.TempDir()))
			res, err := g.Run(context.Background(), Request{Prompt: "hi", WorkDir: t.TempDir(), SessionID: "abc"}, nil)
			if tt.kind == "" {
				if err != nil || res.Text != "Hello, world" {
					t.Fatalf("Run = %+v, %v; want success", res, err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v, want *Error", err)
			}
			if e.Kind != tt.kind || e.Status != tt.status || !strings.Contains(e.Message, tt.msgHas) {
				t.Errorf("err = %#v, want kind %s status %d with %q", e, tt.kind, tt.status, tt.msgHas)
			}
			if tt.fake.Stderr != "" && e.Stderr == "" {
				t.Error("the error lacks the stderr tail")
			}
		})
	}
}

func TestGeminiFakeTimeoutKillsGroup(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"hang", "grandchild", "ignoreterm"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			bin, dir := geminiFake{Mode: mode}.write(t)
			g := newTestGemini(t, bin, geminiFakeEnv(t.TempDir()))
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			var got collected
			start := time.Now()
			_, err := g.Run(ctx, Request{Prompt: "hi", WorkDir: t.TempDir()}, got.emit)
			if !errors.Is(err, ErrTimeout) {
				t.Fatalf("err = %v, want timeout", err)
			}
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("Run took %v", took)
			}
			if len(got.events) == 0 || got.events[0].Kind != EventInit {
				t.Errorf("events = %v, want the init before the hang", got.kinds())
			}
			pids := []int{geminiPid(t, dir, "pid")}
			if mode == "grandchild" {
				pids = append(pids, geminiPid(t, dir, "grandchild"))
			}
			for _, pid := range pids {
				if !processGone(pid) {
					t.Errorf("process %d is still alive after Run returned", pid)
				}
			}
		})
	}
}

func TestGeminiFakeCanceled(t *testing.T) {
	t.Parallel()
	bin, dir := geminiFake{Mode: "hang"}.write(t)
	g := newTestGemini(t, bin, geminiFakeEnv(t.TempDir()))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := g.Run(ctx, Request{Prompt: "hi", WorkDir: t.TempDir()}, nil)
		done <- err
	}()
	waitFor(t, 10*time.Second, "the fake to start", func() bool {
		_, err := os.Stat(filepath.Join(dir, "pid"))
		return err == nil
	})
	cancel()
	err := <-done
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindCanceled {
		t.Errorf("err = %v, want canceled", err)
	}
}

func TestGeminiNotFoundAndBadWorkDir(t *testing.T) {
	t.Parallel()
	g := newTestGemini(t, filepath.Join(t.TempDir(), "no-such-gemini"), nil)
	_, err := g.Run(context.Background(), Request{Prompt: "hi"}, nil)
	if KindOf(err) != KindNotFound {
		t.Errorf("err = %v, want %s", err, KindNotFound)
	}
	bin, _ := geminiFake{Mode: "stream", Stream: geminiFakeText}.write(t)
	g = newTestGemini(t, bin, nil)
	_, err = g.Run(context.Background(), Request{Prompt: "hi", WorkDir: filepath.Join(t.TempDir(), "missing")}, nil)
	if KindOf(err) != KindExecution {
		t.Errorf("err = %v, want %s", err, KindExecution)
	}
	_, err = g.Run(context.Background(), Request{Prompt: "hi", PermissionMode: "nonsense"}, nil)
	if KindOf(err) != KindInvalid {
		t.Errorf("err = %v, want %s", err, KindInvalid)
	}
}
