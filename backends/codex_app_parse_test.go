package backends

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const codexAppTestdata = "../testdata/codex/app_server"

// appRecorded reads a recording: the server's lines, in order.
func appRecorded(t testing.TB, name string) [][]byte {
	t.Helper()
	f, err := os.Open(filepath.Join(codexAppTestdata, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		var rec struct {
			From string          `json:"from"`
			Msg  json.RawMessage `json:"msg"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		if rec.From == "server" {
			lines = append(lines, rec.Msg)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// appReplay folds a recording's turns as the adapter does: each turn/start
// answer begins a new turn. It returns every turn's events and results,
// and the approval requests met.
func appReplay(t testing.TB, lines [][]byte) (turns []*codexAppTurn, events [][]Event, approvals []appApprovalRequest) {
	t.Helper()
	var cur *codexAppTurn
	for _, line := range lines {
		l, err := parseAppLine(line)
		if err != nil {
			t.Fatalf("parse %s: %v", line, err)
		}
		if l.Kind == appResponse && appTurnID(l.Result) != "" {
			cur = &codexAppTurn{turn: appTurnID(l.Result)}
			turns = append(turns, cur)
			events = append(events, nil)
			continue
		}
		if cur == nil {
			continue
		}
		if l.Kind == appRequest {
			if a, ok := cur.approval(l); ok {
				approvals = append(approvals, a)
			}
			continue
		}
		events[len(events)-1] = append(events[len(events)-1], cur.observe(l)...)
	}
	return turns, events, approvals
}

func kinds(events []Event) string {
	var s []string
	for _, e := range events {
		s = append(s, e.Kind.String())
	}
	return strings.Join(s, ",")
}

func TestCodexAppParseGolden(t *testing.T) {
	t.Run("turn", func(t *testing.T) {
		turns, events, _ := appReplay(t, appRecorded(t, "app_server_turn.jsonl"))
		if len(turns) != 2 {
			t.Fatalf("%d turns", len(turns))
		}
		res := turns[0].result()
		if !turns[0].done || turns[0].status != "completed" || res.Text != "Hello from the app server." {
			t.Errorf("first turn: %+v", res)
		}
		if res.Usage != (Usage{InputTokens: 100, OutputTokens: 10}) || res.ContextWindow != 258400 || res.ContextTokens != 100 {
			t.Errorf("usage %+v window %d context %d", res.Usage, res.ContextWindow, res.ContextTokens)
		}
		if got := kinds(events[0]); got != "text,text,text,result" {
			t.Errorf("events = %s", got)
		}
		var text string
		for _, e := range events[0] {
			text += e.Text
		}
		if text != "Hello from the app server." {
			t.Errorf("streamed text %q", text)
		}
		if turns[1].result().Usage.InputTokens != 100 {
			t.Errorf("second turn usage counts the thread's total: %+v", turns[1].result().Usage)
		}
	})
	t.Run("command approval", func(t *testing.T) {
		turns, events, approvals := appReplay(t, appRecorded(t, "app_server_command_approval.jsonl"))
		if len(approvals) != 2 || approvals[0].Approval.Tool != "exec_command" {
			t.Fatalf("approvals %+v", approvals)
		}
		var in map[string]string
		_ = json.Unmarshal(approvals[0].Approval.Input, &in)
		if in["command"] != "/bin/bash -lc 'touch made-by-command.txt'" || in["cwd"] != "/WORK_DIR" {
			t.Errorf("input %s", approvals[0].Approval.Input)
		}
		if string(approvals[0].Amendment) != `["touch","made-by-command.txt"]` {
			t.Errorf("amendment %s", approvals[0].Amendment)
		}
		if got := kinds(events[0]); got != "text,text,text,tool_use,tool_result,text,text,text,result" {
			t.Errorf("accepted turn events = %s", got)
		}
		if r := turns[0].result(); len(r.PermissionDenials) != 0 || r.Text != "Ran it." || r.Usage.InputTokens != 200 {
			t.Errorf("accepted turn %+v", r)
		}
		r := turns[1].result()
		if len(r.PermissionDenials) != 1 || r.PermissionDenials[0] != "exec_command" {
			t.Errorf("declined turn denials %v", r.PermissionDenials)
		}
		for _, e := range events[1] {
			if e.Kind == EventToolResult && !e.Tool.IsError {
				t.Errorf("a declined command is not an error: %+v", e.Tool)
			}
		}
	})
	t.Run("patch approval", func(t *testing.T) {
		_, _, approvals := appReplay(t, appRecorded(t, "app_server_patch_approval.jsonl"))
		if len(approvals) != 2 {
			t.Fatalf("approvals %+v", approvals)
		}
		var add, upd map[string]any
		_ = json.Unmarshal(approvals[0].Approval.Input, &add)
		_ = json.Unmarshal(approvals[1].Approval.Input, &upd)
		if add["file_path"] != "/WORK_DIR/notes.txt" || add["content"] != "patched line\n" {
			t.Errorf("add: %s", approvals[0].Approval.Input)
		}
		if upd["file_path"] != "/WORK_DIR/old.txt" || upd["old_string"] != "old line\n" || upd["new_string"] != "new line\n" ||
			!strings.Contains(upd["diff"].(string), "-old line\n+new line") {
			t.Errorf("update: %s", approvals[1].Approval.Input)
		}
	})
	t.Run("interrupt", func(t *testing.T) {
		turns, _, _ := appReplay(t, appRecorded(t, "app_server_interrupt.jsonl"))
		if len(turns) != 2 || turns[0].status != "interrupted" || turns[1].status != "completed" {
			t.Fatalf("turns %+v", turns)
		}
		if turns[1].result().Text != "After the stop." {
			t.Errorf("turn after the stop: %+v", turns[1].result())
		}
	})
	t.Run("resume", func(t *testing.T) {
		lines := appRecorded(t, "app_server_resume.jsonl")
		var stale string
		for _, line := range lines {
			if l, _ := parseAppLine(line); l.Kind == appResponse && l.Error != "" {
				stale = l.Error
			}
		}
		if !staleThread(stale) {
			t.Errorf("the unknown thread's error %q is not stale", stale)
		}
		turns, _, _ := appReplay(t, lines)
		if len(turns) != 1 || turns[0].result().Text != "Resumed." || turns[0].result().Usage.InputTokens != 100 {
			t.Errorf("resumed turn %+v (a notice of the earlier turn must not count)", turns[0].result())
		}
	})
	t.Run("error", func(t *testing.T) {
		turns, events, _ := appReplay(t, appRecorded(t, "app_server_error.jsonl"))
		if len(turns) != 1 || turns[0].failure == nil || turns[0].failure.Kind != KindAuth || turns[0].failure.Status != 401 {
			t.Fatalf("failure %+v", turns[0].failure)
		}
		if last := events[0][len(events[0])-1]; last.Kind != EventResult || last.Err == nil {
			t.Errorf("last event %+v", last)
		}
	})
}

func TestAppDecision(t *testing.T) {
	amend := json.RawMessage(`["rm"]`)
	for _, tc := range []struct {
		v    Verdict
		am   json.RawMessage
		want string
	}{
		{Verdict{Allow: true}, amend, `"accept"`},
		{Verdict{Allow: true, Remember: true}, nil, `"acceptForSession"`},
		{Verdict{Allow: true, Remember: true}, amend, `{"acceptWithExecpolicyAmendment":{"execpolicy_amendment":["rm"]}}`},
		{Verdict{}, amend, `"decline"`},
		{Verdict{Interrupt: true}, nil, `"cancel"`},
	} {
		b, _ := json.Marshal(appDecision(tc.v, tc.am))
		if string(b) != tc.want {
			t.Errorf("%+v: %s, want %s", tc.v, b, tc.want)
		}
	}
}

func FuzzCodexAppParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(codexAppTestdata, "*.jsonl"))
	for _, name := range files {
		for _, line := range appRecorded(f, filepath.Base(name)) {
			f.Add(line)
		}
	}
	f.Add([]byte(`{"id":1}`))
	f.Add([]byte(`{"method":"item/fileChange/requestApproval","id":"x","params":{"itemId":null}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		l, err := parseAppLine(line)
		if err != nil {
			return
		}
		turn := &codexAppTurn{thread: "t"}
		_, _ = turn.approval(l)
		for _, e := range turn.observe(l) {
			if (e.Kind == EventToolUse || e.Kind == EventToolResult) && e.Tool == nil {
				t.Fatalf("tool event without a tool: %+v", e)
			}
		}
		if in := appPatchInput([]appChange{{Path: string(line), Diff: string(line)}}); !json.Valid(in) {
			t.Fatalf("patch input not JSON: %s", in)
		}
		_ = turn.result()
	})
}

func TestCodexAppTurnIgnoresEarlierTurnsNotices(t *testing.T) {
	turn := &codexAppTurn{thread: "th"}
	l, err := parseAppLine([]byte(`{"method":"thread/tokenUsage/updated","params":{"threadId":"th","turnId":"old","tokenUsage":{"last":{"inputTokens":100,"outputTokens":10}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	turn.observe(l) // before turn/start's answer names the turn
	turn.turn = "new"
	turn.observe(l)
	if u := turn.result().Usage; u != (Usage{}) {
		t.Errorf("usage %+v counts another turn's call", u)
	}
}
