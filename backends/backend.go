// Package backends runs one turn of an agent CLI (claude, codex, gemini,
// opencode, pi) and reports what happened as typed events.
//
// Each CLI has an adapter (flags, environment, process handling) and a pure
// stream parser (bytes in, events out). Adapters are safe for concurrent use:
// every Run spawns its own process.
package backends

import (
	"context"
	"time"
)

// Backend runs one agent turn. Implementations must kill the CLI's whole
// process group when ctx ends and must report failures found in the stream
// (not only the exit code) as an *Error.
type Backend interface {
	// Name is the registry name, e.g. "claude".
	Name() string
	// Run runs one turn. emit, if not nil, receives live events in order from
	// the goroutine that called Run. The returned Result is valid when err is nil.
	Run(ctx context.Context, req Request, emit func(Event)) (Result, error)
}

// Request is everything one turn needs.
type Request struct {
	// Prompt is the user prompt (or a heartbeat/cron/hook instruction).
	Prompt string
	// SystemPrompt is the assembled persona text and SystemPromptFile the
	// temp file holding the same text; adapters use whichever their CLI takes.
	SystemPrompt     string
	SystemPromptFile string
	// SessionID resumes an earlier session when not empty.
	SessionID string
	// WorkDir is the CLI's working directory: the channel's project, or
	// WORK_DIR, or CONFIG_DIR.
	WorkDir string
	// AddDirs are directories outside WorkDir the agent may read and write
	// (CONFIG_DIR, for memory.md), for CLIs that confine it to WorkDir.
	AddDirs []string
	// Model overrides the CLI's default model when not empty.
	Model          string
	AllowedTools   []string
	PermissionMode string
	MaxTurns       int
	// Key names the conversation the turn belongs to (the channel's
	// session key). A CLI that can keep its process between turns (claude)
	// keeps it for the next turn with the same key; empty means none.
	Key string
	// Images are image files the user attached, for CLIs that take images
	// with the prompt (claude with stream-json input). The prompt names
	// their paths too, so every CLI can open them with its own tools.
	Images []Image
	// Isolated runs the CLI without the user's own MCP servers and
	// settings, for CLIs that can (claude: --strict-mcp-config and
	// --setting-sources project,local): the last step before giving up on
	// a CLI that does not start.
	Isolated bool
	// Approve, if set, is asked about every tool call the CLI wants
	// permission for, for CLIs that can ask (claude, in the permission
	// modes that ask). Nil leaves it to the CLI's own rules.
	Approve ApproveFunc
}

// Image is an image file for the model to look at.
type Image struct {
	Path string
	// MediaType is image/png, image/jpeg, image/gif or image/webp.
	MediaType string
	// Data is the image as the gateway saved and checked it. Only these
	// bytes are sent: Path, in a folder the agent may change, is never
	// opened again. An image without Data is left out (the prompt names
	// its path).
	Data []byte
}

// EventKind says what an Event carries.
type EventKind int

const (
	// EventInit carries the session id as soon as the CLI reports it.
	EventInit EventKind = iota + 1
	// EventText carries a fragment of assistant text (a streaming delta).
	EventText
	// EventToolUse reports that the agent called a tool.
	EventToolUse
	// EventToolResult reports that a tool call finished.
	EventToolResult
	// EventResult carries the final result of the turn.
	EventResult
	// EventThinking reports that the model began to think (a thinking
	// block), for CLIs that stream it.
	EventThinking
	// EventRetry reports that the CLI failed to call the model API and
	// is trying again.
	EventRetry
)

func (k EventKind) String() string {
	switch k {
	case EventInit:
		return "init"
	case EventText:
		return "text"
	case EventToolUse:
		return "tool_use"
	case EventToolResult:
		return "tool_result"
	case EventResult:
		return "result"
	case EventThinking:
		return "thinking"
	case EventRetry:
		return "retry"
	}
	return "unknown"
}

// Event is one typed item from a CLI's stream.
type Event struct {
	Kind      EventKind
	SessionID string
	// Text is the delta for EventText.
	Text string
	// Tool is set for EventToolUse and EventToolResult.
	Tool *ToolCall
	// Result is set for EventResult.
	Result *Result
	// Err is set on an EventResult that reports a failure, and on an
	// EventRetry: the failure being retried.
	Err *Error
	// Model and KeySource may be set on EventInit: the model the CLI uses
	// and where its credentials come from (claude's apiKeySource: "none"
	// for a subscription login).
	Model     string
	KeySource string
	// Attempt and MaxAttempts are set on EventRetry.
	Attempt, MaxAttempts int
}

// ToolCall describes a tool invocation.
type ToolCall struct {
	ID    string
	Name  string
	Input string // raw JSON arguments, possibly empty
	// IsError is set on a tool result that failed.
	IsError bool
}

// Usage counts tokens for a turn.
type Usage struct {
	InputTokens         int64
	OutputTokens        int64
	CacheReadTokens     int64
	CacheCreationTokens int64
}

// Result is the outcome of a successful turn.
type Result struct {
	SessionID string
	Text      string
	// CostUSD is what this turn cost, as far as the CLI reports it.
	CostUSD float64
	// SessionCostUSD is the session's running total when the CLI reports
	// one (claude's total_cost_usd counts every turn of a resumed session).
	// The runtime derives a resumed turn's CostUSD from the difference.
	SessionCostUSD float64
	Usage          Usage
	Turns          int
	Duration       time.Duration
	// Model is the model the CLI reported, when it did.
	Model string
	// CostEstimated is set when the cost is what the usage would cost on
	// an API key while the CLI runs on a subscription login: an estimate,
	// not a bill.
	CostEstimated bool
	// PermissionDenials lists tools the CLI refused to run.
	PermissionDenials []string
	// Warm is set when the turn ran on a process kept from an earlier
	// turn (claude's warm processes) rather than one started for it.
	Warm bool
	// ContextTokens is how much of the context window the session fills:
	// the input tokens (cache reads and writes included) of the turn's
	// last model call; 0 when the CLI does not say. Usage sums every call
	// of the turn and cannot tell it.
	ContextTokens int64
	// ContextWindow is the model's context window in tokens when the CLI
	// reports it (claude's modelUsage.contextWindow); 0 otherwise, and
	// ContextWindowOf knows the usual ones.
	ContextWindow int64
	// Compacted is set when the CLI summarised the session's context
	// during the turn (claude's compact_boundary: /compact, or its own
	// automatic compaction); ContextTokens is then what is left.
	Compacted bool
}
