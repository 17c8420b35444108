//go:build conformance

package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/fakeapi"
)

// The claude adapter's interactive ("warm") processes, driven through
// backends.New against the pinned CLI and the fake Anthropic API: what the
// unit tests check against a scripted fake CLI, checked here against the
// real one (DESIGN decision 16).

// warmRig is one warm claude adapter on the real CLI and its fake API.
type warmRig struct {
	t     *testing.T
	c     *backends.Claude
	api   *fakeapi.Anthropic
	dir   string // the turns' WorkDir
	owner string // proc.Spec.Owner: marks every process the adapter starts
}

// newWarmRig starts the fake API with turns and a claude adapter that keeps
// one process per key. Its processes are stopped, and checked gone, when
// the test ends.
func newWarmRig(t *testing.T, turns ...fakeapi.Turn) *warmRig {
	t.Helper()
	api := fakeapi.StartAnthropic(t, turns...)
	// An owner is letters and digits only.
	owner := strings.Map(func(r rune) rune {
		if 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' {
			return r
		}
		return -1
	}, "warm"+t.Name())
	owner = owner[:min(len(owner), 64)]
	b, err := backends.New("claude", backends.Options{
		Binary: cliBinary(t, "claude"),
		Env: []string{
			"PATH=" + os.Getenv("PATH"),
			"HOME=" + t.TempDir(),
			"ANTHROPIC_BASE_URL=" + api.URL(),
			"ANTHROPIC_API_KEY=" + apiKey,
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
			"CLAUDE_CODE_MAX_RETRIES=0",
			"DISABLE_TELEMETRY=1",
			"DISABLE_AUTOUPDATER=1",
			"DISABLE_ERROR_REPORTING=1",
		},
		KillGrace: 2 * time.Second,
		Log:       zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.DebugLevel),
		Owner:     owner,
		Warm:      backends.WarmOptions{Interactive: true, KeepAlive: time.Hour, MaxProcesses: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	c, ok := b.(*backends.Claude)
	if !ok {
		t.Fatalf("backends.New(\"claude\") = %T, want *backends.Claude", b)
	}
	r := &warmRig{t: t, c: c, api: api, dir: t.TempDir(), owner: owner}
	t.Cleanup(func() {
		c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		waitProcessesGone(ctx, t, r.mark())
	})
	return r
}

func (r *warmRig) mark() string { return "GATEWAY_OWNER_" + r.owner + "=1" }

// request is a turn of the conversation "chan-1" in the rig's WorkDir.
func (r *warmRig) request(prompt, session string) backends.Request {
	return backends.Request{Prompt: prompt, SessionID: session, Key: "chan-1", WorkDir: r.dir,
		PermissionMode: "acceptEdits", MaxTurns: 10}
}

// run runs req with a deadline, so a turn that never ends fails the test
// instead of stalling the suite.
func (r *warmRig) run(ctx context.Context, req backends.Request) (backends.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	return r.c.Run(ctx, req, nil)
}

// leaders is the pids of the claude processes the adapter has running: the
// marked processes that lead their own process group (each spawn is one
// group; the tools claude runs are in it).
func (r *warmRig) leaders() []int {
	var out []int
	for _, pid := range processesWith(r.mark()) {
		if pgid, ok := warmPgid(pid); ok && pgid == pid {
			out = append(out, pid)
		}
	}
	slices.Sort(out)
	return out
}

// warmPgid reads pid's process group from /proc/<pid>/stat.
func warmPgid(pid int) (int, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The command name is in parentheses and may hold spaces: fields
	// start after the last ')': state, ppid, pgrp.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	var state string
	var ppid, pgrp int
	if _, err := fmt.Sscan(s[i+1:], &state, &ppid, &pgrp); err != nil || state == "Z" {
		return 0, false
	}
	return pgrp, true
}

// checkOneIdle fails unless exactly one claude process runs, the adapter
// keeps it idle, and it is want (when want is not 0). It returns its pid.
func (r *warmRig) checkOneIdle(when string, want int) int {
	r.t.Helper()
	leaders := r.leaders()
	if len(leaders) != 1 || (want != 0 && leaders[0] != want) {
		r.t.Fatalf("%s: claude processes %v, want exactly the one process %d", when, leaders, want)
	}
	if s := r.c.Warm(); s.Processes != 1 || s.Busy != 0 || s.RSSBytes <= 0 {
		r.t.Errorf("%s: Warm() = %+v, want one idle process with its memory", when, s)
	}
	return leaders[0]
}

// mainRequests is the fake's main requests, waiting for at least n.
func (r *warmRig) mainRequests(n int) []fakeapi.Request {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	reqs, err := r.api.WaitMain(ctx, n)
	if err != nil {
		r.t.Fatal(err)
	}
	return reqs
}

// Two turns of one conversation run in one process: the second turn's
// model request carries the first exchange from the process's own memory
// (no --resume), and both results name the same session.
func TestConformanceClaudeWarmTwoTurnsOneProcess(t *testing.T) {
	r := newWarmRig(t, fakeapi.Text("The word is teal."), fakeapi.Text("You said teal."))
	ctx := context.Background()

	r1, err := r.run(ctx, r.request("Remember the word teal.", ""))
	if err != nil {
		t.Fatalf("first turn: %v", err)
	}
	pid := r.checkOneIdle("after the first turn", 0)

	r2, err := r.run(ctx, r.request("Which word?", r1.SessionID))
	if err != nil {
		t.Fatalf("second turn: %v", err)
	}
	r.checkOneIdle("after the second turn", pid)
	if r1.SessionID == "" || r2.SessionID != r1.SessionID {
		t.Errorf("sessions %q then %q, want the same one", r1.SessionID, r2.SessionID)
	}
	if r1.Text != "The word is teal." || r2.Text != "You said teal." {
		t.Errorf("replies %q, %q", r1.Text, r2.Text)
	}

	reqs := r.mainRequests(2)
	if len(reqs) != 2 {
		t.Fatalf("%d main requests, want 2:\n%s", len(reqs), r.api.Summary())
	}
	msgs := reqs[1].Messages()
	want := []fakeapi.Message{
		{Role: "user", Text: "Remember the word teal."},
		{Role: "assistant", Text: "The word is teal."},
		{Role: "user", Text: "Which word?"},
	}
	if !warmContainsInOrder(msgs, want) {
		t.Errorf("second model request's messages:\n%s\nwant them to hold, in order: %+v", warmDump(msgs), want)
	}
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if strings.Contains(string(cmdline), "--resume") {
		t.Errorf("the kept process was started with --resume: %q", strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
}

// warmContainsInOrder reports whether got holds a message for each of want,
// in the same order: same role, and want's text within its text (claude
// adds system reminders to a user message's text).
func warmContainsInOrder(got, want []fakeapi.Message) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g.Role == want[i].Role && strings.Contains(g.Text, want[i].Text) {
			i++
		}
	}
	return i == len(want)
}

// warmDump is one line per message (role and the end of its text), for
// failure messages.
func warmDump(msgs []fakeapi.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		text := strings.ReplaceAll(m.Text, "\n", " ")
		fmt.Fprintf(&b, "%s: …%s\n", m.Role, text[max(0, len(text)-80):])
	}
	return b.String()
}

// A turn stopped while the model API hangs is interrupted with claude's
// control request: Run returns canceled at once, well inside the interrupt
// wait (after which the process would be killed), and the same process
// takes the conversation's next turn.
func TestConformanceClaudeWarmInterruptKeepsTheProcess(t *testing.T) {
	r := newWarmRig(t, fakeapi.Text("One."), fakeapi.Hang(), fakeapi.Text("Still here."))
	r1, err := r.run(context.Background(), r.request("First.", ""))
	if err != nil {
		t.Fatalf("first turn: %v", err)
	}
	pid := r.checkOneIdle("after the first turn", 0)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type stop struct {
		at  time.Time
		err error
	}
	stopped := make(chan stop, 1)
	go func() {
		wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
		defer wcancel()
		_, err := r.api.WaitMain(wctx, 2) // the hung request has arrived
		stopped <- stop{time.Now(), err}
		cancel()
	}()
	_, err = r.run(ctx, r.request("Take your time.", r1.SessionID))
	returned := time.Now()
	at := <-stopped
	if at.err != nil {
		t.Fatalf("the second turn's model request never came: %v", at.err)
	}
	if backends.KindOf(err) != backends.KindCanceled || !errors.Is(err, context.Canceled) {
		t.Fatalf("stopped turn: err = %v, want canceled", err)
	}
	if took := returned.Sub(at.at); took >= backends.DefaultInterruptWait {
		t.Errorf("Run returned %v after the stop: claude did not answer the interrupt (the process was killed)", took)
	} else {
		t.Logf("Run returned %v after the stop", took.Round(time.Millisecond))
	}
	r.checkOneIdle("after the interrupt", pid)

	r3, err := r.run(context.Background(), r.request("Are you there?", r1.SessionID))
	if err != nil {
		t.Fatalf("turn after the interrupt: %v", err)
	}
	r.checkOneIdle("after the turn after the interrupt", pid)
	if r3.Text != "Still here." || r3.SessionID != r1.SessionID {
		t.Errorf("turn after the interrupt = %q in session %q, want %q in %q", r3.Text, r3.SessionID, "Still here.", r1.SessionID)
	}
	reqs := r.mainRequests(3)
	if p := reqs[len(reqs)-1].Prompt(); !strings.Contains(p, "Are you there?") {
		t.Errorf("last model request's prompt = %q", p)
	}
}

// warmApprovals records what an ApproveFunc was asked, and whether the
// tool had already run (its file existed) when it was asked.
type warmApprovals struct {
	mu      sync.Mutex // guards asked and early
	asked   []backends.Approval
	early   bool
	file    string
	verdict backends.Verdict
}

func (a *warmApprovals) approve(_ context.Context, ap backends.Approval) backends.Verdict {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, ap)
	if _, err := os.Stat(a.file); err == nil {
		a.early = true
	}
	return a.verdict
}

// Tool approvals in the "default" permission mode: claude asks over the
// pipe (can_use_tool) before running Bash, once; an allowed call runs and
// its output goes back to the model, a denied one does not run and the
// model gets the denial's message.
func TestConformanceClaudeWarmApprovals(t *testing.T) {
	const command = "touch approved.txt"
	for _, tc := range []struct {
		name    string
		verdict backends.Verdict
		// ran is whether the file must exist after the turn; result is
		// what the tool_result sent to the model must contain.
		ran    bool
		result string
		isErr  bool
	}{
		{"allow", backends.Verdict{Allow: true}, true, "(Bash completed with no output)", false},
		{"deny", backends.Verdict{Message: "The user is away."}, false, "The user is away.", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newWarmRig(t,
				fakeapi.ToolUse("Bash", map[string]any{"command": command, "description": "Create a file"}),
				fakeapi.Text("Done."))
			file := filepath.Join(r.dir, "approved.txt")
			a := &warmApprovals{file: file, verdict: tc.verdict}
			req := r.request("Create the file.", "")
			req.PermissionMode = "default"
			req.Approve = a.approve
			res, err := r.run(context.Background(), req)
			if err != nil {
				t.Fatalf("turn: %v", err)
			}
			if res.Text != "Done." {
				t.Errorf("reply %q", res.Text)
			}

			a.mu.Lock()
			asked, early := a.asked, a.early
			a.mu.Unlock()
			if len(asked) != 1 {
				t.Fatalf("Approve called %d times, want once: %+v", len(asked), asked)
			}
			var input struct {
				Command string `json:"command"`
			}
			if asked[0].Tool != "Bash" || json.Unmarshal(asked[0].Input, &input) != nil || input.Command != command {
				t.Errorf("asked about %s %s, want Bash with command %q", asked[0].Tool, asked[0].Input, command)
			}
			if early {
				t.Error("the command had run before Approve answered")
			}
			if _, err := os.Stat(file); (err == nil) != tc.ran {
				t.Errorf("approved.txt exists: %v, want %v", err == nil, tc.ran)
			}

			reqs := r.mainRequests(2)
			tr, ok := warmToolResult(reqs[1])
			if !ok {
				t.Fatalf("no tool_result in the second model request: %s", reqs[1].Body)
			}
			if !strings.Contains(tr.Text, tc.result) || tr.IsError != tc.isErr || tr.ToolUseID != asked[0].ToolUseID {
				t.Errorf("tool_result %+v, want it to contain %q (is_error %v) for tool_use %s", tr, tc.result, tc.isErr, asked[0].ToolUseID)
			}
			if denied := slices.Contains(res.PermissionDenials, "Bash"); denied == tc.ran {
				t.Errorf("result's permission denials %q", res.PermissionDenials)
			}
		})
	}
}

// warmToolResult is the tool_result block of req's last user message.
func warmToolResult(req fakeapi.Request) (fakeapi.Block, bool) {
	msgs := req.Messages()
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != "user" {
			continue
		}
		for _, b := range msgs[i].Blocks {
			if b.Type == "tool_result" {
				return b, true
			}
		}
		return fakeapi.Block{}, false
	}
	return fakeapi.Block{}, false
}
