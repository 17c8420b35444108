package fakeapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"unicode/utf8"
)

// reply is one assistant message the fake sends: text, then tool calls.
type reply struct {
	id, model string
	text      string
	tools     []ToolCall
	usage     Usage
}

func (m reply) stopReason() string {
	if len(m.tools) > 0 {
		return "tool_use"
	}
	return "end_turn"
}

// Wire shapes, with fields in the order the real API sends them.
type (
	wireMessage struct {
		ID           string  `json:"id"`
		Type         string  `json:"type"`
		Role         string  `json:"role"`
		Model        string  `json:"model"`
		Content      []any   `json:"content"`
		StopReason   *string `json:"stop_reason"`
		StopSequence *string `json:"stop_sequence"`
		Usage        Usage   `json:"usage"`
	}
	textBlock struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	toolUseBlock struct {
		Type  string          `json:"type"`
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	}
)

// blocks is the message's content blocks, complete.
func (m reply) blocks() []any {
	var blocks []any
	if m.text != "" || len(m.tools) == 0 {
		blocks = append(blocks, textBlock{"text", m.text})
	}
	for _, c := range m.tools {
		blocks = append(blocks, toolUseBlock{"tool_use", c.ID, c.Name, c.Input})
	}
	return blocks
}

// final is the message as a non-streaming response.
func (m reply) final() wireMessage {
	stop := m.stopReason()
	return wireMessage{ID: m.id, Type: "message", Role: "assistant", Model: m.model,
		Content: m.blocks(), StopReason: &stop, Usage: m.usage}
}

// writeStream writes m as the Messages SSE stream: message_start, per block
// content_block_start, content_block_delta..., content_block_stop, then
// message_delta and message_stop. With StallMidStream it stops after the
// first text chunk; with StallAfterHeaders after the headers.
func writeStream(w http.ResponseWriter, m reply, stall Stall) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	if stall == StallAfterHeaders {
		return
	}
	send := func(event string, data any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
		_ = rc.Flush()
	}

	start := m.final()
	start.Content = []any{}
	start.StopReason = nil
	start.Usage.OutputTokens = 1
	send("message_start", messageStart{"message_start", start})

	for i, b := range m.blocks() {
		switch b := b.(type) {
		case textBlock:
			send("content_block_start", blockStart{"content_block_start", i, textBlock{"text", ""}})
			for j, chunk := range chunks(b.Text, 3) {
				send("content_block_delta", blockDelta{"content_block_delta", i, textDelta{"text_delta", chunk}})
				if j == 0 && stall == StallMidStream {
					return
				}
			}
		case toolUseBlock:
			send("content_block_start", blockStart{"content_block_start", i,
				toolUseBlock{"tool_use", b.ID, b.Name, json.RawMessage(`{}`)}})
			for _, chunk := range chunks(string(b.Input), 2) {
				send("content_block_delta", blockDelta{"content_block_delta", i, jsonDelta{"input_json_delta", chunk}})
			}
		}
		send("content_block_stop", blockStop{"content_block_stop", i})
		if stall == StallMidStream {
			return // a block without text: stall after it
		}
	}
	var d messageDelta
	d.Type = "message_delta"
	d.Delta.StopReason = m.stopReason()
	d.Usage.OutputTokens = m.usage.OutputTokens
	send("message_delta", d)
	send("message_stop", messageStop{"message_stop"})
}

// SSE event payloads, fields in the real API's order.
type (
	messageStart struct {
		Type    string      `json:"type"`
		Message wireMessage `json:"message"`
	}
	blockStart struct {
		Type         string `json:"type"`
		Index        int    `json:"index"`
		ContentBlock any    `json:"content_block"`
	}
	blockDelta struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
		Delta any    `json:"delta"`
	}
	textDelta struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	jsonDelta struct {
		Type        string `json:"type"`
		PartialJSON string `json:"partial_json"`
	}
	blockStop struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
	}
	messageDelta struct {
		Type  string `json:"type"`
		Delta struct {
			StopReason   string  `json:"stop_reason"`
			StopSequence *string `json:"stop_sequence"`
		} `json:"delta"`
		Usage struct {
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
	}
	messageStop struct {
		Type string `json:"type"`
	}
)

// chunks splits s into at most n pieces of about equal length, cutting only
// between runes. "" gives no pieces.
func chunks(s string, n int) []string {
	runes := utf8.RuneCountInString(s)
	if runes == 0 {
		return nil
	}
	n = min(n, runes)
	size := (runes + n - 1) / n
	var out []string
	for len(s) > 0 {
		cut, count := 0, 0
		for cut < len(s) && count < size {
			_, w := utf8.DecodeRuneInString(s[cut:])
			cut += w
			count++
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	return out
}
