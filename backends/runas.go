package backends

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

// ErrNotShared is the error of share for a path that is not the plain
// file or folder the gateway made.
var ErrNotShared = errors.New("not a file or folder of the gateway's own")

// share lets the agent user read a file the gateway wrote for one run (a
// system prompt, a settings file), or read and write a directory: with
// RunAs set the path goes to the agent's primary group, 0640 for a file and
// 0770 for a directory, and stays the gateway's, so the gateway can remove
// it. Without RunAs it does nothing.
//
// The path may be in a folder the agent owns (~/.codex), so the agent can
// put something else in its place between the write and the share. The
// path is opened once without following a link, and the change is made
// on what was opened, only when it is a file or folder of the gateway's
// user with no other name: a link to .env, a second name of it (a hard
// link) or a FIFO keeps its owner and mode (DESIGN decision 22).
func (o Options) share(path string) error {
	if o.RunAs == nil {
		return nil
	}
	// O_NONBLOCK: a FIFO put in the file's place must not stall the turn.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			err = fmt.Errorf("a symbolic link: %w", ErrNotShared)
		}
		return fmt.Errorf("share %s with the agent user: %w", filepath.Base(path), err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("share %s with the agent user: %w", filepath.Base(path), err)
	}
	if err := ownFileOrFolder(fi); err != nil {
		return fmt.Errorf("share %s with the agent user: %w", filepath.Base(path), err)
	}
	if err := f.Chown(-1, int(o.RunAs.Credential.GID)); err != nil {
		return fmt.Errorf("share %s with the agent user: %w", filepath.Base(path), err)
	}
	mode := os.FileMode(0o640)
	if fi.IsDir() {
		mode = 0o770
	}
	if err := f.Chmod(mode); err != nil {
		return fmt.Errorf("share %s with the agent user: %w", filepath.Base(path), err)
	}
	return nil
}

// ownFileOrFolder checks that fi, of an open file, is what the gateway
// made: a regular file with one name, or a folder, owned by the gateway's
// user.
func ownFileOrFolder(fi os.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("no owner to check: %w", ErrNotShared)
	}
	switch {
	case !fi.Mode().IsRegular() && !fi.IsDir():
		return fmt.Errorf("a %v: %w", fi.Mode().Type(), ErrNotShared)
	case int(st.Uid) != os.Geteuid():
		return fmt.Errorf("owned by uid %d: %w", st.Uid, ErrNotShared)
	case fi.Mode().IsRegular() && st.Nlink != 1:
		return fmt.Errorf("a file with %d names: %w", st.Nlink, ErrNotShared)
	}
	return nil
}
