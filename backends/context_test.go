package backends

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

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

// claudeTurns parses a recorded stream of one process turn by turn (a
// parser per turn, as the warm process uses them) and returns each turn's
// result.
func claudeTurns(t *testing.T, name string) []Result {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(claudeTestdata, name))
	if err != nil {
		t.Fatal(err)
	}
	var out []Result
	var p ClaudeParser
	for _, line := range bytes.Split(data, []byte("\n")) {
		if _, err := p.Parse(line); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if res, err := p.Result(); !errors.Is(err, errNoResult) {
			if err != nil {
				t.Fatalf("%s: turn %d: %v", name, len(out)+1, err)
			}
			out = append(out, res)
			p = ClaudeParser{}
		}
	}
	return out
}

// What /compact sent as a user turn did with claude 2.1.330
// (testdata/claude/README.md): the turn compacts, leaves the session id as
// it was, and its compact_boundary's post_tokens is the new context size;
// in print mode with too little to compact it says so and compacts
// nothing.
func TestClaudeCompactRecordings(t *testing.T) {
	t.Parallel()
	type turn struct {
		Text          string
		Compacted     bool
		ContextTokens int64
		ContextWindow int64
	}
	summarize := func(rs []Result) (turns []turn, sessions map[string]bool) {
		sessions = map[string]bool{}
		for _, r := range rs {
			turns = append(turns, turn{r.Text, r.Compacted, r.ContextTokens, r.ContextWindow})
			sessions[r.SessionID] = true
		}
		return turns, sessions
	}
	for _, tc := range []struct {
		file string
		want []turn
	}{
		{"compact_warm.jsonl", []turn{
			{"The word is teal.", false, 153_020, 1_000_000},
			{"", true, 2566, 1_000_000},
			{"You said teal.", false, 100, 1_000_000},
		}},
		{"compact_resume.jsonl", []turn{{"", true, 2558, 1_000_000}}},
		{"compact_print.jsonl", []turn{{"Not enough messages to compact.", false, 0, 1_000_000}}},
	} {
		got, sessions := summarize(claudeTurns(t, tc.file))
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s turns (-want +got):\n%s", tc.file, diff)
		}
		if len(sessions) != 1 {
			t.Errorf("%s: sessions %v, want one throughout", tc.file, sessions)
		}
	}
}

// Compact sends "/compact" as the turn's prompt on the session and
// reports what claude did: compacted (the recording of a resumed process)
// or not, with claude's reason.
func TestClaudeCompact(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		recording  string
		wantErr    error
		wantReason string
		wantTokens int64
	}{
		{"compact_resume.jsonl", nil, "", 2558},
		{"compact_print.jsonl", ErrNotCompacted, "Not enough messages to compact.", 0},
	} {
		t.Run(tc.recording, func(t *testing.T) {
			t.Parallel()
			stream, err := filepath.Abs(filepath.Join(claudeTestdata, tc.recording))
			if err != nil {
				t.Fatal(err)
			}
			bin, dir := fakeCLI(t, fakeStream, map[string]string{"STREAM": stream})
			c := newTestClaude(t, bin)
			res, err := c.Compact(t.Context(), Request{SessionID: "a24a7d4e-0636-4e58-ae01-ac5bc9a2aec0", WorkDir: t.TempDir(), Prompt: "ignored"})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Compact error = %v, want %v", err, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), tc.wantReason) {
				t.Errorf("error %q lacks claude's reason %q", err, tc.wantReason)
			}
			if res.ContextTokens != tc.wantTokens {
				t.Errorf("context after = %d tokens, want %d", res.ContextTokens, tc.wantTokens)
			}
			rec := readRecord(t, dir)
			if rec.Stdin != "/compact" {
				t.Errorf("prompt %q, want /compact", rec.Stdin)
			}
			if !slices.Contains(rec.Args, "--resume") {
				t.Errorf("args %q do not resume the session", rec.Args)
			}
		})
	}
	if _, err := (&Claude{}).Compact(t.Context(), Request{}); !errors.Is(err, ErrNotCompacted) {
		t.Errorf("Compact without a session: %v, want ErrNotCompacted", err)
	}
}
