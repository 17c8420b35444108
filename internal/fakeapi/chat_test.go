package fakeapi

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// chatMainBody is a conversation request as opencode sends it: tools, a
// system message, streaming with usage.
const chatMainBody = `{"model":"fake-model","max_tokens":32000,"stream":true,"stream_options":{"include_usage":true},
	"tools":[{"type":"function","function":{"name":"write","parameters":{"type":"object"}}},{"type":"function","function":{"name":"read"}}],
	"messages":[{"role":"system","content":"You are opencode.\nInstructions from: /p.md\nBe Ada."},
		{"role":"user","content":"hi"},
		{"role":"assistant","content":"I'll save.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"write","arguments":"{\"filePath\":\"/m.md\"}"}}]},
		{"role":"tool","tool_call_id":"call_1","content":"Wrote file successfully."},
		{"role":"user","content":[{"type":"text","text":"and now?"},{"type":"text","text":"<system-reminder>x</system-reminder>"}]}]}`

// chatHelperBody is a side request: no tools (a title, a summary).
const chatHelperBody = `{"model":"fake-model","stream":true,"messages":[{"role":"system","content":"Make a title."},{"role":"user","content":"hi"}]}`

func chatPost(t *testing.T, ctx context.Context, c *Chat, path, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-test")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// chatChunks parses a stream strictly: "data: <json>" lines each followed
// by a blank line, ending with "data: [DONE]". done reports the [DONE].
func chatChunks(t *testing.T, r io.Reader) (chunks []chatCompletion, done bool) {
	t.Helper()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			t.Fatalf("line %q, want a data: line", sc.Text())
		}
		if sc.Scan() && sc.Text() != "" {
			t.Fatalf("line %q, want a blank line", sc.Text())
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		if done {
			t.Fatalf("chunk %q after [DONE]", data)
		}
		var c chatCompletion
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
		if c.Object != "chat.completion.chunk" || c.ID == "" || c.Model != "fake-model" {
			t.Errorf("chunk header %+v", c)
		}
		chunks = append(chunks, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return chunks, done
}

// chatFold is what a stream says, put together as a client would.
type chatFold struct {
	Role, Text, Finish string
	Calls              []ChatToolCall
	Usage              *chatUsage
}

func foldChat(t *testing.T, chunks []chatCompletion) chatFold {
	t.Helper()
	var f chatFold
	for _, c := range chunks {
		if c.Usage != nil {
			f.Usage = c.Usage
		}
		for _, ch := range c.Choices {
			if ch.FinishReason != nil {
				f.Finish = *ch.FinishReason
			}
			d := ch.Delta
			if d == nil {
				t.Fatal("a stream chunk choice without a delta")
			}
			if d.Role != "" {
				f.Role = d.Role
			}
			if d.Content != nil {
				f.Text += *d.Content
			}
			for _, tc := range d.ToolCalls {
				if tc.Index == nil {
					t.Fatal("tool call delta without an index")
				}
				for len(f.Calls) <= *tc.Index {
					f.Calls = append(f.Calls, ChatToolCall{})
				}
				call := &f.Calls[*tc.Index]
				if tc.ID != "" {
					call.ID = tc.ID
				}
				if tc.Function.Name != "" {
					call.Name = tc.Function.Name
				}
				call.Arguments += tc.Function.Arguments
			}
		}
	}
	return f
}

func chatStreamOf(t *testing.T, c *Chat, body string) (chatFold, bool) {
	t.Helper()
	resp := chatPost(t, t.Context(), c, "/v1/chat/completions", body)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	chunks, done := chatChunks(t, resp.Body)
	return foldChat(t, chunks), done
}

func TestChatStreamText(t *testing.T) {
	c := StartChat(t, Text("Hello, wörld! A longer reply."))
	got, done := chatStreamOf(t, c, chatMainBody)
	usage := &chatUsage{PromptTokens: 100, CompletionTokens: 10, TotalTokens: 110}
	want := chatFold{Role: "assistant", Text: "Hello, wörld! A longer reply.", Finish: "stop", Usage: usage}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stream (-want +got):\n%s", diff)
	}
	if !done {
		t.Error("no data: [DONE]")
	}
}

func TestChatStreamToolCalls(t *testing.T) {
	turn := ToolUse("write", map[string]any{"filePath": "/abs/memory.md", "content": "# Memory\n"})
	turn.Text = "I'll save that."
	turn.ToolCalls = append(turn.ToolCalls, ToolCall{ID: "call_mine", Name: "read", Input: json.RawMessage(`{"filePath":"/x"}`)})
	turn.Usage = &Usage{InputTokens: 5, CacheReadInputTokens: 20, OutputTokens: 3}
	c := StartChat(t, turn)
	got, _ := chatStreamOf(t, c, chatMainBody)
	usage := &chatUsage{PromptTokens: 25, CompletionTokens: 3, TotalTokens: 28}
	usage.PromptTokensDetails.CachedTokens = 20
	want := chatFold{Role: "assistant", Text: "I'll save that.", Finish: "tool_calls", Usage: usage, Calls: []ChatToolCall{
		{ID: "call_fake_0001", Name: "write", Arguments: `{"content":"# Memory\n","filePath":"/abs/memory.md"}`},
		{ID: "call_mine", Name: "read", Arguments: `{"filePath":"/x"}`},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stream (-want +got):\n%s", diff)
	}
}

func TestChatNoUsageUnlessAsked(t *testing.T) {
	c := StartChat(t, Text("hi"))
	body := strings.Replace(chatMainBody, `"include_usage":true`, `"include_usage":false`, 1)
	got, done := chatStreamOf(t, c, body)
	if got.Usage != nil || !done || got.Text != "hi" {
		t.Errorf("stream = %+v, done %v; want text, no usage chunk", got, done)
	}
}

func TestChatNonStreaming(t *testing.T) {
	c := StartChat(t, Turn{Text: "Plain.", ToolCalls: ToolUse("bash", map[string]string{"command": "ls"}).ToolCalls})
	resp := chatPost(t, t.Context(), c, "/v1/chat/completions", strings.Replace(chatMainBody, `"stream":true`, `"stream":false`, 1))
	defer resp.Body.Close()
	var got chatCompletion
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if got.Object != "chat.completion" || len(got.Choices) != 1 || got.Choices[0].Message == nil {
		t.Fatalf("completion = %+v", got)
	}
	m := got.Choices[0].Message
	if *m.Content != "Plain." || len(m.ToolCalls) != 1 || m.ToolCalls[0].Function.Name != "bash" ||
		m.ToolCalls[0].Function.Arguments != `{"command":"ls"}` || *got.Choices[0].FinishReason != "tool_calls" {
		t.Errorf("message = %+v", m)
	}
	if got.Usage == nil || got.Usage.TotalTokens != 110 {
		t.Errorf("usage = %+v", got.Usage)
	}
}

func TestChatHelperRequestsLeaveScript(t *testing.T) {
	c := StartChat(t, Text("scripted"))
	helper, _ := chatStreamOf(t, c, chatHelperBody)
	if helper.Text != helperText {
		t.Errorf("helper got %q, want %q", helper.Text, helperText)
	}
	if c.Remaining() != 1 {
		t.Fatalf("a helper request used the script: %d left", c.Remaining())
	}
	if main, _ := chatStreamOf(t, c, chatMainBody); main.Text != "scripted" {
		t.Errorf("main got %q", main.Text)
	}
	// After the script: the exhausted text, marked.
	if main, _ := chatStreamOf(t, c, chatMainBody); main.Text != ScriptExhaustedText {
		t.Errorf("exhausted main got %q", main.Text)
	}
	kinds := []Kind{}
	for _, r := range c.Requests() {
		kinds = append(kinds, r.Kind)
	}
	if diff := cmp.Diff([]Kind{Helper, Main, Main}, kinds); diff != "" {
		t.Errorf("kinds (-want +got):\n%s", diff)
	}
	if c.Exhausted() != 1 || c.MainRequests()[0].Turn != 0 || c.MainRequests()[1].Turn != -1 {
		t.Errorf("exhausted %d, turns %d %d", c.Exhausted(), c.MainRequests()[0].Turn, c.MainRequests()[1].Turn)
	}
	c.SetIsMain(func(ChatRequest) bool { return true })
	c.Add(Text("now main"))
	if got, _ := chatStreamOf(t, c, chatHelperBody); got.Text != "now main" {
		t.Errorf("with SetIsMain, helper body got %q", got.Text)
	}
}

func TestChatErrors(t *testing.T) {
	tests := []struct {
		turn           Turn
		status         int
		typ, code, msg string
	}{
		{Error(401, "Incorrect API key provided"), 401, "invalid_request_error", "invalid_api_key", "Incorrect API key provided"},
		{Error(429, "slow down"), 429, "rate_limit_error", "rate_limit_exceeded", "slow down"},
		{Error(500, "boom"), 500, "server_error", "", "boom"},
		{Turn{Error: &APIError{Status: 400, Type: "custom", Message: "bad"}}, 400, "custom", "", "bad"},
	}
	for _, tt := range tests {
		c := StartChat(t, tt.turn)
		resp := chatPost(t, t.Context(), c, "/v1/chat/completions", chatMainBody)
		var body struct {
			Error struct {
				Message string  `json:"message"`
				Type    string  `json:"type"`
				Code    *string `json:"code"`
			} `json:"error"`
		}
		err := json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		code := ""
		if body.Error.Code != nil {
			code = *body.Error.Code
		}
		if resp.StatusCode != tt.status || body.Error.Type != tt.typ || code != tt.code || body.Error.Message != tt.msg {
			t.Errorf("%d %+v, want %d %s %s %s", resp.StatusCode, body.Error, tt.status, tt.typ, tt.code, tt.msg)
		}
	}
}

func TestChatRequestAccessors(t *testing.T) {
	c := StartChat(t, Text("ok"))
	chatStreamOf(t, c, chatMainBody)
	r := c.MainRequests()[0]
	if r.Model() != "fake-model" || !r.Stream() || r.Header.Get("Authorization") != "Bearer sk-test" || r.Path != "/v1/chat/completions" {
		t.Errorf("request = %s %v %q %s", r.Model(), r.Stream(), r.Header.Get("Authorization"), r.Path)
	}
	if diff := cmp.Diff([]string{"write", "read"}, r.Tools()); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	if r.System() != "You are opencode.\nInstructions from: /p.md\nBe Ada." {
		t.Errorf("system = %q", r.System())
	}
	if r.Prompt() != "and now?\n<system-reminder>x</system-reminder>" {
		t.Errorf("prompt = %q", r.Prompt())
	}
	want := []ChatMessage{
		{Role: "system", Text: "You are opencode.\nInstructions from: /p.md\nBe Ada."},
		{Role: "user", Text: "hi"},
		{Role: "assistant", Text: "I'll save.", ToolCalls: []ChatToolCall{{ID: "call_1", Name: "write", Arguments: `{"filePath":"/m.md"}`}}},
		{Role: "tool", Text: "Wrote file successfully.", ToolCallID: "call_1"},
		{Role: "user", Text: "and now?\n<system-reminder>x</system-reminder>"},
	}
	if diff := cmp.Diff(want, r.Messages()); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	if !strings.Contains(c.Summary(), "#0 main POST /v1/chat/completions model=fake-model stream=true tools=2 messages=5 turn=0") {
		t.Errorf("summary = %q", c.Summary())
	}
}

func TestChatOtherRoutes(t *testing.T) {
	c := StartChat(t)
	resp, err := http.Get(c.BaseURL() + "/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /v1/models: %d", resp.StatusCode)
	}
	resp, err = http.Get(c.URL() + "/nope")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /nope: %d", resp.StatusCode)
	}
	for _, r := range c.Requests() {
		if r.Kind != Other {
			t.Errorf("%s is %s, want other", r.Path, r.Kind)
		}
	}
}

func TestChatStalls(t *testing.T) {
	for _, tt := range []struct {
		name  string
		turn  Turn
		chunk bool // a content chunk arrives before the stall
	}{
		{"after headers", Hang(), false},
		{"mid stream", Turn{Text: "Hello there", Stall: StallMidStream}, true},
		{"before headers", HangNoHeaders(), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := StartChat(t, tt.turn)
			ctx, cancel := context.WithCancel(t.Context())
			got := make(chan string, 1)
			go func() {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.BaseURL()+"/chat/completions", strings.NewReader(chatMainBody))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					got <- "no response"
					return
				}
				defer resp.Body.Close()
				br := bufio.NewReader(resp.Body)
				var seen strings.Builder
				for {
					line, err := br.ReadString('\n')
					seen.WriteString(line)
					if strings.Contains(seen.String(), `"content":"Hel`) || err != nil {
						break
					}
				}
				got <- seen.String()
			}()
			wctx, wcancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer wcancel()
			if _, err := c.WaitMain(wctx, 1); err != nil {
				t.Fatal(err)
			}
			if tt.chunk {
				select {
				case s := <-got:
					if !strings.Contains(s, `"content":"Hel`) {
						t.Errorf("before the stall: %q", s)
					}
				case <-wctx.Done():
					t.Fatal("no chunk before the stall")
				}
			}
			cancel()
			if err := c.WaitIdle(wctx); err != nil {
				t.Errorf("the stalled handler did not end when the client went: %v", err)
			}
		})
	}
}

func TestChatCloseEndsStall(t *testing.T) {
	c := NewChat(Hang())
	go func() {
		resp, err := http.Post(c.BaseURL()+"/chat/completions", "application/json", strings.NewReader(chatMainBody))
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := c.WaitMain(ctx, 1); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() { c.Close(); close(closed) }()
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("Close did not end the stalled request")
	}
	c.Close() // twice is fine
}
