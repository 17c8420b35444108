package backends

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// fakeInteractive is the fake CLI's stream-json input mode: it reads user
// turns and control messages from stdin as the real claude does
// (testdata/claude/interactive.txt) and answers each user turn with the
// next step of FAKE_CLAUDE_SCRIPT, a comma-separated list shared by every
// process of the test (the step count lives in FAKE_CLAUDE_DIR/steps):
//
//	text     init, a text delta, an assistant line, a result
//	ask      init, a can_use_tool request for Bash; the result says how it was answered
//	hang     init, then nothing until an interrupt request, answered with an aborted result
//	deaf     init, then nothing at all, interrupts included
//	die      init, then exit 3
//	cancel   like ask, but an interrupt withdraws the request (control_cancel_request)
//	slowtool init, a Bash tool_use, 600 ms of silence, its result, a result
//	steer    init, then waits for a user message written into the turn, echoes it and answers both
//
// Everything it reads and does is appended to FAKE_CLAUDE_DIR/log as
// "<pid> <what> <detail>" lines.
const fakeInteractive = "interactive"

func runFakeInteractive() int {
	dir := os.Getenv("FAKE_CLAUDE_DIR")
	pid := os.Getpid()
	logf := func(format string, args ...any) {
		f, err := os.OpenFile(filepath.Join(dir, "log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return
		}
		fmt.Fprintf(f, "%d %s\n", pid, fmt.Sprintf(format, args...))
		f.Close()
	}
	session, model := fmt.Sprintf("sess-%d", pid), "claude-fake"
	for i, a := range os.Args {
		if i+1 < len(os.Args) && a == "--resume" {
			session = os.Args[i+1]
		}
		if i+1 < len(os.Args) && a == "--model" {
			model = os.Args[i+1]
		}
	}
	logf("spawn %s", strings.Join(os.Args[1:], " "))
	script := strings.Split(os.Getenv("FAKE_CLAUDE_SCRIPT"), ",")

	var outMu sync.Mutex
	emit := func(v any) {
		b, _ := json.Marshal(v)
		outMu.Lock()
		os.Stdout.Write(append(b, '\n'))
		outMu.Unlock()
	}
	total := 0.0
	result := func(subtype, text string, isError bool) {
		total += 0.01
		emit(map[string]any{"type": "result", "subtype": subtype, "is_error": isError, "result": text,
			"session_id": session, "num_turns": 1, "total_cost_usd": total,
			"usage": map[string]any{"input_tokens": 100, "output_tokens": 10}})
	}
	nextStep := func() string {
		path := filepath.Join(dir, "steps")
		b, _ := os.ReadFile(path)
		n := len(b)
		os.WriteFile(path, append(b, '.'), 0o600)
		if n < len(script) {
			return script[n]
		}
		return "text"
	}

	lines := make(chan map[string]any)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) != nil {
				logf("garbage %s", sc.Text())
				continue
			}
			lines <- m
		}
		close(lines)
	}()
	// next reads stdin until a message the caller wants, answering
	// set_model requests on the way; ok is false at EOF.
	next := func() (map[string]any, bool) {
		for m := range lines {
			if m["type"] == "control_request" {
				req, _ := m["request"].(map[string]any)
				if req["subtype"] == "set_model" {
					model, _ = req["model"].(string)
					logf("set_model %s", model)
					emit(map[string]any{"type": "control_response", "response": map[string]any{"subtype": "success", "request_id": m["request_id"], "response": map[string]any{}}})
					continue
				}
			}
			return m, true
		}
		return nil, false
	}
	answerInterrupt := func(m map[string]any) {
		emit(map[string]any{"type": "control_response", "response": map[string]any{"subtype": "success", "request_id": m["request_id"], "response": map[string]any{"still_queued": []any{}}}})
	}
	isInterrupt := func(m map[string]any) bool {
		req, _ := m["request"].(map[string]any)
		return m["type"] == "control_request" && req["subtype"] == "interrupt"
	}
	for turn := 1; ; turn++ {
		m, ok := next()
		if !ok {
			logf("eof")
			return 0
		}
		if isInterrupt(m) {
			logf("interrupt idle")
			answerInterrupt(m)
			continue
		}
		if m["type"] != "user" {
			logf("unexpected %v", m["type"])
			continue
		}
		msg, _ := m["message"].(map[string]any)
		text, _ := msg["content"].(string)
		step := nextStep()
		logf("user %s %q", step, text)
		emit(map[string]any{"type": "system", "subtype": "init", "session_id": session, "model": model})
		replay := func(text string) {
			emit(map[string]any{"type": "user", "isReplay": true, "session_id": session, "message": map[string]any{"role": "user", "content": text}})
		}
		replay(text)
		switch step {
		case "steer":
			// Wait for a message written into the running turn, take it in
			// (echo it, as with a tool result), and answer both.
			for {
				a, ok := next()
				if !ok {
					logf("eof")
					return 0
				}
				if a["type"] == "user" {
					am, _ := a["message"].(map[string]any)
					steered, _ := am["content"].(string)
					logf("steered %q", steered)
					replay(steered)
					result("success", fmt.Sprintf("answered %q and %q", text, steered), false)
					break
				}
			}
		case "text":
			reply := fmt.Sprintf("reply %d from %d", turn, pid)
			emit(map[string]any{"type": "stream_event", "session_id": session, "parent_tool_use_id": nil,
				"event": map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": reply}}})
			result("success", reply, false)
		case "ask", "cancel":
			id := fmt.Sprintf("perm-%d-%d", pid, turn)
			emit(map[string]any{"type": "control_request", "request_id": id, "request": map[string]any{
				"subtype": "can_use_tool", "tool_name": "Bash", "input": map[string]any{"command": "touch approved.txt"},
				"permission_suggestions": []any{map[string]any{"type": "addRules", "rules": []any{map[string]any{"toolName": "Bash", "ruleContent": "touch approved.txt"}}, "behavior": "allow", "destination": "localSettings"}},
				"tool_use_id":            "toolu_1"}})
		wait:
			for {
				a, ok := next()
				if !ok {
					logf("eof")
					return 0
				}
				if isInterrupt(a) {
					logf("interrupt busy")
					answerInterrupt(a)
					if step == "cancel" {
						emit(map[string]any{"type": "control_cancel_request", "request_id": id})
					}
					result("error_during_execution", "", true)
					break
				}
				b, _ := json.Marshal(a)
				logf("answer %s", b)
				resp, _ := a["response"].(map[string]any)
				inner, _ := resp["response"].(map[string]any)
				switch {
				case a["type"] != "control_response" || resp["request_id"] != id:
					continue
				case inner["behavior"] == "allow":
					result("success", "allowed", false)
				case inner["interrupt"] == true:
					result("error_during_execution", "", true)
				default:
					result("success", fmt.Sprintf("denied: %v", inner["message"]), false)
				}
				break wait
			}
		case "hang":
			for {
				a, ok := next()
				if !ok {
					logf("eof")
					return 0
				}
				if isInterrupt(a) {
					logf("interrupt busy")
					answerInterrupt(a)
					result("error_during_execution", "", true)
					break
				}
			}
		case "slowtool":
			// A tool that runs quietly for a while, as a test suite does.
			emit(map[string]any{"type": "assistant", "session_id": session, "parent_tool_use_id": nil, "message": map[string]any{"id": "m1", "role": "assistant",
				"content": []any{map[string]any{"type": "tool_use", "id": "toolu_slow", "name": "Bash", "input": map[string]any{"command": "make test"}}}}})
			time.Sleep(600 * time.Millisecond)
			emit(map[string]any{"type": "user", "session_id": session, "parent_tool_use_id": nil, "message": map[string]any{"role": "user",
				"content": []any{map[string]any{"type": "tool_result", "tool_use_id": "toolu_slow", "content": "ok"}}}})
			result("success", "tests pass", false)
		case "deaf":
			logf("deaf")
			time.Sleep(time.Hour)
		case "die":
			fmt.Fprintln(os.Stderr, "fake: died")
			return 3
		}
	}
}
