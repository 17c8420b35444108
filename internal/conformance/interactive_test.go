//go:build conformance

package conformance

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentgateway/gateway/internal/fakeapi"
)

// claude with stream-json input, one process for several turns (the warm
// process of DESIGN decision 16), checked against the pinned CLI: each
// turn ends with a result whose total_cost_usd is the session's running
// total (a process resuming the session carries it on); a tool that needs permission is asked for with a can_use_tool
// control request and runs once allowed; an interrupt control request is
// acknowledged and ends the turn at once with an aborted result, and the
// process then takes the next turn. The exchange, both directions, is
// written to testdata/claude/interactive.txt when RECORD_TESTDATA is set.
func TestConformanceClaudeInteractiveProtocol(t *testing.T) {
	small := fakeapi.Usage{InputTokens: 1000, OutputTokens: 100}
	api := fakeapi.StartAnthropic(t,
		fakeapi.Turn{Text: "One.", Usage: &small},
		fakeapi.ToolUse("Bash", map[string]any{"command": "touch approved.txt", "description": "print"}),
		fakeapi.Text("Ran it."),
		fakeapi.Hang(),
		fakeapi.Text("Still here."),
		fakeapi.Turn{Text: "Resumed.", Usage: &small},
	)
	cmd := exec.Command(cliBinary(t, "claude"), "-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
		"--include-partial-messages", "--permission-prompt-tool", "stdio", "--permission-mode", "default")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "ANTHROPIC_BASE_URL=" + api.URL(),
		"ANTHROPIC_API_KEY=" + apiKey, "CLAUDE_CODE_MAX_RETRIES=0", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"}
	cmd.Dir = t.TempDir()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	var log strings.Builder
	lines := make(chan string, 1000)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	send := func(v any) {
		b, _ := json.Marshal(v)
		log.WriteString("> " + string(b) + "\n")
		fmt.Fprintf(stdin, "%s\n", b)
	}
	until := func(what string, match func(map[string]any) bool) map[string]any {
		deadline := time.After(30 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("stdout closed waiting for %s\n%s", what, log.String())
				}
				log.WriteString(l + "\n")
				var m map[string]any
				if json.Unmarshal([]byte(l), &m) == nil && match(m) {
					return m
				}
			case <-deadline:
				t.Fatalf("timeout waiting for %s\n%s", what, log.String())
			}
		}
	}
	isType := func(typ string) func(map[string]any) bool {
		return func(m map[string]any) bool { return m["type"] == typ }
	}
	user := func(text string) map[string]any {
		return map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": text}}
	}
	total := func(m map[string]any) float64 { v, _ := m["total_cost_usd"].(float64); return v }

	start := time.Now()
	send(user("First."))
	r1 := until("result 1", isType("result"))
	t.Logf("turn 1: result after %v, total_cost_usd %v", time.Since(start), r1["total_cost_usd"])

	send(user("Run it."))
	req := until("can_use_tool", isType("control_request"))
	inner, _ := req["request"].(map[string]any)
	if inner["subtype"] != "can_use_tool" || inner["tool_name"] != "Bash" || req["request_id"] == "" || inner["permission_suggestions"] == nil {
		t.Fatalf("permission request = %v", req)
	}
	if _, err := os.Stat(filepath.Join(cmd.Dir, "approved.txt")); err == nil {
		t.Fatal("the command ran before it was allowed")
	}
	send(map[string]any{"type": "control_response", "response": map[string]any{"subtype": "success", "request_id": req["request_id"],
		"response": map[string]any{"behavior": "allow", "updatedInput": inner["input"]}}})
	r2 := until("result 2", isType("result"))
	if _, err := os.Stat(filepath.Join(cmd.Dir, "approved.txt")); err != nil {
		t.Errorf("the allowed command did not run: %v", err)
	}
	// A running total: 1000/100 then 2 x 100/10 tokens.
	if c1, c2 := total(r1), total(r2); c1 <= 0 || math.Abs(c2-c1*1.2) > 1e-9 {
		t.Errorf("totals %v then %v: want the second to include the first (a running total)", c1, c2)
	}

	send(user("Take your time."))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := api.WaitMain(ctx, 4); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	send(map[string]any{"type": "control_request", "request_id": "req-interrupt-1", "request": map[string]any{"subtype": "interrupt"}})
	ack := until("the interrupt's acknowledgement", isType("control_response"))
	if resp, _ := ack["response"].(map[string]any); resp["request_id"] != "req-interrupt-1" || resp["subtype"] != "success" {
		t.Errorf("acknowledgement = %v", ack)
	}
	r3 := until("the interrupted turn's result", isType("result"))
	took := time.Since(start)
	t.Logf("interrupt: result %v after %v, total_cost_usd %v", r3["subtype"], took, r3["total_cost_usd"])
	if r3["subtype"] != "error_during_execution" || took > 5*time.Second {
		t.Errorf("interrupted turn ended with %v after %v", r3["subtype"], took)
	}

	// The process and its session stay: the next turn is answered.
	send(user("Are you there?"))
	r4 := until("result 4", isType("result"))
	if r4["result"] != "Still here." || r4["session_id"] != r1["session_id"] {
		t.Errorf("turn after the interrupt = %v", r4)
	}
	stdin.Close()
	io.Copy(io.Discard, stdout)
	err := cmd.Wait()
	t.Logf("exit after stdin closed: %v", err)
	if os.Getenv("RECORD_TESTDATA") != "" {
		if err := os.WriteFile(filepath.Join("..", "..", "testdata", "claude", "interactive.txt"), []byte(log.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// A new process resuming the session: its first total carries on from
	// the session's, as one-shot runs do: totals are per session, not per
	// process.
	resumed := exec.Command(cliBinary(t, "claude"), "-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
		"--resume", r1["session_id"].(string))
	resumed.Env, resumed.Dir = cmd.Env, cmd.Dir
	resumed.Stdin = strings.NewReader(`{"type":"user","message":{"role":"user","content":"Again."}}` + "\n")
	out, err := resumed.Output()
	if err != nil {
		t.Fatalf("resumed process: %v", err)
	}
	var r5 map[string]any
	for _, line := range strings.Split(string(out), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["type"] == "result" {
			r5 = m
		}
	}
	t.Logf("resumed process: first total_cost_usd %v (the session had %v)", r5["total_cost_usd"], r4["total_cost_usd"])
	if got, want := total(r5), total(r4)+total(r1); math.Abs(got-want) > 1e-9 {
		t.Errorf("resumed process's first total = %v, want %v: the session's %v plus its own turn", got, want, total(r4))
	}
}
