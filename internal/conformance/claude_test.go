//go:build conformance

// Package conformance runs the real agent CLIs, installed from npm at pinned
// versions by `make conformance`, against the in-repo fake model APIs, through
// the gateway's own runtime and backend adapters.
package conformance

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
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

const (
	apiKey       = "sk-ant-conformance-key"
	discordToken = "discord-token-must-not-leak"
)

type replies struct {
	mu  sync.Mutex // guards got
	got []string
}

func (r *replies) Reply(_ context.Context, _ queue.Event, text string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, text)
	return nil
}

type harness struct {
	t        *testing.T
	api      *fakeapi.Anthropic
	dir      string
	sessions *session.Store
	out      *replies
	rt       *agent.Runtime
	env      []string
}

func newHarness(t *testing.T, timeout time.Duration, turns ...fakeapi.Turn) *harness {
	t.Helper()
	return newHarnessWith(t, harnessOptions{timeout: timeout, retriesOff: true}, turns...)
}

// harnessOptions vary the claude harness.
type harnessOptions struct {
	// timeout is the gateway's query timeout.
	timeout time.Duration
	// retriesOff sets CLAUDE_CODE_MAX_RETRIES=0; without it claude keeps
	// its default retries, as it does for most users.
	retriesOff bool
	// baseURL replaces the fake API's URL as ANTHROPIC_BASE_URL.
	baseURL string
}

func newHarnessWith(t *testing.T, o harnessOptions, turns ...fakeapi.Turn) *harness {
	t.Helper()
	timeout := o.timeout
	api := fakeapi.StartAnthropic(t, turns...)
	baseURL := api.URL()
	if o.baseURL != "" {
		baseURL = o.baseURL
	}
	dir := t.TempDir()
	home := t.TempDir()
	log := zerolog.New(zerolog.NewTestWriter(t))
	if _, err := persona.Bootstrap(dir, log); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "identity.md"), "# Identity\n\nYou are Conformo, a test assistant.\n")
	write(t, filepath.Join(dir, "memory.md"), "# Memory\n\n- favourite colour: teal\n")

	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"ANTHROPIC_BASE_URL=" + baseURL,
		"ANTHROPIC_API_KEY=" + apiKey,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_TELEMETRY=1",
		"DISABLE_AUTOUPDATER=1",
		"DISABLE_ERROR_REPORTING=1",
		"DISCORD_BOT_TOKEN=" + discordToken,
		"WEBHOOK_GITHUB_SECRET=webhook-secret-must-not-leak",
	}
	if o.retriesOff {
		env = append(env, "CLAUDE_CODE_MAX_RETRIES=0")
	}
	backend, err := backends.New("claude", backends.Options{Binary: cliBinary(t, "claude"), Env: env, KillGrace: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	sessions, _, err := session.Open(filepath.Join(dir, session.FileName))
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, api: api, dir: dir, sessions: sessions, out: &replies{}, env: env}
	h.rt = agent.New(agent.Options{
		ConfigDir:      dir,
		Timeout:        timeout,
		AllowedTools:   []string{"Read", "Write", "Edit"},
		PermissionMode: "acceptEdits",
		MaxTurns:       10,
	}, backend, sessions, h.out, nil, log)
	return h
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) say(channel, text string) agent.Outcome {
	h.t.Helper()
	return h.rt.Process(context.Background(), queue.Event{ID: 1, Kind: queue.KindMessage, ChannelID: channel, Lane: channel, Text: text, Time: time.Now()})
}

func TestConformanceClaudeReply(t *testing.T) {
	h := newHarness(t, 60*time.Second, fakeapi.Text("Hello from the fake model."))
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
	system := main[0].System()
	for _, want := range []string{"You are Conformo", "favourite colour: teal", "## Identity", "## Long-Term Memory", filepath.Join(h.dir, "memory.md")} {
		if !strings.Contains(system, want) {
			t.Errorf("system prompt lacks %q", want)
		}
	}
	if got := main[0].Prompt(); !strings.Contains(got, "Say hello.") {
		t.Errorf("prompt = %q", got)
	}
	if b, ok := h.sessions.Get("c1"); !ok || b.SessionID == "" || b.SessionID != out.Result.SessionID {
		t.Errorf("binding = %+v, result session %q", b, out.Result.SessionID)
	}
}

func TestConformanceClaudeResumeCarriesHistory(t *testing.T) {
	h := newHarness(t, 60*time.Second, fakeapi.Text("The first answer is 42."), fakeapi.Text("You asked about 42."))
	first := h.say("c1", "What is the answer?")
	second := h.say("c1", "What did I ask?")
	if first.Err != nil || second.Err != nil {
		t.Fatalf("runs failed: %v / %v\n%s", first.Err, second.Err, h.api.Summary())
	}
	if first.Result.SessionID != second.Result.SessionID {
		t.Errorf("session changed on resume: %s -> %s", first.Result.SessionID, second.Result.SessionID)
	}
	// claude reports the session's running total; the runtime reports each
	// turn's own cost. Both turns used the same tokens, so they cost the same.
	if d := second.Result.CostUSD - first.Result.CostUSD; first.Result.CostUSD <= 0 || d > 1e-9 || d < -1e-9 {
		t.Errorf("turn costs %v then %v: the resumed turn should cost the same, not the running total", first.Result.CostUSD, second.Result.CostUSD)
	}
	main := h.api.MainRequests()
	history := flatten(main[len(main)-1])
	for _, want := range []string{"What is the answer?", "The first answer is 42.", "What did I ask?"} {
		if !strings.Contains(history, want) {
			t.Errorf("resumed request lacks %q:\n%s", want, history)
		}
	}
}

// DESIGN decision 5: a change to memory.md reaches the model on a resumed
// turn, whatever the CLI does with the system prompt on --resume.
func TestConformanceClaudePersonaFollowsEditsOnResume(t *testing.T) {
	h := newHarness(t, 60*time.Second, fakeapi.Text("Noted."), fakeapi.Text("Your build uses make."))
	if out := h.say("c1", "Hi."); out.Err != nil {
		t.Fatalf("first run: %v", out.Err)
	}
	write(t, filepath.Join(h.dir, "memory.md"), "# Memory\n\n- favourite colour: teal\n- the build uses make\n")
	if out := h.say("c1", "What does the build use?"); out.Err != nil {
		t.Fatalf("second run: %v", out.Err)
	}
	main := h.api.MainRequests()
	last := main[len(main)-1]
	inSystem := strings.Contains(last.System(), "the build uses make")
	inMessages := strings.Contains(flatten(last), "the build uses make")
	t.Logf("memory edit on resume: in system prompt %v, in messages %v", inSystem, inMessages)
	if !inSystem && !inMessages {
		t.Errorf("the resumed request does not carry the edited memory.md")
	}
}

func TestConformanceClaudeWriteToolAddsFact(t *testing.T) {
	h := newHarness(t, 90*time.Second)
	mem := filepath.Join(h.dir, "memory.md")
	h.api.Add(
		fakeapi.ToolUse("Read", map[string]any{"file_path": mem}),
		fakeapi.ToolUse("Write", map[string]any{"file_path": mem, "content": "# Memory\n\n- favourite colour: teal\n- deploys happen on Fridays\n"}),
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
}

func TestConformanceClaudeAuthErrorIsClean(t *testing.T) {
	h := newHarness(t, 60*time.Second, fakeapi.Error(401, "invalid x-api-key"))
	out := h.say("c1", "Hello?")
	if !errors.Is(out.Err, backends.ErrAuth) {
		t.Fatalf("err = %v, want an authentication error", out.Err)
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

// A hung API: the gateway's timer kills the CLI's whole process group. The
// CLI never sees the Discord token or webhook secrets.
func TestConformanceClaudeHungAPIIsKilled(t *testing.T) {
	h := newHarness(t, 8*time.Second, fakeapi.Hang())
	marker := "ANTHROPIC_BASE_URL=" + h.api.URL()
	done := make(chan agent.Outcome, 1)
	go func() { done <- h.say("c1", "Take your time.") }()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := h.api.WaitMain(ctx, 1); err != nil {
		t.Fatalf("the CLI never reached the API: %v", err)
	}
	pids := processesWith(marker)
	if len(pids) == 0 {
		t.Fatal("no claude process found while the API hangs")
	}
	assertNoSecretsIn(t, pids, discordToken, "webhook-secret-must-not-leak", "DISCORD_BOT_TOKEN")
	var out agent.Outcome
	select {
	case out = <-done:
	case <-ctx.Done():
		t.Fatal("the run did not end after the timeout")
	}
	assertTimedOut(t, out)
	if strings.Contains(out.Reply, "smaller request") {
		t.Errorf("the model never answered, yet the reply blames the request's size: %q", out.Reply)
	}
	waitProcessesGone(ctx, t, marker)
}

// With claude's default retries (CLAUDE_CODE_MAX_RETRIES unset, ten
// attempts over minutes) a refused key ends the turn at the first retry,
// with the authentication error, not at the query timeout.
func TestConformanceClaudeAuthErrorDefaultRetries(t *testing.T) {
	var turns []fakeapi.Turn
	for range 12 {
		turns = append(turns, fakeapi.Error(401, "invalid x-api-key"))
	}
	h := newHarnessWith(t, harnessOptions{timeout: 120 * time.Second}, turns...)
	start := time.Now()
	out := h.say("c1", "Hello?")
	took := time.Since(start)
	if !errors.Is(out.Err, backends.ErrAuth) {
		t.Fatalf("err = %v, want an authentication error", out.Err)
	}
	if took > 30*time.Second {
		t.Errorf("took %v: a refused key should end the turn at once", took)
	}
	if n := len(h.api.MainRequests()); n == 0 || n > 3 {
		t.Errorf("the API got %d requests, want the first and at most a retry or two", n)
	}
	if !strings.Contains(out.Reply, "authentication_error") || !strings.Contains(out.Reply, "credentials") {
		t.Errorf("reply = %q, want the authentication error", out.Reply)
	}
	for _, bad := range []string{"Timed out", "smaller request", apiKey} {
		if strings.Contains(out.Reply, bad) {
			t.Errorf("reply contains %q: %q", bad, out.Reply)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	waitProcessesGone(ctx, t, "ANTHROPIC_BASE_URL="+h.api.URL())
}

// With default retries and nothing listening at ANTHROPIC_BASE_URL, the
// turn ends after a few connection failures in a row and says the model API
// could not be reached, well before the query timeout.
func TestConformanceClaudeUnreachableDefaultRetries(t *testing.T) {
	closed := closedURL(t)
	h := newHarnessWith(t, harnessOptions{timeout: 120 * time.Second, baseURL: closed})
	start := time.Now()
	out := h.say("c1", "Hello?")
	took := time.Since(start)
	if !errors.Is(out.Err, backends.ErrUnreachable) {
		t.Fatalf("err = %v, want the model API unreachable", out.Err)
	}
	if took > 60*time.Second {
		t.Errorf("took %v: an unreachable API should end the turn well before the timeout", took)
	}
	if !strings.Contains(out.Reply, "api_unreachable") || !strings.Contains(out.Reply, "could not reach the model API") {
		t.Errorf("reply = %q", out.Reply)
	}
	for _, bad := range []string{"Timed out", "smaller request"} {
		if strings.Contains(out.Reply, bad) {
			t.Errorf("reply contains %q: %q", bad, out.Reply)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	waitProcessesGone(ctx, t, "ANTHROPIC_BASE_URL="+closed)
}

// When the query timeout comes while claude is still retrying a model API
// that does not answer, the reply names the unreachable API instead of
// advising a smaller request.
func TestConformanceClaudeUnreachableAtTimeout(t *testing.T) {
	closed := closedURL(t)
	h := newHarnessWith(t, harnessOptions{timeout: 4 * time.Second, baseURL: closed})
	out := h.say("c1", "Hello?")
	if !errors.Is(out.Err, backends.ErrUnreachable) || !errors.Is(out.Err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the model API unreachable at the deadline", out.Err)
	}
	if strings.Contains(out.Reply, "smaller request") || !strings.Contains(out.Reply, "could not reach the model API") {
		t.Errorf("reply = %q", out.Reply)
	}
}

// closedURL is an http URL on 127.0.0.1 where nothing listens.
func closedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

func TestConformanceClaudeStaleSessionHeals(t *testing.T) {
	h := newHarness(t, 60*time.Second, fakeapi.Text("A fresh start."))
	stale := newUUID()
	if err := h.sessions.Set("c1", session.Binding{SessionID: stale, Backend: "claude"}); err != nil {
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
}

func flatten(r fakeapi.Request) string {
	var b strings.Builder
	for _, m := range r.Messages() {
		fmt.Fprintf(&b, "[%s] %s\n", m.Role, m.Text)
	}
	return b.String()
}

func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
