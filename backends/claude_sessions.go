package backends

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agentgateway/gateway/internal/files"
	"github.com/agentgateway/gateway/internal/proc"
)

// ErrNotTheAgents is the error of MoveSession when the session's
// transcript or a folder on the way to it or to its copy is not the plain
// one of the agent's own it should be: a link, a file with other names
// (a hard link), someone else's.
var ErrNotTheAgents = errors.New("the session's files are not the agent's own plain files")

// maxTranscript bounds the transcript MoveSession copies; claude's
// transcripts of long sessions are a few megabytes.
const maxTranscript = 256 << 20

// MoveSession makes a claude session last used in directory from
// resumable in directory to. claude keeps each session's transcript under
// its config directory ($CLAUDE_CONFIG_DIR, else $HOME/.claude) in
// projects/<the directory, every character but letters and digits made
// "-">/<id>.jsonl, and --resume finds only the sessions of the directory it
// runs in. The transcript is copied, so the old directory keeps its own.
// A session the new directory has already is left alone.
//
// The config directory is the agent's and the session id is in its
// environment, so the agent can put a link, a hard link or a FIFO where
// the transcript should be, or link a folder on the way, and the gateway
// may be root. So every folder below the agent's home is opened without
// following a link; the transcript is opened as the agent (AGENT_USER)
// would open it and must be a regular file with no other name, owned by
// the agent (the gateway's own user without AGENT_USER); the copy is
// created, never replaced, in a folder of the agent's reached the same
// way, and given to the agent. Anything else is refused with
// ErrNotTheAgents or another error that names no path: the caller then
// starts the channel on a fresh session.
func (c *Claude) MoveSession(id, from, to string) error {
	if id == "" || strings.ContainsAny(id, `/\`) || id == "." || id == ".." {
		return fmt.Errorf("move claude session: invalid session id %q", id)
	}
	root, rel := c.configRoot()
	if root == "" {
		return errors.New("move claude session: no HOME or CLAUDE_CONFIG_DIR to find it in")
	}
	name := id + ".jsonl"
	// A fast look only: a link here makes the move do nothing, and the
	// create below is what decides.
	if _, err := os.Lstat(filepath.Join(root, rel, "projects", claudeProjectDir(to), name)); err == nil {
		return nil
	}
	owner, gid := os.Geteuid(), os.Getegid()
	var agent *proc.Credential
	if c.opts.RunAs != nil {
		agent = c.opts.credential()
		owner, gid = int(agent.UID), int(agent.GID)
	}

	g := files.Guard{Agent: agent}
	src, err := g.Open(filepath.Join(rel, "projects", claudeProjectDir(from), name), root)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("move claude session: no transcript of session %s for the old directory", id)
	}
	if err != nil {
		return fmt.Errorf("move claude session: open the transcript: %w", files.WithoutPath(err))
	}
	defer src.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(src.Fd()), &st); err != nil {
		return fmt.Errorf("move claude session: %w", err)
	}
	if st.Nlink != 1 || int(st.Uid) != owner {
		return fmt.Errorf("move claude session: the transcript: %w", ErrNotTheAgents)
	}
	if st.Size > maxTranscript {
		return fmt.Errorf("move claude session: the transcript is over %d MiB", maxTranscript>>20)
	}

	dir, err := agentFolder(root, rel, claudeProjectDir(to), owner, gid)
	if err != nil {
		return fmt.Errorf("move claude session: the new directory's folder: %w", err)
	}
	defer unix.Close(dir)
	fd, err := unix.Openat(dir, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if errors.Is(err, unix.EEXIST) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("move claude session: create the copy: %w", err)
	}
	dst := os.NewFile(uintptr(fd), name)
	err = dst.Chown(owner, gid)
	if err == nil {
		// Only what was there when it was checked.
		_, err = io.Copy(dst, io.LimitReader(src, st.Size))
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		unix.Unlinkat(dir, name, 0)
		return fmt.Errorf("move claude session: copy the transcript: %w", files.WithoutPath(err))
	}
	return nil
}

// configRoot is where claude's config directory is reached from: root is
// opened as it is (the operator chose it: the agent's home, or
// CLAUDE_CONFIG_DIR outside it) and rel is the way below it, the agent's
// own, walked one folder at a time without following links.
func (c *Claude) configRoot() (root, rel string) {
	var home, dir string
	for _, kv := range c.opts.Env {
		name, val, _ := strings.Cut(kv, "=")
		switch name {
		case "CLAUDE_CONFIG_DIR":
			dir = val
		case "HOME":
			home = val
		}
	}
	if dir == "" {
		if home == "" {
			return "", ""
		}
		return home, ".claude"
	}
	if home != "" && filepath.IsAbs(dir) {
		if r, err := filepath.Rel(home, dir); err == nil && r != "." && r != ".." && !strings.HasPrefix(r, "../") {
			return home, r
		}
	}
	return dir, ""
}

// agentFolder opens root/rel/projects/name, making the last one (0700,
// given to owner) when it is missing: every folder below root is opened
// without following a link and must belong to owner.
func agentFolder(root, rel, name string, owner, gid int) (int, error) {
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, files.WithoutPath(&os.PathError{Op: "open", Path: root, Err: err})
	}
	var parts []string
	if rel != "" {
		parts = strings.Split(filepath.Clean(rel), "/")
	}
	parts = append(parts, "projects", name)
	for i, part := range parts {
		last := i == len(parts)-1
		made := false
		if last {
			err := unix.Mkdirat(fd, part, 0o700)
			if err != nil && !errors.Is(err, unix.EEXIST) {
				unix.Close(fd)
				return -1, fmt.Errorf("make it: %w", err)
			}
			made = err == nil
		}
		next, err := unix.Openat(fd, part, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return -1, ErrNotTheAgents
		}
		if err != nil {
			return -1, fmt.Errorf("open it: %w", err)
		}
		fd = next
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return -1, err
		}
		if made && int(st.Uid) == os.Geteuid() && int(st.Uid) != owner {
			// The gateway made it for the agent: hand it over.
			if err := unix.Fchown(fd, owner, gid); err != nil {
				unix.Close(fd)
				return -1, fmt.Errorf("give it to the agent: %w", err)
			}
			st.Uid = uint32(owner)
		}
		if int(st.Uid) != owner {
			unix.Close(fd)
			return -1, ErrNotTheAgents
		}
	}
	return fd, nil
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
