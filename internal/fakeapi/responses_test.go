package fakeapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// responsesMainBody is a conversation request the way codex 0.169.0 sends
// it (trimmed): developer messages, the user's prompt, and tools, among
// them apply_patch as a custom (freeform) tool.
const responsesMainBody = `{"model":"gpt-5.5","stream":true,"store":false,
	"input":[
	  {"type":"message","role":"developer","content":[{"type":"input_text","text":"You are Codex."}]},
	  {"type":"message","role":"developer","content":[{"type":"input_text","text":"PERSONA"},{"type":"input_text","text":"<skills/>"}]},
	  {"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context/>"}]},
	  {"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]},
	  {"type":"message","role":"assistant","content":[{"type":"output_text","text":"hello"}]},
	  {"type":"function_call","name":"exec_command","arguments":"{\"cmd\":\"ls\"}","call_id":"c1"},
	  {"type":"function_call_output","call_id":"c1","output":"a.txt"},
	  {"type":"message","role":"user","content":[{"type":"input_text","text":"again"}]}
	],
	"tools":[{"type":"function","name":"exec_command","parameters":{}},{"type":"custom","name":"apply_patch","format":{}},{"type":"web_search"}]}`

// responsesHelperBody offers no tools.
const responsesHelperBody = `{"model":"gpt-5.5","stream":true,"input":"Name this thread","tools":[]}`

func responsesPost(t *testing.T, ctx context.Context, s *Responses, path, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+path, strings.NewReader(body))
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

// responsesStream posts body and parses the streamed answer strictly.
func responsesStream(t *testing.T, s *Responses, body string) []sseEvent {
	t.Helper()
	resp := responsesPost(t, t.Context(), s, "/v1/responses", body)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return readSSE(t, resp.Body)
}

// responsesFold reads a stream the way codex does: the text deltas, the
// completed output items, and the final usage.
func responsesFold(t *testing.T, events []sseEvent) (names []string, text string, items []map[string]any, usage map[string]any) {
	t.Helper()
	for i, ev := range events {
		names = append(names, ev.Event)
		if got := int(ev.Data["sequence_number"].(float64)); got != i {
			t.Errorf("event %d has sequence_number %d", i, got)
		}
		switch ev.Event {
		case "response.output_text.delta":
			text += ev.Data["delta"].(string)
		case "response.output_item.done":
			items = append(items, ev.Data["item"].(map[string]any))
		case "response.completed":
			r := ev.Data["response"].(map[string]any)
			usage = r["usage"].(map[string]any)
			if r["status"] != "completed" {
				t.Errorf("completed response has status %v", r["status"])
			}
			if n := len(r["output"].([]any)); n != len(items) {
				t.Errorf("completed response has %d output items, the stream %d", n, len(items))
			}
		}
	}
	return names, text, items, usage
}

func TestResponsesText(t *testing.T) {
	t.Parallel()
	s := StartResponses(t, Turn{Text: "Hello there, world.", Usage: &Usage{InputTokens: 7, CacheReadInputTokens: 3, OutputTokens: 2}})
	names, text, items, usage := responsesFold(t, responsesStream(t, s, responsesMainBody))
	want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.delta", "response.output_text.delta",
		"response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if text != "Hello there, world." {
		t.Errorf("text = %q", text)
	}
	if len(items) != 1 || items[0]["type"] != "message" || items[0]["role"] != "assistant" {
		t.Fatalf("items = %v", items)
	}
	wantUsage := map[string]any{"input_tokens": 10.0, "input_tokens_details": map[string]any{"cached_tokens": 3.0},
		"output_tokens": 2.0, "output_tokens_details": map[string]any{"reasoning_tokens": 0.0}, "total_tokens": 12.0}
	if diff := cmp.Diff(wantUsage, usage); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
	reqs := s.MainRequests()
	if len(reqs) != 1 || reqs[0].Turn != 0 || reqs[0].Header.Get("Authorization") != "Bearer sk-test" {
		t.Fatalf("requests = %+v", reqs)
	}
}

func TestResponsesToolCalls(t *testing.T) {
	t.Parallel()
	patch := "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch"
	patchJSON, _ := json.Marshal(patch)
	s := StartResponses(t, Turn{Text: "I'll do it.", ToolCalls: []ToolCall{
		{Name: "exec_command", Input: json.RawMessage(`{"cmd":"ls"}`)},
		{ID: "call_mine", Name: "apply_patch", Input: patchJSON},
	}})
	names, text, items, _ := responsesFold(t, responsesStream(t, s, responsesMainBody))
	if text != "I'll do it." {
		t.Errorf("text = %q", text)
	}
	for _, n := range []string{"response.function_call_arguments.delta", "response.function_call_arguments.done",
		"response.custom_tool_call_input.delta", "response.custom_tool_call_input.done"} {
		if !strings.Contains(strings.Join(names, " "), n) {
			t.Errorf("no %s event in %v", n, names)
		}
	}
	if len(items) != 3 {
		t.Fatalf("%d items", len(items))
	}
	fc, ctc := items[1], items[2]
	if fc["type"] != "function_call" || fc["name"] != "exec_command" || fc["arguments"] != `{"cmd":"ls"}` || fc["call_id"] != "call_fake_0001" {
		t.Errorf("function call = %v", fc)
	}
	if ctc["type"] != "custom_tool_call" || ctc["name"] != "apply_patch" || ctc["input"] != patch || ctc["call_id"] != "call_mine" {
		t.Errorf("custom tool call = %v", ctc)
	}
}

func TestResponsesErrors(t *testing.T) {
	t.Parallel()
	s := StartResponses(t, Error(401, "Incorrect API key provided"), Error(500, "boom"), Turn{Error: &APIError{Status: 429, Type: "tokens", Message: "slow"}})
	tests := []struct {
		status    int
		typ, code any
		msg       string
	}{
		{401, "invalid_request_error", "invalid_api_key", "Incorrect API key provided"},
		{500, "server_error", nil, "boom"},
		{429, "tokens", nil, "slow"},
	}
	for _, tt := range tests {
		resp := responsesPost(t, t.Context(), s, "/v1/responses", responsesMainBody)
		var body struct {
			Error map[string]any `json:"error"`
		}
		err := json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != tt.status {
			t.Fatalf("status %d, decode %v", resp.StatusCode, err)
		}
		want := map[string]any{"message": tt.msg, "type": tt.typ, "param": nil, "code": tt.code}
		if diff := cmp.Diff(want, body.Error); diff != "" {
			t.Errorf("HTTP %d error body (-want +got):\n%s", tt.status, diff)
		}
	}
}

func TestResponsesHelperAndExhausted(t *testing.T) {
	t.Parallel()
	s := StartResponses(t, Text("only turn"))
	_, text, _, _ := responsesFold(t, responsesStream(t, s, responsesHelperBody))
	if text != helperText {
		t.Errorf("helper text = %q", text)
	}
	if s.Remaining() != 1 {
		t.Errorf("a helper request used the script")
	}
	_, text, _, _ = responsesFold(t, responsesStream(t, s, responsesMainBody))
	if text != "only turn" {
		t.Errorf("text = %q", text)
	}
	_, text, _, _ = responsesFold(t, responsesStream(t, s, responsesMainBody))
	if text != ScriptExhaustedText || s.Exhausted() != 1 {
		t.Errorf("text = %q, exhausted = %d", text, s.Exhausted())
	}
	var kinds []Kind
	for _, r := range s.Requests() {
		kinds = append(kinds, r.Kind)
	}
	if diff := cmp.Diff([]Kind{Helper, Main, Main}, kinds); diff != "" {
		t.Errorf("kinds (-want +got):\n%s", diff)
	}
	s.SetIsMain(func(ResponsesRequest) bool { return true })
	s.Add(Text("now main"))
	if _, text, _, _ = responsesFold(t, responsesStream(t, s, responsesHelperBody)); text != "now main" {
		t.Errorf("with SetIsMain: text = %q", text)
	}
	if !strings.Contains(s.Summary(), "main POST /v1/responses model=gpt-5.5") {
		t.Errorf("summary:\n%s", s.Summary())
	}
}

func TestResponsesNonStreamingAndOtherRoutes(t *testing.T) {
	t.Parallel()
	s := StartResponses(t, Text("plain"))
	body := strings.Replace(responsesMainBody, `"stream":true`, `"stream":false`, 1)
	resp := responsesPost(t, t.Context(), s, "/responses", body)
	var obj map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&obj); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, decode %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	out := obj["output"].([]any)[0].(map[string]any)
	if obj["status"] != "completed" || out["content"].([]any)[0].(map[string]any)["text"] != "plain" {
		t.Errorf("response = %v", obj)
	}
	get, err := http.Get(s.URL() + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	get.Body.Close()
	if get.StatusCode != http.StatusOK {
		t.Errorf("GET /v1/models: %d", get.StatusCode)
	}
	other, err := http.Get(s.URL() + "/v1/responses") // a websocket attempt
	if err != nil {
		t.Fatal(err)
	}
	other.Body.Close()
	if other.StatusCode != http.StatusNotFound || s.Requests()[2].Kind != Other {
		t.Errorf("GET /v1/responses: %d", other.StatusCode)
	}
}

func TestResponsesRequestAccessors(t *testing.T) {
	t.Parallel()
	s := StartResponses(t, Text("ok"))
	responsesFold(t, responsesStream(t, s, responsesMainBody))
	r := s.MainRequests()[0]
	if r.Model() != "gpt-5.5" || !r.Stream() || r.Instructions() != "" {
		t.Errorf("model %q stream %v instructions %q", r.Model(), r.Stream(), r.Instructions())
	}
	if diff := cmp.Diff([]string{"exec_command", "apply_patch", "web_search"}, r.Tools()); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	if got := r.RoleText("developer"); got != "You are Codex.\n\nPERSONA\n<skills/>" {
		t.Errorf("developer text = %q", got)
	}
	if got := r.Prompt(); got != "again" {
		t.Errorf("prompt = %q", got)
	}
	want := "[message/developer] You are Codex.\n[message/developer] PERSONA\n<skills/>\n[message/user] <environment_context/>\n" +
		"[message/user] hi\n[message/assistant] hello\n[function_call exec_command] {\"cmd\":\"ls\"}\n" +
		"[function_call_output] a.txt\n[message/user] again\n"
	if diff := cmp.Diff(want, r.Transcript()); diff != "" {
		t.Errorf("transcript (-want +got):\n%s", diff)
	}
	str := ResponsesRequest{Exchange: Exchange{Body: []byte(`{"input":"just a string"}`)}}
	if str.Prompt() != "just a string" {
		t.Errorf("string input: prompt = %q", str.Prompt())
	}
}

// Every stall ends when the client goes away; WaitMain sees the request
// before it is answered; WaitIdle sees the handler end.
func TestResponsesStalls(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		stall Stall
		want  []string // event names received before the stall
	}{
		{"after headers", StallAfterHeaders, nil},
		{"before headers", StallBeforeHeaders, nil},
		{"mid stream", StallMidStream, []string{"response.created", "response.in_progress", "response.output_item.added",
			"response.content_part.added", "response.output_text.delta"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := StartResponses(t, Turn{Text: "never finished", Stall: tt.stall})
			ctx, cancel := context.WithCancel(t.Context())
			got := make(chan []string, 1)
			go func() {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+"/v1/responses", strings.NewReader(responsesMainBody))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					got <- nil
					return
				}
				defer resp.Body.Close()
				var names []string
				buf, _ := io.ReadAll(resp.Body) // ends when ctx is cancelled
				for _, line := range strings.Split(string(buf), "\n") {
					if name, ok := strings.CutPrefix(line, "event: "); ok {
						names = append(names, name)
					}
				}
				got <- names
			}()
			wctx, wcancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer wcancel()
			if _, err := s.WaitMain(wctx, 1); err != nil {
				t.Fatal(err)
			}
			select {
			case names := <-got:
				t.Fatalf("the stalled request ended by itself: %v", names)
			case <-time.After(200 * time.Millisecond): // a stall is the absence of an event
			}
			cancel()
			names := <-got
			if tt.stall == StallMidStream {
				if diff := cmp.Diff(tt.want, names); diff != "" {
					t.Errorf("events before the stall (-want +got):\n%s", diff)
				}
			}
			if err := s.WaitIdle(wctx); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestResponsesGateAndClose(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	s := NewResponses(Turn{Text: "after the gate", Gate: gate}, Hang())
	defer s.Close()
	done := make(chan string, 1)
	go func() {
		resp, err := http.Post(s.URL()+"/v1/responses", "application/json", strings.NewReader(responsesMainBody))
		if err != nil {
			done <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		done <- string(b)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.WaitMain(ctx, 1); err != nil {
		t.Fatal(err)
	}
	close(gate)
	if got := <-done; !strings.Contains(got, "after the gate") {
		t.Errorf("gated answer = %q", got)
	}
	// A hung request returns when the fake closes.
	errc := make(chan error, 1)
	go func() {
		resp, err := http.Post(s.URL()+"/v1/responses", "application/json", strings.NewReader(responsesMainBody))
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		errc <- err
	}()
	if _, err := s.WaitMain(ctx, 2); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("Close did not return with a hung request")
	}
	if err := <-errc; err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Logf("hung request ended with %v", err)
	}
}
