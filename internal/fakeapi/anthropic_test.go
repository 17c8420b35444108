package fakeapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// mainBody is a minimal conversation request: it offers a tool.
const mainBody = `{"model":"claude-test","max_tokens":1024,"stream":true,
	"system":[{"type":"text","text":"You are a test."}],
	"tools":[{"name":"Write","input_schema":{"type":"object"}}],
	"messages":[{"role":"user","content":"hi"}]}`

// helperBody is a side request: no tools, no thinking.
const helperBody = `{"model":"claude-test","max_tokens":1024,"stream":true,
	"system":[{"type":"text","text":"You are a test."}],"tools":[],
	"messages":[{"role":"user","content":"summarize this page"}]}`

// sseEvent is one event of a stream, its data decoded.
type sseEvent struct {
	Event string
	Data  map[string]any
}

// post sends body to the fake's path and returns the response; the caller
// closes its body.
func post(t *testing.T, ctx context.Context, a *Anthropic, path, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.URL()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Api-Key", "sk-test")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// readSSE parses a whole stream strictly: every event is an "event:" line,
// one "data:" line of JSON whose type is the event's name, and a blank line.
func readSSE(t *testing.T, r io.Reader) []sseEvent {
	t.Helper()
	var events []sseEvent
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		name, ok := strings.CutPrefix(sc.Text(), "event: ")
		if !ok {
			t.Fatalf("line %q, want an event: line", sc.Text())
		}
		if !sc.Scan() {
			t.Fatalf("event %s has no data line", name)
		}
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			t.Fatalf("event %s: line %q, want a data: line", name, sc.Text())
		}
		ev := sseEvent{Event: name}
		if err := json.Unmarshal([]byte(data), &ev.Data); err != nil {
			t.Fatalf("event %s: data %q: %v", name, data, err)
		}
		if ev.Data["type"] != name {
			t.Errorf("event %s carries type %v", name, ev.Data["type"])
		}
		if sc.Scan() && sc.Text() != "" {
			t.Fatalf("event %s: line %q, want a blank line", name, sc.Text())
		}
		events = append(events, ev)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return events
}

// streamOf posts a main request and parses the streamed answer.
func streamOf(t *testing.T, a *Anthropic) []sseEvent {
	t.Helper()
	resp := post(t, t.Context(), a, "/v1/messages", mainBody)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return readSSE(t, resp.Body)
}

// block is what a stream says about one content block.
type block struct {
	Type, Text, ID, Name, JSON string
}

// summarize folds a stream into its event names, blocks and stop reason.
func summarize(t *testing.T, events []sseEvent) (names []string, blocks []block, stop string) {
	t.Helper()
	for _, ev := range events {
		names = append(names, ev.Event)
		switch ev.Event {
		case "content_block_start":
			cb := ev.Data["content_block"].(map[string]any)
			b := block{Type: cb["type"].(string)}
			if b.Type == "tool_use" {
				b.ID, b.Name = cb["id"].(string), cb["name"].(string)
			}
			if int(ev.Data["index"].(float64)) != len(blocks) {
				t.Errorf("block %d starts with index %v", len(blocks), ev.Data["index"])
			}
			blocks = append(blocks, b)
		case "content_block_delta":
			d := ev.Data["delta"].(map[string]any)
			b := &blocks[int(ev.Data["index"].(float64))]
			switch d["type"] {
			case "text_delta":
				b.Text += d["text"].(string)
			case "input_json_delta":
				b.JSON += d["partial_json"].(string)
			}
		case "message_delta":
			stop = ev.Data["delta"].(map[string]any)["stop_reason"].(string)
		}
	}
	return names, blocks, stop
}

func TestStreamText(t *testing.T) {
	a := StartAnthropic(t, Text("Hello from the fake API."))
	events := streamOf(t, a)
	names, blocks, stop := summarize(t, events)

	wantNames := []string{"message_start", "content_block_start", "content_block_delta", "content_block_delta",
		"content_block_delta", "content_block_stop", "message_delta", "message_stop"}
	if diff := cmp.Diff(wantNames, names); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]block{{Type: "text", Text: "Hello from the fake API."}}, blocks); diff != "" {
		t.Errorf("blocks (-want +got):\n%s", diff)
	}
	if stop != "end_turn" {
		t.Errorf("stop_reason = %q, want end_turn", stop)
	}
	msg := events[0].Data["message"].(map[string]any)
	if msg["id"] != "msg_fake_0001" || msg["model"] != "claude-test" || msg["role"] != "assistant" {
		t.Errorf("message_start message = %v", msg)
	}
	if _, ok := msg["usage"].(map[string]any)["input_tokens"]; !ok {
		t.Errorf("message_start has no usage.input_tokens: %v", msg)
	}
}

func TestStreamToolUse(t *testing.T) {
	input := map[string]any{"file_path": "/abs/memory.md", "content": "- likes tea\n"}
	turn := ToolUse("Write", input)
	turn.Text = "I'll save that."
	a := StartAnthropic(t, turn, ToolUse("Read", map[string]string{"file_path": "/abs/memory.md"}))

	_, blocks, stop := summarize(t, streamOf(t, a))
	if stop != "tool_use" {
		t.Errorf("stop_reason = %q, want tool_use", stop)
	}
	if len(blocks) != 2 {
		t.Fatalf("got %d blocks, want text and tool_use: %+v", len(blocks), blocks)
	}
	var gotInput map[string]any
	if err := json.Unmarshal([]byte(blocks[1].JSON), &gotInput); err != nil {
		t.Fatalf("partial_json joins to %q: %v", blocks[1].JSON, err)
	}
	if diff := cmp.Diff(input, gotInput); diff != "" {
		t.Errorf("tool input (-want +got):\n%s", diff)
	}
	blocks[1].JSON = ""
	want := []block{{Type: "text", Text: "I'll save that."}, {Type: "tool_use", ID: "toolu_fake_0001", Name: "Write"}}
	if diff := cmp.Diff(want, blocks); diff != "" {
		t.Errorf("blocks (-want +got):\n%s", diff)
	}

	// A tool call without text is the only block; ids keep counting.
	_, blocks, _ = summarize(t, streamOf(t, a))
	want = []block{{Type: "tool_use", ID: "toolu_fake_0002", Name: "Read", JSON: `{"file_path":"/abs/memory.md"}`}}
	if diff := cmp.Diff(want, blocks); diff != "" {
		t.Errorf("second turn blocks (-want +got):\n%s", diff)
	}
}

func TestScriptOrderAndExhaustion(t *testing.T) {
	a := StartAnthropic(t, Text("one"), Text("two"))
	a.Add(Text("three"))

	var got []string
	for range 4 {
		_, blocks, _ := summarize(t, streamOf(t, a))
		got = append(got, blocks[0].Text)
	}
	want := []string{"one", "two", "three", ScriptExhaustedText}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("replies (-want +got):\n%s", diff)
	}
	if n := a.Exhausted(); n != 1 {
		t.Errorf("Exhausted() = %d, want 1", n)
	}
	if n := a.Remaining(); n != 0 {
		t.Errorf("Remaining() = %d, want 0", n)
	}
	var turns []int
	for _, r := range a.MainRequests() {
		turns = append(turns, r.Turn)
	}
	if diff := cmp.Diff([]int{0, 1, 2, -1}, turns); diff != "" {
		t.Errorf("turns (-want +got):\n%s", diff)
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		turn       Turn
		wantStatus int
		wantBody   string
	}{
		{Error(401, "invalid x-api-key"), 401,
			`{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`},
		{Error(500, "Internal server error"), 500,
			`{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`},
		{Error(529, "Overloaded"), 529,
			`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`},
		{Turn{Error: &APIError{Status: 400, Type: "invalid_request_error", Message: "prompt is too long"}}, 400,
			`{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.turn.Error.Message, func(t *testing.T) {
			t.Parallel()
			a := StartAnthropic(t, tt.turn)
			resp := post(t, t.Context(), a, "/v1/messages", mainBody)
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status = %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			if got := strings.TrimSpace(string(body)); got != tt.wantBody {
				t.Errorf("body = %s\nwant   %s", got, tt.wantBody)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("content type = %q", ct)
			}
		})
	}
}

func TestNonStreaming(t *testing.T) {
	turn := ToolUse("Write", map[string]string{"file_path": "/m.md"})
	turn.Text = "Saving."
	a := StartAnthropic(t, turn)
	resp := post(t, t.Context(), a, "/v1/messages", strings.Replace(mainBody, `"stream":true`, `"stream":false`, 1))
	defer resp.Body.Close()
	var got map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	delete(got, "usage")
	want := map[string]any{
		"id": "msg_fake_0001", "type": "message", "role": "assistant", "model": "claude-test",
		"content": []any{
			map[string]any{"type": "text", "text": "Saving."},
			map[string]any{"type": "tool_use", "id": "toolu_fake_0001", "name": "Write",
				"input": map[string]any{"file_path": "/m.md"}},
		},
		"stop_reason": "tool_use", "stop_sequence": nil,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("message (-want +got):\n%s", diff)
	}
}

func TestSideRequestsLeaveScript(t *testing.T) {
	a := StartAnthropic(t, Text("the reply"))
	ctx := t.Context()

	resp := post(t, ctx, a, "/v1/messages?beta=true", helperBody)
	_, blocks, _ := summarize(t, readSSE(t, resp.Body))
	resp.Body.Close()
	if len(blocks) != 1 || blocks[0].Text != helperText {
		t.Errorf("helper got %+v, want %q", blocks, helperText)
	}

	resp = post(t, ctx, a, "/v1/messages/count_tokens?beta=true", mainBody)
	var count struct {
		InputTokens int `json:"input_tokens"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&count); err != nil || count.InputTokens <= 0 {
		t.Errorf("count_tokens = %+v, %v", count, err)
	}
	resp.Body.Close()

	for _, path := range []string{"/", "/api/hello"} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodHead, a.URL()+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("HEAD %s = %d, want 200", path, resp.StatusCode)
		}
	}
	resp = post(t, ctx, a, "/v1/nowhere", "{}")
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown path = %d, want 404", resp.StatusCode)
	}

	_, blocks, _ = summarize(t, streamOf(t, a))
	if blocks[0].Text != "the reply" {
		t.Errorf("main request got %q after side requests, want the first turn", blocks[0].Text)
	}
	var kinds []Kind
	for _, r := range a.Requests() {
		kinds = append(kinds, r.Kind)
	}
	want := []Kind{Helper, CountTokens, Other, Other, Other, Main}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("kinds (-want +got):\n%s", diff)
	}
}

// TestIsMainRecorded classifies request bodies claude 2.1.330 really sent
// (testdata/claude/requests, long strings shortened).
func TestIsMainRecorded(t *testing.T) {
	tests := []struct {
		file string
		want Kind
	}{
		{"main.json", Main},
		{"main_resumed.json", Main},
		{"helper_webfetch.json", Helper},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "claude", "requests", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			var rec struct {
				Path, Query string
				Body        json.RawMessage
			}
			if err := json.Unmarshal(data, &rec); err != nil {
				t.Fatal(err)
			}
			a := StartAnthropic(t)
			resp := post(t, t.Context(), a, rec.Path+"?"+rec.Query, string(rec.Body))
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if got := a.Requests()[0].Kind; got != tt.want {
				t.Errorf("kind = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestSetIsMain(t *testing.T) {
	a := StartAnthropic(t, Text("scripted"))
	a.SetIsMain(func(r Request) bool { return strings.Contains(r.Prompt(), "summarize") })
	resp := post(t, t.Context(), a, "/v1/messages", helperBody)
	_, blocks, _ := summarize(t, readSSE(t, resp.Body))
	resp.Body.Close()
	if blocks[0].Text != "scripted" {
		t.Errorf("reply = %q, want the scripted turn", blocks[0].Text)
	}
}

func TestStallEndsWhenClientGoes(t *testing.T) {
	tests := []struct {
		name string
		turn Turn
		// headers: Do returns before the cancel; firstText: the stream
		// carries this text before it stalls.
		headers   bool
		firstText string
	}{
		{name: "before headers", turn: HangNoHeaders()},
		{name: "after headers", turn: Hang(), headers: true},
		{name: "mid stream", turn: Turn{Text: "abcdef", Stall: StallMidStream}, headers: true, firstText: "ab"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := StartAnthropic(t, tt.turn)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, a.URL()+"/v1/messages", strings.NewReader(mainBody))

			type result struct {
				resp *http.Response
				err  error
			}
			done := make(chan result, 1)
			go func() {
				resp, err := http.DefaultClient.Do(req)
				done <- result{resp, err}
			}()
			wait, stop := context.WithTimeout(t.Context(), 10*time.Second)
			defer stop()
			if _, err := a.WaitMain(wait, 1); err != nil {
				t.Fatal(err)
			}

			if tt.headers {
				var res result
				select {
				case res = <-done:
				case <-wait.Done():
					t.Fatal("no response headers")
				}
				if res.err != nil {
					t.Fatal(res.err)
				}
				defer res.resp.Body.Close()
				if tt.firstText != "" {
					got := readUntilText(t, res.resp.Body)
					if got != tt.firstText {
						t.Errorf("first text = %q, want %q", got, tt.firstText)
					}
				}
			}
			cancel()
			if !tt.headers {
				if res := <-done; !errors.Is(res.err, context.Canceled) {
					t.Errorf("Do after cancel: %v, want context.Canceled", res.err)
				}
			}
			if err := a.WaitIdle(wait); err != nil {
				t.Errorf("handler still running after the client went away: %v", err)
			}
		})
	}
}

// readUntilText reads a stream up to its first text_delta and returns it.
func readUntilText(t *testing.T, r io.Reader) string {
	t.Helper()
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Delta struct{ Type, Text string }
		}
		if json.Unmarshal([]byte(data), &ev) == nil && ev.Delta.Type == "text_delta" {
			return ev.Delta.Text
		}
	}
	t.Fatalf("stream ended without text: %v", sc.Err())
	return ""
}

func TestCloseEndsStall(t *testing.T) {
	a := NewAnthropic(Hang())
	defer a.Close()
	errc := make(chan error, 1)
	go func() {
		resp, err := http.Post(a.URL()+"/v1/messages", "application/json", strings.NewReader(mainBody))
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		errc <- err
	}()
	wait, stop := context.WithTimeout(t.Context(), 10*time.Second)
	defer stop()
	if _, err := a.WaitMain(wait, 1); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() { a.Close(); close(closed) }()
	select {
	case <-closed:
	case <-wait.Done():
		t.Fatal("Close did not return while a request was stalled")
	}
	// The stalled stream ends, cleanly or not, once the server is gone.
	select {
	case <-errc:
	case <-wait.Done():
		t.Fatal("client still reading after Close")
	}
}

func TestRecording(t *testing.T) {
	a := StartAnthropic(t, Text("ok"))
	body := `{"model":"claude-opus-5-5","max_tokens":128000,"stream":true,"thinking":{"type":"adaptive"},
		"system":[{"type":"text","text":"billing"},{"type":"text","text":"You are Claude Code."},
			{"type":"text","text":"Rules.\n\n# Identity\nPERSONA-V1"}],
		"tools":[{"name":"Read"},{"name":"Write"}],
		"messages":[
			{"role":"user","content":[{"type":"text","text":"<system-reminder>x</system-reminder>"},{"type":"text","text":"Remember tea."}]},
			{"role":"system","content":"# Environment"},
			{"role":"assistant","content":[{"type":"text","text":"Saving."},{"type":"tool_use","id":"toolu_1","name":"Write","input":{"file_path":"/m.md"}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"written"},
				{"type":"tool_result","tool_use_id":"toolu_2","is_error":true,"content":[{"type":"text","text":"denied"}]}]}
		]}`
	resp := post(t, t.Context(), a, "/v1/messages?beta=true", body)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	reqs := a.MainRequests()
	if len(reqs) != 1 {
		t.Fatalf("got %d main requests, want 1", len(reqs))
	}
	r := reqs[0]
	type summary struct {
		Method, Path, Query, APIKey, Model string
		MaxTokens                          int
		Stream                             bool
		Tools                              []string
		SystemBlocks                       []string
		System, Prompt                     string
		Messages                           []Message
	}
	got := summary{r.Method, r.Path, r.Query, r.Header.Get("X-Api-Key"), r.Model(), r.MaxTokens(), r.Stream(),
		r.Tools(), r.SystemBlocks(), r.System(), r.Prompt(), r.Messages()}
	want := summary{
		Method: "POST", Path: "/v1/messages", Query: "beta=true", APIKey: "sk-test", Model: "claude-opus-5-5",
		MaxTokens: 128000, Stream: true, Tools: []string{"Read", "Write"},
		SystemBlocks: []string{"billing", "You are Claude Code.", "Rules.\n\n# Identity\nPERSONA-V1"},
		System:       "billing\n\nYou are Claude Code.\n\nRules.\n\n# Identity\nPERSONA-V1",
		Prompt:       "written\ndenied",
		Messages: []Message{
			{Role: "user", Text: "<system-reminder>x</system-reminder>\nRemember tea.", Blocks: []Block{
				{Type: "text", Text: "<system-reminder>x</system-reminder>"}, {Type: "text", Text: "Remember tea."}}},
			{Role: "system", Text: "# Environment", Blocks: []Block{{Type: "text", Text: "# Environment"}}},
			{Role: "assistant", Text: "Saving.", Blocks: []Block{{Type: "text", Text: "Saving."},
				{Type: "tool_use", ID: "toolu_1", Name: "Write", Input: json.RawMessage(`{"file_path":"/m.md"}`)}}},
			{Role: "user", Text: "written\ndenied", Blocks: []Block{
				{Type: "tool_result", Text: "written", ToolUseID: "toolu_1"},
				{Type: "tool_result", Text: "denied", ToolUseID: "toolu_2", IsError: true}}},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("recorded request (-want +got):\n%s", diff)
	}
	if !bytes.Equal(r.Body, []byte(body)) || r.JSON["thinking"] == nil {
		t.Errorf("raw body or decoded JSON not kept")
	}
}

// An image block keeps its source: a test can check the bytes a CLI sent.
func TestRecordingImageBlock(t *testing.T) {
	a := StartAnthropic(t, Text("ok"))
	body := `{"model":"m","max_tokens":1,"stream":true,"tools":[{"name":"Read"}],
		"messages":[{"role":"user","content":[{"type":"text","text":"What is this?"},
			{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]}]}`
	resp := post(t, t.Context(), a, "/v1/messages", body)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	reqs := a.MainRequests()
	if len(reqs) != 1 {
		t.Fatalf("got %d main requests, want 1", len(reqs))
	}
	want := []Message{{Role: "user", Text: "What is this?", Blocks: []Block{
		{Type: "text", Text: "What is this?"},
		{Type: "image", Source: &Source{Type: "base64", MediaType: "image/png", Data: "iVBORw0KGgo="}}}}}
	if diff := cmp.Diff(want, reqs[0].Messages()); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
}

func TestWaitMain(t *testing.T) {
	a := StartAnthropic(t, Text("a"), Text("b"), Text("c"))
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			// Not post: t.Fatal must not run on this goroutine.
			resp, err := http.Post(a.URL()+"/v1/messages", "application/json", strings.NewReader(mainBody))
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		})
	}
	wait, stop := context.WithTimeout(t.Context(), 10*time.Second)
	defer stop()
	reqs, err := a.WaitMain(wait, 3)
	if err != nil || len(reqs) != 3 {
		t.Fatalf("WaitMain(3) = %d requests, %v", len(reqs), err)
	}
	wg.Wait()

	short, stop2 := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer stop2()
	reqs, err = a.WaitMain(short, 4)
	if !errors.Is(err, context.DeadlineExceeded) || len(reqs) != 3 {
		t.Errorf("WaitMain(4) = %d requests, %v; want 3 and a deadline error", len(reqs), err)
	}
}

func TestChunks(t *testing.T) {
	tests := []struct {
		s    string
		n    int
		want []string
	}{
		{"", 3, nil},
		{"a", 3, []string{"a"}},
		{"abcdef", 3, []string{"ab", "cd", "ef"}},
		{"abcdefg", 3, []string{"abc", "def", "g"}},
		{"héllo wörld", 2, []string{"héllo ", "wörld"}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, chunks(tt.s, tt.n)); diff != "" {
			t.Errorf("chunks(%q, %d) (-want +got):\n%s", tt.s, tt.n, diff)
		}
	}
}

func FuzzChunks(f *testing.F) {
	f.Add("abcdefg", 3)
	f.Add("héllo wörld", 2)
	f.Add("", 1)
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 1 || n > 64 || !utf8.ValidString(s) {
			t.Skip()
		}
		got := chunks(s, n)
		if strings.Join(got, "") != s || len(got) > n {
			t.Fatalf("chunks(%q, %d) = %q", s, n, got)
		}
		for _, c := range got {
			if c == "" || !utf8.ValidString(c) {
				t.Fatalf("chunks(%q, %d) has piece %q", s, n, c)
			}
		}
	})
}
