//go:build conformance

package conformance

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentgateway/gateway/internal/fakeapi"
)

// claudeStream is a claude process with stream-json input and output, for
// tests that speak its protocol themselves.
type claudeStream struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	out   []string // every stdout line so far
}

func startClaudeStream(t *testing.T, api *fakeapi.Anthropic, dir, home string, args ...string) *claudeStream {
	t.Helper()
	cmd := exec.Command(cliBinary(t, "claude"), append([]string{"-p", "--input-format", "stream-json",
		"--output-format", "stream-json", "--verbose", "--permission-mode", "acceptEdits"}, args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "ANTHROPIC_BASE_URL=" + api.URL(),
		"ANTHROPIC_API_KEY=" + apiKey, "CLAUDE_CODE_MAX_RETRIES=0", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1", "DISABLE_ERROR_REPORTING=1"}
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
		if t.Failed() && stderr.Len() > 0 {
			t.Logf("claude stderr:\n%s", stderr.String())
		}
	})
	s := &claudeStream{t: t, cmd: cmd, stdin: stdin, lines: make(chan string, 1000)}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
		close(s.lines)
	}()
	return s
}

// say sends a user turn.
func (s *claudeStream) say(text string) {
	b, _ := json.Marshal(map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": text}})
	fmt.Fprintf(s.stdin, "%s\n", b)
}

// result reads lines until the next result line and returns it.
func (s *claudeStream) result() map[string]any {
	s.t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-s.lines:
			if !ok {
				s.t.Fatalf("stdout closed before a result:\n%s", strings.Join(s.out, "\n"))
			}
			s.out = append(s.out, l)
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["type"] == "result" {
				return m
			}
		case <-deadline:
			s.t.Fatalf("no result within 60 s:\n%s", strings.Join(s.out, "\n"))
		}
	}
}

// "/compact" sent as a user turn, checked against the pinned claude: in
// the warm process that holds the conversation, claude calls the model
// with its summarising prompt (the conversation so far in the request),
// emits system/compact_boundary with the context's size before and after,
// keeps the session id, and ends the turn with a result of no turns; the
// next turn's model request starts from the summary. A new process
// resuming the session compacts it the same way; print mode with the
// prompt on stdin does too, and says "Not enough messages to compact."
// when there is nothing to summarise. The streams are written to
// testdata/claude/compact_{warm,resume,print}.jsonl when RECORD_TESTDATA
// is set.
func TestConformanceClaudeCompact(t *testing.T) {
	big := fakeapi.Usage{InputTokens: 20, CacheReadInputTokens: 150_000, CacheCreationInputTokens: 3_000, OutputTokens: 200}
	api := fakeapi.StartAnthropic(t,
		fakeapi.Turn{Text: "The word is teal.", Usage: &big},
		// claude asks again when a summary comes without its tags.
		fakeapi.Text("<summary>The user asked me to remember the word teal.</summary>"),
		fakeapi.Text("You said teal."),
		fakeapi.Text("<summary>Still teal.</summary>"),
	)
	dir, home := t.TempDir(), t.TempDir()

	warm := startClaudeStream(t, api, dir, home)
	warm.say("Remember the word teal.")
	first := warm.result()
	before := len(api.Requests())
	warm.say("/compact")
	compacted := warm.result()
	compactRequests := api.Requests()[before:]
	warm.say("Which word?")
	after := warm.result()
	warm.stdin.Close()
	session := fmt.Sprint(first["session_id"])
	for i, r := range []map[string]any{compacted, after} {
		if got := fmt.Sprint(r["session_id"]); got != session {
			t.Errorf("result %d after /compact: session %s, want %s (unchanged)", i+1, got, session)
		}
	}
	if compacted["num_turns"] != float64(0) || compacted["result"] != "" {
		t.Errorf("/compact's result: num_turns %v, result %q; want 0 and empty", compacted["num_turns"], compacted["result"])
	}
	boundary := findLine(warm.out, "compact_boundary")
	meta, _ := boundary["compact_metadata"].(map[string]any)
	// 153,220: the first call's input, cache read and written, and output.
	if meta["trigger"] != "manual" || meta["pre_tokens"] != float64(153_220) || meta["post_tokens"] == nil {
		t.Errorf("compact_boundary metadata %v, want trigger manual, pre_tokens 153220, post_tokens", meta)
	}
	if after["result"] != "You said teal." {
		t.Errorf("the turn after /compact answered %q", after["result"])
	}
	if len(compactRequests) != 1 {
		t.Fatalf("/compact made no model request:\n%s", api.Summary())
	}
	for _, r := range compactRequests {
		msgs := r.Messages()
		if r.Turn < 0 || len(msgs) == 0 || !strings.Contains(msgs[len(msgs)-1].Text, "summary") {
			t.Errorf("/compact's request #%d does not ask for a summary:\n%s", r.Seq, api.Summary())
		}
	}
	t.Logf("/compact made %d model requests:\n%s", len(compactRequests), api.Summary())

	cold := startClaudeStream(t, api, dir, home, "--resume", session)
	cold.say("/compact")
	resumed := cold.result()
	cold.stdin.Close()
	if fmt.Sprint(resumed["session_id"]) != session || findLine(cold.out, "compact_boundary") == nil {
		t.Errorf("a process resuming the session did not compact it:\n%s", strings.Join(cold.out, "\n"))
	}

	// Print mode, the prompt on stdin: nothing left to summarise.
	printMode := exec.Command(cliBinary(t, "claude"), "-p", "--output-format", "stream-json", "--verbose",
		"--permission-mode", "acceptEdits", "--resume", session)
	printMode.Env = cold.cmd.Env
	printMode.Dir = dir
	printMode.Stdin = strings.NewReader("/compact")
	out, err := printMode.Output()
	if err != nil {
		t.Fatalf("print mode: %v", err)
	}
	printed := strings.Split(strings.TrimSpace(string(out)), "\n")
	if res := findLine(printed, "result"); res == nil || res["result"] != "Not enough messages to compact." || res["is_error"] != false {
		t.Errorf("print mode /compact of a compacted session: %v", res)
	}

	if os.Getenv("RECORD_TESTDATA") != "" {
		rewrite := strings.NewReplacer(dir, "/CONFIG_DIR", home, "/HOME_DIR")
		socket := regexp.MustCompile(`/tmp/cc-socks[^"/]*/[0-9]+\.sock`)
		for name, lines := range map[string][]string{"compact_warm.jsonl": warm.out, "compact_resume.jsonl": cold.out, "compact_print.jsonl": printed} {
			path := filepath.Join("..", "..", "testdata", "claude", name)
			text := socket.ReplaceAllString(rewrite.Replace(strings.Join(lines, "\n")), "/tmp/cc-socks/PID.sock")
			if err := os.WriteFile(path, []byte(text+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// findLine returns the first line of type typ, or of subtype typ.
func findLine(lines []string, typ string) map[string]any {
	for _, l := range lines {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && (m["type"] == typ || m["subtype"] == typ) {
			return m
		}
	}
	return nil
}
