package backends

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// MoveSession makes a claude session last used in directory from
// resumable in directory to. claude keeps each session's transcript under
// its config directory ($CLAUDE_CONFIG_DIR, else $HOME/.claude) in
// projects/<the directory, every character but letters and digits made
// "-">/<id>.jsonl, and --resume finds only the sessions of the directory it
// runs in. The transcript is copied, so the old directory keeps its own.
// A session the new directory has already is left alone.
func (c *Claude) MoveSession(id, from, to string) error {
	if id == "" || strings.ContainsAny(id, `/\`) || id == "." || id == ".." {
		return fmt.Errorf("move claude session: invalid session id %q", id)
	}
	base := c.configDir()
	if base == "" {
		return errors.New("move claude session: no HOME or CLAUDE_CONFIG_DIR to find it in")
	}
	src := filepath.Join(base, "projects", claudeProjectDir(from), id+".jsonl")
	dstDir := filepath.Join(base, "projects", claudeProjectDir(to))
	dst := filepath.Join(dstDir, id+".jsonl")
	if _, err := os.Lstat(dst); err == nil {
		return nil
	}
	data, err := os.ReadFile(src)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("move claude session: no transcript of session %s for the old directory", id)
	}
	if err != nil {
		return fmt.Errorf("move claude session: %w", err)
	}
	if err := os.MkdirAll(dstDir, 0o700); err != nil {
		return fmt.Errorf("move claude session: %w", err)
	}
	if err := os.WriteFile(dst, data, 0o600); err != nil {
		return fmt.Errorf("move claude session: %w", err)
	}
	if c.opts.RunAs != nil {
		// The agent user owns its sessions.
		uid, gid := int(c.opts.RunAs.Credential.UID), int(c.opts.RunAs.Credential.GID)
		for _, p := range []string{dstDir, dst} {
			if err := os.Lchown(p, uid, gid); err != nil {
				return fmt.Errorf("move claude session: %w", err)
			}
		}
	}
	return nil
}

// configDir is the claude config directory the CLI sees.
func (c *Claude) configDir() string {
	var home string
	for _, kv := range c.opts.Env {
		name, val, _ := strings.Cut(kv, "=")
		switch name {
		case "CLAUDE_CONFIG_DIR":
			if val != "" {
				return val
			}
		case "HOME":
			home = val
		}
	}
	if home == "" {
		return ""
	}
	return filepath.Join(home, ".claude")
}

// claudeProjectDir is the name claude gives a working directory's
// sessions folder.
func claudeProjectDir(dir string) string {
	return strings.Map(func(r rune) rune {
		if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return r
		}
		return '-'
	}, dir)
}
