package persona

import (
	"os"
	"sync"
	"syscall"
	"time"
)

// racyWindow is how long after its last modification a file is always read
// again. File timestamps are coarse (the kernel's clock tick), so an edit
// that keeps the size and lands in the same tick as an earlier read would
// otherwise go unseen; git treats such "racily clean" files the same way.
const racyWindow = time.Second

// fileCache reuses a file's content while its identity (device, inode,
// size, modification and change times) is unchanged and the file was last
// modified well before it was read. Every call still looks at the file, so
// an edit is seen by the next call; only the reading is saved.
type fileCache struct {
	mu      sync.Mutex // guards entries
	entries map[string]cacheEntry
}

type fileID struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64
}

type cacheEntry struct {
	id      fileID
	readAt  time.Time
	content string
}

func identity(fi os.FileInfo) (fileID, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{
		dev: uint64(st.Dev), ino: st.Ino, size: fi.Size(),
		mtime: fi.ModTime().UnixNano(), ctime: st.Ctim.Nano(),
	}, true
}

// read returns the file at path, from the cache when it is unchanged, else
// from load, and the file's information (nil when it could not be
// looked at). Errors are never cached.
func (c *fileCache) read(path string, load func() (string, error)) (string, os.FileInfo, error) {
	fi, err := os.Stat(path)
	if err != nil {
		content, err := load()
		return content, nil, err
	}
	id, ok := identity(fi)
	if ok {
		c.mu.Lock()
		e, hit := c.entries[path]
		c.mu.Unlock()
		if hit && e.id == id && e.readAt.Sub(fi.ModTime()) > racyWindow {
			return e.content, fi, nil
		}
	}
	readAt := time.Now()
	content, err := load()
	if err != nil || !ok {
		return content, fi, err
	}
	c.mu.Lock()
	if c.entries == nil {
		c.entries = map[string]cacheEntry{}
	}
	// The identity is from before the read: if the file changed meanwhile,
	// the next call sees a new identity and reads again.
	c.entries[path] = cacheEntry{id: id, readAt: readAt, content: content}
	c.mu.Unlock()
	return content, fi, nil
}
