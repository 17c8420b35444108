// Package atomicfile writes files so that a crash leaves either the old or
// the new content, never a torn mix (DESIGN decision 6).
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Write replaces path with data: it writes a temp file in the same
// directory, fsyncs it, renames it over path and fsyncs the directory. The
// new file has exactly perm, whatever the umask and the mode of the file it
// replaces, and no other user can open the temp file meanwhile (it is
// created 0600). The new file keeps the owner and group of the one it replaces when the
// process may give it them (root, CAP_CHOWN): memory.md owned by the agent
// user (AGENT_USER) stays the agent's after the gateway merges it.
func Write(path string, data []byte, perm os.FileMode) error {
	return replace(path, data, perm, true)
}

// Replace is Write without the fsyncs: a crash of the process leaves the
// old or the new content, but a crash of the machine may lose the new one
// (or, on some file systems, leave the file empty). It is for files that
// are a convenience, rewritten often, whose loss costs little: a reader
// must take an empty or missing file as no content.
func Replace(path string, data []byte, perm os.FileMode) error {
	return replace(path, data, perm, false)
}

func replace(path string, data []byte, perm os.FileMode, durable bool) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("create temp file: %w", err)
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	if err := f.Chmod(perm); err != nil {
		return fmt.Errorf("chmod %s: %w", filepath.Base(path), err)
	}
	keepOwner(f, path)
	if durable {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("sync %s: %w", filepath.Base(path), err)
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", filepath.Base(path), err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("replace %s: %w", filepath.Base(path), err)
	}
	ok = true
	if !durable {
		return nil
	}
	if d, err := os.Open(dir); err == nil {
		// The rename is durable only once the directory entry is on disk.
		d.Sync()
		d.Close()
	}
	return nil
}

// keepOwner gives f the owner and group of the file at path, if there is
// one and they differ. A failure (no privilege) leaves f the caller's.
func keepOwner(f *os.File, path string) {
	old, err := os.Stat(path)
	if err != nil {
		return
	}
	st, ok := old.Sys().(*syscall.Stat_t)
	if !ok || (int(st.Uid) == os.Geteuid() && int(st.Gid) == os.Getegid()) {
		return
	}
	_ = f.Chown(int(st.Uid), int(st.Gid))
}

// Create creates path with data unless something already exists there,
// and reports whether it did. Like Write the content is written to a temp
// file in the same directory and synced first, so a crash leaves either no
// file or the whole file; unlike a rename, the final hard link fails when
// path exists, so an operator's file is never replaced.
func Create(path string, data []byte, perm os.FileMode) (bool, error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".new-*")
	if err != nil {
		return false, fmt.Errorf("create %s: %w", filepath.Base(path), err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, fmt.Errorf("create %s: %w", filepath.Base(path), err)
	}
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return false, nil
		}
		// The file system has no hard links: rename instead, after a last
		// look (a file created in between would be replaced).
		if _, serr := os.Lstat(path); serr == nil {
			return false, nil
		}
		if err := os.Rename(tmp, path); err != nil {
			return false, fmt.Errorf("create %s: %w", filepath.Base(path), err)
		}
	}
	if d, err := os.Open(dir); err == nil {
		// The new entry is durable only once the directory is on disk.
		d.Sync()
		d.Close()
	}
	return true, nil
}
