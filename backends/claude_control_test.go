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
