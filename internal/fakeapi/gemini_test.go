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

// geminiMainBody is a conversation request the way gemini 0.61.0 sends it
// (shortened): system instruction, history, tools.
const geminiMainBody = `{
 "contents": [
  {"role": "user", "parts": [{"text": "<session_context>…</session_context>"}, {"text": "Say hello."}]},
  {"role": "model", "parts": [{"text": "thinking…", "thought": true}, {"functionCall": {"name": "read_file", "args": {"file_path": "/w/memory.md"}}}]},
  {"role": "user", "parts": [{"functionResponse": {"name": "read_file", "response": {"output": "# Memory"}}}]}
 ],
 "systemInstruction": {"role": "user", "parts": [{"text": "You are a CLI agent."}, {"text": "## Identity"}]},
 "tools": [{"functionDeclarations": [{"name": "read_file"}, {"name": "write_file"}]}],
 "generationConfig": {"temperature": 1}
}`

const geminiStreamPath = "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"

func geminiPost(t *testing.T, url, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-goog-api-key", "k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// geminiSSE reads the data lines of an SSE response.
func geminiSSE(t *testing.T, resp *http.Response) []geminiResponse {
	t.Helper()
	var out []geminiResponse
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(strings.TrimRight(sc.Text(), "\r"), "data: ")
		if !ok {
			continue
		}
		var r geminiResponse
		if err := json.Unmarshal([]byte(data), &r); err != nil {
			t.Fatalf("bad chunk %q: %v", data, err)
		}
		out = append(out, r)
	}
	return out
}

func geminiJoinText(chunks []geminiResponse) string {
	var b strings.Builder
	for _, c := range chunks {
		for _, cand := range c.Candidates {
			for _, p := range cand.Content.Parts {
				if p.Text != nil {
					b.WriteString(*p.Text)
				}
			}
		}
	}
	return b.String()
}

func TestGeminiStreamText(t *testing.T) {
	t.Parallel()
	g := StartGemini(t, Text("Hello, world"))
	resp := geminiPost(t, g.URL()+geminiStreamPath, geminiMainBody)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	chunks := geminiSSE(t, resp)
	var text strings.Builder
	for i, c := range chunks {
		if len(c.Candidates) != 1 || c.Candidates[0].Content.Role != "model" || c.ModelVersion != "gemini-2.5-pro" {
			t.Errorf("chunk %d = %+v", i, c)
		}
		for _, p := range c.Candidates[0].Content.Parts {
			text.WriteString(*p.Text)
		}
		last := i == len(chunks)-1
		if (c.Candidates[0].FinishReason == "STOP") != last || (c.UsageMetadata != nil) != last {
			t.Errorf("chunk %d: finishReason %q, usage %v", i, c.Candidates[0].FinishReason, c.UsageMetadata)
		}
	}
	if len(chunks) != 3 || text.String() != "Hello, world" {
		t.Errorf("%d chunks with %q", len(chunks), text.String())
	}
	want := geminiUsage{PromptTokenCount: 100, CandidatesTokenCount: 10, TotalTokenCount: 110}
	if diff := cmp.Diff(&want, chunks[len(chunks)-1].UsageMetadata); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}

	reqs := g.Requests()
	if len(reqs) != 1 || reqs[0].Kind != Main || reqs[0].Turn != 0 || reqs[0].Query != "alt=sse" {
		t.Fatalf("requests = %+v", reqs)
	}
	r := reqs[0]
	if r.Model() != "gemini-2.5-pro" || !r.Stream() || r.System() != "You are a CLI agent.\n\n## Identity" {
		t.Errorf("model %q stream %t system %q", r.Model(), r.Stream(), r.System())
	}
	if diff := cmp.Diff([]string{"read_file", "write_file"}, r.Tools()); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	if got := r.Prompt(); got != "<session_context>…</session_context>\nSay hello." {
		t.Errorf("prompt = %q", got)
	}
	contents := r.Contents()
	if len(contents) != 3 || contents[1].Parts[0].FunctionCall != "read_file" || len(contents[1].Parts) != 1 ||
		contents[2].Parts[0].FunctionResponse != "read_file" || !strings.Contains(contents[2].Text, "# Memory") {
		t.Errorf("contents = %+v", contents)
	}
	if h := r.History(); !strings.Contains(h, "[user] <session_context>") || !strings.Contains(h, "[model] \n") {
		t.Errorf("history = %q", h)
	}
	if r.Header.Get("x-goog-api-key") != "k" {
		t.Errorf("header not recorded")
	}
}

func TestGeminiStreamToolCall(t *testing.T) {
	t.Parallel()
	turn := ToolUse("write_file", map[string]string{"file_path": "/w/memory.md", "content": "x"})
	turn.Text = "I'll save it."
	g := StartGemini(t, turn)
	chunks := geminiSSE(t, geminiPost(t, g.URL()+geminiStreamPath, geminiMainBody))
	last := chunks[len(chunks)-1]
	call := last.Candidates[0].Content.Parts[0].FunctionCall
	if call == nil || call.Name != "write_file" || string(call.Args) != `{"content":"x","file_path":"/w/memory.md"}` {
		t.Fatalf("last chunk = %+v", last)
	}
	if last.Candidates[0].FinishReason != "STOP" {
		t.Errorf("finishReason = %q", last.Candidates[0].FinishReason)
	}
	if len(chunks) != 4 {
		t.Errorf("%d chunks, want 3 text + 1 call", len(chunks))
	}
}

func TestGeminiErrorAndExhausted(t *testing.T) {
	t.Parallel()
	g := StartGemini(t, Error(401, "API key not valid."))
	resp := geminiPost(t, g.URL()+geminiStreamPath, geminiMainBody)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 401 || strings.TrimSpace(string(body)) != `{"error":{"code":401,"message":"API key not valid.","status":"UNAUTHENTICATED"}}` {
		t.Errorf("status %d body %s", resp.StatusCode, body)
	}
	chunks := geminiSSE(t, geminiPost(t, g.URL()+geminiStreamPath, geminiMainBody))
	if len(chunks) == 0 || *chunks[0].Candidates[0].Content.Parts[0].Text == "" || g.Exhausted() != 1 || g.Remaining() != 0 {
		t.Errorf("after the script: %+v, exhausted %d", chunks, g.Exhausted())
	}
	if geminiStatus(429) != "RESOURCE_EXHAUSTED" || geminiStatus(500) != "INTERNAL" || geminiStatus(403) != "PERMISSION_DENIED" {
		t.Error("status words")
	}
}

// Helper calls (JSON answers, no tools) get a fixed answer and leave the
// script alone.
func TestGeminiHelpers(t *testing.T) {
	t.Parallel()
	g := StartGemini(t, Text("main answer"))
	router := `{"contents":[{"role":"user","parts":[{"text":"route"}]}],"generationConfig":{"responseMimeType":"application/json",
		"responseJsonSchema":{"type":"object","properties":{"reasoning":{"type":"string"},"model_choice":{"type":"string","enum":["flash","pro"]},"score":{"type":"number"},"ok":{"type":"boolean"}}}}}`
	resp := geminiPost(t, g.URL()+"/v1beta/models/gemini-2.5-flash-lite:generateContent", router)
	var r geminiResponse
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	var answer map[string]any
	if err := json.Unmarshal([]byte(*r.Candidates[0].Content.Parts[0].Text), &answer); err != nil {
		t.Fatalf("helper answer is not JSON: %v", err)
	}
	if diff := cmp.Diff(map[string]any{"reasoning": "ok", "model_choice": "pro", "score": 1.0, "ok": false}, answer); diff != "" {
		t.Errorf("router answer (-want +got):\n%s", diff)
	}
	speaker := `{"contents":[],"generationConfig":{"responseJsonSchema":{"properties":{"next_speaker":{"type":"string"}}}}}`
	chunks := geminiSSE(t, geminiPost(t, g.URL()+geminiStreamPath, speaker))
	if got := geminiJoinText(chunks); got != `{"next_speaker":"user"}` {
		t.Errorf("next speaker answer = %s", got)
	}
	summary := `{"contents":[{"role":"user","parts":[{"text":"Summarize"}]}]}`
	resp = geminiPost(t, g.URL()+"/v1beta/models/gemini-2.5-flash-lite:generateContent", summary)
	r = geminiResponse{}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || *r.Candidates[0].Content.Parts[0].Text != helperText {
		t.Errorf("summary answer = %+v, %v", r, err)
	}
	count := geminiPost(t, g.URL()+"/v1beta/models/gemini-2.5-pro:countTokens", summary)
	if count.StatusCode != 200 {
		t.Errorf("countTokens status %d", count.StatusCode)
	}
	if g.Remaining() != 1 || len(g.MainRequests()) != 0 {
		t.Errorf("helpers used the script: remaining %d, main %d", g.Remaining(), len(g.MainRequests()))
	}
	var kinds []Kind
	for _, r := range g.Requests() {
		kinds = append(kinds, r.Kind)
	}
	if diff := cmp.Diff([]Kind{Helper, Helper, Helper, CountTokens}, kinds); diff != "" {
		t.Errorf("kinds (-want +got):\n%s", diff)
	}
	if !strings.Contains(g.Summary(), "helper POST /v1beta/models/gemini-2.5-flash-lite:generateContent model=gemini-2.5-flash-lite") {
		t.Errorf("summary:\n%s", g.Summary())
	}

	// SetIsMain overrides the rule.
	g.SetIsMain(func(GeminiRequest) bool { return true })
	chunks = geminiSSE(t, geminiPost(t, g.URL()+geminiStreamPath, summary))
	if got := geminiJoinText(chunks); got != "main answer" {
		t.Errorf("with SetIsMain, answer = %q", got)
	}
}

func TestGeminiNonStreamingMain(t *testing.T) {
	t.Parallel()
	g := StartGemini(t, Turn{Text: "whole", ToolCalls: ToolUse("glob", map[string]string{"pattern": "*"}).ToolCalls})
	resp := geminiPost(t, g.URL()+"/v1beta/models/gemini-2.5-pro:generateContent", geminiMainBody)
	var r geminiResponse
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	parts := r.Candidates[0].Content.Parts
	var text string
	for _, p := range parts[:len(parts)-1] {
		text += *p.Text
	}
	if text != "whole" || parts[len(parts)-1].FunctionCall.Name != "glob" || r.UsageMetadata == nil {
		t.Errorf("response = %+v", r)
	}
}

func TestGeminiStalls(t *testing.T) {
	t.Parallel()
	g := StartGemini(t, Hang(), Turn{Text: "abcdef", Stall: StallMidStream}, HangNoHeaders())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// After headers: the status arrives, the body never does.
	client := &http.Client{Timeout: 300 * time.Millisecond}
	req, _ := http.NewRequest(http.MethodPost, g.URL()+geminiStreamPath, strings.NewReader(geminiMainBody))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Errorf("status %d", resp.StatusCode)
	}
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Error("the stalled body ended")
	}
	resp.Body.Close()

	// Mid-stream: one chunk, then nothing.
	req, _ = http.NewRequest(http.MethodPost, g.URL()+geminiStreamPath, strings.NewReader(geminiMainBody))
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	if err != nil || !strings.Contains(line, `"text":"ab"`) {
		t.Errorf("first line %q, %v", line, err)
	}
	if _, err := io.ReadAll(br); err == nil {
		t.Error("the stalled stream ended")
	}
	resp.Body.Close()

	// Before headers: nothing at all.
	req, _ = http.NewRequest(http.MethodPost, g.URL()+geminiStreamPath, strings.NewReader(geminiMainBody))
	if resp, err := client.Do(req); err == nil {
		resp.Body.Close()
		t.Error("got a response from a stall before headers")
	}
	if _, err := g.WaitMain(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if err := g.WaitIdle(ctx); err != nil {
		t.Errorf("stalled handlers did not end with their clients: %v", err)
	}
}

func TestGeminiGateAndClose(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	g := NewGemini(Turn{Text: "late", Gate: gate})
	done := make(chan []geminiResponse, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, g.URL()+geminiStreamPath, strings.NewReader(geminiMainBody))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- nil
			return
		}
		defer resp.Body.Close()
		done <- geminiSSE(t, resp)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := g.WaitMain(ctx, 1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
		t.Fatal("answered before the gate opened")
	default:
	}
	close(gate)
	if chunks := <-done; len(chunks) == 0 {
		t.Error("no answer after the gate opened")
	}
	g.Close()
	g.Close() // twice is fine
	if _, err := g.WaitMain(ctx, 1); err != nil {
		t.Error(err)
	}
}

func TestGeminiUnknownRoute(t *testing.T) {
	t.Parallel()
	g := StartGemini(t)
	resp, err := http.Get(g.URL() + "/v1beta/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 || g.Requests()[0].Kind != Other {
		t.Errorf("status %d, kind %s", resp.StatusCode, g.Requests()[0].Kind)
	}
}
