package persona

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// createFile creates path with data unless something already exists there,
// and reports whether it did. Like atomicfile.Write the content is written
// to a temp file in the same directory and synced first, so a crash leaves
// either no file or the whole file; unlike a rename, the final hard link
// fails when path exists, so an operator's file is never replaced.
func createFile(path string, data []byte, perm os.FileMode) (bool, error) {
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
