package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/fakeapi"
	"github.com/agentgateway/gateway/internal/fakediscord"
)

// BenchmarkTurnOverhead runs the gateway overhead measurement once with
// BENCH_TURN=<turns> (it builds the gateway and runs the real claude CLI,
// so it is skipped otherwise) and reports its medians.
func BenchmarkTurnOverhead(b *testing.B) {
	n, _ := strconv.Atoi(os.Getenv("BENCH_TURN"))
	if n <= 0 {
		b.Skip("set BENCH_TURN=<turns> to run the gateway overhead measurement")
	}
	// As make bench runs it: from the module's root (./cmd/gateway).
	b.Chdir("../..")
	for range b.N {
		r, err := runTurnOverheadN(n)
		if err != nil {
			b.Fatal(err)
		}
		if r.Skipped != "" {
			b.Skip(r.Skipped)
		}
		for _, l := range turnOverheadLines(r) {
			b.Log(l)
		}
		b.ReportMetric(float64(r.Overhead())/float64(time.Millisecond), "overhead-ms")
		b.ReportMetric(float64(medianDur(r.Gateway))/float64(time.Millisecond), "gateway-ms")
		b.ReportMetric(float64(medianDur(r.Alone))/float64(time.Millisecond), "alone-ms")
	}
}

func TestTurnOverheadMarkdown(t *testing.T) {
	t.Parallel()
	ms := func(v ...float64) []time.Duration {
		var out []time.Duration
		for _, n := range v {
			out = append(out, time.Duration(n*float64(time.Millisecond)))
		}
		return out
	}
	tests := []struct {
		name  string
		r     turnResult
		row   string
		lines []string
	}{
		{"within", turnResult{Version: "2.1.330", Gateway: ms(30, 29.5, 31), Alone: ms(28.5, 28, 29), GatewayBody: 100, AloneBody: 99},
			"| gateway overhead on a warm claude turn < 2 ms | 1.5 ms (median through the gateway 30.0 ms - claude alone 28.5 ms) | PASS |",
			[]string{
				"gateway overhead on a warm turn: 1.5ms (budget 2ms) OK",
				"gateway overhead on a warm turn: through the gateway median 30ms p90 30ms; claude alone median 28.5ms p90 28.5ms (n=3; model request 100 bytes vs 99; claude 2.1.330)",
			}},
		{"over", turnResult{Version: "2.1.330", Gateway: ms(34), Alone: ms(28)},
			"| gateway overhead on a warm claude turn < 2 ms | 6.0 ms (median through the gateway 34.0 ms - claude alone 28.0 ms) | FAIL |",
			[]string{
				"gateway overhead on a warm turn: 6ms (budget 2ms) OVER BUDGET",
				"gateway overhead on a warm turn: through the gateway median 34ms p90 34ms; claude alone median 28ms p90 28ms (n=1; model request 0 bytes vs 0; claude 2.1.330)",
			}},
		{"skipped", turnResult{Skipped: "no claude CLI at x"},
			"| gateway overhead on a warm claude turn < 2 ms | not measured: no claude CLI at x | - |",
			[]string{"gateway overhead on a warm turn: skipped: no claude CLI at x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			md := turnOverheadMarkdown(tt.r)
			if diff := cmp.Diff(tt.row, md[0]); diff != "" {
				t.Errorf("budget row (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.lines, turnOverheadLines(tt.r)); diff != "" {
				t.Errorf("turnOverheadLines (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTurnOverheadMarkdownTable(t *testing.T) {
	t.Parallel()
	r := turnResult{Version: "2.1.330", Gateway: []time.Duration{30 * time.Millisecond, 32 * time.Millisecond, 33 * time.Millisecond}, Alone: []time.Duration{29 * time.Millisecond}}
	md := turnOverheadMarkdown(r)
	want := []string{
		"| through the gateway (mention -> reply POST) | 32.0 ms | 32.0 ms | 30.0 ms | 33.0 ms |",
		"| claude alone (Run -> result) | 29.0 ms | 29.0 ms | 29.0 ms | 29.0 ms |",
		"| gateway overhead (median - median) | 3.0 ms | budget 2.0 ms | | |",
	}
	for _, w := range want {
		if !slices.Contains(md, w) {
			t.Errorf("no line %q in\n%s", w, strings.Join(md, "\n"))
		}
	}
}

func TestRequestFromArgs(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "system.md")
	if err := os.WriteFile(file, []byte("You are the bench persona."), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"/bin/claude", "-p", "--input-format", "stream-json", "--replay-user-messages", "--output-format", "stream-json",
		"--verbose", "--include-partial-messages", "--append-system-prompt-file", file, "--allowedTools", "Read,Edit",
		"--permission-mode", "acceptEdits", "--max-turns", "10", "--model", "opus", "--add-dir", "/a", "--add-dir", "/b",
		"--strict-mcp-config", "--setting-sources", "project,local", "--permission-prompt-tool", "stdio"}
	got, err := requestFromArgs(args)
	if err != nil {
		t.Fatal(err)
	}
	if got.Approve == nil {
		t.Error("--permission-prompt-tool: no Approve")
	}
	got.Approve = nil
	want := backends.Request{SystemPrompt: "You are the bench persona.", AllowedTools: []string{"Read", "Edit"}, PermissionMode: "acceptEdits",
		MaxTurns: 10, Model: "opus", AddDirs: []string{"/a", "/b"}, Isolated: true}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(backends.Request{}, "Approve")); diff != "" {
		t.Errorf("requestFromArgs (-want +got):\n%s", diff)
	}
	if _, err := requestFromArgs([]string{"--append-system-prompt-file", filepath.Join(t.TempDir(), "gone")}); err == nil {
		t.Error("a missing system prompt file: no error")
	}
}

func TestReplyPost(t *testing.T) {
	t.Parallel()
	post := func(method, path, body string, status int) fakediscord.Request {
		return fakediscord.Request{Method: method, Path: path, Body: []byte(body), Status: status}
	}
	tests := []struct {
		name string
		r    fakediscord.Request
		want bool
	}{
		{"the reply", post("POST", "/channels/1/messages", `{"content":"bench reply 3"}`, 200), true},
		{"another turn's", post("POST", "/channels/1/messages", `{"content":"bench reply 31"}`, 200), false},
		{"an edit", post("PATCH", "/channels/1/messages/2", `{"content":"bench reply 3"}`, 200), false},
		{"refused", post("POST", "/channels/1/messages", `{"content":"bench reply 3"}`, 429), false},
		{"a reaction", post("PUT", "/channels/1/messages/2/reactions/x/@me", ``, 200), false},
		{"multipart", post("POST", "/channels/1/messages", "--b\r\n{\"content\":\"bench reply 3\"}\r\n--b--", 200), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := replyPost(tt.r, "bench reply 3"); got != tt.want {
				t.Errorf("replyPost = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestClaudeGatewayEnvLeavesPathAndHomeToTheGateway(t *testing.T) {
	t.Parallel()
	for _, kv := range claudeGatewayEnv("http://127.0.0.1:1") {
		if strings.HasPrefix(kv, "PATH=") || strings.HasPrefix(kv, "HOME=") {
			t.Errorf("claudeGatewayEnv has %q", kv)
		}
	}
	if !slices.Contains(claudeGatewayEnv("http://127.0.0.1:1"), "ANTHROPIC_BASE_URL=http://127.0.0.1:1") {
		t.Error("no ANTHROPIC_BASE_URL")
	}
}

func TestPromptOfTakesTheLastTextBlock(t *testing.T) {
	t.Parallel()
	body := `{"messages":[{"role":"user","content":"first"},{"role":"assistant","content":"ok"},` +
		`{"role":"user","content":[{"type":"text","text":"<system-reminder>x</system-reminder>"},{"type":"text","text":"say ok 1"}]}]}`
	r := fakeapi.Request{Exchange: fakeapi.Exchange{Body: []byte(body)}}
	if got := promptOf(r); got != "say ok 1" {
		t.Errorf("promptOf = %q, want %q", got, "say ok 1")
	}
	if got := promptOf(fakeapi.Request{Exchange: fakeapi.Exchange{Body: []byte(`{"messages":[]}`)}}); got != "" {
		t.Errorf("promptOf of no messages = %q", got)
	}
}
