package backends

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// contextWindows are the context windows of model families, in tokens, by
// a prefix of the model's name (lower case), longest prefix first where
// two overlap. A model whose CLI reports its window (claude's
// modelUsage.contextWindow) does not need this table.
var contextWindows = []struct {
	prefix string
	tokens int64
}{
	{"claude-", 200_000},
	{"opus", 200_000},
	{"sonnet", 200_000},
	{"haiku", 200_000},
	{"gemini-", 1_048_576},
	{"gpt-5", 400_000},
}

// longContext marks a claude model run with its 1M-token window
// ("claude-sonnet-4-5[1m]", "sonnet[1m]").
const longContext = "[1m]"

// ContextWindowOf is the context window of model in tokens, from the
// table of families; 0 when the model is not known.
func ContextWindowOf(model string) int64 {
	m := strings.ToLower(strings.TrimSpace(model))
	if strings.HasSuffix(m, longContext) {
		return 1_000_000
	}
	for _, w := range contextWindows {
		if strings.HasPrefix(m, w.prefix) {
			return w.tokens
		}
	}
	return 0
}

// ContextPercent is how full the session's context is after a turn, in
// percent of the model's window (the one the CLI reported, else the
// table's), at least 1 when anything is in it. ok is false when the CLI
// reported no context size or the window is not known.
func ContextPercent(r Result) (percent int, ok bool) {
	window := r.ContextWindow
	if window <= 0 {
		window = ContextWindowOf(r.Model)
	}
	if window <= 0 || r.ContextTokens <= 0 {
		return 0, false
	}
	percent = int((r.ContextTokens*100 + window/2) / window)
	return max(percent, 1), true
}

// ErrNotCompacted is the error of a Compact that ran but left the context
// as it was; the wrapped text is the CLI's reason ("Not enough messages to
// compact.").
var ErrNotCompacted = errors.New("the session was not compacted")

// compactCommand is what claude takes, as a user turn, for "summarise the
// conversation so far and go on from the summary".
const compactCommand = "/compact"

// Compact asks claude to summarise the session req.SessionID: "/compact"
// as the turn's prompt, on the conversation's kept process when req fits
// it (req.Key and the same settings as the conversation's turns), else on
// a new one resuming the session. claude calls the model with its
// summarising prompt and reports a compact_boundary (the Result is
// Compacted, ContextTokens is what is left); the session id stays the same
// (claude 2.1.330), but the caller binds whatever Result.SessionID says.
// The turn costs a model call, in the session's cost total.
func (c *Claude) Compact(ctx context.Context, req Request) (Result, error) {
	if req.SessionID == "" {
		return Result{}, fmt.Errorf("%w: no session to compact", ErrNotCompacted)
	}
	req.Prompt, req.Images = compactCommand, nil
	res, err := c.Run(ctx, req, nil)
	if err != nil {
		return res, err
	}
	if !res.Compacted {
		reason := strings.TrimSpace(res.Text)
		if reason == "" {
			reason = "claude reported no compaction"
		}
		return res, fmt.Errorf("%w: %s", ErrNotCompacted, reason)
	}
	return res, nil
}
