package backends

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
)

// warmClaude is a claude adapter on the interactive fake CLI running
// script, with warm processes kept per opts.
func warmClaude(t *testing.T, script string, opts WarmOptions) (*Claude, string) {
	t.Helper()
	bin, dir := fakeCLI(t, fakeInteractive, map[string]string{"SCRIPT": script})
	opts.Interactive = true
	if opts.KeepAlive == 0 {
		opts.KeepAlive = time.Hour
	}
	if opts.MaxProcesses == 0 {
		opts.MaxProcesses = 4
	}
	c := NewClaude(Options{Binary: bin, Env: os.Environ(), KillGrace: 2 * time.Second, Warm: opts, Log: zerolog.New(zerolog.NewTestWriter(t))})
	t.Cleanup(func() { c.Close() })
	return c, dir
}

// fakeLog is the fake CLI's log: one "<pid> <what> <detail>" per line.
func fakeLog(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "log"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// logged reports the log lines containing what.
func logged(t *testing.T, dir, what string) []string {
	var out []string
	for _, l := range fakeLog(t, dir) {
		if strings.Contains(l, what) {
			out = append(out, l)
		}
	}
	return out
}

func waitLogged(t *testing.T, dir, what string, n int) []string {
	t.Helper()
	waitFor(t, 20*time.Second, "the fake CLI to log "+strconv.Quote(what), func() bool { return len(logged(t, dir, what)) >= n })
	return logged(t, dir, what)
}

func pidOf(line string) int {
	n, _ := strconv.Atoi(strings.Fields(line)[0])
	return n
}

func warmReq(key, session string) Request {
	return Request{Prompt: "hello", Key: key, SessionID: session, PermissionMode: "default", WorkDir: os.TempDir()}
}

func TestWarmProcessTakesTheConversationsNextTurn(t *testing.T) {
	c, dir := warmClaude(t, "text,text,text", WarmOptions{})
	ctx := context.Background()
	r1, err := c.Run(ctx, warmReq("chan-1", ""), nil)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := c.Run(ctx, warmReq("chan-1", r1.SessionID), nil)
	if err != nil {
		t.Fatal(err)
	}
	spawns := logged(t, dir, " spawn ")
	if len(spawns) != 1 {
		t.Fatalf("spawned %d processes for two turns of one conversation:\n%s", len(spawns), strings.Join(spawns, "\n"))
	}
	if r2.SessionID != r1.SessionID || !strings.HasPrefix(r2.Text, "reply 2 ") {
		t.Errorf("second turn = %+v, want reply 2 in session %s", r2, r1.SessionID)
	}
	if r1.Warm || !r2.Warm {
		t.Errorf("Warm = %v, %v; want the first turn cold and the second warm", r1.Warm, r2.Warm)
	}
	// The running total is per session: the adapter reports it as such
	// (the runtime charges the difference).
	if r1.SessionCostUSD != 0.01 || r2.SessionCostUSD != 0.02 {
		t.Errorf("session totals %v, %v; want 0.01, 0.02", r1.SessionCostUSD, r2.SessionCostUSD)
	}
	if !strings.Contains(spawns[0], "--input-format stream-json") || strings.Contains(spawns[0], "--permission-prompt-tool") {
		t.Errorf("command line %q: want stream-json input and no prompt tool without Approve", spawns[0])
	}
	if s := c.Warm(); s.Processes != 1 || s.Busy != 0 || s.RSSBytes <= 0 || s.PSSBytes <= 0 || s.PSSBytes > s.RSSBytes {
		t.Errorf("Warm() = %+v, want one idle process with its memory", s)
	}
}

func TestWarmProcessReplacedWhenTheConversationOrSettingsChange(t *testing.T) {
	c, dir := warmClaude(t, "text,text,text,text", WarmOptions{})
	ctx := context.Background()
	r1, err := c.Run(ctx, warmReq("chan-1", ""), nil)
	if err != nil {
		t.Fatal(err)
	}
	// A model change is a control request, not a new process.
	req := warmReq("chan-1", r1.SessionID)
	req.Model = "claude-other"
	if _, err := c.Run(ctx, req, nil); err != nil {
		t.Fatal(err)
	}
	if got := logged(t, dir, "set_model claude-other"); len(got) != 1 {
		t.Errorf("set_model requests: %q", got)
	}
	// A reset (no session to resume) needs a fresh process.
	if _, err := c.Run(ctx, warmReq("chan-1", ""), nil); err != nil {
		t.Fatal(err)
	}
	// So does another working directory.
	req = warmReq("chan-1", "")
	req.WorkDir = t.TempDir()
	if _, err := c.Run(ctx, req, nil); err != nil {
		t.Fatal(err)
	}
	spawns := logged(t, dir, " spawn ")
	if len(spawns) != 3 {
		t.Fatalf("spawned %d processes, want 3 (first, after the reset, in the new directory):\n%s", len(spawns), strings.Join(spawns, "\n"))
	}
	for _, s := range spawns[:2] {
		waitFor(t, 10*time.Second, "the replaced process to go", func() bool { return processGone(pidOf(s)) })
	}
}

func TestWarmProcessEvictedWhenIdle(t *testing.T) {
	clock := clockwork.NewFakeClock()
	c, dir := warmClaude(t, "text", WarmOptions{KeepAlive: 10 * time.Minute, Clock: clock})
	if _, err := c.Run(context.Background(), warmReq("chan-1", ""), nil); err != nil {
		t.Fatal(err)
	}
	pid := pidOf(logged(t, dir, " spawn ")[0])
	clock.Advance(9 * time.Minute)
	if processGone(pid) || c.Warm().Processes != 1 {
		t.Fatal("stopped before AGENT_KEEP_ALIVE")
	}
	clock.Advance(time.Minute)
	waitFor(t, 10*time.Second, "the idle process to be stopped", func() bool { return processGone(pid) })
	if n := c.Warm().Processes; n != 0 {
		t.Errorf("%d processes kept after the idle timeout", n)
	}
}

func TestWarmProcessesCappedLeastRecentlyUsedFirst(t *testing.T) {
	clock := clockwork.NewFakeClock()
	c, dir := warmClaude(t, "text,text,text,text", WarmOptions{MaxProcesses: 2, Clock: clock})
	ctx := context.Background()
	for _, key := range []string{"a", "b"} {
		if _, err := c.Run(ctx, warmReq(key, ""), nil); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Second)
	}
	r, err := c.Run(ctx, warmReq("a", "sess-"+strings.Fields(logged(t, dir, " spawn ")[0])[0]), nil)
	if err != nil || len(logged(t, dir, " spawn ")) != 2 {
		t.Fatalf("a's second turn: %v, %+v (spawns %q)", err, r, logged(t, dir, " spawn "))
	}
	clock.Advance(time.Second)
	if _, err := c.Run(ctx, warmReq("c", ""), nil); err != nil {
		t.Fatal(err)
	}
	spawns := logged(t, dir, " spawn ")
	// b was used least recently: it goes; a stays.
	waitFor(t, 10*time.Second, "b's process to be evicted", func() bool { return processGone(pidOf(spawns[1])) })
	if processGone(pidOf(spawns[0])) {
		t.Error("the most recently used process was evicted")
	}
	if n := c.Warm().Processes; n != 2 {
		t.Errorf("%d processes kept, want MAX_WARM_PROCESSES=2", n)
	}
}

func TestWarmProcessesOverTheMemoryCapEvictedWhenIdle(t *testing.T) {
	c, dir := warmClaude(t, "text", WarmOptions{MemoryCap: 1})
	if _, err := c.Run(context.Background(), warmReq("chan-1", ""), nil); err != nil {
		t.Fatal(err)
	}
	pid := pidOf(logged(t, dir, " spawn ")[0])
	waitFor(t, 10*time.Second, "the process over the memory cap to be stopped", func() bool { return processGone(pid) })
	if n := c.Warm().Processes; n != 0 {
		t.Errorf("%d processes kept over the memory cap", n)
	}
}

func TestWarmProcessThatDiesIsRetriedOnceWithResume(t *testing.T) {
	c, dir := warmClaude(t, "text,die,text", WarmOptions{})
	ctx := context.Background()
	r1, err := c.Run(ctx, warmReq("chan-1", ""), nil)
	if err != nil {
		t.Fatal(err)
	}
	var retries []Event
	r2, err := c.Run(ctx, warmReq("chan-1", r1.SessionID), func(ev Event) {
		if ev.Kind == EventRetry {
			retries = append(retries, ev)
		}
	})
	if err != nil {
		t.Fatalf("turn after the process died: %v", err)
	}
	spawns := logged(t, dir, " spawn ")
	if len(spawns) != 2 || !strings.Contains(spawns[1], "--resume "+r1.SessionID) {
		t.Fatalf("spawns %q: want a second process resuming %s", spawns, r1.SessionID)
	}
	if r2.SessionID != r1.SessionID || len(retries) != 1 {
		t.Errorf("result %+v after %d retry events", r2, len(retries))
	}
	if r2.Warm {
		t.Error("a turn retried on a fresh process reports itself warm")
	}
}

func TestWarmProcessThatHangsIsKilledAndRetried(t *testing.T) {
	c, dir := warmClaude(t, "deaf,text", WarmOptions{HangTimeout: 300 * time.Millisecond})
	res, err := c.Run(context.Background(), warmReq("chan-1", ""), nil)
	if err != nil {
		t.Fatalf("turn after the hang: %v", err)
	}
	spawns := logged(t, dir, " spawn ")
	if len(spawns) != 2 || !strings.HasPrefix(res.Text, "reply 1 ") {
		t.Fatalf("spawns %q, result %+v", spawns, res)
	}
	waitFor(t, 10*time.Second, "the hung process to be killed", func() bool { return processGone(pidOf(spawns[0])) })
}

func TestQuietToolIsNotAHang(t *testing.T) {
	c, dir := warmClaude(t, "slowtool", WarmOptions{HangTimeout: 200 * time.Millisecond})
	res, err := c.Run(context.Background(), warmReq("chan-1", ""), nil)
	if err != nil || res.Text != "tests pass" {
		t.Fatalf("result %q, %v", res.Text, err)
	}
	if n := len(logged(t, dir, " spawn ")); n != 1 {
		t.Errorf("%d processes: a tool running quietly was taken for a hang", n)
	}
}

func TestWarmProcessThatHangsTwiceFails(t *testing.T) {
	c, _ := warmClaude(t, "deaf,deaf", WarmOptions{HangTimeout: 200 * time.Millisecond})
	_, err := c.Run(context.Background(), warmReq("chan-1", ""), nil)
	if !errors.Is(err, ErrTimeout) && KindOf(err) != KindTimeout {
		t.Fatalf("err = %v, want a timeout", err)
	}
	if !strings.Contains(err.Error(), "AGENT_HANG_TIMEOUT") {
		t.Errorf("err = %v: want it to name AGENT_HANG_TIMEOUT", err)
	}
}

var errStopTest = errors.New("stopped by the test")

func TestSoftInterruptKeepsTheProcessAndSession(t *testing.T) {
	c, dir := warmClaude(t, "hang,text", WarmOptions{})
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() {
		waitLogged(t, dir, "user hang", 1)
		cancel(errStopTest)
	}()
	r1, err := c.Run(ctx, warmReq("chan-1", ""), nil)
	if KindOf(err) != KindCanceled {
		t.Fatalf("stopped turn: err = %v, want canceled", err)
	}
	if got := logged(t, dir, "interrupt busy"); len(got) != 1 {
		t.Fatalf("interrupts seen by the CLI: %q", got)
	}
	if r1.SessionCostUSD != 0.01 {
		t.Errorf("stopped turn's total = %v: the aborted result's cost is kept", r1.SessionCostUSD)
	}
	r2, err := c.Run(context.Background(), warmReq("chan-1", r1.SessionID), nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(logged(t, dir, " spawn ")); n != 1 || !strings.HasPrefix(r2.Text, "reply 2 ") {
		t.Errorf("after a soft stop: %d processes, reply %q; want the same process", n, r2.Text)
	}
}

func TestUnansweredInterruptKillsTheGroup(t *testing.T) {
	c, dir := warmClaude(t, "deaf,text", WarmOptions{InterruptWait: 200 * time.Millisecond})
	ctx, cancel := context.WithCancelCause(context.Background())
	go func() {
		waitLogged(t, dir, "deaf", 1)
		cancel(errStopTest)
	}()
	_, err := c.Run(ctx, warmReq("chan-1", ""), nil)
	if KindOf(err) != KindCanceled {
		t.Fatalf("err = %v, want canceled", err)
	}
	pid := pidOf(logged(t, dir, " spawn ")[0])
	waitFor(t, 10*time.Second, "the deaf process to be killed", func() bool { return processGone(pid) })
	if n := c.Warm().Processes; n != 0 {
		t.Errorf("%d processes kept after a hard stop", n)
	}
}

func TestApprovals(t *testing.T) {
	for _, tc := range []struct {
		name    string
		verdict Verdict
		reply   string
		err     ErrorKind
		answer  string
	}{
		{"allow", Verdict{Allow: true}, "allowed", "", `"behavior":"allow","updatedInput":{"command":"touch approved.txt"}`},
		{"allow for the session", Verdict{Allow: true, Remember: true}, "allowed", "", `"destination":"session"`},
		{"deny", Verdict{Message: "Not now."}, "denied: Not now.", "", `"behavior":"deny","interrupt":false,"message":"Not now."`},
		{"deny and stop", Verdict{Message: "Stop.", Interrupt: true}, "", KindCanceled, `"interrupt":true`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, dir := warmClaude(t, "ask", WarmOptions{})
			var asked []Approval
			req := warmReq("chan-1", "")
			req.Approve = func(_ context.Context, a Approval) Verdict {
				asked = append(asked, a)
				return tc.verdict
			}
			res, err := c.Run(context.Background(), req, nil)
			if tc.err != "" {
				if err == nil || KindOf(err) != tc.err {
					t.Fatalf("err = %v, want %s", err, tc.err)
				}
			} else if err != nil || res.Text != tc.reply {
				t.Fatalf("result %q, %v; want %q", res.Text, err, tc.reply)
			}
			if len(asked) != 1 || asked[0].Tool != "Bash" || !json.Valid(asked[0].Input) || !asked[0].CanRemember {
				t.Errorf("asked %+v", asked)
			}
			answers := logged(t, dir, " answer ")
			if len(answers) != 1 || !strings.Contains(answers[0], tc.answer) {
				t.Errorf("answer sent: %q, want it to contain %s", answers, tc.answer)
			}
			if spawn := logged(t, dir, " spawn ")[0]; !strings.Contains(spawn, "--permission-prompt-tool stdio") {
				t.Errorf("command line %q lacks the prompt tool", spawn)
			}
		})
	}
}

func TestApprovalWithdrawnWhenTheTurnIsStopped(t *testing.T) {
	c, dir := warmClaude(t, "cancel,text", WarmOptions{})
	ctx, cancel := context.WithCancelCause(context.Background())
	causes := make(chan error, 1)
	req := warmReq("chan-1", "")
	req.Approve = func(actx context.Context, a Approval) Verdict {
		cancel(errStopTest) // the user pressed Stop while asked
		<-actx.Done()
		causes <- context.Cause(actx)
		return Verdict{Allow: true}
	}
	_, err := c.Run(ctx, req, nil)
	if KindOf(err) != KindCanceled {
		t.Fatalf("err = %v, want canceled", err)
	}
	if cause := <-causes; cause == nil {
		t.Error("the approval's context did not end")
	}
	if got := logged(t, dir, " answer "); len(got) != 0 {
		t.Errorf("a withdrawn request was answered: %q", got)
	}
	// The process took the stop softly and stays for the next turn.
	req.Approve = nil
	if _, err := c.Run(context.Background(), warmReq("chan-1", "sess-"+strings.Fields(logged(t, dir, " spawn ")[0])[0]), nil); err != nil {
		t.Fatal(err)
	}
}

func TestApprovalsWithoutKeepAliveRunOneProcessPerTurn(t *testing.T) {
	bin, dir := fakeCLI(t, fakeInteractive, map[string]string{"SCRIPT": "ask,ask"})
	c := NewClaude(Options{Binary: bin, Env: os.Environ(), KillGrace: 2 * time.Second, Warm: WarmOptions{Interactive: true}})
	defer c.Close()
	for range 2 {
		req := warmReq("chan-1", "")
		req.Approve = func(context.Context, Approval) Verdict { return Verdict{Allow: true} }
		if res, err := c.Run(context.Background(), req, nil); err != nil || res.Text != "allowed" {
			t.Fatalf("turn: %q, %v", res.Text, err)
		}
	}
	spawns := logged(t, dir, " spawn ")
	if len(spawns) != 2 {
		t.Fatalf("spawns %q, want one per turn", spawns)
	}
	for _, s := range spawns {
		waitFor(t, 10*time.Second, "each turn's process to go", func() bool { return processGone(pidOf(s)) })
	}
}

func TestSteeredMessageJoinsTheRunningTurn(t *testing.T) {
	c, dir := warmClaude(t, "steer,text", WarmOptions{})
	if err := c.Steer("chan-1", "too early"); !errors.Is(err, ErrCannotSteer) {
		t.Fatalf("Steer with nothing running = %v, want ErrCannotSteer", err)
	}
	go func() {
		waitLogged(t, dir, "user steer", 1)
		if err := c.Steer("chan-1", "also this"); err != nil {
			t.Errorf("Steer: %v", err)
		}
	}()
	res, err := c.Run(context.Background(), warmReq("chan-1", ""), nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := `answered "hello" and "also this"`; res.Text != want {
		t.Errorf("result %q, want %q", res.Text, want)
	}
	// The turn is over: it takes no more.
	if err := c.Steer("chan-1", "late"); !errors.Is(err, ErrCannotSteer) {
		t.Errorf("Steer after the turn = %v, want ErrCannotSteer", err)
	}
	if n := len(logged(t, dir, " spawn ")); n != 1 {
		t.Errorf("%d processes", n)
	}
}

func TestMergeResults(t *testing.T) {
	got := mergeResults([]Result{{Text: "one", Turns: 1, Usage: Usage{InputTokens: 5}, PermissionDenials: []string{"Bash"}}},
		Result{Text: "two", Turns: 2, SessionCostUSD: 0.3, Usage: Usage{InputTokens: 7}})
	want := Result{Text: "one\n\ntwo", Turns: 3, SessionCostUSD: 0.3, Usage: Usage{InputTokens: 12}, PermissionDenials: []string{"Bash"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mergeResults (-want +got):\n%s", diff)
	}
}
