//go:build conformance

package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/diamondburned/arikawa/v3/discord"

	"github.com/agentgateway/gateway/internal/fakeapi"
	"github.com/agentgateway/gateway/internal/fakediscord"
)

// claude 2.1.330 in print mode reports total_cost_usd for the whole
// session: a resumed run's total includes the runs before it, in another
// process. The runtime therefore charges a turn the difference. Turns of
// different sizes make the two readings tell apart: per process, the
// second total would be three times the first; per session, four.
func TestConformanceClaudeCostTotalIsPerSession(t *testing.T) {
	small := fakeapi.Usage{InputTokens: 1000, OutputTokens: 100}
	large := fakeapi.Usage{InputTokens: 3000, OutputTokens: 300}
	h := newHarness(t, 60*time.Second, fakeapi.Turn{Text: "One.", Usage: &small}, fakeapi.Turn{Text: "Two.", Usage: &large})
	first := h.say("c1", "First.")
	second := h.say("c1", "Second.")
	if first.Err != nil || second.Err != nil {
		t.Fatalf("runs failed: %v / %v\n%s", first.Err, second.Err, h.api.Summary())
	}
	c1, total2 := first.Result.SessionCostUSD, second.Result.SessionCostUSD
	t.Logf("turn 1 total_cost_usd %.6f, turn 2 (resumed, new process) total_cost_usd %.6f", c1, total2)
	if c1 <= 0 || math.Abs(total2-4*c1) > 1e-9 {
		t.Fatalf("second total = %v with the first %v: want 4x (a session total), 3x would be per process", total2, c1)
	}
	if math.Abs(second.Result.CostUSD-3*c1) > 1e-9 {
		t.Errorf("second turn charged %v, want its own %v", second.Result.CostUSD, 3*c1)
	}
	if first.Result.CostEstimated || first.Result.Model == "" {
		t.Errorf("result = %+v: an API key is a bill, not an estimate, and the model is named", first.Result)
	}
}

// gatewayRun starts the built `gateway run` and returns its log and pid.
// It is killed when the test ends.
func gatewayRun(t *testing.T, bin, work string, env []string, api summarizer) (*lockedBuffer, int) {
	return startGatewayRun(t, bin, work, env, api, syscall.SIGKILL)
}

// summarizer is what gatewayRun reads of a fake model API when a test
// fails.
type summarizer interface{ Summary() string }

// startGatewayRun starts the built `gateway run` and returns its log and
// pid. It gets stop when the test ends (SIGTERM: a shutdown that stops its
// agent processes too), and SIGKILL if it is still there 15 s later.
func startGatewayRun(t *testing.T, bin, work string, env []string, api summarizer, stop syscall.Signal) (*lockedBuffer, int) {
	t.Helper()
	cmd := exec.Command(bin, "run")
	cmd.Dir = work
	cmd.Env = env
	var logs lockedBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(stop)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("gateway output:\n%s\nmodel API:\n%s", logs.String(), api.Summary())
		}
	})
	return &logs, cmd.Process.Pid
}

// cliProcesses lists the processes carrying marker but the gateway's own.
func cliProcesses(marker string, gateway int) []int {
	var out []int
	for _, pid := range processesWith(marker) {
		if pid != gateway {
			out = append(out, pid)
		}
	}
	return out
}

// cardOf returns the bot's first message replying to prompt: the card.
func cardOf(fd *fakediscord.Server, ch discord.ChannelID, prompt discord.MessageID) (fakediscord.Message, bool) {
	for _, m := range fd.BotMessages(ch) {
		if m.Reference != nil && m.Reference.MessageID == prompt {
			return m, true
		}
	}
	return fakediscord.Message{}, false
}

// framesOf returns every content the bot sent for a card message.
func framesOf(fd *fakediscord.Server, card discord.MessageID) []string {
	var out []string
	for _, r := range fd.Requests() {
		var body struct {
			Content string `json:"content"`
		}
		isCard := r.Method == "PATCH" && strings.HasSuffix(r.Path, "/messages/"+card.String()) ||
			r.Method == "POST" && strings.Contains(string(r.Body), `"components"`)
		if isCard && json.Unmarshal(r.Body, &body) == nil {
			out = append(out, body.Content)
		}
	}
	return out
}

// The built gateway with the real claude CLI: a turn that streams text and
// calls Bash shows both on its card, which ends as a receipt with the
// cost; Stop during a hung model API call ends the run, the card says so
// only once no claude process is left, and the next prompt resumes the
// session.
func TestConformanceClaudeCardAndStop(t *testing.T) {
	bin := buildGateway(t)
	work := t.TempDir()
	configDir := filepath.Join(work, "config")
	if err := os.MkdirAll(configDir, 0o700); err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	api := fakeapi.StartAnthropic(t,
		fakeapi.Turn{Text: "Let me look at the files first.", ToolCalls: []fakeapi.ToolCall{{Name: "Bash", Input: json.RawMessage(`{"command":"echo card-check","description":"print"}`)}}},
		fakeapi.Turn{Text: "The check printed card-check, all good.", Gate: gate},
		fakeapi.Hang(),
		fakeapi.Text("Resumed fine."),
	)
	fd := fakediscord.Start(t)
	_, channel := fd.AddGuild("conformance")
	alice := fd.User("alice")
	marker := "ANTHROPIC_BASE_URL=" + api.URL()
	logs, gatewayPid := gatewayRun(t, bin, work, gatewayEnv(t, fd, api.URL(), configDir, "ALLOWED_TOOLS=Bash,Read,Write,Edit"), api)
	fd.Wait(t, "the bot to connect", 30*time.Second, fd.Connected)

	first := fd.Post(channel, alice, fakediscord.Mention(fd.Bot)+" Check the files.", fd.Bot)
	var card fakediscord.Message
	fd.Wait(t, "the card with the Bash call", 90*time.Second, func() bool {
		var ok bool
		card, ok = cardOf(fd, channel, first.ID)
		return ok && strings.Contains(strings.Join(framesOf(fd, card.ID), "\n"), "`Bash` `echo card-check`")
	})
	fd.Wait(t, "the streamed text on the card", 30*time.Second, func() bool {
		return strings.Contains(strings.Join(framesOf(fd, card.ID), "\n"), "Let me look at the files first.")
	})
	close(gate)
	fd.Wait(t, "the receipt", 60*time.Second, func() bool {
		m, _ := fd.Message(channel, card.ID)
		return strings.HasPrefix(m.Content, "✅ Done")
	})
	receipt, _ := fd.Message(channel, card.ID)
	if !strings.Contains(receipt.Content, "1 tool") || !strings.Contains(receipt.Content, "$") || strings.Contains(receipt.Content, "estimate") {
		t.Errorf("receipt = %q; want one tool and a billed cost", receipt.Content)
	}
	// The answer is handed to the outbox before the card becomes its
	// receipt, and posted right after.
	fd.Wait(t, "the answer message", 30*time.Second, func() bool {
		for _, m := range fd.BotMessages(channel) {
			if m.ID != card.ID && strings.Contains(m.Content, "all good") {
				return true
			}
		}
		return false
	})

	// Stop during a hung model API call.
	hung := fd.Post(channel, alice, fakediscord.Mention(fd.Bot)+" Take your time.", fd.Bot)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := api.WaitMain(ctx, 3); err != nil {
		t.Fatalf("the hung call never came: %v", err)
	}
	var stopCard fakediscord.Message
	fd.Wait(t, "the hung turn's card", 30*time.Second, func() bool {
		var ok bool
		stopCard, ok = cardOf(fd, channel, hung.ID)
		return ok && len(stopCard.Buttons()) == 2
	})
	running := cliProcesses(marker, gatewayPid)
	if len(running) == 0 {
		t.Fatal("no claude process while the API hangs")
	}
	start := time.Now()
	fd.Press(channel, stopCard.ID, alice, stopCard.Buttons()[0].ID, discord.PermissionSendMessages)
	fd.Wait(t, "the card to say stopped", 30*time.Second, func() bool {
		m, _ := fd.Message(channel, stopCard.ID)
		return strings.HasPrefix(m.Content, "🛑 Stopped")
	})
	took := time.Since(start)
	// A soft stop (claude's interrupt request) keeps the warm process for
	// the channel's next prompt; nothing else of the turn may be left.
	if left := cliProcesses(marker, gatewayPid); len(left) > 1 || len(left) == 1 && !slices.Contains(running, left[0]) {
		for _, pid := range left {
			cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			t.Logf("left: %d %q", pid, cmdline)
		}
		t.Fatalf("the card says stopped while claude processes %v remain besides the warm one of %v", left, running)
	}
	t.Logf("Stop pressed -> card says stopped, the warm process kept: %v", took)

	third := fd.Post(channel, alice, fakediscord.Mention(fd.Bot)+" Are you still there?", fd.Bot)
	fd.Wait(t, "the answer after the stop", 90*time.Second, func() bool {
		for _, m := range fd.BotMessages(channel) {
			if m.Content == "Resumed fine." && m.Reference != nil && m.Reference.MessageID == third.ID {
				return true
			}
		}
		return false
	})
	main := api.MainRequests()
	if history := flatten(main[len(main)-1]); !strings.Contains(history, "Check the files.") {
		t.Errorf("the turn after the stop did not resume the session:\n%s", history)
	}
	if strings.Contains(logs.String(), "could not be resumed") {
		t.Error("the session was not resumable after the stop")
	}
}

// /project moves a channel's runs into a directory inside PROJECTS_ROOT;
// Keep carries the conversation there (claude keys sessions by directory),
// and --add-dir lets the agent write CONFIG_DIR/memory.md from the
// project.
func TestConformanceClaudeProjectKeepsSessionAndMemory(t *testing.T) {
	bin := buildGateway(t)
	work := t.TempDir()
	configDir := filepath.Join(work, "config")
	root := filepath.Join(work, "projects")
	app := filepath.Join(root, "app")
	for _, d := range []string{configDir, app} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	memory := filepath.Join(configDir, "memory.md")
	api := fakeapi.StartAnthropic(t,
		fakeapi.Text("Noted: the codename is heron."),
		fakeapi.ToolUse("Write", map[string]any{"file_path": memory, "content": "# Memory\n\n- The codename is heron.\n"}),
		fakeapi.Text("Saved to memory."),
	)
	fd := fakediscord.Start(t)
	_, channel := fd.AddGuild("conformance")
	alice := fd.User("alice")
	gatewayRun(t, bin, work, gatewayEnv(t, fd, api.URL(), configDir, "PROJECTS_ROOT="+root, "TURN_CARD=off"), api)
	fd.Wait(t, "the bot to connect", 30*time.Second, fd.Connected)

	fd.Post(channel, alice, fakediscord.Mention(fd.Bot)+" The codename is heron.", fd.Bot)
	fd.Wait(t, "the first answer", 90*time.Second, func() bool { return len(fd.BotMessages(channel)) >= 1 })

	ask := fd.InteractOptions(channel, alice, "project", fakediscord.Option{Name: "path", Type: 3, Value: "app"})
	var question fakediscord.Message
	fd.Wait(t, "the keep-or-fresh question", 30*time.Second, func() bool {
		for _, a := range fd.Answers() {
			if a.Interaction == ask && len(a.Buttons()) == 2 {
				question = a
				return true
			}
		}
		return false
	})
	press := fd.Press(channel, question.ID, alice, question.Buttons()[0].ID, discord.PermissionSendMessages)
	fd.Wait(t, "the answer to Keep", 30*time.Second, func() bool { return len(fd.Callbacks(press)) == 1 })

	fd.Post(channel, alice, fakediscord.Mention(fd.Bot)+" Remember it in your memory.", fd.Bot)
	fd.Wait(t, "the second answer", 90*time.Second, func() bool {
		for _, m := range fd.BotMessages(channel) {
			if strings.Contains(m.Content, "Saved to memory.") {
				return true
			}
		}
		return false
	})
	for _, m := range fd.BotMessages(channel) {
		if strings.Contains(m.Content, "could not be resumed") {
			t.Errorf("Keep lost the conversation: %q", m.Content)
		}
	}
	main := api.MainRequests()
	last := main[len(main)-1]
	if history := flatten(last); !strings.Contains(history, "The codename is heron.") {
		t.Errorf("the turn in the project did not carry the conversation:\n%s", history)
	}
	// claude tells the model its working directory with each request.
	if sys := main[1].System() + flatten(main[1]); !strings.Contains(sys, app) {
		t.Errorf("claude's system prompt does not name the project as its working directory %s", app)
	}
	if b, _ := os.ReadFile(memory); !strings.Contains(string(b), "heron") {
		t.Errorf("memory.md = %q: the agent could not write it from the project", b)
	}
}

// The gateway stops claude with SIGINT first because that is the signal
// claude ends a turn cleanly on: within moments, exit 0, with a result
// line that carries the cost. SIGTERM ends it with no result. A CLI
// upgrade that changes either fails here.
func TestConformanceClaudeStopsCleanlyOnSIGINT(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		api := fakeapi.StartAnthropic(t, fakeapi.Hang())
		cmd := exec.Command(cliBinary(t, "claude"), "-p", "--output-format", "stream-json", "--verbose", "--include-partial-messages")
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "ANTHROPIC_BASE_URL=" + api.URL(),
			"ANTHROPIC_API_KEY=" + apiKey, "CLAUDE_CODE_MAX_RETRIES=0", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"}
		cmd.Dir = t.TempDir()
		cmd.Stdin = strings.NewReader("Take your time.")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		var out strings.Builder
		cmd.Stdout = &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if _, err := api.WaitMain(ctx, 1); err != nil {
			t.Fatalf("the CLI never reached the API: %v", err)
		}
		cancel()
		start := time.Now()
		syscall.Kill(-cmd.Process.Pid, sig)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var err error
		select {
		case err = <-done:
		case <-time.After(10 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			t.Fatalf("%v: claude still running after 10 s", sig)
		}
		took := time.Since(start)
		result := strings.Contains(out.String(), `"type":"result"`)
		t.Logf("%v: exited after %v (%v), result line: %v", sig, took, err, result)
		switch sig {
		case syscall.SIGINT:
			if err != nil || !result || !strings.Contains(out.String(), `"terminal_reason":"aborted_streaming"`) {
				t.Errorf("SIGINT: exit %v, result %v; want a clean exit with an aborted result", err, result)
			}
		case syscall.SIGTERM:
			if result {
				t.Errorf("SIGTERM printed a result now; the interrupt-first order may no longer be needed")
			}
		}
	}
}
