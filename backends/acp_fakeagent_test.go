package backends

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
)

// The test binary doubles as a small ACP agent: run with
// ACP_FAKE_AGENT=1 and -test.run=^TestACPFakeAgentProcess$, that test
// speaks the agent side of the protocol (through the SDK) on stdin and
// stdout instead of testing anything. The prompt's first word picks what
// it does:
//
//	hello   two message chunks, usage
//	tool    a tool call with a title, completed, then text
//	write   a permission request; says which option was chosen
//	writestop  a permission request, then goes on until cancelled
//	silent  sends nothing until cancelled
//	slowtool  a tool call that runs until cancelled
//	plan    a plan update
//	hang    waits for session/cancel, then stops with "cancelled"
//	deaf    ignores session/cancel
//	image   says how many image blocks came and their type
//	pid     says its process id
//	blocks  says how many text blocks the prompt had
//	model   says the session's model
//
// ACP_FAKE_DIR keeps its sessions as files, so that another process can
// load them; ACP_FAKE_NOLOAD and ACP_FAKE_NOIMAGE take the capabilities
// away.
func TestACPFakeAgentProcess(t *testing.T) {
	if os.Getenv("ACP_FAKE_AGENT") != "1" {
		t.Skip("runs only as the fake ACP agent")
	}
	a := &fakeACPAgent{dir: os.Getenv("ACP_FAKE_DIR")}
	conn := acp.NewAgentSideConnection(a, os.Stdout, os.Stdin)
	conn.SetLogger(slog.New(slog.DiscardHandler))
	a.conn = conn
	<-conn.Done()
	os.Exit(0)
}

type fakeACPAgent struct {
	conn *acp.AgentSideConnection
	dir  string

	mu     sync.Mutex // guards next and models
	next   int
	models map[acp.SessionId]string // models chosen with session/set_model
}

var _ acp.Agent = (*fakeACPAgent)(nil)
var _ acp.AgentLoader = (*fakeACPAgent)(nil)

func (a *fakeACPAgent) Initialize(context.Context, acp.InitializeRequest) (acp.InitializeResponse, error) {
	return acp.InitializeResponse{
		ProtocolVersion: acp.ProtocolVersionNumber,
		AgentCapabilities: acp.AgentCapabilities{
			LoadSession:        os.Getenv("ACP_FAKE_NOLOAD") == "",
			PromptCapabilities: acp.PromptCapabilities{Image: os.Getenv("ACP_FAKE_NOIMAGE") == ""},
		},
	}, nil
}

func (a *fakeACPAgent) NewSession(context.Context, acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	a.mu.Lock()
	a.next++
	id := fmt.Sprintf("fake-%d-%d", os.Getpid(), a.next)
	a.mu.Unlock()
	if a.dir != "" {
		if err := os.WriteFile(filepath.Join(a.dir, id), []byte("said before"), 0o600); err != nil {
			return acp.NewSessionResponse{}, err
		}
	}
	return acp.NewSessionResponse{SessionId: acp.SessionId(id), Models: &acp.SessionModelState{
		AvailableModels: []acp.ModelInfo{{ModelId: "fake-small", Name: "Small"}, {ModelId: "fake-large", Name: "Large"}},
		CurrentModelId:  "fake-small",
	}}, nil
}

// UnstableSetSessionModel switches the session's model (session/set_model).
func (a *fakeACPAgent) UnstableSetSessionModel(_ context.Context, r acp.UnstableSetSessionModelRequest) (acp.UnstableSetSessionModelResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.models == nil {
		a.models = map[acp.SessionId]string{}
	}
	a.models[r.SessionId] = string(r.ModelId)
	return acp.UnstableSetSessionModelResponse{}, nil
}

func (a *fakeACPAgent) LoadSession(ctx context.Context, r acp.LoadSessionRequest) (acp.LoadSessionResponse, error) {
	b, err := os.ReadFile(filepath.Join(a.dir, string(r.SessionId)))
	if err != nil {
		return acp.LoadSessionResponse{}, acp.NewInvalidParams(map[string]any{"error": "no such session"})
	}
	// The history is replayed as updates before the answer.
	_ = a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: r.SessionId, Update: acp.UpdateUserMessageText("earlier prompt")})
	_ = a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: r.SessionId, Update: acp.UpdateAgentMessageText(string(b))})
	return acp.LoadSessionResponse{}, nil
}

func (a *fakeACPAgent) Prompt(ctx context.Context, p acp.PromptRequest) (acp.PromptResponse, error) {
	var text strings.Builder
	var images []string
	texts := 0
	for _, b := range p.Prompt {
		switch {
		case b.Text != nil:
			texts++
			text.WriteString(b.Text.Text + "\n")
		case b.Image != nil:
			images = append(images, b.Image.MimeType)
		}
	}
	say := func(s string) {
		_ = a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: p.SessionId, Update: acp.UpdateAgentMessageText(s)})
	}
	update := func(u acp.SessionUpdate) {
		_ = a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: p.SessionId, Update: u})
	}
	words := strings.Fields(text.String())
	if len(words) == 0 {
		return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil
	}
	switch words[len(words)-1] { // the prompt's last word; a persona block may come first
	case "hello":
		say("Hello ")
		say("there.")
		return acp.PromptResponse{StopReason: acp.StopReasonEndTurn, Usage: &acp.Usage{InputTokens: 12, OutputTokens: 3, TotalTokens: 15}}, nil
	case "tool":
		update(acp.StartToolCall("call-1", "Read go.mod", acp.WithStartKind(acp.ToolKindRead),
			acp.WithStartStatus(acp.ToolCallStatusPending), acp.WithStartRawInput(map[string]any{"path": "go.mod"})))
		update(acp.UpdateToolCall("call-1", acp.WithUpdateStatus(acp.ToolCallStatusCompleted)))
		say("read it")
	case "write":
		resp, err := a.conn.RequestPermission(ctx, acp.RequestPermissionRequest{
			SessionId: p.SessionId,
			ToolCall: acp.ToolCallUpdate{ToolCallId: "call-w", Title: acp.Ptr("Write out.txt"), Kind: acp.Ptr(acp.ToolKindEdit),
				Content: []acp.ToolCallContent{acp.ToolDiffContent("/w/out.txt", "hi\n")}},
			Options: []acp.PermissionOption{
				{OptionId: "always", Name: "Allow for this session", Kind: acp.PermissionOptionKindAllowAlways},
				{OptionId: "once", Name: "Allow", Kind: acp.PermissionOptionKindAllowOnce},
				{OptionId: "no", Name: "Reject", Kind: acp.PermissionOptionKindRejectOnce},
			},
		})
		switch {
		case err != nil:
			say("error: " + err.Error())
		case resp.Outcome.Selected != nil:
			say("chose " + string(resp.Outcome.Selected.OptionId))
		default:
			say("cancelled")
		}
	case "writestop":
		resp, err := a.conn.RequestPermission(ctx, acp.RequestPermissionRequest{
			SessionId: p.SessionId,
			ToolCall:  acp.ToolCallUpdate{ToolCallId: "call-s", Title: acp.Ptr("rm -rf build")},
			Options:   []acp.PermissionOption{{OptionId: "ok", Kind: acp.PermissionOptionKindAllowOnce}, {OptionId: "no", Kind: acp.PermissionOptionKindRejectOnce}},
		})
		if err == nil && resp.Outcome.Selected != nil {
			say("chose " + string(resp.Outcome.Selected.OptionId))
		}
		<-ctx.Done() // goes on until cancelled
		return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
	case "silent":
		<-ctx.Done()
		return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
	case "slowtool":
		update(acp.StartToolCall("call-slow", "make test", acp.WithStartKind(acp.ToolKindExecute), acp.WithStartStatus(acp.ToolCallStatusInProgress)))
		<-ctx.Done()
		return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
	case "plan":
		update(acp.UpdatePlan(acp.PlanEntry{Content: "look", Status: acp.PlanEntryStatusCompleted}, acp.PlanEntry{Content: "fix", Status: acp.PlanEntryStatusPending}))
		say("planned")
	case "hang":
		say("working")
		<-ctx.Done()
		return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
	case "deaf":
		say("working")
		select {}
	case "image":
		say(fmt.Sprintf("%d images %s", len(images), strings.Join(images, ",")))
	case "pid":
		say(strconv.Itoa(os.Getpid()))
	case "blocks":
		say(strconv.Itoa(texts))
	case "model":
		a.mu.Lock()
		say(cmp.Or(a.models[p.SessionId], "fake-small"))
		a.mu.Unlock()
	default:
		say("?")
	}
	return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil
}

func (a *fakeACPAgent) Cancel(context.Context, acp.CancelNotification) error { return nil }
func (a *fakeACPAgent) Authenticate(context.Context, acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	return acp.AuthenticateResponse{}, nil
}
func (a *fakeACPAgent) CloseSession(context.Context, acp.CloseSessionRequest) (acp.CloseSessionResponse, error) {
	return acp.CloseSessionResponse{}, nil
}
func (a *fakeACPAgent) ListSessions(context.Context, acp.ListSessionsRequest) (acp.ListSessionsResponse, error) {
	return acp.ListSessionsResponse{}, nil
}
func (a *fakeACPAgent) ResumeSession(context.Context, acp.ResumeSessionRequest) (acp.ResumeSessionResponse, error) {
	return acp.ResumeSessionResponse{}, nil
}
func (a *fakeACPAgent) SetSessionConfigOption(context.Context, acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	return acp.SetSessionConfigOptionResponse{}, nil
}
func (a *fakeACPAgent) SetSessionMode(context.Context, acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	return acp.SetSessionModeResponse{}, nil
}

// newFakeACP is the generic adapter running the fake agent, processes
// kept for a minute.
func newFakeACP(t *testing.T, env ...string) (*fakeACP, string) {
	t.Helper()
	return newFakeACPWarm(t, WarmOptions{Interactive: true, KeepAlive: time.Minute, MaxProcesses: 4, InterruptWait: 2 * time.Second}, env...)
}

func newFakeACPWarm(t *testing.T, warm WarmOptions, env ...string) (*fakeACP, string) {
	t.Helper()
	dir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env = append([]string{"PATH=" + os.Getenv("PATH"), "ACP_FAKE_AGENT=1", "ACP_FAKE_DIR=" + dir}, env...)
	a := NewACP(Options{
		Command:   []string{self, "-test.run=^TestACPFakeAgentProcess$"},
		Env:       env,
		KillGrace: 2 * time.Second,
		Log:       zerolog.New(zerolog.NewTestWriter(t)),
		Warm:      warm,
	})
	t.Cleanup(func() { _ = a.Close() })
	return &fakeACP{ACP: a, work: t.TempDir()}, dir
}

// fakeACP is the adapter and the work dir its turns run in.
type fakeACP struct {
	*ACP
	work string
}

type acpRun struct {
	res    Result
	events []Event
	err    error
}

func runFakeACP(t *testing.T, a *fakeACP, ctx context.Context, req Request) acpRun {
	t.Helper()
	if req.WorkDir == "" {
		req.WorkDir = a.work
	}
	if req.Key == "" {
		req.Key = "chan"
	}
	var r acpRun
	r.res, r.err = a.Run(ctx, req, func(e Event) { r.events = append(r.events, e) })
	return r
}

func TestACPWarmSecondTurn(t *testing.T) {
	a, _ := newFakeACP(t)
	first := runFakeACP(t, a, context.Background(), Request{Prompt: "pid"})
	if first.err != nil {
		t.Fatal(first.err)
	}
	second := runFakeACP(t, a, context.Background(), Request{Prompt: "pid", SessionID: first.res.SessionID})
	if second.err != nil {
		t.Fatal(second.err)
	}
	if first.res.Warm || !second.res.Warm {
		t.Errorf("warm = %v then %v, want false then true", first.res.Warm, second.res.Warm)
	}
	if second.res.SessionID != first.res.SessionID || second.res.Text != first.res.Text {
		t.Errorf("second turn ran in %s on pid %s, want %s on %s", second.res.SessionID, second.res.Text, first.res.SessionID, first.res.Text)
	}
	if got := a.Warm().Processes; got != 1 {
		t.Errorf("%d processes kept, want 1", got)
	}
}

func TestACPTextAndUsage(t *testing.T) {
	a, _ := newFakeACP(t)
	r := runFakeACP(t, a, context.Background(), Request{Prompt: "hello"})
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.res.Text != "Hello there." || r.res.Usage.InputTokens != 12 || r.res.Usage.OutputTokens != 3 {
		t.Errorf("result = %+v", r.res)
	}
	if len(r.events) == 0 || r.events[0].Kind != EventInit || r.events[0].SessionID != r.res.SessionID {
		t.Errorf("first event %+v, want init with the session", r.events)
	}
}

func TestACPToolEvents(t *testing.T) {
	a, _ := newFakeACP(t)
	r := runFakeACP(t, a, context.Background(), Request{Prompt: "tool"})
	if r.err != nil {
		t.Fatal(r.err)
	}
	var got []string
	for _, e := range r.events {
		if e.Tool != nil {
			got = append(got, fmt.Sprintf("%s %s %s", e.Kind, e.Tool.Name, e.Tool.Input))
		}
	}
	want := []string{`tool_use Read go.mod {"path":"go.mod"}`, "tool_result  "}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("tool events %q, want %q", got, want)
	}
}

func TestACPApproval(t *testing.T) {
	for _, tc := range []struct {
		name    string
		verdict Verdict
		want    string
	}{
		{"allow", Verdict{Allow: true}, "chose once"},
		{"allow for the session", Verdict{Allow: true, Remember: true}, "chose always"},
		{"deny", Verdict{Message: "no"}, "chose no"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, _ := newFakeACP(t)
			var asked []Approval
			approve := func(_ context.Context, ap Approval) Verdict {
				asked = append(asked, ap)
				return tc.verdict
			}
			r := runFakeACP(t, a, context.Background(), Request{Prompt: "write", Approve: approve})
			if r.err != nil {
				t.Fatal(r.err)
			}
			if r.res.Text != tc.want {
				t.Errorf("agent said %q, want %q", r.res.Text, tc.want)
			}
			if len(asked) != 1 {
				t.Fatalf("asked %d times", len(asked))
			}
			ap := asked[0]
			if ap.Tool != "edit" || ap.Description != "Write out.txt" || ap.ToolUseID != "call-w" || !ap.CanRemember ||
				string(ap.Input) != `{"content":"hi\n","file_path":"/w/out.txt"}` {
				t.Errorf("approval = %+v (input %s)", ap, ap.Input)
			}
		})
	}
}

func TestACPNoApproverRejects(t *testing.T) {
	a, _ := newFakeACP(t)
	r := runFakeACP(t, a, context.Background(), Request{Prompt: "write"})
	if r.err != nil || r.res.Text != "chose no" {
		t.Errorf("without an approver: %q, %v; want the reject option", r.res.Text, r.err)
	}
}

func TestACPStopKeepsSession(t *testing.T) {
	a, _ := newFakeACP(t)
	first := runFakeACP(t, a, context.Background(), Request{Prompt: "pid"})
	if first.err != nil {
		t.Fatal(first.err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var stopped acpRun
	// The turn is stopped once the agent said it is working.
	stopped.res, stopped.err = a.Run(ctx, Request{Prompt: "hang", SessionID: first.res.SessionID, Key: "chan", WorkDir: a.work}, func(e Event) {
		if e.Kind == EventText {
			cancel()
		}
	})
	var e *Error
	if !errors.As(stopped.err, &e) || e.Kind != KindCanceled {
		t.Fatalf("stopped turn: %v, want canceled", stopped.err)
	}
	after := runFakeACP(t, a, context.Background(), Request{Prompt: "pid", SessionID: first.res.SessionID})
	if after.err != nil {
		t.Fatal(after.err)
	}
	if !after.res.Warm || after.res.Text != first.res.Text || after.res.SessionID != first.res.SessionID {
		t.Errorf("after the stop: %+v, want the same process (%s) and session", after.res, first.res.Text)
	}
}

func TestACPStopKillsDeafAgent(t *testing.T) {
	a, _ := newFakeACP(t)
	first := runFakeACP(t, a, context.Background(), Request{Prompt: "pid"})
	if first.err != nil {
		t.Fatal(first.err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	_, err := a.Run(ctx, Request{Prompt: "deaf", SessionID: first.res.SessionID, Key: "chan", WorkDir: a.work}, func(e Event) {
		if e.Kind == EventText {
			cancel()
		}
	})
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindCanceled {
		t.Fatalf("stopped turn: %v, want canceled", err)
	}
	if got := a.Warm().Processes; got != 0 {
		t.Errorf("%d processes kept, want the deaf one gone", got)
	}
}

func TestACPLoadSession(t *testing.T) {
	a, _ := newFakeACP(t)
	first := runFakeACP(t, a, context.Background(), Request{Key: "one", Prompt: "pid"})
	if first.err != nil {
		t.Fatal(first.err)
	}
	loaded := runFakeACP(t, a, context.Background(), Request{Key: "two", Prompt: "pid", SessionID: first.res.SessionID})
	if loaded.err != nil {
		t.Fatal(loaded.err)
	}
	if loaded.res.Warm || loaded.res.SessionID != first.res.SessionID || loaded.res.Text == first.res.Text {
		t.Errorf("loaded turn = %+v, want session %s on a new process", loaded.res, first.res.SessionID)
	}
	for _, e := range loaded.events {
		if e.Kind == EventText && e.Text != loaded.res.Text {
			t.Errorf("the replayed history reached the turn: %q", e.Text)
		}
	}
}

func TestACPNoLoadIsStale(t *testing.T) {
	a, _ := newFakeACP(t, "ACP_FAKE_NOLOAD=1")
	r := runFakeACP(t, a, context.Background(), Request{Prompt: "pid", SessionID: "gone"})
	if !errors.Is(r.err, ErrStaleSession) {
		t.Errorf("err = %v, want a stale session", r.err)
	}
	fresh := runFakeACP(t, a, context.Background(), Request{Prompt: "pid"})
	if fresh.err != nil || !fresh.res.Warm {
		t.Errorf("the fresh session after a stale one: %+v, %v; want it on the same process", fresh.res, fresh.err)
	}
}

func TestACPUnknownSessionIsStale(t *testing.T) {
	a, _ := newFakeACP(t)
	r := runFakeACP(t, a, context.Background(), Request{Prompt: "pid", SessionID: "gone"})
	if !errors.Is(r.err, ErrStaleSession) {
		t.Errorf("err = %v, want a stale session", r.err)
	}
}

func TestACPImages(t *testing.T) {
	img := Image{Path: "/w/a.png", MediaType: "image/png", Data: []byte("\x89PNG fake")}
	t.Run("taken", func(t *testing.T) {
		a, _ := newFakeACP(t)
		r := runFakeACP(t, a, context.Background(), Request{Prompt: "image", Images: []Image{img, {Path: "/w/none.png", MediaType: "image/png"}}})
		if r.err != nil || r.res.Text != "1 images image/png" {
			t.Errorf("agent saw %q (%v), want one png", r.res.Text, r.err)
		}
	})
	t.Run("not advertised", func(t *testing.T) {
		a, _ := newFakeACP(t, "ACP_FAKE_NOIMAGE=1")
		r := runFakeACP(t, a, context.Background(), Request{Prompt: "image", Images: []Image{img}})
		if r.err != nil || r.res.Text != "0 images " {
			t.Errorf("agent saw %q (%v), want no image block", r.res.Text, r.err)
		}
	})
}

func TestACPPersonaOnNewSessionOnly(t *testing.T) {
	a, _ := newFakeACP(t)
	first := runFakeACP(t, a, context.Background(), Request{Prompt: "blocks", SystemPrompt: "You are Conformo."})
	if first.err != nil || first.res.Text != "2" {
		t.Fatalf("first turn: %q, %v; want the persona block and the prompt", first.res.Text, first.err)
	}
	second := runFakeACP(t, a, context.Background(), Request{Prompt: "blocks", SystemPrompt: "You are Conformo.", SessionID: first.res.SessionID})
	if second.err != nil || second.res.Text != "1" {
		t.Fatalf("second turn: %q, %v; want the prompt alone", second.res.Text, second.err)
	}
}

func TestACPMissingCommand(t *testing.T) {
	a := NewACP(Options{Env: []string{"PATH=/usr/bin"}})
	_, err := a.Run(context.Background(), Request{Prompt: "x", WorkDir: t.TempDir()}, nil)
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindInvalid || !strings.Contains(e.Message, "ACP_COMMAND") {
		t.Errorf("err = %v, want an invalid request naming ACP_COMMAND", err)
	}
}

func TestACPEnvKeepsSecretsOut(t *testing.T) {
	env := FilterEnv([]string{"DISCORD_BOT_TOKEN=x", "ACP_COMMAND=a", "ANTHROPIC_API_KEY=k", "ACP_MODE=m", "ADMIN_TOKEN=t", "PATH=/bin"}, acpEnvAllow, []string{ACPCommandEnv})
	got := strings.Join(env, " ")
	if got != "ANTHROPIC_API_KEY=k ACP_MODE=m PATH=/bin" {
		t.Errorf("env = %q", got)
	}
}

func TestACPDenialThatStopsTheTurn(t *testing.T) {
	a, _ := newFakeACP(t)
	deny := func(context.Context, Approval) Verdict { return Verdict{Interrupt: true, Message: "no"} }
	r := runFakeACP(t, a, context.Background(), Request{Prompt: "writestop", Approve: deny})
	// The agent sees the rejection or the session/cancel that follows it,
	// whichever comes first; either way the turn ends.
	if r.err != nil || (r.res.Text != "chose no" && r.res.Text != "") {
		t.Fatalf("turn: %q, %v; want the denial to end it without an error", r.res.Text, r.err)
	}
	next := runFakeACP(t, a, context.Background(), Request{Prompt: "hello", SessionID: r.res.SessionID})
	if next.err != nil || !next.res.Warm {
		t.Errorf("the next turn: %+v, %v; want it on the same process", next.res, next.err)
	}
}

// hangOptions keep processes with a fake clock and a one-minute
// AGENT_HANG_TIMEOUT.
func hangOptions(clock *clockwork.FakeClock) WarmOptions {
	return WarmOptions{Interactive: true, KeepAlive: time.Hour, MaxProcesses: 4, InterruptWait: 2 * time.Second, HangTimeout: time.Minute, Clock: clock}
}

func TestACPHangKillsASilentAgent(t *testing.T) {
	clock := clockwork.NewFakeClock()
	a, _ := newFakeACPWarm(t, hangOptions(clock))
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if clock.BlockUntilContext(ctx, 1) == nil { // the hang timer
			clock.Advance(2 * time.Minute)
		}
	}()
	r := runFakeACP(t, a, context.Background(), Request{Prompt: "silent"})
	var e *Error
	if !errors.As(r.err, &e) || e.Kind != KindCrashed || !strings.Contains(e.Message, "sent nothing") {
		t.Fatalf("err = %v, want the silent agent stopped", r.err)
	}
}

func TestACPHangWaitsForARunningTool(t *testing.T) {
	clock := clockwork.NewFakeClock()
	a, _ := newFakeACPWarm(t, hangOptions(clock))
	ctx, stop := context.WithCancel(context.Background())
	toolRuns := make(chan struct{})
	go func() {
		<-toolRuns
		wctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if clock.BlockUntilContext(wctx, 1) == nil {
			clock.Advance(5 * time.Minute)
		}
		// The hang timer is set again while the tool runs.
		if clock.BlockUntilContext(wctx, 1) == nil {
			stop()
		}
	}()
	_, err := a.Run(ctx, Request{Prompt: "slowtool", Key: "chan", WorkDir: a.work}, func(e Event) {
		if e.Kind == EventToolUse {
			close(toolRuns)
		}
	})
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindCanceled {
		t.Fatalf("err = %v, want the turn to run until stopped", err)
	}
}

func TestACPModel(t *testing.T) {
	for _, tc := range []struct{ want, said string }{
		{"", "fake-small"},
		{"fake-large", "fake-large"},
		{"not-offered", "fake-small"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			a, _ := newFakeACP(t)
			r := runFakeACP(t, a, context.Background(), Request{Prompt: "model", Model: tc.want})
			if r.err != nil || r.res.Text != tc.said || r.res.Model != tc.said {
				t.Errorf("agent said %q, result model %q (%v); want %q", r.res.Text, r.res.Model, r.err, tc.said)
			}
			// /model switches it on the warm process too.
			next := runFakeACP(t, a, context.Background(), Request{Prompt: "model", Model: "fake-large", SessionID: r.res.SessionID})
			if next.err != nil || !next.res.Warm || next.res.Text != "fake-large" {
				t.Errorf("after /model: %q (warm %v, %v); want fake-large on the warm process", next.res.Text, next.res.Warm, next.err)
			}
		})
	}
}

func TestACPRefreshSystem(t *testing.T) {
	dir := t.TempDir()
	kept, fresh := filepath.Join(dir, "kept.md"), filepath.Join(dir, "fresh.md")
	if err := os.WriteFile(kept, []byte("old persona"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fresh, []byte("new persona"), 0o600); err != nil {
		t.Fatal(err)
	}
	cleaned := false
	p := &acpProc{systemFile: kept}
	p.refreshSystem(acpLaunch{SystemFile: fresh, Cleanup: func() { cleaned = true; os.Remove(fresh) }})
	if b, _ := os.ReadFile(kept); string(b) != "new persona" {
		t.Errorf("the kept process's file holds %q", b)
	}
	if _, err := os.Stat(fresh); !errors.Is(err, os.ErrNotExist) || !cleaned {
		t.Errorf("the launch's own file is left (%v, cleaned %v)", err, cleaned)
	}
}
