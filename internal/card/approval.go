package card

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// ApprovalPhase is where a tool approval stands.
type ApprovalPhase int

const (
	// Asking waits for an answer; the message carries the buttons.
	Asking ApprovalPhase = iota
	// Allowed ran the tool once.
	Allowed
	// AllowedSession ran it and allows the same call for the session.
	AllowedSession
	// Denied refused the tool; the agent goes on without it.
	Denied
	// DeniedStopped refused it and stopped the turn.
	DeniedStopped
	// TimedOut was denied because nobody answered in time.
	TimedOut
	// Withdrawn was cancelled by the CLI (the turn was stopped or ended).
	Withdrawn
	// Restarted was denied because the gateway restarted while asking.
	Restarted
)

// Approval is what an approval message shows.
type Approval struct {
	Phase ApprovalPhase
	// Tool is the tool's name; Input its JSON input.
	Tool  string
	Input json.RawMessage
	// Description is the CLI's own description of the call, if any.
	Description string
	// Asker is the user id the question is for (shown, never pinged).
	Asker string
	// By is the user id who answered, for the answered phases.
	By string
	// Timeout is how long the question stays open.
	Timeout time.Duration
	// WorkDir is where the agent works: file paths inside it are shown
	// relative to it, as on the turn card.
	WorkDir string
}

// Limits of an approval message's parts, so that the whole stays within
// Discord's 2000 characters whatever the tool's input.
const (
	maxApprovalDetail = 1200 // characters of command, diff or input
	maxDiffLines      = 24
	maxDescription    = 200
)

// RenderApproval returns an approval message's content: the question with
// what the tool would do, or the answer it got over what it was about. It
// is at most 2000 characters and pings nobody by itself (mentions must be
// sent with allowed mentions empty).
func RenderApproval(a Approval) string {
	var b strings.Builder
	b.WriteString(approvalHeader(a))
	b.WriteByte('\n')
	if d := safeInline(oneLine(relativeIn(a.Description, a.WorkDir), maxDescription)); d != "" && a.Phase == Asking && !namesOnly(d, a) {
		b.WriteString("-# " + d + "\n")
	}
	b.WriteString(approvalDetail(a.Tool, a.Input, a.WorkDir))
	if a.Phase == Asking && a.Timeout > 0 {
		fmt.Fprintf(&b, "\n-# Denied automatically if nobody answers within %s.", Duration(a.Timeout))
	}
	return strings.TrimRight(b.String(), "\n")
}

// relativeIn writes the paths under dir in text relative to it: an
// agent's description of a call may name the server's folders
// (opencode's is the file's absolute path).
func relativeIn(text, dir string) string {
	if dir == "" || dir == "/" {
		return text
	}
	dir = strings.TrimSuffix(dir, "/")
	return strings.ReplaceAll(strings.ReplaceAll(text, dir+"/", ""), dir, ".")
}

// namesOnly reports whether a description d says no more than the file
// line under it (opencode's is the file's path).
func namesOnly(d string, a Approval) bool {
	var in struct {
		FilePath string `json:"file_path"`
	}
	_ = json.Unmarshal(a.Input, &in)
	return in.FilePath != "" && d == safeInline(relative(in.FilePath, a.WorkDir))
}

func approvalHeader(a Approval) string {
	tool := "`" + safeInline(a.Tool) + "`"
	by := ""
	if a.By != "" {
		by = " by <@" + a.By + ">"
	}
	switch a.Phase {
	case Allowed:
		return "✅ Allowed" + by + ": " + tool
	case AllowedSession:
		return "✅ Allowed for this session" + by + ": " + tool
	case Denied:
		return "🚫 Denied" + by + ": " + tool
	case DeniedStopped:
		return "🛑 Denied and stopped" + by + ": " + tool
	case TimedOut:
		return "⌛ Denied: nobody answered in time: " + tool
	case Withdrawn:
		return "➖ No longer needed (the turn was stopped or moved on): " + tool
	case Restarted:
		return "🚫 Denied: the gateway restarted before anyone answered; it did not run: " + tool
	}
	who := ""
	if a.Asker != "" {
		who = "<@" + a.Asker + ">, "
	}
	return "🔐 " + who + "the agent wants to use " + tool + ". Allow it?"
}

// approvalDetail shows what the call would do: Bash's command, an edit as
// a short diff, a new file's first lines, else the input.
func approvalDetail(tool string, raw json.RawMessage, workDir string) string {
	var in map[string]any
	_ = json.Unmarshal(raw, &in)
	str := func(k string) string { s, _ := in[k].(string); return s }
	fileLine := func(path string) string { return fileLine(relative(path, workDir)) }
	switch {
	case str("command") != "":
		return codeBlock("sh", cut(str("command"), maxApprovalDetail))
	case str("old_string") != "" || str("new_string") != "":
		return fileLine(str("file_path")) + codeBlock("diff", diff(str("old_string"), str("new_string")))
	case in["edits"] != nil:
		var d strings.Builder
		edits, _ := in["edits"].([]any)
		for _, e := range edits {
			m, _ := e.(map[string]any)
			o, _ := m["old_string"].(string)
			n, _ := m["new_string"].(string)
			d.WriteString(diff(o, n) + "\n")
		}
		return fileLine(str("file_path")) + codeBlock("diff", cut(strings.TrimRight(d.String(), "\n"), maxApprovalDetail))
	case str("content") != "" && str("file_path") != "":
		return fileLine(str("file_path")) + codeBlock("diff", diff("", str("content")))
	case str("file_path") != "":
		return fileLine(str("file_path"))
	case len(in) == 0:
		return ""
	}
	pretty, err := json.MarshalIndent(in, "", "  ")
	if err != nil {
		return ""
	}
	return codeBlock("json", cut(string(pretty), maxApprovalDetail))
}

func fileLine(path string) string {
	if path == "" {
		return ""
	}
	return "File: `" + safeInline(cut(path, 300)) + "`\n"
}

// diff shows old and new as removed and added lines, at most maxDiffLines
// of each and maxApprovalDetail characters in all.
func diff(old, new string) string {
	var b strings.Builder
	write := func(prefix, text string) {
		if text == "" {
			return
		}
		lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
		for i, l := range lines {
			if i == maxDiffLines {
				fmt.Fprintf(&b, "%s … %d more lines\n", prefix, len(lines)-i)
				break
			}
			b.WriteString(prefix + l + "\n")
		}
	}
	write("-", old)
	write("+", new)
	return cut(strings.TrimRight(b.String(), "\n"), maxApprovalDetail)
}

// codeBlock fences text; fences inside it are broken so they cannot end
// the block early.
func codeBlock(lang, text string) string {
	for strings.Contains(text, "```") {
		text = strings.ReplaceAll(text, "```", "`\u200b``")
	}
	return "```" + lang + "\n" + text + "\n```"
}

// safeInline keeps text inside an inline code span.
func safeInline(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "`", "'"), "\n", " ")
}

// cut shortens s to max characters, marking the cut.
func cut(s string, max int) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return string(r[:max-1]) + "…"
}
