//go:build conformance

package conformance

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/agent"
	"github.com/agentgateway/gateway/internal/fakeapi"
	"github.com/agentgateway/gateway/internal/persona"
	"github.com/agentgateway/gateway/internal/queue"
	"github.com/agentgateway/gateway/internal/session"
)

// The gemini conformance table: the real gemini CLI (GEMINI_BIN, installed
// by `make conformance`) against fakeapi.Gemini, through backends.Gemini and
// the real agent runtime.
//
// Set GEMINI_RECORD=<dir> to also record every stdout/stderr the CLI
// printed and the requests the fake received into <dir> (see
// testdata/gemini/README.md).

const (
	geminiAPIKey       = "AIza-conformance-key"
	geminiModel        = "gemini-2.5-pro"
	geminiDiscordToken = "discord-token-must-not-leak"
	geminiWebhookToken = "webhook-secret-must-not-leak"
)

type geminiReplies struct {
	mu  sync.Mutex // guards got
	got []string
}

func (r *geminiReplies) Reply(_ context.Context, _ queue.Event, text string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, text)
	return nil
}

type geminiHarness struct {
	t        *testing.T
	api      *fakeapi.Gemini
	dir      string // CONFIG_DIR
	home     string
	marker   string // an env entry only this test's CLI processes carry
	sessions *session.Store
	out      *geminiReplies
	rt       *agent.Runtime
}

// geminiSettings is $HOME/.gemini/settings.json for the tests: API-key
// auth (else exit 41), no retries, no telemetry, no update checks.
const geminiSettings = `{
  "security": {"auth": {"selectedType": "gemini-api-key"}},
  "general": {"maxAttempts": 1, "retryFetchErrors": false, "enableAutoUpdate": false, "enableAutoUpdateNotification": false},
  "privacy": {"usageStatisticsEnabled": false},
  "telemetry": {"enabled": false}
}
`

func newGeminiHarness(t *testing.T, timeout time.Duration, mode string, turns ...fakeapi.Turn) *geminiHarness {
	t.Helper()
	bin := cliBinary(t, "gemini")
	api := fakeapi.StartGemini(t, turns...)
	dir := t.TempDir()
	home := t.TempDir()
	log := zerolog.New(zerolog.NewTestWriter(t))
	if _, err := persona.Bootstrap(dir, log); err != nil {
		t.Fatal(err)
	}
	geminiWrite(t, filepath.Join(dir, "identity.md"), "# Identity\n\nYou are Conformo, a test assistant.\n")
	geminiWrite(t, filepath.Join(dir, "memory.md"), "# Memory\n\n- favourite colour: teal\n")
	geminiWrite(t, filepath.Join(home, ".gemini", "settings.json"), geminiSettings)

	marker := "GEMINI_CONFORMANCE_RUN=" + geminiUUID()
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"TMPDIR=" + t.TempDir(), // gemini writes error reports there
		"GEMINI_API_KEY=" + geminiAPIKey,
		"GOOGLE_GEMINI_BASE_URL=" + api.URL(),
		marker,
		"DISCORD_BOT_TOKEN=" + geminiDiscordToken,
		"WEBHOOK_GITHUB_SECRET=" + geminiWebhookToken,
	}
	if rec := os.Getenv("GEMINI_RECORD"); rec != "" {
		bin, env = geminiRecorder(t, rec, bin, env, api)
	}
	backend, err := backends.New("gemini", backends.Options{Binary: bin, Env: env, KillGrace: 2 * time.Second, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	sessions, _, err := session.Open(filepath.Join(dir, session.FileName))
	if err != nil {
		t.Fatal(err)
	}
	h := &geminiHarness{t: t, api: api, dir: dir, home: home, marker: marker, sessions: sessions, out: &geminiReplies{}}
	h.rt = agent.New(agent.Options{
		ConfigDir:      dir,
		Timeout:        timeout,
		AllowedTools:   []string{"Read", "Glob", "Grep"},
		PermissionMode: mode,
		MaxTurns:       10,
		Model:          geminiModel,
	}, backend, sessions, h.out, nil, log)
	return h
}

// geminiRecorder wraps the CLI in a script that saves what it prints (not
// for the system prompt export runs) and saves the fake's requests when
// the test ends.
func geminiRecorder(t *testing.T, dir, bin string, env []string, api *fakeapi.Gemini) (string, []string) {
	t.Helper()
	name := strings.TrimPrefix(t.Name(), "TestConformanceGemini")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`#!/bin/bash
if [ -n "$GEMINI_WRITE_SYSTEM_MD" ]; then exec %q "$@"; fi
n=$(ls %q | grep -c "^%s-.*\.jsonl$")
out=%q/%s-$n
printf '%%s\n' "$*" > "$out.args"
%q "$@" 2> >(tee "$out.stderr" >&2) | tee "$out.jsonl"
code=${PIPESTATUS[0]}
echo "$code" > "$out.exit"
exit $code
`, bin, dir, name, dir, name, bin)
	wrapper := filepath.Join(t.TempDir(), "gemini-recorder")
	src := wrapper + ".src"
	geminiWrite(t, src, script)
	if out, err := exec.Command("install", "-m", "0755", src, wrapper).CombinedOutput(); err != nil {
		t.Fatalf("install recorder: %v: %s", err, out)
	}
	t.Cleanup(func() {
		var reqs []map[string]any
		for _, r := range api.Requests() {
			reqs = append(reqs, map[string]any{"seq": r.Seq, "kind": r.Kind, "method": r.Method, "path": r.Path, "query": r.Query, "body": r.JSON})
		}
		b, _ := json.MarshalIndent(reqs, "", " ")
		_ = os.WriteFile(filepath.Join(dir, name+".requests.json"), b, 0o644)
	})
	return wrapper, env
}

func geminiWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (h *geminiHarness) say(channel, text string) agent.Outcome {
	h.t.Helper()
	return h.rt.Process(context.Background(), queue.Event{ID: 1, Kind: queue.KindMessage, ChannelID: channel, Lane: channel, Text: text, Time: time.Now()})
}

// geminiBuiltinMarker is a line of gemini's own system prompt: it shows
// that the CLI's instructions survived the persona being added.
const geminiBuiltinMarker = "# Core Mandates"

func TestConformanceGeminiReply(t *testing.T) {
	h := newGeminiHarness(t, 60*time.Second, "acceptEdits", fakeapi.Text("Hello from the fake model."))
	out := h.say("c1", "Say hello.")
	if out.Err != nil {
		t.Fatalf("run failed: %v\n%s", out.Err, h.api.Summary())
	}
	if out.Reply != "Hello from the fake model." {
		t.Errorf("reply = %q", out.Reply)
	}
	main := h.api.MainRequests()
	if len(main) != 1 {
		t.Fatalf("%d main requests:\n%s", len(main), h.api.Summary())
	}
	if got := main[0].Model(); got != geminiModel {
		t.Errorf("model = %q, want %q", got, geminiModel)
	}
	system := main[0].System()
	for _, want := range []string{geminiBuiltinMarker, "You are Conformo", "favourite colour: teal", "## Identity", "## Long-Term Memory", filepath.Join(h.dir, "memory.md")} {
		if !strings.Contains(system, want) {
			t.Errorf("system prompt lacks %q", want)
		}
	}
	if strings.Contains(system, "gemini-export-") {
		t.Errorf("system prompt still names the export run's temp home")
	}
	if got := main[0].Prompt(); !strings.Contains(got, "Say hello.") {
		t.Errorf("prompt = %q", got)
	}
	// acceptEdits -> auto_edit: the edit tools are offered.
	tools := strings.Join(main[0].Tools(), ",")
	for _, want := range []string{"read_file", "write_file", "replace"} {
		if !strings.Contains(tools, want) {
			t.Errorf("tools %s lack %s", tools, want)
		}
	}
	if b, ok := h.sessions.Get("c1"); !ok || b.SessionID == "" || b.SessionID != out.Result.SessionID {
		t.Errorf("binding = %+v, result session %q", b, out.Result.SessionID)
	}
	if u := out.Result.Usage; u.InputTokens != 100 || u.OutputTokens != 10 {
		t.Errorf("usage = %+v, want 100 in, 10 out", u)
	}
	if out.Result.CostUSD != 0 {
		t.Errorf("cost = %v: gemini reports no cost", out.Result.CostUSD)
	}
}

func TestConformanceGeminiResumeCarriesHistory(t *testing.T) {
	h := newGeminiHarness(t, 60*time.Second, "acceptEdits", fakeapi.Text("The first answer is 42."), fakeapi.Text("You asked about 42."))
	first := h.say("c1", "What is the answer?")
	second := h.say("c1", "What did I ask?")
	if first.Err != nil || second.Err != nil {
		t.Fatalf("runs failed: %v / %v\n%s", first.Err, second.Err, h.api.Summary())
	}
	if first.Result.SessionID == "" || first.Result.SessionID != second.Result.SessionID {
		t.Errorf("session changed on resume: %q -> %q", first.Result.SessionID, second.Result.SessionID)
	}
	if second.Reply != "You asked about 42." {
		t.Errorf("second reply = %q", second.Reply)
	}
	main := h.api.MainRequests()
	history := main[len(main)-1].History()
	for _, want := range []string{"What is the answer?", "The first answer is 42.", "What did I ask?"} {
		if !strings.Contains(history, want) {
			t.Errorf("resumed request lacks %q:\n%s", want, history)
		}
	}
}

// DESIGN decision 5: a change to memory.md reaches the model on a resumed
// turn. gemini reads GEMINI_SYSTEM_MD on every start, so the new persona is
// in the resumed request's system instruction itself (the runtime's change
// note in the prompt comes on top).
func TestConformanceGeminiPersonaFollowsEditsOnResume(t *testing.T) {
	h := newGeminiHarness(t, 60*time.Second, "acceptEdits", fakeapi.Text("Noted."), fakeapi.Text("Your build uses make."))
	if out := h.say("c1", "Hi."); out.Err != nil {
		t.Fatalf("first run: %v", out.Err)
	}
	geminiWrite(t, filepath.Join(h.dir, "memory.md"), "# Memory\n\n- favourite colour: teal\n- the build uses make\n")
	if out := h.say("c1", "What does the build use?"); out.Err != nil {
		t.Fatalf("second run: %v", out.Err)
	}
	main := h.api.MainRequests()
	if len(main) != 2 {
		t.Fatalf("%d main requests:\n%s", len(main), h.api.Summary())
	}
	first, last := main[0].System(), main[1].System()
	if strings.Contains(first, "the build uses make") {
		t.Errorf("the first request already knows the edit")
	}
	if !strings.Contains(last, "the build uses make") || !strings.Contains(last, "You are Conformo") {
		t.Errorf("the resumed request's system instruction lacks the edited persona")
	}
	if !strings.Contains(last, geminiBuiltinMarker) {
		t.Errorf("the resumed request's system instruction lost gemini's own prompt")
	}
	t.Logf("memory edit on resume: in system instruction %v, in the prompt %v",
		strings.Contains(last, "the build uses make"), strings.Contains(main[1].Prompt(), "the build uses make"))
}

func TestConformanceGeminiWriteToolAddsFact(t *testing.T) {
	h := newGeminiHarness(t, 90*time.Second, "acceptEdits")
	mem := filepath.Join(h.dir, "memory.md")
	h.api.Add(
		fakeapi.ToolUse("read_file", map[string]any{"file_path": mem}),
		fakeapi.Turn{Text: "I'll save that.", ToolCalls: fakeapi.ToolUse("write_file", map[string]any{"file_path": mem, "content": "# Memory\n\n- favourite colour: teal\n- deploys happen on Fridays\n"}).ToolCalls},
		fakeapi.Text("Saved to memory."),
	)
	out := h.say("c1", "Remember that deploys happen on Fridays.")
	if out.Err != nil {
		t.Fatalf("run failed: %v\n%s", out.Err, h.api.Summary())
	}
	data, err := os.ReadFile(mem)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "deploys happen on Fridays") || !strings.Contains(string(data), "favourite colour: teal") {
		t.Errorf("memory.md = %q", data)
	}
	if out.Reply != "Saved to memory." {
		t.Errorf("reply = %q", out.Reply)
	}
	main := h.api.MainRequests()
	if len(main) != 3 || h.api.Exhausted() != 0 {
		t.Fatalf("%d main requests, %d past the script:\n%s", len(main), h.api.Exhausted(), h.api.Summary())
	}
	// The tool results went back to the model.
	if hist := main[2].History(); !strings.Contains(hist, "favourite colour: teal") {
		t.Errorf("the last request lacks the read_file result:\n%s", hist)
	}
}

// PERMISSION_MODE=plan maps to --approval-mode plan: the same scripted
// write is refused and memory.md stays as it was.
func TestConformanceGeminiPlanModeRefusesWrite(t *testing.T) {
	h := newGeminiHarness(t, 90*time.Second, "plan")
	mem := filepath.Join(h.dir, "memory.md")
	before, _ := os.ReadFile(mem)
	h.api.Add(
		fakeapi.ToolUse("write_file", map[string]any{"file_path": mem, "content": "# Memory\n\n- overwritten\n"}),
		fakeapi.Text("I could not save that."),
	)
	out := h.say("c1", "Remember that deploys happen on Fridays.")
	if out.Err != nil {
		t.Fatalf("run failed: %v\n%s", out.Err, h.api.Summary())
	}
	after, _ := os.ReadFile(mem)
	if string(after) != string(before) {
		t.Errorf("memory.md changed in plan mode: %q", after)
	}
	if len(out.Result.PermissionDenials) != 1 || out.Result.PermissionDenials[0] != "write_file" {
		t.Errorf("permission denials = %q, want [write_file]", out.Result.PermissionDenials)
	}
}

func TestConformanceGeminiAuthErrorIsClean(t *testing.T) {
	h := newGeminiHarness(t, 60*time.Second, "acceptEdits", fakeapi.Error(401, "API key not valid. Please pass a valid API key."))
	out := h.say("c1", "Hello?")
	if !errors.Is(out.Err, backends.ErrAuth) {
		t.Fatalf("err = %v, want an authentication error", out.Err)
	}
	var e *backends.Error
	if errors.As(out.Err, &e) && e.Status != 401 {
		t.Errorf("status = %d, want 401", e.Status)
	}
	for _, leak := range []string{geminiAPIKey, h.dir, "API key not valid", "at ", ".js:"} {
		if strings.Contains(out.Reply, leak) {
			t.Errorf("user-facing reply leaks %q: %q", leak, out.Reply)
		}
	}
	if !strings.Contains(out.Reply, "authentication_error") {
		t.Errorf("reply lacks the error type: %q", out.Reply)
	}
	if n := len(h.api.MainRequests()); n != 1 {
		t.Errorf("%d main requests: retries are on", n)
	}
}

// A hung API: gemini has no timeout of its own; the gateway's timer kills
// the CLI's whole process group. The CLI never sees the Discord token or
// webhook secrets.
func TestConformanceGeminiHungAPIIsKilled(t *testing.T) {
	h := newGeminiHarness(t, 10*time.Second, "acceptEdits", fakeapi.Hang())
	done := make(chan agent.Outcome, 1)
	go func() { done <- h.say("c1", "Take your time.") }()

	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	if _, err := h.api.WaitMain(ctx, 1); err != nil {
		t.Fatalf("the CLI never reached the API: %v", err)
	}
	pids := processesWith(h.marker)
	if len(pids) == 0 {
		t.Fatal("no gemini process found while the API hangs")
	}
	assertNoSecretsIn(t, pids, geminiDiscordToken, geminiWebhookToken, "DISCORD_BOT_TOKEN")
	var out agent.Outcome
	select {
	case out = <-done:
	case <-ctx.Done():
		t.Fatal("the run did not end after the timeout")
	}
	assertTimedOut(t, out)
	waitProcessesGone(ctx, t, h.marker)
}

// gemini keeps sessions per project under ~/.gemini/tmp/<project>/chats; an
// id it does not know fails the resume before any request (stderr "Error
// resuming session: Invalid session identifier …", exit 42; with no session
// at all in the project, "… No previous sessions found …"). The adapter
// reports a stale session and the runtime starts afresh.
func TestConformanceGeminiStaleSessionHeals(t *testing.T) {
	h := newGeminiHarness(t, 60*time.Second, "acceptEdits", fakeapi.Text("Another channel."), fakeapi.Text("A fresh start."))
	// A session of another channel, so the project has sessions and the
	// unknown id is what fails.
	if out := h.say("c0", "Hello from elsewhere."); out.Err != nil {
		t.Fatalf("first run: %v", out.Err)
	}
	stale := geminiUUID()
	if err := h.sessions.Set("c1", session.Binding{SessionID: stale, Backend: "gemini"}); err != nil {
		t.Fatal(err)
	}
	out := h.say("c1", "Hello again.")
	if out.Err != nil || !out.Healed {
		t.Fatalf("outcome = %+v\n%s", out, h.api.Summary())
	}
	if !strings.Contains(out.Reply, "A fresh start.") || !strings.Contains(out.Reply, "new session") {
		t.Errorf("reply = %q", out.Reply)
	}
	b, _ := h.sessions.Get("c1")
	if b.SessionID == stale || b.SessionID == "" {
		t.Errorf("binding still %q", b.SessionID)
	}
	if n := len(h.api.MainRequests()); n != 2 {
		t.Errorf("%d main requests, want 2 (the stale resume sends none)", n)
	}
}

// A 500 is reported as an API error after one request (retries are off in
// the test settings), though gemini exits 244.
func TestConformanceGeminiServerErrorIsAPIError(t *testing.T) {
	h := newGeminiHarness(t, 60*time.Second, "acceptEdits", fakeapi.Error(500, "Internal error encountered."))
	out := h.say("c1", "Hello?")
	var e *backends.Error
	if !errors.As(out.Err, &e) || e.Kind != backends.KindAPI || e.Status != 500 {
		t.Fatalf("err = %#v, want api_error with status 500", out.Err)
	}
	if n := len(h.api.MainRequests()); n != 1 {
		t.Errorf("%d main requests: retries are on", n)
	}
}

func geminiUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
