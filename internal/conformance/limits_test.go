//go:build conformance

package conformance

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/agent"
	"github.com/agentgateway/gateway/internal/fakeapi"
	"github.com/agentgateway/gateway/internal/limit"
	"github.com/agentgateway/gateway/internal/persona"
	"github.com/agentgateway/gateway/internal/queue"
	"github.com/agentgateway/gateway/internal/session"
)

// oauthToken stands for a claude.ai subscription login: with it (and no
// API key) claude treats the API's unified rate limit headers as the
// subscription's usage limits.
const oauthToken = "sk-ant-oat01-conformance-token"

// limitReplies records replies and the waits the runtime announces.
type limitReplies struct {
	replies
	mu      sync.Mutex // guards notices
	notices []*limit.Notice
}

func (r *limitReplies) Limited(_ queue.Event, n *limit.Notice) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notices = append(r.notices, n)
}

func (r *limitReplies) told() []*limit.Notice {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*limit.Notice(nil), r.notices...)
}

// limitHarness is the runtime with the real claude CLI on a subscription
// login (or an API key) against the fake API, holding its prompts at a
// gate on a fake clock.
type limitHarness struct {
	t     *testing.T
	api   *fakeapi.Anthropic
	clock *clockwork.FakeClock
	gate  *limit.Gate
	out   *limitReplies
	rt    *agent.Runtime
}

func newLimitHarness(t *testing.T, login string, extraEnv []string, turns ...fakeapi.Turn) *limitHarness {
	t.Helper()
	api := fakeapi.StartAnthropic(t, turns...)
	dir, home := t.TempDir(), t.TempDir()
	log := zerolog.New(zerolog.NewTestWriter(t))
	if _, err := persona.Bootstrap(dir, log); err != nil {
		t.Fatal(err)
	}
	env := append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"ANTHROPIC_BASE_URL=" + api.URL(),
		login,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_TELEMETRY=1",
		"DISABLE_AUTOUPDATER=1",
		"DISABLE_ERROR_REPORTING=1",
	}, extraEnv...)
	backend, err := backends.New("claude", backends.Options{Binary: cliBinary(t, "claude"), Env: env, KillGrace: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	sessions, _, err := session.Open(filepath.Join(dir, session.FileName))
	if err != nil {
		t.Fatal(err)
	}
	clock := clockwork.NewFakeClockAt(time.Now())
	h := &limitHarness{t: t, api: api, clock: clock, gate: limit.New(clock), out: &limitReplies{}}
	h.rt = agent.New(agent.Options{ConfigDir: dir, Timeout: time.Minute, PermissionMode: "acceptEdits", MaxTurns: 5, Limits: h.gate},
		backend, sessions, h.out, nil, log)
	return h
}

// process runs one prompt in the background; the outcome arrives on the
// channel.
func (h *limitHarness) process(ctx context.Context, text string) <-chan agent.Outcome {
	done := make(chan agent.Outcome, 1)
	go func() {
		done <- h.rt.Process(ctx, queue.Event{ID: 1, Kind: queue.KindMessage, ChannelID: "c1", Lane: "c1", Text: text, Time: time.Now()})
	}()
	return done
}

// waitWaiting waits until the prompt waits at the gate (its timer set).
func (h *limitHarness) waitWaiting(done <-chan agent.Outcome) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	blocked := make(chan error, 1)
	go func() { blocked <- h.clock.BlockUntilContext(ctx, 1) }()
	select {
	case err := <-blocked:
		if err != nil {
			h.t.Fatalf("the prompt never waited at the gate: %v\n%s", err, h.api.Summary())
		}
	case out := <-done:
		h.t.Fatalf("the prompt ended instead of waiting: err %v, reply %q\n%s", out.Err, out.Reply, h.api.Summary())
	}
}

func outcomeOf(t *testing.T, done <-chan agent.Outcome) agent.Outcome {
	t.Helper()
	select {
	case out := <-done:
		return out
	case <-time.After(90 * time.Second):
		t.Fatal("the prompt did not end")
	}
	return agent.Outcome{}
}

// The subscription's usage limit: claude fails at once with the reset
// time, the prompt waits for it at the gate, and after the reset (the
// fake lifted, the fake clock moved on) it runs again by itself and is
// answered.
func TestConformanceClaudeUsageLimitResumes(t *testing.T) {
	h := newLimitHarness(t, "CLAUDE_CODE_OAUTH_TOKEN="+oauthToken, nil, fakeapi.Text("Answered after the reset."))
	reset := time.Now().Add(72 * time.Minute).Truncate(time.Second)
	h.api.RefuseUntil(reset)
	done := h.process(context.Background(), "Summarise the plan.")
	h.waitWaiting(done)

	told := h.out.told()
	if len(told) != 1 || told[0] == nil || !told[0].Own || !told[0].Limit.ResetAt.Equal(reset) || told[0].Limit.Window != "five_hour" {
		t.Fatalf("notices = %+v, want the prompt's own limit resetting at %v", told, reset)
	}
	if l, ok := h.gate.Current(); !ok || !l.ResetAt.Equal(reset) {
		t.Errorf("gate = %v, %t", l, ok)
	}
	if reqs := h.api.Requests(); len(reqs) != 1 {
		// claude does not retry a subscription limit.
		t.Errorf("claude sent %d requests during the limit, want 1:\n%s", len(reqs), h.api.Summary())
	}

	h.api.Lift()
	h.clock.Advance(72 * time.Minute)
	out := outcomeOf(t, done)
	if out.Err != nil || out.Reply != "Answered after the reset." {
		t.Errorf("outcome: err %v, reply %q", out.Err, out.Reply)
	}
	if told := h.out.told(); len(told) != 2 || told[1] != nil {
		t.Errorf("the end of the wait was not told: %+v", told)
	}
}

// A prompt cancelled while it waits is not run again.
func TestConformanceClaudeUsageLimitCancelled(t *testing.T) {
	h := newLimitHarness(t, "CLAUDE_CODE_OAUTH_TOKEN="+oauthToken, nil, fakeapi.Text("never"))
	h.api.RefuseUntil(time.Now().Add(time.Hour))
	ctx, cancel := context.WithCancelCause(context.Background())
	done := h.process(ctx, "Summarise the plan.")
	h.waitWaiting(done)
	cancel(queue.ErrStopped)
	out := outcomeOf(t, done)
	if !out.Stopped || out.Reply != "" {
		t.Errorf("outcome: stopped %t, reply %q", out.Stopped, out.Reply)
	}
	h.api.Lift()
	if n := len(h.api.Requests()); n != 1 {
		t.Errorf("%d requests, want the refused one only:\n%s", n, h.api.Summary())
	}
}

// With an API key, claude retries a 429 itself, honouring retry-after
// (CLAUDE_CODE_MAX_RETRIES=2 keeps it short), and then reports no reset
// time: the failure stands and says the prompt was not kept.
func TestConformanceClaudeRateLimitRetryAfter(t *testing.T) {
	h := newLimitHarness(t, "ANTHROPIC_API_KEY="+apiKey, []string{"CLAUDE_CODE_MAX_RETRIES=2"})
	h.api.RefuseRetryAfter(time.Second)
	start := time.Now()
	out := outcomeOf(t, h.process(context.Background(), "Summarise the plan."))
	took := time.Since(start)
	if backends.KindOf(out.Err) != backends.KindRateLimit || !limit.WithoutReset(out.Err) {
		t.Errorf("err = %v, want a rate limit without a reset time", out.Err)
	}
	if !strings.Contains(out.Reply, limit.NoResetNote) {
		t.Errorf("reply = %q", out.Reply)
	}
	if n := len(h.api.Requests()); n != 3 {
		t.Errorf("%d requests, want 3 (the first and two retries):\n%s", n, h.api.Summary())
	}
	if h.gate.Waiting() != 0 {
		t.Error("a prompt waits without a reset time")
	}
	t.Logf("claude's two retries after retry-after: 1 took %v in all", took.Round(10*time.Millisecond))
}

// The streams the pinned claude prints for the limits, parsed as the
// gateway parses them; LIMITS_RECORD=1 writes them to testdata/claude/limits
// (placeholders as testdata/claude/README.md describes).
func TestConformanceClaudeLimitStreams(t *testing.T) {
	tests := []struct {
		file    string
		login   string
		extra   []string
		refuse  func(a *fakeapi.Anthropic, reset time.Time)
		timed   bool
		retries int
	}{
		{file: "usage_limit.jsonl", login: "CLAUDE_CODE_OAUTH_TOKEN=" + oauthToken,
			refuse: func(a *fakeapi.Anthropic, reset time.Time) { a.RefuseUntil(reset) }, timed: true},
		{file: "rate_limit_retry.jsonl", login: "ANTHROPIC_API_KEY=sk-test", extra: []string{"CLAUDE_CODE_MAX_RETRIES=2"},
			refuse: func(a *fakeapi.Anthropic, _ time.Time) { a.RefuseRetryAfter(time.Second) }, retries: 2},
		{file: "rate_limit_long.jsonl", login: "ANTHROPIC_API_KEY=sk-test", extra: []string{"CLAUDE_CODE_MAX_RETRIES=2"},
			refuse: func(a *fakeapi.Anthropic, _ time.Time) { a.RefuseRetryAfter(time.Hour) }},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			api := fakeapi.StartAnthropic(t)
			reset := time.Now().Add(72 * time.Minute).Truncate(time.Second)
			tt.refuse(api, reset)
			stream := runClaudeRaw(t, api.URL(), append([]string{tt.login}, tt.extra...))
			var p backends.ClaudeParser
			retries := 0
			sc := bufio.NewScanner(bytes.NewReader(stream))
			sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
			for sc.Scan() {
				evs, _ := p.Parse(sc.Bytes())
				for _, ev := range evs {
					if ev.Kind == backends.EventRetry {
						retries++
					}
				}
			}
			_, err := p.Result()
			var e *backends.Error
			if !errors.As(err, &e) || e.Kind != backends.KindRateLimit || e.Status != 429 {
				t.Fatalf("err = %v, want a 429 rate limit\n%s", err, stream)
			}
			if got, ok := backends.ResetOf(err); ok != tt.timed || (tt.timed && !got.Equal(reset)) {
				t.Errorf("reset = %v, %t; want %v, %t", got, ok, reset, tt.timed)
			}
			if retries != tt.retries {
				t.Errorf("%d retries, want %d", retries, tt.retries)
			}
			if os.Getenv("LIMITS_RECORD") == "1" {
				recordLimitStream(t, tt.file, stream)
			}
		})
	}
}

// runClaudeRaw runs the pinned claude in /CONFIG_DIR-like temp dirs with
// the recordings' command line and returns its stdout.
func runClaudeRaw(t *testing.T, apiURL string, env []string) []byte {
	t.Helper()
	work, home := t.TempDir(), t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, cliBinary(t, "claude"), "-p", "--output-format", "stream-json", "--verbose",
		"--include-partial-messages", "--max-turns", "5")
	cmd.Dir = work
	cmd.Stdin = strings.NewReader("hello")
	cmd.Env = append([]string{"HOME=" + home, "PATH=/usr/local/bin:/usr/bin:/bin", "ANTHROPIC_BASE_URL=" + apiURL,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1", "DISABLE_ERROR_REPORTING=1"}, env...)
	out, _ := cmd.Output() // it exits 1 on the failure
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("claude printed:\n%s", out)
		}
	})
	slug := regexp.MustCompile(`[^a-zA-Z0-9]`).ReplaceAllString(work, "-") // claude's project folder name
	out = bytes.ReplaceAll(out, []byte(slug), []byte("-CONFIG-DIR"))
	return bytes.ReplaceAll(bytes.ReplaceAll(out, []byte(home), []byte("/HOME_DIR")), []byte(work), []byte("/CONFIG_DIR"))
}

var socketPath = regexp.MustCompile(`/tmp/cc-socks[^"]*\.sock`)

func recordLimitStream(t *testing.T, name string, stream []byte) {
	t.Helper()
	stream = socketPath.ReplaceAll(stream, []byte("/tmp/cc-socks/PID.sock"))
	path := filepath.Join("..", "..", "testdata", "claude", "limits", name)
	if err := os.WriteFile(path, stream, 0o644); err != nil {
		t.Fatal(err)
	}
}

// codex on a ChatGPT plan over its usage limit: the Responses API's 429
// usage_limit_reached, which codex turns into "… try again at 8:50 AM."
// The gateway reads the time back (to the minute, a minute later), the
// prompt waits and is answered after the reset.
// CODEX_RECORD_DIR records the stream (testdata/codex/limits).
func TestConformanceCodexUsageLimitResumes(t *testing.T) {
	h := newCodexHarness(t, codexHarnessOptions{}, fakeapi.Text("Answered after the reset."))
	clock := clockwork.NewFakeClockAt(time.Now())
	gate := limit.New(clock)
	h.rt.HoldForLimits(gate)
	reset := time.Now().Add(72 * time.Minute)
	h.api.RefuseUntil(reset)
	done := make(chan agent.Outcome, 1)
	go func() {
		done <- h.rt.Process(context.Background(), queue.Event{ID: 1, Kind: queue.KindMessage, ChannelID: "c1", Lane: "c1", Text: "Summarise the plan.", Time: time.Now()})
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	blocked := make(chan error, 1)
	go func() { blocked <- clock.BlockUntilContext(ctx, 1) }()
	select {
	case err := <-blocked:
		if err != nil {
			t.Fatalf("the prompt never waited: %v\n%s", err, h.api.Summary())
		}
	case out := <-done:
		t.Fatalf("the prompt ended instead of waiting: err %v, reply %q\n%s", out.Err, out.Reply, h.api.Summary())
	}
	l, ok := gate.Current()
	if !ok || l.ResetAt.Before(reset) || l.ResetAt.After(reset.Add(2*time.Minute)) {
		t.Errorf("gate = %v, %t; want a reset within two minutes after %v", l, ok, reset)
	}
	h.api.Lift()
	clock.Advance(80 * time.Minute)
	out := outcomeOf(t, done)
	if out.Err != nil || !strings.Contains(out.Reply, "Answered after the reset.") {
		t.Errorf("outcome: err %v, reply %q", out.Err, out.Reply)
	}
}
