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
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentgateway/gateway/internal/fakeapi"
)

// ccLine is one stdout line of a claude process and when it arrived.
type ccLine struct {
	text string
	at   time.Time
	m    map[string]any // decoded; nil when not a JSON object
}

// ccProc is one `claude -p --input-format stream-json` process run against a
// fake API, with its exchange (both directions) logged.
type ccProc struct {
	t         *testing.T
	cmd       *exec.Cmd
	stdin     io.WriteCloser
	lines     chan ccLine
	started   time.Time
	dir, home string
	apiURL    string

	mu  sync.Mutex
	log strings.Builder

	exited  chan struct{}
	waitErr error
}

// ccFlags are the flags of every process here; approvals add
// --permission-prompt-tool stdio --permission-mode default.
var ccFlags = []string{"-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose",
	"--include-partial-messages"}

var ccApprovals = []string{"--permission-prompt-tool", "stdio", "--permission-mode", "default"}

// startCC starts claude with ccFlags plus extra. home, when not empty, is
// the HOME to use (a fresh temp dir otherwise).
func startCC(t *testing.T, api *fakeapi.Anthropic, home string, extra ...string) *ccProc {
	t.Helper()
	if home == "" {
		home = t.TempDir()
	}
	p := &ccProc{t: t, lines: make(chan ccLine, 10000), dir: t.TempDir(), home: home, apiURL: api.URL(),
		exited: make(chan struct{})}
	p.cmd = exec.Command(cliBinary(t, "claude"), append(append([]string{}, ccFlags...), extra...)...)
	p.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "ANTHROPIC_BASE_URL=" + api.URL(),
		"ANTHROPIC_API_KEY=" + apiKey, "CLAUDE_CODE_MAX_RETRIES=0", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"}
	p.cmd.Dir = p.dir
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p.stdin, _ = p.cmd.StdinPipe()
	stdout, _ := p.cmd.StdoutPipe()
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) })
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
		for sc.Scan() {
			l := ccLine{text: sc.Text(), at: time.Now()}
			if json.Unmarshal([]byte(l.text), &l.m) != nil {
				l.m = nil
			}
			p.lines <- l
		}
		close(p.lines)
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	return p
}

func (p *ccProc) note(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.log.WriteString(s + "\n")
}

// send writes v as one JSON line to stdin and returns when it was written.
func (p *ccProc) send(v any) time.Time {
	b, _ := json.Marshal(v)
	p.note("> " + string(b))
	if _, err := fmt.Fprintf(p.stdin, "%s\n", b); err != nil {
		p.t.Fatalf("write stdin: %v", err)
	}
	return time.Now()
}

func (p *ccProc) user(text string) time.Time {
	return p.send(map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": text}})
}

// next is the next stdout line within d; ok false on timeout or EOF.
func (p *ccProc) next(d time.Duration) (ccLine, bool) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case l, ok := <-p.lines:
		if !ok {
			return ccLine{}, false
		}
		p.note(l.text)
		return l, true
	case <-timer.C:
		return ccLine{}, false
	}
}

// until reads lines until match holds, failing after 30 s or at EOF. It
// returns the matching line and the lines read before it (itself included).
func (p *ccProc) until(what string, match func(map[string]any) bool) (ccLine, []ccLine) {
	p.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var seen []ccLine
	for {
		left := time.Until(deadline)
		if left <= 0 {
			p.t.Fatalf("timeout waiting for %s; seen:\n%s", what, ccSummary(seen))
		}
		l, ok := p.next(left)
		if !ok {
			if p.isClosed() {
				p.t.Fatalf("stdout closed waiting for %s; seen:\n%s", what, ccSummary(seen))
			}
			continue
		}
		seen = append(seen, l)
		if l.m != nil && match(l.m) {
			return l, seen
		}
	}
}

func (p *ccProc) isClosed() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// quiet reads lines for d and returns them.
func (p *ccProc) quiet(d time.Duration) []ccLine {
	deadline := time.Now().Add(d)
	var seen []ccLine
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return seen
		}
		l, ok := p.next(left)
		if !ok {
			if p.isClosed() {
				return seen
			}
			continue
		}
		seen = append(seen, l)
	}
}

// closeAndWait closes stdin and waits (up to 20 s) for the exit, logging
// the remaining lines, and returns them and the exit error.
func (p *ccProc) closeAndWait() ([]ccLine, error) {
	p.t.Helper()
	p.stdin.Close()
	var rest []ccLine
	timeout := time.After(20 * time.Second)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				<-p.exited
				return rest, p.waitErr
			}
			p.note(l.text)
			rest = append(rest, l)
		case <-timeout:
			p.t.Fatalf("no exit 20 s after stdin closed")
		}
	}
}

var ccSocketPath = regexp.MustCompile(`"messaging_socket_path":"[^"]*"`)

// record is the log with paths rewritten.
func (p *ccProc) record() string {
	p.mu.Lock()
	s := p.log.String()
	p.mu.Unlock()
	s = ccSocketPath.ReplaceAllString(s, `"messaging_socket_path":"/tmp/cc-socks/PID.sock"`)
	s = strings.ReplaceAll(s, p.dir, "/WORK_DIR")
	s = strings.ReplaceAll(s, p.home, "/HOME_DIR")
	s = strings.ReplaceAll(s, strings.TrimPrefix(p.apiURL, "http://"), "127.0.0.1:PORT")
	return s
}

// summarize is one short line per stdout line, for failure messages and logs.
func ccSummary(ls []ccLine) string {
	var b strings.Builder
	for _, l := range ls {
		b.WriteString("  " + ccShort(l.m, l.text) + "\n")
	}
	return b.String()
}

func ccShort(m map[string]any, raw string) string {
	if m == nil {
		return raw
	}
	typ, _ := m["type"].(string)
	switch typ {
	case "system":
		return fmt.Sprintf("system/%v %v", m["subtype"], m["status"])
	case "stream_event":
		ev, _ := m["event"].(map[string]any)
		return fmt.Sprintf("stream_event %v", ev["type"])
	case "result":
		return fmt.Sprintf("result %v result=%q num_turns=%v queued_turn_count=%v result_index=%v terminal_reason=%v errors=%v",
			m["subtype"], m["result"], m["num_turns"], m["queued_turn_count"], m["result_index"], m["terminal_reason"], m["errors"])
	case "assistant", "user":
		msg, _ := m["message"].(map[string]any)
		b, _ := json.Marshal(msg["content"])
		s := string(b)
		if len(s) > 300 {
			s = s[:300] + "…"
		}
		extra := ""
		if m["isReplay"] != nil {
			extra = fmt.Sprintf(" isReplay=%v", m["isReplay"])
		}
		return typ + extra + " " + s
	default:
		if len(raw) > 600 {
			return raw[:600] + "…"
		}
		return raw
	}
}

func ccIsType(typ string) func(map[string]any) bool {
	return func(m map[string]any) bool { return m["type"] == typ }
}

func ccIsControl(subtype string) func(map[string]any) bool {
	return func(m map[string]any) bool {
		r, _ := m["request"].(map[string]any)
		return m["type"] == "control_request" && r["subtype"] == subtype
	}
}

func ccAllow(req map[string]any, extra map[string]any) map[string]any {
	inner, _ := req["request"].(map[string]any)
	resp := map[string]any{"behavior": "allow", "updatedInput": inner["input"]}
	for k, v := range extra {
		resp[k] = v
	}
	return map[string]any{"type": "control_response", "response": map[string]any{"subtype": "success",
		"request_id": req["request_id"], "response": resp}}
}

func ccDeny(req map[string]any, message string, interrupt bool) map[string]any {
	return map[string]any{"type": "control_response", "response": map[string]any{"subtype": "success",
		"request_id": req["request_id"], "response": map[string]any{"behavior": "deny", "message": message, "interrupt": interrupt}}}
}

func ccWaitMain(t *testing.T, api *fakeapi.Anthropic, n int) []fakeapi.Request {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reqs, err := api.WaitMain(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	return reqs
}

// dumpMessages is the messages of a request, one line each, for logs.
func ccDumpMessages(r fakeapi.Request) string {
	var b strings.Builder
	for i, m := range r.Messages() {
		fmt.Fprintf(&b, "    [%d] %s:", i, m.Role)
		for _, blk := range m.Blocks {
			txt := blk.Text
			if strings.Contains(txt, "while you were working") {
				txt = fmt.Sprintf("%q", txt)
			}
			if len(txt) > 160 && !strings.Contains(txt, "while you were working") {
				txt = txt[:160] + "…"
			}
			switch blk.Type {
			case "tool_use":
				fmt.Fprintf(&b, " {tool_use %s %s}", blk.Name, blk.Input)
			case "tool_result":
				fmt.Fprintf(&b, " {tool_result is_error=%v %q}", blk.IsError, txt)
			default:
				fmt.Fprintf(&b, " {%s %q}", blk.Type, txt)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// facts collects each scenario's exchange for interactive_facts.txt.
type ccFactsLog struct {
	mu       sync.Mutex
	sections map[string]string
}

func (f *ccFactsLog) add(name, text string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sections[name] = text
}

func (f *ccFactsLog) write(t *testing.T) {
	if os.Getenv("RECORD_TESTDATA") == "" {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var names []string
	for n := range f.sections {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		b.WriteString("# " + n + "\n")
		b.WriteString(f.sections[n])
	}
	if err := os.WriteFile(filepath.Join("..", "..", "testdata", "claude", "interactive_facts.txt"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// keep adds p's exchange to the log under t's own name when t ends.
func (f *ccFactsLog) keep(t *testing.T, p *ccProc) {
	name := t.Name()[strings.LastIndex(t.Name(), "/")+1:]
	t.Cleanup(func() {
		rec := p.record()
		if strings.Contains(rec, os.TempDir()+"/Test") {
			t.Errorf("the recording keeps a temp path (split across chunks?)")
		}
		f.add(name, rec)
	})
}

// ccKinds is type/subtype (or type) of each line.
func ccKinds(ls []ccLine) []string {
	var out []string
	for _, l := range ls {
		if l.m == nil {
			out = append(out, "(not json)")
			continue
		}
		k, _ := l.m["type"].(string)
		if sub, ok := l.m["subtype"].(string); ok {
			k += "/" + sub
		}
		out = append(out, k)
	}
	return out
}

// ccIndex is the index of the first line matching pred, or -1.
func ccIndex(ls []ccLine, pred func(map[string]any) bool) int {
	for i, l := range ls {
		if l.m != nil && pred(l.m) {
			return i
		}
	}
	return -1
}

// ccIsReplay matches the --replay-user-messages echo of a user message
// whose content is text.
func ccIsReplay(text string) func(map[string]any) bool {
	return func(m map[string]any) bool {
		msg, _ := m["message"].(map[string]any)
		return m["type"] == "user" && m["isReplay"] == true && msg["content"] == text
	}
}

// ccReplays is the content of every replayed user message among ls.
func ccReplays(ls []ccLine) []string {
	var out []string
	for _, l := range ls {
		if l.m != nil && l.m["type"] == "user" && l.m["isReplay"] == true {
			msg, _ := l.m["message"].(map[string]any)
			out = append(out, fmt.Sprint(msg["content"]))
		}
	}
	return out
}

func ccIsToolResult(m map[string]any) bool {
	return m["type"] == "user" && m["tool_use_result"] != nil
}

func ccIsStreamEvent(m map[string]any) bool { return m["type"] == "stream_event" }

// ccCheckResult checks a result line: its subtype, its result text (want ""
// means no result key at all), terminal_reason and result_index, and that
// queued_turn_count is 0.
func ccCheckResult(t *testing.T, m map[string]any, subtype, result, terminal string, index int) {
	t.Helper()
	got, has := m["result"]
	okResult := (result == "" && !has) || (result != "" && got == result)
	if m["subtype"] != subtype || !okResult || m["terminal_reason"] != terminal || m["result_index"] != float64(index) ||
		m["queued_turn_count"] != float64(0) {
		t.Errorf("result = subtype %v result %v terminal_reason %v result_index %v queued_turn_count %v;\n"+
			"want %s %q %s %d 0", m["subtype"], got, m["terminal_reason"], m["result_index"], m["queued_turn_count"],
			subtype, result, terminal, index)
	}
}

// ccSameJSON reports whether line is the JSON value want.
func ccSameJSON(t *testing.T, what, line, want string) {
	t.Helper()
	var a, b any
	if err := json.Unmarshal([]byte(line), &a); err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	if err := json.Unmarshal([]byte(want), &b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("%s =\n%s\nwant\n%s", what, line, want)
	}
}

// ccTexts is the type and text of each block of a message: "text:…",
// "tool_result(err):…".
func ccTexts(m fakeapi.Message) []string {
	var out []string
	for _, b := range m.Blocks {
		k := b.Type
		if b.IsError {
			k += "(err)"
		}
		out = append(out, k+":"+b.Text)
	}
	return out
}

func ccLast(r fakeapi.Request) fakeapi.Message {
	msgs := r.Messages()
	if len(msgs) == 0 {
		return fakeapi.Message{}
	}
	return msgs[len(msgs)-1]
}

// ccDenied is the tool_use_id of each of a result's permission_denials.
func ccDenied(m map[string]any) []string {
	out := []string{}
	list, _ := m["permission_denials"].([]any)
	for _, d := range list {
		d, _ := d.(map[string]any)
		out = append(out, fmt.Sprint(d["tool_use_id"]))
	}
	return out
}

func ccInterrupt(id string) map[string]any {
	return map[string]any{"type": "control_request", "request_id": id, "request": map[string]any{"subtype": "interrupt"}}
}

// ccNoMoreTurns checks that, within a quiet second and up to the exit
// after stdin closes, no further turn starts, and that the exit status is
// code.
func ccNoMoreTurns(t *testing.T, p *ccProc, code int) {
	t.Helper()
	ls := append(p.quiet(time.Second), nil...)
	rest, err := p.closeAndWait()
	ls = append(ls, rest...)
	if i := ccIndex(ls, func(m map[string]any) bool { return m["type"] == "result" || m["subtype"] == "init" }); i >= 0 {
		t.Errorf("another turn ran:\n%s", ccSummary(ls))
	}
	if got := p.cmd.ProcessState.ExitCode(); got != code {
		t.Errorf("exit: %v, want status %d", err, code)
	}
}

// steeredText is how claude 2.1.330 hands the model a user message that
// arrived while a turn was running, when the turn makes another model call:
// a role "system" message after the tool results.
const steeredText = "The user sent a new message while you were working:\nSecond.\n\nThis is how Claude Code surfaces " +
	"messages the user sends mid-turn — within the running turn, often alongside the next tool result, rather than as a " +
	"separate conversation turn. Address the message above as you continue this turn."

// rejectedText is the tool_result of a tool call whose approval ended in an
// interrupt (a deny with interrupt:true, or an interrupt while asking).
const rejectedText = "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a " +
	"file edit, the new_string was NOT written to the file). STOP what you are doing and wait for the user to tell you how to proceed."

// checkSteered checks a turn that took a second user message mid-turn:
// one result (want), the echo of "Second." after the tool's result and
// before the next model call, and the message handed to that call as
// steeredText.
func checkSteered(t *testing.T, api *fakeapi.Anthropic, s1 []ccLine, r1 map[string]any, want string) {
	t.Helper()
	ccCheckResult(t, r1, "success", want, "completed", 0)
	tr, echo := ccIndex(s1, ccIsToolResult), ccIndex(s1, ccIsReplay("Second."))
	next := -1
	if tr >= 0 {
		next = tr + 1 + ccIndex(s1[tr+1:], func(m map[string]any) bool { return m["subtype"] == "status" })
	}
	if !(tr >= 0 && tr < echo && echo < next) {
		t.Errorf("want the tool_result, the echo of Second., then the next request (system/status); got\n%s", ccSummary(s1))
	}
	reqs := api.MainRequests()
	if len(reqs) != 2 {
		t.Fatalf("%d model calls, want 2", len(reqs))
	}
	last := ccLast(reqs[1])
	if last.Role != "system" || last.Text != steeredText {
		t.Errorf("last message of the second call = %s %q, want system %q", last.Role, last.Text, steeredText)
	}
	msgs := reqs[1].Messages()
	if tr := msgs[len(msgs)-2]; tr.Role != "user" || len(tr.Blocks) != 1 || tr.Blocks[0].Type != "tool_result" {
		t.Errorf("the message before it = %+v, want the tool_result alone", tr)
	}
}

// TestConformanceClaudeInteractiveFacts checks, against the pinned claude,
// what a long-lived stream-json process does with messages written
// mid-turn (steering), interrupts and denials of pending approvals,
// session-wide approvals, set_model and set_permission_mode, a prompt file
// that goes away, --max-turns, and stdin closing mid-turn. Each subtest's
// exchange, both directions, goes to testdata/claude/interactive_facts.txt
// when RECORD_TESTDATA is set; testdata/claude/README.md states the facts.
func TestConformanceClaudeInteractiveFacts(t *testing.T) {
	facts := &ccFactsLog{sections: map[string]string{}}
	t.Cleanup(func() {
		if !t.Failed() {
			facts.write(t)
		}
	})

	// 1a. A user message written while the turn's model call is out, when
	// that call ends the turn (text, no tool): queued, then run as a turn of
	// its own (own system/init, own result) after the first turn's result.
	t.Run("1a_steer_while_model_call_runs", func(t *testing.T) {
		t.Parallel()
		gate := make(chan struct{})
		api := fakeapi.StartAnthropic(t, fakeapi.Turn{Text: "First answer.", Gate: gate}, fakeapi.Text("Second answer."))
		p := startCC(t, api, "", "--replay-user-messages")
		facts.keep(t, p)
		p.user("First.")
		ccWaitMain(t, api, 1)
		p.user("Second.")
		during := p.quiet(1500 * time.Millisecond)
		if got := ccKinds(during); !reflect.DeepEqual(got, []string{"system/init", "system/status"}) {
			t.Errorf("while the model call is out: %v, want system/init and system/status only (no echo yet)", got)
		}
		p.note("# (the model call answers now)")
		close(gate)
		r1, s1 := p.until("result 1", ccIsType("result"))
		r2, s2 := p.until("result 2", ccIsType("result"))
		ccCheckResult(t, r1.m, "success", "First answer.", "completed", 0)
		ccCheckResult(t, r2.m, "success", "Second answer.", "completed", 1)
		if got := ccReplays(s1); !reflect.DeepEqual(got, []string{"First."}) || ccIndex(s1, ccIsReplay("First.")) > ccIndex(s1, ccIsStreamEvent) {
			t.Errorf("turn 1: echoes %v; want First. echoed before the reply streams:\n%s", got, ccSummary(s1))
		}
		if got := ccKinds(s2); len(got) < 3 || got[0] != "system/init" || got[1] != "system/status" || !ccIsReplay("Second.")(s2[2].m) {
			t.Errorf("turn 2 starts %v; want system/init, system/status, the echo of Second.", got)
		}
		reqs := api.MainRequests()
		if len(reqs) != 2 || strings.Contains(string(reqs[0].Body), "Second.") {
			t.Fatalf("%d model calls (want 2), or Second. reached the first", len(reqs))
		}
		msgs := reqs[1].Messages()
		if got := ccTexts(msgs[len(msgs)-1]); msgs[len(msgs)-1].Role != "user" || !reflect.DeepEqual(got, []string{"text:Second."}) ||
			msgs[len(msgs)-2].Text != "First answer." {
			t.Errorf("second call ends %v, want the first answer then a user message Second.", got)
		}
		ccNoMoreTurns(t, p, 0)
	})

	// 1b. A user message written while a can_use_tool request is unanswered:
	// not a turn of its own; it is handed to the same turn's next model call
	// after the tool result, and the turn ends with one result.
	t.Run("1b_steer_while_approval_pending", func(t *testing.T) {
		t.Parallel()
		api := fakeapi.StartAnthropic(t, fakeapi.ToolUse("Bash", map[string]any{"command": "touch one.txt", "description": "touch"}),
			fakeapi.Text("Touched."), fakeapi.Text("Never asked for."))
		p := startCC(t, api, "", append([]string{"--replay-user-messages"}, ccApprovals...)...)
		facts.keep(t, p)
		p.user("First.")
		req, _ := p.until("can_use_tool", ccIsControl("can_use_tool"))
		p.user("Second.")
		during := p.quiet(1500 * time.Millisecond)
		if i := ccIndex(during, func(m map[string]any) bool { return m["type"] != "stream_event" }); i >= 0 {
			t.Errorf("while the approval is pending: %v, want only the rest of the tool call's stream", ccKinds(during))
		}
		p.send(ccAllow(req.m, nil))
		r1, s1 := p.until("result 1", ccIsType("result"))
		checkSteered(t, api, s1, r1.m, "Touched.")
		ccNoMoreTurns(t, p, 0)
	})

	// 1c. The same while the tool runs (an allowed `sleep 2`).
	t.Run("1c_steer_while_tool_runs", func(t *testing.T) {
		t.Parallel()
		api := fakeapi.StartAnthropic(t, fakeapi.ToolUse("Bash", map[string]any{"command": "sleep 2", "description": "wait"}),
			fakeapi.Text("Slept."), fakeapi.Text("Never asked for."))
		p := startCC(t, api, "", "--replay-user-messages", "--allowedTools", "Bash")
		facts.keep(t, p)
		p.user("First.")
		p.until("the tool call", func(m map[string]any) bool {
			return m["type"] == "assistant" && strings.Contains(fmt.Sprint(m["message"]), "tool_use")
		})
		before := p.quiet(500 * time.Millisecond)
		if ccIndex(before, ccIsToolResult) >= 0 {
			t.Fatal("the tool finished before the message was sent")
		}
		p.user("Second.")
		r1, s1 := p.until("result 1", ccIsType("result"))
		checkSteered(t, api, s1, r1.m, "Slept.")
		ccNoMoreTurns(t, p, 0)
	})

	// 1d. Written while the model call is out, then an interrupt: the
	// acknowledgement lists nothing in still_queued, the first turn ends
	// aborted, and the message then runs as its own turn, its model call
	// carrying the first message and the interruption in the same user
	// message.
	t.Run("1d_steer_then_interrupt", func(t *testing.T) {
		t.Parallel()
		api := fakeapi.StartAnthropic(t, fakeapi.Hang(), fakeapi.Text("Second answer."))
		p := startCC(t, api, "", "--replay-user-messages")
		facts.keep(t, p)
		p.user("First.")
		ccWaitMain(t, api, 1)
		p.user("Second.")
		during := p.quiet(1500 * time.Millisecond)
		if got := ccKinds(during); !reflect.DeepEqual(got, []string{"system/init", "system/status"}) {
			t.Errorf("while the model call hangs: %v, want system/init and system/status only (no echo yet)", got)
		}
		p.send(ccInterrupt("int-1"))
		ack, _ := p.until("the interrupt's acknowledgement", ccIsType("control_response"))
		ccSameJSON(t, "acknowledgement", ack.text,
			`{"type":"control_response","response":{"subtype":"success","request_id":"int-1","response":{"still_queued":[]}}}`)
		r1, s1 := p.until("result 1", ccIsType("result"))
		ccCheckResult(t, r1.m, "error_during_execution", "", "aborted_streaming", 0)
		if got := ccReplays(s1); !reflect.DeepEqual(got, []string{"First."}) {
			t.Errorf("echoes after the interrupt: %v, want First.", got)
		}
		r2, s2 := p.until("result 2", ccIsType("result"))
		ccCheckResult(t, r2.m, "success", "Second answer.", "completed", 1)
		if got := ccReplays(s2); ccKinds(s2)[0] != "system/init" || !reflect.DeepEqual(got, []string{"Second."}) {
			t.Errorf("turn 2: %v, echoes %v", ccKinds(s2), got)
		}
		reqs := api.MainRequests()
		if len(reqs) != 2 {
			t.Fatalf("%d model calls, want 2", len(reqs))
		}
		first := reqs[1].Messages()[0]
		got := ccTexts(first)
		if want := []string{"text:First.\n", "text:[Request interrupted by user]\n", "text:Second."}; first.Role != "user" ||
			len(got) < 3 || !reflect.DeepEqual(got[len(got)-3:], want) {
			t.Errorf("second call's first message = %q, want it to end %q", got, want)
		}
		ccNoMoreTurns(t, p, 0)
	})

	// 1e. Written while the model call is out, when that call asks for a
	// tool: handed to the next call of the same turn, as in 1b.
	t.Run("1e_steer_while_model_call_runs_then_tool", func(t *testing.T) {
		t.Parallel()
		gate := make(chan struct{})
		call := fakeapi.ToolUse("Bash", map[string]any{"command": "echo hi", "description": "say hi"})
		call.Gate = gate
		api := fakeapi.StartAnthropic(t, call, fakeapi.Text("Said hi."), fakeapi.Text("Never asked for."))
		p := startCC(t, api, "", "--replay-user-messages", "--allowedTools", "Bash")
		facts.keep(t, p)
		p.user("First.")
		ccWaitMain(t, api, 1)
		p.user("Second.")
		p.quiet(500 * time.Millisecond)
		p.note("# (the model call answers now)")
		close(gate)
		r1, s1 := p.until("result 1", ccIsType("result"))
		checkSteered(t, api, s1, r1.m, "Said hi.")
		ccNoMoreTurns(t, p, 0)
	})

	// 2. An interrupt while a can_use_tool request is unanswered: claude
	// withdraws the request with control_cancel_request (before it
	// acknowledges the interrupt) and ends the turn at once; the model is
	// not called again in that turn. Answering the withdrawn request later is
	// ignored: no output, the tool does not run, the next turn works, and
	// the model then sees the rejection and the interruption before the
	// next user message.
	t.Run("2_interrupt_while_approval_pending", func(t *testing.T) {
		t.Parallel()
		api := fakeapi.StartAnthropic(t, fakeapi.ToolUse("Bash", map[string]any{"command": "touch two.txt", "description": "touch"}),
			fakeapi.Text("Next turn."))
		p := startCC(t, api, "", ccApprovals...)
		facts.keep(t, p)
		p.user("First.")
		req, _ := p.until("can_use_tool", ccIsControl("can_use_tool"))
		start := p.send(ccInterrupt("int-2"))
		isControlLine := func(m map[string]any) bool {
			return m["type"] == "control_cancel_request" || m["type"] == "control_response"
		}
		cancel, _ := p.until("control_cancel_request", isControlLine)
		ccSameJSON(t, "first control line after the interrupt", cancel.text,
			fmt.Sprintf(`{"type":"control_cancel_request","request_id":%q}`, req.m["request_id"]))
		ack, _ := p.until("acknowledgement", isControlLine)
		ccSameJSON(t, "acknowledgement", ack.text,
			`{"type":"control_response","response":{"subtype":"success","request_id":"int-2","response":{"still_queued":[]}}}`)
		r1, s1 := p.until("result 1", ccIsType("result"))
		t.Logf("interrupt to result: %v", r1.at.Sub(start))
		ccCheckResult(t, r1.m, "error_during_execution", "", "aborted_tools", 0)
		if got := ccDenied(r1.m); !reflect.DeepEqual(got, []string{"toolu_fake_0001"}) {
			t.Errorf("permission_denials of the interrupted turn: %v", got)
		}
		if r1.at.Sub(start) > 5*time.Second {
			t.Errorf("result %v after the interrupt", r1.at.Sub(start))
		}
		if i := ccIndex(s1, ccIsToolResult); i < 0 || !strings.Contains(s1[i].text, `"is_error":true`) || !strings.Contains(s1[i].text, "The user doesn't want to proceed") {
			t.Errorf("no rejected tool_result line:\n%s", ccSummary(s1))
		}
		p.send(ccAllow(req.m, nil))
		if late := p.quiet(time.Second); len(late) > 0 || p.isClosed() {
			t.Errorf("after answering the withdrawn request: %v (exited %v)", ccKinds(late), p.isClosed())
		}
		if _, err := os.Stat(filepath.Join(p.dir, "two.txt")); err == nil {
			t.Error("the withdrawn tool call ran")
		}
		p.user("Again.")
		r2, _ := p.until("result 2", ccIsType("result"))
		ccCheckResult(t, r2.m, "success", "Next turn.", "completed", 1)
		if got := ccDenied(r2.m); len(got) != 0 {
			t.Errorf("permission_denials of the next turn: %v", got)
		}
		reqs := api.MainRequests()
		if len(reqs) != 2 {
			t.Fatalf("%d model calls, want 2", len(reqs))
		}
		want := []string{"tool_result(err):" + rejectedText, "text:[Request interrupted by user for tool use]\n", "text:Again."}
		if got := ccTexts(ccLast(reqs[1])); !reflect.DeepEqual(got, want) {
			t.Errorf("next call's last message = %q\nwant %q", got, want)
		}
		ccNoMoreTurns(t, p, 0)
	})

	// 3. Deny. interrupt:false: the model gets the message as an error
	// tool_result and the turn goes on. interrupt:true: the turn ends at
	// once (no further model call) with error_during_execution/aborted_tools;
	// the model never sees the message, but the generic rejection, followed
	// in the next turn's user message by "[Request interrupted by user for
	// tool use]".
	t.Run("3_deny", func(t *testing.T) {
		t.Parallel()
		api := fakeapi.StartAnthropic(t,
			fakeapi.ToolUse("Bash", map[string]any{"command": "touch three.txt", "description": "touch"}), fakeapi.Text("Understood."),
			fakeapi.ToolUse("Bash", map[string]any{"command": "touch four.txt", "description": "touch"}), fakeapi.Text("Third answer."))
		p := startCC(t, api, "", ccApprovals...)
		facts.keep(t, p)
		p.user("First.")
		req, _ := p.until("can_use_tool", ccIsControl("can_use_tool"))
		p.send(ccDeny(req.m, "The user is away.", false))
		r1, s1 := p.until("result 1", ccIsType("result"))
		ccCheckResult(t, r1.m, "success", "Understood.", "completed", 0)
		// permission_denials lists this turn's denials only.
		if got := ccDenied(r1.m); !reflect.DeepEqual(got, []string{"toolu_fake_0001"}) {
			t.Errorf("permission_denials after the deny: %v", got)
		}
		if i := ccIndex(s1, ccIsToolResult); i < 0 || !strings.Contains(s1[i].text, `"content":"The user is away.","is_error":true`) {
			t.Errorf("tool_result line:\n%s", ccSummary(s1))
		}
		reqs := ccWaitMain(t, api, 2)
		if got, want := ccTexts(ccLast(reqs[1])), []string{"tool_result(err):The user is away."}; !reflect.DeepEqual(got, want) {
			t.Errorf("the model got %q, want %q", got, want)
		}

		p.user("Second.")
		req, _ = p.until("can_use_tool 2", ccIsControl("can_use_tool"))
		start := p.send(ccDeny(req.m, "The user is away.", true))
		r2, s2 := p.until("result 2", ccIsType("result"))
		t.Logf("deny with interrupt to result: %v", r2.at.Sub(start))
		ccCheckResult(t, r2.m, "error_during_execution", "", "aborted_tools", 1)
		if got := ccDenied(r2.m); !reflect.DeepEqual(got, []string{"toolu_fake_0002"}) {
			t.Errorf("permission_denials after the interrupting deny: %v", got)
		}
		if r2.at.Sub(start) > 5*time.Second {
			t.Errorf("result %v after the deny", r2.at.Sub(start))
		}
		if i := ccIndex(s2, ccIsToolResult); i < 0 || strings.Contains(s2[i].text, "The user is away.") || !strings.Contains(s2[i].text, "The user doesn't want to proceed") {
			t.Errorf("tool_result line:\n%s", ccSummary(s2))
		}
		if n := len(api.MainRequests()); n != 3 {
			t.Errorf("%d model calls after the interrupting deny, want 3 (none after it)", n)
		}
		p.user("Third.")
		r3, _ := p.until("result 3", ccIsType("result"))
		ccCheckResult(t, r3.m, "success", "Third answer.", "completed", 2)
		if got := ccDenied(r3.m); len(got) != 0 {
			t.Errorf("permission_denials of the next turn: %v", got)
		}
		reqs = api.MainRequests()
		want := []string{"tool_result(err):" + rejectedText, "text:[Request interrupted by user for tool use]\n", "text:Third."}
		if got := ccTexts(ccLast(reqs[3])); !reflect.DeepEqual(got, want) {
			t.Errorf("next call's last message = %q\nwant %q", got, want)
		}
		if strings.Contains(string(reqs[3].Body), "The user is away.") && strings.Count(string(reqs[3].Body), "The user is away.") != 1 {
			t.Errorf("the interrupting deny's message reached the model")
		}
		ccNoMoreTurns(t, p, 0)
	})

	// 4. Allow with updatedPermissions (the addRules suggestion, destination
	// "session"): the same command in a later turn runs without asking, and
	// nothing is written to the project's settings. A plain allow asks again
	// next time.
	t.Run("4_allow_for_session", func(t *testing.T) {
		t.Parallel()
		api := fakeapi.StartAnthropic(t,
			fakeapi.ToolUse("Bash", map[string]any{"command": "touch five.txt", "description": "touch"}), fakeapi.Text("One."),
			fakeapi.ToolUse("Bash", map[string]any{"command": "touch five.txt", "description": "touch"}), fakeapi.Text("Two."),
			fakeapi.ToolUse("Bash", map[string]any{"command": "touch six.txt", "description": "touch"}), fakeapi.Text("Three."),
			fakeapi.ToolUse("Bash", map[string]any{"command": "touch six.txt", "description": "touch"}), fakeapi.Text("Four."))
		p := startCC(t, api, "", ccApprovals...)
		facts.keep(t, p)
		p.user("First.")
		req, _ := p.until("can_use_tool", ccIsControl("can_use_tool"))
		inner := req.m["request"].(map[string]any)
		var perms []any
		for _, s := range inner["permission_suggestions"].([]any) {
			if s := s.(map[string]any); s["type"] == "addRules" {
				c := map[string]any{}
				for k, v := range s {
					c[k] = v
				}
				c["destination"] = "session"
				perms = append(perms, c)
			}
		}
		b, _ := json.Marshal(perms)
		if want := `[{"behavior":"allow","destination":"session","rules":[{"ruleContent":"touch five.txt","toolName":"Bash"}],"type":"addRules"}]`; string(b) != want {
			t.Errorf("updatedPermissions = %s, want %s", b, want)
		}
		p.send(ccAllow(req.m, map[string]any{"updatedPermissions": perms}))
		r1, _ := p.until("result 1", ccIsType("result"))
		ccCheckResult(t, r1.m, "success", "One.", "completed", 0)
		p.user("Second.")
		l, s2 := p.until("result 2 (or a request)", func(m map[string]any) bool { return m["type"] == "result" || m["type"] == "control_request" })
		if l.m["type"] != "result" || ccIndex(s2, ccIsToolResult) < 0 {
			t.Fatalf("the same command was asked for again:\n%s", ccSummary(s2))
		}
		ccCheckResult(t, l.m, "success", "Two.", "completed", 1)
		p.user("Third.")
		req, _ = p.until("can_use_tool 3", ccIsControl("can_use_tool"))
		p.send(ccAllow(req.m, nil))
		p.until("result 3", ccIsType("result"))
		p.user("Fourth.")
		l, _ = p.until("result 4 (or a request)", func(m map[string]any) bool { return m["type"] == "result" || m["type"] == "control_request" })
		if !ccIsControl("can_use_tool")(l.m) {
			t.Fatalf("after a plain allow the same command was not asked for again: %s", l.text)
		}
		p.send(ccAllow(l.m, nil))
		r4, _ := p.until("result 4", ccIsType("result"))
		ccCheckResult(t, r4.m, "success", "Four.", "completed", 3)
		for _, f := range []string{filepath.Join(p.dir, ".claude"), filepath.Join(p.home, ".claude", "settings.json"), filepath.Join(p.home, ".claude", "settings.local.json")} {
			if _, err := os.Stat(f); err == nil {
				t.Errorf("%s was written", f)
			}
		}
		ccNoMoreTurns(t, p, 0)
	})

	// 5. set_model between turns: claude first checks the model with a
	// one-token request, then answers; later model calls use it. An
	// unknown model (the check gets a 404) is refused and the model stays.
	// set_permission_mode acceptEdits: answered, announced with a
	// system/status line, and a Write in the next turn is not asked for.
	t.Run("5_set_model_and_permission_mode", func(t *testing.T) {
		t.Parallel()
		api := fakeapi.StartAnthropic(t)
		p := startCC(t, api, "", ccApprovals...)
		facts.keep(t, p)
		// A content long enough that the fake's cut of the input JSON in two
		// falls in it, not in the path (which the recording rewrites).
		content := strings.Repeat("seven\n", 40)
		api.Add(fakeapi.Text("One."), fakeapi.Text("Two."),
			fakeapi.ToolUse("Write", map[string]any{"file_path": filepath.Join(p.dir, "seven.md"), "content": content}), fakeapi.Text("Three."))
		p.user("First.")
		p.until("result 1", ccIsType("result"))
		p.send(map[string]any{"type": "control_request", "request_id": "m1", "request": map[string]any{"subtype": "set_model", "model": "claude-other-model"}})
		l, s := p.until("set_model response", ccIsType("control_response"))
		// Even without --replay-user-messages, a replayed "user" line comes
		// first, saying what the command did.
		if len(s) != 2 || !ccIsReplay("<local-command-stdout>Set model to `claude-other-model`</local-command-stdout>")(s[0].m) {
			t.Errorf("lines up to the set_model response:\n%s", ccSummary(s))
		}
		ccSameJSON(t, "set_model response", l.text,
			`{"type":"control_response","response":{"subtype":"success","request_id":"m1","response":{"model":"claude-other-model"}}}`)
		reqs := api.Requests()
		if len(reqs) != 2 || reqs[1].Kind != fakeapi.Helper || reqs[1].Model() != "claude-other-model" || reqs[1].MaxTokens() != 1 ||
			reqs[1].Prompt() != "Hi" || reqs[1].Stream() {
			t.Errorf("requests before the set_model response:\n%s", api.Summary())
		}
		p.user("Second.")
		_, s2 := p.until("result 2", ccIsType("result"))
		if i := ccIndex(s2, func(m map[string]any) bool { return m["subtype"] == "init" }); i < 0 || s2[i].m["model"] != "claude-other-model" {
			t.Errorf("turn 2's system/init does not name the new model")
		}
		if m := api.MainRequests(); len(m) != 2 || m[0].Model() != "claude-opus-5-5" || m[1].Model() != "claude-other-model" {
			t.Errorf("main requests:\n%s", api.Summary())
		}
		// The model is told: the /model command, as local-command blocks
		// before the next user text, and a system message after it.
		if msgs := api.MainRequests()[1].Messages(); len(msgs) == 5 {
			got := ccTexts(msgs[3])
			want := []string{"text:<local-command-caveat>The command below was run directly in Claude Code, not sent to you as a " +
				"request, and its output goes straight to the user. It's recorded here as context for later messages.</local-command-caveat>\n",
				"text:<command-name>/model</command-name>\n            <command-message>model</command-message>\n            " +
					"<command-args>claude-other-model</command-args>\n",
				"text:<local-command-stdout>Set model to `claude-other-model`</local-command-stdout>\n", "text:Second."}
			if msgs[3].Role != "user" || len(got) < 4 || !reflect.DeepEqual(got[len(got)-4:], want) {
				t.Errorf("the user message after set_model = %q\nwant it to end %q", got, want)
			}
			if msgs[4].Role != "system" || msgs[4].Text != "You are powered by the model claude-other-model." {
				t.Errorf("last message %s %q", msgs[4].Role, msgs[4].Text)
			}
		} else {
			t.Errorf("the call after set_model has %d messages, want 5:\n%s", len(msgs), ccDumpMessages(api.MainRequests()[1]))
		}

		p.send(map[string]any{"type": "control_request", "request_id": "pm1", "request": map[string]any{"subtype": "set_permission_mode", "mode": "acceptEdits"}})
		l, _ = p.until("set_permission_mode response", ccIsType("control_response"))
		ccSameJSON(t, "set_permission_mode response", l.text,
			`{"type":"control_response","response":{"subtype":"success","request_id":"pm1","response":{"mode":"acceptEdits"}}}`)
		st, _ := p.until("system/status", ccIsType("system"))
		if st.m["subtype"] != "status" || st.m["status"] != nil || st.m["permissionMode"] != "acceptEdits" {
			t.Errorf("after set_permission_mode: %s", st.text)
		}
		p.user("Third.")
		l, s3 := p.until("result 3 (or a request)", func(m map[string]any) bool { return m["type"] == "result" || m["type"] == "control_request" })
		if l.m["type"] != "result" {
			t.Fatalf("the Write was asked for in acceptEdits: %s", l.text)
		}
		if i := ccIndex(s3, func(m map[string]any) bool { return m["subtype"] == "init" }); i < 0 || s3[i].m["permissionMode"] != "acceptEdits" {
			t.Errorf("turn 3's system/init does not say acceptEdits")
		}
		if _, err := os.Stat(filepath.Join(p.dir, "seven.md")); err != nil {
			t.Errorf("the Write did not run: %v", err)
		}

		api.SetIsMain(func(r fakeapi.Request) bool { return fakeapi.IsMain(r) || r.MaxTokens() == 1 })
		api.Add(fakeapi.Error(404, "model: claude-bad-model"), fakeapi.Text("Four."))
		p.send(map[string]any{"type": "control_request", "request_id": "m2", "request": map[string]any{"subtype": "set_model", "model": "claude-bad-model"}})
		l, _ = p.until("set_model response 2", ccIsType("control_response"))
		ccSameJSON(t, "set_model response for an unknown model", l.text,
			`{"type":"control_response","response":{"subtype":"error","request_id":"m2","error":"Model 'claude-bad-model' not found","error_code":"not_found","model":"claude-other-model"}}`)
		p.user("Fourth.")
		p.until("result 4", ccIsType("result"))
		if m := api.MainRequests(); m[len(m)-1].Model() != "claude-other-model" {
			t.Errorf("after the refused set_model the model is %s", m[len(m)-1].Model())
		}
		ccNoMoreTurns(t, p, 0)
	})

	// 6. --append-system-prompt-file is read once, at start: deleted after
	// the first turn, the second turn still works and still carries its
	// text; rewritten, the third turn still carries the first text.
	t.Run("6_append_system_prompt_file", func(t *testing.T) {
		t.Parallel()
		home := t.TempDir()
		file := filepath.Join(home, "system-prompt.md")
		if err := os.WriteFile(file, []byte("# Identity\nYou are Tova. PERSONA-V1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		api := fakeapi.StartAnthropic(t, fakeapi.Text("One."), fakeapi.Text("Two."), fakeapi.Text("Three."))
		p := startCC(t, api, home, "--append-system-prompt-file", file)
		facts.keep(t, p)
		p.user("First.")
		p.until("result 1", ccIsType("result"))
		os.Remove(file)
		p.note("# (system-prompt.md deleted)")
		p.user("Second.")
		r2, _ := p.until("result 2", ccIsType("result"))
		ccCheckResult(t, r2.m, "success", "Two.", "completed", 1)
		os.WriteFile(file, []byte("# Identity\nYou are Tova. PERSONA-V2\n"), 0o644)
		p.note("# (system-prompt.md written again, PERSONA-V2)")
		p.user("Third.")
		p.until("result 3", ccIsType("result"))
		for i, r := range api.MainRequests() {
			if !strings.Contains(r.System(), "PERSONA-V1") || strings.Contains(r.System(), "PERSONA-V2") {
				t.Errorf("call %d: system has V1 %v, V2 %v; want V1 only", i, strings.Contains(r.System(), "PERSONA-V1"), strings.Contains(r.System(), "PERSONA-V2"))
			}
		}
		ccNoMoreTurns(t, p, 0)
	})

	// 7. --max-turns counts per user turn, not per process: two turns of a
	// tool call and a text (2 model calls each) both succeed under
	// --max-turns 2, and a third of 3 calls stops with error_max_turns.
	// With that error the last result, the process exits 1 when stdin
	// closes (2 and 3 end with a success after earlier errors: exit 0).
	t.Run("7_max_turns", func(t *testing.T) {
		t.Parallel()
		api := fakeapi.StartAnthropic(t)
		p := startCC(t, api, "", "--max-turns", "2")
		facts.keep(t, p)
		// echo is not asked for in default mode.
		echo := fakeapi.ToolUse("Bash", map[string]any{"command": "echo hi", "description": "say hi"})
		api.Add(echo, fakeapi.Text("One."), echo, fakeapi.Text("Two."), echo, echo, fakeapi.Text("Never asked for."))
		for i, want := range []string{"One.", "Two."} {
			p.user(fmt.Sprintf("Turn %d.", i+1))
			r, _ := p.until("result", ccIsType("result"))
			ccCheckResult(t, r.m, "success", want, "completed", i)
			if r.m["num_turns"] != float64(2) {
				t.Errorf("num_turns = %v, want 2", r.m["num_turns"])
			}
		}
		p.user("Turn 3.")
		r, _ := p.until("result 3", ccIsType("result"))
		ccCheckResult(t, r.m, "error_max_turns", "", "max_turns", 2)
		if errs, _ := json.Marshal(r.m["errors"]); string(errs) != `["Reached maximum number of turns (2)"]` || r.m["num_turns"] != float64(3) {
			t.Errorf("errors %s num_turns %v", errs, r.m["num_turns"])
		}
		if n := len(api.MainRequests()); n != 6 {
			t.Errorf("%d model calls, want 6", n)
		}
		// The last result was an error: the exit status after stdin closes is 1.
		ccNoMoreTurns(t, p, 1)
	})

	// 9. stdin closed while a turn runs: claude finishes the turn, prints
	// its result, then exits 0.
	t.Run("9_stdin_closed_mid_turn", func(t *testing.T) {
		t.Parallel()
		gate := make(chan struct{})
		api := fakeapi.StartAnthropic(t, fakeapi.Turn{Text: "Finished.", Gate: gate})
		p := startCC(t, api, "")
		facts.keep(t, p)
		p.user("First.")
		ccWaitMain(t, api, 1)
		p.stdin.Close()
		p.note("# (stdin closed)")
		during := p.quiet(1500 * time.Millisecond)
		if p.isClosed() || len(during) != 2 {
			t.Errorf("1.5 s after stdin closed: exited %v, lines %v", p.isClosed(), ccKinds(during))
		}
		p.note("# (the model call answers now)")
		close(gate)
		rest, err := p.closeAndWait()
		if i := ccIndex(rest, ccIsType("result")); i < 0 {
			t.Errorf("no result after stdin closed:\n%s", ccSummary(rest))
		} else {
			ccCheckResult(t, rest[i].m, "success", "Finished.", "completed", 0)
		}
		if err != nil {
			t.Errorf("exit: %v", err)
		}
	})

	// 9b. The exit status follows the last result: a process whose last
	// turn was interrupted exits 1 when stdin closes.
	t.Run("9b_exit_status_after_interrupted_turn", func(t *testing.T) {
		t.Parallel()
		api := fakeapi.StartAnthropic(t, fakeapi.Text("One."), fakeapi.Hang())
		p := startCC(t, api, "")
		facts.keep(t, p)
		p.user("First.")
		p.until("result 1", ccIsType("result"))
		p.user("Second.")
		ccWaitMain(t, api, 2)
		p.send(ccInterrupt("int-9"))
		r, _ := p.until("result 2", ccIsType("result"))
		ccCheckResult(t, r.m, "error_during_execution", "", "aborted_streaming", 1)
		ccNoMoreTurns(t, p, 1)
	})
}

// TestConformanceClaudeInteractiveFactsTiming logs the time from writing a
// user message to the first stdout line of its turn (system/init): for a
// cold process (spawned, message written at once, measured from the spawn),
// for a process spawned ahead and left idle for a second before its first
// message, and for a warm process's second turn.
func TestConformanceClaudeInteractiveFactsTiming(t *testing.T) {
	const n = 5
	var cold, coldResult, idle, warm, warmResult []time.Duration
	firstLine := func(p *ccProc) ccLine {
		t.Helper()
		l, ok := p.next(30 * time.Second)
		if !ok || l.m["type"] != "system" || l.m["subtype"] != "init" {
			t.Fatalf("a turn's first line: %s, want system/init", l.text)
		}
		return l
	}
	for range n {
		api := fakeapi.StartAnthropic(t, fakeapi.Text("One."), fakeapi.Text("Two."))
		p := startCC(t, api, "")
		p.user("First.")
		first := firstLine(p)
		r, _ := p.until("result 1", ccIsType("result"))
		cold, coldResult = append(cold, first.at.Sub(p.started)), append(coldResult, r.at.Sub(p.started))
		at := p.user("Second.")
		first = firstLine(p)
		r, _ = p.until("result 2", ccIsType("result"))
		warm, warmResult = append(warm, first.at.Sub(at)), append(warmResult, r.at.Sub(at))
		p.closeAndWait()

		api = fakeapi.StartAnthropic(t, fakeapi.Text("One."))
		p = startCC(t, api, "")
		if early := p.quiet(time.Second); len(early) > 0 {
			t.Errorf("an idle process printed %v before any message", ccKinds(early))
		}
		at = p.user("First.")
		idle = append(idle, firstLine(p).at.Sub(at))
		p.until("result", ccIsType("result"))
		p.closeAndWait()
	}
	median := func(ds []time.Duration) time.Duration {
		s := append([]time.Duration(nil), ds...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return s[len(s)/2]
	}
	t.Logf("cold (spawn to first line): median %v %v; to result: median %v", median(cold), cold, median(coldResult))
	t.Logf("spawned 1 s ahead (write to first line): median %v %v", median(idle), idle)
	t.Logf("warm second turn (write to first line): median %v %v; to result: median %v", median(warm), warm, median(warmResult))
	if median(cold) > 20*time.Second || median(idle) > 10*time.Second || median(warm) > 10*time.Second {
		t.Errorf("implausibly slow: cold %v, idle %v, warm %v", median(cold), median(idle), median(warm))
	}
}
