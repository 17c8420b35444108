package backends

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// piRPCTestdata holds what `pi --mode rpc` printed (<name>.jsonl) and what
// it was sent (<name>.stdin.jsonl), recorded by the conformance suite.
const piRPCTestdata = "../testdata/pi/rpc"

// piRPCReplayed is one prompt of a recorded stream, replayed.
type piRPCReplayed struct {
	events  []string // kind:detail
	res     Result
	err     error
	context [2]int64 // from get_session_stats
}

// piRPCReplay feeds a recorded stdout to the mappers as the adapter does:
// a response to a prompt starts a turn; agent events go to it; the state
// and stats responses are read.
func piRPCReplay(t *testing.T, name string) (turns []*piRPCReplayed, states []piRPCState, responses []piRPCLine) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(piRPCTestdata, name))
	if err != nil {
		t.Fatal(err)
	}
	var turn *piRPCTurn
	var cur *piRPCReplayed
	end := func() {
		if turn != nil {
			cur.res, cur.err = turn.Result()
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		l, err := parsePiRPC(sc.Bytes())
		if err != nil {
			t.Fatalf("recorded line not parsed: %v: %s", err, sc.Bytes())
		}
		switch l.Kind {
		case piRPCResponse:
			responses = append(responses, l)
			switch l.Command {
			case "prompt":
				end()
				turn, cur = newPiRPCTurn(), &piRPCReplayed{}
				turns = append(turns, cur)
			case "get_state":
				states = append(states, parsePiRPCState(l.Data))
			case "get_session_stats":
				tok, win := piRPCContext(l.Data)
				cur.context = [2]int64{tok, win}
			}
		case piRPCEvent:
			if turn == nil {
				t.Fatalf("event before a prompt: %s", sc.Bytes())
			}
			evs, err := turn.Event(l, sc.Bytes())
			if err != nil {
				t.Fatalf("event line: %v", err)
			}
			for _, ev := range evs {
				d := ev.Text
				if ev.Tool != nil {
					d = ev.Tool.Name
				}
				cur.events = append(cur.events, ev.Kind.String()+":"+d)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	end()
	return turns, states, responses
}

func TestPiRPCReplayTurns(t *testing.T) {
	t.Parallel()
	turns, states, _ := piRPCReplay(t, "turns.jsonl")
	if len(turns) != 2 {
		t.Fatalf("turns = %d, want 2", len(turns))
	}
	if diff := cmp.Diff([]string{"text:First", "text: answ", "text:er."}, turns[0].events); diff != "" {
		t.Errorf("first turn events (-want +got):\n%s", diff)
	}
	if turns[0].err != nil || turns[0].res.Text != "First answer." {
		t.Errorf("first turn = %q, %v", turns[0].res.Text, turns[0].err)
	}
	want := []string{"tool_use:read", "tool_result:read", "text:The no", "text:tes sa", "text:y hi."}
	if diff := cmp.Diff(want, turns[1].events); diff != "" {
		t.Errorf("second turn events (-want +got):\n%s", diff)
	}
	r := turns[1].res
	if turns[1].err != nil || r.Text != "The notes say hi." || r.Turns != 2 {
		t.Errorf("second turn = %+v, %v", r, turns[1].err)
	}
	if r.Usage.InputTokens != 200 || r.Usage.OutputTokens != 20 || r.CostUSD <= 0 {
		t.Errorf("second turn usage = %+v cost %v, want pi's per-message usage summed", r.Usage, r.CostUSD)
	}
	if turns[1].context[1] != 128000 || turns[1].context[0] <= 0 {
		t.Errorf("context = %v, want tokens and the 128000 window from get_session_stats", turns[1].context)
	}
	if len(states) != 1 || states[0].SessionID == "" || states[0].Model != "fake/fake-model" || states[0].Streaming {
		t.Errorf("state = %+v", states)
	}
}

func TestPiRPCReplayAbort(t *testing.T) {
	t.Parallel()
	turns, _, responses := piRPCReplay(t, "abort.jsonl")
	if len(turns) != 2 {
		t.Fatalf("turns = %d, want 2", len(turns))
	}
	var e *Error
	if !errors.As(turns[0].err, &e) || e.Kind != KindCanceled {
		t.Errorf("aborted turn error = %v, want KindCanceled", turns[0].err)
	}
	if turns[1].err != nil || turns[1].res.Text != "After the stop." {
		t.Errorf("turn after the abort = %q, %v", turns[1].res.Text, turns[1].err)
	}
	// pi answers abort once the agent is idle: after the agent_end.
	var commands []string
	for _, r := range responses {
		commands = append(commands, r.Command)
	}
	if diff := cmp.Diff([]string{"prompt", "abort", "prompt"}, commands); diff != "" {
		t.Errorf("responses (-want +got):\n%s", diff)
	}
}

func TestPiRPCReplayResumeAndImage(t *testing.T) {
	t.Parallel()
	turns, states, _ := piRPCReplay(t, "resume.jsonl")
	if len(turns) != 1 || turns[0].res.Text != "Still here." || len(states) != 1 || states[0].SessionID == "" {
		t.Errorf("resume: turns %+v states %+v", turns, states)
	}
	turns, _, _ = piRPCReplay(t, "image.jsonl")
	if len(turns) != 1 || turns[0].res.Text != "A red dot." {
		t.Errorf("image: %+v", turns)
	}
}

// TestPiRPCPromptMatchesRecording checks the prompt command against what
// the recorded pi took: images as ImageContent, base64.
func TestPiRPCPromptMatchesRecording(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(piRPCTestdata, "image.stdin.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var recorded map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(b), &recorded); err != nil {
		t.Fatal(err)
	}
	png, _ := base64.StdEncoding.DecodeString(recorded["images"].([]any)[0].(map[string]any)["data"].(string))
	line := piRPCPrompt("gw-1", "What is this?", []Image{
		{Path: "/x/a.png", MediaType: "image/png", Data: png},
		{Path: "/x/unread.png", MediaType: "image/png"}, // no data: left out
	})
	var got map[string]any
	if err := json.Unmarshal(line, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(recorded, got); diff != "" {
		t.Errorf("prompt command (-recorded +built):\n%s", diff)
	}
	if line[len(line)-1] != '\n' {
		t.Error("command does not end with a newline")
	}
	if noImages := piRPCPrompt("gw-2", "hi", nil); bytes.Contains(noImages, []byte("images")) {
		t.Errorf("prompt without images = %s", noImages)
	}
}

func TestParsePiRPCKinds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		line string
		want piRPCLine
	}{
		{`{"id":"gw-1","type":"response","command":"prompt","success":false,"error":"No API key found for fake"}`,
			piRPCLine{Kind: piRPCResponse, Type: "response", ID: "gw-1", Command: "prompt", Error: "No API key found for fake"}},
		{`{"type":"extension_ui_request","id":"u1","method":"confirm","title":"Allow rm?"}`,
			piRPCLine{Kind: piRPCDialog, Type: "extension_ui_request", ID: "u1", Method: "confirm", Title: "Allow rm?"}},
		{`{"type":"extension_ui_request","id":"u2","method":"notify","message":"hi"}`,
			piRPCLine{Kind: piRPCNotice, Type: "extension_ui_request", ID: "u2", Method: "notify"}},
		{`{"type":"agent_start"}`, piRPCLine{Kind: piRPCEvent, Type: "agent_start"}},
	}
	for _, tt := range tests {
		got, err := parsePiRPC([]byte(tt.line))
		if err != nil {
			t.Fatalf("%s: %v", tt.line, err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.line, diff)
		}
	}
	if _, err := parsePiRPC([]byte("Loading extensions...")); !errors.Is(err, errNotJSON) {
		t.Errorf("non-JSON line error = %v, want errNotJSON", err)
	}
	if c := string(piRPCDialogCancel("u1")); c != `{"cancelled":true,"id":"u1","type":"extension_ui_response"}`+"\n" {
		t.Errorf("dialog cancel = %s", c)
	}
}

// TestPiRPCSettled covers what can follow an agent_end: pi's own retry
// and an automatic compaction keep the turn open.
func TestPiRPCSettled(t *testing.T) {
	t.Parallel()
	feed := func(turn *piRPCTurn, lines ...string) {
		for _, s := range lines {
			l, err := parsePiRPC([]byte(s))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := turn.Event(l, []byte(s)); err != nil {
				t.Fatal(err)
			}
		}
	}
	idle := piRPCState{}
	failed := `{"type":"agent_end","messages":[{"role":"assistant","content":[],"stopReason":"error","errorMessage":"529 overloaded"}]}`

	turn := newPiRPCTurn()
	feed(turn, `{"type":"agent_start"}`)
	if turn.AgentEnded() || turn.Settled(idle) {
		t.Error("settled before agent_end")
	}
	feed(turn, failed, `{"type":"auto_retry_start","attempt":1}`)
	if turn.AgentEnded() || turn.Settled(idle) {
		t.Error("settled while pi retries")
	}
	feed(turn, `{"type":"agent_start"}`, `{"type":"auto_retry_end","success":true}`,
		`{"type":"agent_end","messages":[{"role":"assistant","content":[{"type":"text","text":"ok"}],"stopReason":"stop"}]}`)
	if !turn.Settled(idle) {
		t.Error("not settled after the retried agent_end")
	}
	if turn.Settled(piRPCState{Streaming: true}) || turn.Settled(piRPCState{Compacting: true}) {
		t.Error("settled while pi says it streams or compacts")
	}

	turn = newPiRPCTurn()
	feed(turn, `{"type":"agent_start"}`, `{"type":"agent_end","messages":[]}`, `{"type":"compaction_start","reason":"threshold"}`)
	if turn.Settled(idle) {
		t.Error("settled during a compaction")
	}
	feed(turn, `{"type":"compaction_end","reason":"threshold","result":{"summary":"s"},"aborted":false}`)
	res, _ := turn.Result()
	if !turn.Settled(idle) || !res.Compacted {
		t.Errorf("after compaction_end: settled %v, compacted %v", turn.Settled(idle), res.Compacted)
	}
}

func TestPiRPCStartEmitsInit(t *testing.T) {
	t.Parallel()
	turn := newPiRPCTurn()
	evs := turn.Start("s-1")
	if len(evs) != 1 || evs[0].Kind != EventInit || evs[0].SessionID != "s-1" {
		t.Errorf("Start = %+v", evs)
	}
	if evs := newPiRPCTurn().Start(""); len(evs) != 0 {
		t.Errorf("Start without a session = %+v", evs)
	}
}

func FuzzParsePiRPC(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(piRPCTestdata, "*.jsonl"))
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		for _, line := range bytes.Split(b, []byte("\n")) {
			if len(line) < 4096 {
				f.Add(line)
			}
		}
	}
	f.Add([]byte(`{"type":"compaction_end","result":null}`))
	f.Add([]byte(`{"type":"response","id":7,"data":[1]}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		l, err := parsePiRPC(line)
		if err != nil {
			if !errors.Is(err, errNotJSON) {
				t.Fatalf("error %v does not wrap errNotJSON", err)
			}
			return
		}
		_ = parsePiRPCState(l.Data)
		_, _ = piRPCContext(l.Data)
		turn := newPiRPCTurn()
		if _, err := turn.Event(l, line); err != nil && !errors.Is(err, errNotJSON) {
			t.Fatalf("Event error %v does not wrap errNotJSON", err)
		}
		_ = turn.Settled(piRPCState{})
		_, _ = turn.Result()
	})
}

// TestPiRPCSteeredRun: a message steered into the run after the prompt's
// answer is injected as a user message and answered; the reply holds both
// answers, and the run is steerable until its last answer ends.
func TestPiRPCSteeredRun(t *testing.T) {
	t.Parallel()
	turn := newPiRPCTurn()
	steerable := []bool{}
	for _, s := range []string{
		`{"type":"agent_start"}`,
		`{"type":"message_start","message":{"role":"user","content":[{"type":"text","text":"P"}]}}`,
		`{"type":"message_end","message":{"role":"assistant","content":[{"type":"toolCall","id":"t1","name":"read"}],"stopReason":"toolUse"}}`,
		`{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"A"}],"stopReason":"stop"}}`,
		`{"type":"queue_update","steering":["X"],"followUp":[]}`,
		`{"type":"message_start","message":{"role":"user","content":[{"type":"text","text":"X"}]}}`,
		`{"type":"queue_update","steering":[],"followUp":[]}`,
		`{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"B"}],"stopReason":"stop"}}`,
		`{"type":"agent_end","messages":[{"role":"assistant","content":[{"type":"text","text":"B"}],"stopReason":"stop"}]}`,
	} {
		l, err := parsePiRPC([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := turn.Event(l, []byte(s)); err != nil {
			t.Fatal(err)
		}
		steerable = append(steerable, turn.Steerable())
	}
	if diff := cmp.Diff([]bool{true, true, true, false, false, true, true, false, false}, steerable); diff != "" {
		t.Errorf("steerable after each line (-want +got):\n%s", diff)
	}
	res, err := turn.Result()
	if err != nil || res.Text != "A\n\nB" {
		t.Errorf("result = %q, %v; want both answers", res.Text, err)
	}
	if turn.Queued() != 0 {
		t.Errorf("queued = %d, want 0", turn.Queued())
	}
	if c := string(piRPCSteer("gw-9", "X")); c != `{"id":"gw-9","message":"X","type":"steer"}`+"\n" {
		t.Errorf("steer command = %s", c)
	}
}

func TestPiRPCReplaySteer(t *testing.T) {
	t.Parallel()
	turns, states, _ := piRPCReplay(t, "steer.jsonl")
	if len(turns) != 1 {
		t.Fatalf("turns = %d, want 1", len(turns))
	}
	if r := turns[0].res; turns[0].err != nil || r.Text != "First.\n\nSecond." || r.Turns != 2 {
		t.Errorf("steered turn = %+v, %v; want both answers", r, turns[0].err)
	}
	if len(states) != 1 || states[0].PendingMsgs != 0 || states[0].Streaming {
		t.Errorf("state after the run = %+v", states)
	}
}
