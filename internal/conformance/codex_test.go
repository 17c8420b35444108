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

const (
	codexAPIKey = "sk-codex-conformance-key"
	// codexModel is a slug codex 0.169.0 knows: an unknown one makes it
	// warn and fall back to metadata without apply_patch.
	codexModel = "gpt-5.5"
)

type codexHarness struct {
	t        *testing.T
	api      *fakeapi.Responses
	dir      string
	home     string
	sessions *session.Store
	out      *replies
	rt       *agent.Runtime
	env      []string
}

type codexHarnessOptions struct {
	timeout        time.Duration // default 60 s
	permissionMode string        // default acceptEdits
	allowedTools   []string      // default Read, Write, Edit
	// userProvider, when set, is a provider of the user's own in
	// config.toml (model_provider = "<it>", pointing at the fake API),
	// while OPENAI_BASE_URL points at a port where nothing listens: the
	// turn succeeds only if the user's choice is kept.
	userProvider string
}

// newCodexHarness runs codex through the gateway's runtime against a fake
// Responses API, with an isolated HOME whose ~/.codex/config.toml turns
// retries, update checks, analytics and plugins off. The endpoint and key
// reach codex the way they do in production: OPENAI_BASE_URL and
// OPENAI_API_KEY, which the adapter turns into its provider settings.
func newCodexHarness(t *testing.T, o codexHarnessOptions, turns ...fakeapi.Turn) *codexHarness {
	t.Helper()
	bin := cliBinary(t, "codex")
	if o.timeout == 0 {
		o.timeout = 60 * time.Second
	}
	if o.permissionMode == "" {
		o.permissionMode = "acceptEdits"
	}
	if o.allowedTools == nil {
		o.allowedTools = []string{"Read", "Write", "Edit"}
	}
	api := fakeapi.StartResponses(t, turns...)
	dir := t.TempDir()
	home := t.TempDir()
	log := zerolog.New(zerolog.NewTestWriter(t))
	if _, err := persona.Bootstrap(dir, log); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "identity.md"), "# Identity\n\nYou are Conformo, a test assistant.\n")
	write(t, filepath.Join(dir, "memory.md"), "# Memory\n\n- favourite colour: teal\n")

	if err := os.MkdirAll(filepath.Join(home, ".codex"), 0o700); err != nil {
		t.Fatal(err)
	}
	// The provider's tuning lives here; the adapter adds base_url and the
	// rest with -c. Idle timeout long: the gateway's timer must be what
	// stops a hung API.
	write(t, filepath.Join(home, ".codex", "config.toml"), fmt.Sprintf(`model = %q
check_for_update_on_startup = false

[analytics]
enabled = false

[features]
plugins = false
apps = false
remote_plugin = false

[model_providers.%s]
name = "OpenAI (agent gateway)"
wire_api = "responses"
env_key = "OPENAI_API_KEY"
request_max_retries = 0
stream_max_retries = 0
stream_idle_timeout_ms = 120000
`, codexModel, backends.CodexProviderID))
	baseURL := api.URL() + "/v1"
	if o.userProvider != "" {
		f, err := os.OpenFile(filepath.Join(home, ".codex", "config.toml"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		// The provider's table goes at the end and model_provider at the
		// start: a key after a table header belongs to that table.
		_, err = fmt.Fprintf(f, `
[model_providers.%s]
name = "The user's proxy"
base_url = %q
wire_api = "responses"
env_key = "OPENAI_API_KEY"
request_max_retries = 0
stream_max_retries = 0
stream_idle_timeout_ms = 120000
`, o.userProvider, api.URL()+"/v1")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := os.ReadFile(filepath.Join(home, ".codex", "config.toml"))
		if err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(home, ".codex", "config.toml"), fmt.Sprintf("model_provider = %q\n", o.userProvider)+string(cfg))
		baseURL = closedURL(t) + "/v1"
	}

	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"OPENAI_BASE_URL=" + baseURL,
		"OPENAI_API_KEY=" + codexAPIKey,
		"DISCORD_BOT_TOKEN=" + discordToken,
		"WEBHOOK_GITHUB_SECRET=webhook-secret-must-not-leak",
	}
	if rec := os.Getenv("CODEX_RECORD_DIR"); rec != "" {
		bin = codexRecorder(t, bin, rec)
	}
	backend, err := backends.New("codex", backends.Options{Binary: bin, Env: env, KillGrace: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	sessions, _, err := session.Open(filepath.Join(dir, session.FileName))
	if err != nil {
		t.Fatal(err)
	}
	h := &codexHarness{t: t, api: api, dir: dir, home: home, sessions: sessions, out: &replies{}, env: env}
	h.rt = agent.New(agent.Options{
		ConfigDir:      dir,
		Timeout:        o.timeout,
		AllowedTools:   o.allowedTools,
		PermissionMode: o.permissionMode,
		MaxTurns:       10,
		Model:          codexModel,
	}, backend, sessions, h.out, nil, log)
	return h
}

// codexRecorder wraps codex in a script that copies its stdout and stderr
// to dir/<test>-<n>.jsonl and .stderr, for refreshing testdata/codex (see
// its README). The wrapper stays in codex's process group.
func codexRecorder(t *testing.T, bin, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(t.Name(), "TestConformanceCodex")
	script := fmt.Sprintf(`#!/bin/bash
n=$(ls %[2]q | grep -c '^%[3]s-.*\.jsonl$')
f=%[2]q/%[3]s-$n
%[1]q "$@" 2> >(tee "$f.stderr" >&2) | tee "$f.jsonl"
exit ${PIPESTATUS[0]}
`, bin, dir, name)
	src := filepath.Join(t.TempDir(), "codex.src")
	wrapper := filepath.Join(t.TempDir(), "codex")
	if err := os.WriteFile(src, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	// install, not a write of our own: see backends' fakeCLI (ETXTBSY).
	if out, err := exec.Command("install", "-m", "0755", src, wrapper).CombinedOutput(); err != nil {
		t.Fatalf("install recorder: %v: %s", err, out)
	}
	return wrapper
}

func (h *codexHarness) say(channel, text string) agent.Outcome {
	h.t.Helper()
	return h.rt.Process(context.Background(), queue.Event{ID: 1, Kind: queue.KindMessage, ChannelID: channel, Lane: channel, Text: text, Time: time.Now()})
}

// codexCheckPersona asserts the persona reached the model as a developer
// message after codex's own base instructions, which it keeps.
func codexCheckPersona(t *testing.T, h *codexHarness, r fakeapi.ResponsesRequest, extra ...string) {
	t.Helper()
	dev := r.RoleText("developer")
	want := append([]string{
		"You are Conformo", "favourite colour: teal", "## Identity", "## Long-Term Memory",
		filepath.Join(h.dir, "memory.md"),
		"You are Codex", // codex's own instructions, not replaced
	}, extra...)
	for _, w := range want {
		if !strings.Contains(dev, w) {
			t.Errorf("developer messages lack %q", w)
		}
	}
	if i, j := strings.Index(dev, "You are Codex"), strings.Index(dev, "You are Conformo"); i < 0 || j < i {
		t.Errorf("the persona does not follow codex's base instructions (at %d, %d)", i, j)
	}
}

// codexNoPersonaFileLeft asserts the adapter removed its persona profile.
func codexNoPersonaFileLeft(t *testing.T, h *codexHarness) {
	t.Helper()
	left, _ := filepath.Glob(filepath.Join(h.home, ".codex", "gateway-persona-*"))
	if len(left) > 0 {
		t.Errorf("persona profile files left behind: %v", left)
	}
}

func TestConformanceCodexReply(t *testing.T) {
	h := newCodexHarness(t, codexHarnessOptions{}, fakeapi.Text("Hello from the fake model."))
	out := h.say("c1", "Say hello.")
	if out.Err != nil {
		t.Fatalf("run failed: %v\n%s", out.Err, h.api.Summary())
	}
	if out.Reply != "Hello from the fake model." {
		t.Errorf("reply = %q", out.Reply)
	}
	main := h.api.MainRequests()
	if len(main) != 1 || len(h.api.Requests()) != 1 {
		t.Fatalf("%d main requests of %d:\n%s", len(main), len(h.api.Requests()), h.api.Summary())
	}
	codexCheckPersona(t, h, main[0])
	if got := main[0].Prompt(); got != "Say hello." {
		t.Errorf("prompt = %q", got)
	}
	if got := main[0].Model(); got != codexModel {
		t.Errorf("model = %q", got)
	}
	if got := main[0].Header.Get("Authorization"); got != "Bearer "+codexAPIKey {
		t.Errorf("Authorization = %q", got)
	}
	if b, ok := h.sessions.Get("c1"); !ok || b.SessionID == "" || b.SessionID != out.Result.SessionID {
		t.Errorf("binding = %+v, result session %q", b, out.Result.SessionID)
	}
	if u := out.Result.Usage; u.InputTokens != 100 || u.OutputTokens != 10 {
		t.Errorf("usage = %+v, want the fake's 100 in / 10 out", u)
	}
	if out.Result.CostUSD != 0 {
		t.Errorf("cost = %v: codex reports none", out.Result.CostUSD)
	}
	codexNoPersonaFileLeft(t, h)
}

// A provider the user defined in ~/.codex/config.toml (a proxy, Azure, a
// local model) serves the turn, though OPENAI_API_KEY is set and
// OPENAI_BASE_URL points elsewhere (here: nowhere).
func TestConformanceCodexKeepsUserProvider(t *testing.T) {
	h := newCodexHarness(t, codexHarnessOptions{timeout: 30 * time.Second, userProvider: "users-proxy"}, fakeapi.Text("Hello via your proxy."))
	out := h.say("c1", "Say hello.")
	if out.Err != nil {
		t.Fatalf("run failed: %v\n%s", out.Err, h.api.Summary())
	}
	if out.Reply != "Hello via your proxy." {
		t.Errorf("reply = %q", out.Reply)
	}
	main := h.api.MainRequests()
	if len(main) != 1 {
		t.Fatalf("%d main requests:\n%s", len(main), h.api.Summary())
	}
	codexCheckPersona(t, h, main[0])
	if got := main[0].Header.Get("Authorization"); got != "Bearer "+codexAPIKey {
		t.Errorf("Authorization = %q", got)
	}
	codexNoPersonaFileLeft(t, h)
}

func TestConformanceCodexResumeCarriesHistory(t *testing.T) {
	h := newCodexHarness(t, codexHarnessOptions{}, fakeapi.Text("The first answer is 42."), fakeapi.Text("You asked about 42."))
	first := h.say("c1", "What is the answer?")
	second := h.say("c1", "What did I ask?")
	if first.Err != nil || second.Err != nil {
		t.Fatalf("runs failed: %v / %v\n%s", first.Err, second.Err, h.api.Summary())
	}
	if first.Result.SessionID == "" || first.Result.SessionID != second.Result.SessionID {
		t.Errorf("session changed on resume: %q -> %q", first.Result.SessionID, second.Result.SessionID)
	}
	if second.Reply != "You asked about 42." {
		t.Errorf("reply = %q", second.Reply)
	}
	main := h.api.MainRequests()
	history := main[len(main)-1].Transcript()
	for _, want := range []string{"What is the answer?", "The first answer is 42.", "What did I ask?"} {
		if !strings.Contains(history, want) {
			t.Errorf("resumed request lacks %q:\n%s", want, history)
		}
	}
	// Documented: codex 0.169.0 reports the thread's token totals on a
	// resumed turn (100+100 in), not the turn's own.
	if u := second.Result.Usage; u.InputTokens != 200 || u.OutputTokens != 20 {
		t.Errorf("resumed usage = %+v; codex 0.169.0 reported the thread's totals (200/20)", u)
	}
}

// DESIGN decision 5: the persona reaches the model on new and resumed
// turns, and a change to memory.md reaches it on a resumed turn. codex
// keeps the developer instructions its thread started with (documented);
// the runtime's change note carries the edit in the prompt.
func TestConformanceCodexPersonaFollowsEditsOnResume(t *testing.T) {
	h := newCodexHarness(t, codexHarnessOptions{}, fakeapi.Text("Noted."), fakeapi.Text("Your build uses make."))
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
	codexCheckPersona(t, h, main[0])
	last := main[1]
	codexCheckPersona(t, h, last) // the persona is still there on the resumed turn
	inDeveloper := strings.Contains(last.RoleText("developer"), "the build uses make")
	inPrompt := strings.Contains(last.Prompt(), "the build uses make")
	t.Logf("memory edit on resume: in developer instructions %v, in the prompt %v", inDeveloper, inPrompt)
	if !inPrompt && !inDeveloper {
		t.Errorf("the resumed request does not carry the edited memory.md:\n%s", last.Transcript())
	}
	if inDeveloper {
		t.Logf("codex now sends new developer instructions on resume: the README's limitation note can go")
	}
	codexNoPersonaFileLeft(t, h)
}

// codexMemoryPatch is an apply_patch call (a custom tool in codex 0.169.0)
// that adds line to memory.md.
func codexMemoryPatch(mem, line string) fakeapi.Turn {
	patch := "*** Begin Patch\n*** Update File: " + mem + "\n@@\n - favourite colour: teal\n+" + line + "\n*** End Patch"
	mustJSON := func(v any) json.RawMessage {
		b, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		return b
	}
	return fakeapi.Turn{ToolCalls: []fakeapi.ToolCall{{Name: "apply_patch", Input: mustJSON(patch)}}}
}

func TestConformanceCodexWriteToolAddsFact(t *testing.T) {
	h := newCodexHarness(t, codexHarnessOptions{})
	mem := filepath.Join(h.dir, "memory.md")
	h.api.Add(codexMemoryPatch(mem, "- deploys happen on Fridays"), fakeapi.Text("Saved to memory."))
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
	if len(main) != 2 {
		t.Fatalf("%d main requests:\n%s", len(main), h.api.Summary())
	}
	if got := main[1].Transcript(); !strings.Contains(got, "custom_tool_call_output") {
		t.Errorf("the follow-up request lacks the tool output:\n%s", got)
	}
}

// PERMISSION_MODE=plan maps to codex's read-only sandbox: the same patch
// is refused and reported as a permission denial.
func TestConformanceCodexPlanModeRefusesWrites(t *testing.T) {
	h := newCodexHarness(t, codexHarnessOptions{permissionMode: "plan"})
	mem := filepath.Join(h.dir, "memory.md")
	before, _ := os.ReadFile(mem)
	h.api.Add(codexMemoryPatch(mem, "- deploys happen on Fridays"), fakeapi.Text("I could not save that."))
	out := h.say("c1", "Remember that deploys happen on Fridays.")
	if out.Err != nil {
		t.Fatalf("run failed: %v\n%s", out.Err, h.api.Summary())
	}
	after, _ := os.ReadFile(mem)
	if string(after) != string(before) {
		t.Errorf("plan mode changed memory.md: %q", after)
	}
	if !slices.Contains(out.Result.PermissionDenials, "apply_patch") {
		t.Errorf("permission denials = %v, want apply_patch", out.Result.PermissionDenials)
	}
}

// A persona and a prompt each far over the 128 KiB argv limit.
func TestConformanceCodexLongPersonaAndPrompt(t *testing.T) {
	h := newCodexHarness(t, codexHarnessOptions{}, fakeapi.Text("Read it all."))
	bigFact := "- " + strings.Repeat("long memory ", 20000) + "END-OF-MEMORY\n"
	write(t, filepath.Join(h.dir, "memory.md"), "# Memory\n\n- favourite colour: teal\n"+bigFact)
	prompt := strings.Repeat("a long prompt ", 15000) + "END-OF-PROMPT"
	out := h.say("c1", prompt)
	if out.Err != nil {
		t.Fatalf("run failed: %v\n%s", out.Err, h.api.Summary())
	}
	main := h.api.MainRequests()
	if len(main) != 1 {
		t.Fatalf("%d main requests", len(main))
	}
	codexCheckPersona(t, h, main[0], "END-OF-MEMORY")
	if got := main[0].Prompt(); got != prompt {
		t.Errorf("prompt arrived with %d bytes, want %d", len(got), len(prompt))
	}
}

func TestConformanceCodexAuthErrorIsClean(t *testing.T) {
	h := newCodexHarness(t, codexHarnessOptions{}, fakeapi.Error(401, "Incorrect API key provided: sk-codex-*****."))
	out := h.say("c1", "Hello?")
	if !errors.Is(out.Err, backends.ErrAuth) {
		t.Fatalf("err = %v, want an authentication error", out.Err)
	}
	var e *backends.Error
	if errors.As(out.Err, &e) && e.Status != 401 {
		t.Errorf("status = %d, want 401", e.Status)
	}
	for _, leak := range []string{codexAPIKey, h.dir, "Incorrect API key", "127.0.0.1", "at ", ".js:"} {
		if strings.Contains(out.Reply, leak) {
			t.Errorf("user-facing reply leaks %q: %q", leak, out.Reply)
		}
	}
	if !strings.Contains(out.Reply, "authentication_error") {
		t.Errorf("reply lacks the error type: %q", out.Reply)
	}
	if n := len(h.api.MainRequests()); n != 1 {
		t.Errorf("%d requests: retries are not off", n)
	}
}

// A hung API: the gateway's timer kills codex's whole process group (the
// node launcher and the native binary). codex never sees the Discord token
// or webhook secrets.
func TestConformanceCodexHungAPIIsKilled(t *testing.T) {
	h := newCodexHarness(t, codexHarnessOptions{timeout: 4 * time.Second}, fakeapi.Hang())
	marker := "OPENAI_BASE_URL=" + h.api.URL() + "/v1"
	done := make(chan agent.Outcome, 1)
	go func() { done <- h.say("c1", "Take your time.") }()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := h.api.WaitMain(ctx, 1); err != nil {
		t.Fatalf("the CLI never reached the API: %v", err)
	}
	pids := processesWith(marker)
	if len(pids) == 0 {
		t.Fatal("no codex process found while the API hangs")
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
	codexNoPersonaFileLeft(t, h)
}

func TestConformanceCodexStaleSessionHeals(t *testing.T) {
	h := newCodexHarness(t, codexHarnessOptions{}, fakeapi.Text("A fresh start."))
	stale := newUUID()
	if err := h.sessions.Set("c1", session.Binding{SessionID: stale, Backend: "codex"}); err != nil {
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
	if n := len(h.api.MainRequests()); n != 1 {
		t.Errorf("%d main requests, want 1 (the stale resume must not reach the API)", n)
	}
}
