package backends

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"slices"
	"strings"
)

// pi asks nobody before a tool runs: its RPC mode has no permission
// requests. What it has is extensions, whose dialogs (ctx.ui.select…) its
// RPC mode sends to the client as extension_ui_request lines. The gateway
// therefore ships a small extension (pi_approve.js), loaded with -e into
// the RPC processes of turns that may ask (Request.Approve): before a tool
// named by --gateway-ask runs, and before any write or edit inside a .pi
// folder, it opens a select dialog whose title carries the call as JSON
// after piApproveMarker. The adapter turns that into an Approval, asks
// Request.Approve, and answers with piApproveAnswer's value.
//
// Recorded in testdata/pi/rpc/approval.jsonl.

//go:embed pi_approve.js
var piApproveJS string

// piApproveMarker starts the title of the extension's dialogs.
const piApproveMarker = "agent-gateway/approve "

// piAllTools are pi's built-in tools.
var piAllTools = []string{"read", "bash", "edit", "write", "grep", "find", "ls"}

// piAskTools returns the tools that wait for an approval in a turn run
// with req, or nil when the turn asks about nothing: without an Approve,
// in plan mode (read-only tools) and in bypassPermissions. In default mode
// bash, edit and write ask; in acceptEdits bash only; a tool named in
// ALLOWED_TOOLS never asks.
func piAskTools(req Request) []string {
	if req.Approve == nil {
		return nil
	}
	var ask []string
	switch req.PermissionMode {
	case "", "default":
		ask = []string{"bash", "edit", "write"}
	case "acceptEdits":
		ask = []string{"bash"}
	default:
		return nil
	}
	allowed := piMapTools(req.AllowedTools)
	return slices.DeleteFunc(ask, func(t string) bool { return slices.Contains(allowed, t) })
}

// piAsks reports whether turns run with req load the approval extension.
// In default and acceptEdits modes they do even when ALLOWED_TOOLS leaves
// no tool to ask about: the extension still guards .pi folders.
func piAsks(req Request) bool {
	if req.Approve == nil {
		return false
	}
	switch req.PermissionMode {
	case "", "default", "acceptEdits":
		return true
	}
	return false
}

// parsePiApproval reads a dialog title of the approval extension into an
// Approval, with the input in the shape the approval messages show (a
// command; a file_path with content, or edits of old_string/new_string).
// ok is false for any other dialog.
func parsePiApproval(title string) (a Approval, ok bool) {
	rest, found := strings.CutPrefix(title, piApproveMarker)
	if !found {
		return Approval{}, false
	}
	var call struct {
		ID      string          `json:"id"`
		Tool    string          `json:"tool"`
		Input   json.RawMessage `json:"input"`
		Guarded bool            `json:"guarded"`
	}
	if err := json.Unmarshal([]byte(rest), &call); err != nil || call.Tool == "" {
		return Approval{}, false
	}
	a = Approval{Tool: call.Tool, ToolUseID: call.ID, Input: piApprovalInput(call.Tool, call.Input), CanRemember: true}
	if call.Guarded {
		a.Description = "pi loads code and settings from .pi folders when it starts"
		var in struct {
			Path string `json:"path"`
		}
		_ = json.Unmarshal(call.Input, &in)
		a.BlockedPath = in.Path
	}
	return a, true
}

// piApprovalInput maps pi's tool input onto the keys the approval message
// shows: bash's command stays; write's and edit's path becomes file_path,
// edit's oldText/newText become old_string/new_string.
func piApprovalInput(tool string, raw json.RawMessage) json.RawMessage {
	var in map[string]any
	if json.Unmarshal(raw, &in) != nil || in == nil {
		return json.RawMessage(`{}`)
	}
	if tool != "write" && tool != "edit" {
		return mustJSON(in)
	}
	out := map[string]any{}
	for k, v := range in {
		out[k] = v
	}
	if p, ok := in["path"]; ok {
		delete(out, "path")
		out["file_path"] = p
	}
	edit := func(m map[string]any) map[string]any {
		return map[string]any{"old_string": m["oldText"], "new_string": m["newText"]}
	}
	if edits, ok := in["edits"].([]any); ok {
		mapped := make([]any, 0, len(edits))
		for _, e := range edits {
			if m, ok := e.(map[string]any); ok {
				mapped = append(mapped, edit(m))
			}
		}
		out["edits"] = mapped
	} else if _, ok := in["oldText"]; ok {
		delete(out, "oldText")
		delete(out, "newText")
		for k, v := range edit(in) {
			out[k] = v
		}
	}
	return mustJSON(out)
}

// mustJSON encodes v as it was (no HTML escaping of <, > and &), or {}.
func mustJSON(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return json.RawMessage(`{}`)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// piApproveAnswer is the dialog value that tells the extension v.
func piApproveAnswer(v Verdict) string {
	switch {
	case v.Allow && v.Remember:
		return "allow-session"
	case v.Allow:
		return "allow"
	case v.Message != "":
		return "deny:" + v.Message
	}
	return "deny"
}

// piRPCDialogAnswer answers an extension's select dialog with value.
func piRPCDialogAnswer(id, value string) []byte {
	return piRPCMarshal(map[string]any{"type": "extension_ui_response", "id": id, "value": value})
}
