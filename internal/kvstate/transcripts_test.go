package kvstate

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/natstest"
	"github.com/agentgateway/gateway/internal/proc"
)

const claudeID = "2b0f5bbf-6b4e-4b0c-9d57-6f0b0a3c1e11"

func openTranscripts(t *testing.T, agent *proc.Credential) *Transcripts {
	t.Helper()
	srv := natstest.Start(t, t.TempDir())
	tr, err := OpenTranscripts(context.Background(), connect(t, srv), TranscriptOptions{Agent: agent})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func writeFile(t *testing.T, home, rel, data string, mod time.Time) {
	t.Helper()
	p := filepath.Join(home, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, mod, mod); err != nil {
		t.Fatal(err)
	}
}

// tree is every regular file below home, by path, with its content.
func tree(t *testing.T, home string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(home, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(home, p)
		out[rel] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A claude session saved on one machine is restored on another with a
// fresh home: the same files, 0600, with their times; a second restore
// changes nothing.
func TestTranscriptsRoundTripClaude(t *testing.T) {
	tr := openTranscripts(t, nil)
	ctx := context.Background()
	const work = "/srv/projects/app"
	folder := ".claude/projects/-srv-projects-app/"
	mod := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	homeA, homeB := t.TempDir(), t.TempDir()
	writeFile(t, homeA, folder+claudeID+".jsonl", `{"type":"user","sessionId":"`+claudeID+`"}`+"\n", mod)
	writeFile(t, homeA, folder+claudeID+"/subagents/agent-1.jsonl", "{}\n", mod)
	writeFile(t, homeA, folder+"other-session.jsonl", "not this one\n", mod)
	writeFile(t, homeA, ".claude/settings.json", "{}", mod)
	if err := tr.Save(ctx, "claude", homeA, work, claudeID); err != nil {
		t.Fatal(err)
	}
	found, err := tr.Restore(ctx, "claude", homeB, work, claudeID)
	if err != nil || !found {
		t.Fatalf("Restore = %v, %v", found, err)
	}
	want := map[string]string{
		folder + claudeID + ".jsonl":                   `{"type":"user","sessionId":"` + claudeID + `"}` + "\n",
		folder + claudeID + "/subagents/agent-1.jsonl": "{}\n",
	}
	if diff := cmp.Diff(want, tree(t, homeB)); diff != "" {
		t.Errorf("restored home (-want +got):\n%s", diff)
	}
	p := filepath.Join(homeB, folder+claudeID+".jsonl")
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 || !st.ModTime().Equal(mod) {
		t.Errorf("restored file: mode %v, modified %v; want 0600, %v", st.Mode().Perm(), st.ModTime(), mod)
	}
	ino := st.Sys().(*syscall.Stat_t).Ino

	found, err = tr.Restore(ctx, "claude", homeB, work, claudeID)
	if err != nil || !found {
		t.Fatalf("second Restore = %v, %v", found, err)
	}
	st2, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if st2.Sys().(*syscall.Stat_t).Ino != ino {
		t.Error("the second restore wrote the file again")
	}
	if diff := cmp.Diff(want, tree(t, homeB)); diff != "" {
		t.Errorf("home after the second restore (-want +got):\n%s", diff)
	}
}

// The files a later turn adds on B reach A: Save sends what changed, and
// Restore replaces A's older copy but keeps a longer one.
func TestTranscriptsNewerCopyWins(t *testing.T) {
	tr := openTranscripts(t, nil)
	ctx := context.Background()
	const work = "/srv/app"
	rel := ".claude/projects/-srv-app/" + claudeID + ".jsonl"
	homeA, homeB := t.TempDir(), t.TempDir()
	now := time.Now().Truncate(time.Second)
	writeFile(t, homeA, rel, "turn 1\n", now)
	if err := tr.Save(ctx, "claude", homeA, work, claudeID); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Restore(ctx, "claude", homeB, work, claudeID); err != nil {
		t.Fatal(err)
	}
	writeFile(t, homeB, rel, "turn 1\nturn 2\n", now)
	if err := tr.Save(ctx, "claude", homeB, work, claudeID); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Restore(ctx, "claude", homeA, work, claudeID); err != nil {
		t.Fatal(err)
	}
	if got := tree(t, homeA)[rel]; got != "turn 1\nturn 2\n" {
		t.Errorf("A's copy after restore = %q, want B's later one", got)
	}
	// A ran a turn whose save failed: its longer copy stays.
	writeFile(t, homeA, rel, "turn 1\nturn 2\nturn 3\n", now)
	if _, err := tr.Restore(ctx, "claude", homeA, work, claudeID); err != nil {
		t.Fatal(err)
	}
	if got := tree(t, homeA)[rel]; got != "turn 1\nturn 2\nturn 3\n" {
		t.Errorf("A's longer copy was replaced: %q", got)
	}
}

// Every CLI whose sessions are files round-trips, in the layout its real
// CLI used (testdata/session-files).
func TestTranscriptsRoundTripEachCLI(t *testing.T) {
	tests := []struct {
		backend, id, work, rel string
	}{
		{"codex", "01a21aa7-639a-7ee0-b346-b7596f8b4d08", "/srv/app",
			".codex/sessions/2026/11/27/rollout-2026-11-27T01-38-27-01a21aa7-639a-7ee0-b346-b7596f8b4d08.jsonl"},
		{"pi", "01a21aa7-682b-7106-972a-8e2dc1f6bf69", "/srv/app",
			".pi/agent/sessions/--srv-app--/2026-11-27T01-38-28-524Z_01a21aa7-682b-7106-972a-8e2dc1f6bf69.jsonl"},
		{"gemini", "3a68dfb4-bc93-4d0e-acd1-e454a873bb62", "/srv/app",
			".gemini/tmp/app/chats/session-2026-11-27T01-38-3a68dfb4.jsonl"},
	}
	tr := openTranscripts(t, nil)
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.backend, func(t *testing.T) {
			homeA, homeB := t.TempDir(), t.TempDir()
			writeFile(t, homeA, tt.rel, "the session\n", time.Now())
			if tt.backend == "gemini" {
				// gemini marks the folder it gives a directory.
				writeFile(t, homeA, ".gemini/tmp/app/.project_root", tt.work, time.Now())
			}
			if err := tr.Save(ctx, tt.backend, homeA, tt.work, tt.id); err != nil {
				t.Fatal(err)
			}
			if found, err := tr.Restore(ctx, tt.backend, homeB, tt.work, tt.id); !found || err != nil {
				t.Fatalf("Restore = %v, %v", found, err)
			}
			got := tree(t, homeB)
			if got[tt.rel] != "the session\n" {
				t.Errorf("restored home = %v, want %s", got, tt.rel)
			}
			if tt.backend == "gemini" && got[".gemini/tmp/app/.project_root"] != tt.work {
				t.Errorf("gemini's folder marker = %q", got[".gemini/tmp/app/.project_root"])
			}
		})
	}
}

func TestTranscriptsMissingIsNotAnError(t *testing.T) {
	tr := openTranscripts(t, nil)
	found, err := tr.Restore(context.Background(), "claude", t.TempDir(), "/srv/app", claudeID)
	if found || err != nil {
		t.Errorf("Restore of a session never saved = %v, %v; want false, nil", found, err)
	}
	// Saving a session with no files stores nothing.
	if err := tr.Save(context.Background(), "claude", t.TempDir(), "/srv/app", claudeID); err != nil {
		t.Errorf("Save with no files = %v", err)
	}
	if found, _ := tr.Restore(context.Background(), "claude", t.TempDir(), "/srv/app", claudeID); found {
		t.Error("a session with no files was stored")
	}
}

func TestTranscriptsRefuse(t *testing.T) {
	tr := openTranscripts(t, nil)
	ctx := context.Background()
	if err := tr.Save(ctx, "opencode", t.TempDir(), "/srv/app", "ses_1"); !errors.Is(err, backends.ErrNotMovable) {
		t.Errorf("Save of an opencode session = %v, want ErrNotMovable", err)
	}
	if _, err := tr.Restore(ctx, "opencode", t.TempDir(), "/srv/app", "ses_1"); !errors.Is(err, backends.ErrNotMovable) {
		t.Errorf("Restore of an opencode session = %v, want ErrNotMovable", err)
	}

	// The agent points claude's projects folder elsewhere: nothing is
	// written through the link, and nothing is read through one.
	homeA, homeB, elsewhere := t.TempDir(), t.TempDir(), t.TempDir()
	writeFile(t, homeA, ".claude/projects/-srv-app/"+claudeID+".jsonl", "x\n", time.Now())
	if err := tr.Save(ctx, "claude", homeA, "/srv/app", claudeID); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(homeB, ".claude"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(homeB, ".claude", "projects")); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Restore(ctx, "claude", homeB, "/srv/app", claudeID); !errors.Is(err, backends.ErrNotTheAgents) {
		t.Errorf("Restore through a link = %v, want ErrNotTheAgents", err)
	}
	if got := tree(t, elsewhere); len(got) != 0 {
		t.Errorf("written through the link: %v", got)
	}
	homeC := t.TempDir()
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("gateway secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(homeC, ".claude/projects/-srv-app"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(homeC, ".claude/projects/-srv-app", claudeID+".jsonl")); err != nil {
		t.Fatal(err)
	}
	const other = "3b0f5bbf-6b4e-4b0c-9d57-6f0b0a3c1e11"
	if err := os.Rename(filepath.Join(homeC, ".claude/projects/-srv-app", claudeID+".jsonl"), filepath.Join(homeC, ".claude/projects/-srv-app", other+".jsonl")); err != nil {
		t.Fatal(err)
	}
	if err := tr.Save(ctx, "claude", homeC, "/srv/app", other); err != nil {
		t.Fatal(err)
	}
	if found, _ := tr.Restore(ctx, "claude", t.TempDir(), "/srv/app", other); found {
		t.Error("a link to a file outside the home was stored")
	}
}

// With AGENT_USER, restored files and the folders made for them are the
// agent's (needs root to give files away).
func TestTranscriptsRestoreGivesFilesToTheAgent(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("giving files to another user needs root")
	}
	agent := &proc.Credential{UID: 12345, GID: 12345}
	tr := openTranscripts(t, nil)
	ctx := context.Background()
	homeA, homeB := t.TempDir(), t.TempDir()
	if err := os.Chown(homeB, 12345, 12345); err != nil {
		t.Fatal(err)
	}
	writeFile(t, homeA, ".claude/projects/-srv-app/"+claudeID+".jsonl", "x\n", time.Now())
	if err := tr.Save(ctx, "claude", homeA, "/srv/app", claudeID); err != nil {
		t.Fatal(err)
	}
	tr.agent = agent
	if _, err := tr.Restore(ctx, "claude", homeB, "/srv/app", claudeID); err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{".claude", ".claude/projects", ".claude/projects/-srv-app", ".claude/projects/-srv-app/" + claudeID + ".jsonl"} {
		st, err := os.Lstat(filepath.Join(homeB, rel))
		if err != nil {
			t.Fatal(err)
		}
		if s := st.Sys().(*syscall.Stat_t); s.Uid != 12345 || s.Gid != 12345 {
			t.Errorf("%s is owned by %d:%d, want the agent's", rel, s.Uid, s.Gid)
		}
	}
}
