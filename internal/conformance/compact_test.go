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
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentgateway/gateway/internal/fakeapi"
	"github.com/agentgateway/gateway/internal/fakediscord"
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

// backends.Claude.Compact on the real CLI: a conversation's turn leaves
// its context size and window on the result (the last call's input and
// cache, modelUsage's contextWindow), and Compact then runs on the same
// kept process, keeps the session and reports the smaller context; the
// conversation goes on there from the summary.
func TestConformanceClaudeCompactWarm(t *testing.T) {
	big := fakeapi.Usage{InputTokens: 20, CacheReadInputTokens: 150_000, CacheCreationInputTokens: 3_000, OutputTokens: 200}
	r := newWarmRig(t,
		fakeapi.Turn{Text: "The word is teal.", Usage: &big},
		fakeapi.Text("<summary>The user asked me to remember the word teal.</summary>"),
		fakeapi.Text("You said teal."),
	)
	ctx := context.Background()
	first, err := r.run(ctx, r.request("Remember the word teal.", ""))
	if err != nil {
		t.Fatalf("first turn: %v", err)
	}
	if first.ContextTokens != 153_020 || first.ContextWindow != 1_000_000 {
		t.Errorf("first turn's context %d of %d, want 153020 of 1000000", first.ContextTokens, first.ContextWindow)
	}
	pid := r.checkOneIdle("after the first turn", 0)

	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	res, err := r.c.Compact(cctx, r.request("", first.SessionID))
	if err != nil {
		t.Fatalf("Compact: %v", err)
	}
	r.checkOneIdle("after /compact", pid)
	if !res.Compacted || res.SessionID != first.SessionID || res.ContextTokens <= 0 || res.ContextTokens >= first.ContextTokens {
		t.Errorf("Compact = compacted %v, session %q (want %q), context %d tokens (was %d)",
			res.Compacted, res.SessionID, first.SessionID, res.ContextTokens, first.ContextTokens)
	}

	after, err := r.run(ctx, r.request("Which word?", res.SessionID))
	if err != nil {
		t.Fatalf("turn after /compact: %v", err)
	}
	r.checkOneIdle("after the next turn", pid)
	msgs := r.mainRequests(3)[2].Messages()
	var sent strings.Builder
	for _, m := range msgs {
		sent.WriteString(m.Text + "\n")
	}
	if after.Text != "You said teal." || !strings.Contains(sent.String(), "remember the word teal") || strings.Contains(sent.String(), "Remember the word teal.") {
		t.Errorf("the turn after /compact answered %q from messages:\n%s\nwant the summary in place of the conversation", after.Text, warmDump(msgs))
	}
}

// /compact through `gateway run` with the real claude: the receipt of a
// turn shows how full the context is (the window claude reports), and
// /compact summarises the channel's session on the channel's kept claude
// process (no second process, the same pid after), says how full the
// context is now, and the channel's next prompt goes on from the summary.
func TestConformanceClaudeCompactThroughDiscord(t *testing.T) {
	bin := buildGateway(t)
	work := t.TempDir()
	configDir := filepath.Join(work, "config")
	if err := os.MkdirAll(configDir, 0o700); err != nil {
		t.Fatal(err)
	}
	gate := make(chan struct{})
	big := fakeapi.Usage{InputTokens: 20, CacheReadInputTokens: 150_000, CacheCreationInputTokens: 3_000, OutputTokens: 200}
	api := fakeapi.StartAnthropic(t,
		fakeapi.Turn{Text: "The word is teal.", Usage: &big, Gate: gate},
		fakeapi.Text("<summary>The user asked me to remember the word teal.</summary>"),
		fakeapi.Text("You said teal."),
	)
	fd := fakediscord.Start(t)
	_, channel := fd.AddGuild("conformance")
	alice := fd.User("alice")
	marker := "ANTHROPIC_BASE_URL=" + api.URL()
	logs, gatewayPid := gatewayRun(t, bin, work, gatewayEnv(t, fd, api.URL(), configDir), api)
	fd.Wait(t, "the bot to connect", 30*time.Second, fd.Connected)

	first := fd.Post(channel, alice, fakediscord.Mention(fd.Bot)+" Remember the word teal.", fd.Bot)
	var card fakediscord.Message
	fd.Wait(t, "the card", 90*time.Second, func() bool {
		var ok bool
		card, ok = cardOf(fd, channel, first.ID)
		return ok
	})
	close(gate)
	fd.Wait(t, "the receipt", 60*time.Second, func() bool {
		m, _ := fd.Message(channel, card.ID)
		return strings.HasPrefix(m.Content, "✅ Done")
	})
	// 153,020 of claude-opus-5-5's 1,000,000 tokens.
	if receipt, _ := fd.Message(channel, card.ID); !strings.Contains(receipt.Content, "context 15%") {
		t.Errorf("receipt = %q, want the context meter at 15%%", receipt.Content)
	}
	warm := cliProcesses(marker, gatewayPid)

	var answer string
	fd.Wait(t, "/compact taken (the lane let go of the turn)", 60*time.Second, func() bool {
		id := fd.Interact(channel, alice, "compact", nil)
		fd.Wait(t, "the answer to /compact", 30*time.Second, func() bool {
			for _, a := range fd.Answers() {
				if a.Interaction == id && a.Original && a.Content != "" {
					answer = a.Content
					return true
				}
			}
			return false
		})
		return !strings.Contains(answer, "a prompt is running")
	})
	if !strings.Contains(answer, "Compacting this conversation") {
		t.Fatalf("/compact answered %q", answer)
	}
	var report string
	fd.Wait(t, "the compaction's report", 90*time.Second, func() bool {
		for _, m := range fd.BotMessages(channel) {
			if strings.Contains(m.Content, "Compacted") {
				report = m.Content
				return true
			}
		}
		return false
	})
	if !strings.Contains(report, "Context 1% (2,") {
		t.Errorf("report = %q, want the context left (about 2,500 tokens: 1%% of the window)", report)
	}
	if after := cliProcesses(marker, gatewayPid); len(warm) != 1 || !slices.Equal(after, warm) {
		t.Errorf("claude processes %v before /compact, %v after: want the channel's one kept process", warm, after)
	}

	third := fd.Post(channel, alice, fakediscord.Mention(fd.Bot)+" Which word?", fd.Bot)
	fd.Wait(t, "the answer after /compact", 90*time.Second, func() bool {
		for _, m := range fd.BotMessages(channel) {
			if m.Content == "You said teal." && m.Reference != nil && m.Reference.MessageID == third.ID {
				return true
			}
		}
		return false
	})
	main := api.MainRequests()
	if history := flatten(main[len(main)-1]); !strings.Contains(history, "remember the word teal") || strings.Contains(history, "Remember the word teal.") {
		t.Errorf("the turn after /compact did not go on from the summary:\n%s", history)
	}
	if strings.Contains(logs.String(), "compaction failed") {
		t.Errorf("the gateway logged a failed compaction:\n%s", logs.String())
	}
}
