package backends

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The control lines of testdata/claude/interactive.txt, as the pinned CLI
// printed them, decode into what the turn loop acts on.
func TestParseControlRecorded(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "testdata", "claude", "interactive.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []controlLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "> ") {
			continue // written by the gateway's side
		}
		c, err := parseControl([]byte(line))
		if err != nil {
			t.Fatalf("parseControl(%.80s): %v", line, err)
		}
		if c.Kind != controlNone {
			got = append(got, c)
		}
	}
	if len(got) != 2 {
		t.Fatalf("control lines = %d, want the can_use_tool request and the interrupt's answer", len(got))
	}
	req := got[0]
	if req.Kind != controlRequest || req.Subtype != "can_use_tool" || req.Approval == nil || req.Approval.Tool != "Bash" ||
		!req.Approval.CanRemember || !strings.Contains(string(req.Input), "touch approved.txt") {
		t.Errorf("request = %+v", req)
	}
	if resp := got[1]; resp.Kind != controlResponse || resp.RequestID != "req-interrupt-1" || resp.Subtype != "success" {
		t.Errorf("response = %+v", resp)
	}
}

func TestApprovalAnswer(t *testing.T) {
	c := controlLine{RequestID: "r1", Input: json.RawMessage(`{"command":"ls"}`),
		Suggestions: json.RawMessage(`[{"type":"addRules","rules":[{"toolName":"Bash","ruleContent":"ls"}],"behavior":"allow","destination":"localSettings"},{"type":"setMode","mode":"acceptEdits","destination":"session"}]`)}
	for _, tc := range []struct {
		v    Verdict
		want string
	}{
		{Verdict{Allow: true}, `{"response":{"request_id":"r1","response":{"behavior":"allow","updatedInput":{"command":"ls"}},"subtype":"success"},"type":"control_response"}`},
		{Verdict{Allow: true, Remember: true}, `{"response":{"request_id":"r1","response":{"behavior":"allow","updatedInput":{"command":"ls"},"updatedPermissions":[{"behavior":"allow","destination":"session","rules":[{"ruleContent":"ls","toolName":"Bash"}],"type":"addRules"}]},"subtype":"success"},"type":"control_response"}`},
		{Verdict{Message: "no"}, `{"response":{"request_id":"r1","response":{"behavior":"deny","interrupt":false,"message":"no"},"subtype":"success"},"type":"control_response"}`},
		{Verdict{Interrupt: true}, `{"response":{"request_id":"r1","response":{"behavior":"deny","interrupt":true,"message":"The user denied this tool call."},"subtype":"success"},"type":"control_response"}`},
	} {
		if diff := cmp.Diff(tc.want+"\n", string(approvalAnswer(c, tc.v))); diff != "" {
			t.Errorf("approvalAnswer(%+v) (-want +got):\n%s", tc.v, diff)
		}
	}
}

func TestParseControl(t *testing.T) {
	for _, tc := range []struct {
		line string
		want controlLine
		err  bool
	}{
		{`{"type":"result","result":"control_request"}`, controlLine{}, false},
		{`{"type":"control_cancel_request","request_id":"x"}`, controlLine{Kind: controlCancel, RequestID: "x"}, false},
		{`{"type":"control_request","request":{"subtype":"can_use_tool"}}`, controlLine{}, true},
		{`{"type":"control_request","request_id":"h","request":{"subtype":"hook_callback"}}`, controlLine{Kind: controlRequest, RequestID: "h", Subtype: "hook_callback"}, false},
		{`{"type":"control_request","request_id":"p","request":{"subtype":"can_use_tool","tool_name":"Write","input":null}}`,
			controlLine{Kind: controlRequest, RequestID: "p", Subtype: "can_use_tool", Input: json.RawMessage(`{}`),
				Approval: &Approval{Tool: "Write", Input: json.RawMessage(`{}`)}}, false},
		{`{"type":"control_response","response":{"subtype":"error","request_id":"m","error":"bad model"}}`,
			controlLine{Kind: controlResponse, RequestID: "m", Subtype: "error", Error: "bad model"}, false},
		{`{"type":"control_response","response":7}`, controlLine{}, true},
		{`not json "control_`, controlLine{}, false},
	} {
		got, err := parseControl([]byte(tc.line))
		if (err != nil) != tc.err {
			t.Errorf("parseControl(%s) error = %v, want error %v", tc.line, err, tc.err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" && !tc.err {
			t.Errorf("parseControl(%s) (-want +got):\n%s", tc.line, diff)
		}
	}
}

func FuzzParseControl(f *testing.F) {
	f.Add([]byte(`{"type":"control_request","request_id":"p","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"ls"},"permission_suggestions":[{"type":"addRules"}]}}`))
	f.Add([]byte(`{"type":"control_cancel_request","request_id":"x"}`))
	f.Add([]byte(`{"type":"control_response","response":{"subtype":"success","request_id":"m","response":{}}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		c, err := parseControl(line)
		if err != nil {
			return
		}
		if c.Kind == controlRequest && c.RequestID == "" {
			t.Fatal("a request without an id")
		}
		if c.Approval != nil {
			if !json.Valid(c.Approval.Input) {
				t.Fatalf("approval input %q is not JSON", c.Approval.Input)
			}
			// The answer is always one JSON line.
			for _, v := range []Verdict{{Allow: true, Remember: true}, {Message: "no"}} {
				ans := approvalAnswer(c, v)
				if !json.Valid(ans) || strings.Count(string(ans), "\n") != 1 {
					t.Fatalf("answer %q is not one JSON line", ans)
				}
			}
		}
	})
}

// recordedExchange is each can_use_tool request of a recording in
// testdata/claude, with the answer the gateway's side wrote to it.
func recordedExchange(t *testing.T, file string) (reqs []controlLine, answers map[string]any) {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "testdata", "claude", file))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	answers = map[string]any{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if ans, ok := strings.CutPrefix(line, "> "); ok {
			var a struct {
				Response struct {
					RequestID string `json:"request_id"`
				} `json:"response"`
			}
			var whole any
			if json.Unmarshal([]byte(ans), &a) == nil && a.Response.RequestID != "" && json.Unmarshal([]byte(ans), &whole) == nil {
				answers[a.Response.RequestID] = whole
			}
			continue
		}
		c, err := parseControl([]byte(line))
		if err != nil {
			t.Fatalf("parseControl(%.80s): %v", line, err)
		}
		if c.Kind == controlRequest && c.Approval != nil {
			reqs = append(reqs, c)
		}
	}
	return reqs, answers
}

// sameAnswer checks that approvalAnswer(c, v) is, as JSON, the answer the
// recording shows working.
func sameAnswer(t *testing.T, c controlLine, v Verdict, recorded any) {
	t.Helper()
	var got any
	if err := json.Unmarshal(approvalAnswer(c, v), &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(recorded, got); diff != "" {
		t.Errorf("approvalAnswer(%+v) (-recorded +got):\n%s", v, diff)
	}
}

// The AskUserQuestion requests of testdata/claude/ask_user_question.txt
// decode with their questions, and an allow with UpdatedInput writes the
// answer the CLI took (the conformance test checks what the model got).
func TestQuestionAnswerRecorded(t *testing.T) {
	reqs, answers := recordedExchange(t, "ask_user_question.txt")
	if len(reqs) < 5 {
		t.Fatalf("%d requests, want one per scenario", len(reqs))
	}
	matched := 0
	for _, c := range reqs {
		if c.Approval.Tool != ToolAskUserQuestion || !strings.Contains(string(c.Approval.Input), `"questions"`) {
			t.Errorf("request = %+v, want an AskUserQuestion with its questions", c.Approval)
		}
		rec, ok := answers[c.RequestID].(map[string]any)
		resp, _ := rec["response"].(map[string]any)
		inner, _ := resp["response"].(map[string]any)
		if !ok || inner["behavior"] != "allow" {
			continue
		}
		updated, _ := json.Marshal(inner["updatedInput"])
		sameAnswer(t, c, Verdict{Allow: true, UpdatedInput: updated}, rec)
		matched++
	}
	if matched < 4 {
		t.Errorf("%d allowed answers compared, want at least 4", matched)
	}
}

// ExitPlanMode arrives with an empty input (the plan is in a file); an
// approval that continues in acceptEdits is the answer the recording
// shows switching the mode, and a note is a deny.
func TestPlanAnswerRecorded(t *testing.T) {
	reqs, answers := recordedExchange(t, "exit_plan_mode.txt")
	var plans []controlLine
	for _, c := range reqs {
		if c.Approval.Tool == ToolExitPlanMode {
			plans = append(plans, c)
		}
	}
	if len(plans) != 4 {
		t.Fatalf("%d ExitPlanMode requests, want 4", len(plans))
	}
	seen := map[string]bool{}
	for _, c := range plans {
		if string(c.Input) != `{}` || c.Approval.Plan != "" {
			t.Errorf("ExitPlanMode input = %s plan %q, want {} and no plan", c.Input, c.Approval.Plan)
		}
		rec, _ := answers[c.RequestID].(map[string]any)
		inner, _ := rec["response"].(map[string]any)["response"].(map[string]any)
		switch {
		case inner["updatedPermissions"] != nil:
			sameAnswer(t, c, Verdict{Allow: true, Mode: "acceptEdits"}, rec)
			seen["mode"] = true
		case inner["behavior"] == "deny":
			sameAnswer(t, c, Verdict{Message: "Add a step that tests it."}, rec)
			seen["deny"] = true
		}
	}
	if !seen["mode"] || !seen["deny"] {
		t.Errorf("compared %v, want the mode switch and the deny", seen)
	}
}

func TestApprovalAnswerModeAndInput(t *testing.T) {
	c := controlLine{RequestID: "r1", Input: json.RawMessage(`{"questions":[]}`)}
	for _, tc := range []struct {
		v    Verdict
		want string
	}{
		{Verdict{Allow: true, UpdatedInput: json.RawMessage(`{"questions":[],"answers":{"Q?":"A"}}`)},
			`{"response":{"request_id":"r1","response":{"behavior":"allow","updatedInput":{"questions":[],"answers":{"Q?":"A"}}},"subtype":"success"},"type":"control_response"}`},
		{Verdict{Allow: true, Mode: "acceptEdits"},
			`{"response":{"request_id":"r1","response":{"behavior":"allow","updatedInput":{"questions":[]},"updatedPermissions":[{"destination":"session","mode":"acceptEdits","type":"setMode"}]},"subtype":"success"},"type":"control_response"}`},
		// A denial ignores both.
		{Verdict{Message: "no", Mode: "acceptEdits", UpdatedInput: json.RawMessage(`{}`)},
			`{"response":{"request_id":"r1","response":{"behavior":"deny","interrupt":false,"message":"no"},"subtype":"success"},"type":"control_response"}`},
	} {
		if diff := cmp.Diff(tc.want+"\n", string(approvalAnswer(c, tc.v))); diff != "" {
			t.Errorf("approvalAnswer(%+v) (-want +got):\n%s", tc.v, diff)
		}
	}
}

func TestPlanFiles(t *testing.T) {
	home := t.TempDir()
	plan := filepath.Join(home, ".claude", "plans", "plan-a-hello-file-jiggly-iverson.md")
	if err := os.MkdirAll(filepath.Dir(plan), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(plan, []byte("# Plan\n1. Write hello.txt\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	use := func(name, path string) Event {
		in, _ := json.Marshal(map[string]string{"file_path": path})
		return Event{Kind: EventToolUse, Tool: &ToolCall{Name: name, Input: string(in)}}
	}
	var p planFiles
	p.observe(use("Write", filepath.Join(home, "notes.md")))
	p.observe(use("Read", filepath.Join(home, ".claude", "plans", "other.md")))
	a := Approval{Tool: ToolExitPlanMode, Input: json.RawMessage(`{}`)}
	p.fill(&a)
	if a.PlanFile != "" {
		t.Fatalf("plan file before any plan file was written = %q", a.PlanFile)
	}
	p.observe(use("Write", plan))
	p.fill(&a)
	if a.PlanFile != plan || a.Plan != "" {
		t.Errorf("plan file = %q, plan %q; want %q named and nothing read", a.PlanFile, a.Plan, plan)
	}
	// A plan in the input wins; other tools are left alone.
	given := Approval{Tool: ToolExitPlanMode, Plan: "inline"}
	p.fill(&given)
	bash := Approval{Tool: "Bash"}
	p.fill(&bash)
	if given.Plan != "inline" || given.PlanFile != "" || bash.PlanFile != "" {
		t.Errorf("plans = %q, %q; want inline and none", given.Plan, bash.Plan)
	}
	// The input's plan, when the model gave one there.
	c, err := parseControl([]byte(`{"type":"control_request","request_id":"x","request":{"subtype":"can_use_tool","tool_name":"ExitPlanMode","input":{"plan":"# P"}}}`))
	if err != nil || c.Approval.Plan != "# P" {
		t.Errorf("parsed plan = %+v %v, want # P", c.Approval, err)
	}
}
