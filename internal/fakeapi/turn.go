package fakeapi

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// ScriptExhaustedText is the reply to a main request that arrives after the
// script has run out. Such requests are marked Request.Exhausted.
const ScriptExhaustedText = "(script exhausted)"

// Turn is one scripted answer to a main request. The zero Turn is an empty
// text reply. Build turns with Text, ToolUse, Error, Hang and HangNoHeaders,
// or as a literal when a turn needs several parts.
type Turn struct {
	// Text is the text block, streamed as several text_delta chunks. With
	// ToolCalls it is the text before the calls ("I'll save that.").
	Text string
	// ToolCalls follow the text as tool_use blocks; with any, the message
	// stops with stop_reason "tool_use" instead of "end_turn".
	ToolCalls []ToolCall
	// Error, when set, answers with that HTTP error instead of a message;
	// Text and ToolCalls are ignored.
	Error *APIError
	// Stall, when set, leaves the request hanging instead of answering.
	Stall Stall
	// Usage replaces the default token counts of the reply.
	Usage *Usage
	// Gate, when set, holds the answer until it is closed: a turn that
	// takes as long as the test wants.
	Gate <-chan struct{}
}

// ToolCall is one tool_use block of a scripted turn.
type ToolCall struct {
	// ID is the tool_use id; empty gets "toolu_fake_<n>".
	ID   string
	Name string
	// Input is the JSON object of arguments, e.g.
	// {"file_path":"/abs/memory.md","content":"..."}.
	Input json.RawMessage
}

// APIError is an error answer: an HTTP status and the Anthropic error body
// {"type":"error","error":{"type":Type,"message":Message}}.
type APIError struct {
	Status  int
	Type    string // e.g. "authentication_error"; empty: derived from Status
	Message string
}

// Stall says how a turn hangs. Every stall ends when the client goes away
// (the request context ends) or the server is closed.
type Stall int

const (
	// NoStall answers normally.
	NoStall Stall = iota
	// StallAfterHeaders sends 200 and the SSE headers, flushes, then sends
	// nothing more.
	StallAfterHeaders
	// StallBeforeHeaders reads the request and sends nothing at all.
	StallBeforeHeaders
	// StallMidStream sends message_start, the text block's start and its
	// first chunk, then nothing more.
	StallMidStream
)

// Usage is the token counts reported for a reply.
type Usage struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	OutputTokens             int `json:"output_tokens"`
}

// DefaultUsage is reported for a reply whose turn sets no Usage.
var DefaultUsage = Usage{InputTokens: 100, OutputTokens: 10}

// Text is a turn that answers with text and ends the turn.
func Text(text string) Turn { return Turn{Text: text} }

// ToolUse is a turn that calls one tool. input is marshalled to JSON now;
// it panics if that fails, as a script is test code. To lead with text, set
// the returned turn's Text.
func ToolUse(name string, input any) Turn {
	b, err := json.Marshal(input)
	if err != nil {
		panic(fmt.Sprintf("fakeapi: tool %s input: %v", name, err))
	}
	return Turn{ToolCalls: []ToolCall{{Name: name, Input: b}}}
}

// Error is a turn that answers with an HTTP error status and an Anthropic
// error body whose type follows from the status (401 authentication_error,
// 500 api_error, ...).
func Error(status int, message string) Turn {
	return Turn{Error: &APIError{Status: status, Message: message}}
}

// Hang is a turn that sends the response headers and then stalls.
func Hang() Turn { return Turn{Stall: StallAfterHeaders} }

// HangNoHeaders is a turn that sends nothing at all.
func HangNoHeaders() Turn { return Turn{Stall: StallBeforeHeaders} }

// errorType gives the Anthropic error type the real API uses for status.
func errorType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	default:
		return "api_error"
	}
}
