package agent

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/queue"
	"github.com/agentgateway/gateway/internal/session"
)

// replies records what the runtime delivered.
type replies struct {
	mu   sync.Mutex // guards got
	got  map[string][]string
	seen []backends.EventKind
}

func (r *replies) Reply(_ context.Context, e queue.Event, text string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.got == nil {
		r.got = map[string][]string{}
	}
	r.got[e.ChannelID] = append(r.got[e.ChannelID], text)
	return nil
}

func (r *replies) Observe(_ queue.Event, ev backends.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, ev.Kind)
}

func (r *replies) last(channel string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.got[channel]) == 0 {
		return ""
	}
	return r.got[channel][len(r.got[channel])-1]
}

type fixture struct {
	dir      string
	fake     *backends.Fake
	sessions *session.Store
	out      *replies
	rt       *Runtime
}

func newFixture(t *testing.T, opts Options, hooks Hooks) *fixture {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"identity.md": "# Identity\nName: Testbot\n",
		"soul.md":     "# Soul\nBe brief.\n",
		"memory.md":   "# Memory\n- the sky is blue\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sessions, _, err := session.Open(filepath.Join(dir, session.FileName))
	if err != nil {
		t.Fatal(err)
	}
	opts.ConfigDir = dir
	if opts.Timeout == 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.TempDir == "" {
		opts.TempDir = t.TempDir()
	}
	f := &fixture{dir: dir, fake: &backends.Fake{}, sessions: sessions, out: &replies{}}
	log := zerolog.New(zerolog.NewTestWriter(t))
	f.rt = New(opts, f.fake, sessions, f.out, hooks, log)
	return f
}

func message(channel, text string) queue.Event {
	return queue.Event{ID: 1, Kind: queue.KindMessage, ChannelID: channel, Lane: channel, Text: text, Time: time.Now()}
}

// Properties 6, 7 and 8: the backend gets the prompt, tools, permission
// mode and the assembled system prompt; a new session is bound; the next
// prompt in the channel resumes it.
func TestQueryArgumentsAndSessionBinding(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for iter := 0; iter < 20; iter++ {
		tools := []string{"Read", "Write", "Glob"}[:1+rng.IntN(3)]
		mode := []string{"default", "acceptEdits", "plan", "bypassPermissions"}[rng.IntN(4)]
		f := newFixture(t, Options{AllowedTools: tools, PermissionMode: mode, MaxTurns: 7, Model: "m1"}, nil)
		var systemText []string
		f.fake.Respond = func(ctx context.Context, req backends.Request, emit func(backends.Event)) (backends.Result, error) {
			data, err := os.ReadFile(req.SystemPromptFile)
			if err != nil {
				t.Errorf("system prompt file unreadable during the run: %v", err)
			}
			systemText = append(systemText, string(data))
			id := req.SessionID
			if id == "" {
				id = fmt.Sprintf("s-%d", iter)
			}
			emit(backends.Event{Kind: backends.EventInit, SessionID: id})
			return backends.Result{SessionID: id, Text: "ok"}, nil
		}
		channel := fmt.Sprint(rng.Int64())
		prompt := fmt.Sprintf("prompt %d %s", rng.Int(), strings.Repeat("é", rng.IntN(5)))
		f.rt.Process(context.Background(), message(channel, prompt))
		f.rt.Process(context.Background(), message(channel, "second"))

		reqs := f.fake.Requests()
		if len(reqs) != 2 {
			t.Fatalf("%d backend runs, want 2", len(reqs))
		}
		want := backends.Request{
			Prompt:         prompt,
			SystemPrompt:   reqs[0].SystemPrompt,
			WorkDir:        f.dir,
			Model:          "m1",
			AllowedTools:   tools,
			PermissionMode: mode,
			MaxTurns:       7,
			Key:            channel,
		}
		if diff := cmp.Diff(want, reqs[0], cmpIgnoreFile); diff != "" {
			t.Errorf("first request (-want +got):\n%s", diff)
		}
		// Tool approvals are asked for only in the modes that ask.
		if asks := mode != "bypassPermissions"; (reqs[0].Approve != nil) != asks {
			t.Errorf("mode %s: Approve set = %v, want %v", mode, reqs[0].Approve != nil, asks)
		}
		if !strings.Contains(reqs[0].SystemPrompt, "## Identity") || !strings.Contains(reqs[0].SystemPrompt, "the sky is blue") {
			t.Errorf("system prompt lacks the persona:\n%s", reqs[0].SystemPrompt)
		}
		if systemText[0] != reqs[0].SystemPrompt {
			t.Errorf("the system prompt file does not hold the assembled prompt")
		}
		if reqs[1].SessionID != fmt.Sprintf("s-%d", iter) || reqs[1].Prompt != "second" {
			t.Errorf("second request: session %q prompt %q, want a resume of s-%d", reqs[1].SessionID, reqs[1].Prompt, iter)
		}
		// Both turns share the prompt file while the persona is unchanged;
		// Close removes it.
		if reqs[1].SystemPromptFile != reqs[0].SystemPromptFile {
			t.Errorf("an unchanged persona got a new prompt file")
		}
		f.rt.Close()
		if _, err := os.Stat(reqs[0].SystemPromptFile); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("system prompt file left behind after Close: %v", err)
		}
		b, ok := f.sessions.Get(channel)
		if !ok || b.SessionID != fmt.Sprintf("s-%d", iter) || b.Backend != "fake" {
			t.Errorf("binding = %+v, %v", b, ok)
		}
	}
}

var cmpIgnoreFile = cmp.FilterPath(func(p cmp.Path) bool {
	return p.String() == "SystemPromptFile" || p.String() == "Approve"
}, cmp.Ignore())

// Property 18: heartbeats and cron jobs run their instruction as the prompt,
// in a fresh session that is not kept.
func TestScheduledEventsUseInstruction(t *testing.T) {
	for _, kind := range []queue.Kind{queue.KindHeartbeat, queue.KindCron, queue.KindWebhook, queue.KindHook} {
		f := newFixture(t, Options{}, nil)
		instruction := "check the inbox for " + string(kind)
		f.rt.Process(context.Background(), queue.Event{ID: 3, Kind: kind, ChannelID: "out", Text: instruction})
		reqs := f.fake.Requests()
		if len(reqs) != 1 || reqs[0].Prompt != instruction || reqs[0].SessionID != "" || reqs[0].SystemPrompt == "" {
			t.Errorf("%s: requests = %+v", kind, reqs)
		}
		if got := f.sessions.Channels(); len(got) != 0 {
			t.Errorf("%s: bound %v, want no binding", kind, got)
		}
		if f.out.last("out") != "echo: "+instruction {
			t.Errorf("%s: reply %q", kind, f.out.last("out"))
		}
	}
}

// DESIGN decision 5: a resumed turn carries the sections that changed on
// disk since the session last saw them, and only once.
func TestResumedTurnCarriesPersonaChanges(t *testing.T) {
	f := newFixture(t, Options{}, nil)
	f.rt.Process(context.Background(), message("c", "hello"))
	os.WriteFile(filepath.Join(f.dir, "memory.md"), []byte("# Memory\n- the sky is blue\n- the user likes tea\n"), 0o644)
	f.rt.Process(context.Background(), message("c", "what do I like?"))
	f.rt.Process(context.Background(), message("c", "and now?"))

	reqs := f.fake.Requests()
	if strings.Contains(reqs[0].Prompt, "likes tea") {
		t.Fatalf("first prompt already has the change")
	}
	if !strings.Contains(reqs[1].Prompt, "the user likes tea") || !strings.HasSuffix(reqs[1].Prompt, "what do I like?") {
		t.Errorf("resumed prompt lacks the memory change:\n%s", reqs[1].Prompt)
	}
	if strings.Contains(reqs[1].Prompt, "Be brief") {
		t.Errorf("resumed prompt repeats unchanged sections:\n%s", reqs[1].Prompt)
	}
	if reqs[2].Prompt != "and now?" {
		t.Errorf("third prompt = %q, want no update note once the session saw the change", reqs[2].Prompt)
	}
}

// DESIGN decision 11: a stale session is dropped and the turn runs again in
// a fresh session; the user is told context was lost.
func TestStaleSessionHeals(t *testing.T) {
	f := newFixture(t, Options{}, nil)
	f.sessions.Set("c", session.Binding{SessionID: "gone", Backend: "fake"})
	f.fake.Respond = func(ctx context.Context, req backends.Request, emit func(backends.Event)) (backends.Result, error) {
		if req.SessionID == "gone" {
			return backends.Result{}, &backends.Error{Kind: backends.KindStaleSession, Message: "No conversation found with session ID: gone"}
		}
		emit(backends.Event{Kind: backends.EventInit, SessionID: "fresh"})
		return backends.Result{SessionID: "fresh", Text: "hi again"}, nil
	}
	out := f.rt.Process(context.Background(), message("c", "hello"))
	if !out.Healed || out.Err != nil {
		t.Fatalf("outcome = %+v", out)
	}
	reqs := f.fake.Requests()
	if len(reqs) != 2 || reqs[1].SessionID != "" || reqs[1].Prompt != "hello" {
		t.Fatalf("requests = %+v", reqs)
	}
	reply := f.out.last("c")
	if !strings.Contains(reply, "hi again") || !strings.Contains(reply, "new session") {
		t.Errorf("reply = %q", reply)
	}
	if b, _ := f.sessions.Get("c"); b.SessionID != "fresh" {
		t.Errorf("binding = %q, want fresh", b.SessionID)
	}
}

// R7.2: a turn that outlives QUERY_TIMEOUT_MS is cancelled and the channel
// gets a timeout notice.
func TestTimeoutNotice(t *testing.T) {
	f := newFixture(t, Options{Timeout: 50 * time.Millisecond}, nil)
	f.fake.Respond = func(ctx context.Context, req backends.Request, emit func(backends.Event)) (backends.Result, error) {
		<-ctx.Done() // a hung CLI: only the deadline ends it
		return backends.Result{}, &backends.Error{Kind: backends.KindTimeout, Err: ctx.Err()}
	}
	out := f.rt.Process(context.Background(), message("c", "loop forever"))
	if !errors.Is(out.Err, backends.ErrTimeout) {
		t.Fatalf("err = %v", out.Err)
	}
	if reply := f.out.last("c"); !strings.Contains(reply, "Timed out") || !strings.Contains(reply, "QUERY_TIMEOUT_MS") {
		t.Errorf("reply = %q", reply)
	}
}

// Property 12: user-facing errors name the error type and never carry the
// CLI's message, stack traces, keys or server paths.
func TestUserErrorHidesInternals(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	secrets := []string{"sk-ant-api03-SECRET", "/home/op/.claude/projects/x.jsonl", "goroutine 1 [running]:\nmain.main()\n\t/src/main.go:12", "MTIzNDU2Nzg5MDEyMzQ1Njc4.discord.token"}
	kinds := []backends.ErrorKind{backends.KindAuth, backends.KindAPI, backends.KindCrashed, backends.KindTimeout, backends.KindStaleSession, backends.KindExecution, "novel_kind"}
	leak := regexp.MustCompile(`sk-ant|/home/|goroutine|\.go:\d|discord\.token`)
	for i := 0; i < 500; i++ {
		kind := kinds[rng.IntN(len(kinds))]
		secret := secrets[rng.IntN(len(secrets))]
		var err error = &backends.Error{Kind: kind, Status: []int{0, 401, 500}[rng.IntN(3)], Message: secret, Stderr: secret, Err: errors.New(secret)}
		if rng.IntN(4) == 0 {
			err = fmt.Errorf("run: %w", err)
		}
		msg := userError(queue.Event{}, err)
		if !strings.Contains(msg, string(kind)) {
			t.Fatalf("message %q lacks the error type %s", msg, kind)
		}
		if leak.MatchString(msg) {
			t.Fatalf("message leaks internals: %q", msg)
		}
	}
	if msg := userError(queue.Event{}, errors.New("open /etc/gateway/secret: permission denied")); leak.MatchString(msg) || strings.Contains(msg, "/etc") {
		t.Errorf("plain error leaks: %q", msg)
	}
}

type hookLog struct {
	mu    sync.Mutex
	calls []string
}

func (h *hookLog) AgentBegin(_ context.Context, e queue.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, fmt.Sprintf("begin %d", e.ID))
}

func (h *hookLog) AgentStop(_ context.Context, e queue.Event, out Outcome) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, fmt.Sprintf("stop %d %s", e.ID, out.Reply))
}

// Property 26: agent_begin runs before and agent_stop after every non-hook
// event, inline; hook events run without them.
func TestInlineHooksAroundEvents(t *testing.T) {
	hooks := &hookLog{}
	f := newFixture(t, Options{}, hooks)
	f.fake.Respond = func(ctx context.Context, req backends.Request, emit func(backends.Event)) (backends.Result, error) {
		hooks.mu.Lock()
		hooks.calls = append(hooks.calls, "run "+req.Prompt)
		hooks.mu.Unlock()
		return backends.Result{Text: "r"}, nil
	}
	f.rt.Process(context.Background(), queue.Event{ID: 1, Kind: queue.KindMessage, ChannelID: "c", Text: "a"})
	f.rt.Process(context.Background(), queue.Event{ID: 2, Kind: queue.KindHook, Name: "startup", Text: "hello"})
	f.rt.Process(context.Background(), queue.Event{ID: 3, Kind: queue.KindCron, Text: "b"})
	want := []string{"begin 1", "run a", "stop 1 r", "run hello", "begin 3", "run b", "stop 3 r"}
	if diff := cmp.Diff(want, hooks.calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

// DESIGN decision 4: two channels' runs that each rewrite memory.md from
// the same starting content leave both facts, in either order.
func TestConcurrentMemoryWritesKeepBothFacts(t *testing.T) {
	for _, order := range [][2]string{{"a", "b"}, {"b", "a"}} {
		f := newFixture(t, Options{}, nil)
		memPath := filepath.Join(f.dir, "memory.md")
		read := make(chan struct{}, 2)
		turn := map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{})}
		wrote := make(chan struct{}, 2)
		finish := make(chan struct{}) // both runs end only after both wrote
		f.fake.Respond = func(ctx context.Context, req backends.Request, emit func(backends.Event)) (backends.Result, error) {
			base, _ := os.ReadFile(memPath) // the agent reads memory.md
			read <- struct{}{}
			<-turn[req.Prompt] // both have read before either writes
			fact := "- fact from " + req.Prompt + "\n"
			emit(backends.Event{Kind: backends.EventToolUse, Tool: &backends.ToolCall{Name: "Write"}})
			os.WriteFile(memPath, append(base, fact...), 0o644) // Write replaces the whole file
			emit(backends.Event{Kind: backends.EventToolResult, Tool: &backends.ToolCall{Name: "Write"}})
			wrote <- struct{}{}
			<-finish
			return backends.Result{Text: "saved"}, nil
		}
		var wg sync.WaitGroup
		for _, ch := range []string{"a", "b"} {
			wg.Add(1)
			go func() { defer wg.Done(); f.rt.Process(context.Background(), message(ch, ch)) }()
		}
		<-read
		<-read
		close(turn[order[0]])
		<-wrote
		close(turn[order[1]])
		<-wrote
		close(finish)
		wg.Wait()
		got, _ := os.ReadFile(memPath)
		for _, want := range []string{"- the sky is blue", "- fact from a", "- fact from b"} {
			if !strings.Contains(string(got), want) {
				t.Errorf("order %v: memory.md lost %q:\n%s", order, want, got)
			}
		}
	}
}

func TestMissingPersonaFilesStillRun(t *testing.T) {
	f := newFixture(t, Options{}, nil)
	os.Remove(filepath.Join(f.dir, "soul.md"))
	os.Remove(filepath.Join(f.dir, "memory.md"))
	f.rt.Process(context.Background(), message("c", "hi"))
	reqs := f.fake.Requests()
	if len(reqs) != 1 || strings.Contains(reqs[0].SystemPrompt, "## Personality") {
		t.Fatalf("system prompt should omit the missing soul.md:\n%s", reqs[0].SystemPrompt)
	}
	if data, err := os.ReadFile(filepath.Join(f.dir, "memory.md")); err != nil || !strings.HasPrefix(string(data), "# Memory") {
		t.Errorf("memory.md = %q, %v; want it recreated", data, err)
	}
}

func TestObserverSeesLiveEvents(t *testing.T) {
	f := newFixture(t, Options{}, nil)
	f.rt.Process(context.Background(), message("c", "hi"))
	want := []backends.EventKind{backends.EventInit, backends.EventText, backends.EventResult}
	if diff := cmp.Diff(want, f.out.seen); diff != "" {
		t.Errorf("observed (-want +got):\n%s", diff)
	}
}

// A CLI that reports the session's running cost total (claude's
// total_cost_usd) is logged per turn as the difference, so costs add up.
func TestPerTurnCostFromSessionTotal(t *testing.T) {
	f := newFixture(t, Options{}, nil)
	total := 0.0
	f.fake.Respond = func(ctx context.Context, req backends.Request, emit func(backends.Event)) (backends.Result, error) {
		total += 0.25
		return backends.Result{SessionID: "s1", Text: "ok", CostUSD: total, SessionCostUSD: total}, nil
	}
	var costs []float64
	for i := 0; i < 3; i++ {
		costs = append(costs, f.rt.Process(context.Background(), message("c", "hi")).Result.CostUSD)
	}
	if diff := cmp.Diff([]float64{0.25, 0.25, 0.25}, costs); diff != "" {
		t.Errorf("per-turn costs (-want +got):\n%s", diff)
	}
	if b, _ := f.sessions.Get("c"); b.SessionCostUSD != 0.75 {
		t.Errorf("stored session total = %v, want 0.75", b.SessionCostUSD)
	}
}

func TestHeartbeatOK(t *testing.T) {
	for reply, want := range map[string]bool{
		"":                        true,
		"HEARTBEAT_OK":            true,
		"  **HEARTBEAT_OK**.\n":   true,
		"`HEARTBEAT_OK`":          true,
		"HEARTBEAT_OK but also X": false,
		"All clear":               false,
		"heartbeat_ok":            false,
	} {
		if got := HeartbeatOK(reply); got != want {
			t.Errorf("HeartbeatOK(%q) = %v, want %v", reply, got, want)
		}
	}
}

func TestPromptFileFollowsPersonaEdits(t *testing.T) {
	f := newFixture(t, Options{}, nil)
	f.rt.Process(context.Background(), message("c1", "one"))
	os.WriteFile(filepath.Join(f.dir, "soul.md"), []byte("# Soul\n\nBe terse.\n"), 0o600)
	f.rt.Process(context.Background(), message("c1", "two"))
	reqs := f.fake.Requests()
	if reqs[0].SystemPromptFile == reqs[1].SystemPromptFile {
		t.Fatal("an edited persona reused the old prompt file")
	}
	if _, err := os.Stat(reqs[0].SystemPromptFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the old prompt file was kept after no run used it: %v", err)
	}
	b, err := os.ReadFile(reqs[1].SystemPromptFile)
	if err != nil || !strings.Contains(string(b), "Be terse.") {
		t.Errorf("new prompt file = %q, %v; want the edit", b, err)
	}
	f.rt.Close()
}

// A channel whose project directory disappeared is told so, with the fix;
// the CLI does not run.
func TestProjectGone(t *testing.T) {
	f := newFixture(t, Options{}, nil)
	gone := filepath.Join(t.TempDir(), "app")
	if _, _, err := f.sessions.UpdateSettings("c1", func(s *session.Settings) { s.Project = gone }); err != nil {
		t.Fatal(err)
	}
	out := f.rt.Process(context.Background(), message("c1", "hi"))
	if !errors.Is(out.Err, ErrProjectGone) || !strings.Contains(f.out.last("c1"), "/project path:reset") {
		t.Fatalf("outcome %v, reply %q", out.Err, f.out.last("c1"))
	}
	if strings.Contains(f.out.last("c1"), gone) {
		t.Errorf("the reply names the server path: %q", f.out.last("c1"))
	}
	if n := len(f.fake.Requests()); n != 0 {
		t.Errorf("%d CLI runs, want none", n)
	}
}
