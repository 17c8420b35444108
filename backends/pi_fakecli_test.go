package backends

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"
)

// The fake pi is a shell script: it records its arguments, stdin,
// environment, working directory and the system prompt file it was given
// into its directory, then plays a mode. (The claude fakes re-run the test
// binary; one TestMain per package is all Go allows, and a script is enough
// here.)

// piFakeModes are the script bodies run after the recording.
var piFakeModes = map[string]string{
	// Print stream, then stderr, then exit with the code.
	"stream": `cat "$d/stream"; cat "$d/stderr_in" >&2; exit "$(cat "$d/code")"`,
	// Hang after the session line, with a grandchild in the group.
	"hang": `echo '{"type":"session","id":"s-hang"}'
sleep 300 &
echo $! > "$d/grandchild"
wait`,
	// The same, deaf to SIGTERM (the sleep inherits that): only the
	// SIGKILL after the grace period ends it.
	"hang_ignore_term": `trap '' TERM
echo '{"type":"session","id":"s-hang"}'
sleep 300 &
echo $! > "$d/grandchild"
wait`,
}

// piFake is a fake pi in a directory of its own.
type piFake struct {
	bin, dir string
}

// newPiFake writes the fake pi for mode. For "stream" it prints stream and
// stderr and exits with code.
func newPiFake(t *testing.T, mode, stream, stderr string, code int) piFake {
	t.Helper()
	body, ok := piFakeModes[mode]
	if !ok {
		t.Fatalf("unknown fake mode %q", mode)
	}
	dir := t.TempDir()
	for name, content := range map[string]string{"stream": stream, "stderr_in": stderr, "code": strconv.Itoa(code)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	script := fmt.Sprintf(`#!/bin/sh
d=%s
printf '%%s\0' "$@" > "$d/args"
pwd > "$d/cwd"
env > "$d/env"
echo $$ > "$d/pid"
prev=
for a in "$@"; do
  if [ "$prev" = --append-system-prompt ]; then cat "$a" > "$d/system"; echo "$a" > "$d/system_path"; fi
  prev=$a
done
cat > "$d/stdin"
touch "$d/started"
%s
`, shellQuote(dir), body)
	src := filepath.Join(dir, "pi.src")
	bin := filepath.Join(dir, "pi")
	if err := os.WriteFile(src, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	// A child writes the executable: see fakeCLI (ETXTBSY).
	if out, err := exec.Command("install", "-m", "0755", src, bin).CombinedOutput(); err != nil {
		t.Fatalf("install fake pi: %v: %s", err, out)
	}
	return piFake{bin: bin, dir: dir}
}

func (f piFake) read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.dir, name))
	if err != nil {
		t.Fatalf("the fake pi left no %s: %v", name, err)
	}
	return string(b)
}

func (f piFake) args(t *testing.T) []string {
	t.Helper()
	a := strings.Split(f.read(t, "args"), "\x00")
	return a[:len(a)-1]
}

func (f piFake) pid(t *testing.T, name string) int {
	t.Helper()
	var pid int
	waitFor(t, 5*time.Second, "the fake pi's "+name, func() bool {
		b, err := os.ReadFile(filepath.Join(f.dir, name))
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	return pid
}

func newTestPi(t *testing.T, bin string, grace time.Duration) *Pi {
	t.Helper()
	env := append(os.Environ(),
		"DISCORD_BOT_TOKEN=discord-secret",
		"WEBHOOK_SECRET=webhook-secret",
		"GATEWAY_UNRELATED=nope",
		"AWS_SECRET_ACCESS_KEY=aws-secret",
		"NODE_OPTIONS=--require /evil.js",
		"ANTHROPIC_API_KEY=sk-test",
		"OPENROUTER_API_KEY=sk-or",
		"PI_CODING_AGENT_DIR=/pi-agent",
	)
	return NewPi(Options{Binary: bin, Env: env, KillGrace: grace, Log: zerolog.New(zerolog.NewTestWriter(t))})
}

func piRecorded(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(piTestdata, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestPiRunArgsStdinEnvCwd(t *testing.T) {
	t.Parallel()
	fake := newPiFake(t, "stream", piRecorded(t, "text.jsonl"), "", 0)
	work := t.TempDir()
	persona := filepath.Join(t.TempDir(), "persona.md")
	if err := os.WriteFile(persona, []byte("You are Tova."), 0o600); err != nil {
		t.Fatal(err)
	}
	// Over argv's 128 KiB per-argument limit: it must go on stdin.
	prompt := "Hello, " + strings.Repeat("long prompt ", 300<<10/12) + "end."
	var got collected
	res, err := newTestPi(t, fake.bin, time.Second).Run(context.Background(), Request{
		Prompt:           prompt,
		SystemPrompt:     "You are Tova.",
		SystemPromptFile: persona,
		SessionID:        "01a1ffc2-9b24",
		WorkDir:          work,
		Model:            "fake/fake-model",
		AllowedTools:     []string{"Read", "Write"},
		PermissionMode:   "acceptEdits",
		MaxTurns:         3,
	}, got.emit)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"-p", "--mode", "json", "--offline", "--append-system-prompt", persona,
		"--tools", "read,grep,find,ls,edit,write", "--session", "01a1ffc2-9b24", "--model", "fake/fake-model"}
	if diff := cmp.Diff(want, fake.args(t)); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	if stdin := fake.read(t, "stdin"); stdin != prompt {
		t.Errorf("stdin has %d bytes, want the %d-byte prompt", len(stdin), len(prompt))
	}
	if cwd := strings.TrimSpace(fake.read(t, "cwd")); cwd != work {
		t.Errorf("cwd = %q, want %q", cwd, work)
	}
	env := fake.read(t, "env")
	for _, keep := range []string{"ANTHROPIC_API_KEY=sk-test", "OPENROUTER_API_KEY=sk-or", "PI_CODING_AGENT_DIR=/pi-agent", "HOME="} {
		if !strings.Contains(env, keep) {
			t.Errorf("environment lacks %s", keep)
		}
	}
	for _, drop := range []string{"DISCORD_BOT_TOKEN", "WEBHOOK_SECRET", "GATEWAY_UNRELATED", "AWS_SECRET_ACCESS_KEY", "NODE_OPTIONS"} {
		if strings.Contains(env, drop+"=") {
			t.Errorf("environment has %s", drop)
		}
	}
	if res.Text != "Hello from the fake model." || res.SessionID != "01a1ffc2-9b24-7101-8740-0cb6d63f60f6" || res.Duration <= 0 {
		t.Errorf("result = %+v", res)
	}
	kinds := got.kinds()
	if kinds[0] != EventInit || kinds[len(kinds)-1] != EventResult || !slices.Contains(kinds, EventText) {
		t.Errorf("event kinds = %v", kinds)
	}
	if last := got.events[len(got.events)-1]; last.Result == nil || last.Result.Text != res.Text || last.Err != nil {
		t.Errorf("result event = %+v", last)
	}
}

// Without a system prompt file, the adapter writes the persona to a temp
// file of its own (never argv) and removes it afterwards.
func TestPiRunSystemPromptWithoutFile(t *testing.T) {
	t.Parallel()
	fake := newPiFake(t, "stream", piRecorded(t, "text.jsonl"), "", 0)
	persona := strings.Repeat("Be kind. ", 20<<10)
	if _, err := newTestPi(t, fake.bin, time.Second).Run(context.Background(), Request{Prompt: "hi", SystemPrompt: persona, PermissionMode: "bypassPermissions"}, nil); err != nil {
		t.Fatal(err)
	}
	if got := fake.read(t, "system"); got != persona {
		t.Errorf("the CLI read %d bytes of persona, want %d", len(got), len(persona))
	}
	path := strings.TrimSpace(fake.read(t, "system_path"))
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temp persona file %s left behind (%v)", path, err)
	}
	if args := fake.args(t); slices.Contains(args, "--tools") || slices.Contains(args, persona) {
		t.Errorf("args = %.200q", args)
	}
}

// pi exits 0 on API errors and may exit non-zero after a good answer: the
// stream decides.
func TestPiRunErrorsFromTheStream(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		stream string
		stderr string
		code   int
		kind   ErrorKind // "" for success
		status int
		is     error
	}{
		{name: "auth error, exit 0", stream: "auth_error.jsonl", kind: KindAuth, status: 401, is: ErrAuth},
		{name: "server error, exit 0", stream: "server_error.jsonl", kind: KindAPI, status: 500},
		{name: "answer, exit 1", stream: "text.jsonl", code: 1},
		{name: "stale session, exit 1", stream: "stale_session.jsonl", stderr: "stale_session.stderr", code: 1, kind: KindStaleSession, is: ErrStaleSession},
		{name: "session of another directory, exit 0", stream: "other_directory.jsonl", stderr: "other_directory.stderr", kind: KindStaleSession, is: ErrStaleSession},
		{name: "no output at all, exit 1", code: 1, kind: KindCrashed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stream, stderr string
			if tt.stream != "" {
				stream = piRecorded(t, tt.stream)
			}
			if tt.stderr != "" {
				stderr = piRecorded(t, tt.stderr)
			}
			fake := newPiFake(t, "stream", stream, stderr, tt.code)
			_, err := newTestPi(t, fake.bin, time.Second).Run(context.Background(), Request{Prompt: "hi", SessionID: "x"}, nil)
			if tt.kind == "" {
				if err != nil {
					t.Fatalf("err = %v, want success", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Kind != tt.kind || e.Status != tt.status {
				t.Fatalf("err = %#v, want kind %s status %d", err, tt.kind, tt.status)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.is)
			}
		})
	}
}

func TestPiRunNoKey(t *testing.T) {
	t.Parallel()
	fake := newPiFake(t, "stream", `{"type":"session","version":3,"id":"s1","cwd":"/w"}`+"\n",
		"No API key found for anthropic.\n\nUse /login to log into a provider via OAuth or API key. See:\n  /x/docs/providers.md\n", 1)
	_, err := newTestPi(t, fake.bin, time.Second).Run(context.Background(), Request{Prompt: "hi"}, nil)
	if !errors.Is(err, ErrAuth) {
		t.Fatalf("err = %v, want an authentication error", err)
	}
}

func TestPiRunCrashMidStream(t *testing.T) {
	t.Parallel()
	stream := `{"type":"session","version":3,"id":"s1","cwd":"/w"}
{"type":"agent_start"}
{"type":"message_update","assistantMessageEvent":{"type":"text_delta","delta":"partial"}}
{"type":"message_end","message":{"role":"assi`
	fake := newPiFake(t, "stream", stream, "TypeError: boom\n    at main (cli.js:1:1)\n", 3)
	var got collected
	res, err := newTestPi(t, fake.bin, time.Second).Run(context.Background(), Request{Prompt: "hi"}, got.emit)
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindCrashed {
		t.Fatalf("err = %v, want cli_crashed", err)
	}
	for _, want := range []string{"exit status 3", "at main (cli.js:1:1)", `{"type":"message_end"`} {
		if !strings.Contains(e.Message, want) {
			t.Errorf("message %q lacks %q", e.Message, want)
		}
	}
	if !strings.Contains(e.Stderr, "TypeError: boom") {
		t.Errorf("stderr tail = %q", e.Stderr)
	}
	if res.SessionID != "s1" || len(got.events) != 2 || got.events[1].Text != "partial" {
		t.Errorf("result %+v, events %+v", res, got.events)
	}
}

func TestPiRunTimeoutKillsGroup(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"hang", "hang_ignore_term"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			fake := newPiFake(t, mode, "", "", 0)
			// Long enough for a loaded machine to start the script.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			deadline, _ := ctx.Deadline()
			var got collected
			done := make(chan error, 1)
			go func() {
				_, err := newTestPi(t, fake.bin, 300*time.Millisecond).Run(ctx, Request{Prompt: "hi"}, got.emit)
				done <- err
			}()
			pid, grandchild := fake.pid(t, "pid"), fake.pid(t, "grandchild")
			err := <-done
			if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v, want timeout wrapping context.DeadlineExceeded", err)
			}
			// SIGTERM works at once; SIGTERM ignored costs the 300 ms grace.
			if late := time.Since(deadline); late > 2*time.Second {
				t.Errorf("Run returned %v after the deadline", late)
			}
			for _, p := range []int{pid, grandchild} {
				waitFor(t, 5*time.Second, fmt.Sprintf("process %d to go", p), func() bool { return processGone(p) })
			}
			if len(got.events) != 1 || got.events[0].Kind != EventInit || got.events[0].SessionID != "s-hang" {
				t.Errorf("events = %+v", got.events)
			}
		})
	}
}

func TestPiRunCancel(t *testing.T) {
	t.Parallel()
	fake := newPiFake(t, "hang", "", "", 0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := newTestPi(t, fake.bin, 300*time.Millisecond).Run(ctx, Request{Prompt: "hi"}, nil)
		done <- err
	}()
	fake.pid(t, "grandchild")
	cancel()
	if err := <-done; KindOf(err) != KindCanceled {
		t.Fatalf("err = %v, want canceled", err)
	}
}

func TestPiRunNotFound(t *testing.T) {
	t.Parallel()
	_, err := NewPi(Options{Binary: filepath.Join(t.TempDir(), "no-such-pi")}).Run(context.Background(), Request{Prompt: "hi"}, nil)
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindNotFound || !strings.Contains(e.Message, "@mariozechner/pi-coding-agent") {
		t.Fatalf("err = %v, want cli_not_found naming the npm package", err)
	}
}

func TestPiRunBadWorkDir(t *testing.T) {
	t.Parallel()
	fake := newPiFake(t, "stream", piRecorded(t, "text.jsonl"), "", 0)
	_, err := newTestPi(t, fake.bin, time.Second).Run(context.Background(), Request{Prompt: "hi", WorkDir: filepath.Join(t.TempDir(), "missing")}, nil)
	if KindOf(err) != KindExecution {
		t.Fatalf("err = %v, want execution_error", err)
	}
	if _, statErr := os.Stat(filepath.Join(fake.dir, "started")); statErr == nil {
		t.Error("the CLI ran despite the bad work dir")
	}
}

// Long lines (a big tool result repeated in message_update lines) are
// read, and a line over the limit is skipped without losing the answer.
func TestPiRunLongLines(t *testing.T) {
	t.Parallel()
	var stream bytes.Buffer
	stream.WriteString(`{"type":"session","version":3,"id":"s1","cwd":"/w"}` + "\n" + `{"type":"agent_start"}` + "\n")
	fmt.Fprintf(&stream, `{"type":"message_update","assistantMessageEvent":{"type":"text_delta","delta":%q}}`+"\n", strings.Repeat("x", 1<<20))
	fmt.Fprintf(&stream, `{"type":"tool_execution_end","toolCallId":"t1","toolName":"read","result":{"content":[{"type":"text","text":%q}]},"isError":false}`+"\n", strings.Repeat("y", piLineMax+1))
	stream.WriteString(`{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"done"}],"stopReason":"stop"}}` + "\n")
	stream.WriteString(`{"type":"agent_end","messages":[{"role":"assistant","content":[{"type":"text","text":"done"}],"stopReason":"stop"}]}` + "\n")
	fake := newPiFake(t, "stream", stream.String(), "", 0)
	var got collected
	res, err := newTestPi(t, fake.bin, time.Second).Run(context.Background(), Request{Prompt: "hi"}, got.emit)
	if err != nil || res.Text != "done" {
		t.Fatalf("res = %+v, err = %v", res, err)
	}
	if len(got.events) < 2 || len(got.events[1].Text) != 1<<20 {
		t.Errorf("the 1 MB delta did not come through")
	}
}
