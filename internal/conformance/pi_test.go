//go:build conformance

package conformance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
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

// pi (@mariozechner/pi-coding-agent) speaks the Anthropic Messages API to a
// provider declared in $HOME/.pi/agent/models.json, so it runs against the
// same fake as claude. Every request pi makes in print mode offers tools,
// so fakeapi.IsMain classifies them right (pi made no side requests here).

const (
	piProvider = "fake"
	piModelID  = "fake-model"
	// piModel is AGENT_MODEL as the gateway passes it: "provider/id".
	piModel = piProvider + "/" + piModelID
)

type piHarness struct {
	t        *testing.T
	api      *fakeapi.Anthropic
	dir      string
	home     string
	sessions *session.Store
	out      *replies
	rt       *agent.Runtime
}

type piHarnessOptions struct {
	timeout        time.Duration
	permissionMode string
	allowedTools   []string
	// piRetries turns pi's own retries on (with a short backoff).
	piRetries bool
	// home, when set, is the HOME to use (shared with another harness).
	home string
}

func newPiHarness(t *testing.T, o piHarnessOptions, turns ...fakeapi.Turn) *piHarness {
	t.Helper()
	bin := cliBinary(t, "pi")
	if o.timeout == 0 {
		o.timeout = 60 * time.Second
	}
	if o.permissionMode == "" {
		o.permissionMode = "acceptEdits"
	}
	if o.allowedTools == nil {
		o.allowedTools = []string{"Read", "Write", "Edit"}
	}
	api := fakeapi.StartAnthropic(t, turns...)
	dir := t.TempDir()
	home := o.home
	if home == "" {
		home = t.TempDir()
	}
	log := zerolog.New(zerolog.NewTestWriter(t))
	if _, err := persona.Bootstrap(dir, log); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "identity.md"), "# Identity\n\nYou are Conformo, a test assistant.\n")
	write(t, filepath.Join(dir, "memory.md"), "# Memory\n\n- favourite colour: teal\n")

	// pi's real config files. apiKey names the variable pi reads the key
	// from, so the key travels the way the gateway hands it down: in the
	// environment. The cost per million tokens makes pi report a cost.
	agentDir := filepath.Join(home, ".pi", "agent")
	if err := os.MkdirAll(agentDir, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(agentDir, "models.json"), fmt.Sprintf(`{
  "providers": {
    %q: {
      "baseUrl": %q,
      "api": "anthropic-messages",
      "apiKey": "ANTHROPIC_API_KEY",
      "models": [{"id": %q, "cost": {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75}}]
    }
  }
}
`, piProvider, api.URL(), piModelID))
	// Retries off, or error cases wait on backoff.
	retry := `{"enabled": false, "provider": {"maxRetries": 0, "timeoutMs": 30000}}`
	if o.piRetries {
		retry = `{"enabled": true, "maxRetries": 2, "baseDelayMs": 10, "provider": {"maxRetries": 0, "timeoutMs": 30000}}`
	}
	write(t, filepath.Join(agentDir, "settings.json"), `{
  "retry": `+retry+`,
  "enableInstallTelemetry": false,
  "quietStartup": true
}
`)

	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"PI_OFFLINE=1",
		"ANTHROPIC_API_KEY=" + apiKey,
		"DISCORD_BOT_TOKEN=" + discordToken,
		"WEBHOOK_GITHUB_SECRET=webhook-secret-must-not-leak",
	}
	if rec := os.Getenv("PI_RECORD_DIR"); rec != "" {
		bin = piRecorder(t, bin, rec)
	}
	backend, err := backends.New("pi", backends.Options{Binary: bin, Env: env, KillGrace: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	sessions, _, err := session.Open(filepath.Join(dir, session.FileName))
	if err != nil {
		t.Fatal(err)
	}
	h := &piHarness{t: t, api: api, dir: dir, home: home, sessions: sessions, out: &replies{}}
	h.rt = agent.New(agent.Options{
		ConfigDir:      dir,
		Timeout:        o.timeout,
		AllowedTools:   o.allowedTools,
		PermissionMode: o.permissionMode,
		MaxTurns:       10,
		Model:          piModel,
	}, backend, sessions, h.out, nil, log)
	return h
}

// piRecorder wraps pi in a script that copies its stdout and stderr to
// dir/<test>-<n>.jsonl and .stderr, for refreshing testdata/pi (see its
// README). The wrapper stays in pi's process group, so it dies with it.
func piRecorder(t *testing.T, bin, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(t.Name(), "TestConformancePi")
	script := fmt.Sprintf(`#!/bin/bash
n=$(ls %[2]s | grep -c '^%[3]s-.*\.jsonl$')
f=%[2]s/%[3]s-$n
"%[1]s" "$@" 2> >(tee "$f.stderr" >&2) | tee "$f.jsonl"
exit ${PIPESTATUS[0]}
`, bin, dir, name)
	src := filepath.Join(t.TempDir(), "pi.src")
	wrapper := filepath.Join(t.TempDir(), "pi")
	if err := os.WriteFile(src, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	// install, not a write of our own: see backends' fakeCLI (ETXTBSY).
	if out, err := exec.Command("install", "-m", "0755", src, wrapper).CombinedOutput(); err != nil {
		t.Fatalf("install recorder: %v: %s", err, out)
	}
	return wrapper
}

func (h *piHarness) say(channel, text string) agent.Outcome {
	h.t.Helper()
	return h.rt.Process(context.Background(), queue.Event{ID: 1, Kind: queue.KindMessage, ChannelID: channel, Lane: channel, Text: text, Time: time.Now()})
}

// piCheckSystem asserts the persona reached the model appended to pi's own
// system prompt, which keeps its tool instructions.
func piCheckSystem(t *testing.T, h *piHarness, r fakeapi.Request, extra ...string) {
	t.Helper()
	system := r.System()
	want := append([]string{
		"You are Conformo", "favourite colour: teal", "## Identity", "## Long-Term Memory",
		filepath.Join(h.dir, "memory.md"),
		"Available tools:", // pi's own prompt, not replaced
	}, extra...)
	for _, w := range want {
		if !strings.Contains(system, w) {
			t.Errorf("system prompt lacks %q", w)
		}
	}
}

func TestConformancePiReply(t *testing.T) {
	h := newPiHarness(t, piHarnessOptions{}, fakeapi.Text("Hello from the fake model."))
	out := h.say("c1", "Say hello.")
	if out.Err != nil {
		t.Fatalf("run failed: %v\n%s", out.Err, h.api.Summary())
	}
	if out.Reply != "Hello from the fake model." {
		t.Errorf("reply = %q", out.Reply)
	}
	main := h.api.MainRequests()
	if len(main) != 1 || h.api.Exhausted() != 0 {
		t.Fatalf("%d main requests:\n%s", len(main), h.api.Summary())
	}
	if got := main[0].Model(); got != piModelID {
		t.Errorf("model = %q, want %q (from AGENT_MODEL %q)", got, piModelID, piModel)
	}
	if got := main[0].Header.Get("X-Api-Key"); got != apiKey {
		t.Errorf("x-api-key = %q, want the key from the environment", got)
	}
	piCheckSystem(t, h, main[0])
	if got := main[0].Prompt(); !strings.Contains(got, "Say hello.") {
		t.Errorf("prompt = %q", got)
	}
	// acceptEdits with Read,Write,Edit: read-only tools plus edit and write;
	// no bash.
	if got, want := main[0].Tools(), []string{"read", "grep", "find", "ls", "edit", "write"}; !slices.Equal(got, want) {
		t.Errorf("tools = %v, want %v", got, want)
	}
	if b, ok := h.sessions.Get("c1"); !ok || b.SessionID == "" || b.SessionID != out.Result.SessionID || b.Backend != "pi" {
		t.Errorf("binding = %+v, result session %q", b, out.Result.SessionID)
	}
	// 100 input and 10 output tokens at $3 and $15 per million.
	if want := 100*3e-6 + 10*15e-6; !piNear(out.Result.CostUSD, want) {
		t.Errorf("cost = %v, want %v", out.Result.CostUSD, want)
	}
	if u := out.Result.Usage; u.InputTokens != 100 || u.OutputTokens != 10 {
		t.Errorf("usage = %+v", u)
	}
}

// A prompt over argv's 128 KiB per-argument limit reaches the model whole:
// it goes on stdin.
func TestConformancePiLongPrompt(t *testing.T) {
	h := newPiHarness(t, piHarnessOptions{}, fakeapi.Text("Long read."))
	long := "Summarise this: " + strings.Repeat("lorem ipsum ", 200<<10/12) + "THE END"
	out := h.say("c1", long)
	if out.Err != nil {
		t.Fatalf("run failed: %v\n%s", out.Err, h.api.Summary())
	}
	main := h.api.MainRequests()
	if len(main) != 1 {
		t.Fatalf("%d main requests:\n%s", len(main), h.api.Summary())
	}
	if got := main[0].Prompt(); !strings.Contains(got, long) {
		t.Errorf("prompt of %d bytes does not carry the %d-byte message", len(got), len(long))
	}
}

func TestConformancePiResumeCarriesHistory(t *testing.T) {
	h := newPiHarness(t, piHarnessOptions{}, fakeapi.Text("The first answer is 42."), fakeapi.Text("You asked about 42."))
	first := h.say("c1", "What is the answer?")
	second := h.say("c1", "What did I ask?")
	if first.Err != nil || second.Err != nil {
		t.Fatalf("runs failed: %v / %v\n%s", first.Err, second.Err, h.api.Summary())
	}
	if first.Result.SessionID == "" || first.Result.SessionID != second.Result.SessionID {
		t.Errorf("session changed on resume: %s -> %s", first.Result.SessionID, second.Result.SessionID)
	}
	// pi reports each run's own cost, not a running total.
	if first.Result.CostUSD <= 0 || !piNear(first.Result.CostUSD, second.Result.CostUSD) {
		t.Errorf("turn costs %v then %v: both turns used the same tokens", first.Result.CostUSD, second.Result.CostUSD)
	}
	main := h.api.MainRequests()
	if len(main) != 2 {
		t.Fatalf("%d main requests:\n%s", len(main), h.api.Summary())
	}
	history := flatten(main[1])
	for _, want := range []string{"What is the answer?", "The first answer is 42.", "What did I ask?"} {
		if !strings.Contains(history, want) {
			t.Errorf("resumed request lacks %q:\n%s", want, history)
		}
	}
	// The persona is sent on the resumed turn too.
	piCheckSystem(t, h, main[1])
	if second.Reply != "You asked about 42." {
		t.Errorf("reply = %q", second.Reply)
	}
}

// DESIGN decision 5: a change to memory.md reaches the model on a resumed
// turn. pi builds its system prompt afresh on every run, so the edit is in
// the system prompt itself (and the runtime's change note in the prompt).
func TestConformancePiPersonaFollowsEditsOnResume(t *testing.T) {
	h := newPiHarness(t, piHarnessOptions{}, fakeapi.Text("Noted."), fakeapi.Text("Your build uses make."))
	if out := h.say("c1", "Hi."); out.Err != nil {
		t.Fatalf("first run: %v", out.Err)
	}
	write(t, filepath.Join(h.dir, "memory.md"), "# Memory\n\n- favourite colour: teal\n- the build uses make\n")
	if out := h.say("c1", "What does the build use?"); out.Err != nil {
		t.Fatalf("second run: %v", out.Err)
	}
	main := h.api.MainRequests()
	if len(main) != 2 {
		t.Fatalf("%d main requests:\n%s", len(main), h.api.Summary())
	}
	if strings.Contains(main[0].System(), "the build uses make") {
		t.Fatal("the first request already has the edit: the test proves nothing")
	}
	piCheckSystem(t, h, main[1], "the build uses make")
	if !strings.Contains(flatten(main[1]), "the build uses make") {
		t.Errorf("the resumed prompt lacks the runtime's change note")
	}
}

func TestConformancePiWriteToolAddsFact(t *testing.T) {
	h := newPiHarness(t, piHarnessOptions{})
	mem := filepath.Join(h.dir, "memory.md")
	h.api.Add(
		fakeapi.ToolUse("read", map[string]any{"path": mem}),
		fakeapi.ToolUse("write", map[string]any{"path": mem, "content": "# Memory\n\n- favourite colour: teal\n- deploys happen on Fridays\n"}),
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
	if len(main) != 3 || !strings.Contains(flatten(main[2]), "Successfully wrote") {
		t.Errorf("the model did not get the write's result:\n%s", h.api.Summary())
	}
}

// PERMISSION_MODE=plan leaves pi only its read-only tools: a scripted write
// is refused and reported as a permission denial.
func TestConformancePiPlanModeCannotWrite(t *testing.T) {
	h := newPiHarness(t, piHarnessOptions{permissionMode: "plan"})
	mem := filepath.Join(h.dir, "memory.md")
	h.api.Add(
		fakeapi.ToolUse("write", map[string]any{"path": mem, "content": "# Memory\n\n- overwritten\n"}),
		fakeapi.Text("I could not write."),
	)
	out := h.say("c1", "Overwrite memory.")
	if out.Err != nil {
		t.Fatalf("run failed: %v\n%s", out.Err, h.api.Summary())
	}
	data, _ := os.ReadFile(mem)
	if strings.Contains(string(data), "overwritten") {
		t.Errorf("plan mode wrote memory.md: %q", data)
	}
	if got, want := h.api.MainRequests()[0].Tools(), []string{"read", "grep", "find", "ls"}; !slices.Equal(got, want) {
		t.Errorf("tools = %v, want %v", got, want)
	}
	if !slices.Equal(out.Result.PermissionDenials, []string{"write"}) {
		t.Errorf("denials = %v, want [write]", out.Result.PermissionDenials)
	}
}

// pi exits 0 when the API refuses the key; the error is read from the
// stream and the user sees only its kind.
func TestConformancePiAuthErrorIsClean(t *testing.T) {
	h := newPiHarness(t, piHarnessOptions{}, fakeapi.Error(401, "invalid x-api-key"))
	out := h.say("c1", "Hello?")
	if !errors.Is(out.Err, backends.ErrAuth) {
		t.Fatalf("err = %v, want an authentication error", out.Err)
	}
	var be *backends.Error
	if errors.As(out.Err, &be) && be.Status != 401 {
		t.Errorf("status = %d, want 401", be.Status)
	}
	for _, leak := range []string{apiKey, h.dir, "invalid x-api-key", "at ", ".js:"} {
		if strings.Contains(out.Reply, leak) {
			t.Errorf("user-facing reply leaks %q: %q", leak, out.Reply)
		}
	}
	if !strings.Contains(out.Reply, "authentication_error") {
		t.Errorf("reply lacks the error type: %q", out.Reply)
	}
}

// A 500 (with pi's retries off, as the gateway's operator should set them)
// is an API error, not a reply.
func TestConformancePiServerError(t *testing.T) {
	h := newPiHarness(t, piHarnessOptions{}, fakeapi.Error(500, "upstream exploded"))
	out := h.say("c1", "Hello?")
	if backends.KindOf(out.Err) != backends.KindAPI {
		t.Fatalf("err = %v, want an API error", out.Err)
	}
	if strings.Contains(out.Reply, "upstream exploded") {
		t.Errorf("reply leaks the API's message: %q", out.Reply)
	}
}

// A hung API: the gateway's timer kills pi's whole process group. pi never
// sees the Discord token or webhook secrets.
func TestConformancePiHungAPIIsKilled(t *testing.T) {
	h := newPiHarness(t, piHarnessOptions{timeout: 5 * time.Second}, fakeapi.Hang())
	marker := "HOME=" + h.home // unique to this test's pi processes
	done := make(chan agent.Outcome, 1)
	go func() { done <- h.say("c1", "Take your time.") }()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := h.api.WaitMain(ctx, 1); err != nil {
		t.Fatalf("pi never reached the API: %v", err)
	}
	pids := processesWith(marker)
	if len(pids) == 0 {
		t.Fatal("no pi process found while the API hangs")
	}
	assertNoSecretsIn(t, pids, discordToken, "webhook-secret-must-not-leak", "DISCORD_BOT_TOKEN")
	var out agent.Outcome
	select {
	case out = <-done:
	case <-ctx.Done():
		t.Fatal("the run did not end after the timeout")
	}
	assertTimedOut(t, out)
	waitProcessesGone(ctx, t, marker)
	if err := h.api.WaitIdle(ctx); err != nil {
		t.Errorf("the hung request was not dropped: %v", err)
	}
}

// pi does not know the bound session (another machine, a wiped HOME): it
// says "No session found matching" and exits 1; the runtime starts afresh.
func TestConformancePiStaleSessionHeals(t *testing.T) {
	h := newPiHarness(t, piHarnessOptions{}, fakeapi.Text("A fresh start."))
	stale := newUUID()
	if err := h.sessions.Set("c1", session.Binding{SessionID: stale, Backend: "pi"}); err != nil {
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
	if b.SessionID == stale || b.SessionID == "" || b.SessionID != out.Result.SessionID {
		t.Errorf("binding %q, result session %q", b.SessionID, out.Result.SessionID)
	}
	if n := len(h.api.MainRequests()); n != 1 {
		t.Errorf("%d main requests, want 1 (the stale resume never reaches the API)", n)
	}
}

// With pi's own retries on (an operator's choice), a failed attempt's
// agent_end is followed by auto_retry_start and another attempt: the turn's
// outcome is the last attempt's, not the first's.
func TestConformancePiOwnRetrySucceeds(t *testing.T) {
	h := newPiHarness(t, piHarnessOptions{piRetries: true}, fakeapi.Error(503, "try later"), fakeapi.Text("Second time lucky."))
	out := h.say("c1", "Hello?")
	if out.Err != nil {
		t.Fatalf("run failed: %v\n%s", out.Err, h.api.Summary())
	}
	if out.Reply != "Second time lucky." {
		t.Errorf("reply = %q", out.Reply)
	}
	if n := len(h.api.MainRequests()); n != 2 {
		t.Errorf("%d main requests, want 2 (one retry)", n)
	}
}

// A session pi knows, but from another working directory (CONFIG_DIR
// moved): pi asks on stdin whether to fork it, reads the first line of the
// prompt as the answer, and gives up. That is a stale session: it heals.
func TestConformancePiSessionOfOtherDirectoryHeals(t *testing.T) {
	first := newPiHarness(t, piHarnessOptions{}, fakeapi.Text("Started elsewhere."))
	out := first.say("c1", "Hello.")
	if out.Err != nil {
		t.Fatalf("first run: %v", out.Err)
	}
	h := newPiHarness(t, piHarnessOptions{home: first.home}, fakeapi.Text("A fresh start."))
	if err := h.sessions.Set("c1", session.Binding{SessionID: out.Result.SessionID, Backend: "pi"}); err != nil {
		t.Fatal(err)
	}
	out = h.say("c1", "Hello again.")
	if out.Err != nil || !out.Healed {
		t.Fatalf("outcome = %+v\n%s", out, h.api.Summary())
	}
	if !strings.Contains(out.Reply, "A fresh start.") {
		t.Errorf("reply = %q", out.Reply)
	}
	if n := len(h.api.MainRequests()); n != 1 {
		t.Errorf("%d main requests, want 1", n)
	}
}

func piNear(a, b float64) bool {
	d := a - b
	return d < 1e-12 && d > -1e-12
}
