//go:build conformance

package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
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

// The opencode scenarios run the real opencode CLI (OPENCODE_BIN, installed
// by `make conformance`) against fakeapi.Chat, an OpenAI Chat Completions
// fake, configured as an @ai-sdk/openai-compatible provider in the isolated
// HOME's ~/.config/opencode/opencode.json. That provider package is built
// into the opencode binary: nothing is downloaded for it. opencode starts a
// background install of @opencode-ai/plugin into its config directory
// (npm registry); it is not waited for, and a failure is only logged.
//
// Set OPENCODE_RECORD=<dir> to keep every run's stdout and stderr there
// (the source of testdata/opencode).

const (
	opencodeAPIKey = "sk-opencode-conformance-key"
	opencodeModel  = "fake-model"
)

type opencodeReplies struct {
	mu  sync.Mutex // guards got
	got []string
}

func (r *opencodeReplies) Reply(_ context.Context, _ queue.Event, text string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, text)
	return nil
}

type opencodeHarness struct {
	t        *testing.T
	api      *fakeapi.Chat
	dir      string
	home     string
	sessions *session.Store
	rt       *agent.Runtime
	// marker is an environment entry only this test's CLI processes have.
	marker string
}

// opencodeOptions are the runtime settings a scenario may change.
type opencodeOptions struct {
	timeout        time.Duration
	permissionMode string
	allowedTools   []string
	// env is added to the gateway's environment.
	env []string
}

var opencodeRuns atomic.Int64

func newOpencodeHarness(t *testing.T, o opencodeOptions, turns ...fakeapi.Turn) *opencodeHarness {
	t.Helper()
	bin := cliBinary(t, "opencode")
	t.Parallel() // each scenario has its own HOME, CONFIG_DIR and fake
	if o.timeout == 0 {
		o.timeout = 60 * time.Second
	}
	if o.permissionMode == "" {
		o.permissionMode = "acceptEdits"
	}
	api := fakeapi.StartChat(t, turns...)
	dir := t.TempDir()
	home := t.TempDir()
	log := zerolog.New(zerolog.NewTestWriter(t))
	if _, err := persona.Bootstrap(dir, log); err != nil {
		t.Fatal(err)
	}
	opencodeWrite(t, filepath.Join(dir, "identity.md"), "# Identity\n\nYou are Conformo, a test assistant.\n")
	opencodeWrite(t, filepath.Join(dir, "memory.md"), "# Memory\n\n- favourite colour: teal\n")

	// A real config file, as an operator writes it. Retries: opencode
	// retries 5xx and network errors with no setting to stop it, so the
	// scenarios use a 401 (not retried) and the gateway's own timeout.
	config := map[string]any{
		"$schema": "https://opencode.ai/config.json",
		"provider": map[string]any{
			"fake": map[string]any{
				"npm":  "@ai-sdk/openai-compatible",
				"name": "Fake",
				"options": map[string]any{
					"baseURL": api.BaseURL(),
					"apiKey":  opencodeAPIKey,
					"timeout": 120000,
				},
				"models": map[string]any{
					opencodeModel: map[string]any{
						"name": "Fake Model",
						// USD per million tokens, so step_finish reports a cost.
						"cost": map[string]any{"input": 3, "output": 15},
					},
				},
			},
		},
		"model":      "fake/" + opencodeModel,
		"autoupdate": false,
		"share":      "disabled",
	}
	b, err := json.MarshalIndent(config, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(home, ".config", "opencode"), 0o755); err != nil {
		t.Fatal(err)
	}
	opencodeWrite(t, filepath.Join(home, ".config", "opencode", "opencode.json"), string(b))

	marker := fmt.Sprintf("OPENCODE_CONFORMANCE_RUN=%d-%d", os.Getpid(), opencodeRuns.Add(1))
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"OPENCODE_DISABLE_MODELS_FETCH=1",
		"OPENCODE_DISABLE_AUTOUPDATE=1",
		"OPENCODE_DISABLE_DEFAULT_PLUGINS=1",
		"OPENCODE_DISABLE_SHARE=1",
		marker,
		"DISCORD_BOT_TOKEN=" + discordToken,
		"WEBHOOK_GITHUB_SECRET=webhook-secret-must-not-leak",
	}
	env = append(env, o.env...)
	if rec := os.Getenv("OPENCODE_RECORD"); rec != "" {
		bin = opencodeRecorder(t, bin, rec)
	}
	backend, err := backends.New("opencode", backends.Options{Binary: bin, Env: env, KillGrace: 2 * time.Second, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	sessions, _, err := session.Open(filepath.Join(dir, session.FileName))
	if err != nil {
		t.Fatal(err)
	}
	h := &opencodeHarness{t: t, api: api, dir: dir, home: home, sessions: sessions, marker: marker}
	h.rt = agent.New(agent.Options{
		ConfigDir:      dir,
		Timeout:        o.timeout,
		AllowedTools:   o.allowedTools,
		PermissionMode: o.permissionMode,
		MaxTurns:       10,
	}, backend, sessions, &opencodeReplies{}, nil, log)
	return h
}

// opencodeRecorder returns a wrapper around bin that tees each run's
// stdout and stderr into dir/<test>-<n>.{jsonl,stderr}.
func opencodeRecorder(t *testing.T, bin, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	prefix := filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_"))
	script := fmt.Sprintf(`#!/bin/bash
set -o pipefail
n=1; while [ -e %[1]s-$n.jsonl ]; do n=$((n+1)); done
printf '%%s\n' "$*" > %[1]s-$n.args
%[2]s "$@" 2> >(tee %[1]s-$n.stderr >&2) | tee %[1]s-$n.jsonl
`, opencodeQuote(prefix), opencodeQuote(bin))
	src := filepath.Join(t.TempDir(), "opencode.src")
	opencodeWrite(t, src, script)
	out := filepath.Join(t.TempDir(), "opencode")
	// Copied by a child process: an executable this process had open for
	// writing can be inherited by a parallel fork ("text file busy").
	if b, err := exec.Command("install", "-m", "0755", src, out).CombinedOutput(); err != nil {
		t.Fatalf("install recorder: %v: %s", err, b)
	}
	return out
}

func opencodeQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func opencodeWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (h *opencodeHarness) say(channel, text string) agent.Outcome {
	h.t.Helper()
	return h.rt.Process(context.Background(), queue.Event{ID: 1, Kind: queue.KindMessage, ChannelID: channel, Lane: channel, Text: text, Time: time.Now()})
}

// opencodeFlatten renders a request's conversation, one line per message.
func opencodeFlatten(r fakeapi.ChatRequest) string {
	var b strings.Builder
	for _, m := range r.Messages() {
		if m.Role == "system" {
			continue
		}
		fmt.Fprintf(&b, "[%s] %s", m.Role, m.Text)
		for _, c := range m.ToolCalls {
			fmt.Fprintf(&b, " <%s %s>", c.Name, c.Arguments)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func TestConformanceOpencodeReply(t *testing.T) {
	h := newOpencodeHarness(t, opencodeOptions{}, fakeapi.Text("Hello from the fake model."))
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
	// --title: no title request; nothing else but the one conversation call.
	if all := h.api.Requests(); len(all) != 1 {
		t.Errorf("%d requests, want only the conversation's:\n%s", len(all), h.api.Summary())
	}
	if got := main[0].Header.Get("Authorization"); got != "Bearer "+opencodeAPIKey {
		t.Errorf("Authorization = %q", got)
	}
	if main[0].Model() != opencodeModel {
		t.Errorf("model = %q", main[0].Model())
	}
	system := main[0].System()
	// The persona is appended to opencode's own prompt, which keeps its
	// tool instructions.
	for _, want := range []string{"You are opencode", "You are Conformo", "favourite colour: teal", "## Identity", "## Long-Term Memory", filepath.Join(h.dir, "memory.md")} {
		if !strings.Contains(system, want) {
			t.Errorf("system prompt lacks %q", want)
		}
	}
	if got := main[0].Prompt(); !strings.Contains(got, "Say hello.") {
		t.Errorf("prompt = %q", got)
	}
	if b, ok := h.sessions.Get("c1"); !ok || !strings.HasPrefix(b.SessionID, "ses_") || b.SessionID != out.Result.SessionID {
		t.Errorf("binding = %+v, result session %q", b, out.Result.SessionID)
	}
	// Usage and cost come from step_finish (cost from the model's price in
	// the config: 100 input tokens at $3/M, 10 output at $15/M).
	if u := out.Result.Usage; u.InputTokens != 100 || u.OutputTokens != 10 {
		t.Errorf("usage = %+v", u)
	}
	if c := out.Result.CostUSD; c < 0.00044 || c > 0.00046 {
		t.Errorf("cost = %v, want 0.00045", c)
	}
	if out.Result.Turns != 1 {
		t.Errorf("turns = %d", out.Result.Turns)
	}
}

func TestConformanceOpencodeResumeCarriesHistory(t *testing.T) {
	h := newOpencodeHarness(t, opencodeOptions{}, fakeapi.Text("The first answer is 42."), fakeapi.Text("You asked about 42."))
	first := h.say("c1", "What is the answer?")
	second := h.say("c1", "What did I ask?")
	if first.Err != nil || second.Err != nil {
		t.Fatalf("runs failed: %v / %v\n%s", first.Err, second.Err, h.api.Summary())
	}
	if first.Result.SessionID != second.Result.SessionID {
		t.Errorf("session changed on resume: %s -> %s", first.Result.SessionID, second.Result.SessionID)
	}
	if second.Reply != "You asked about 42." {
		t.Errorf("second reply = %q", second.Reply)
	}
	// opencode reports each run's own cost; both turns cost the same.
	if d := second.Result.CostUSD - first.Result.CostUSD; first.Result.CostUSD <= 0 || d > 1e-9 || d < -1e-9 {
		t.Errorf("turn costs %v then %v: the resumed turn should cost the same", first.Result.CostUSD, second.Result.CostUSD)
	}
	main := h.api.MainRequests()
	if len(main) != 2 {
		t.Fatalf("%d main requests:\n%s", len(main), h.api.Summary())
	}
	// The resumed run asks for no title either: the two turns are all.
	if all := h.api.Requests(); len(all) != 2 {
		t.Errorf("%d requests, want the two turns only:\n%s", len(all), h.api.Summary())
	}
	history := opencodeFlatten(main[1])
	for _, want := range []string{"What is the answer?", "The first answer is 42.", "What did I ask?"} {
		if !strings.Contains(history, want) {
			t.Errorf("resumed request lacks %q:\n%s", want, history)
		}
	}
}

// The persona reaches the model on new and resumed turns, and an edit of
// memory.md between them reaches the resumed turn. opencode reads the
// instructions file again on every call, so the edit is in the resumed
// call's system prompt itself (and the runtime's change note is in the
// prompt as well).
func TestConformanceOpencodePersonaFollowsEditsOnResume(t *testing.T) {
	h := newOpencodeHarness(t, opencodeOptions{}, fakeapi.Text("Noted."), fakeapi.Text("Your build uses make."))
	if out := h.say("c1", "Hi."); out.Err != nil {
		t.Fatalf("first run: %v\n%s", out.Err, h.api.Summary())
	}
	opencodeWrite(t, filepath.Join(h.dir, "memory.md"), "# Memory\n\n- favourite colour: teal\n- the build uses make\n")
	if out := h.say("c1", "What does the build use?"); out.Err != nil {
		t.Fatalf("second run: %v\n%s", out.Err, h.api.Summary())
	}
	main := h.api.MainRequests()
	if len(main) != 2 {
		t.Fatalf("%d main requests:\n%s", len(main), h.api.Summary())
	}
	first, last := main[0].System(), main[1].System()
	for i, system := range []string{first, last} {
		if !strings.Contains(system, "You are Conformo") || !strings.Contains(system, "favourite colour: teal") {
			t.Errorf("request %d: the system prompt lacks the persona", i)
		}
	}
	if strings.Contains(first, "the build uses make") {
		t.Error("the first request already has the edit")
	}
	if !strings.Contains(last, "the build uses make") {
		t.Errorf("the resumed request's system prompt lacks the edited memory.md")
	}
	if !strings.Contains(last, "You are opencode") {
		t.Errorf("the resumed request lost opencode's own prompt")
	}
	t.Logf("memory edit on resume: in the prompt too: %v", strings.Contains(main[1].Prompt(), "the build uses make"))
}

func TestConformanceOpencodeWriteToolAddsFact(t *testing.T) {
	h := newOpencodeHarness(t, opencodeOptions{allowedTools: []string{"Read", "Write", "Edit"}})
	mem := filepath.Join(h.dir, "memory.md")
	h.api.Add(
		fakeapi.ToolUse("read", map[string]any{"filePath": mem}),
		fakeapi.ToolUse("write", map[string]any{"filePath": mem, "content": "# Memory\n\n- favourite colour: teal\n- deploys happen on Fridays\n"}),
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
	if out.Result.Turns != 3 || len(out.Result.PermissionDenials) != 0 {
		t.Errorf("turns = %d, denials = %v", out.Result.Turns, out.Result.PermissionDenials)
	}
	main := h.api.MainRequests()
	if len(main) != 3 {
		t.Fatalf("%d main requests:\n%s", len(main), h.api.Summary())
	}
	// The tool result went back to the model.
	if got := opencodeFlatten(main[2]); !strings.Contains(got, "[tool]") {
		t.Errorf("the last request carries no tool result:\n%s", got)
	}
}

// PERMISSION_MODE=default: opencode's run mode rejects what would need a
// question, so the write is refused, memory.md stays as it was, and the
// refusal is reported.
func TestConformanceOpencodeDefaultModeDeniesWrite(t *testing.T) {
	h := newOpencodeHarness(t, opencodeOptions{permissionMode: "default"})
	mem := filepath.Join(h.dir, "memory.md")
	before, err := os.ReadFile(mem)
	if err != nil {
		t.Fatal(err)
	}
	h.api.Add(
		fakeapi.Turn{Text: "I'll save that.", ToolCalls: fakeapi.ToolUse("write", map[string]any{"filePath": mem, "content": "overwritten\n"}).ToolCalls},
		fakeapi.Text("Could not save."),
	)
	out := h.say("c1", "Remember something.")
	if out.Err != nil {
		t.Fatalf("run failed: %v\n%s", out.Err, h.api.Summary())
	}
	after, _ := os.ReadFile(mem)
	if string(after) != string(before) {
		t.Errorf("memory.md changed in default mode: %q", after)
	}
	if len(out.Result.PermissionDenials) != 1 || out.Result.PermissionDenials[0] != "write" {
		t.Errorf("denials = %v, want [write]", out.Result.PermissionDenials)
	}
}

// PERMISSION_MODE=bypassPermissions passes --auto: what the operator's
// own rules leave to a question (here edit:"ask") is approved.
func TestConformanceOpencodeBypassApprovesAsk(t *testing.T) {
	h := newOpencodeHarness(t, opencodeOptions{permissionMode: "bypassPermissions", env: []string{`OPENCODE_PERMISSION={"edit":"ask"}`}})
	mem := filepath.Join(h.dir, "memory.md")
	h.api.Add(
		fakeapi.ToolUse("write", map[string]any{"filePath": mem, "content": "# Memory\n\n- bypass works\n"}),
		fakeapi.Text("Saved."),
	)
	out := h.say("c1", "Save it.")
	if out.Err != nil {
		t.Fatalf("run failed: %v\n%s", out.Err, h.api.Summary())
	}
	if data, _ := os.ReadFile(mem); !strings.Contains(string(data), "bypass works") {
		t.Errorf("memory.md = %q", data)
	}
	if out.Reply != "Saved." || len(out.Result.PermissionDenials) != 0 {
		t.Errorf("reply = %q, denials = %v", out.Reply, out.Result.PermissionDenials)
	}
}

// PERMISSION_MODE=plan runs opencode's plan agent with edit and bash
// denied, even when ALLOWED_TOOLS names them: opencode then does not offer
// those tools at all, and a call to one comes back as an "invalid" tool.
func TestConformanceOpencodePlanModeDeniesWrite(t *testing.T) {
	h := newOpencodeHarness(t, opencodeOptions{permissionMode: "plan", allowedTools: []string{"Write", "Bash"}})
	mem := filepath.Join(h.dir, "memory.md")
	before, err := os.ReadFile(mem)
	if err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(h.dir, "bash-ran")
	h.api.Add(
		fakeapi.ToolUse("write", map[string]any{"filePath": mem, "content": "overwritten\n"}),
		fakeapi.ToolUse("bash", map[string]any{"command": "touch " + marker, "description": "Touch a file"}),
		fakeapi.Text("Plan only."),
	)
	out := h.say("c1", "Plan something.")
	if out.Err != nil {
		t.Fatalf("run failed: %v\n%s", out.Err, h.api.Summary())
	}
	after, _ := os.ReadFile(mem)
	if string(after) != string(before) {
		t.Errorf("memory.md changed in plan mode: %q", after)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("bash ran in plan mode")
	}
	if out.Reply != "Plan only." {
		t.Errorf("reply = %q", out.Reply)
	}
	main := h.api.MainRequests()
	if len(main) == 0 {
		t.Fatalf("no main request:\n%s", h.api.Summary())
	}
	for _, tool := range main[0].Tools() {
		if tool == "write" || tool == "edit" || tool == "bash" {
			t.Errorf("plan mode offers the %s tool (tools %v)", tool, main[0].Tools())
		}
	}
	if !strings.Contains(main[0].Prompt(), "Plan mode") {
		t.Errorf("the request does not carry the plan agent's reminder")
	}
}

func TestConformanceOpencodeAuthErrorIsClean(t *testing.T) {
	h := newOpencodeHarness(t, opencodeOptions{}, fakeapi.Error(401, "Incorrect API key provided"))
	out := h.say("c1", "Hello?")
	if !errors.Is(out.Err, backends.ErrAuth) {
		t.Fatalf("err = %v, want an authentication error\n%s", out.Err, h.api.Summary())
	}
	var e *backends.Error
	if errors.As(out.Err, &e) && e.Status != 401 {
		t.Errorf("status = %d, want 401", e.Status)
	}
	for _, leak := range []string{opencodeAPIKey, h.dir, "Incorrect API key", "at ", ".js:", "ses_"} {
		if strings.Contains(out.Reply, leak) {
			t.Errorf("user-facing reply leaks %q: %q", leak, out.Reply)
		}
	}
	if !strings.Contains(out.Reply, "authentication_error") {
		t.Errorf("reply lacks the error type: %q", out.Reply)
	}
	if n := len(h.api.MainRequests()); n != 1 {
		t.Errorf("%d main requests, want 1 (a 401 is not retried)", n)
	}
}

// A hung API: the gateway's timer kills the CLI's whole process group. The
// CLI never sees the Discord token or webhook secrets.
func TestConformanceOpencodeHungAPIIsKilled(t *testing.T) {
	h := newOpencodeHarness(t, opencodeOptions{timeout: 20 * time.Second}, fakeapi.Hang())
	done := make(chan agent.Outcome, 1)
	go func() { done <- h.say("c1", "Take your time.") }()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := h.api.WaitMain(ctx, 1); err != nil {
		t.Fatalf("the CLI never reached the API: %v", err)
	}
	pids := processesWith(h.marker)
	if len(pids) == 0 {
		t.Fatal("no opencode process found while the API hangs")
	}
	assertNoSecretsIn(t, pids, discordToken, "webhook-secret-must-not-leak", "DISCORD_BOT_TOKEN")
	var out agent.Outcome
	select {
	case out = <-done:
	case <-ctx.Done():
		t.Fatal("the run did not end after the timeout")
	}
	assertTimedOut(t, out)
	waitProcessesGone(ctx, t, h.marker)
	if err := h.api.WaitIdle(ctx); err != nil {
		t.Errorf("the hung request did not see its client go: %v", err)
	}
}

func TestConformanceOpencodeStaleSessionHeals(t *testing.T) {
	h := newOpencodeHarness(t, opencodeOptions{}, fakeapi.Text("A fresh start."))
	const stale = "ses_0123456789abcdeFGHIJKLMNOP"
	if err := h.sessions.Set("c1", session.Binding{SessionID: stale, Backend: "opencode"}); err != nil {
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
	if b.SessionID == stale || !strings.HasPrefix(b.SessionID, "ses_") {
		t.Errorf("binding still %q", b.SessionID)
	}
	if n := len(h.api.MainRequests()); n != 1 {
		t.Errorf("%d main requests, want 1 (the stale resume sends none)", n)
	}
}
