package gateway

import (
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/cost"
	"github.com/agentgateway/gateway/internal/deferred"
	"github.com/agentgateway/gateway/internal/dirlock"
	"github.com/agentgateway/gateway/internal/discord"
	"github.com/agentgateway/gateway/internal/files"
	"github.com/agentgateway/gateway/internal/hold"
	"github.com/agentgateway/gateway/internal/session"
	"github.com/agentgateway/gateway/internal/threads"
)

// StateNames are the files and folders the gateway keeps in CONFIG_DIR for
// itself. No file the agent sends (its outbox, sendFile, an IPC message)
// may be one of them or lie in one, whatever the working directory: a
// state file added to CONFIG_DIR belongs here. The persona (*.md) and the
// skills are not state: the agent reads them anyway.
var StateNames = []string{
	session.FileName,  // sessions.json: every channel's session
	threads.FileName,  // threads.json: the threads the gateway opened
	WorktreesFile,     // worktrees.json: every thread's worktree
	InboxFile,         // inbox.log: every prompt and webhook payload
	cost.FileName,     // ledger.jsonl
	hold.StateFile,    // schedule-holds.json
	deferred.FileName, // deferred.json: the agent's deferred prompts
	discord.StateFile, // discord-state.json
	discord.QuestionsFile,
	ActivityFile,     // activity.jsonl: the dashboard's log of every turn
	ArchiveDir,       // conversations/: every channel's archive, DMs included
	IPCDir,           // ipc/: messages waiting to be posted, and failed ones
	dirlock.FileName, // .gateway.lock
	NodeIDFile,       // node-id: this process's name in a cluster
	config.DefaultEnvFile,
}

// isState reports whether name, in CONFIG_DIR, is the gateway's own: one of
// StateNames, a file beside one of them (sessions.json.corrupt-<time>), or
// a hidden file (.env, the temp files of atomic writes) other than the
// agent's .gateway folder.
func isState(name string) bool {
	if strings.HasPrefix(name, ".") && name != files.GatewayDir {
		return true
	}
	return slices.ContainsFunc(StateNames, func(s string) bool {
		return name == s || strings.HasPrefix(name, s+".")
	})
}

// newGuard is how the gateway reads and moves files for the agent: as
// AGENT_USER when it is set, never the state of StateNames, the env file
// or a secret file, nor a file holding one of secrets.
func newGuard(cfg *config.Config, envFile string, secrets func() []string) (*files.Guard, error) {
	runAs, err := RunAs(cfg)
	if err != nil {
		return nil, err
	}
	g := &files.Guard{StateDir: cfg.ConfigDir, State: isState, Secrets: secrets}
	if runAs != nil {
		c := runAs.Credential
		g.Agent = &c
	}
	if envFile == "" {
		envFile = config.DefaultEnvFile
	}
	if abs, err := filepath.Abs(envFile); err == nil {
		g.Protected = append(g.Protected, abs)
	}
	for _, path := range cfg.PrivateFiles() {
		g.Protected = append(g.Protected, path)
	}
	return g, nil
}
