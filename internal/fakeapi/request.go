package fakeapi

import (
	"encoding/json"
	"strings"
)

// Kind says what a recorded request was to the fake.
type Kind string

const (
	// Main is a request of the conversation: it consumes a script turn.
	Main Kind = "main"
	// Helper is a side request to /v1/messages (a quota probe, a title or
	// topic); it gets a fixed short answer and leaves the script alone.
	Helper Kind = "helper"
	// CountTokens is a request to /v1/messages/count_tokens.
	CountTokens Kind = "count_tokens"
	// Other is anything else (HEAD /, unknown paths).
	Other Kind = "other"
)

// Request is one request as the fake received it. Its Header, Body and JSON
// are shared with the fake's log: read them, don't change them.
type Request struct {
	Exchange
}

// messagesBody is the part of a Messages API body the fake reads.
type messagesBody struct {
	Model     string          `json:"model"`
	MaxTokens int             `json:"max_tokens"`
	Stream    bool            `json:"stream"`
	System    json.RawMessage `json:"system"` // a string or text blocks
	Messages  []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"` // a string or blocks
	} `json:"messages"`
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

// decode reads the body for the accessors below. It decodes afresh on
// every call, which keeps Request plain data (comparable with go-cmp) at a
// cost only tests pay.
func (r Request) decode() messagesBody {
	var b messagesBody
	_ = json.Unmarshal(r.Body, &b)
	return b
}

// Model is the body's model.
func (r Request) Model() string { return r.decode().Model }

// MaxTokens is the body's max_tokens.
func (r Request) MaxTokens() int { return r.decode().MaxTokens }

// Stream reports whether the body asked for an SSE stream.
func (r Request) Stream() bool { return r.decode().Stream }

// Tools is the names of the tools the body offers, in order.
func (r Request) Tools() []string {
	var names []string
	for _, t := range r.decode().Tools {
		names = append(names, t.Name)
	}
	return names
}

// SystemBlocks is the text of each system block, in order. A system given
// as one string is one block.
func (r Request) SystemBlocks() []string {
	var blocks []string
	for _, b := range decodeBlocks(r.decode().System) {
		if b.Type == "text" {
			blocks = append(blocks, b.Text)
		}
	}
	return blocks
}

// System is the text of the system blocks joined with "\n\n".
func (r Request) System() string { return strings.Join(r.SystemBlocks(), "\n\n") }

// Message is one conversation message, flattened.
type Message struct {
	Role string
	// Text joins, with "\n", the text blocks and the content of
	// tool_result blocks. tool_use blocks are in Blocks only.
	Text   string
	Blocks []Block
}

// Block is one content block of a message.
type Block struct {
	Type      string          // "text", "tool_use", "tool_result", ...
	Text      string          // text; for tool_result, its content flattened
	ID        string          // tool_use id
	Name      string          // tool_use name
	Input     json.RawMessage // tool_use input
	ToolUseID string          // tool_result's tool_use_id
	IsError   bool            // tool_result's is_error
	Source    *Source         // image's (or document's) source; nil for other blocks
}

// Source is where an image or document block's content comes from.
type Source struct {
	Type      string `json:"type"`       // "base64", "url", ...
	MediaType string `json:"media_type"` // e.g. "image/png"
	Data      string `json:"data"`       // base64
	URL       string `json:"url"`
}

// Messages is the body's messages, flattened.
func (r Request) Messages() []Message {
	var msgs []Message
	for _, m := range r.decode().Messages {
		msg := Message{Role: m.Role}
		var texts []string
		for _, b := range decodeBlocks(m.Content) {
			blk := Block{Type: b.Type, Text: b.Text, ID: b.ID, Name: b.Name, Input: b.Input,
				ToolUseID: b.ToolUseID, IsError: b.IsError, Source: b.Source}
			if b.Type == "tool_result" {
				var parts []string
				for _, c := range decodeBlocks(b.Content) {
					if c.Type == "text" {
						parts = append(parts, c.Text)
					}
				}
				blk.Text = strings.Join(parts, "\n")
			}
			if blk.Type == "text" || blk.Type == "tool_result" {
				texts = append(texts, blk.Text)
			}
			msg.Blocks = append(msg.Blocks, blk)
		}
		msg.Text = strings.Join(texts, "\n")
		msgs = append(msgs, msg)
	}
	return msgs
}

// Prompt is the flattened text of the last user message, or "".
func (r Request) Prompt() string {
	msgs := r.Messages()
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			return msgs[i].Text
		}
	}
	return ""
}

// rawBlock is a content block as it arrives.
type rawBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	IsError   bool            `json:"is_error"`
	Content   json.RawMessage `json:"content"` // tool_result: a string or blocks
	Source    *Source         `json:"source"`  // image, document
}

// decodeBlocks reads content that is either a string (one text block) or
// an array of blocks. Anything else gives no blocks.
func decodeBlocks(raw json.RawMessage) []rawBlock {
	if len(raw) == 0 {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []rawBlock{{Type: "text", Text: s}}
	}
	var blocks []rawBlock
	if json.Unmarshal(raw, &blocks) != nil {
		return nil
	}
	return blocks
}
