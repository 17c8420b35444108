package card

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
)

// Summarize is the one-line summary of a tool call from its name and raw
// JSON input: the command of a shell tool, a file tool's path relative to
// workDir, a search's pattern and where, a fetch's URL, a subagent's
// description; for other tools the first text field. It knows the input
// fields of claude's, codex's, gemini's, opencode's and pi's tools. It
// never fails: input it cannot read gives "".
func Summarize(name, input, workDir string) string {
	var in map[string]any
	if json.Unmarshal([]byte(input), &in) != nil {
		return ""
	}
	str := func(keys ...string) string {
		for _, k := range keys {
			switch v := in[k].(type) {
			case string:
				if v != "" {
					return v
				}
			case []any: // codex's command as argv
				parts := make([]string, 0, len(v))
				for _, p := range v {
					if s, ok := p.(string); ok {
						parts = append(parts, s)
					}
				}
				if len(parts) >= 3 && (parts[0] == "bash" || parts[0] == "sh") && parts[1] == "-lc" {
					parts = parts[2:]
				}
				if len(parts) > 0 {
					return strings.Join(parts, " ")
				}
			}
		}
		return ""
	}
	path := func(keys ...string) string { return relative(str(keys...), workDir) }
	var s string
	switch strings.ToLower(name) {
	case "bash", "shell", "run_shell_command", "command_execution", "exec_command", "local_shell":
		s = firstLine(str("command", "cmd"))
	case "read", "write", "edit", "multiedit", "read_file", "write_file", "replace", "edit_file", "apply_patch", "ls", "list_directory":
		s = path("file_path", "filePath", "absolute_path", "path", "dir_path")
	case "notebookedit", "notebookread":
		s = path("notebook_path")
	case "grep", "glob", "search_file_content", "search", "find":
		s = str("pattern", "query")
		if where := path("path", "dir_path", "glob", "include"); where != "" && where != "." {
			s += " in " + where
		}
	case "webfetch", "web_fetch", "fetch":
		s = str("url", "prompt")
	case "websearch", "web_search", "google_web_search":
		s = str("query")
	case "task", "agent":
		s = str("description", "prompt")
	case "todowrite", "write_todos":
		if todos, ok := in["todos"].([]any); ok {
			s = fmt.Sprintf("%d todos", len(todos))
		}
	default:
		s = firstString(in)
	}
	return oneLine(s, maxSummary)
}

// relative shows p relative to dir when it is inside it.
func relative(p, dir string) string {
	if p == "" || dir == "" || !filepath.IsAbs(p) {
		return p
	}
	rel, err := filepath.Rel(dir, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return p
	}
	return rel
}

func firstLine(s string) string {
	line, rest, _ := strings.Cut(strings.TrimSpace(s), "\n")
	if rest != "" {
		line += " …"
	}
	return line
}

// firstString is the value of the first string field, by key order.
func firstString(in map[string]any) string {
	var best, bestKey string
	for k, v := range in {
		if s, ok := v.(string); ok && s != "" && (bestKey == "" || k < bestKey) {
			best, bestKey = s, k
		}
	}
	return firstLine(best)
}
