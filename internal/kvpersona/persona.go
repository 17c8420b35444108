package kvpersona

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/atomicfile"
	"github.com/agentgateway/gateway/internal/jsinbox"
	"github.com/agentgateway/gateway/internal/persona"
)

// PersonaBucket holds the persona files, one key per file (keyOf).
const PersonaBucket = "gateway-persona"

// personaHistory keeps a few earlier versions of each file, for an
// operator who wants to see what changed (nats kv history).
const personaHistory = 5

// filePerm is the mode of the files a worker writes: they hold personal
// context, so only the owner reads them (as persona creates them).
const filePerm = 0o600

// PersonaBucketConfig is the gateway-persona bucket, for EnsureBucket and
// CheckBucket (doctor).
func PersonaBucketConfig(replicas int) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:       PersonaBucket,
		Description:  "the persona files every worker writes into its CONFIG_DIR",
		History:      personaHistory,
		Replicas:     replicas,
		Storage:      jetstream.FileStorage,
		MaxValueSize: persona.MaxFileSize,
	}
}

// Persona is the gateway-persona bucket. It is safe for concurrent use.
type Persona struct {
	kv jetstream.KeyValue
}

// OpenPersona creates the gateway-persona bucket with replicas copies, or
// checks the one there.
func OpenPersona(ctx context.Context, js jetstream.JetStream, replicas int) (*Persona, error) {
	kv, err := jsinbox.EnsureBucket(ctx, js, PersonaBucketConfig(replicas))
	if err != nil {
		return nil, err
	}
	return &Persona{kv: kv}, nil
}

// Changes are the files a push wrote or deleted, by name relative to the
// directory, sorted.
type Changes struct {
	Written []string
	Deleted []string
}

// Empty reports whether nothing changed.
func (c Changes) Empty() bool { return len(c.Written) == 0 && len(c.Deleted) == 0 }

// Push makes the bucket hold the persona files of dir (see collect): a
// file whose content differs from its key is written, a key whose file is
// missing is deleted. A file over the persona's size limit, or one that is
// not a regular file, refuses the whole push with an error naming it, and
// nothing changes.
func (p *Persona) Push(ctx context.Context, dir string) (Changes, error) {
	files, err := collect(dir)
	if err != nil {
		return Changes{}, fmt.Errorf("push the persona: %w", err)
	}
	return p.push(ctx, files)
}

func (p *Persona) push(ctx context.Context, files map[string][]byte) (Changes, error) {
	current, err := p.snapshot(ctx)
	if err != nil {
		return Changes{}, err
	}
	var ch Changes
	for name, data := range files {
		key := keyOf(name)
		if old, ok := current[key]; ok && bytes.Equal(old, data) {
			continue
		}
		if _, err := p.kv.Put(ctx, key, data); err != nil {
			return ch, fmt.Errorf("push %s to bucket %s: %w", name, PersonaBucket, err)
		}
		ch.Written = append(ch.Written, name)
	}
	for key := range current {
		name, err := nameOf(key)
		if err == nil {
			if _, keep := files[name]; keep {
				continue
			}
		} else {
			name = key // not a file a worker would write: remove it all the same
		}
		if err := p.kv.Delete(ctx, key); err != nil {
			return ch, fmt.Errorf("delete %s in bucket %s: %w", name, PersonaBucket, err)
		}
		ch.Deleted = append(ch.Deleted, name)
	}
	slices.Sort(ch.Written)
	slices.Sort(ch.Deleted)
	return ch, nil
}

// snapshot reads every key's current value.
func (p *Persona) snapshot(ctx context.Context) (map[string][]byte, error) {
	w, err := p.kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("read bucket %s: %w", PersonaBucket, err)
	}
	defer w.Stop()
	out := map[string][]byte{}
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil, fmt.Errorf("read bucket %s: the watch ended early", PersonaBucket)
			}
			if e == nil {
				return out, nil
			}
			out[e.Key()] = e.Value()
		case <-ctx.Done():
			return nil, fmt.Errorf("read bucket %s: %w", PersonaBucket, ctx.Err())
		}
	}
}

// Publisher pushes a directory's persona files when they change: the node
// that has them on disk (`gateway run`) calls Publish at start and at each
// reload tick. Its first Publish pushes whatever differs from the bucket
// (edits made while the gateway was down); later ones go to NATS only when
// a file differs from what it pushed last, so an unchanged tick costs a
// read of the files and no round trip. It is safe for concurrent use.
type Publisher struct {
	p   *Persona
	dir string

	mu   sync.Mutex        // guards last, and serializes Publish
	last map[string][]byte // the files as last pushed; nil before the first push
}

// Publisher returns a Publisher for dir.
func (p *Persona) Publisher(dir string) *Publisher { return &Publisher{p: p, dir: dir} }

// Publish pushes the directory's persona files if they changed since the
// last Publish, and returns what changed in the bucket.
func (pb *Publisher) Publish(ctx context.Context) (Changes, error) {
	pb.mu.Lock()
	defer pb.mu.Unlock()
	files, err := collect(pb.dir)
	if err != nil {
		return Changes{}, fmt.Errorf("push the persona: %w", err)
	}
	if pb.last != nil && maps.EqualFunc(files, pb.last, bytes.Equal) {
		return Changes{}, nil
	}
	ch, err := pb.p.push(ctx, files)
	if err != nil {
		return ch, err
	}
	pb.last = files
	return ch, nil
}

// Mirror keeps the bucket's persona files in memory for a worker, from a
// watch on the bucket, and writes them into its CONFIG_DIR (Sync).
//
// Why the worker writes files rather than the persona reading KV: every
// reader of the persona stays as it is. persona.Loader reads CONFIG_DIR
// with its file cache, Bootstrap and the schedule read boot.md and
// heartbeat.md, the skills listing gives the agent the path of each
// SKILL.md, and the agent itself reads and follows those files. With the
// files on disk, a worker runs the same code as a single gateway, and a
// worker that loses NATS keeps the persona it last had.
//
// A Sync costs no round trip: the watch delivers each change once, and
// Sync writes a file only when its key's revision moved or the file on
// disk is not the one Sync last wrote. It is safe for concurrent use.
type Mirror struct {
	stop context.CancelFunc
	// ready is closed when the watch delivered the bucket's current
	// content.
	ready chan struct{}
	// done is closed when the watch ended.
	done chan struct{}
	log  zerolog.Logger

	mu      sync.Mutex           // guards entries, updated, closed and disk
	entries map[string]entry     // by file name
	updated chan struct{}        // closed and replaced at each update (tests wait on it)
	closed  bool                 // Close was called
	disk    map[string]diskState // by local path: what Sync last left there
}

// entry is one file as the bucket holds it.
type entry struct {
	rev     uint64
	data    []byte
	deleted bool
}

// diskState is a file as Sync last wrote or found it.
type diskState struct {
	rev uint64
	id  fileID
}

// Mirror starts watching the bucket. Close stops it.
func (p *Persona) Mirror(ctx context.Context, log zerolog.Logger) (*Mirror, error) {
	ctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	w, err := p.kv.WatchAll(ctx)
	if err != nil {
		stop()
		return nil, fmt.Errorf("watch bucket %s: %w", PersonaBucket, err)
	}
	m := &Mirror{
		stop: stop, ready: make(chan struct{}), done: make(chan struct{}), log: log,
		entries: map[string]entry{}, disk: map[string]diskState{}, updated: make(chan struct{}),
	}
	go m.watch(w)
	return m, nil
}

// watch applies the watch's updates until it ends.
func (m *Mirror) watch(w jetstream.KeyWatcher) {
	defer close(m.done)
	defer w.Stop()
	ready := false
	for e := range w.Updates() {
		if e == nil {
			if !ready {
				ready = true
				close(m.ready)
			}
			continue
		}
		name, err := nameOf(e.Key())
		if err != nil {
			m.log.Warn().Err(err).Msg("a key in the persona bucket is not a persona file: ignored")
			continue
		}
		op := e.Operation()
		m.mu.Lock()
		m.entries[name] = entry{rev: e.Revision(), data: e.Value(), deleted: op == jetstream.KeyValueDelete || op == jetstream.KeyValuePurge}
		close(m.updated)
		m.updated = make(chan struct{})
		m.mu.Unlock()
	}
}

// errWatchEnded is a Sync after the watch on the bucket ended.
var errWatchEnded = errors.New("the watch on bucket " + PersonaBucket + " ended")

// Sync writes into dir each file whose content differs from the bucket
// (atomically, mode 0600) and removes each file whose key was deleted. A
// file the bucket never had is left alone, so a worker keeps its own
// files until the persona is first pushed. It returns the names it wrote
// or removed. The first Sync waits until the watch has read the bucket.
func (m *Mirror) Sync(ctx context.Context, dir string) ([]string, error) {
	select {
	case <-m.ready:
	case <-m.done:
		return nil, errWatchEnded
	case <-ctx.Done():
		return nil, fmt.Errorf("read bucket %s: %w", PersonaBucket, ctx.Err())
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, errWatchEnded
	}
	select {
	case <-m.done:
		return nil, errWatchEnded
	default:
	}
	var changed []string
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(m.entries)) {
		e := m.entries[name]
		did, err := m.syncFile(dir, name, e)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
		if did {
			changed = append(changed, name)
		}
	}
	return changed, errors.Join(errs...)
}

// syncFile brings one file in step with its entry. m.mu must be held.
func (m *Mirror) syncFile(dir, name string, e entry) (bool, error) {
	p := filepath.Join(dir, filepath.FromSlash(name))
	last, seen := m.disk[p]
	fi, err := os.Lstat(p)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, pathless(err)
	}
	if e.deleted {
		if seen && last.rev == e.rev {
			return false, nil // removed or found missing at this revision
		}
		m.disk[p] = diskState{rev: e.rev}
		if !exists {
			return false, nil
		}
		if err := os.Remove(p); err != nil {
			return false, pathless(err)
		}
		return true, nil
	}
	if exists && seen && last.rev == e.rev && last.id == identity(fi) {
		return false, nil // as Sync left it
	}
	if exists && fi.Mode().IsRegular() {
		if cur, err := readLimited(p); err == nil && bytes.Equal(cur, e.data) {
			m.disk[p] = diskState{rev: e.rev, id: identity(fi)}
			return false, nil
		}
	}
	if err := mkdirs(dir, name); err != nil {
		return false, err
	}
	if err := atomicfile.Write(p, e.data, filePerm); err != nil {
		return false, err
	}
	if fi, err := os.Lstat(p); err == nil {
		m.disk[p] = diskState{rev: e.rev, id: identity(fi)}
	}
	return true, nil
}

// mkdirs creates the directories of name under dir (skills/<name>/...),
// refusing to write through a symbolic link or a file in the way: a
// worker writes only inside its CONFIG_DIR.
func mkdirs(dir, name string) error {
	parts := strings.Split(name, "/")
	cur := dir
	for _, part := range parts[:len(parts)-1] {
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := os.Mkdir(cur, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return pathless(err)
			}
		case err != nil:
			return pathless(err)
		case fi.Mode()&fs.ModeSymlink != 0:
			rel, _ := filepath.Rel(dir, cur)
			return fmt.Errorf("%s is a symbolic link: not written through", filepath.ToSlash(rel))
		case !fi.IsDir():
			rel, _ := filepath.Rel(dir, cur)
			return fmt.Errorf("%s is not a directory", filepath.ToSlash(rel))
		}
	}
	return nil
}

// Close stops the watch.
func (m *Mirror) Close() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.stop()
	<-m.done
}

// fileID tells whether a file is still the one Sync wrote or read.
type fileID struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64
}

func identity(fi os.FileInfo) fileID {
	id := fileID{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.dev, id.ino, id.ctime = uint64(st.Dev), st.Ino, st.Ctim.Nano()
	}
	return id
}
