package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/dirlock"
)

// watchBuffer is an io.Writer a test can wait on.
type watchBuffer struct {
	mu      sync.Mutex // guards b and changed
	b       bytes.Buffer
	changed chan struct{}
}

func newWatchBuffer() *watchBuffer { return &watchBuffer{changed: make(chan struct{})} }

func (w *watchBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	close(w.changed)
	w.changed = make(chan struct{})
	return w.b.Write(p)
}

func (w *watchBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// waitFor waits until the output holds s n times or more.
func (w *watchBuffer) waitFor(t *testing.T, s string, n int) {
	t.Helper()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	for {
		w.mu.Lock()
		got, changed := strings.Count(w.b.String(), s), w.changed
		w.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("output never held %q %d times:\n%s", s, n, w.String())
		}
	}
}

// scriptCLI writes a fake claude CLI: `--version` prints the pinned
// version, anything else runs body with the prompt in $prompt.
func scriptCLI(t *testing.T, body string) string {
	t.Helper()
	rec, err := filepath.Abs(filepath.Join("..", "..", "testdata", "claude"))
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "claude")
	text := "#!/bin/sh\nREC='" + rec + "'\nif [ \"$1\" = --version ]; then echo '2.1.330 (Claude Code)'; exit 0; fi\nprompt=$(/usr/bin/cat)\n" + body + "\n"
	if err := os.WriteFile(script, []byte(text), 0o755); err != nil {
		t.Fatal(err)
	}
	return script
}

// answersOrHangs answers from text.jsonl, fails with auth_error.jsonl for
// a prompt with "fail", and for one with "hang" starts a Read tool and
// never ends. It looks at the prompt's last line: a new session's first
// prompt begins with the recent conversation, which may name an earlier
// prompt.
const answersOrHangs = `case "$(printf '%s\n' "$prompt" | /usr/bin/tail -n 1)" in
*hang*) /usr/bin/head -n 7 "$REC/tool_write.jsonl"; exec /usr/bin/sleep 600 ;;
*fail*) /usr/bin/cat "$REC/auth_error.jsonl"; exit 1 ;;
*) /usr/bin/cat "$REC/text.jsonl" ;;
esac`

// cliEnv writes a .env for the fake CLI and returns its path and
// CONFIG_DIR. extra lines are appended.
func cliEnv(t *testing.T, cli string, extra ...string) (envFile, configDir string) {
	t.Helper()
	dir := t.TempDir()
	configDir = filepath.Join(dir, "config")
	envFile = filepath.Join(dir, ".env")
	lines := append([]string{
		"ANTHROPIC_API_KEY=sk-ant-test",
		"AGENT_CLI_PATH=" + cli,
		"CONFIG_DIR=" + configDir,
		"PERMISSION_MODE=acceptEdits",
	}, extra...)
	if err := os.WriteFile(envFile, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return envFile, configDir
}

// printMode is the permission mode of the terminal tests whose fake CLI
// reads one prompt to the end of its input: in a mode that asks, a chat
// on a terminal runs claude interactively, to ask about its tools.
const printMode = "PERMISSION_MODE=bypassPermissions"

// terminal is a chat on pipes that pretends to be a terminal.
type terminal struct {
	stdin      *io.PipeWriter
	out, err   *watchBuffer
	interrupts chan os.Signal
	code       chan int
}

func startChat(t *testing.T, args ...string) *terminal {
	t.Helper()
	in, stdin := io.Pipe()
	term := &terminal{stdin: stdin, out: newWatchBuffer(), err: newWatchBuffer(), interrupts: make(chan os.Signal, 1), code: make(chan int, 1)}
	io := streams{in: in, out: term.out, errOut: term.err, interrupts: term.interrupts, tty: func(any) bool { return true }}
	go func() { term.code <- run(context.Background(), append([]string{"chat"}, args...), io) }()
	t.Cleanup(func() { stdin.Close() })
	return term
}

func (term *terminal) exit(t *testing.T) int {
	t.Helper()
	select {
	case code := <-term.code:
		return code
	case <-time.After(20 * time.Second):
		t.Fatalf("chat did not exit:\n%s", term.err.String())
		return -1
	}
}

func TestChatCtrlCStopsTheTurnAndReturnsToThePrompt(t *testing.T) {
	envFile, _ := cliEnv(t, scriptCLI(t, answersOrHangs), printMode)
	term := startChat(t, "--env-file", envFile)
	term.err.waitFor(t, "> ", 1)
	io.WriteString(term.stdin, "please hang\n")
	term.err.waitFor(t, "thinking… 0s · Read", 1) // the indicator names the running tool
	term.interrupts <- os.Interrupt
	term.err.waitFor(t, "stopping the turn", 1)
	term.err.waitFor(t, "> ", 2) // back at the prompt
	io.WriteString(term.stdin, "hello\n")
	term.out.waitFor(t, "Hello! I'm Tova", 1)
	term.err.waitFor(t, "> ", 3)
	term.stdin.Close() // Ctrl-D
	if code := term.exit(t); code != exitOK {
		t.Errorf("exit code = %d, want 0:\n%s", code, term.err.String())
	}
	if got := term.out.String(); strings.Count(got, "\n") != 1 {
		t.Errorf("stdout = %q, want only the second answer", got)
	}
	if errOut := term.err.String(); !strings.HasSuffix(errOut, "> \n") {
		t.Errorf("Ctrl-D did not end the prompt's line: %q", errOut)
	}
}

func TestChatCtrlCAtThePromptQuits(t *testing.T) {
	envFile, _ := cliEnv(t, scriptCLI(t, answersOrHangs), printMode)
	term := startChat(t, "--env-file", envFile)
	term.err.waitFor(t, "> ", 1)
	term.interrupts <- os.Interrupt
	if code := term.exit(t); code != exitOK {
		t.Errorf("exit code = %d, want 0", code)
	}
	if !strings.HasSuffix(term.err.String(), "> \n") {
		t.Errorf("stderr = %q, want the prompt's line ended", term.err.String())
	}
}

func TestChatMessageCtrlCExits130(t *testing.T) {
	envFile, _ := cliEnv(t, scriptCLI(t, answersOrHangs), printMode)
	term := startChat(t, "--env-file", envFile, "-m", "hang")
	term.err.waitFor(t, "· Read", 1)
	term.interrupts <- os.Interrupt
	if code := term.exit(t); code != exitInterrupted {
		t.Errorf("exit code = %d, want %d:\n%s", code, exitInterrupted, term.err.String())
	}
}

func TestChatBannerAndIndicator(t *testing.T) {
	envFile, configDir := cliEnv(t, scriptCLI(t, answersOrHangs), printMode)
	term := startChat(t, "--env-file", envFile, "--session", "docs")
	term.err.waitFor(t, "> ", 1)
	banner := term.err.String()
	for _, want := range []string{"claude 2.1.330 (Claude Code)", "CONFIG_DIR " + configDir, "session docs, new"} {
		if !strings.Contains(banner, want) {
			t.Errorf("banner lacks %q:\n%s", want, banner)
		}
	}
	io.WriteString(term.stdin, "hello\n")
	term.out.waitFor(t, "Hello! I'm Tova", 1)
	term.stdin.Close()
	term.exit(t)
	errOut := term.err.String()
	// The indicator was drawn and then erased before the reply.
	if !strings.Contains(errOut, clearLine+"thinking… 0s") || !strings.Contains(errOut, "thinking… 0s"+clearLine) {
		t.Errorf("no indicator drawn and cleared on stderr: %q", errOut)
	}
	if strings.Contains(term.out.String(), "thinking") {
		t.Errorf("the indicator reached stdout: %q", term.out.String())
	}
}

// runCode runs the command line on pipes that are not a terminal.
func runCode(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, streams{in: strings.NewReader(stdin), out: &out, errOut: &errOut})
	return code, out.String(), errOut.String()
}

func TestChatMessageExitsNonZeroWhenTheTurnFails(t *testing.T) {
	envFile, _ := cliEnv(t, scriptCLI(t, answersOrHangs))
	code, out, errOut := runCode(t, "", "chat", "--env-file", envFile, "-m", "please fail")
	if code != exitError {
		t.Errorf("exit code = %d, want %d", code, exitError)
	}
	if !strings.Contains(errOut, "authentication_error") || out == "" {
		t.Errorf("stdout %q, stderr %q: want the error reply and the failure", out, errOut)
	}
	code, _, errOut = runCode(t, "", "chat", "--env-file", envFile, "-m", "hello")
	if code != exitOK {
		t.Errorf("a good turn: exit code = %d:\n%s", code, errOut)
	}
	// Piped prompts go on after a failure, and the exit code tells the script.
	code, out, errOut = runCode(t, "please fail\nhello\n", "chat", "--env-file", envFile)
	if code != exitError || !strings.Contains(out, "Hello! I'm Tova") {
		t.Errorf("piped: exit code = %d, stdout %q, want 1 after both answers:\n%s", code, out, errOut)
	}
}

func TestChatRemovesItsSystemPromptFile(t *testing.T) {
	tmp := t.TempDir()
	envFile, _ := cliEnv(t, scriptCLI(t, answersOrHangs))
	t.Setenv("TMPDIR", tmp)
	for _, args := range [][]string{{"-m", "hello"}, {"-m", "please fail"}} {
		runCode(t, "", append([]string{"chat", "--env-file", envFile}, args...)...)
		if left, _ := os.ReadDir(tmp); len(left) > 0 {
			t.Errorf("chat %q left %s in TMPDIR", args, left[0].Name())
		}
	}
	runCode(t, "hello\nhello again\n", "chat", "--env-file", envFile)
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		t.Errorf("chat left %s in TMPDIR", left[0].Name())
	}
}

func TestChatLogLevel(t *testing.T) {
	cli := scriptCLI(t, answersOrHangs)
	tests := []struct {
		name    string
		extra   []string
		flags   []string
		wantLog bool
	}{
		{"quiet by default", nil, nil, false},
		{"LOG_LEVEL=info", []string{"LOG_LEVEL=info"}, nil, true},
		{"--verbose", nil, []string{"--verbose"}, true},
		{"LOG_LEVEL=error and --verbose", []string{"LOG_LEVEL=error"}, []string{"-v"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("LOG_LEVEL", "")
			envFile, _ := cliEnv(t, cli, tt.extra...)
			code, out, errOut := runCode(t, "", append([]string{"chat", "--env-file", envFile, "-m", "hello"}, tt.flags...)...)
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			if got := strings.Contains(errOut, "event started"); got != tt.wantLog {
				t.Errorf("info log on stderr = %v, want %v:\n%s", got, tt.wantLog, errOut)
			}
			if strings.Contains(out, "event started") {
				t.Errorf("a log line reached stdout: %q", out)
			}
		})
	}
}

func TestOneGatewayPerConfigDir(t *testing.T) {
	envFile, configDir := cliEnv(t, scriptCLI(t, answersOrHangs), "DISCORD_BOT_TOKEN=MTIzNDU2Nzg5MDEyMzQ1Njc4OQ.abcdef.ghijklmnopqrstuvwxyz0123456789")
	if err := os.MkdirAll(configDir, 0o700); err != nil {
		t.Fatal(err)
	}
	held, err := dirlock.Acquire(configDir, "gateway run")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	for _, args := range [][]string{{"chat", "-m", "hello"}, {"run"}} {
		code, out, errOut := runCode(t, "", append(args, "--env-file", envFile)...)
		if code != exitError {
			t.Errorf("%s: exit code = %d, want %d", args[0], code, exitError)
		}
		want := "is in use by another gateway (pid " + strconv.Itoa(os.Getpid()) + ", gateway run)"
		if !strings.Contains(errOut, want) || out != "" {
			t.Errorf("%s: stderr lacks %q (stdout %q):\n%s", args[0], want, out, errOut)
		}
	}
	held.Release()
	if code, _, errOut := runCode(t, "", "chat", "-m", "hello", "--env-file", envFile); code != exitOK {
		t.Errorf("chat after the other gateway left: exit %d\n%s", code, errOut)
	}
}

// claude 2.1.330 exits at once as root with bypassPermissions unless
// IS_SANDBOX=1; run, chat and doctor say so at start.
func TestRootBypassAdviceAtStart(t *testing.T) {
	root := os.Geteuid() == 0
	cli := scriptCLI(t, answersOrHangs)
	for _, sandbox := range []string{"", "1", "true"} {
		envFile, configDir := cliEnv(t, cli, "PERMISSION_MODE=bypassPermissions", "IS_SANDBOX="+sandbox,
			"DISCORD_BOT_TOKEN=MTIzNDU2Nzg5MDEyMzQ1Njc4OQ.abcdef.ghijklmnopqrstuvwxyz0123456789")
		t.Setenv("IS_SANDBOX", "")
		want := root && sandbox != "1"
		_, _, chatErr := runCode(t, "", "chat", "-m", "hello", "--env-file", envFile)
		// run prints the advice, then stops at the lock another gateway holds.
		held, err := dirlock.Acquire(configDir, "gateway run")
		if err != nil {
			t.Fatal(err)
		}
		_, _, runErr := runCode(t, "", "run", "--env-file", envFile)
		held.Release()
		code, doctorOut, _ := runCode(t, "", "doctor", "--env-file", envFile)
		for name, got := range map[string]string{"chat": chatErr, "run": runErr, "doctor": doctorOut} {
			if has := strings.Contains(got, config.RootBypassRefusal); has != want {
				t.Errorf("IS_SANDBOX=%q, root %v: %s shows the advice = %v, want %v:\n%s", sandbox, root, name, has, want, got)
			}
		}
		if strings.Contains(chatErr, "anyone who can message the bot") {
			t.Errorf("chat warns about Discord allowlists, which do not concern it:\n%s", chatErr)
		}
		if want && (code == exitOK || !strings.Contains(doctorOut, "chat: needs IS_SANDBOX=1")) {
			t.Errorf("IS_SANDBOX=%q as root: doctor exit %d, want a failure naming the fix:\n%s", sandbox, code, doctorOut)
		}
	}
}

func TestDoctorSaysWhatEachCommandNeeds(t *testing.T) {
	t.Setenv("DISCORD_BOT_TOKEN", "")
	envFile, _ := cliEnv(t, scriptCLI(t, answersOrHangs))
	code, out, _ := runCode(t, "", "doctor", "--env-file", envFile)
	if code != exitOK {
		t.Errorf("doctor failed for a missing Discord token, which chat does not need (exit %d):\n%s", code, out)
	}
	for _, want := range []string{"[warn] discord    DISCORD_BOT_TOKEN is not set", "\nchat: ready\n", "\nrun: needs DISCORD_BOT_TOKEN\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}

	// No key and no CLI: neither command can start.
	envFile, _ = cliEnv(t, "/nonexistent/claude", "ANTHROPIC_API_KEY=", "DISCORD_TOKEN=x")
	t.Setenv("ANTHROPIC_API_KEY", "")
	t.Setenv("ANTHROPIC_AUTH_TOKEN", "")
	code, out, _ = runCode(t, "", "doctor", "--json", "--env-file", envFile)
	if code == exitOK {
		t.Errorf("doctor passed with no key and no CLI")
	}
	var report struct {
		Commands []readiness `json:"commands"`
		Checks   []check     `json:"checks"`
	}
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	want := []readiness{
		{Command: "chat", Needs: []string{"ANTHROPIC_API_KEY", "the claude CLI"}},
		{Command: "run", Needs: []string{"ANTHROPIC_API_KEY", "DISCORD_BOT_TOKEN", "the claude CLI"}},
	}
	if diff := cmp.Diff(want, report.Commands); diff != "" {
		t.Errorf("commands (-want +got):\n%s", diff)
	}
	var sawTypo bool
	for _, c := range report.Checks {
		sawTypo = sawTypo || (c.Warning && strings.Contains(c.Detail, "DISCORD_TOKEN is set in .env but is not a gateway setting") && strings.Contains(c.Detail, "did you mean DISCORD_BOT_TOKEN?"))
	}
	if !sawTypo {
		t.Errorf("doctor does not point DISCORD_TOKEN to DISCORD_BOT_TOKEN:\n%s", out)
	}
}

// The --version probe gets the environment every agent CLI gets: never
// the Discord token or a webhook secret.
func TestDoctorVersionProbeGetsTheFilteredEnvironment(t *testing.T) {
	dump := filepath.Join(t.TempDir(), "env")
	script := filepath.Join(t.TempDir(), "claude")
	body := "#!/bin/sh\n/usr/bin/env > '" + dump + "'\necho '2.1.330 (Claude Code)'\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	const token = "MTIzNDU2Nzg5MDEyMzQ1Njc4OQ.abcdef.secretsecretsecretsecret"
	t.Setenv("DISCORD_BOT_TOKEN", token)
	t.Setenv("WEBHOOK_DEPLOY_SECRET", "hook-secret")
	t.Setenv("UNRELATED_SECRET", "other-secret")
	envFile, _ := cliEnv(t, script)
	runCode(t, "", "doctor", "--env-file", envFile)
	got, err := os.ReadFile(dump)
	if err != nil {
		t.Fatalf("the probe did not run: %v", err)
	}
	for _, secret := range []string{"DISCORD_BOT_TOKEN", token, "hook-secret", "other-secret"} {
		if strings.Contains(string(got), secret) {
			t.Errorf("the --version probe saw %q:\n%s", secret, got)
		}
	}
	if !strings.Contains(string(got), "PATH=") {
		t.Errorf("the probe lost PATH:\n%s", got)
	}
}

func TestBuildVersion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		info *debug.BuildInfo
		want string
	}{
		{"no build info", nil, "dev"},
		{"go install module@version", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "v1.2.3"},
		{"checkout", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "8d6da6b0123456789abcdef"}, {Key: "vcs.modified", Value: "false"}}}, "8d6da6b01234"},
		{"checkout with changes", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "8d6da6b0123456789abcdef"}, {Key: "vcs.modified", Value: "true"}}}, "8d6da6b01234-dirty"},
		{"nothing recorded", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := buildVersion(tt.info); got != tt.want {
				t.Errorf("buildVersion = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestVersionFlag(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, out, _ := runCode(t, "", args...)
		if code != exitOK || out != "gateway version "+version()+"\n" || version() == "" {
			t.Errorf("%v: exit %d, output %q", args, code, out)
		}
	}
}

func TestStatusLine(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	s := newStatusLine(&b, true)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s.now = func() time.Time { return now }
	s.Start()
	now = now.Add(3 * time.Second)
	s.Tool("Bash")
	s.Write([]byte("a log line\n"))
	s.Stop()
	want := clearLine + "thinking… 0s" + clearLine + "thinking… 3s · Bash" + clearLine + "a log line\n" + clearLine + "thinking… 3s · Bash" + clearLine
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("status output (-want +got):\n%s", diff)
	}

	b.Reset()
	off := newStatusLine(&b, false)
	off.Start()
	off.Tool("Bash")
	off.Write([]byte("a log line\n"))
	off.Stop()
	if got := b.String(); got != "a log line\n" {
		t.Errorf("disabled status output = %q", got)
	}
}

func TestUntilInterrupt(t *testing.T) {
	t.Parallel()
	ch := make(chan os.Signal, 1)
	ctx, stop := untilInterrupt(context.Background(), ch)
	defer stop()
	ch <- os.Interrupt
	<-ctx.Done()
	if !errors.Is(context.Cause(ctx), errInterrupted) {
		t.Errorf("cause = %v", context.Cause(ctx))
	}
}
