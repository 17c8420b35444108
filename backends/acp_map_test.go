package backends

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	acp "github.com/coder/acp-go-sdk"
	"github.com/google/go-cmp/cmp"
)

// acpEventString renders an event for comparisons.
func acpEventString(e Event) string {
	switch {
	case e.Tool != nil:
		s := fmt.Sprintf("%s %s|%s", e.Kind, e.Tool.ID, e.Tool.Name)
		if e.Tool.Input != "" {
			s += " " + e.Tool.Input
		}
		if e.Tool.IsError {
			s += " error"
		}
		return s
	case e.Kind == EventText:
		return "text " + e.Text
	}
	return e.Kind.String()
}

func acpMapAll(m *acpMapper, updates ...acp.SessionUpdate) []string {
	var out []string
	for _, u := range updates {
		for _, e := range m.Map(u) {
			if e.SessionID != m.session {
				out = append(out, "wrong session "+e.SessionID)
			}
			out = append(out, acpEventString(e))
		}
	}
	return out
}

func TestACPMapper(t *testing.T) {
	completed, failed := acp.ToolCallStatusCompleted, acp.ToolCallStatusFailed
	for _, tc := range []struct {
		name    string
		updates []acp.SessionUpdate
		want    []string
	}{
		{"text chunks", []acp.SessionUpdate{acp.UpdateAgentMessageText("Hel"), acp.UpdateAgentMessageText("lo")},
			[]string{"text Hel", "text lo"}},
		{"empty and non-text chunks say nothing", []acp.SessionUpdate{acp.UpdateAgentMessageText(""), acp.UpdateAgentMessage(acp.ImageBlock("eA==", "image/png"))},
			nil},
		{"thinking once per run of thought chunks", []acp.SessionUpdate{
			acp.UpdateAgentThoughtText("a"), acp.UpdateAgentThoughtText("b"), acp.UpdateAgentMessageText("x"), acp.UpdateAgentThoughtText("c")},
			[]string{"thinking", "text x", "thinking"}},
		{"tool call then its update", []acp.SessionUpdate{
			acp.StartToolCall("t1", "Read go.mod", acp.WithStartKind(acp.ToolKindRead), acp.WithStartStatus(acp.ToolCallStatusPending),
				acp.WithStartRawInput(map[string]any{"path": "go.mod"})),
			acp.UpdateToolCall("t1", acp.WithUpdateStatus(acp.ToolCallStatusInProgress)),
			acp.UpdateToolCall("t1", acp.WithUpdateStatus(completed)),
			acp.UpdateToolCall("t1", acp.WithUpdateStatus(completed)),
		}, []string{`tool_use t1|Read go.mod {"path":"go.mod"}`, "tool_result t1|"}},
		{"a failed tool", []acp.SessionUpdate{
			acp.StartToolCall("t2", "", acp.WithStartKind(acp.ToolKindExecute)),
			acp.UpdateToolCall("t2", acp.WithUpdateStatus(failed), acp.WithUpdateTitle("ls")),
		}, []string{"tool_use t2|execute", "tool_result t2|ls error"}},
		{"an update for a call not seen starts it", []acp.SessionUpdate{
			acp.UpdateToolCall("t3", acp.WithUpdateTitle("grep"), acp.WithUpdateStatus(completed)),
		}, []string{"tool_use t3|grep", "tool_result t3|grep"}},
		{"a call announced without its input waits for it", []acp.SessionUpdate{
			acp.StartToolCall("t5", "write", acp.WithStartKind(acp.ToolKindEdit), acp.WithStartStatus(acp.ToolCallStatusPending),
				acp.WithStartRawInput(map[string]any{})),
			acp.UpdateToolCall("t5", acp.WithUpdateStatus(acp.ToolCallStatusInProgress),
				acp.WithUpdateRawInput(map[string]any{"filePath": "out.txt"})),
			acp.UpdateToolCall("t5", acp.WithUpdateStatus(completed), acp.WithUpdateTitle("out.txt")),
		}, []string{`tool_use t5|write {"filePath":"out.txt"}`, "tool_result t5|out.txt"}},
		{"a call reported done at once", []acp.SessionUpdate{
			acp.StartToolCall("t4", "Write a.txt", acp.WithStartStatus(completed)),
		}, []string{"tool_use t4|Write a.txt", "tool_result t4|Write a.txt"}},
		{"plan", []acp.SessionUpdate{
			acp.UpdatePlan(acp.PlanEntry{Content: "look", Status: acp.PlanEntryStatusCompleted}, acp.PlanEntry{Content: "fix", Status: acp.PlanEntryStatusPending}),
			acp.UpdatePlan(acp.PlanEntry{Content: "look", Status: acp.PlanEntryStatusCompleted}),
		}, []string{
			`tool_use plan-1|Plan {"entries":[{"content":"look","status":"completed"},{"content":"fix","status":"pending"}]}`,
			`tool_use plan-2|Plan {"entries":[{"content":"look","status":"completed"}]}`,
		}},
		{"updates the card does not show", []acp.SessionUpdate{
			acp.UpdateUserMessageText("replayed"),
			{AvailableCommandsUpdate: &acp.SessionAvailableCommandsUpdate{}},
			{CurrentModeUpdate: &acp.SessionCurrentModeUpdate{CurrentModeId: "yolo"}},
			{UsageUpdate: &acp.SessionUsageUpdate{Used: 10, Size: 100}},
			{},
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := acpMapAll(newACPMapper("s1"), tc.updates...)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestACPMapperResult(t *testing.T) {
	m := newACPMapper("s1")
	m.Map(acp.UpdateAgentMessageText("Hello "))
	m.Map(acp.UpdateAgentMessageText("there."))
	m.Map(acp.SessionUpdate{UsageUpdate: &acp.SessionUsageUpdate{Used: 1200, Size: 200000, Cost: &acp.Cost{Amount: 0.25, Currency: "USD"}}})
	read, write := 5, 7
	res := m.Result(acp.PromptResponse{StopReason: acp.StopReasonEndTurn, Usage: &acp.Usage{
		InputTokens: 100, OutputTokens: 10, TotalTokens: 110, CachedReadTokens: &read, CachedWriteTokens: &write}})
	want := Result{SessionID: "s1", Text: "Hello there.", SessionCostUSD: 0.25, ContextTokens: 1200, ContextWindow: 200000, Turns: 1,
		Usage: Usage{InputTokens: 100, OutputTokens: 10, CacheReadTokens: 5, CacheCreationTokens: 7}}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
}

// gemini 0.61.0 puts the turn's tokens in _meta.quota.token_count.
func TestACPMapperGeminiMetaUsage(t *testing.T) {
	var resp acp.PromptResponse
	raw := `{"stopReason":"end_turn","_meta":{"quota":{"token_count":{"input_tokens":100,"output_tokens":10},"model_usage":[]}}}`
	if err := json.Unmarshal([]byte(raw), &resp); err != nil {
		t.Fatal(err)
	}
	res := newACPMapper("s").Result(resp)
	if res.Usage != (Usage{InputTokens: 100, OutputTokens: 10}) {
		t.Errorf("usage = %+v", res.Usage)
	}
}

func TestACPOutcome(t *testing.T) {
	all := []acp.PermissionOption{
		{OptionId: "always", Kind: acp.PermissionOptionKindAllowAlways},
		{OptionId: "once", Kind: acp.PermissionOptionKindAllowOnce},
		{OptionId: "no", Kind: acp.PermissionOptionKindRejectOnce},
		{OptionId: "never", Kind: acp.PermissionOptionKindRejectAlways},
	}
	onlyAlways := []acp.PermissionOption{{OptionId: "always", Kind: acp.PermissionOptionKindAllowAlways}, {OptionId: "never", Kind: acp.PermissionOptionKindRejectAlways}}
	for _, tc := range []struct {
		name    string
		options []acp.PermissionOption
		v       Verdict
		want    string
	}{
		{"allow", all, Verdict{Allow: true}, "once"},
		{"allow for the session", all, Verdict{Allow: true, Remember: true}, "always"},
		{"deny", all, Verdict{}, "no"},
		{"deny and stop", all, Verdict{Interrupt: true}, "no"},
		{"allow without allow_once", onlyAlways, Verdict{Allow: true}, "always"},
		{"deny without reject_once", onlyAlways, Verdict{}, "never"},
		{"no options", nil, Verdict{Allow: true}, "cancelled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := acpOutcome(tc.options, tc.v)
			got := "cancelled"
			if o.Selected != nil {
				got = string(o.Selected.OptionId)
			}
			if got != tc.want {
				t.Errorf("chose %s, want %s", got, tc.want)
			}
		})
	}
}

// The recorded traffic of the real agents maps to the events the card
// shows: every session/update line of testdata/{gemini,opencode}/acp/acp_*.agent.jsonl
// decodes, and the text events add up to what the agent said.
func TestACPMapperRecorded(t *testing.T) {
	files, _ := filepath.Glob("../testdata/*/acp/acp_*.agent.jsonl")
	if len(files) == 0 {
		t.Fatal("no recorded ACP traffic")
	}
	for _, f := range files {
		t.Run(filepath.Base(filepath.Dir(f))+"/"+filepath.Base(f), func(t *testing.T) {
			updates := acpRecordedUpdates(t, f)
			mappers := map[string]*acpMapper{}
			inputs := map[string]string{}
			var tools int
			for _, n := range updates {
				m := mappers[string(n.SessionId)]
				if m == nil {
					m = newACPMapper(string(n.SessionId))
					mappers[string(n.SessionId)] = m
				}
				for _, e := range m.Map(n.Update) {
					if e.Kind == EventToolUse && e.Tool.Name == "" {
						t.Errorf("a tool use without a name: %+v", e.Tool)
					}
					if e.Kind == EventToolUse {
						tools++
						inputs[string(n.SessionId)+"/"+e.Tool.ID] = e.Tool.Input
					}
				}
			}
			if want := acpRecordedToolCalls(updates); tools != want {
				t.Errorf("%d tool uses, want %d (one per tool call id)", tools, want)
			}
			// The card shows what a call works on: a call whose input the
			// agent sent at all (opencode sends it with the call's
			// in_progress update, not its first announcement) carries it.
			for id := range acpRecordedInputs(updates) {
				if in := inputs[id]; in == "" || in == "{}" {
					t.Errorf("tool call %s reached the card with input %q", id, in)
				}
			}
		})
	}
}

func acpRecordedUpdates(t *testing.T, path string) []acp.SessionNotification {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []acp.SessionNotification
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		var msg struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if err := json.Unmarshal(sc.Bytes(), &msg); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if msg.Method != "session/update" {
			continue
		}
		var n acp.SessionNotification
		if err := json.Unmarshal(msg.Params, &n); err != nil {
			t.Fatalf("session/update %s: %v", msg.Params, err)
		}
		out = append(out, n)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// acpRecordedToolCalls counts the tool calls the updates name: gemini
// 0.61.0 sends a call that needed approval only as tool_call_update.
func acpRecordedToolCalls(updates []acp.SessionNotification) int {
	ids := map[string]bool{}
	for _, n := range updates {
		switch {
		case n.Update.ToolCall != nil:
			ids[string(n.SessionId)+"/"+string(n.Update.ToolCall.ToolCallId)] = true
		case n.Update.ToolCallUpdate != nil:
			ids[string(n.SessionId)+"/"+string(n.Update.ToolCallUpdate.ToolCallId)] = true
		}
	}
	return len(ids)
}

// FuzzACPMapper feeds arbitrary session/update payloads to the mapper: it
// must not panic, must keep the session id on every event, and must
// report each tool call's result at most once.
func FuzzACPMapper(f *testing.F) {
	f.Add([]byte(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}`))
	f.Add([]byte(`{"sessionUpdate":"tool_call","toolCallId":"a","title":"Read","status":"completed","rawInput":{"x":1}}`))
	f.Add([]byte(`{"sessionUpdate":"tool_call_update","toolCallId":"a","status":"failed"}`))
	f.Add([]byte(`{"sessionUpdate":"plan","entries":[{"content":"c","priority":"high","status":"pending"}]}`))
	f.Add([]byte(`{"sessionUpdate":"usage_update","used":1,"size":2,"cost":{"amount":1,"currency":"USD"}}`))
	f.Add([]byte(`{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"hm"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m := newACPMapper("s")
		results := map[string]int{}
		for _, line := range strings.Split(string(data), "\n") {
			var u acp.SessionUpdate
			if json.Unmarshal([]byte(line), &u) != nil {
				continue
			}
			for _, e := range m.Map(u) {
				if e.SessionID != "s" {
					t.Fatalf("event on session %q", e.SessionID)
				}
				if e.Kind == EventToolResult {
					results[e.Tool.ID]++
					if results[e.Tool.ID] > 1 {
						t.Fatalf("tool %q finished twice", e.Tool.ID)
					}
				}
			}
		}
		_ = m.Result(acp.PromptResponse{})
	})
}

// acpRecordedInputs names the tool calls (session/id) any update of which
// carried a non-empty rawInput.
func acpRecordedInputs(updates []acp.SessionNotification) map[string]bool {
	ids := map[string]bool{}
	for _, n := range updates {
		var id string
		var raw any
		switch {
		case n.Update.ToolCall != nil:
			id, raw = string(n.Update.ToolCall.ToolCallId), n.Update.ToolCall.RawInput
		case n.Update.ToolCallUpdate != nil:
			id, raw = string(n.Update.ToolCallUpdate.ToolCallId), n.Update.ToolCallUpdate.RawInput
		default:
			continue
		}
		if in := acpRawJSON(raw); in != "" && in != "{}" {
			ids[string(n.SessionId)+"/"+id] = true
		}
	}
	return ids
}

// The permission requests of the real agents become approvals the
// Discord message can show: the tool named by its kind, not by a title
// that may be an absolute path, and an edit as a file with its new text.
func TestACPApprovalRecorded(t *testing.T) {
	files, _ := filepath.Glob("../testdata/*/acp/acp_approval_*.agent.jsonl")
	if len(files) == 0 {
		t.Fatal("no recorded ACP approvals")
	}
	seen := 0
	defer func() {
		if seen < len(files) {
			t.Errorf("%d permission requests in %d files", seen, len(files))
		}
	}()
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n") {
			var msg struct {
				Method string                       `json:"method"`
				Params acp.RequestPermissionRequest `json:"params"`
			}
			if json.Unmarshal([]byte(line), &msg) != nil || msg.Method != "session/request_permission" {
				continue
			}
			seen++
			a := acpApproval(msg.Params)
			var in struct {
				FilePath string `json:"file_path"`
				Content  string `json:"content"`
			}
			if err := json.Unmarshal(a.Input, &in); err != nil || in.FilePath == "" || in.Content != "hello\n" {
				t.Errorf("%s: input %s, want the file and its new text", f, a.Input)
			}
			if a.Tool != "edit" || strings.Contains(a.Tool, "/") || !a.CanRemember {
				t.Errorf("%s: approval %+v, want tool edit", f, a)
			}
		}
	}
}
