//go:build conformance

package conformance

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentgateway/gateway/internal/fakeapi"
)

func TestConformanceZZInteractive(t *testing.T) {
	small := fakeapi.Usage{InputTokens: 1000, OutputTokens: 100}
	api := fakeapi.StartAnthropic(t,
		fakeapi.Turn{Text: "One.", Usage: &small},
		fakeapi.ToolUse("Bash", map[string]any{"command": "touch approved.txt", "description": "print"}),
		fakeapi.Text("Ran it."),
		fakeapi.Hang(),
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
	start := time.Now()
	send(user("First."))
	r1 := until("result 1", isType("result"))
	t.Logf("turn 1: %v total %v", time.Since(start), r1["total_cost_usd"])
	start = time.Now()
	send(user("Run it."))
	req := until("can_use_tool", func(m map[string]any) bool { return m["type"] == "control_request" })
	t.Logf("control request: %v", req)
	inner := req["request"].(map[string]any)
	send(map[string]any{"type": "control_response", "response": map[string]any{"subtype": "success", "request_id": req["request_id"],
		"response": map[string]any{"behavior": "allow", "updatedInput": inner["input"]}}})
	r2 := until("result 2", isType("result"))
	t.Logf("turn 2: %v total %v", time.Since(start), r2["total_cost_usd"])
	send(user("Take your time."))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	api.WaitMain(ctx, 4)
	start = time.Now()
	send(map[string]any{"type": "control_request", "request_id": "req-interrupt-1", "request": map[string]any{"subtype": "interrupt"}})
	r3 := until("result 3", isType("result"))
	t.Logf("interrupt: result after %v: subtype %v total %v", time.Since(start), r3["subtype"], r3["total_cost_usd"])
	stdin.Close()
	io.Copy(io.Discard, stdout)
	err := cmd.Wait()
	t.Logf("exit: %v", err)
	os.WriteFile("/tmp/interactive.log", []byte(log.String()), 0o644)
}
