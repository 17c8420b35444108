package backends

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// A fake `codex app-server` speaking the JSON-RPC recorded in
// testdata/codex/app_server_*.jsonl. fakeCLI(t, "codexapp",
// {"CODEXAPP": "1", "SCRIPT": …}) builds it; init runs it before TestMain.
// Each turn/start takes the next step of FAKE_CLAUDE_SCRIPT (a
// comma-separated list shared by every process of the test):
//
//	text   an agent message streamed as a delta, usage, turn/completed
//	cmd    a commandExecution item and its approval request; the answer is logged
//	patch  a fileChange item (an update) and its approval request
//	hang   a reasoning item, then nothing until turn/interrupt
//	deaf   a reasoning item, then nothing at all
//	steer  a reasoning item, then waits for turn/steer and answers it
//	die    exit 3
//
// With FAKE_CLAUDE_STARTERR it prints that on stderr and exits 1 at once.
// A thread/resume of fakeStaleThread is refused as codex refuses an
// unknown thread. Everything is logged to FAKE_CLAUDE_DIR/log as
// "<pid> <what> <detail>" lines.

const fakeStaleThread = "00000000-0000-7000-8000-999999999999"

func init() {
	if os.Getenv("FAKE_CLAUDE_CODEXAPP") != "" {
		os.Exit(runFakeCodexApp())
	}
}

func runFakeCodexApp() int {
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
	logf("spawn %s", strings.Join(os.Args[1:], " "))
	if msg := os.Getenv("FAKE_CLAUDE_STARTERR"); msg != "" {
		fmt.Fprintln(os.Stderr, msg)
		return 1
	}
	script := strings.Split(os.Getenv("FAKE_CLAUDE_SCRIPT"), ",")
	out := bufio.NewWriter(os.Stdout)
	send := func(v any) {
		b, _ := json.Marshal(v)
		out.Write(append(b, '\n'))
		out.Flush()
	}
	notify := func(method string, params map[string]any) { send(map[string]any{"method": method, "params": params}) }
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	type msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params map[string]any  `json:"params"`
		Result map[string]any  `json:"result"`
	}
	next := func() (msg, bool) {
		if !sc.Scan() {
			return msg{}, false
		}
		var m msg
		_ = json.Unmarshal(sc.Bytes(), &m)
		return m, true
	}
	threads := 0
	thread := ""
	turns := 0
	serverReq := 0
	for {
		m, ok := next()
		if !ok {
			logf("eof")
			return 0
		}
		str := func(k string) string { s, _ := m.Params[k].(string); return s }
		switch m.Method {
		case "initialize":
			send(map[string]any{"id": m.ID, "result": map[string]any{"userAgent": "fake"}})
		case "initialized":
		case "thread/start":
			threads++
			thread = fmt.Sprintf("00000000-0000-7000-8000-%06d%06d", pid%1000000, threads)
			logf("thread/start %s policy=%s sandbox=%s dev=%q", thread, str("approvalPolicy"), str("sandbox"), str("developerInstructions"))
			send(map[string]any{"id": m.ID, "result": map[string]any{"thread": map[string]any{"id": thread}, "model": "gpt-fake"}})
		case "thread/resume":
			logf("thread/resume %s", str("threadId"))
			if str("threadId") == fakeStaleThread {
				send(map[string]any{"id": m.ID, "error": map[string]any{"code": -32600, "message": "no rollout found for thread id " + fakeStaleThread}})
				continue
			}
			thread = str("threadId")
			send(map[string]any{"id": m.ID, "result": map[string]any{"thread": map[string]any{"id": thread}, "model": "gpt-fake"}})
		case "turn/interrupt":
			logf("turn/interrupt (idle)")
			send(map[string]any{"id": m.ID, "result": map[string]any{}})
		case "turn/start":
			turns++
			turn := fmt.Sprintf("turn-%d", turns)
			input, _ := m.Params["input"].([]any)
			text := ""
			if len(input) > 0 {
				first, _ := input[0].(map[string]any)
				text, _ = first["text"].(string)
			}
			logf("turn/start %s %q images=%d", str("threadId"), text, len(input)-1)
			send(map[string]any{"id": m.ID, "result": map[string]any{"turn": map[string]any{"id": turn, "status": "inProgress"}}})
			ids := map[string]any{"threadId": thread, "turnId": turn}
			with := func(extra map[string]any) map[string]any {
				p := map[string]any{}
				for k, v := range ids {
					p[k] = v
				}
				for k, v := range extra {
					p[k] = v
				}
				return p
			}
			notify("turn/started", map[string]any{"threadId": thread, "turn": map[string]any{"id": turn, "status": "inProgress"}})
			answer := func(msgText string) {
				item := map[string]any{"type": "agentMessage", "id": "msg-" + turn, "text": ""}
				notify("item/started", with(map[string]any{"item": item}))
				notify("item/agentMessage/delta", with(map[string]any{"itemId": "msg-" + turn, "delta": msgText}))
				item["text"] = msgText
				notify("item/completed", with(map[string]any{"item": item}))
				notify("thread/tokenUsage/updated", with(map[string]any{"tokenUsage": map[string]any{
					"last":               map[string]any{"inputTokens": 100, "cachedInputTokens": 20, "outputTokens": 10},
					"modelContextWindow": 1000,
				}}))
			}
			complete := func(status string) {
				notify("turn/completed", map[string]any{"threadId": thread, "turn": map[string]any{"id": turn, "status": status}})
			}
			ask := func(method string, item map[string]any, params map[string]any) {
				item["status"] = "inProgress"
				notify("item/started", with(map[string]any{"item": item}))
				serverReq++
				id := serverReq
				send(map[string]any{"id": id, "method": method, "params": with(params)})
				for {
					r, ok := next()
					if !ok {
						return
					}
					if r.Method == "" && string(r.ID) == strconv.Itoa(id) {
						d, _ := json.Marshal(r.Result["decision"])
						logf("decision %s", d)
						decision, _ := r.Result["decision"].(string)
						item["status"] = "completed"
						if decision == "decline" || decision == "cancel" {
							item["status"] = "declined"
						}
						notify("serverRequest/resolved", map[string]any{"threadId": thread, "requestId": id})
						notify("item/completed", with(map[string]any{"item": item}))
						if decision == "cancel" {
							complete("interrupted")
							return
						}
						answer("decision " + string(d))
						complete("completed")
						return
					}
					logf("unexpected %s", r.Method)
				}
			}
			step := fakeNextStep(dir, script)
			logf("step %s", step)
			switch step {
			case "text":
				answer("hello from " + strconv.Itoa(pid))
				complete("completed")
			case "cmd":
				ask("item/commandExecution/requestApproval",
					map[string]any{"type": "commandExecution", "id": "call-1", "command": "/bin/bash -lc 'rm -f old.txt'", "cwd": "/w"},
					map[string]any{"itemId": "call-1", "command": "/bin/bash -lc 'rm -f old.txt'", "cwd": "/w",
						"proposedExecpolicyAmendment": []string{"rm", "-f", "old.txt"}})
			case "patch":
				ask("item/fileChange/requestApproval",
					map[string]any{"type": "fileChange", "id": "call-2", "changes": []any{map[string]any{
						"path": "/w/old.txt", "kind": map[string]any{"type": "update", "move_path": nil},
						"diff": "@@ -1,3 +1,3 @@\n first line\n-old line\n+new line\n last line\n"}}},
					map[string]any{"itemId": "call-2"})
			case "hang", "deaf":
				notify("item/started", with(map[string]any{"item": map[string]any{"type": "reasoning", "id": "r-1"}}))
				for {
					r, ok := next()
					if !ok {
						logf("eof")
						return 0
					}
					if r.Method == "turn/interrupt" {
						logf("turn/interrupt %v", r.Params["turnId"])
						if step == "deaf" {
							continue
						}
						send(map[string]any{"id": r.ID, "result": map[string]any{}})
						complete("interrupted")
						break
					}
				}
			case "steer":
				notify("item/started", with(map[string]any{"item": map[string]any{"type": "reasoning", "id": "r-1"}}))
				for {
					r, ok := next()
					if !ok {
						return 0
					}
					if r.Method == "turn/steer" {
						in, _ := r.Params["input"].([]any)
						first, _ := in[0].(map[string]any)
						logf("turn/steer %v %v", r.Params["expectedTurnId"], first["text"])
						send(map[string]any{"id": r.ID, "result": map[string]any{"turnId": turn}})
						answer(fmt.Sprintf("steered: %v", first["text"]))
						complete("completed")
						break
					}
				}
			case "die":
				return 3
			default:
				complete("failed")
			}
		default:
			if len(m.ID) > 0 {
				send(map[string]any{"id": m.ID, "error": map[string]any{"code": -32601, "message": "unknown method"}})
			}
		}
	}
}

// fakeNextStep takes the next step of script, counting in dir/steps.
func fakeNextStep(dir string, script []string) string {
	path := filepath.Join(dir, "codexapp-steps")
	b, _ := os.ReadFile(path)
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	_ = os.WriteFile(path, []byte(strconv.Itoa(n+1)), 0o600)
	if n < len(script) {
		return script[n]
	}
	return ""
}
