package backends

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// listing is one of testdata/session-files: a HOME after two turns of one
// session of a real CLI.
type listing struct {
	session, workDir string
	files            []string
}

func readListing(t *testing.T, name string) listing {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "testdata", "session-files", name+".txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var l listing
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), " ")
		switch k {
		case "session":
			l.session = v
		case "workdir":
			l.workDir = v
		default:
			l.files = append(l.files, v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return l
}

// The files SessionFilesOf picks out of a real CLI's HOME are exactly the
// session's transcript: what a fresh HOME needed to resume it.
func TestSessionFilesOfRealLayouts(t *testing.T) {
	tests := []struct {
		backend string
		want    []string
	}{
		{"codex", []string{".codex/sessions/2026/11/27/rollout-2026-11-27T01-38-27-01a21aa7-639a-7ee0-b346-b7596f8b4d08.jsonl"}},
		{"pi", []string{".pi/agent/sessions/--tmp-TestConformanceProbePi561569307-001--/2026-11-27T01-38-28-524Z_01a21aa7-682b-7106-972a-8e2dc1f6bf69.jsonl"}},
		{"gemini", []string{".gemini/tmp/001/chats/session-2026-11-27T01-38-3a68dfb4.jsonl"}},
	}
	for _, tt := range tests {
		t.Run(tt.backend, func(t *testing.T) {
			l := readListing(t, tt.backend)
			// An empty HOME: gemini's folder is then named for the
			// directory, as it was on the machine recorded.
			sf, err := SessionFilesOf(tt.backend, t.TempDir(), l.workDir, l.session)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range l.files {
				rel, ok := strings.CutPrefix(f, sf.Dir+"/")
				if ok && strings.Count(rel, "/") < sf.Depth && sf.Match(rel) {
					got = append(got, f)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("session files (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSessionFilesOfClaude(t *testing.T) {
	id := "2b0f5bbf-6b4e-4b0c-9d57-6f0b0a3c1e11"
	sf, err := SessionFilesOf("claude", "/home/agent", "/srv/projects/my app", id)
	if err != nil {
		t.Fatal(err)
	}
	if want := ".claude/projects/-srv-projects-my-app"; sf.Dir != want {
		t.Errorf("Dir = %q, want %q", sf.Dir, want)
	}
	for rel, want := range map[string]bool{
		id + ".jsonl":                      true,
		id + "/subagents/agent-1.jsonl":    true,
		"other.jsonl":                      false,
		id + ".jsonl.bak":                  false,
		"x" + id + ".jsonl":                false,
		"3b0f5bbf-6b4e-4b0c-9d57-6f.jsonl": false,
	} {
		if got := sf.Match(rel); got != want {
			t.Errorf("Match(%q) = %v, want %v", rel, got, want)
		}
	}
}

// gemini's folder for a directory is the one this HOME already gives it,
// by its registry or by a marker, else a free one.
func TestSessionFilesOfGeminiFolder(t *testing.T) {
	const work = "/srv/projects/app"
	write := func(t *testing.T, home, rel, data string) {
		t.Helper()
		p := filepath.Join(home, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name  string
		setup func(t *testing.T, home string)
		want  string
	}{
		{"empty home", func(*testing.T, string) {}, ".gemini/tmp/app"},
		{"registry", func(t *testing.T, home string) {
			write(t, home, ".gemini/projects.json", `{"projects":{"/srv/projects/app":"app-2"}}`)
		}, ".gemini/tmp/app-2"},
		{"registry entry marked for another", func(t *testing.T, home string) {
			write(t, home, ".gemini/projects.json", `{"projects":{"/srv/projects/app":"app-2"}}`)
			write(t, home, ".gemini/tmp/app-2/.project_root", "/elsewhere/app")
			write(t, home, ".gemini/tmp/app/.project_root", "/other/app")
		}, ".gemini/tmp/app-1"},
		{"marker", func(t *testing.T, home string) {
			write(t, home, ".gemini/tmp/zz/.project_root", work+"\n")
		}, ".gemini/tmp/zz"},
		{"registry naming a path", func(t *testing.T, home string) {
			write(t, home, ".gemini/projects.json", `{"projects":{"/srv/projects/app":"../../etc"}}`)
		}, ".gemini/tmp/app"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			tt.setup(t, home)
			sf, err := SessionFilesOf("gemini", home, work, "3a68dfb4-bc93-4d0e-acd1-e454a873bb62")
			if err != nil {
				t.Fatal(err)
			}
			if sf.Dir != tt.want {
				t.Errorf("Dir = %q, want %q", sf.Dir, tt.want)
			}
			if sf.Marker == nil || string(sf.Marker.Data) != work {
				t.Errorf("Marker = %+v", sf.Marker)
			}
		})
	}
}

func TestSessionFilesOfRefuses(t *testing.T) {
	tests := []struct {
		backend, id string
		notMovable  bool
	}{
		{"opencode", "ses_abc", true},
		{"fake", "s1", true},
		{"claude", "../../etc/passwd", false},
		{"claude", "", false},
		{"codex", "a/b", false},
		{"gemini", "short", false},
	}
	for _, tt := range tests {
		_, err := SessionFilesOf(tt.backend, "/home/agent", "/srv/app", tt.id)
		if err == nil {
			t.Errorf("SessionFilesOf(%s, %q) = nil error", tt.backend, tt.id)
		}
		if errors.Is(err, ErrNotMovable) != tt.notMovable {
			t.Errorf("SessionFilesOf(%s, %q) = %v; not movable %v", tt.backend, tt.id, err, tt.notMovable)
		}
	}
}
