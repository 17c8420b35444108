package backends

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"

	acp "github.com/coder/acp-go-sdk"
)

// acpClient is the gateway's side of an ACP connection: it hands each
// session/update to the turn running on its session and asks the turn's
// approver about session/request_permission. It offers no file system and
// no terminal: the agent uses its own tools.
type acpClient struct {
	mu    sync.Mutex // guards turns
	turns map[string]*acpTurn
}

var _ acp.Client = (*acpClient)(nil)

// route sends session's updates to t from now on; nil drops them (no turn
// runs, or session/load replays history that is not a turn's).
func (c *acpClient) route(session string, t *acpTurn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.turns == nil {
		c.turns = map[string]*acpTurn{}
	}
	if t == nil {
		if old := c.turns[session]; old != nil {
			old.end()
		}
		delete(c.turns, session)
		return
	}
	c.turns[session] = t
}

func (c *acpClient) turn(session acp.SessionId) *acpTurn {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.turns[string(session)]
}

// SessionUpdate implements acp.Client. The SDK calls it for one
// notification at a time, in order; it blocks until the turn takes the
// update or ends.
func (c *acpClient) SessionUpdate(_ context.Context, n acp.SessionNotification) error {
	t := c.turn(n.SessionId)
	if t == nil {
		return nil
	}
	select {
	case t.updates <- n.Update:
	case <-t.done:
	}
	return nil
}

// RequestPermission implements acp.Client: the turn's approver decides;
// without one, or once the turn ends, the call is rejected.
func (c *acpClient) RequestPermission(ctx context.Context, r acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	t := c.turn(r.SessionId)
	if t == nil || t.approve == nil {
		return acp.RequestPermissionResponse{Outcome: acpReject(r.Options)}, nil
	}
	t.waiting.Add(1)
	defer t.waiting.Add(-1)
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(t.approvalsCtx, func() { cancel(ErrApprovalWithdrawn) })
	defer stop()
	v := t.approve(actx, acpApproval(r))
	if actx.Err() != nil {
		return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeCancelled()}, nil
	}
	if !v.Allow && v.Interrupt {
		// The turn ends with the denial: the turn sends session/cancel.
		select {
		case t.interrupt <- struct{}{}:
		default:
		}
	}
	return acp.RequestPermissionResponse{Outcome: acpOutcome(r.Options, v)}, nil
}

// acpApproval is the Approval a permission request asks for. An ACP
// title is a sentence or a path ("Writing to out.txt"; opencode gives
// the file's absolute path), so the tool is named by its kind (edit,
// execute…) and the title becomes the description.
func acpApproval(r acp.RequestPermissionRequest) Approval {
	a := Approval{ToolUseID: string(r.ToolCall.ToolCallId)}
	title := ""
	if r.ToolCall.Title != nil {
		title = strings.TrimSpace(*r.ToolCall.Title)
	}
	var kind acp.ToolKind
	if r.ToolCall.Kind != nil {
		kind = *r.ToolCall.Kind
	}
	switch {
	case kind != "" && kind != acp.ToolKindOther:
		a.Tool, a.Description = string(kind), title
	case title != "":
		a.Tool = title
	default:
		a.Tool = acpToolName("", kind)
	}
	a.Input = acpApprovalInput(r.ToolCall)
	for _, loc := range r.ToolCall.Locations {
		if loc.Path != "" {
			a.BlockedPath = loc.Path
			break
		}
	}
	for _, o := range r.Options {
		if o.Kind == acp.PermissionOptionKindAllowAlways {
			a.CanRemember = true
		}
	}
	return a
}

// acpApprovalInput is what the approval message shows of the call: the
// change as a file and its old and new text when the agent sent diffs
// (gemini 0.61.0 sends only those; opencode's raw input is a unified diff
// naming absolute paths), else the tool's input as the agent sent it.
func acpApprovalInput(tc acp.ToolCallUpdate) json.RawMessage {
	type change struct {
		Path string `json:"file_path"`
		Old  string `json:"old_string,omitempty"`
		New  string `json:"new_string,omitempty"`
	}
	var changes []change
	for _, c := range tc.Content {
		if c.Diff != nil {
			old := ""
			if c.Diff.OldText != nil {
				old = *c.Diff.OldText
			}
			changes = append(changes, change{Path: c.Diff.Path, Old: old, New: c.Diff.NewText})
		}
	}
	switch {
	case len(changes) == 1 && changes[0].Old == "":
		return mustJSON(map[string]string{"file_path": changes[0].Path, "content": changes[0].New})
	case len(changes) == 1:
		return mustJSON(changes[0])
	case len(changes) > 1:
		return mustJSON(map[string]any{"changes": changes})
	}
	if raw := acpRawJSON(tc.RawInput); raw != "" && raw != "null" {
		return json.RawMessage(raw)
	}
	return json.RawMessage("{}")
}

// acpOutcome picks the option that says what v says: allow for the
// session (allow_always) when v remembers, allow once, or reject once;
// the nearest option of the same sense when the agent offers no exact
// one, and cancelled when it offers none.
func acpOutcome(options []acp.PermissionOption, v Verdict) acp.RequestPermissionOutcome {
	var prefs []acp.PermissionOptionKind
	switch {
	case v.Allow && v.Remember:
		prefs = []acp.PermissionOptionKind{acp.PermissionOptionKindAllowAlways, acp.PermissionOptionKindAllowOnce}
	case v.Allow:
		prefs = []acp.PermissionOptionKind{acp.PermissionOptionKindAllowOnce, acp.PermissionOptionKindAllowAlways}
	default:
		return acpReject(options)
	}
	return acpPick(options, prefs)
}

func acpReject(options []acp.PermissionOption) acp.RequestPermissionOutcome {
	return acpPick(options, []acp.PermissionOptionKind{acp.PermissionOptionKindRejectOnce, acp.PermissionOptionKindRejectAlways})
}

func acpPick(options []acp.PermissionOption, prefs []acp.PermissionOptionKind) acp.RequestPermissionOutcome {
	for _, kind := range prefs {
		for _, o := range options {
			if o.Kind == kind {
				return acp.NewRequestPermissionOutcomeSelected(o.OptionId)
			}
		}
	}
	return acp.NewRequestPermissionOutcomeCancelled()
}

// ReadTextFile implements acp.Client; the gateway does not offer fs.
func (c *acpClient) ReadTextFile(context.Context, acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	return acp.ReadTextFileResponse{}, acp.NewMethodNotFound(acp.ClientMethodFsReadTextFile)
}

// WriteTextFile implements acp.Client; the gateway does not offer fs.
func (c *acpClient) WriteTextFile(context.Context, acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	return acp.WriteTextFileResponse{}, acp.NewMethodNotFound(acp.ClientMethodFsWriteTextFile)
}

// CreateTerminal implements acp.Client; the gateway offers no terminal.
func (c *acpClient) CreateTerminal(context.Context, acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	return acp.CreateTerminalResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalCreate)
}

// KillTerminal implements acp.Client.
func (c *acpClient) KillTerminal(context.Context, acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	return acp.KillTerminalResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalKill)
}

// TerminalOutput implements acp.Client.
func (c *acpClient) TerminalOutput(context.Context, acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	return acp.TerminalOutputResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalOutput)
}

// ReleaseTerminal implements acp.Client.
func (c *acpClient) ReleaseTerminal(context.Context, acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	return acp.ReleaseTerminalResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalRelease)
}

// WaitForTerminalExit implements acp.Client.
func (c *acpClient) WaitForTerminalExit(context.Context, acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	return acp.WaitForTerminalExitResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalWaitForExit)
}

// acpTurn is what one running prompt shares with the connection's
// handlers.
type acpTurn struct {
	mapper  *acpMapper
	approve ApproveFunc
	// updates carries session/update notifications to the turn's
	// goroutine; small, as the SDK hands them over one at a time.
	updates chan acp.SessionUpdate
	done    chan struct{} // closed when the turn ends
	endOnce sync.Once
	// approvalsCtx ends when the turn is stopped or ends: an approval
	// still open is then withdrawn.
	approvalsCtx  context.Context
	stopApprovals context.CancelFunc
	waiting       atomic.Int32 // approvals pending
	output        bool         // the agent sent text or a tool call
	// interrupt asks the turn to end after a denial that says so
	// (Verdict.Interrupt); interrupted is set, by the turn's goroutine,
	// once it sent session/cancel for it.
	interrupt   chan struct{}
	interrupted bool
}

func newACPTurn(session string, approve ApproveFunc) *acpTurn {
	ctx, cancel := context.WithCancel(context.Background())
	return &acpTurn{
		mapper: newACPMapper(session), approve: approve,
		updates: make(chan acp.SessionUpdate, 16), done: make(chan struct{}), interrupt: make(chan struct{}, 1),
		approvalsCtx: ctx, stopApprovals: cancel,
	}
}

// endApprovals withdraws the approvals still open (the turn was stopped).
func (t *acpTurn) endApprovals() { t.stopApprovals() }

func (t *acpTurn) end() {
	t.endOnce.Do(func() {
		t.stopApprovals()
		close(t.done)
	})
}

func (t *acpTurn) pending() int32 { return t.waiting.Load() }

// drain emits the updates already handed over.
func (t *acpTurn) drain(emit func(Event)) {
	for {
		select {
		case u := <-t.updates:
			t.emit(u, emit)
		default:
			return
		}
	}
}

func (t *acpTurn) emit(u acp.SessionUpdate, emit func(Event)) {
	for _, ev := range t.mapper.Map(u) {
		if isModelOutput(ev) {
			t.output = true
		}
		emit(ev)
	}
}
