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
			p.t.Fatalf("timeout waiting for %s; seen:\n%s", what, summarize(seen))
		}
		l, ok := p.next(left)
		if !ok {
			if p.isClosed() {
				p.t.Fatalf("stdout closed waiting for %s; seen:\n%s", what, summarize(seen))
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

var socketPath = regexp.MustCompile(`"messaging_socket_path":"[^"]*"`)

// record is the log with paths rewritten.
func (p *ccProc) record() string {
	p.mu.Lock()
	s := p.log.String()
	p.mu.Unlock()
	s = socketPath.ReplaceAllString(s, `"messaging_socket_path":"/tmp/cc-socks/PID.sock"`)
	s = strings.ReplaceAll(s, p.dir, "/WORK_DIR")
	s = strings.ReplaceAll(s, p.home, "/HOME_DIR")
	s = strings.ReplaceAll(s, strings.TrimPrefix(p.apiURL, "http://"), "127.0.0.1:PORT")
	return s
}

// summarize is one short line per stdout line, for failure messages and logs.
func summarize(ls []ccLine) string {
	var b strings.Builder
	for _, l := range ls {
		b.WriteString("  " + short(l.m, l.text) + "\n")
	}
	return b.String()
}

func short(m map[string]any, raw string) string {
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

func isType(typ string) func(map[string]any) bool {
	return func(m map[string]any) bool { return m["type"] == typ }
}

func isControl(subtype string) func(map[string]any) bool {
	return func(m map[string]any) bool {
		r, _ := m["request"].(map[string]any)
		return m["type"] == "control_request" && r["subtype"] == subtype
	}
}

func allow(req map[string]any, extra map[string]any) map[string]any {
	inner, _ := req["request"].(map[string]any)
	resp := map[string]any{"behavior": "allow", "updatedInput": inner["input"]}
	for k, v := range extra {
		resp[k] = v
	}
	return map[string]any{"type": "control_response", "response": map[string]any{"subtype": "success",
		"request_id": req["request_id"], "response": resp}}
}

func deny(req map[string]any, message string, interrupt bool) map[string]any {
	return map[string]any{"type": "control_response", "response": map[string]any{"subtype": "success",
		"request_id": req["request_id"], "response": map[string]any{"behavior": "deny", "message": message, "interrupt": interrupt}}}
}

func ofType(ls []ccLine, typ string) []map[string]any {
	var out []map[string]any
	for _, l := range ls {
		if l.m != nil && l.m["type"] == typ {
			out = append(out, l.m)
		}
	}
	return out
}

func waitMain(t *testing.T, api *fakeapi.Anthropic, n int) []fakeapi.Request {
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
func dumpMessages(r fakeapi.Request) string {
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
type factsLog struct {
	mu       sync.Mutex
	sections map[string]string
}

func (f *factsLog) add(name, text string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sections[name] = text
}

func (f *factsLog) write(t *testing.T) {
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

func TestConformanceClaudeInteractiveFacts(t *testing.T) {
	facts := &factsLog{sections: map[string]string{}}
	t.Run("group", func(t *testing.T) {
		t.Run("1a_steer_while_model_call_runs", func(t *testing.T) {
			t.Parallel()
			gate := make(chan struct{})
			api := fakeapi.StartAnthropic(t, fakeapi.Turn{Text: "First answer.", Gate: gate}, fakeapi.Text("Second answer."), fakeapi.Text("Third answer."))
			p := startCC(t, api, "", "--replay-user-messages")
			defer func() { facts.add(t.Name(), p.record()) }()
			p.user("First.")
			waitMain(t, api, 1)
			p.user("Second.")
			seen := p.quiet(1500 * time.Millisecond)
			t.Logf("before the first call answers:\n%s", summarize(seen))
			close(gate)
			_, s1 := p.until("result 1", isType("result"))
			t.Logf("to result 1:\n%s", summarize(s1))
			more := p.quiet(3 * time.Second)
			t.Logf("after:\n%s", summarize(more))
			for _, r := range api.MainRequests() {
				t.Logf("request %d:\n%s", r.Seq, dumpMessages(r))
			}
			rest, err := p.closeAndWait()
			t.Logf("rest after close (%v):\n%s", err, summarize(rest))
		})
		t.Run("1b_steer_while_approval_pending", func(t *testing.T) {
			t.Parallel()
			api := fakeapi.StartAnthropic(t, fakeapi.ToolUse("Bash", map[string]any{"command": "touch one.txt", "description": "touch"}),
				fakeapi.Text("Touched."), fakeapi.Text("Second answer."), fakeapi.Text("Third answer."))
			p := startCC(t, api, "", append([]string{"--replay-user-messages"}, ccApprovals...)...)
			defer func() { facts.add(t.Name(), p.record()) }()
			p.user("First.")
			req, _ := p.until("can_use_tool", isControl("can_use_tool"))
			p.user("Second.")
			seen := p.quiet(1500 * time.Millisecond)
			t.Logf("before the answer:\n%s", summarize(seen))
			p.send(allow(req.m, nil))
			_, s1 := p.until("result 1", isType("result"))
			t.Logf("to result 1:\n%s", summarize(s1))
			more := p.quiet(3 * time.Second)
			t.Logf("after:\n%s", summarize(more))
			for _, r := range api.MainRequests() {
				t.Logf("request %d:\n%s", r.Seq, dumpMessages(r))
			}
			rest, err := p.closeAndWait()
			t.Logf("rest after close (%v):\n%s", err, summarize(rest))
		})
		t.Run("1c_steer_while_tool_runs", func(t *testing.T) {
			t.Parallel()
			api := fakeapi.StartAnthropic(t, fakeapi.ToolUse("Bash", map[string]any{"command": "sleep 3", "description": "wait"}),
				fakeapi.Text("Slept."), fakeapi.Text("Second answer."), fakeapi.Text("Third answer."))
			p := startCC(t, api, "", "--replay-user-messages", "--allowedTools", "Bash")
			defer func() { facts.add(t.Name(), p.record()) }()
			p.user("First.")
			p.until("the tool call", func(m map[string]any) bool {
				return m["type"] == "assistant" && strings.Contains(fmt.Sprint(m["message"]), "tool_use")
			})
			p.quiet(700 * time.Millisecond)
			p.user("Second.")
			_, s1 := p.until("result 1", isType("result"))
			t.Logf("to result 1:\n%s", summarize(s1))
			more := p.quiet(3 * time.Second)
			t.Logf("after:\n%s", summarize(more))
			for _, r := range api.MainRequests() {
				t.Logf("request %d:\n%s", r.Seq, dumpMessages(r))
			}
			rest, err := p.closeAndWait()
			t.Logf("rest after close (%v):\n%s", err, summarize(rest))
		})
		t.Run("1d_steer_then_interrupt", func(t *testing.T) {
			t.Parallel()
			api := fakeapi.StartAnthropic(t, fakeapi.Hang(), fakeapi.Text("Second answer."), fakeapi.Text("Third answer."))
			p := startCC(t, api, "", "--replay-user-messages")
			defer func() { facts.add(t.Name(), p.record()) }()
			p.user("First.")
			waitMain(t, api, 1)
			p.user("Second.")
			seen := p.quiet(1500 * time.Millisecond)
			t.Logf("during the hang:\n%s", summarize(seen))
			p.send(map[string]any{"type": "control_request", "request_id": "int-1", "request": map[string]any{"subtype": "interrupt"}})
			_, s1 := p.until("result 1", isType("result"))
			t.Logf("to result 1:\n%s", summarize(s1))
			more := p.quiet(3 * time.Second)
			t.Logf("after:\n%s", summarize(more))
			for _, r := range api.MainRequests() {
				t.Logf("request %d:\n%s", r.Seq, dumpMessages(r))
			}
			rest, err := p.closeAndWait()
			t.Logf("rest after close (%v):\n%s", err, summarize(rest))
		})
		t.Run("2_interrupt_while_approval_pending", func(t *testing.T) {
			t.Parallel()
			api := fakeapi.StartAnthropic(t, fakeapi.ToolUse("Bash", map[string]any{"command": "touch two.txt", "description": "touch"}),
				fakeapi.Text("Next turn."), fakeapi.Text("Third answer."))
			p := startCC(t, api, "", ccApprovals...)
			defer func() { facts.add(t.Name(), p.record()) }()
			p.user("First.")
			req, _ := p.until("can_use_tool", isControl("can_use_tool"))
			p.send(map[string]any{"type": "control_request", "request_id": "int-2", "request": map[string]any{"subtype": "interrupt"}})
			_, s1 := p.until("result 1", isType("result"))
			t.Logf("to result 1:\n%s", summarize(s1))
			more := p.quiet(1500 * time.Millisecond)
			t.Logf("after:\n%s", summarize(more))
			p.send(allow(req.m, nil))
			more = p.quiet(1500 * time.Millisecond)
			t.Logf("after the late answer:\n%s", summarize(more))
			if _, err := os.Stat(filepath.Join(p.dir, "two.txt")); err == nil {
				t.Logf("two.txt exists")
			}
			p.user("Again.")
			_, s2 := p.until("result 2", isType("result"))
			t.Logf("to result 2:\n%s", summarize(s2))
			for _, r := range api.MainRequests() {
				t.Logf("request %d:\n%s", r.Seq, dumpMessages(r))
			}
			rest, err := p.closeAndWait()
			t.Logf("rest after close (%v):\n%s", err, summarize(rest))
		})
		t.Run("3_deny", func(t *testing.T) {
			t.Parallel()
			api := fakeapi.StartAnthropic(t,
				fakeapi.ToolUse("Bash", map[string]any{"command": "touch three.txt", "description": "touch"}), fakeapi.Text("Understood."),
				fakeapi.ToolUse("Bash", map[string]any{"command": "touch four.txt", "description": "touch"}), fakeapi.Text("Not asked for."),
				fakeapi.Text("Third answer."))
			p := startCC(t, api, "", ccApprovals...)
			defer func() { facts.add(t.Name(), p.record()) }()
			p.user("First.")
			req, _ := p.until("can_use_tool", isControl("can_use_tool"))
			p.send(deny(req.m, "The user is away.", false))
			_, s1 := p.until("result 1", isType("result"))
			t.Logf("to result 1:\n%s", summarize(s1))
			p.user("Second.")
			req, _ = p.until("can_use_tool 2", isControl("can_use_tool"))
			at := p.send(deny(req.m, "The user is away.", true))
			l, s2 := p.until("result 2", isType("result"))
			t.Logf("to result 2 (%v):\n%s", l.at.Sub(at), summarize(s2))
			p.user("Third.")
			_, s3 := p.until("result 3", isType("result"))
			t.Logf("to result 3:\n%s", summarize(s3))
			for _, r := range api.MainRequests() {
				t.Logf("request %d:\n%s", r.Seq, dumpMessages(r))
			}
			rest, err := p.closeAndWait()
			t.Logf("rest after close (%v):\n%s", err, summarize(rest))
		})
		t.Run("4_allow_for_session", func(t *testing.T) {
			t.Parallel()
			api := fakeapi.StartAnthropic(t,
				fakeapi.ToolUse("Bash", map[string]any{"command": "touch five.txt", "description": "touch"}), fakeapi.Text("One."),
				fakeapi.ToolUse("Bash", map[string]any{"command": "touch five.txt", "description": "touch"}), fakeapi.Text("Two."),
				fakeapi.ToolUse("Bash", map[string]any{"command": "touch six.txt", "description": "touch"}), fakeapi.Text("Three."),
				fakeapi.ToolUse("Bash", map[string]any{"command": "touch six.txt", "description": "touch"}), fakeapi.Text("Four."))
			p := startCC(t, api, "", ccApprovals...)
			defer func() { facts.add(t.Name(), p.record()) }()
			p.user("First.")
			req, _ := p.until("can_use_tool", isControl("can_use_tool"))
			inner := req.m["request"].(map[string]any)
			var perms []any
			for _, s := range inner["permission_suggestions"].([]any) {
				s := s.(map[string]any)
				if s["type"] == "addRules" {
					c := map[string]any{}
					for k, v := range s {
						c[k] = v
					}
					c["destination"] = "session"
					perms = append(perms, c)
				}
			}
			p.send(allow(req.m, map[string]any{"updatedPermissions": perms}))
			_, s1 := p.until("result 1", isType("result"))
			t.Logf("to result 1:\n%s", summarize(s1))
			p.user("Second.")
			_, s2 := p.until("result 2 or a request", func(m map[string]any) bool { return m["type"] == "result" || m["type"] == "control_request" })
			t.Logf("to result 2:\n%s", summarize(s2))
			p.user("Third.")
			req, _ = p.until("can_use_tool 3", isControl("can_use_tool"))
			p.send(allow(req.m, nil))
			_, s3 := p.until("result 3", isType("result"))
			t.Logf("to result 3:\n%s", summarize(s3))
			p.user("Fourth.")
			l, s4 := p.until("result 4 or a request", func(m map[string]any) bool { return m["type"] == "result" || m["type"] == "control_request" })
			t.Logf("to result 4:\n%s", summarize(s4))
			if l.m["type"] == "control_request" {
				p.send(allow(l.m, nil))
				p.until("result 4", isType("result"))
			}
			entries, _ := os.ReadDir(filepath.Join(p.dir, ".claude"))
			t.Logf("workdir .claude: %v", entries)
			rest, err := p.closeAndWait()
			t.Logf("rest after close (%v):\n%s", err, summarize(rest))
		})
		t.Run("5_set_model_and_permission_mode", func(t *testing.T) {
			t.Parallel()
			api := fakeapi.StartAnthropic(t)
			p := startCC(t, api, "", ccApprovals...)
			api.Add(fakeapi.Text("One."), fakeapi.Text("Two."),
				fakeapi.ToolUse("Write", map[string]any{"file_path": filepath.Join(p.dir, "seven.md"), "content": "seven\n"}), fakeapi.Text("Three."))
			defer func() { facts.add(t.Name(), p.record()) }()
			p.user("First.")
			p.until("result 1", isType("result"))
			p.send(map[string]any{"type": "control_request", "request_id": "m1", "request": map[string]any{"subtype": "set_model", "model": "claude-other-model"}})
			l, _ := p.until("set_model response", isType("control_response"))
			t.Logf("set_model response: %s; requests so far %d", l.text, len(api.Requests()))
			p.user("Second.")
			_, s2 := p.until("result 2", isType("result"))
			t.Logf("to result 2:\n%s", summarize(s2))
			p.send(map[string]any{"type": "control_request", "request_id": "pm1", "request": map[string]any{"subtype": "set_permission_mode", "mode": "acceptEdits"}})
			l, _ = p.until("set_permission_mode response", isType("control_response"))
			t.Logf("set_permission_mode response: %s", l.text)
			p.user("Third.")
			l, s3 := p.until("result 3 or a request", func(m map[string]any) bool { return m["type"] == "result" || m["type"] == "control_request" })
			t.Logf("to result 3:\n%s", summarize(s3))
			for _, x := range s3 {
				if x.m["subtype"] == "init" {
					t.Logf("init 3 model=%v permissionMode=%v", x.m["model"], x.m["permissionMode"])
				}
			}
			for _, x := range s2 {
				if x.m["subtype"] == "init" {
					t.Logf("init 2 model=%v permissionMode=%v", x.m["model"], x.m["permissionMode"])
				}
			}
			if _, err := os.Stat(filepath.Join(p.dir, "seven.md")); err == nil {
				t.Logf("seven.md exists")
			}
			for _, r := range api.Requests() {
				t.Logf("request %d: %s %s %s model %s", r.Seq, r.Kind, r.Method, r.Path, r.Model())
				if r.Kind == fakeapi.Helper {
					t.Logf("helper body: %s", r.Body)
				}
			}
			api.SetIsMain(func(r fakeapi.Request) bool { return fakeapi.IsMain(r) || r.MaxTokens() == 1 })
			api.Add(fakeapi.Error(404, "model: claude-bad-model"), fakeapi.Text("Four."))
			p.send(map[string]any{"type": "control_request", "request_id": "m2", "request": map[string]any{"subtype": "set_model", "model": "claude-bad-model"}})
			l, _ = p.until("set_model response 2", isType("control_response"))
			t.Logf("set_model bad response: %s; requests so far %d", l.text, len(api.Requests()))
			p.user("Fourth.")
			_, s4 := p.until("result 4", isType("result"))
			t.Logf("to result 4:\n%s", summarize(s4))
			for _, r := range api.Requests()[5:] {
				t.Logf("request %d: %s %s %s model %s turn %d", r.Seq, r.Kind, r.Method, r.Path, r.Model(), r.Turn)
			}
			rest, err := p.closeAndWait()
			t.Logf("rest after close (%v):\n%s", err, summarize(rest))
		})
		t.Run("6_append_system_prompt_file", func(t *testing.T) {
			t.Parallel()
			home := t.TempDir()
			file := filepath.Join(home, "system-prompt.md")
			os.WriteFile(file, []byte("# Identity\nYou are Tova. PERSONA-V1\n"), 0o644)
			api := fakeapi.StartAnthropic(t, fakeapi.Text("One."), fakeapi.Text("Two."), fakeapi.Text("Three."))
			p := startCC(t, api, home, "--append-system-prompt-file", file)
			defer func() { facts.add(t.Name(), p.record()) }()
			p.user("First.")
			p.until("result 1", isType("result"))
			os.Remove(file)
			p.user("Second.")
			_, s2 := p.until("result 2", isType("result"))
			t.Logf("to result 2:\n%s", summarize(s2))
			os.WriteFile(file, []byte("# Identity\nYou are Tova. PERSONA-V2\n"), 0o644)
			p.user("Third.")
			p.until("result 3", isType("result"))
			for _, r := range api.MainRequests() {
				t.Logf("request %d: V1 %v V2 %v", r.Seq, strings.Contains(r.System(), "PERSONA-V1"), strings.Contains(r.System(), "PERSONA-V2"))
			}
			rest, err := p.closeAndWait()
			t.Logf("rest after close (%v):\n%s", err, summarize(rest))
		})
		t.Run("7_max_turns", func(t *testing.T) {
			t.Parallel()
			api := fakeapi.StartAnthropic(t)
			p := startCC(t, api, "", "--max-turns", "2")
			notes := filepath.Join(p.dir, "notes.md")
			api.Add(fakeapi.ToolUse("Read", map[string]any{"file_path": notes}), fakeapi.Text("One."),
				fakeapi.ToolUse("Read", map[string]any{"file_path": notes}), fakeapi.Text("Two."),
				fakeapi.Text("Three."))
			defer func() { facts.add(t.Name(), p.record()) }()
			os.WriteFile(filepath.Join(p.dir, "notes.md"), []byte("notes\n"), 0o644)
			p.user("First.")
			_, s1 := p.until("result 1", isType("result"))
			t.Logf("to result 1:\n%s", summarize(s1))
			p.user("Second.")
			_, s2 := p.until("result 2", isType("result"))
			t.Logf("to result 2:\n%s", summarize(s2))
			p.user("Third.")
			_, s3 := p.until("result 3", isType("result"))
			t.Logf("to result 3:\n%s", summarize(s3))
			rest, err := p.closeAndWait()
			t.Logf("rest after close (%v):\n%s", err, summarize(rest))
		})
		t.Run("9_stdin_closed_mid_turn", func(t *testing.T) {
			t.Parallel()
			gate := make(chan struct{})
			api := fakeapi.StartAnthropic(t, fakeapi.Turn{Text: "Finished.", Gate: gate})
			p := startCC(t, api, "")
			defer func() { facts.add(t.Name(), p.record()) }()
			p.user("First.")
			waitMain(t, api, 1)
			p.stdin.Close()
			p.note("(stdin closed)")
			seen := p.quiet(1500 * time.Millisecond)
			t.Logf("after close, before the answer (exited %v):\n%s", p.isClosed(), summarize(seen))
			close(gate)
			rest, err := p.closeAndWait()
			t.Logf("rest (%v):\n%s", err, summarize(rest))
		})
	})
	facts.write(t)
}
