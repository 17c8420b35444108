package backends

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentgateway/gateway/internal/proc"
)

func TestUserEnv(t *testing.T) {
	env := []string{"PATH=/bin", "HOME=/root", "USER=root", "LOGNAME=root", "XDG_CONFIG_HOME=/root/.config", "LANG=C.UTF-8"}
	if got := (Options{}).userEnv(env); !cmp.Equal(got, env) {
		t.Errorf("without RunAs the environment changed: %v", got)
	}
	o := Options{RunAs: &RunAs{Name: "agent", Home: "/home/agent"}}
	want := []string{"PATH=/bin", "LANG=C.UTF-8", "HOME=/home/agent", "USER=agent", "LOGNAME=agent"}
	if diff := cmp.Diff(want, o.userEnv(env)); diff != "" {
		t.Errorf("userEnv (-want +got):\n%s", diff)
	}
	// The adapters filter what they build on: the agent's HOME survives it.
	if diff := cmp.Diff(want, FilterEnv(o.userEnv(env), nil, nil)); diff != "" {
		t.Errorf("filtered (-want +got):\n%s", diff)
	}
}

func TestShare(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "prompt.md")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := (Options{}).share(file); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o600 {
		t.Errorf("without RunAs the mode changed to %v", fi.Mode().Perm())
	}
	// The caller's own group: no privilege needed to give a file to it.
	gid := uint32(os.Getegid())
	o := Options{RunAs: &RunAs{Name: "agent", Credential: proc.Credential{UID: 12345, GID: gid}}}
	for path, mode := range map[string]os.FileMode{file: 0o640, dir: 0o770} {
		if err := o.share(path); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode().Perm() != mode || st.Gid != gid || int(st.Uid) != os.Geteuid() {
			t.Errorf("%s: mode %v, owner %d:%d; want %v, %d:%d", path, fi.Mode().Perm(), st.Uid, st.Gid, mode, os.Geteuid(), gid)
		}
	}
}

// TestClaudeRunsAsRunAs runs the claude adapter with a shell script for a
// CLI, as nobody: the script reports its uid, HOME, USER, whether it saw
// the gateway's XDG_* and the system prompt file the adapter wrote and
// shared with nobody's group.
func TestClaudeRunsAsRunAs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the CLI as another user")
	}
	const nobody = 65534
	// Not t.TempDir: its parents are private to root.
	dir, err := os.MkdirTemp("", "gwtest-runas-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	script := `#!/bin/sh
cat >/dev/null
prompt=none
while [ $# -gt 0 ]; do
  if [ "$1" = --append-system-prompt-file ]; then prompt=$(cat "$2" 2>&1); fi
  shift
done
echo '{"type":"system","subtype":"init","session_id":"s","cwd":"/","tools":[],"model":"m"}'
printf '{"type":"result","subtype":"success","is_error":false,"num_turns":1,"result":"%s %s %s %s %s","session_id":"s","total_cost_usd":0}\n' \
  "$(id -u)" "$HOME" "$USER" "${XDG_CONFIG_HOME:-no-xdg}" "$prompt"
`
	bin := filepath.Join(dir, "claude")
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	c := NewClaude(Options{
		Binary: bin,
		Env:    []string{"PATH=/usr/bin:/bin", "HOME=/root", "USER=root", "XDG_CONFIG_HOME=/root/.config", "DISCORD_BOT_TOKEN=secret"},
		RunAs:  &RunAs{Name: "nobody", Home: "/nonexistent", Credential: proc.Credential{UID: nobody, GID: nobody}},
	})
	res, err := c.Run(context.Background(), Request{Prompt: "hi", SystemPrompt: "persona", WorkDir: dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := strconv.Itoa(nobody) + " /nonexistent nobody no-xdg persona"
	if res.Text != want {
		t.Errorf("the CLI saw %q, want %q", res.Text, want)
	}
}

// share gives the agent's group only the file or folder the gateway made:
// a link, a FIFO, a second name of another file or a file that is not the
// gateway's, put in its place by the agent (it owns ~/.codex), is refused
// and the thing it points at keeps its owner and mode.
func TestShareRefusesWhatTheAgentSwappedIn(t *testing.T) {
	gid := uint32(os.Getegid())
	if os.Geteuid() == 0 {
		gid = 65534 // nogroup: the change would show
	}
	o := Options{RunAs: &RunAs{Name: "agent", Credential: proc.Credential{UID: 65534, GID: gid}}}
	for _, tc := range []struct {
		name string
		root bool // needs root to set up
		// swap puts something at path in place of the file the gateway
		// wrote, and returns the file or folder that must not change.
		swap func(t *testing.T, dir, path string) string
	}{
		{"a link to a file", false, func(t *testing.T, dir, path string) string {
			target := writeSecret(t, dir, ".env")
			mustDo(t, os.Symlink(target, path))
			return target
		}},
		{"a link to a folder", false, func(t *testing.T, dir, path string) string {
			target := filepath.Join(dir, "private")
			mustDo(t, os.Mkdir(target, 0o700))
			mustDo(t, os.Symlink(target, path))
			return target
		}},
		{"a second name of a file", false, func(t *testing.T, dir, path string) string {
			target := writeSecret(t, dir, ".env")
			mustDo(t, os.Link(target, path))
			return target
		}},
		{"a FIFO", false, func(t *testing.T, dir, path string) string {
			mustDo(t, syscall.Mkfifo(path, 0o600))
			return path
		}},
		{"a file of another user", true, func(t *testing.T, dir, path string) string {
			target := writeSecret(t, dir, "theirs")
			mustDo(t, os.Chown(target, 12345, 12345))
			mustDo(t, os.Rename(target, path))
			return path
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.root && os.Geteuid() != 0 {
				t.Skip("needs root to make a file of another user")
			}
			dir := t.TempDir()
			path := filepath.Join(dir, "profile.toml")
			target := tc.swap(t, dir, path)
			before := ownerAndMode(t, target)
			if err := o.share(path); err == nil {
				t.Error("share accepted what was swapped in")
			}
			if diff := cmp.Diff(before, ownerAndMode(t, target)); diff != "" {
				t.Errorf("%s changed (-before +after):\n%s", filepath.Base(target), diff)
			}
		})
	}
}

func writeSecret(t *testing.T, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	mustDo(t, os.WriteFile(path, []byte("DISCORD_BOT_TOKEN=secret\n"), 0o600))
	return path
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

type ownership struct {
	UID, GID uint32
	Mode     os.FileMode
}

func ownerAndMode(t *testing.T, path string) ownership {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return ownership{st.Uid, st.Gid, fi.Mode()}
}
