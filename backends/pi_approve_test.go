package backends

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// approvals records what a turn asked and answers with verdict.
type approvals struct {
	mu      sync.Mutex
	asked   []Approval
	files   []string // the -e file's content when asked
	verdict Verdict
	wait    bool // block until ctx ends
	ctxErr  chan error
}

func (a *approvals) approve(fake piRPCFake) ApproveFunc {
	return func(ctx context.Context, ap Approval) Verdict {
		a.mu.Lock()
		a.asked = append(a.asked, ap)
		if starts := fake.starts(); len(starts) > 0 {
			if i := slices.Index(starts[len(starts)-1], "-e"); i >= 0 {
				b, _ := os.ReadFile(starts[len(starts)-1][i+1])
				a.files = append(a.files, string(b))
			}
		}
		a.mu.Unlock()
		if a.wait {
			<-ctx.Done()
			a.ctxErr <- context.Cause(ctx)
			return Verdict{}
		}
		return a.verdict
	}
}

func piApprovalRequest(work string, ap ApproveFunc) Request {
	req := piRPCRequest(work, "")
	req.PermissionMode = "default"
	req.Approve = ap
	return req
}

func TestPiRPCApprovalAllowed(t *testing.T) {
	t.Parallel()
	fake := newPiRPCFake(t)
	fake.setMode(t, "approve")
	p := newTestPiRPC(t, fake.bin, WarmOptions{})
	a := &approvals{verdict: Verdict{Allow: true}}
	res, err := p.Run(context.Background(), piApprovalRequest(t.TempDir(), a.approve(fake)), nil)
	if err != nil || res.Text != "answer 1" {
		t.Fatalf("turn = %+v, %v", res, err)
	}
	want := []Approval{{Tool: "bash", Input: json.RawMessage(`{"command":"rm -rf build"}`), ToolUseID: "call-1", CanRemember: true}}
	if diff := cmp.Diff(want, a.asked); diff != "" {
		t.Errorf("approvals asked (-want +got):\n%s", diff)
	}
	if len(a.files) != 1 || a.files[0] != piApproveJS {
		t.Errorf("the -e file did not hold the approval extension when pi asked")
	}
	if !strings.Contains(fake.file("stdin"), `{"id":"ui-2","type":"extension_ui_response","value":"allow"}`) {
		t.Errorf("the dialog was not answered allow:\n%s", fake.file("stdin"))
	}
	args := strings.Join(fake.starts()[0], " ")
	for _, w := range []string{"--tools read,bash,edit,write,grep,find,ls", " -e ", "--gateway-ask bash,edit,write"} {
		if !strings.Contains(args, w) {
			t.Errorf("args %q lack %q", args, w)
		}
	}
}

func TestPiRPCApprovalDeniedWithReason(t *testing.T) {
	t.Parallel()
	fake := newPiRPCFake(t)
	fake.setMode(t, "approve")
	p := newTestPiRPC(t, fake.bin, WarmOptions{})
	a := &approvals{verdict: Verdict{Message: "Denied in Discord."}}
	res, err := p.Run(context.Background(), piApprovalRequest(t.TempDir(), a.approve(fake)), nil)
	if err != nil || res.Text != "answer 1" {
		t.Fatalf("turn = %+v, %v: a denial lets the model go on", res, err)
	}
	if !strings.Contains(fake.file("stdin"), `"value":"deny:Denied in Discord."`) {
		t.Errorf("the dialog was not answered with the denial:\n%s", fake.file("stdin"))
	}
	if strings.Contains(fake.file("stdin"), `"type":"abort"`) {
		t.Error("a plain denial aborted the run")
	}
}

func TestPiRPCApprovalDeniedAndStoppedKeepsProcess(t *testing.T) {
	t.Parallel()
	fake := newPiRPCFake(t)
	fake.setMode(t, "approve_stop")
	p := newTestPiRPC(t, fake.bin, WarmOptions{})
	a := &approvals{verdict: Verdict{Message: "Stopped.", Interrupt: true}}
	work := t.TempDir()
	_, err := p.Run(context.Background(), piApprovalRequest(work, a.approve(fake)), nil)
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindCanceled || !strings.Contains(e.Message, "denied") {
		t.Fatalf("error = %v, want KindCanceled saying the call was denied", err)
	}
	if !strings.Contains(fake.file("stdin"), `"type":"abort"`) {
		t.Errorf("no abort after the denial:\n%s", fake.file("stdin"))
	}
	if w := p.Warm(); w.Processes != 1 {
		t.Errorf("Warm() = %+v, want the process kept", w)
	}
	fake.setMode(t, "")
	next := piApprovalRequest(work, a.approve(fake))
	next.SessionID = "s-new"
	res, err := p.Run(context.Background(), next, nil)
	if err != nil || !res.Warm || res.Text != "answer 2" {
		t.Errorf("next turn = %+v, %v; want it on the same process", res, err)
	}
}

func TestPiRPCStopWithdrawsApproval(t *testing.T) {
	t.Parallel()
	fake := newPiRPCFake(t)
	fake.setMode(t, "approve_stop")
	p := newTestPiRPC(t, fake.bin, WarmOptions{})
	a := &approvals{wait: true, ctxErr: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := p.Run(ctx, piApprovalRequest(t.TempDir(), a.approve(fake)), nil)
		done <- err
	}()
	waitFor(t, 10*time.Second, "the approval", func() bool { a.mu.Lock(); defer a.mu.Unlock(); return len(a.asked) == 1 })
	cancel()
	if err := <-a.ctxErr; err == nil {
		t.Error("the approval's context did not end with the stop")
	}
	var e *Error
	if err := <-done; !errors.As(err, &e) || e.Kind != KindCanceled {
		t.Fatalf("error = %v, want KindCanceled", err)
	}
	if !strings.Contains(fake.file("stdin"), `"type":"abort"`) {
		t.Errorf("no abort:\n%s", fake.file("stdin"))
	}
}

// Approvals need the RPC mode: with AGENT_KEEP_ALIVE=0 a turn that may
// ask runs on an RPC process of its own, stopped after it.
func TestPiRPCApprovalsWithoutKeepAlive(t *testing.T) {
	t.Parallel()
	fake := newPiRPCFake(t)
	fake.setMode(t, "approve")
	p := NewPi(Options{Binary: fake.bin, Env: os.Environ(), KillGrace: time.Second, Warm: WarmOptions{Interactive: true}})
	t.Cleanup(func() { _ = p.Close() })
	a := &approvals{verdict: Verdict{Allow: true}}
	res, err := p.Run(context.Background(), piApprovalRequest(t.TempDir(), a.approve(fake)), nil)
	if err != nil || res.Text != "answer 1" || len(a.asked) != 1 {
		t.Fatalf("turn = %+v, %v, asked %d", res, err, len(a.asked))
	}
	if w := p.Warm(); w.Processes != 0 {
		t.Errorf("Warm() = %+v, want no process kept", w)
	}
	// One extension file serves every process, and goes with the backend.
	if _, err := p.Run(context.Background(), piApprovalRequest(t.TempDir(), a.approve(fake)), nil); err != nil {
		t.Fatal(err)
	}
	starts := fake.starts()
	ext := starts[0][slices.Index(starts[0], "-e")+1]
	if len(starts) != 2 || starts[1][slices.Index(starts[1], "-e")+1] != ext {
		t.Errorf("starts = %q, want two processes loading the same extension file", starts)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ext); !os.IsNotExist(err) {
		t.Errorf("the extension file is still there after Close: %v", err)
	}
}

func TestPiAskTools(t *testing.T) {
	t.Parallel()
	ask := func(context.Context, Approval) Verdict { return Verdict{} }
	for _, c := range []struct {
		mode    string
		allowed []string
		approve ApproveFunc
		want    []string
		asks    bool
	}{
		{"default", nil, ask, []string{"bash", "edit", "write"}, true},
		{"", nil, ask, []string{"bash", "edit", "write"}, true},
		{"acceptEdits", nil, ask, []string{"bash"}, true},
		{"default", []string{"Bash", "Edit"}, ask, []string{"write"}, true},
		{"acceptEdits", []string{"Bash"}, ask, []string{}, true},
		{"plan", nil, ask, nil, false},
		{"bypassPermissions", nil, ask, nil, false},
		{"default", nil, nil, nil, false},
	} {
		req := Request{PermissionMode: c.mode, AllowedTools: c.allowed, Approve: c.approve}
		got := piAskTools(req)
		if diff := cmp.Diff(c.want, got); diff != "" && !(len(c.want) == 0 && len(got) == 0) {
			t.Errorf("piAskTools(%q, %q) (-want +got):\n%s", c.mode, c.allowed, diff)
		}
		if piAsks(req) != c.asks {
			t.Errorf("piAsks(%q, approve %v) = %v", c.mode, c.approve != nil, !c.asks)
		}
	}
}

func TestParsePiApproval(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		title string
		want  Approval
		ok    bool
	}{
		{`agent-gateway/approve {"id":"t1","tool":"bash","input":{"command":"ls"},"guarded":false}`,
			Approval{Tool: "bash", ToolUseID: "t1", Input: json.RawMessage(`{"command":"ls"}`), CanRemember: true}, true},
		{`agent-gateway/approve {"id":"t2","tool":"write","input":{"path":".pi/x.ts","content":"a"},"guarded":true}`,
			Approval{Tool: "write", ToolUseID: "t2", Input: json.RawMessage(`{"content":"a","file_path":".pi/x.ts"}`), CanRemember: true,
				BlockedPath: ".pi/x.ts", Description: "pi loads code and settings from .pi folders when it starts"}, true},
		{`agent-gateway/approve {"id":"t3","tool":"edit","input":{"path":"a.go","edits":[{"oldText":"x","newText":"y"}]}}`,
			Approval{Tool: "edit", ToolUseID: "t3", Input: json.RawMessage(`{"edits":[{"new_string":"y","old_string":"x"}],"file_path":"a.go"}`), CanRemember: true}, true},
		{`agent-gateway/approve {"id":"t4","tool":"edit","input":{"path":"a.go","oldText":"x","newText":"y"}}`,
			Approval{Tool: "edit", ToolUseID: "t4", Input: json.RawMessage(`{"file_path":"a.go","new_string":"y","old_string":"x"}`), CanRemember: true}, true},
		{`agent-gateway/approve {"id":"t5","tool":"bash","input":"not an object"}`,
			Approval{Tool: "bash", ToolUseID: "t5", Input: json.RawMessage(`{}`), CanRemember: true}, true},
		{`agent-gateway/approve {"id":"t7","tool":"bash","input":{"command":"echo a > b && c"}}`,
			Approval{Tool: "bash", ToolUseID: "t7", Input: json.RawMessage(`{"command":"echo a > b && c"}`), CanRemember: true}, true},
		{`Allow rm -rf?`, Approval{}, false},
		{`agent-gateway/approve {"id":"t6"}`, Approval{}, false},
		{`agent-gateway/approve {not json`, Approval{}, false},
	} {
		got, ok := parsePiApproval(c.title)
		if ok != c.ok {
			t.Errorf("parsePiApproval(%q) ok = %v", c.title, ok)
			continue
		}
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("parsePiApproval(%q) (-want +got):\n%s", c.title, diff)
		}
	}
}

func TestPiApproveAnswer(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		v    Verdict
		want string
	}{
		{Verdict{Allow: true}, "allow"},
		{Verdict{Allow: true, Remember: true}, "allow-session"},
		{Verdict{Message: "no"}, "deny:no"},
		{Verdict{}, "deny"},
		{Verdict{Message: "x", Interrupt: true}, "deny:x"},
	} {
		if got := piApproveAnswer(c.v); got != c.want {
			t.Errorf("piApproveAnswer(%+v) = %q, want %q", c.v, got, c.want)
		}
	}
}

func FuzzParsePiApproval(f *testing.F) {
	f.Add(`agent-gateway/approve {"id":"t1","tool":"bash","input":{"command":"ls"},"guarded":false}`)
	f.Add(`agent-gateway/approve {"id":"t3","tool":"edit","input":{"path":"a.go","edits":[{"oldText":"x","newText":"y"},7]}}`)
	f.Add(`agent-gateway/approve {"tool":"write","input":{"path":null,"oldText":3}}`)
	f.Fuzz(func(t *testing.T, title string) {
		a, ok := parsePiApproval(title)
		if !ok {
			return
		}
		if a.Tool == "" || !strings.HasPrefix(title, piApproveMarker) {
			t.Fatalf("accepted %q as %+v", title, a)
		}
		var in map[string]any
		if err := json.Unmarshal(a.Input, &in); err != nil {
			t.Fatalf("input %q is not a JSON object: %v", a.Input, err)
		}
	})
}

func TestPiCompact(t *testing.T) {
	t.Parallel()
	fake := newPiRPCFake(t)
	p := newTestPiRPC(t, fake.bin, WarmOptions{})
	work := t.TempDir()
	if _, err := p.Compact(context.Background(), piRPCRequest(work, "")); !errors.Is(err, ErrNotCompacted) {
		t.Errorf("Compact without a session = %v, want ErrNotCompacted", err)
	}
	first, err := p.Run(context.Background(), piRPCRequest(work, ""), nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Compact(context.Background(), piRPCRequest(work, first.SessionID))
	if err != nil {
		t.Fatalf("Compact: %v", err)
	}
	if !res.Compacted || res.SessionID != "s-new" || res.CostUSD != 0.01 || res.ContextWindow != 128000 {
		t.Errorf("Compact = %+v, want compacted, the session, its cost from the session total", res)
	}
	if n := len(fake.starts()); n != 1 {
		t.Errorf("pi started %d times, want the kept process used", n)
	}
	next, err := p.Run(context.Background(), piRPCRequest(work, first.SessionID), nil)
	if err != nil || !next.Warm {
		t.Errorf("turn after the compaction = %+v, %v; want it on the same process", next, err)
	}

	fake.setMode(t, "nocompact")
	_, err = p.Compact(context.Background(), piRPCRequest(work, first.SessionID))
	if !errors.Is(err, ErrNotCompacted) || !strings.Contains(err.Error(), "Nothing to compact") {
		t.Errorf("refused Compact = %v, want ErrNotCompacted with pi's reason", err)
	}
	if w := p.Warm(); w.Processes != 1 {
		t.Errorf("Warm() = %+v, want the process kept after a refusal", w)
	}
}

func TestPiRPCCompactionEstimate(t *testing.T) {
	t.Parallel()
	state := json.RawMessage(`{"model":{"id":"m","cost":{"input":3,"output":15}}}`)
	usd, ok := piRPCCompactionEstimate(json.RawMessage(`{"summary":"`+strings.Repeat("x", 400)+`","tokensBefore":100000}`), state)
	if want := (100000*3.0 + 100*15.0) / 1e6; !ok || math.Abs(usd-want) > 1e-12 {
		t.Errorf("estimate = %v, %v; want %v", usd, ok, want)
	}
	for _, c := range []struct{ compact, state string }{
		{`{"summary":"s","tokensBefore":100}`, `{"model":{"id":"m"}}`},
		{`{"summary":"s"}`, string(state)},
		{`not json`, string(state)},
	} {
		if usd, ok := piRPCCompactionEstimate(json.RawMessage(c.compact), json.RawMessage(c.state)); ok {
			t.Errorf("estimate(%s, %s) = %v, want none", c.compact, c.state, usd)
		}
	}
}
