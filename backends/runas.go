package backends

import (
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/agentgateway/gateway/internal/proc"
)

// RunAs is the user every CLI runs as when the gateway keeps the agent
// apart from itself (AGENT_USER).
type RunAs struct {
	// Name is the user's login name, given to the CLI as USER and LOGNAME.
	Name string
	// Home is the user's home directory, given to the CLI as HOME: claude
	// keeps its sessions under $HOME/.claude, codex and gemini their
	// config under ~/.codex and ~/.gemini.
	Home string
	// Credential is the uid and groups the process runs with.
	Credential proc.Credential
}

// SysCredential is r's credential as syscall.SysProcAttr takes it, for a
// process started without proc (a version probe); nil for a nil r.
func (r *RunAs) SysCredential() *syscall.Credential {
	if r == nil {
		return nil
	}
	return &syscall.Credential{Uid: r.Credential.UID, Gid: r.Credential.GID, Groups: append([]uint32{}, r.Credential.Groups...)}
}

// credential is what proc.Start needs for o.RunAs; nil runs the CLI as the
// gateway's own user.
func (o Options) credential() *proc.Credential {
	if o.RunAs == nil {
		return nil
	}
	c := o.RunAs.Credential
	c.Groups = append([]uint32(nil), c.Groups...)
	return &c
}

// userEnv returns env as the CLI should see it: with RunAs set, HOME, USER
// and LOGNAME name the agent user, and XDG_* (the gateway user's own
// directories) are dropped. Without RunAs, env is returned unchanged.
func (o Options) userEnv(env []string) []string {
	if o.RunAs == nil {
		return env
	}
	out := make([]string, 0, len(env)+3)
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if name == "HOME" || name == "USER" || name == "LOGNAME" || strings.HasPrefix(name, "XDG_") {
			continue
		}
		out = append(out, kv)
	}
	if o.RunAs.Home != "" {
		out = append(out, "HOME="+o.RunAs.Home)
	}
	return append(out, "USER="+o.RunAs.Name, "LOGNAME="+o.RunAs.Name)
}

// share lets the agent user read a file the gateway wrote for one run (a
// system prompt, a settings file), or read and write a directory: with
// RunAs set the path goes to the agent's primary group, 0640 for a file and
// 0770 for a directory, and stays the gateway's, so the gateway can remove
// it. Without RunAs it does nothing.
func (o Options) share(path string) error {
	if o.RunAs == nil {
		return nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("share %s with the agent user: %w", path, err)
	}
	if err := os.Chown(path, -1, int(o.RunAs.Credential.GID)); err != nil {
		return fmt.Errorf("share %s with the agent user: %w", path, err)
	}
	mode := os.FileMode(0o640)
	if fi.IsDir() {
		mode = 0o770
	}
	if err := os.Chmod(path, mode); err != nil {
		return fmt.Errorf("share %s with the agent user: %w", path, err)
	}
	return nil
}
