package backends

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrNotMovable is the error of SessionFilesOf for a CLI whose sessions
// cannot be carried to another machine as files: opencode keeps them in a
// database, and a backend not known here may keep them anywhere. Its lanes
// stay on one worker; when that worker is gone the session heals with the
// recent conversation.
var ErrNotMovable = errors.New("this agent CLI's sessions cannot be moved between machines")

// SessionFiles is where a CLI keeps the files of one session below the
// agent's home: what a worker that ran the session copies out after a
// turn, and what a worker that did not puts back before resuming it. The
// layouts were read from the real CLIs (testdata/session-files).
type SessionFiles struct {
	// Dir is the session's folder, relative to the agent's home.
	Dir string
	// Depth is how many path elements below Dir a file of the session
	// may have (codex: 4, YYYY/MM/DD/rollout-….jsonl).
	Depth int
	// Match reports whether the file at rel (below Dir, slash-separated)
	// is one of the session's.
	Match func(rel string) bool
	// Marker, if set, is a file to write in Dir before restoring into it,
	// when it is missing: gemini finds the folder of a directory it has no
	// record of by the directory's path in Dir/.project_root.
	Marker *MarkerFile
}

// MarkerFile is a small file SessionFiles.Marker names.
type MarkerFile struct {
	Name string
	Data []byte
}

// SessionFilesOf returns where backend keeps session id of a CLI run in
// workDir, with the agent's home home (absolute). It reads the home only
// for gemini, to find the folder gemini gives workDir there. An id that
// cannot be a file name is an error; a CLI whose sessions are not files is
// ErrNotMovable.
//
//   - claude: .claude/projects/<workDir, every character but ASCII letters
//     and digits made "-">/<id>.jsonl, and its sub-agents' files in
//     <id>/ beside it (see MoveSession).
//   - codex: .codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl; codex
//     0.169 finds a session copied there alone, without its sqlite state.
//   - pi: .pi/agent/sessions/--<workDir without its leading "/", "/", "\"
//     and ":" made "-">--/<time>_<id>.jsonl.
//   - gemini: .gemini/tmp/<the folder's short name>/chats/session-<time>-
//     <first 8 characters of id>.jsonl; the short name is the one
//     projects.json or a .project_root marker gives workDir, else a new
//     one, marked.
func SessionFilesOf(backend, home, workDir, id string) (SessionFiles, error) {
	if !validSessionName(id) {
		return SessionFiles{}, fmt.Errorf("session files: %q cannot be a session id", id)
	}
	workDir = filepath.Clean(workDir)
	switch backend {
	case "claude":
		return SessionFiles{
			Dir:   path.Join(".claude", "projects", claudeProjectDir(workDir)),
			Depth: 4,
			Match: func(rel string) bool { return rel == id+".jsonl" || strings.HasPrefix(rel, id+"/") },
		}, nil
	case "codex":
		suffix := "-" + id + ".jsonl"
		return SessionFiles{
			Dir:   path.Join(".codex", "sessions"),
			Depth: 4,
			Match: func(rel string) bool {
				parts := strings.Split(rel, "/")
				name := parts[len(parts)-1]
				return len(parts) == 4 && strings.HasPrefix(name, "rollout-") && strings.HasSuffix(name, suffix)
			},
		}, nil
	case "pi":
		return SessionFiles{
			Dir:   path.Join(".pi", "agent", "sessions", piSessionDir(workDir)),
			Depth: 1,
			Match: func(rel string) bool { return !strings.Contains(rel, "/") && strings.HasSuffix(rel, "_"+id+".jsonl") },
		}, nil
	case "gemini":
		if len(id) < 8 {
			return SessionFiles{}, fmt.Errorf("session files: %q cannot be a gemini session id", id)
		}
		slug := geminiSlug(home, workDir)
		short := id[:8]
		return SessionFiles{
			Dir:   path.Join(".gemini", "tmp", slug),
			Depth: 3,
			Match: func(rel string) bool {
				if strings.HasPrefix(rel, id+"/") {
					return true // the session's plans and tasks
				}
				name, ok := strings.CutPrefix(rel, "chats/session-")
				return ok && !strings.Contains(name, "/") &&
					(strings.HasSuffix(name, "-"+short+".jsonl") || strings.HasSuffix(name, "-"+short+".json"))
			},
			Marker: &MarkerFile{Name: ".project_root", Data: []byte(workDir)},
		}, nil
	}
	return SessionFiles{}, fmt.Errorf("session files of %s: %w", backend, ErrNotMovable)
}

// validSessionName reports whether id can name a file: CLIs' session ids
// are UUIDs, and a stored copy is named by it.
func validSessionName(id string) bool {
	if id == "" || id == "." || id == ".." || len(id) > 128 {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}

// piSessionDir is the name pi gives a working directory's sessions folder
// (pi-coding-agent's getDefaultSessionDir).
func piSessionDir(dir string) string {
	dir = strings.TrimPrefix(strings.TrimPrefix(dir, "/"), `\`)
	return "--" + strings.NewReplacer("/", "-", `\`, "-", ":", "-").Replace(dir) + "--"
}

// geminiSlug is the folder under ~/.gemini/tmp that gemini uses, or will
// use, for workDir in home: the one its projects.json names (gemini
// 0.61's ProjectRegistry), else the one whose .project_root marker names
// workDir, else a free name made from workDir's last element, which gemini
// adopts by its marker.
func geminiSlug(home, workDir string) string {
	tmp := filepath.Join(home, ".gemini", "tmp")
	owner := func(slug string) (string, bool) {
		data, err := os.ReadFile(filepath.Join(tmp, slug, ".project_root"))
		if err != nil {
			return "", false
		}
		return filepath.Clean(strings.TrimSpace(string(data))), true
	}
	var reg struct {
		Projects map[string]string `json:"projects"`
	}
	if data, err := os.ReadFile(filepath.Join(home, ".gemini", "projects.json")); err == nil && json.Unmarshal(data, &reg) == nil {
		if slug := reg.Projects[workDir]; validSlug(slug) {
			if o, marked := owner(slug); !marked || o == workDir {
				return slug
			}
		}
	}
	if entries, err := os.ReadDir(tmp); err == nil {
		for _, e := range entries {
			if o, marked := owner(e.Name()); e.IsDir() && marked && o == workDir && validSlug(e.Name()) {
				return e.Name()
			}
		}
	}
	base := strings.Map(func(r rune) rune {
		if r < 128 && (r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return r
		}
		if r >= 'A' && r <= 'Z' {
			return r + ('a' - 'A')
		}
		return '-'
	}, filepath.Base(workDir))
	if !validSlug(base) {
		base = "project"
	}
	slug := base
	for i := 1; i < 1000; i++ {
		if _, err := os.Lstat(filepath.Join(tmp, slug)); err != nil {
			break // free (or unreadable: restoring there fails and says so)
		}
		slug = base + "-" + strconv.Itoa(i)
	}
	return slug
}

func validSlug(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, `/\`)
}
