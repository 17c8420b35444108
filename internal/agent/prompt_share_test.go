package agent

import (
	"os"
	"syscall"
	"testing"

	"github.com/agentgateway/gateway/internal/persona"
)

// TestPromptFileMode: the system prompt file is private to the gateway, or,
// shared with the agent user's group (AGENT_USER), readable by that group
// and nobody else, and still the gateway's own so it can remove it.
func TestPromptFileMode(t *testing.T) {
	gid := uint32(os.Getegid()) // the caller's own group needs no privilege
	for _, tt := range []struct {
		name  string
		group *uint32
		mode  os.FileMode
	}{
		{"private", nil, 0o600},
		{"shared with the agent's group", &gid, 0o640},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := &promptCache{dir: t.TempDir(), group: tt.group}
			p, release, err := c.acquire(persona.Files{"soul.md": "be kind"})
			if err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(p.path)
			if err != nil {
				t.Fatal(err)
			}
			st := fi.Sys().(*syscall.Stat_t)
			if fi.Mode().Perm() != tt.mode || int(st.Uid) != os.Geteuid() {
				t.Errorf("mode %v owner %d, want %v owner %d", fi.Mode().Perm(), st.Uid, tt.mode, os.Geteuid())
			}
			if tt.group != nil && st.Gid != *tt.group {
				t.Errorf("group %d, want %d", st.Gid, *tt.group)
			}
			release()
			c.close()
			if _, err := os.Stat(p.path); !os.IsNotExist(err) {
				t.Errorf("prompt file left behind: %v", err)
			}
		})
	}
}
