package backends

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// The JSON-RPC protocol of `codex app-server` (codex 0.169.0, recorded in
// testdata/codex/app_server_*.jsonl): one JSON object per line each way,
// without the "jsonrpc" member on the server's side. What is here is pure:
// lines in, typed messages, events and answers out.

// appLineKind says what a line from the app-server is.
type appLineKind int

const (
	// appNotification has a method and no id.
	appNotification appLineKind = iota + 1
	// appRequest has a method and an id: the server asks the client
	// (an approval).
	appRequest
	// appResponse has an id and a result or an error: it answers one of
	// the client's requests.
	appResponse
)

// appLine is one decoded line from the app-server.
type appLine struct {
	Kind   appLineKind
	ID     json.RawMessage // requests and responses
	Method string          // requests and notifications
	Params json.RawMessage
	Result json.RawMessage
	// Error is a response's error message, "" for a result.
	Error string
}

// parseAppLine decodes one line. It fails on a line that is not a JSON
// object or is none of the three kinds.
func parseAppLine(line []byte) (appLine, error) {
	line = bytes.TrimSpace(line)
	var raw struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if len(line) == 0 || line[0] != '{' {
		return appLine{}, errors.New("not a JSON object")
	}
	if err := json.Unmarshal(line, &raw); err != nil {
		return appLine{}, fmt.Errorf("decode app-server line: %w", err)
	}
	l := appLine{ID: raw.ID, Method: raw.Method, Params: raw.Params, Result: raw.Result}
	hasID := len(raw.ID) > 0 && !isJSONNull(raw.ID)
	switch {
	case raw.Method != "" && hasID:
		l.Kind = appRequest
	case raw.Method != "":
		l.Kind = appNotification
	case hasID && raw.Error != nil:
		l.Kind = appResponse
		l.Error = raw.Error.Message
		if l.Error == "" {
			l.Error = fmt.Sprintf("error %d", raw.Error.Code)
		}
	case hasID:
		l.Kind = appResponse
	default:
		return appLine{}, errors.New("neither a request, a response nor a notification")
	}
	return l, nil
}

// appRequestLine is a request from the client, as a line to write.
func appRequestLine(id int64, method string, params any) []byte {
	b, _ := json.Marshal(struct {
		JSONRPC string `json:"jsonrpc"`
		ID      int64  `json:"id"`
		Method  string `json:"method"`
		Params  any    `json:"params"`
	}{"2.0", id, method, params})
	return append(b, '\n')
}

// appNotificationLine is a notification from the client, as a line.
func appNotificationLine(method string) []byte {
	return []byte(`{"jsonrpc":"2.0","method":"` + method + `"}` + "\n")
}

// appResultLine answers the server's request id with result.
func appResultLine(id json.RawMessage, result any) []byte {
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  any             `json:"result"`
	}{"2.0", id, result})
	return append(b, '\n')
}

// appErrorLine refuses the server's request id.
func appErrorLine(id json.RawMessage, message string) []byte {
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   map[string]any  `json:"error"`
	}{"2.0", id, map[string]any{"code": -32601, "message": message}})
	return append(b, '\n')
}

// appTextInput is turn/start's input for a prompt and its images. Images
// go as data URLs: the bytes the gateway checked, never a path the agent
// could have changed since.
func appTextInput(prompt string, images []Image) []any {
	input := []any{map[string]any{"type": "text", "text": prompt, "text_elements": []any{}}}
	for _, img := range images {
		if len(img.Data) == 0 || len(img.Data) > maxImageBytes || img.MediaType == "" {
			continue // the prompt names its path
		}
		url := "data:" + img.MediaType + ";base64," + base64.StdEncoding.EncodeToString(img.Data)
		input = append(input, map[string]any{"type": "image", "url": url})
	}
	return input
}

// appThreadID is the thread id in a thread/start or thread/resume result,
// with the model the thread uses.
func appThreadID(result json.RawMessage) (thread, model string, err error) {
	var r struct {
		Thread struct {
			ID string `json:"id"`
		} `json:"thread"`
		Model string `json:"model"`
	}
	if err := json.Unmarshal(result, &r); err != nil {
		return "", "", fmt.Errorf("decode thread: %w", err)
	}
	if r.Thread.ID == "" {
		return "", "", errors.New("no thread id in the answer")
	}
	return r.Thread.ID, r.Model, nil
}

// appTurnID is the turn id in a turn/start result.
func appTurnID(result json.RawMessage) string {
	var r struct {
		Turn struct {
			ID string `json:"id"`
		} `json:"turn"`
	}
	_ = json.Unmarshal(result, &r)
	return r.Turn.ID
}

// appItem is a thread item (ThreadItem in the protocol), as far as the
// gateway reads it.
type appItem struct {
	Type     string          `json:"type"`
	ID       string          `json:"id"`
	Text     string          `json:"text"`
	Command  string          `json:"command"`
	Cwd      string          `json:"cwd"`
	Status   string          `json:"status"`
	ExitCode json.RawMessage `json:"exitCode"`
	Changes  []appChange     `json:"changes"`
	Server   string          `json:"server"`
	Tool     string          `json:"tool"`
	Args     json.RawMessage `json:"arguments"`
	Query    string          `json:"query"`
	Error    json.RawMessage `json:"error"`
}

// appChange is one file of a fileChange item: its path, what happens to
// it and its diff (a unified diff for an update; the new content for an
// add).
type appChange struct {
	Path string `json:"path"`
	Kind struct {
		Type     string `json:"type"`
		MovePath string `json:"move_path"`
	} `json:"kind"`
	Diff string `json:"diff"`
}

// appToolName names the tool an item stands for, as the exec adapter
// does, or "" when the item is not a tool call.
func appToolName(it appItem) string {
	switch it.Type {
	case "commandExecution":
		return "exec_command"
	case "fileChange":
		return "apply_patch"
	case "mcpToolCall":
		if it.Server != "" {
			return "mcp__" + it.Server + "__" + it.Tool
		}
		return it.Tool
	case "dynamicToolCall":
		return it.Tool
	case "webSearch":
		return "web_search"
	}
	return ""
}

// appToolInput is the item's arguments as a JSON object, for the card.
func appToolInput(it appItem) string {
	var v any
	switch it.Type {
	case "commandExecution":
		v = map[string]string{"command": it.Command}
	case "fileChange":
		return string(appPatchInput(it.Changes))
	case "mcpToolCall", "dynamicToolCall":
		if len(it.Args) == 0 || isJSONNull(it.Args) || !json.Valid(it.Args) {
			return ""
		}
		return string(it.Args)
	case "webSearch":
		v = map[string]string{"query": it.Query}
	default:
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// appItemFailed reports whether a finished tool item failed.
func appItemFailed(it appItem) bool {
	switch it.Status {
	case "failed", "declined", "error":
		return true
	}
	if len(it.Error) > 0 && !isJSONNull(it.Error) {
		return true
	}
	return it.Type == "commandExecution" && len(it.ExitCode) > 0 && !isJSONNull(it.ExitCode) && jsonInt(it.ExitCode) != 0
}

// appPatchInput is a patch as an approval's input, in the shape the
// approval card shows as a diff: one file's path with its hunks as edits
// (removed lines as old_string, added lines as new_string), a new file's
// content, a deleted file's old content. The unified diffs stay in
// "diff" and every path in "files".
func appPatchInput(changes []appChange) json.RawMessage {
	in := map[string]any{}
	var files []string
	var unified strings.Builder
	for _, c := range changes {
		files = append(files, c.Path)
		fmt.Fprintf(&unified, "--- %s\n%s", c.Path, c.Diff)
		if !strings.HasSuffix(c.Diff, "\n") {
			unified.WriteByte('\n')
		}
	}
	if len(changes) > 0 {
		first := changes[0]
		in["file_path"] = first.Path
		switch first.Kind.Type {
		case "add":
			in["content"] = first.Diff
		case "delete":
			in["old_string"] = first.Diff
		default:
			edits := appHunks(first.Diff)
			if len(edits) == 1 {
				in["old_string"], in["new_string"] = edits[0]["old_string"], edits[0]["new_string"]
			} else if len(edits) > 1 {
				in["edits"] = edits
			}
			if first.Kind.MovePath != "" {
				in["move_path"] = first.Kind.MovePath
			}
		}
	}
	in["files"] = files
	in["diff"] = unified.String()
	b, _ := json.Marshal(in)
	return b
}

// appHunks splits a unified diff into its hunks' removed and added lines.
func appHunks(diff string) []map[string]string {
	var edits []map[string]string
	var old, add strings.Builder
	flush := func() {
		if old.Len() > 0 || add.Len() > 0 {
			edits = append(edits, map[string]string{"old_string": old.String(), "new_string": add.String()})
		}
		old.Reset()
		add.Reset()
	}
	for _, line := range strings.Split(diff, "\n") {
		switch {
		case strings.HasPrefix(line, "@@"):
			flush()
		case strings.HasPrefix(line, "---"), strings.HasPrefix(line, "+++"):
		case strings.HasPrefix(line, "-"):
			old.WriteString(line[1:] + "\n")
		case strings.HasPrefix(line, "+"):
			add.WriteString(line[1:] + "\n")
		}
	}
	flush()
	return edits
}

// appDecision is the answer to an approval request for a verdict:
// "accept", "acceptForSession" (or the command's proposed exec policy
// amendment) to remember it, "decline", or "cancel", which also ends the
// turn. codex takes no message with a denial.
func appDecision(v Verdict, amendment json.RawMessage) any {
	switch {
	case v.Allow && v.Remember && len(amendment) > 0 && !isJSONNull(amendment):
		return map[string]any{"acceptWithExecpolicyAmendment": map[string]json.RawMessage{"execpolicy_amendment": amendment}}
	case v.Allow && v.Remember:
		return "acceptForSession"
	case v.Allow:
		return "accept"
	case v.Interrupt:
		return "cancel"
	}
	return "decline"
}

// appApprovalRequest is an approval request from the app-server, read.
type appApprovalRequest struct {
	Approval Approval
	// Amendment is the command's proposed exec policy amendment, for
	// "allow for this session".
	Amendment json.RawMessage
}

// codexAppTurn folds the notifications of one turn into events and its
// result. It is pure: lines in, events out. The zero value is ready; set
// thread before the first line.
type codexAppTurn struct {
	thread, turn string
	model        string

	items    map[string]appItem // tool items started this turn, by id
	started  map[string]bool    // tool items announced
	textSent bool               // a text event went out
	inText   string             // the agent message whose deltas stream now
	lastText string             // the last complete agent message
	usage    Usage
	context  int64 // input tokens of the last model call
	window   int64
	denials  []string
	warnings []string

	done    bool
	status  string // completed, interrupted, failed
	failure *Error
	// retrying is the last error codex said it would retry.
	retrying *Error
	// modelOutput is set once the model produced text or a tool call.
	modelOutput bool
}

// ours reports whether a notification's params belong to this turn.
func (t *codexAppTurn) ours(params json.RawMessage) bool {
	var p struct {
		ThreadID string `json:"threadId"`
		TurnID   string `json:"turnId"`
	}
	_ = json.Unmarshal(params, &p)
	if p.ThreadID != "" && t.thread != "" && p.ThreadID != t.thread {
		return false
	}
	// Until codex names the turn, a notice about a turn is an earlier
	// one's (a resumed thread's usage arrives before turn/start's answer).
	return p.TurnID == "" || p.TurnID == t.turn
}

// observe reads one notification and returns the events it makes.
func (t *codexAppTurn) observe(l appLine) []Event {
	if l.Kind != appNotification || !t.ours(l.Params) {
		return nil
	}
	switch l.Method {
	case "turn/started":
		var p struct {
			Turn struct {
				ID string `json:"id"`
			} `json:"turn"`
		}
		if json.Unmarshal(l.Params, &p) == nil && t.turn == "" {
			t.turn = p.Turn.ID
		}
	case "item/started":
		return t.itemStarted(l.Params)
	case "item/completed":
		return t.itemCompleted(l.Params)
	case "item/agentMessage/delta":
		var p struct {
			ItemID string `json:"itemId"`
			Delta  string `json:"delta"`
		}
		if json.Unmarshal(l.Params, &p) != nil || p.Delta == "" {
			return nil
		}
		return t.text(p.ItemID, p.Delta)
	case "thread/tokenUsage/updated":
		t.tokens(l.Params)
	case "error":
		return t.errorNotice(l.Params)
	case "turn/completed":
		t.completed(l.Params)
		if t.done {
			res := t.result()
			return []Event{{Kind: EventResult, SessionID: t.thread, Result: &res, Err: t.failure}}
		}
	}
	return nil
}

func (t *codexAppTurn) item(params json.RawMessage) (appItem, bool) {
	var p struct {
		Item appItem `json:"item"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return appItem{}, false
	}
	return p.Item, true
}

func (t *codexAppTurn) itemStarted(params json.RawMessage) []Event {
	it, ok := t.item(params)
	if !ok {
		return nil
	}
	switch it.Type {
	case "reasoning":
		return []Event{{Kind: EventThinking, SessionID: t.thread}}
	case "agentMessage":
		t.inText = ""
		return nil
	}
	return t.toolStarted(it)
}

func (t *codexAppTurn) toolStarted(it appItem) []Event {
	name := appToolName(it)
	if name == "" || t.started[it.ID] {
		return nil
	}
	if t.items == nil {
		t.items, t.started = map[string]appItem{}, map[string]bool{}
	}
	t.items[it.ID] = it
	t.started[it.ID] = true
	t.modelOutput = true
	return []Event{{Kind: EventToolUse, SessionID: t.thread, Tool: &ToolCall{ID: it.ID, Name: name, Input: appToolInput(it)}}}
}

func (t *codexAppTurn) itemCompleted(params json.RawMessage) []Event {
	it, ok := t.item(params)
	if !ok {
		return nil
	}
	if it.Type == "agentMessage" {
		var events []Event
		if t.inText != it.ID && it.Text != "" {
			// The message came without deltas.
			events = t.text(it.ID, it.Text)
		}
		if it.Text != "" {
			t.lastText = it.Text
		}
		return events
	}
	name := appToolName(it)
	if name == "" {
		return nil
	}
	events := t.toolStarted(it)
	if it.Status == "declined" {
		t.denials = append(t.denials, name)
	}
	return append(events, Event{Kind: EventToolResult, SessionID: t.thread,
		Tool: &ToolCall{ID: it.ID, Name: name, IsError: appItemFailed(it)}})
}

// text streams a delta of agent message id. Concatenated, the text events
// read as a transcript: a message after earlier text starts with a blank
// line.
func (t *codexAppTurn) text(id, delta string) []Event {
	t.modelOutput = true
	if t.inText != id {
		t.inText = id
		if t.textSent {
			delta = "\n\n" + delta
		}
	}
	t.textSent = true
	return []Event{{Kind: EventText, SessionID: t.thread, Text: delta}}
}

// tokens adds one model call's usage. OpenAI counts cached tokens inside
// input tokens; Usage counts them apart, as Anthropic does.
func (t *codexAppTurn) tokens(params json.RawMessage) {
	var p struct {
		TokenUsage struct {
			Last struct {
				InputTokens           int64 `json:"inputTokens"`
				CachedInputTokens     int64 `json:"cachedInputTokens"`
				CacheWriteInputTokens int64 `json:"cacheWriteInputTokens"`
				OutputTokens          int64 `json:"outputTokens"`
			} `json:"last"`
			ModelContextWindow int64 `json:"modelContextWindow"`
		} `json:"tokenUsage"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	last := p.TokenUsage.Last
	t.usage.InputTokens += max(last.InputTokens-last.CachedInputTokens, 0)
	t.usage.CacheReadTokens += last.CachedInputTokens
	t.usage.CacheCreationTokens += last.CacheWriteInputTokens
	t.usage.OutputTokens += last.OutputTokens
	t.context = last.InputTokens
	if p.TokenUsage.ModelContextWindow > 0 {
		t.window = p.TokenUsage.ModelContextWindow
	}
}

// appTurnError is the protocol's TurnError.
type appTurnError struct {
	Message          string `json:"message"`
	AdditionalDetail string `json:"additionalDetails"`
}

func (t *codexAppTurn) errorNotice(params json.RawMessage) []Event {
	var p struct {
		Error     appTurnError `json:"error"`
		WillRetry bool         `json:"willRetry"`
	}
	if json.Unmarshal(params, &p) != nil || p.Error.Message == "" {
		return nil
	}
	e := classifyCodexMessage(p.Error.Message)
	if !p.WillRetry {
		t.warnings = append(t.warnings, p.Error.Message)
		return nil
	}
	t.retrying = e
	return []Event{{Kind: EventRetry, SessionID: t.thread, Err: e}}
}

func (t *codexAppTurn) completed(params json.RawMessage) {
	var p struct {
		Turn struct {
			ID     string        `json:"id"`
			Status string        `json:"status"`
			Error  *appTurnError `json:"error"`
		} `json:"turn"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	if t.turn != "" && p.Turn.ID != "" && p.Turn.ID != t.turn {
		return
	}
	t.done, t.status = true, p.Turn.Status
	if p.Turn.Status == "failed" {
		msg := "codex failed the turn"
		if p.Turn.Error != nil && p.Turn.Error.Message != "" {
			msg = p.Turn.Error.Message
		}
		t.failure = classifyCodexMessage(msg)
		t.failure.ModelOutput = t.modelOutput
	}
}

// approval reads an approval request of this turn. ok is false for a
// request the gateway does not answer with a verdict (it is refused).
func (t *codexAppTurn) approval(l appLine) (appApprovalRequest, bool) {
	if l.Kind != appRequest {
		return appApprovalRequest{}, false
	}
	var p struct {
		ItemID    string          `json:"itemId"`
		Command   string          `json:"command"`
		Cwd       string          `json:"cwd"`
		Reason    string          `json:"reason"`
		GrantRoot string          `json:"grantRoot"`
		Amendment json.RawMessage `json:"proposedExecpolicyAmendment"`
	}
	if json.Unmarshal(l.Params, &p) != nil {
		return appApprovalRequest{}, false
	}
	switch l.Method {
	case "item/commandExecution/requestApproval":
		command := p.Command
		if command == "" {
			command = t.items[p.ItemID].Command
		}
		in, _ := json.Marshal(map[string]string{"command": command, "cwd": p.Cwd})
		return appApprovalRequest{Approval: Approval{Tool: "exec_command", Input: in, Description: p.Reason,
			ToolUseID: p.ItemID, CanRemember: true}, Amendment: p.Amendment}, true
	case "item/fileChange/requestApproval":
		it := t.items[p.ItemID]
		a := Approval{Tool: "apply_patch", Input: appPatchInput(it.Changes), Description: p.Reason,
			BlockedPath: p.GrantRoot, ToolUseID: p.ItemID, CanRemember: true}
		if len(it.Changes) > 1 {
			a.Description = strings.TrimSpace(fmt.Sprintf("%s (changes %d files)", p.Reason, len(it.Changes)))
		}
		return appApprovalRequest{Approval: a}, true
	}
	return appApprovalRequest{}, false
}

// result is the turn's result so far.
func (t *codexAppTurn) result() Result {
	return Result{SessionID: t.thread, Text: t.lastText, Usage: t.usage, Turns: 1, Model: t.model,
		PermissionDenials: t.denials, ContextTokens: t.context, ContextWindow: t.window}
}

// staleThread reports whether a thread/resume error says codex does not
// know the thread.
func staleThread(message string) bool {
	lower := strings.ToLower(message)
	return strings.Contains(lower, codexStaleSession) || strings.Contains(lower, "thread not found")
}
