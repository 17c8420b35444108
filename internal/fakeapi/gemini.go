package fakeapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Gemini fakes the Gemini API (generativelanguage.googleapis.com) that the
// gemini CLI speaks: POST /v1beta/models/{model}:streamGenerateContent
// (?alt=sse, an SSE stream of GenerateContentResponse chunks),
// :generateContent (one JSON response) and :countTokens. Its conversation
// is the same kind of script of Turns as Anthropic's: each Main request takes
// the next turn; Helper requests (the CLI's side calls: model routing,
// next-speaker checks, session summaries, which ask for JSON or offer no
// tools) get a fixed answer and leave the script alone. Every request is
// recorded as a GeminiRequest.
//
// A Gemini is safe for concurrent use.
type Gemini struct {
	*recorder[GeminiRequest]
	server *httptest.Server

	// Guarded by the recorder\'s mu:
	replies int // response ids handed out
}

// GeminiRequest is one request as the Gemini fake received it. Its Header,
// Body and JSON are shared with the fake's log: read them, don't change them.
type GeminiRequest struct {
	Exchange
}

// NewGemini starts a Gemini fake with the given script on 127.0.0.1 and a
// free port. The caller must Close it. Tests usually want StartGemini.
func NewGemini(turns ...Turn) *Gemini {
	g := &Gemini{recorder: newRecorder(turns, GeminiIsMain, func(r *GeminiRequest) *Exchange { return &r.Exchange })}
	g.server = httptest.NewServer(g)
	return g
}

// StartGemini is NewGemini for a test: the fake is closed when the test
// ends, and if the test failed its request log is written to the test log.
func StartGemini(tb testing.TB, turns ...Turn) *Gemini {
	tb.Helper()
	g := NewGemini(turns...)
	tb.Cleanup(func() {
		g.Close()
		if tb.Failed() {
			tb.Logf("fakeapi: %d gemini requests:\n%s", len(g.Requests()), g.Summary())
		}
	})
	return g
}

// URL is the base URL, e.g. http://127.0.0.1:41234, for
// GOOGLE_GEMINI_BASE_URL.
func (g *Gemini) URL() string { return g.server.URL }

// Close makes stalled requests return, then shuts the server down and
// waits for every handler to finish. It is safe to call more than once.
func (g *Gemini) Close() {
	g.shut()
	g.server.Close()
}

// Summary is a line per request (kind, method, path, tools, turn), for
// failure messages.
func (g *Gemini) Summary() string {
	var b strings.Builder
	for _, r := range g.Requests() {
		fmt.Fprintf(&b, "#%d %s %s %s", r.Seq, r.Kind, r.Method, r.Path)
		if r.Model() != "" {
			fmt.Fprintf(&b, " model=%s tools=%d json=%t", r.Model(), len(r.Tools()), r.WantsJSON())
		}
		switch {
		case r.Exhausted:
			b.WriteString(" (script exhausted)")
		case r.Turn >= 0:
			fmt.Fprintf(&b, " turn=%d", r.Turn)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// GeminiIsMain is the default rule that tells a conversation request from
// a helper request: a generate call is Main when it offers function
// declarations (tools) and does not ask for a JSON answer.
//
// What gemini 0.61.0 sends (seen against this fake, 2026-11, with -p, -o
// stream-json and -m): one streamGenerateContent per model turn, each with
// systemInstruction, the whole history in contents, the tool declarations
// (read_file, write_file, ... depending on the approval mode) and a
// thinkingConfig. Its side calls (the model router when -m is absent, the
// next-speaker check, session summaries) go through its "base LLM client":
// generateContent with responseMimeType application/json and/or no tools,
// usually to a flash or flash-lite model. None of them showed up in the
// runs with -m recorded in testdata/gemini.
func GeminiIsMain(r GeminiRequest) bool {
	return r.Generate() && len(r.Tools()) > 0 && !r.WantsJSON()
}

// ServeHTTP answers one request and records it.
func (g *Gemini) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req := GeminiRequest{Exchange: readExchange(r)}
	body := req.Body
	switch {
	case r.Method == http.MethodPost && req.Generate():
		req.Kind = Helper
		if g.isMain(req) {
			req.Kind = Main
		}
	case r.Method == http.MethodPost && req.method() == "countTokens":
		req.Kind = CountTokens
	}

	turn := g.record(&req)
	defer g.done()

	switch req.Kind {
	case Main:
		g.answer(w, r, &req, turn)
	case Helper:
		g.answer(w, r, &req, Text(geminiHelperText(req)))
	case CountTokens:
		writeJSON(w, http.StatusOK, map[string]int{"totalTokens": estimateTokens(body)})
	default:
		writeGeminiError(w, APIError{Status: http.StatusNotFound, Message: "fakeapi: no route for " + r.Method + " " + r.URL.Path})
	}
}

// answer writes turn as the response to req: an error, a stall, an SSE
// stream or one JSON response.
func (g *Gemini) answer(w http.ResponseWriter, r *http.Request, req *GeminiRequest, turn Turn) {
	if turn.Gate != nil {
		select {
		case <-turn.Gate:
		case <-r.Context().Done():
			return
		case <-g.closed:
			return
		}
	}
	if turn.Error != nil {
		writeGeminiError(w, *turn.Error)
		return
	}
	g.mu.Lock()
	g.replies++
	id := fmt.Sprintf("resp_fake_%04d", g.replies)
	g.mu.Unlock()
	usage := DefaultUsage
	if turn.Usage != nil {
		usage = *turn.Usage
	}
	chunks := geminiChunks(id, req.Model(), turn, usage)
	if turn.Stall == StallBeforeHeaders {
		g.stall(r.Context())
		return
	}
	if req.method() != "streamGenerateContent" {
		if turn.Stall != NoStall {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_ = http.NewResponseController(w).Flush()
			g.stall(r.Context())
			return
		}
		writeJSON(w, http.StatusOK, mergeGeminiChunks(chunks))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	if turn.Stall == StallAfterHeaders {
		g.stall(r.Context())
		return
	}
	for i, c := range chunks {
		b, _ := json.Marshal(c)
		fmt.Fprintf(w, "data: %s\r\n\r\n", b)
		_ = rc.Flush()
		if i == 0 && turn.Stall == StallMidStream {
			g.stall(r.Context())
			return
		}
	}
}

// Wire shapes of a GenerateContentResponse, fields in the real API's order.
type (
	geminiResponse struct {
		Candidates    []geminiCandidate `json:"candidates"`
		UsageMetadata *geminiUsage      `json:"usageMetadata,omitempty"`
		ModelVersion  string            `json:"modelVersion"`
		ResponseID    string            `json:"responseId"`
	}
	geminiCandidate struct {
		Content      geminiContent `json:"content"`
		FinishReason string        `json:"finishReason,omitempty"`
		Index        int           `json:"index"`
	}
	geminiContent struct {
		Parts []geminiPart `json:"parts"`
		Role  string       `json:"role"`
	}
	geminiPart struct {
		Text         *string             `json:"text,omitempty"`
		FunctionCall *geminiFunctionCall `json:"functionCall,omitempty"`
	}
	geminiFunctionCall struct {
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	}
	geminiUsage struct {
		PromptTokenCount        int `json:"promptTokenCount"`
		CandidatesTokenCount    int `json:"candidatesTokenCount"`
		TotalTokenCount         int `json:"totalTokenCount"`
		CachedContentTokenCount int `json:"cachedContentTokenCount,omitempty"`
	}
)

// geminiChunks is the turn as stream chunks: the text in three pieces, then
// one chunk per function call; the last chunk carries finishReason STOP and
// the usage, as the real API's last chunk does.
func geminiChunks(id, model string, turn Turn, u Usage) []geminiResponse {
	var parts []geminiPart
	for _, c := range chunks(turn.Text, 3) {
		parts = append(parts, geminiPart{Text: &c})
	}
	for _, c := range turn.ToolCalls {
		args := c.Input
		if len(args) == 0 {
			args = json.RawMessage(`{}`)
		}
		parts = append(parts, geminiPart{FunctionCall: &geminiFunctionCall{Name: c.Name, Args: args}})
	}
	if len(parts) == 0 {
		empty := ""
		parts = []geminiPart{{Text: &empty}}
	}
	out := make([]geminiResponse, len(parts))
	for i, p := range parts {
		out[i] = geminiResponse{
			Candidates:   []geminiCandidate{{Content: geminiContent{Parts: []geminiPart{p}, Role: "model"}}},
			ModelVersion: model,
			ResponseID:   id,
		}
	}
	last := &out[len(out)-1]
	last.Candidates[0].FinishReason = "STOP"
	prompt := u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens
	last.UsageMetadata = &geminiUsage{
		PromptTokenCount:        prompt,
		CandidatesTokenCount:    u.OutputTokens,
		TotalTokenCount:         prompt + u.OutputTokens,
		CachedContentTokenCount: u.CacheReadInputTokens,
	}
	return out
}

// mergeGeminiChunks is the non-streaming response: the text in one part,
// then the function calls, in one candidate.
func mergeGeminiChunks(chunks []geminiResponse) geminiResponse {
	out := chunks[len(chunks)-1]
	var text strings.Builder
	var calls []geminiPart
	for _, c := range chunks {
		for _, p := range c.Candidates[0].Content.Parts {
			if p.Text != nil {
				text.WriteString(*p.Text)
			} else {
				calls = append(calls, p)
			}
		}
	}
	var parts []geminiPart
	if s := text.String(); s != "" || len(calls) == 0 {
		parts = append(parts, geminiPart{Text: &s})
	}
	parts = append(parts, calls...)
	out.Candidates = []geminiCandidate{{Content: geminiContent{Parts: parts, Role: "model"}, FinishReason: "STOP"}}
	return out
}

// geminiHelperText answers a Helper request: a JSON object filling the
// properties of the asked-for schema when the request wants JSON (the
// router's model_choice, the next-speaker check's next_speaker), else a
// short text.
func geminiHelperText(r GeminiRequest) string {
	if !r.WantsJSON() {
		return helperText
	}
	schema := r.jsonSchema()
	props, _ := schema["properties"].(map[string]any)
	answer := map[string]any{}
	for name, p := range props {
		typ := ""
		if m, ok := p.(map[string]any); ok {
			typ = strings.ToLower(fmt.Sprint(m["type"]))
		}
		switch {
		case name == "next_speaker":
			answer[name] = "user" // the turn is over: no "Please continue."
		case name == "model_choice":
			answer[name] = "pro"
		case typ == "boolean":
			answer[name] = false
		case typ == "number" || typ == "integer":
			answer[name] = 1
		case typ == "array":
			answer[name] = []any{}
		case typ == "object":
			answer[name] = map[string]any{}
		default:
			answer[name] = helperText
		}
	}
	b, _ := json.Marshal(answer)
	return string(b)
}

// writeGeminiError writes the Gemini API's error body
// {"error":{"code":..,"message":..,"status":..}}. e.Type, when set, is the
// status word; else it follows from e.Status.
func writeGeminiError(w http.ResponseWriter, e APIError) {
	status := e.Type
	if status == "" {
		status = geminiStatus(e.Status)
	}
	type detail struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Status  string `json:"status"`
	}
	writeJSON(w, e.Status, struct {
		Error detail `json:"error"`
	}{detail{e.Status, e.Message, status}})
}

// geminiStatus is the google.rpc status word the real API uses for an HTTP
// status.
func geminiStatus(code int) string {
	switch code {
	case http.StatusBadRequest:
		return "INVALID_ARGUMENT"
	case http.StatusUnauthorized:
		return "UNAUTHENTICATED"
	case http.StatusForbidden:
		return "PERMISSION_DENIED"
	case http.StatusNotFound:
		return "NOT_FOUND"
	case http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case http.StatusServiceUnavailable:
		return "UNAVAILABLE"
	case http.StatusGatewayTimeout:
		return "DEADLINE_EXCEEDED"
	default:
		return "INTERNAL"
	}
}

// geminiBody is the part of a generate request body the fake reads.
type geminiBody struct {
	Contents []struct {
		Role  string            `json:"role"`
		Parts []json.RawMessage `json:"parts"`
	} `json:"contents"`
	SystemInstruction *struct {
		Parts []struct {
			Text string `json:"text"`
		} `json:"parts"`
	} `json:"systemInstruction"`
	Tools []struct {
		FunctionDeclarations []struct {
			Name string `json:"name"`
		} `json:"functionDeclarations"`
	} `json:"tools"`
	GenerationConfig struct {
		ResponseMimeType   string         `json:"responseMimeType"`
		ResponseJSONSchema map[string]any `json:"responseJsonSchema"`
		ResponseSchema     map[string]any `json:"responseSchema"`
	} `json:"generationConfig"`
}

func (r GeminiRequest) decode() geminiBody {
	var b geminiBody
	_ = json.Unmarshal(r.Body, &b)
	return b
}

// method is the part of the path after the colon, e.g.
// "streamGenerateContent".
func (r GeminiRequest) method() string {
	_, m, _ := strings.Cut(r.Path[strings.LastIndexByte(r.Path, '/')+1:], ":")
	return m
}

// Generate reports whether the request is a streamGenerateContent or
// generateContent call.
func (r GeminiRequest) Generate() bool {
	m := r.method()
	return m == "streamGenerateContent" || m == "generateContent"
}

// Stream reports whether the request asked for a stream.
func (r GeminiRequest) Stream() bool { return r.method() == "streamGenerateContent" }

// Model is the model named in the path, e.g. "gemini-2.5-pro".
func (r GeminiRequest) Model() string {
	i := strings.Index(r.Path, "/models/")
	if i < 0 {
		return ""
	}
	name, _, _ := strings.Cut(r.Path[i+len("/models/"):], ":")
	return name
}

// WantsJSON reports whether the request asks for a JSON answer.
func (r GeminiRequest) WantsJSON() bool {
	gc := r.decode().GenerationConfig
	return gc.ResponseMimeType == "application/json" || gc.ResponseJSONSchema != nil || gc.ResponseSchema != nil
}

func (r GeminiRequest) jsonSchema() map[string]any {
	gc := r.decode().GenerationConfig
	if gc.ResponseJSONSchema != nil {
		return gc.ResponseJSONSchema
	}
	return gc.ResponseSchema
}

// Tools is the names of the function declarations offered, in order.
func (r GeminiRequest) Tools() []string {
	var names []string
	for _, t := range r.decode().Tools {
		for _, f := range t.FunctionDeclarations {
			names = append(names, f.Name)
		}
	}
	return names
}

// System is the text of the systemInstruction parts joined with "\n\n".
func (r GeminiRequest) System() string {
	si := r.decode().SystemInstruction
	if si == nil {
		return ""
	}
	var texts []string
	for _, p := range si.Parts {
		texts = append(texts, p.Text)
	}
	return strings.Join(texts, "\n\n")
}

// GeminiPart is one part of a content entry, flattened.
type GeminiPart struct {
	Text string
	// FunctionCall is the name of a functionCall part, and Args its
	// arguments.
	FunctionCall string
	Args         json.RawMessage
	// FunctionResponse is the name of a functionResponse part, and
	// Response its response object.
	FunctionResponse string
	Response         json.RawMessage
}

// GeminiContent is one entry of the request's contents (the history).
type GeminiContent struct {
	Role string // "user" or "model"
	// Text joins, with "\n", the text parts and the function responses.
	Text  string
	Parts []GeminiPart
}

// Contents is the request's contents, flattened.
func (r GeminiRequest) Contents() []GeminiContent {
	var out []GeminiContent
	for _, c := range r.decode().Contents {
		content := GeminiContent{Role: c.Role}
		var texts []string
		for _, raw := range c.Parts {
			var p struct {
				Text         *string `json:"text"`
				FunctionCall *struct {
					Name string          `json:"name"`
					Args json.RawMessage `json:"args"`
				} `json:"functionCall"`
				FunctionResponse *struct {
					Name     string          `json:"name"`
					Response json.RawMessage `json:"response"`
				} `json:"functionResponse"`
				Thought bool `json:"thought"`
			}
			if json.Unmarshal(raw, &p) != nil || p.Thought {
				continue
			}
			var part GeminiPart
			switch {
			case p.Text != nil:
				part.Text = *p.Text
				texts = append(texts, part.Text)
			case p.FunctionCall != nil:
				part.FunctionCall, part.Args = p.FunctionCall.Name, p.FunctionCall.Args
			case p.FunctionResponse != nil:
				part.FunctionResponse, part.Response = p.FunctionResponse.Name, p.FunctionResponse.Response
				texts = append(texts, string(p.FunctionResponse.Response))
			default:
				continue
			}
			content.Parts = append(content.Parts, part)
		}
		content.Text = strings.Join(texts, "\n")
		out = append(out, content)
	}
	return out
}

// Prompt is the text of the last user entry that has text (a function
// response alone does not count), or "".
func (r GeminiRequest) Prompt() string {
	cs := r.Contents()
	for i := len(cs) - 1; i >= 0; i-- {
		if cs[i].Role != "user" {
			continue
		}
		var texts []string
		for _, p := range cs[i].Parts {
			if p.FunctionResponse == "" {
				texts = append(texts, p.Text)
			}
		}
		if len(texts) > 0 {
			return strings.Join(texts, "\n")
		}
	}
	return ""
}

// History is the contents as "[role] text" lines, for assertions on what a
// resumed request carried.
func (r GeminiRequest) History() string {
	var b strings.Builder
	for _, c := range r.Contents() {
		fmt.Fprintf(&b, "[%s] %s\n", c.Role, c.Text)
	}
	return b.String()
}
