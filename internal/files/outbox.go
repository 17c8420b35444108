package files

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
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
	// Root is the working directory, resolved: Read checks the file is
	// still inside it.
	Root string
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
	// Secrets, if set, returns the strings no uploaded file may contain
	// (the Discord token, webhook secrets): the gateway reads files as
	// itself, which may see more than the agent can.
	Secrets func() []string
}

// Collect takes the files the agent left in workDir's outbox for the reply
// to event: each entry is moved to sent/<event>/, whether it is sent or
// not, so that no file goes out twice (two channels may share a working
// directory) and none is reported twice. Only regular files are sent; a
// symbolic link is followed only when it stays inside workDir. Files past
// the limits are named in Skipped. Entries are taken in name order.
func Collect(workDir string, event uint64, lim Limits) (Collected, error) {
	var c Collected
	outbox := filepath.Join(workDir, OutboxDir)
	entries, err := os.ReadDir(outbox)
	if errors.Is(err, os.ErrNotExist) || len(entries) == 0 {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("read the outbox: %w", err)
	}
	root, err := filepath.EvalSymlinks(workDir)
	if err != nil {
		return c, fmt.Errorf("resolve the working directory: %w", err)
	}
	sent := filepath.Join(workDir, SentDir, strconv.FormatUint(event, 10))
	if err := os.MkdirAll(sent, 0o700); err != nil {
		return c, fmt.Errorf("create %s: %w", SentDir, err)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	files := lim.Files
	if files <= 0 || files > MaxFilesPerMessage {
		files = MaxFilesPerMessage
	}
	var total int64
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue // a file still being written (temp names) or hidden
		}
		src := filepath.Join(outbox, name)
		dst := freeName(sent, SafeName(name))
		if err := os.Rename(src, dst); err != nil {
			c.Skipped = append(c.Skipped, SafeName(name)+" (could not be taken from the outbox)")
			continue
		}
		size, why := check(dst, root, lim)
		switch {
		case why != "":
			c.Skipped = append(c.Skipped, SafeName(name)+" ("+why+")")
		case len(c.Files) >= files:
			c.Skipped = append(c.Skipped, SafeName(name)+fmt.Sprintf(" (Discord takes %d files per message)", files))
		case lim.Bytes > 0 && total+size > lim.Bytes:
			c.Skipped = append(c.Skipped, SafeName(name)+fmt.Sprintf(" (over Discord's %s upload limit with the others)", byteSize(lim.Bytes)))
		default:
			total += size
			c.Files = append(c.Files, Outgoing{Name: filepath.Base(dst), Path: dst, Size: size, Root: root})
		}
	}
	return c, nil
}

// freeName is dir/name, or a numbered variant of it that does not exist.
func freeName(dir, name string) string {
	path := filepath.Join(dir, name)
	for n := 2; n < 1000; n++ {
		if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
			return path
		}
		path = filepath.Join(dir, numbered(name, n))
	}
	return path // the rename then fails and the file is named as skipped
}

// check says why the outbox entry at path may not be sent ("" if it may)
// and its size.
func check(path, root string, lim Limits) (int64, string) {
	st, err := os.Lstat(path)
	if err != nil {
		return 0, "could not be read"
	}
	if st.Mode()&os.ModeSymlink != 0 {
		target, err := filepath.EvalSymlinks(path)
		if err != nil {
			return 0, "a link to nothing"
		}
		if !inside(root, target) {
			return 0, "a link to a file outside the working directory"
		}
		if st, err = os.Stat(target); err != nil {
			return 0, "could not be read"
		}
	}
	switch {
	case st.IsDir():
		return 0, "a folder; only files are sent"
	case !st.Mode().IsRegular():
		return 0, "not a regular file"
	case st.Size() == 0:
		return 0, "empty"
	case lim.Bytes > 0 && st.Size() > lim.Bytes:
		return 0, fmt.Sprintf("%s, over Discord's %s upload limit", byteSize(st.Size()), byteSize(lim.Bytes))
	}
	if lim.Secrets != nil {
		data, err := Read(path, root, st.Size())
		if err != nil {
			return 0, "could not be read"
		}
		for _, s := range lim.Secrets() {
			if len(s) >= 8 && bytes.Contains(data, []byte(s)) {
				return 0, "it contains one of the gateway's secrets"
			}
		}
	}
	return st.Size(), ""
}

// Taken describes again a file Collect took, from its path (recorded
// with a reply a restart delivers).
func Taken(path string) (Outgoing, error) {
	dir, _, ok := strings.Cut(path, string(filepath.Separator)+SentDir+string(filepath.Separator))
	if !ok {
		return Outgoing{}, fmt.Errorf("%s is not in an outbox's sent folder", filepath.Base(path))
	}
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return Outgoing{}, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return Outgoing{}, err
	}
	return Outgoing{Name: filepath.Base(path), Path: path, Size: st.Size(), Root: root}, nil
}

// Read returns the content of a file Collect took, at most max bytes,
// checking again that it is a regular file inside root: the agent can
// still change the working directory after Collect looked.
func Read(path, root string, max int64) ([]byte, error) {
	target, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, err
	}
	if !inside(root, target) {
		return nil, errors.New("the file now points outside the working directory")
	}
	f, err := os.OpenFile(target, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, errors.New("the file grew past the upload limit")
	}
	return data, nil
}

// inside reports whether path is root or below it.
func inside(root, path string) bool {
	rel, err := filepath.Rel(root, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}
