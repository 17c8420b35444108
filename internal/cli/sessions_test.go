package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// sessionsFixture writes sessions.json and threads.json as the gateway
// keeps them: a channel in a project, a thread of it in another, and a
// channel with settings but no session.
func sessionsFixture(t *testing.T) (envFile, root string) {
	t.Helper()
	dir := t.TempDir()
	configDir := filepath.Join(dir, "config")
	root = filepath.Join(dir, "projects")
	for _, d := range []string{configDir, filepath.Join(root, "app"), filepath.Join(root, "web", "ui")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sessions := `{"version":1,"channels":{
  "100":{"session_id":"7e8d8a5c-70e2-4c25-9420-5cf22aa11aa5","backend":"claude","work_dir":"` + filepath.Join(root, "app") + `","updated":"2026-11-26T10:00:00Z"},
  "200":{"session_id":"ses_abc","backend":"opencode","updated":"2026-11-26T11:00:00Z"}},
 "settings":{"100":{"project":"` + filepath.Join(root, "app") + `"},"200":{"project":"` + filepath.Join(root, "web", "ui") + `"},"300":{"model":"opus"}}}`
	threads := `{"version":1,"threads":{"200":{"id":"200","parent":"100","name":"Fix the bug","created":"2026-11-26T09:00:00Z"}}}`
	for name, text := range map[string]string{"sessions.json": sessions, "threads.json": threads} {
		if err := os.WriteFile(filepath.Join(configDir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	envFile = filepath.Join(dir, ".env")
	os.WriteFile(envFile, []byte("CONFIG_DIR="+configDir+"\nPROJECTS_ROOT="+root+"\n"), 0o600)
	return envFile, root
}

func TestSessionsJSON(t *testing.T) {
	envFile, _ := sessionsFixture(t)
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"sessions", "--json", "--env-file", envFile}, streams{in: strings.NewReader(""), out: &out, errOut: &errOut})
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var got []sessionRow
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out.String())
	}
	want := []sessionRow{
		{Channel: "200", Thread: true, Parent: "100", Project: "web/ui", Backend: "opencode", Session: "ses_abc", LastUsed: time.Date(2026, 11, 26, 11, 0, 0, 0, time.UTC)},
		{Channel: "100", Project: "app", Backend: "claude", Session: "7e8d8a5c-70e2-4c25-9420-5cf22aa11aa5", LastUsed: time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// local is 2026-11-26 at hour UTC as the table shows it (local time).
func local(hour int) string {
	return time.Date(2026, 11, 26, hour, 0, 0, 0, time.UTC).Local().Format("2006-01-02 15:04")
}

func TestSessionsTable(t *testing.T) {
	envFile, root := sessionsFixture(t)
	before, err := os.ReadFile(filepath.Join(filepath.Dir(envFile), "config", "sessions.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if code := run(context.Background(), []string{"sessions", "--env-file", envFile}, streams{in: strings.NewReader(""), out: &out, errOut: &bytes.Buffer{}}); code != exitOK {
		t.Fatalf("exit %d", code)
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("want a header and two rows:\n%s", out.String())
	}
	for i, want := range [][]string{
		{"CHANNEL", "THREAD", "PROJECT", "CLI", "SESSION", "LAST USED"},
		{"200", "in 100", "web/ui", "opencode", "ses_abc", local(11)},
		{"100", "no", "app", "claude", "7e8d8a5c-70e2-4c25-9420-5cf22aa11aa5", local(10)},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("line %d %q lacks %q", i, lines[i], w)
			}
		}
	}
	if strings.Contains(out.String(), root) {
		t.Errorf("the table shows PROJECTS_ROOT's path:\n%s", out.String())
	}
	after, _ := os.ReadFile(filepath.Join(filepath.Dir(envFile), "config", "sessions.json"))
	if !bytes.Equal(before, after) {
		t.Error("sessions changed sessions.json")
	}
}

func TestSessionsEmptyAndUnreadable(t *testing.T) {
	dir := t.TempDir()
	envFile := filepath.Join(dir, ".env")
	os.WriteFile(envFile, []byte("CONFIG_DIR="+dir+"\n"), 0o600)
	var out bytes.Buffer
	if code := run(context.Background(), []string{"sessions", "--env-file", envFile}, streams{in: strings.NewReader(""), out: &out, errOut: &bytes.Buffer{}}); code != exitOK || !strings.Contains(out.String(), "No sessions") {
		t.Errorf("exit %d, %q", code, out.String())
	}
	os.WriteFile(filepath.Join(dir, "sessions.json"), []byte("{torn"), 0o600)
	var errOut bytes.Buffer
	if code := run(context.Background(), []string{"sessions", "--env-file", envFile}, streams{in: strings.NewReader(""), out: &bytes.Buffer{}, errOut: &errOut}); code == exitOK {
		t.Error("an unreadable sessions.json passed")
	}
	if _, err := os.Stat(filepath.Join(dir, "sessions.json")); err != nil {
		t.Errorf("the unreadable file was moved: %v", err)
	}
}
