package backends

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/rs/zerolog"
)

// Approval is a CLI's request to run a tool that needs the user's consent
// (claude's can_use_tool control request).
type Approval struct {
	// Tool is the tool's name (Bash, Write, Edit, mcp__server__tool...).
	Tool string
	// Input is the tool's input as the CLI sent it: a JSON object.
	Input json.RawMessage
	// Description is the CLI's own short description, when it gave one.
	Description string
	// BlockedPath is the path that made the CLI ask, when it named one.
	BlockedPath string
	// ToolUseID ties the request to the turn's tool call.
	ToolUseID string
	// CanRemember is set when the CLI offered rules that "Allow for this
	// session" can add (its permission_suggestions).
	CanRemember bool
	// Plan is the plan an ExitPlanMode call asks the user to approve: its
	// input's "plan", when the model gave one there.
	Plan string
	// PlanFile is otherwise the plan file the model wrote this turn
	// (claude 2.1.330 keeps plans in ~/.claude/plans/*.md and sends
	// ExitPlanMode with an empty input). It is a path the agent chose:
	// it must be read as the agent would read it, never through a link
	// and never one of the gateway's own files (files.Guard).
	PlanFile string
}

// Tools whose can_use_tool request is a question for the user rather than
// a permission to run something.
const (
	// ToolAskUserQuestion asks 1-4 multiple-choice questions; the answer is
	// an allow whose updated input carries "answers".
	ToolAskUserQuestion = "AskUserQuestion"
	// ToolExitPlanMode asks the user to approve a plan; an allow leaves
	// plan mode, a deny's message sends the model back to planning.
	ToolExitPlanMode = "ExitPlanMode"
)

// Verdict answers an Approval.
type Verdict struct {
	// Allow runs the tool; otherwise it is denied.
	Allow bool
	// Remember, with Allow, adds the CLI's suggested rules for the rest of
	// the session, so the same call is not asked about again.
	Remember bool
	// Message tells the model why it was denied.
	Message string
	// Interrupt, with a denial, ends the turn as well.
	Interrupt bool
	// UpdatedInput, with Allow, replaces the tool's input: an
	// AskUserQuestion's input with the user's "answers" added.
	UpdatedInput json.RawMessage
	// Mode, with Allow, switches the CLI's permission mode for the rest of
	// the session (an approved plan continues in acceptEdits): the answer
	// carries updatedPermissions [{type: setMode, mode, destination:
	// session}], which the CLI applies before the turn goes on.
	Mode string
}

// ApproveFunc decides an Approval. ctx ends when the CLI withdraws the
// request or the turn ends; the verdict is then not used. It is called on
// its own goroutine, one call per request, possibly several at once.
type ApproveFunc func(ctx context.Context, a Approval) Verdict

// ErrApprovalWithdrawn is the cause of an ApproveFunc's context when the
// CLI withdrew its request (control_cancel_request), e.g. because the turn
// was interrupted.
var ErrApprovalWithdrawn = errors.New("the CLI withdrew its request")

// controlKind says what a line of claude's stream-json output is, as far
// as the control protocol is concerned.
type controlKind int

const (
	// controlNone is an ordinary stream line (init, assistant, result...).
	controlNone controlKind = iota
	// controlRequest is a request from the CLI (can_use_tool and others).
	controlRequest
	// controlResponse answers one of the gateway's requests.
	controlResponse
	// controlCancel withdraws an earlier request from the CLI.
	controlCancel
)

// controlLine is a control protocol line from claude, decoded.
type controlLine struct {
	Kind      controlKind
	RequestID string
	// Subtype is the request's subtype (can_use_tool...), or the
	// response's (success, error).
	Subtype string
	// Approval is set for a can_use_tool request.
	Approval *Approval
	// Input and Suggestions are the raw fields of a can_use_tool request,
	// for the answer.
	Input       json.RawMessage
	Suggestions json.RawMessage
	// Error is an error response's message.
	Error string
}

// parseControl reads one stdout line. It returns controlNone for lines
// that are not control messages (they go to ClaudeParser), and an error
// for a control message it cannot read. It is pure.
func parseControl(line []byte) (controlLine, error) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' || !bytes.Contains(line, []byte(`"control_`)) {
		return controlLine{}, nil
	}
	var l struct {
		Type      string          `json:"type"`
		RequestID string          `json:"request_id"`
		Request   json.RawMessage `json:"request"`
		Response  json.RawMessage `json:"response"`
	}
	if err := json.Unmarshal(line, &l); err != nil {
		return controlLine{}, nil // not a control line after all; the parser judges it
	}
	switch l.Type {
	case "control_request":
		var r struct {
			Subtype     string          `json:"subtype"`
			ToolName    string          `json:"tool_name"`
			Input       json.RawMessage `json:"input"`
			Description string          `json:"description"`
			BlockedPath string          `json:"blocked_path"`
			ToolUseID   string          `json:"tool_use_id"`
			Suggestions json.RawMessage `json:"permission_suggestions"`
		}
		if err := json.Unmarshal(orNull(l.Request), &r); err != nil {
			return controlLine{}, fmt.Errorf("claude control request: %w", err)
		}
		if l.RequestID == "" {
			return controlLine{}, errors.New("claude control request without a request_id")
		}
		c := controlLine{Kind: controlRequest, RequestID: l.RequestID, Subtype: r.Subtype}
		if r.Subtype == "can_use_tool" {
			input := r.Input
			if len(bytes.TrimSpace(input)) == 0 || bytes.Equal(bytes.TrimSpace(input), []byte("null")) {
				input = json.RawMessage(`{}`)
			}
			c.Input, c.Suggestions = input, r.Suggestions
			c.Approval = &Approval{
				Tool: r.ToolName, Input: input, Description: r.Description, BlockedPath: r.BlockedPath,
				ToolUseID: r.ToolUseID, CanRemember: hasItems(r.Suggestions),
			}
			if r.ToolName == ToolExitPlanMode {
				c.Approval.Plan = inputString(input, "plan")
			}
		}
		return c, nil
	case "control_cancel_request":
		return controlLine{Kind: controlCancel, RequestID: l.RequestID}, nil
	case "control_response":
		var r struct {
			Subtype   string `json:"subtype"`
			RequestID string `json:"request_id"`
			Error     string `json:"error"`
		}
		if err := json.Unmarshal(orNull(l.Response), &r); err != nil {
			return controlLine{}, fmt.Errorf("claude control response: %w", err)
		}
		return controlLine{Kind: controlResponse, RequestID: r.RequestID, Subtype: r.Subtype, Error: r.Error}, nil
	}
	return controlLine{}, nil
}

func orNull(b json.RawMessage) []byte {
	if len(b) == 0 {
		return []byte("null")
	}
	return b
}

// inputString is a string field of a tool's JSON input, "" when absent.
func inputString(input json.RawMessage, key string) string {
	var in map[string]any
	_ = json.Unmarshal(input, &in)
	s, _ := in[key].(string)
	return s
}

// hasItems reports whether raw is a JSON array with at least one element.
func hasItems(raw json.RawMessage) bool {
	var items []json.RawMessage
	return json.Unmarshal(raw, &items) == nil && len(items) > 0
}

// userMessage is one user turn on claude's stream-json stdin.
func userMessage(text string) []byte {
	b, _ := json.Marshal(map[string]any{
		"type":    "user",
		"message": map[string]any{"role": "user", "content": text},
	})
	return append(b, '\n')
}

// maxImageBytes is the largest image sent as an image block: the
// Anthropic API refuses images over 5 MB once base64-encoded.
const maxImageBytes = 3_750_000

// userMessageWithImages is userMessage with the images as image content
// blocks after the text, the way the Messages API takes them, from the
// bytes the gateway read (Image.Data). An image without them or too large
// is left out: the prompt names its path, so the agent can still open it.
func userMessageWithImages(text string, images []Image, log zerolog.Logger) []byte {
	if len(images) == 0 {
		return userMessage(text)
	}
	content := []any{map[string]any{"type": "text", "text": text}}
	for _, img := range images {
		data := img.Data
		if len(data) == 0 || len(data) > maxImageBytes {
			log.Info().Int("bytes", len(data)).Str("media_type", img.MediaType).Msg("image not sent as an image; the prompt names its path")
			continue
		}
		content = append(content, map[string]any{
			"type":   "image",
			"source": map[string]any{"type": "base64", "media_type": img.MediaType, "data": base64.StdEncoding.EncodeToString(data)},
		})
	}
	b, _ := json.Marshal(map[string]any{
		"type":    "user",
		"message": map[string]any{"role": "user", "content": content},
	})
	return append(b, '\n')
}

// controlRequestLine is a request from the gateway (interrupt, set_model):
// the full envelope, since the CLI ignores a bare request.
func controlRequestLine(id, subtype string, fields map[string]any) []byte {
	req := map[string]any{"subtype": subtype}
	for k, v := range fields {
		req[k] = v
	}
	b, _ := json.Marshal(map[string]any{"type": "control_request", "request_id": id, "request": req})
	return append(b, '\n')
}

// approvalAnswer is the control_response to a can_use_tool request.
// "Allow for this session" returns the CLI's own suggestions with their
// destination narrowed to the session, so nothing is written to the
// project's settings files.
func approvalAnswer(c controlLine, v Verdict) []byte {
	var resp map[string]any
	if v.Allow {
		input := c.Input
		if len(v.UpdatedInput) > 0 {
			input = v.UpdatedInput
		}
		resp = map[string]any{"behavior": "allow", "updatedInput": json.RawMessage(input)}
		var perms []map[string]any
		if v.Remember {
			perms = sessionSuggestions(c.Suggestions)
		}
		if v.Mode != "" {
			perms = append(perms, map[string]any{"type": "setMode", "mode": v.Mode, "destination": "session"})
		}
		if perms != nil {
			resp["updatedPermissions"] = perms
		}
	} else {
		msg := v.Message
		if msg == "" {
			msg = "The user denied this tool call."
		}
		resp = map[string]any{"behavior": "deny", "message": msg, "interrupt": v.Interrupt}
	}
	b, _ := json.Marshal(map[string]any{
		"type":     "control_response",
		"response": map[string]any{"subtype": "success", "request_id": c.RequestID, "response": resp},
	})
	return append(b, '\n')
}

// unsupportedAnswer refuses a control request the gateway does not handle,
// so the CLI does not wait for it.
func unsupportedAnswer(id, subtype string) []byte {
	b, _ := json.Marshal(map[string]any{
		"type": "control_response",
		"response": map[string]any{"subtype": "error", "request_id": id,
			"error": "the gateway does not support " + subtype + " requests"},
	})
	return append(b, '\n')
}

// sessionSuggestions keeps the rule-adding suggestions (not mode changes
// or extra directories: those widen more than the one call asked about)
// with their destination set to the session.
func sessionSuggestions(raw json.RawMessage) []map[string]any {
	var items []map[string]any
	if json.Unmarshal(raw, &items) != nil {
		return nil
	}
	var out []map[string]any
	for _, it := range items {
		if it["type"] != "addRules" {
			continue
		}
		it["destination"] = "session"
		out = append(out, it)
	}
	return out
}

// planFiles follows a turn's tool calls to know the plan file the model
// writes in plan mode (claude 2.1.330 tells it to create
// ~/.claude/plans/<slug>.md and sends ExitPlanMode with an empty input),
// so the plan can be shown for approval. It is not safe for concurrent
// use: one turn's reader owns it.
type planFiles struct {
	// path is the last plan file a Write or Edit named.
	path string
}

// observe notes a tool call that writes a plan file.
func (p *planFiles) observe(ev Event) {
	if ev.Kind != EventToolUse || ev.Tool == nil {
		return
	}
	switch ev.Tool.Name {
	case "Write", "Edit", "MultiEdit":
	default:
		return
	}
	path := inputString(json.RawMessage(ev.Tool.Input), "file_path")
	if isPlanFile(path) {
		p.path = path
	}
}

// isPlanFile reports whether path is in a claude plans directory.
func isPlanFile(path string) bool {
	return filepath.IsAbs(path) && filepath.Ext(path) == ".md" && filepath.Base(filepath.Dir(path)) == "plans" &&
		filepath.Base(filepath.Dir(filepath.Dir(path))) == ".claude"
}

// fill names the plan file on an ExitPlanMode approval whose input had
// no plan; it reads nothing (see Approval.PlanFile).
func (p *planFiles) fill(a *Approval) {
	if a == nil || a.Tool != ToolExitPlanMode || a.Plan != "" || p.path == "" {
		return
	}
	a.PlanFile = p.path
}
