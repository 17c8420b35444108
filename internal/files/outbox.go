package files

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// MaxFilesPerMessage is how many files Discord takes on one message.
const MaxFilesPerMessage = 10

// Outgoing is a file taken from the outbox to go with a reply.
type Outgoing struct {
	// Name is the name it is uploaded under.
	Name string
	// Path is where it is now (in sent/<event>/).
	Path string
	Size int64
	// Root is the working directory, resolved: the file is read from
	// there, without following links, when its message is posted.
	Root string
	// Data, when set, is the content, already read and checked: nothing
	// is looked up again.
	Data []byte
}

// Collected is what Collect took from an outbox.
type Collected struct {
	Files []Outgoing
	// Skipped names the files that are not sent and why, for the reply.
	Skipped []string
}

// Note is the line that tells the user which outbox files were not sent.
func (c Collected) Note() string {
	if len(c.Skipped) == 0 {
		return ""
	}
	return "_(Not attached: " + strings.Join(c.Skipped, "; ") + ".)_"
}

// Limits bound what Collect sends with one reply.
type Limits struct {
	// Files is the most files (at most MaxFilesPerMessage); Bytes the most
	// bytes of one file and of all of them together (Discord's upload
	// limit).
	Files int
	Bytes int64
	// Guard decides which files may go and reads them as the agent would.
	Guard *Guard
}

// Collect takes the files the agent left in workDir's outbox for the reply
// to event: each entry is moved to sent/<event>/, whether it is sent or
// not, so that no file goes out twice (two channels may share a working
// directory) and none is reported twice. .gateway, its outbox and sent
// folders must be real folders of the agent's (a link or another user's
// folder is an error and nothing moves); every move is made relative to
// those open folders. Only regular files the agent could read are sent,
// never a link. Files past the limits are named in Skipped. Entries are
// taken in name order.
func Collect(workDir string, event uint64, lim Limits) (Collected, error) {
	var c Collected
	g := lim.Guard
	if g == nil {
		g = &Guard{}
	}
	root, err := openDir(workDir)
	if err != nil {
		return c, fmt.Errorf("open the working directory: %w", WithoutPath(err))
	}
	defer unix.Close(root)
	gw, err := g.folder(root, GatewayDir, false)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("open %s: %w", GatewayDir, err)
	}
	defer unix.Close(gw)
	outbox, err := g.folder(gw, filepath.Base(OutboxDir), false)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("open %s: %w", OutboxDir, err)
	}
	defer unix.Close(outbox)
	entries, err := readDir(outbox)
	if err != nil {
		return c, fmt.Errorf("read %s: %w", OutboxDir, err)
	}
	entries = slices.DeleteFunc(entries, func(name string) bool {
		return strings.HasPrefix(name, ".") // a file still being written (temp names) or hidden
	})
	if len(entries) == 0 {
		return c, nil
	}
	resolved, err := filepath.EvalSymlinks(workDir)
	if err != nil {
		return c, fmt.Errorf("resolve the working directory: %w", WithoutPath(err))
	}
	sentDir, err := g.folder(gw, filepath.Base(SentDir), true)
	if err != nil {
		return c, fmt.Errorf("open %s: %w", SentDir, err)
	}
	defer unix.Close(sentDir)
	folder := strconv.FormatUint(event, 10)
	sent, err := g.folder(sentDir, folder, true)
	if err != nil {
		return c, fmt.Errorf("open %s/%s: %w", SentDir, folder, err)
	}
	defer unix.Close(sent)
	sort.Strings(entries)
	files := lim.Files
	if files <= 0 || files > MaxFilesPerMessage {
		files = MaxFilesPerMessage
	}
	f := g.fence()
	var total int64
	for _, name := range entries {
		dst, err := move(outbox, name, sent, SafeName(name))
		if err != nil {
			c.Skipped = append(c.Skipped, SafeName(name)+" (could not be taken from the outbox)")
			continue
		}
		size, why := g.check(f, sent, dst, lim)
		switch {
		case why != "":
			c.Skipped = append(c.Skipped, SafeName(name)+" ("+why+")")
		case len(c.Files) >= files:
			c.Skipped = append(c.Skipped, SafeName(name)+fmt.Sprintf(" (Discord takes %d files per message)", files))
		case lim.Bytes > 0 && total+size > lim.Bytes:
			c.Skipped = append(c.Skipped, SafeName(name)+fmt.Sprintf(" (over Discord's %s upload limit with the others)", byteSize(lim.Bytes)))
		default:
			total += size
			c.Files = append(c.Files, Outgoing{Name: dst, Path: filepath.Join(resolved, SentDir, folder, dst), Size: size, Root: resolved})
		}
	}
	return c, nil
}

// readDir lists the folder dirfd.
func readDir(dirfd int) ([]string, error) {
	fd, err := unix.Openat(dirfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, WithoutPath(err)
	}
	d := os.NewFile(uintptr(fd), OutboxDir)
	defer d.Close()
	names, err := d.Readdirnames(-1)
	return names, WithoutPath(err)
}

// move renames name in the folder from to a free name (want, or a
// numbered variant of it) in the folder to, never replacing what is
// there, and returns the name it got.
func move(from int, name string, to int, want string) (string, error) {
	dst := want
	for n := 2; n <= 1000; n++ {
		err := unix.Renameat2(from, name, to, dst, unix.RENAME_NOREPLACE)
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
			// A file system without RENAME_NOREPLACE: look first. The
			// folders are the agent's; a race there only replaces the
			// agent's own entry.
			var st unix.Stat_t
			if err = unix.Fstatat(to, dst, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
				err = unix.EEXIST
			} else if errors.Is(err, unix.ENOENT) {
				err = unix.Renameat(from, name, to, dst)
			}
		}
		if !errors.Is(err, unix.EEXIST) {
			return dst, err
		}
		dst = numbered(want, n)
	}
	return "", unix.EEXIST
}

// check says why the entry name in the folder dirfd may not be sent (""
// if it may) and its size; the file is read as the agent could.
func (g *Guard) check(f *fence, dirfd int, name string, lim Limits) (int64, string) {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return 0, "could not be read"
	}
	switch mode := st.Mode & unix.S_IFMT; {
	case mode == unix.S_IFLNK:
		return 0, "a link; put the file itself in the outbox"
	case mode == unix.S_IFDIR:
		return 0, "a folder; only files are sent"
	case mode != unix.S_IFREG:
		return 0, "not a regular file"
	case st.Size == 0:
		return 0, "empty"
	case lim.Bytes > 0 && st.Size > lim.Bytes:
		return 0, fmt.Sprintf("%s, over Discord's %s upload limit", byteSize(st.Size), byteSize(lim.Bytes))
	}
	data, err := g.readAt(f, dirfd, name, st.Size)
	switch {
	case errors.Is(err, ErrSecret), errors.Is(err, ErrState), errors.Is(err, ErrDenied):
		return 0, err.Error()
	case err != nil:
		return 0, "could not be read"
	}
	return int64(len(data)), ""
}

// Taken describes again a file Collect took, from its path (recorded
// with a reply a restart delivers). It is read, and checked again, when
// its message is posted.
func Taken(path string) (Outgoing, error) {
	dir, _, ok := strings.Cut(path, string(filepath.Separator)+SentDir+string(filepath.Separator))
	if !ok {
		return Outgoing{}, fmt.Errorf("%s is not in an outbox's sent folder", filepath.Base(path))
	}
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return Outgoing{}, err
	}
	st, err := os.Lstat(path)
	if err != nil {
		return Outgoing{}, err
	}
	if !st.Mode().IsRegular() {
		return Outgoing{}, fmt.Errorf("%s: %w", filepath.Base(path), ErrNotFile)
	}
	return Outgoing{Name: filepath.Base(path), Path: path, Size: st.Size(), Root: root}, nil
}

// Read returns the content of a file at path below root, at most max
// bytes, as the gateway's own user, never through a link below root: a
// Guard with nothing to protect (see Guard.Read).
func Read(path, root string, max int64) ([]byte, error) {
	return (&Guard{}).Read(path, root, max)
}
