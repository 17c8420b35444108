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
