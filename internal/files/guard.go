package files

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agentgateway/gateway/internal/proc"
)

// Guard decides what the gateway may read, move and send on the agent's
// behalf: it never does for the agent what the agent could not do itself.
// Every path below a working directory is opened one component at a time
// relative to the folder before it, never through a symbolic link; the
// folders under .gateway must belong to the agent; a file goes out only
// when the agent itself could open it, when it is none of the gateway's
// own state and holds none of its secrets. The zero Guard reads as the
// gateway's own user with no state and no secrets to protect. A Guard is
// safe for concurrent use.
type Guard struct {
	// Agent is the user the agent runs as (AGENT_USER); nil when it runs
	// as the gateway's own user. Files are opened with its credentials
	// (on a thread of their own), and .gateway's folders must be its.
	Agent *proc.Credential
	// StateDir is CONFIG_DIR, and State reports whether a name in it is
	// one of the gateway's own state files or folders: never sent,
	// whatever the working directory and whatever path leads there.
	StateDir string
	State    func(name string) bool
	// Protected are more files never sent, wherever they are (the env
	// file, the secret files of *_FILE settings).
	Protected []string
	// Secrets, if set, returns the strings no uploaded file may contain
	// (the Discord token, model keys, webhook secrets).
	Secrets func() []string
}

// Why a file is refused. The texts are for the user: they name no path.
var (
	ErrLink     = errors.New("the path goes through a symbolic link")
	ErrOutside  = errors.New("outside the working directory")
	ErrState    = errors.New("it is the gateway's own state")
	ErrDenied   = errors.New("the agent cannot read it")
	ErrNotOwned = errors.New("a folder that does not belong to the agent")
	ErrSecret   = errors.New("it contains one of the gateway's secrets")
	ErrNotFile  = errors.New("not a regular file")
	ErrTooLarge = errors.New("over the upload limit")
)

// owner is the uid .gateway's folders must have.
func (g *Guard) owner() int {
	if g.Agent != nil {
		return int(g.Agent.UID)
	}
	return os.Geteuid()
}

// id identifies a file whatever path leads to it.
type id struct{ dev, ino uint64 }

func idOf(st *unix.Stat_t) id { return id{uint64(st.Dev), st.Ino} }

// fence is what a Guard refuses, taken once per call: the state folder's
// id and the ids of the state files and folders and the protected files
// (a hard link or another path to one is still refused).
type fence struct {
	g        *Guard
	stateDir id
	hasState bool
	refused  map[id]bool
}

func (g *Guard) fence() *fence {
	f := &fence{g: g, refused: map[id]bool{}}
	var st unix.Stat_t
	add := func(path string) {
		if unix.Lstat(path, &st) == nil {
			f.refused[idOf(&st)] = true
		}
	}
	if g.StateDir != "" && g.State != nil && unix.Stat(g.StateDir, &st) == nil {
		f.stateDir, f.hasState = idOf(&st), true
		if entries, err := os.ReadDir(g.StateDir); err == nil {
			for _, e := range entries {
				if g.State(e.Name()) {
					add(filepath.Join(g.StateDir, e.Name()))
				}
			}
		}
	}
	for _, p := range g.Protected {
		if p != "" {
			add(p)
		}
	}
	return f
}

// allows reports whether name, found in the folder st describes, may be
// opened: not one of the state names when that folder is CONFIG_DIR.
func (f *fence) allows(dir *unix.Stat_t, name string) bool {
	return !f.hasState || idOf(dir) != f.stateDir || !f.g.State(name)
}

// check refuses a folder or file that is state or protected.
func (f *fence) check(st *unix.Stat_t) error {
	if f.refused[idOf(st)] {
		return ErrState
	}
	return nil
}

// asAgent runs fn with the agent's file-system credentials: on an OS
// thread of its own whose fsuid, fsgid and groups are the agent's and
// whose effective capabilities are dropped, so the kernel checks every
// open as it would for the agent (ACLs included). The thread is never
// handed back: it ends with the goroutine, its credentials with it.
// Without an agent, fn runs as it is.
func (g *Guard) asAgent(fn func() error) error {
	if g.Agent == nil {
		return fn()
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// No UnlockOSThread: a locked goroutine that returns takes its
		// thread with it, so no other goroutine ever runs as the agent.
		if err := becomeAgent(g.Agent); err != nil {
			done <- err
			return
		}
		done <- fn()
	}()
	return <-done
}

// becomeAgent gives the calling thread the agent's file-system identity.
func becomeAgent(c *proc.Credential) error {
	groups := []int{int(c.GID)}
	for _, gid := range c.Groups {
		groups = append(groups, int(gid))
	}
	// x/sys/unix makes these calls on the calling thread only (the
	// syscall package's Setgroups would change every thread).
	if err := unix.Setgroups(groups); err != nil {
		return fmt.Errorf("take the agent's groups: %w", err)
	}
	unix.SetfsgidRetGid(int(c.GID))
	unix.SetfsuidRetUid(int(c.UID))
	// setfsuid and setfsgid report failure only by not changing: ask.
	if gid, _ := unix.SetfsgidRetGid(-1); gid != int(c.GID) {
		return errors.New("take the agent's group: not permitted")
	}
	if uid, _ := unix.SetfsuidRetUid(-1); uid != int(c.UID) {
		return errors.New("take the agent's user: not permitted")
	}
	// A gateway that is not root may hold CAP_DAC_OVERRIDE and the like
	// (root's are cleared by the kernel when fsuid leaves 0): drop them.
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("read capabilities: %w", err)
	}
	data[0].Effective, data[1].Effective = 0, 0
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("drop capabilities: %w", err)
	}
	return nil
}

// openDir opens the directory path itself, following links: it is the
// working directory, chosen by the operator or by /project, not by the
// agent.
func openDir(path string) (int, error) {
	return unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
}

// sub opens the folder name in the folder dirfd, never through a link.
func sub(dirfd int, name string) (int, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, linkError(dirfd, name, err)
	}
	return fd, nil
}

// linkError is ErrLink when name in dirfd is a symbolic link, else err.
func linkError(dirfd int, name string, err error) error {
	var st unix.Stat_t
	if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
		if unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return ErrLink
		}
	}
	return &os.PathError{Op: "open", Path: name, Err: err}
}

// relPath is path relative to root, cleaned; an error when it leads out.
func relPath(root, path string) (string, error) {
	rel := path
	if filepath.IsAbs(path) {
		var err error
		if rel, err = filepath.Rel(root, path); err != nil {
			return "", ErrOutside
		}
	}
	rel = filepath.Clean(rel)
	if rel == "." || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
		return "", ErrOutside
	}
	return rel, nil
}

// Read returns the content of the file at path, which must be below root,
// as the agent could read it: each folder from root on is opened without
// following links, the file is opened once and read from that open file.
// It refuses the gateway's state, protected files, a file over max bytes
// (0 allows only an empty file) and one holding a secret. Errors say why in words for the user, with no
// path.
func (g *Guard) Read(path, root string, max int64) ([]byte, error) {
	rel, err := relPath(root, path)
	if err != nil {
		return nil, err
	}
	dirfd, err := openDir(root)
	if err != nil {
		return nil, WithoutPath(err)
	}
	defer unix.Close(dirfd)
	return g.readAt(g.fence(), dirfd, rel, max)
}

// Open opens the regular file at path below root as Read does (as the
// agent, one folder at a time, never through a link, never the gateway's
// state) and returns it unread, for a caller that checks more of it (its
// owner, its links) or copies it without holding it in memory. The
// caller closes it.
func (g *Guard) Open(path, root string) (*os.File, error) {
	rel, err := relPath(root, path)
	if err != nil {
		return nil, err
	}
	dirfd, err := openDir(root)
	if err != nil {
		return nil, WithoutPath(err)
	}
	defer unix.Close(dirfd)
	return g.open(g.fence(), dirfd, rel)
}

// readAt reads rel below dirfd (see Read).
func (g *Guard) readAt(f *fence, dirfd int, rel string, max int64) ([]byte, error) {
	file, err := g.open(f, dirfd, rel)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(file.Fd()), &st); err != nil {
		return nil, WithoutPath(err)
	}
	if st.Size > max {
		return nil, ErrTooLarge
	}
	data, err := io.ReadAll(io.LimitReader(file, max+1))
	if err != nil {
		return nil, WithoutPath(err)
	}
	if int64(len(data)) > max {
		return nil, ErrTooLarge
	}
	if g.Secrets != nil {
		for _, s := range g.Secrets() {
			if len(s) >= 8 && bytes.Contains(data, []byte(s)) {
				return nil, ErrSecret
			}
		}
	}
	return data, nil
}

// open opens rel below dirfd as the agent (see fence.open).
func (g *Guard) open(f *fence, dirfd int, rel string) (*os.File, error) {
	var file *os.File
	err := g.asAgent(func() error {
		var err error
		file, err = f.open(dirfd, rel)
		return err
	})
	return file, err
}

// open walks rel below dirfd one component at a time, never through a
// link and never into state, and opens the regular file at its end.
func (f *fence) open(dirfd int, rel string) (*os.File, error) {
	parts := strings.Split(rel, "/")
	cur := dirfd
	closeCur := func() {
		if cur != dirfd {
			unix.Close(cur)
		}
	}
	defer func() { closeCur() }()
	var st unix.Stat_t
	if err := unix.Fstat(cur, &st); err != nil {
		return nil, WithoutPath(err)
	}
	if err := f.check(&st); err != nil {
		return nil, err
	}
	for i, name := range parts {
		if !f.allows(&st, name) {
			return nil, ErrState
		}
		if i == len(parts)-1 {
			break
		}
		next, err := sub(cur, name)
		if err != nil {
			return nil, denied(err)
		}
		closeCur()
		cur = next
		if err := unix.Fstat(cur, &st); err != nil {
			return nil, WithoutPath(err)
		}
		if err := f.check(&st); err != nil {
			return nil, err
		}
	}
	name := parts[len(parts)-1]
	// Look before opening: opening a device or a FIFO can have effects.
	if err := unix.Fstatat(cur, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, denied(&os.PathError{Op: "stat", Path: name, Err: err})
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		return nil, ErrLink
	case unix.S_IFREG:
	default:
		return nil, ErrNotFile
	}
	fd, err := unix.Openat(cur, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, denied(linkError(cur, name, err))
	}
	file := os.NewFile(uintptr(fd), name)
	if err := unix.Fstat(fd, &st); err != nil {
		file.Close()
		return nil, WithoutPath(err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		file.Close()
		return nil, ErrNotFile
	}
	if err := f.check(&st); err != nil {
		file.Close()
		return nil, err
	}
	return file, nil
}

// denied is ErrDenied for a permission error, else err without its path.
func denied(err error) error {
	if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
		return ErrDenied
	}
	return WithoutPath(err)
}

// folder opens name in dirfd as one of .gateway's folders: a directory,
// not a link, owned by the agent. With create, a missing one is made
// (0700) and given to the agent.
func (g *Guard) folder(dirfd int, name string, create bool) (int, error) {
	made := false
	if create {
		err := unix.Mkdirat(dirfd, name, 0o700)
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return -1, WithoutPath(&os.PathError{Op: "mkdir", Path: name, Err: err})
		}
		made = err == nil
	}
	fd, err := sub(dirfd, name)
	if err != nil {
		return -1, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, WithoutPath(err)
	}
	want := g.owner()
	if made && int(st.Uid) == os.Geteuid() && int(st.Uid) != want {
		// The gateway made it for the agent: hand it over.
		if err := unix.Fchown(fd, want, int(g.Agent.GID)); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("give a folder to the agent: %w", err)
		}
		st.Uid = uint32(want)
	}
	if int(st.Uid) != want {
		unix.Close(fd)
		return -1, ErrNotOwned
	}
	return fd, nil
}
