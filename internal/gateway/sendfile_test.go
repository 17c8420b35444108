package gateway

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/files"
	"github.com/agentgateway/gateway/internal/persona"
)

// sendFile never uploads the gateway's own state, even when the working
// directory is CONFIG_DIR (WORK_DIR unset): not the sessions, the inbox,
// the ledger, the holds, the env file, nor a channel's archive (a DM's
// included). The agent's own files there still go.
func TestSendFileRefusesGatewayState(t *testing.T) {
	dir := t.TempDir()
	cfg := &config.Config{ConfigDir: dir}
	write := func(rel, data string) {
		t.Helper()
		path := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	state := []string{
		"sessions.json", "inbox.log", "ledger.jsonl", "schedule-holds.json", "deferred.json",
		"discord-state.json", "activity.jsonl", ".env", ".gateway.lock",
		"sessions.json.corrupt-20250101T000000Z",
		"conversations/dm-555/2025-01-01.md", "conversations/123/recent.json",
	}
	for _, name := range state {
		write(name, "state of the gateway\n")
	}
	write("report.txt", "the agent's own report\n")
	guard, err := newGuard(cfg, filepath.Join(t.TempDir(), ".env"), nil)
	if err != nil {
		t.Fatal(err)
	}
	resolve := newActions(cfg, 1<<20, guard).ResolveFile

	for _, name := range state {
		t.Run(name, func(t *testing.T) {
			for _, path := range []string{name, filepath.Join(dir, name), "./sub/../" + name} {
				if got, err := resolve(dir, path); err == nil {
					t.Errorf("sendFile %q = %s, want it refused", path, got)
				} else if strings.Contains(err.Error(), dir) {
					t.Errorf("the error names where the file is: %v", err)
				}
			}
		})
	}
	if _, err := resolve(dir, "report.txt"); err != nil {
		t.Errorf("sendFile of the agent's own file: %v", err)
	}
}

// Every file and folder a running gateway leaves in CONFIG_DIR is the
// persona, the skills, the agent's .gateway folder or a name isState
// covers: a new state file must join StateNames, or sendFile would let it
// out.
func TestStateNamesCoverWhatTheGatewayWrites(t *testing.T) {
	cli := newFilesCLI(t)
	h, _ := startFilesGateway(t, cli, harnessOptions{env: map[string]string{
		config.EnvAdminAddr: "127.0.0.1:0",
	}})
	m := h.mention(h.channel, "hello")
	h.waitAnswer(h.channel, m.ID)
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(h.cfg.ConfigDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, ".md") || name == persona.SkillsDir || name == files.GatewayDir {
			continue
		}
		if !isState(name) {
			t.Errorf("%s in CONFIG_DIR is not in StateNames", name)
		}
	}
}
