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
// modified well before it was read. Every call still checks the file, so
// an edit is seen by the next call; only the reading is saved. Where the
// process's inotify watch covers the file (see changeWatch), the check is
// the watch's: no change reported since the entry was last checked; else
// it is a stat(2).
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
	fi      os.FileInfo
	readAt  time.Time
	content string
	// checked is the watch's version of the file when it was last looked
	// at; watched is false when the watch does not cover it.
	checked version
	watched bool
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
	changes().drain()
	return c.readDrained(path, load)
}

// readDrained is read for a caller that drained the watch itself since it
// was asked for the file: one drain serves every file of one Load.
func (c *fileCache) readDrained(path string, load func() (string, error)) (string, os.FileInfo, error) {
	c.mu.Lock()
	e, hit := c.entries[path]
	c.mu.Unlock()
	if hit && e.watched && e.readAt.Sub(e.fi.ModTime()) > racyWindow && changes().current(path) == e.checked {
		return e.content, e.fi, nil
	}
	// The watch first, then the look: a change after this is reported.
	checked, watched := changes().watch(path)
	fi, err := os.Stat(path)
	if err != nil {
		content, err := load()
		return content, nil, err
	}
	id, ok := identity(fi)
	if ok && hit && e.id == id && e.readAt.Sub(fi.ModTime()) > racyWindow {
		c.store(path, cacheEntry{id: id, fi: fi, readAt: e.readAt, content: e.content, checked: checked, watched: watched})
		return e.content, fi, nil
	}
	readAt := time.Now()
	content, err := load()
	if err != nil || !ok {
		return content, fi, err
	}
	// The identity is from before the read: if the file changed meanwhile,
	// the next call sees a new identity (or the watch a change) and reads
	// again.
	c.store(path, cacheEntry{id: id, fi: fi, readAt: readAt, content: content, checked: checked, watched: watched})
	return content, fi, nil
}

func (c *fileCache) store(path string, e cacheEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[string]cacheEntry{}
	}
	c.entries[path] = e
}
