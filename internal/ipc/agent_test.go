package ipc

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"
)

// With Options.Agent (AGENT_USER), the agent's user can drop a message
// into outbound/ and it is posted; it can neither list the ipc folder nor
// put anything else in it, replace outbound/ or failed/, read failed/, nor
// take away a message another writer left.
func TestAgentPostsThroughTheIPCFolder(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to act as a second user")
	}
	const nobody = 65534
	// Not t.TempDir: its parents are private to root. base stands for
	// CONFIG_DIR, which the agent may search (its working directory).
	base, err := os.MkdirTemp("", "gwtest-ipc-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "ipc")
	poster := &fakePoster{}
	w, err := New(Options{
		Dir:     dir,
		Allowed: func(id string) bool { return id == chanA },
		Agent:   &Agent{UID: nobody, GID: nobody},
	}, poster, zerolog.New(zerolog.NewTestWriter(t)))
	if err != nil {
		t.Fatal(err)
	}
	// A message of another writer (a cron script as root), not yet posted.
	cron := filepath.Join(dir, OutboundDir, "cron.json")
	if err := os.WriteFile(cron, []byte(msgJSON(chanA, "from cron")), 0o644); err != nil {
		t.Fatal(err)
	}

	asAgent := func(script string) error {
		cmd := exec.Command("/bin/sh", "-c", script)
		cmd.Dir = base
		cmd.Env = []string{"PATH=/usr/bin:/bin", "M=" + msgJSON(chanA, "from the agent")}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Logf("%s: %v: %s", script, err, strings.TrimSpace(string(out)))
		}
		return err
	}
	if err := asAgent(`printf '%s' "$M" > ipc/outbound/.agent.tmp && mv ipc/outbound/.agent.tmp ipc/outbound/agent.json`); err != nil {
		t.Fatal("the agent cannot drop a message into outbound/")
	}
	for _, refused := range []string{
		"ls ipc",
		"touch ipc/mine",
		"mv ipc/outbound ipc/gone",
		"mv ipc/failed ipc/gone",
		"ls ipc/failed",
		"touch ipc/failed/mine",
		"rm -f ipc/outbound/cron.json",
		"mv ipc/outbound/cron.json ipc/outbound/.hidden",
	} {
		if err := asAgent(refused); err == nil {
			t.Errorf("the agent could: %s", refused)
		}
	}

	// A message to a channel that is not allowed: refused.
	if err := asAgent(`printf '%s' '` + msgJSON("223456789012345678", "elsewhere") + `' > ipc/outbound/.b.tmp && mv ipc/outbound/.b.tmp ipc/outbound/bad.json`); err != nil {
		t.Fatal(err)
	}

	w.Scan(context.Background())
	posts, _ := poster.got()
	want := []post{{Channel: chanA, Text: "from the agent"}, {Channel: chanA, Text: "from cron"}}
	if diff := cmp.Diff(want, posts); diff != "" {
		t.Errorf("posts (-want +got):\n%s", diff)
	}

	// The agent learns what became of its own messages, and only of those.
	read := func(name string) string {
		cmd := exec.Command("/bin/cat", filepath.Join(ReceiptsDir, name))
		cmd.Dir = dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		out, err := cmd.Output()
		if err != nil {
			return "unreadable: " + err.Error()
		}
		return strings.TrimSpace(string(out))
	}
	if got := read("agent.json"); got != ReceiptPosted {
		t.Errorf("receipt of the posted message = %q", got)
	}
	if got := read("bad.json"); !strings.HasPrefix(got, ReceiptRefused) || !strings.Contains(got, "not allowed") {
		t.Errorf("receipt of the refused message = %q", got)
	}
	if got := read("cron.json"); !strings.HasPrefix(got, "unreadable") {
		t.Errorf("the agent read a receipt of another writer's message: %q", got)
	}
	for _, refused := range []string{"touch ipc/receipts/mine", "rm -f ipc/receipts/agent.json", "ls ipc/failed"} {
		if err := asAgent(refused); err == nil {
			t.Errorf("the agent could: %s", refused)
		}
	}
}

// The gateway reads outbound/ and writes failed/ only while the folders
// are what they claim: real folders of the gateway's user that no one
// else can change (outbound/ may be written by the agent's group). A
// folder swapped for a link is never followed.
func TestScanRefusesFoldersNotItsOwn(t *testing.T) {
	for _, tc := range []struct {
		name string
		// swap changes the ipc folder e.dir; elsewhere is a folder outside
		// it holding a message file.
		swap func(t *testing.T, dir, elsewhere string)
	}{
		{"outbound/ is a link", func(t *testing.T, dir, elsewhere string) {
			mustDo(t, os.Rename(filepath.Join(dir, OutboundDir), filepath.Join(dir, "outbound.old")))
			mustDo(t, os.Symlink(elsewhere, filepath.Join(dir, OutboundDir)))
		}},
		{"failed/ is a link", func(t *testing.T, dir, elsewhere string) {
			mustDo(t, os.WriteFile(filepath.Join(dir, OutboundDir, "bad.json"), []byte("not json"), 0o600))
			mustDo(t, os.Rename(filepath.Join(dir, FailedDir), filepath.Join(dir, "failed.old")))
			mustDo(t, os.Symlink(elsewhere, filepath.Join(dir, FailedDir)))
		}},
		{"the ipc folder is a link", func(t *testing.T, dir, elsewhere string) {
			mustDo(t, os.Mkdir(filepath.Join(elsewhere, OutboundDir), 0o700))
			mustDo(t, os.Mkdir(filepath.Join(elsewhere, FailedDir), 0o700))
			mustDo(t, os.Rename(filepath.Join(elsewhere, "m.json"), filepath.Join(elsewhere, OutboundDir, "m.json")))
			mustDo(t, os.Rename(dir, dir+".old"))
			mustDo(t, os.Symlink(elsewhere, dir))
		}},
		{"the ipc folder is writable by others", func(t *testing.T, dir, elsewhere string) {
			mustDo(t, os.WriteFile(filepath.Join(dir, OutboundDir, "m.json"), []byte(msgJSON(chanA, "via a shared folder")), 0o600))
			mustDo(t, os.Chmod(dir, 0o777))
		}},
		{"outbound/ is writable by everyone", func(t *testing.T, dir, elsewhere string) {
			mustDo(t, os.WriteFile(filepath.Join(dir, OutboundDir, "m.json"), []byte(msgJSON(chanA, "via a shared folder")), 0o600))
			mustDo(t, os.Chmod(filepath.Join(dir, OutboundDir), 0o777))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			elsewhere := t.TempDir()
			mustDo(t, os.WriteFile(filepath.Join(elsewhere, "m.json"), []byte(msgJSON(chanA, "from elsewhere")), 0o600))
			before := tree(t, elsewhere)
			tc.swap(t, e.dir, elsewhere)
			e.w.Scan(context.Background())
			if posts, _ := e.poster.got(); len(posts) != 0 {
				t.Errorf("posted %+v", posts)
			}
			if tc.name != "the ipc folder is a link" {
				if diff := cmp.Diff(before, tree(t, elsewhere)); diff != "" {
					t.Errorf("the folder a link points at changed (-before +after):\n%s", diff)
				}
			}
			if !strings.Contains(e.logs.String(), "ipc folder") {
				t.Errorf("nothing logged about the ipc folder:\n%s", e.logs.String())
			}
		})
	}
}

// A message file with a second name (a hard link to a file elsewhere) is
// not read as a message.
func TestScanRefusesASecondName(t *testing.T) {
	e := newEnv(t, nil)
	other := filepath.Join(filepath.Dir(e.dir), "elsewhere.json")
	mustDo(t, os.WriteFile(other, []byte(msgJSON(chanA, "not a message")), 0o600))
	mustDo(t, os.Link(other, filepath.Join(e.dir, OutboundDir, "m.json")))
	e.w.Scan(context.Background())
	if posts, _ := e.poster.got(); len(posts) != 0 {
		t.Errorf("posted %+v", posts)
	}
	if got := e.reason(t, "m.json"); !strings.Contains(got, "other names") {
		t.Errorf("reason = %q", got)
	}
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// tree lists the files under dir with their content.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		out[strings.TrimPrefix(path, dir)] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A message file the agent's user wrote posts only where AgentAllowed
// says; the same message from another writer (an operator's script) posts
// wherever Allowed does.
func TestAgentMessagesStayWhereTheAgentTalks(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to write a file as a second user")
	}
	const nobody = 65534
	e := newEnv(t, func(o *Options) {
		o.Agent = &Agent{UID: nobody, GID: nobody}
		o.AgentAllowed = func(id string) bool { return id == chanA }
	})
	dropAs := func(name, channel string, uid int) {
		t.Helper()
		e.drop(t, name, msgJSON(channel, name))
		if err := os.Lchown(filepath.Join(e.dir, OutboundDir, name), uid, uid); err != nil {
			t.Fatal(err)
		}
	}
	dropAs("1-agent-here.json", chanA, nobody)
	dropAs("2-agent-elsewhere.json", chanB, nobody)
	dropAs("3-operator-elsewhere.json", chanB, 0)
	e.w.Scan(context.Background())

	got, _ := e.poster.got()
	var texts []string
	for _, p := range got {
		texts = append(texts, p.Channel+": "+p.Text)
	}
	want := []string{chanA + ": 1-agent-here.json", chanB + ": 3-operator-elsewhere.json"}
	if diff := cmp.Diff(want, texts); diff != "" {
		t.Errorf("posts (-want +got):\n%s", diff)
	}
	if r := e.reason(t, "2-agent-elsewhere.json"); !strings.Contains(r, "no conversation there") {
		t.Errorf("reason = %q, want it to say the agent has no conversation there", r)
	}
}
