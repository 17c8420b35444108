package persona

import (
	"bytes"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// changeWatch tells the file caches of this process whether a file may
// have changed since they last looked at it, from one inotify instance:
// one read(2) that finds nothing replaces a stat(2) of every cached file.
//
// The kernel queues an inotify event before the system call that made
// the change returns, so a change that finished before a drain is seen by
// it: a cache entry checked after a drain that found no event for its
// file is as fresh as a stat would make it. Each file is watched through
// its directory (edits, creations, renames, removals by that path) and as
// an inode (edits through another path: a hard link, a bind mount). Files
// reached through a symbolic link, and files on file systems that do not
// report every change to inotify (network and FUSE file systems), are not
// watched and are looked at every time, as are all files when inotify is
// not available. A queue overflow counts as a change of every file. What
// is not seen: an ancestor of the directory renamed and another put in
// its place (the directory's own rename is seen).
//
// It is safe for concurrent use: mu guards everything below it.
type changeWatch struct {
	mu      sync.Mutex
	fd      int               // the inotify instance; -1 once it failed
	dirs    map[int]string    // directory watch descriptor -> directory
	inodes  map[int][]string  // inode watch descriptor -> paths it was added for
	watched map[string]bool   // directories watched
	files   map[string]bool   // the files watched: only their changes are kept
	gen     map[string]uint64 // file -> counter value at its last change
	epoch   uint64            // counter value at the last overflow
	counter uint64
	buf     []byte
}

// changes is the process's watch, set up at first use.
var changes = sync.OnceValue(func() *changeWatch {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		fd = -1
	}
	return &changeWatch{
		fd: fd, dirs: map[int]string{}, inodes: map[int][]string{}, watched: map[string]bool{},
		files: map[string]bool{}, gen: map[string]uint64{}, buf: make([]byte, 64<<10),
	}
})

// version is what a cache entry records when it looks at a file: equal
// versions before and after mean no change was reported in between.
type version struct{ epoch, gen uint64 }

const (
	dirEvents   = unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE | unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF
	inodeEvents = unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF
)

// watch makes sure changes to path are reported and returns its version,
// to be taken before the file is looked at. ok is false when the file
// cannot be watched: it must then be looked at every time.
func (w *changeWatch) watch(path string) (v version, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fd < 0 || !reportsChanges(path) || throughSymlink(path) {
		return version{}, false
	}
	if !w.watchDirLocked(filepath.Dir(path)) {
		return version{}, false
	}
	wd, err := unix.InotifyAddWatch(w.fd, path, inodeEvents)
	if err != nil {
		return version{}, false
	}
	w.files[path] = true
	if !slices.Contains(w.inodes[wd], path) {
		w.inodes[wd] = append(w.inodes[wd], path)
	}
	w.drainLocked()
	return w.versionLocked(path), true
}

// watchMissing is watch for a file that does not exist: its creation in
// its directory is reported.
func (w *changeWatch) watchMissing(path string) (v version, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	dir := filepath.Dir(path)
	if w.fd < 0 || !reportsChanges(dir) || throughSymlink(dir) || !w.watchDirLocked(dir) {
		return version{}, false
	}
	w.files[path] = true
	w.drainLocked()
	return w.versionLocked(path), true
}

// watchDirLocked makes sure the directory's entries are watched.
func (w *changeWatch) watchDirLocked(dir string) bool {
	if w.watched[dir] {
		return true
	}
	wd, err := unix.InotifyAddWatch(w.fd, dir, dirEvents|unix.IN_ONLYDIR)
	if err != nil {
		return false
	}
	w.dirs[wd], w.watched[dir] = dir, true
	return true
}

// drain takes in the changes reported so far: a version asked for after
// it reflects every change that finished before it.
func (w *changeWatch) drain() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.drainLocked()
}

// current returns path's version as of the last drain.
func (w *changeWatch) current(path string) version {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.versionLocked(path)
}

func (w *changeWatch) versionLocked(path string) version {
	return version{epoch: w.epoch, gen: w.gen[path]}
}

// drainLocked reads every queued event. A read that fails otherwise than
// with "nothing queued" ends the watch: every file is looked at from then
// on (the epoch moves, so no entry stays valid).
func (w *changeWatch) drainLocked() {
	for w.fd >= 0 {
		n, err := unix.Read(w.fd, w.buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.EAGAIN) {
			return
		}
		if err != nil || n <= 0 {
			unix.Close(w.fd)
			w.fd = -1
			w.counter++
			w.epoch = w.counter
			return
		}
		w.apply(w.buf[:n])
	}
}

// apply records the events in buf.
func (w *changeWatch) apply(buf []byte) {
	for len(buf) >= unix.SizeofInotifyEvent {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[0]))
		end := unix.SizeofInotifyEvent + int(ev.Len)
		if end > len(buf) {
			break
		}
		name := string(bytes.TrimRight(buf[unix.SizeofInotifyEvent:end], "\x00"))
		buf = buf[end:]
		w.counter++
		wd := int(ev.Wd)
		switch {
		case ev.Mask&unix.IN_Q_OVERFLOW != 0:
			w.epoch = w.counter
		case name != "":
			// Other files of the directory (temp files, sessions.json)
			// are not kept, or the map would grow with every write.
			if dir, ok := w.dirs[wd]; ok && w.files[filepath.Join(dir, name)] {
				w.gen[filepath.Join(dir, name)] = w.counter
			}
		default:
			w.changedAllLocked(wd)
			if ev.Mask&unix.IN_IGNORED != 0 {
				delete(w.inodes, wd) // the inode is gone: so is its watch
			}
		}
	}
}

// changedAllLocked records a change of the directory or inode itself.
func (w *changeWatch) changedAllLocked(wd int) {
	if dir, ok := w.dirs[wd]; ok {
		// The directory itself was removed, moved or changed: every file
		// in it may be another now.
		for path := range w.files {
			if filepath.Dir(path) == dir {
				w.gen[path] = w.counter
			}
		}
		delete(w.dirs, wd)
		delete(w.watched, dir) // watched again at the next look
		return
	}
	for _, p := range w.inodes[wd] {
		w.gen[p] = w.counter
	}
}

// throughSymlink reports whether path leads through a symbolic link (or
// cannot be resolved). Such a file is not watched: the link may be
// pointed elsewhere (a Kubernetes ConfigMap swaps its "..data" link) with
// no event naming the file.
func throughSymlink(path string) bool {
	real, err := filepath.EvalSymlinks(path)
	return err != nil || real != filepath.Clean(path)
}

// reportsChanges reports whether the file system path is on reports every
// change to inotify: local disks and memory, not network or FUSE file
// systems, where another machine's edit raises no event.
func reportsChanges(path string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return false
	}
	switch uint32(st.Type) {
	case unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC, unix.BTRFS_SUPER_MAGIC, unix.TMPFS_MAGIC,
		unix.OVERLAYFS_SUPER_MAGIC, unix.F2FS_SUPER_MAGIC, unix.RAMFS_MAGIC:
		return true
	}
	return false
}
