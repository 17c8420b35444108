package backends

import "testing"

func TestContextWindowOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		model string
		want  int64
	}{
		{"claude-sonnet-4-5", 200_000},
		{"claude-sonnet-4-5[1m]", 1_000_000},
		{"sonnet[1m]", 1_000_000},
		{"Opus", 200_000},
		{"gemini-2.5-pro", 1_048_576},
		{"gpt-5-codex", 400_000},
		{"llama3", 0},
		{"", 0},
	} {
		if got := ContextWindowOf(tc.model); got != tc.want {
			t.Errorf("ContextWindowOf(%q) = %d, want %d", tc.model, got, tc.want)
		}
	}
}

func TestContextPercent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		r      Result
		want   int
		wantOK bool
	}{
		{"from the table", Result{Model: "claude-sonnet-4-5", ContextTokens: 124_000}, 62, true},
		{"the CLI's window wins", Result{Model: "claude-opus-5-5", ContextTokens: 124_000, ContextWindow: 1_000_000}, 12, true},
		{"rounds", Result{Model: "claude-x", ContextTokens: 167_000}, 84, true},
		{"never 0 when something is in it", Result{Model: "claude-x", ContextTokens: 300}, 1, true},
		{"no usage", Result{Model: "claude-x"}, 0, false},
		{"unknown model", Result{Model: "llama3", ContextTokens: 5000}, 0, false},
	} {
		got, ok := ContextPercent(tc.r)
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("%s: ContextPercent = %d, %v; want %d, %v", tc.name, got, ok, tc.want, tc.wantOK)
		}
	}
}

// The context size is the input of the turn's last model call of the
// session's own model (a subagent's calls do not count), and the window is
// the one the result's modelUsage reports for that model.
func TestClaudeContextFromTheLastCall(t *testing.T) {
	t.Parallel()
	lines := []string{
		`{"type":"system","subtype":"init","session_id":"s1","model":"claude-sonnet-4-5"}`,
		`{"type":"assistant","session_id":"s1","parent_tool_use_id":null,"message":{"id":"m1","model":"claude-sonnet-4-5","content":[{"type":"tool_use","id":"t1","name":"Task","input":{}}],"usage":{"input_tokens":10,"cache_read_input_tokens":4000,"cache_creation_input_tokens":100,"output_tokens":1}}}`,
		`{"type":"assistant","session_id":"s1","parent_tool_use_id":"t1","message":{"id":"m2","model":"claude-haiku-4-5","content":[{"type":"text","text":"sub"}],"usage":{"input_tokens":50,"output_tokens":1}}}`,
		`{"type":"assistant","session_id":"s1","parent_tool_use_id":null,"message":{"id":"m3","model":"claude-sonnet-4-5","content":[{"type":"text","text":"done"}],"usage":{"input_tokens":20,"cache_read_input_tokens":6000,"cache_creation_input_tokens":180,"output_tokens":1}}}`,
		`{"type":"result","subtype":"success","is_error":false,"session_id":"s1","result":"done","usage":{"input_tokens":80,"cache_read_input_tokens":10000,"cache_creation_input_tokens":280,"output_tokens":30},"modelUsage":{"claude-haiku-4-5":{"contextWindow":100000},"claude-sonnet-4-5":{"contextWindow":200000}}}`,
	}
	var p ClaudeParser
	for _, l := range lines {
		if _, err := p.Parse([]byte(l)); err != nil {
			t.Fatal(err)
		}
	}
	res, err := p.Result()
	if err != nil {
		t.Fatal(err)
	}
	if res.ContextTokens != 6200 || res.ContextWindow != 200_000 {
		t.Errorf("context %d of %d, want 6200 of 200000", res.ContextTokens, res.ContextWindow)
	}
	if pct, ok := ContextPercent(res); pct != 3 || !ok {
		t.Errorf("ContextPercent = %d, %v; want 3, true", pct, ok)
	}
}
