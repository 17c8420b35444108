package kvstate

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sys/unix"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/files"
	"github.com/agentgateway/gateway/internal/proc"
)

// BucketTranscripts is the object store bucket of the CLIs' session files:
// <backend>/<session id> is a session's manifest, <backend>/<session
// id>/<path below the session's folder> each of its files.
const BucketTranscripts = "gateway-transcripts"

// maxSessionFile bounds one file Save stores (claude's transcripts of
// long sessions are a few megabytes).
const maxSessionFile = 256 << 20

// TranscriptOptions configures Transcripts.
type TranscriptOptions struct {
	Options
	// Agent is the user the CLIs run as (AGENT_USER); nil when they run as
	// the gateway's own user. Files are read as the agent would read them
	// and restored files and folders are given to it.
	Agent *proc.Credential
}

// Transcripts stores the CLIs' session files, so that a session started on
// one worker can be resumed on another.
type Transcripts struct {
	obj     jetstream.ObjectStore
	timeout time.Duration
	agent   *proc.Credential
}

// TranscriptsConfig is the bucket OpenTranscripts creates or checks.
func TranscriptsConfig(o Options) jetstream.ObjectStoreConfig {
	o = o.withDefaults()
	return jetstream.ObjectStoreConfig{
		Bucket:      BucketTranscripts,
		Description: "agent gateway: <backend>/<session id>[/<file>] -> the agent CLIs' session files",
		Storage:     jetstream.FileStorage,
		Replicas:    o.Replicas,
	}
}

// OpenTranscripts creates the bucket when missing and checks it when
// present: a different replica count or storage is an error naming the fix.
func OpenTranscripts(ctx context.Context, js jetstream.JetStream, o TranscriptOptions) (*Transcripts, error) {
	o.Options = o.withDefaults()
	want := TranscriptsConfig(o.Options)
	obj, err := js.ObjectStore(ctx, want.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		obj, err = js.CreateObjectStore(ctx, want)
		if err != nil {
			return nil, fmt.Errorf("create bucket %s: %w", want.Bucket, err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("look up bucket %s: %w", want.Bucket, err)
	} else {
		st, err := obj.Status(ctx)
		if err != nil {
			return nil, fmt.Errorf("read bucket %s: %w", want.Bucket, err)
		}
		var problems []string
		if st.Replicas() != want.Replicas {
			problems = append(problems, fmt.Sprintf("replicas are %d, want %d", st.Replicas(), want.Replicas))
		}
		if st.Storage() != want.Storage {
			problems = append(problems, fmt.Sprintf("storage is %s, want %s", st.Storage(), want.Storage))
		}
		if len(problems) > 0 {
			return nil, fmt.Errorf("bucket %s does not match this gateway's settings: %s; change the setting, or edit the bucket (nats object edit %s)",
				want.Bucket, strings.Join(problems, "; "), want.Bucket)
		}
	}
	return &Transcripts{obj: obj, timeout: o.Timeout, agent: o.Agent}, nil
}

// manifest lists a session's stored files.
type manifest struct {
	Files []manifestFile `json:"files"`
}

type manifestFile struct {
	// Path is below the session's folder, slash-separated.
	Path    string    `json:"path"`
	Size    int64     `json:"size"`
	ModTime time.Time `json:"mod_time"`
	SHA256  string    `json:"sha256"`
}

// Save stores the files of session id, which backend's CLI ran in workDir
// with the agent's home home, after a turn. Files the bucket has already
// are not sent again. A CLI whose sessions are not files is
// backends.ErrNotMovable; a session with no files on disk stores nothing.
func (t *Transcripts) Save(ctx context.Context, backend, home, workDir, id string) error {
	sf, err := backends.SessionFilesOf(backend, home, workDir, id)
	if err != nil {
		return fmt.Errorf("save session files: %w", err)
	}
	rels, err := findSessionFiles(filepath.Join(home, filepath.FromSlash(sf.Dir)), sf)
	if err != nil {
		return fmt.Errorf("save session files: %w", err)
	}
	if len(rels) == 0 {
		return nil
	}
	old, _, err := t.manifest(ctx, backend, id)
	if err != nil {
		return fmt.Errorf("save session files: %w", err)
	}
	stored := map[string]manifestFile{}
	for _, f := range old.Files {
		stored[f.Path] = f
	}
	g := files.Guard{Agent: t.agent}
	var m manifest
	for _, rel := range rels {
		data, mod, err := readAgentFile(&g, home, path.Join(sf.Dir, rel))
		if err != nil {
			return fmt.Errorf("save session files: %w", err)
		}
		sum := sha256.Sum256(data)
		f := manifestFile{Path: rel, Size: int64(len(data)), ModTime: mod.UTC(), SHA256: hex.EncodeToString(sum[:])}
		if prev, ok := stored[rel]; !ok || prev.SHA256 != f.SHA256 {
			if err := t.put(ctx, objectName(backend, id)+"/"+rel, data); err != nil {
				return fmt.Errorf("save session files: %w", err)
			}
		}
		m.Files = append(m.Files, f)
	}
	data, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("save session files: %w", err)
	}
	if err := t.put(ctx, objectName(backend, id), data); err != nil {
		return fmt.Errorf("save session files: %w", err)
	}
	return nil
}

// Restore puts the stored files of session id back where backend's CLI
// will look for them, running in workDir with the agent's home home,
// before a turn resumes it: a file that is missing, or older than the
// stored copy (smaller, or as large but different), is written; one that
// is larger (this machine ran a later turn) is kept. Files are written
// atomically, mode 0600, and given to the agent. found is false, with no
// error, when the bucket has no copy of the session: the caller's
// stale-session healing then starts afresh.
func (t *Transcripts) Restore(ctx context.Context, backend, home, workDir, id string) (found bool, err error) {
	sf, err := backends.SessionFilesOf(backend, home, workDir, id)
	if err != nil {
		return false, fmt.Errorf("restore session files: %w", err)
	}
	m, found, err := t.manifest(ctx, backend, id)
	if err != nil || !found {
		return false, err
	}
	owner := t.owner()
	if sf.Marker != nil {
		if _, err := readLocal(home, path.Join(sf.Dir, sf.Marker.Name)); errors.Is(err, fs.ErrNotExist) {
			if err := writeAgentFile(home, path.Join(sf.Dir, sf.Marker.Name), sf.Marker.Data, time.Now(), owner); err != nil {
				return true, fmt.Errorf("restore session files: %w", err)
			}
		}
	}
	for _, f := range m.Files {
		if !validRel(f.Path, sf) {
			return true, fmt.Errorf("restore session files: the stored copy names a file %q outside the session", f.Path)
		}
		rel := path.Join(sf.Dir, f.Path)
		local, err := readLocal(home, rel)
		switch {
		case err == nil:
			sum := sha256.Sum256(local)
			if hex.EncodeToString(sum[:]) == f.SHA256 || int64(len(local)) > f.Size {
				continue
			}
		case !errors.Is(err, fs.ErrNotExist):
			return true, fmt.Errorf("restore session files: %w", files.WithoutPath(err))
		}
		data, err := t.get(ctx, objectName(backend, id)+"/"+f.Path)
		if err != nil {
			return true, fmt.Errorf("restore session files: %w", err)
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != f.SHA256 {
			return true, fmt.Errorf("restore session files: the stored copy of a file does not match its digest (a save in progress?)")
		}
		if err := writeAgentFile(home, rel, data, f.ModTime, owner); err != nil {
			return true, fmt.Errorf("restore session files: %w", err)
		}
	}
	return true, nil
}

// validRel reports whether a stored file's path is one of the session's,
// below its folder: the bucket is shared, so what it names is checked.
func validRel(rel string, sf backends.SessionFiles) bool {
	if rel == "" || path.IsAbs(rel) || path.Clean(rel) != rel || strings.HasPrefix(rel, "../") || rel == ".." {
		return false
	}
	return strings.Count(rel, "/") < sf.Depth && sf.Match(rel)
}

func objectName(backend, id string) string { return backend + "/" + id }

func (t *Transcripts) owner() fileOwner {
	if t.agent == nil {
		return fileOwner{uid: os.Geteuid(), gid: os.Getegid()}
	}
	return fileOwner{uid: int(t.agent.UID), gid: int(t.agent.GID)}
}

// manifest reads a session's manifest; found is false when there is none.
func (t *Transcripts) manifest(ctx context.Context, backend, id string) (manifest, bool, error) {
	data, err := t.get(ctx, objectName(backend, id))
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return manifest{}, false, nil
	}
	if err != nil {
		return manifest{}, false, err
	}
	var m manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return manifest{}, false, fmt.Errorf("read the stored list of session files: %w", err)
	}
	return m, true, nil
}

func (t *Transcripts) get(ctx context.Context, name string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	r, err := t.obj.Get(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("read %s from bucket %s: %w", name, BucketTranscripts, err)
	}
	defer r.Close()
	data, err := io.ReadAll(io.LimitReader(r, maxSessionFile+1))
	if err != nil {
		return nil, fmt.Errorf("read %s from bucket %s: %w", name, BucketTranscripts, err)
	}
	if len(data) > maxSessionFile {
		return nil, fmt.Errorf("read %s from bucket %s: over %d MiB", name, BucketTranscripts, maxSessionFile>>20)
	}
	return data, nil
}

func (t *Transcripts) put(ctx context.Context, name string, data []byte) error {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	if _, err := t.obj.Put(ctx, jetstream.ObjectMeta{Name: name}, bytes.NewReader(data)); err != nil {
		return fmt.Errorf("write %s to bucket %s: %w", name, BucketTranscripts, err)
	}
	return nil
}

// findSessionFiles lists the session's regular files below dir (slash-
// separated, at most sf.Depth elements deep), never following a link. A
// missing dir has none.
func findSessionFiles(dir string, sf backends.SessionFiles) ([]string, error) {
	var out []string
	var walk func(sub string, depth int) error
	walk = func(sub string, depth int) error {
		entries, err := os.ReadDir(filepath.Join(dir, filepath.FromSlash(sub)))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return files.WithoutPath(err)
		}
		for _, e := range entries {
			rel := path.Join(sub, e.Name())
			switch {
			case e.Type().IsRegular() && sf.Match(rel):
				out = append(out, rel)
			case e.IsDir() && depth+1 < sf.Depth:
				if err := walk(rel, depth+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return out, walk("", 0)
}

// readAgentFile reads the file at rel below home as the agent would (one
// folder at a time, never through a link): it must be a regular file.
func readAgentFile(g *files.Guard, home, rel string) ([]byte, time.Time, error) {
	f, err := g.Open(filepath.FromSlash(rel), home)
	if err != nil {
		return nil, time.Time{}, files.WithoutPath(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, time.Time{}, files.WithoutPath(err)
	}
	if !st.Mode().IsRegular() {
		return nil, time.Time{}, errors.New("a session file is not a regular file")
	}
	if st.Size() > maxSessionFile {
		return nil, time.Time{}, fmt.Errorf("a session file is over %d MiB", maxSessionFile>>20)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxSessionFile+1))
	if err != nil {
		return nil, time.Time{}, files.WithoutPath(err)
	}
	return data, st.ModTime(), nil
}

// fileOwner is who restored files and folders belong to.
type fileOwner struct{ uid, gid int }

// openFolders opens the folders of rel's parent below home one at a time,
// never through a link, each of which must belong to owner; with create,
// missing ones are made (0700) and given to owner. It returns the last
// folder's descriptor.
func openFolders(home string, parts []string, create bool, owner fileOwner) (int, error) {
	fd, err := unix.Open(home, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open the agent's home: %w", err)
	}
	for _, part := range parts {
		made := false
		if create {
			err := unix.Mkdirat(fd, part, 0o700)
			if err != nil && !errors.Is(err, unix.EEXIST) {
				unix.Close(fd)
				return -1, fmt.Errorf("make a session folder: %w", err)
			}
			made = err == nil
		}
		next, err := unix.Openat(fd, part, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if errors.Is(err, unix.ENOENT) {
			return -1, fs.ErrNotExist
		}
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return -1, backends.ErrNotTheAgents
		}
		if err != nil {
			return -1, fmt.Errorf("open a session folder: %w", err)
		}
		fd = next
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return -1, err
		}
		if made && owner.uid >= 0 && int(st.Uid) != owner.uid {
			if err := unix.Fchown(fd, owner.uid, owner.gid); err != nil {
				unix.Close(fd)
				return -1, fmt.Errorf("give a session folder to the agent: %w", err)
			}
			st.Uid = uint32(owner.uid)
		}
		if owner.uid >= 0 && int(st.Uid) != owner.uid {
			unix.Close(fd)
			return -1, backends.ErrNotTheAgents
		}
	}
	return fd, nil
}

// readLocal reads this machine's copy of the file at rel below home, never
// through a link; fs.ErrNotExist when it has none.
func readLocal(home, rel string) ([]byte, error) {
	parts := strings.Split(rel, "/")
	dir, err := openFolders(home, parts[:len(parts)-1], false, fileOwnerAny)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dir)
	fd, err := unix.Openat(dir, parts[len(parts)-1], unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil, fs.ErrNotExist
	}
	if err != nil {
		return nil, fmt.Errorf("open a session file: %w", err)
	}
	f := os.NewFile(uintptr(fd), parts[len(parts)-1])
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, backends.ErrNotTheAgents
	}
	return io.ReadAll(io.LimitReader(f, maxSessionFile+1))
}

// fileOwnerAny makes openFolders accept folders of any owner: reading
// this machine's copy to compare it decides nothing about where to write.
var fileOwnerAny = fileOwner{uid: -1}

// writeAgentFile replaces the file at rel below home with data, atomically
// (a temporary file in the same folder, synced, renamed over it), mode
// 0600, owned by owner, modified at mod.
func writeAgentFile(home, rel string, data []byte, mod time.Time, owner fileOwner) error {
	parts := strings.Split(rel, "/")
	dir, err := openFolders(home, parts[:len(parts)-1], true, owner)
	if err != nil {
		return files.WithoutPath(err)
	}
	defer unix.Close(dir)
	name := parts[len(parts)-1]
	tmp := "." + name + ".restore-" + rand.Text()[:10]
	fd, err := unix.Openat(dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("create a session file: %w", err)
	}
	f := os.NewFile(uintptr(fd), tmp)
	err = f.Chown(owner.uid, owner.gid)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		ts := unix.NsecToTimespec(mod.UnixNano())
		err = unix.UtimesNanoAt(dir, tmp, []unix.Timespec{ts, ts}, unix.AT_SYMLINK_NOFOLLOW)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(dir, tmp, dir, name)
	}
	if err != nil {
		unix.Unlinkat(dir, tmp, 0)
		return fmt.Errorf("write a session file: %w", files.WithoutPath(err))
	}
	return unix.Fsync(dir)
}
