package ipc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
)

// Defaults for the zero fields of Options.
const (
	DefaultInterval    = 2 * time.Second
	DefaultMaxSize     = 64 << 10
	DefaultMaxPerScan  = 20
	DefaultGiveUpAfter = 24 * time.Hour
)

// The backoff between tries of a post that failed doubles from minBackoff
// up to maxBackoff.
const (
	minBackoff = 2 * time.Second
	maxBackoff = 5 * time.Minute
)

// Names of the folders inside Options.Dir, and the suffix of the file that
// says why a file was refused.
const (
	OutboundDir  = "outbound"
	FailedDir    = "failed"
	ReasonSuffix = ".reason.txt"
	// ReceiptsDir, with Options.Agent, holds what became of each message
	// the agent's user wrote, under the message file's name: ReceiptPosted,
	// or ReceiptRefused followed by the reason. The agent may read it
	// (failed/ stays private), so `gateway send` run by the agent can
	// tell posted from refused. Receipts go after ReceiptTTL.
	ReceiptsDir    = "receipts"
	ReceiptPosted  = "posted"
	ReceiptRefused = "refused: "
	ReceiptTTL     = time.Hour
)

// errNotRegular refuses symlinks, directories, FIFOs and devices: only a
// file the writer renamed into place is a message.
var errNotRegular = errors.New("not a regular file")

// errOtherNames refuses a file with more than one name: a hard link to a
// file elsewhere (the gateway's .env) is not a message.
var errOtherNames = errors.New("the file has other names (a hard link): only a file renamed into place is a message")

// ErrUnsafeFolder is the error of the ipc folder, outbound/ or failed/
// when it is not what it claims: a link, or a folder that someone other
// than the gateway's user could replace entries of.
var ErrUnsafeFolder = errors.New("unsafe ipc folder")

// Poster posts a message to a Discord channel. text may be longer than one
// Discord message (the poster splits it) or empty when there are files;
// files are absolute paths to attach. The Discord bot implements it.
type Poster interface {
	Post(ctx context.Context, channelID, text string, files []string) error
}

// Options configures a Watcher.
type Options struct {
	// Dir is CONFIG_DIR/ipc. New creates Dir/outbound and Dir/failed with
	// mode 0700 if they are missing; existing folders keep their mode and
	// owner (an operator may open outbound/ to a group of writers), unless
	// Agent is set. Scans read and move files only while Dir and failed/
	// are real folders of the gateway's user that no one else may write,
	// and outbound/ a real folder of the gateway's (or the agent's) user
	// that not everyone may write.
	Dir string
	// Allowed reports whether messages may be posted to a channel (the
	// channel allowlist). Required. A message for any other channel goes
	// to failed/.
	Allowed func(channelID string) bool
	// AgentAllowed, if set, is asked as well for a message file owned by
	// the agent's user (Agent): the agent may post only where its own
	// conversations are, not wherever an operator's script may. A message
	// for any other channel goes to failed/.
	AgentAllowed func(channelID string) bool
	// ResolveFile turns an entry of a message's files into the absolute
	// path to attach, or says why the entry is refused; a refused entry
	// sends the message to failed/. Nil refuses every message with files.
	ResolveFile func(path string) (string, error)
	// Interval is the time between scans of outbound/ in Run
	// (DefaultInterval if zero).
	Interval time.Duration
	// MaxSize is the largest file read, in bytes (DefaultMaxSize if zero);
	// a larger one goes to failed/.
	MaxSize int64
	// MaxPerScan is the most files one scan posts, tries or refuses
	// (DefaultMaxPerScan if zero), so a flood of files does not monopolise
	// the bot. The rest wait for later scans.
	MaxPerScan int
	// GiveUpAfter is how long a file whose post keeps failing stays in
	// outbound/ before it goes to failed/ with the last error
	// (DefaultGiveUpAfter if zero).
	GiveUpAfter time.Duration
	// Clock drives Run's ticker and the retry backoff; nil means the real
	// clock. Tests pass a clockwork fake clock.
	Clock clockwork.Clock
	// Agent, if set, is the user the agent runs as (AGENT_USER): New
	// opens Dir to the agent's group for search only (0710) and outbound/
	// for writing (01770: sticky, so the agent removes or renames only the
	// files it wrote), both still the gateway's. failed/ stays the
	// gateway's alone; receipts/ (0750) tells the agent what became of
	// its own messages. The agent may then post to any allowed channel.
	Agent *Agent
}

// Agent is the user the agent CLIs run as (AGENT_USER).
type Agent struct {
	UID, GID uint32
}

// Watcher posts the messages dropped into outbound/. Build it with New and
// start it with Run.
type Watcher struct {
	opts     Options
	post     Poster
	log      zerolog.Logger
	outbound string
	failed   string
	receipts string // "" without Options.Agent

	// mu serialises scans and guards the fields below.
	mu          sync.Mutex
	retries     map[string]*retry // by file name: posts waiting to be tried again
	stuck       map[string]stuck  // by file name: finished files that could not be taken out of outbound/
	listFailing bool              // the last scan could not list outbound/ (logged once)
	unsafe      string            // why the last scan found the folders unsafe (logged once)
}

// retry is the state of a file whose post failed.
type retry struct {
	channel  string
	failures int
	first    time.Time // when the first try failed
	next     time.Time // not tried again before this
}

// stuck is a file that was posted or refused but could neither be removed
// nor moved: it must not be posted or reported again while it is the same
// file, or a permission problem would repost it on every scan.
type stuck struct {
	info   fs.FileInfo // identifies the file
	reason string      // why it was refused; empty if it was posted
}

// New returns a Watcher for opts.Dir, creating its folders. Nothing is read
// before Run or Scan.
func New(opts Options, post Poster, log zerolog.Logger) (*Watcher, error) {
	switch {
	case opts.Dir == "":
		return nil, errors.New("ipc: Options.Dir is required")
	case opts.Allowed == nil:
		return nil, errors.New("ipc: Options.Allowed is required")
	case post == nil:
		return nil, errors.New("ipc: a Poster is required")
	}
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.MaxSize <= 0 {
		opts.MaxSize = DefaultMaxSize
	}
	if opts.MaxPerScan <= 0 {
		opts.MaxPerScan = DefaultMaxPerScan
	}
	if opts.GiveUpAfter <= 0 {
		opts.GiveUpAfter = DefaultGiveUpAfter
	}
	if opts.Clock == nil {
		opts.Clock = clockwork.NewRealClock()
	}
	w := &Watcher{
		opts:     opts,
		post:     post,
		log:      log.With().Str("component", "ipc").Logger(),
		outbound: filepath.Join(opts.Dir, OutboundDir),
		failed:   filepath.Join(opts.Dir, FailedDir),
		retries:  map[string]*retry{},
		stuck:    map[string]stuck{},
	}
	for _, dir := range []string{w.outbound, w.failed} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("create ipc folder: %w", err)
		}
	}
	if a := opts.Agent; a != nil {
		w.receipts = filepath.Join(opts.Dir, ReceiptsDir)
		if err := os.MkdirAll(w.receipts, 0o700); err != nil {
			return nil, fmt.Errorf("create ipc folder: %w", err)
		}
		if err := openTo(w.receipts, a, 0o750); err != nil {
			return nil, err
		}
		if err := openTo(opts.Dir, a, 0o710); err != nil {
			return nil, err
		}
		if err := openTo(w.outbound, a, 0o770|fs.ModeSticky); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// openTo gives the agent's group mode on dir, a folder of the gateway's
// user; a folder the agent owns already is left as it is. dir is opened
// without following a link and changed through that handle.
func openTo(dir string, a *Agent, mode fs.FileMode) error {
	f, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.ENOTDIR) {
			err = fmt.Errorf("%s is not a folder: %w", filepath.Base(dir), ErrUnsafeFolder)
		}
		return fmt.Errorf("open the ipc folder to the agent user: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("open the ipc folder to the agent user: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !ok:
		return fmt.Errorf("open the ipc folder to the agent user: no owner to check: %w", ErrUnsafeFolder)
	case st.Uid == a.UID && filepath.Base(dir) == OutboundDir:
		return nil
	case int(st.Uid) != os.Geteuid():
		return fmt.Errorf("open the ipc folder to the agent user: %s is owned by uid %d, not the gateway's user: %w", filepath.Base(dir), st.Uid, ErrUnsafeFolder)
	}
	if err := f.Chown(-1, int(a.GID)); err != nil {
		return fmt.Errorf("open the ipc folder to the agent user: %w", err)
	}
	if err := f.Chmod(mode); err != nil {
		return fmt.Errorf("open the ipc folder to the agent user: %w", err)
	}
	return nil
}

// checkFolders reports whether Dir, outbound/ and failed/ are what they
// claim (see Options.Dir). Once they are, the paths below Dir cannot be
// changed by anyone but the gateway's user (and CONFIG_DIR above it is
// checked at start), so reading and moving by path stays inside them.
func (w *Watcher) checkFolders() error {
	euid := uint32(os.Geteuid())
	check := func(path string, owners []uint32, notWritable fs.FileMode) error {
		fi, err := os.Lstat(path)
		if err != nil {
			return err
		}
		name := filepath.Base(path)
		if path == w.opts.Dir {
			name = "the ipc folder"
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			return fmt.Errorf("%s is a symbolic link: %w", name, ErrUnsafeFolder)
		case !fi.IsDir():
			return fmt.Errorf("%s is not a folder: %w", name, ErrUnsafeFolder)
		case !ok:
			return fmt.Errorf("%s has no owner to check: %w", name, ErrUnsafeFolder)
		case !slices.Contains(owners, st.Uid):
			return fmt.Errorf("%s is owned by uid %d, not the gateway's user: %w", name, st.Uid, ErrUnsafeFolder)
		case fi.Mode().Perm()&notWritable != 0:
			return fmt.Errorf("%s is writable by others (mode %v): %w", name, fi.Mode().Perm(), ErrUnsafeFolder)
		}
		return nil
	}
	outboundOwners := []uint32{euid}
	if w.opts.Agent != nil {
		outboundOwners = append(outboundOwners, w.opts.Agent.UID)
	}
	errs := []error{
		check(w.opts.Dir, []uint32{euid}, 0o022),
		check(w.outbound, outboundOwners, 0o002),
		check(w.failed, []uint32{euid}, 0o022),
	}
	if w.receipts != "" {
		errs = append(errs, check(w.receipts, []uint32{euid}, 0o022))
	}
	return errors.Join(errs...)
}

// Run scans outbound/ now and then every Options.Interval until ctx is
// done. It returns nil when ctx ends.
func (w *Watcher) Run(ctx context.Context) error {
	ticker := w.opts.Clock.NewTicker(w.opts.Interval)
	defer ticker.Stop()
	for {
		w.Scan(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.Chan():
		}
	}
}

// Scan makes one pass over outbound/: it handles the eligible files in name
// order, at most Options.MaxPerScan of them, skipping those waiting for a
// retry and those queued behind one for the same channel. It stops early
// when ctx is done; a post cut short that way is tried again on the next
// scan without counting as a failure.
func (w *Watcher) Scan(ctx context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.checkFolders(); err != nil {
		if reason := oneLine(err.Error()); reason != w.unsafe {
			w.unsafe = reason
			w.log.Error().Err(err).Msg("the ipc folder is not safe to read: nothing is posted from it until it is fixed (chown it to the gateway's user, chmod go-w)")
		}
		return
	}
	w.unsafe = ""
	w.pruneReceipts()
	entries, err := os.ReadDir(w.outbound) // sorted by name
	if err != nil {
		if !w.listFailing {
			w.log.Error().Err(err).Msg("cannot list outbound messages")
		}
		w.listFailing = true
		return
	}
	w.listFailing = false

	present := make(map[string]bool, len(entries))
	held := map[string]bool{} // channels with an earlier file waiting for a retry
	handled := 0
	for _, e := range entries {
		name := e.Name()
		if !eligible(name) {
			continue
		}
		present[name] = true
		if ctx.Err() != nil || handled >= w.opts.MaxPerScan {
			continue // keep listing: present must be complete for the pruning below
		}
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // taken away since the listing
		}
		if err != nil {
			w.log.Error().Err(err).Str("file", name).Msg("cannot stat outbound message")
			continue
		}
		if s, ok := w.stuck[name]; ok {
			if sameFile(s.info, info) {
				w.finishStuck(name, s)
				continue
			}
			delete(w.stuck, name) // a new file under the same name
		}
		if r, ok := w.retries[name]; ok && (held[r.channel] || w.opts.Clock.Now().Before(r.next)) {
			held[r.channel] = true
			continue
		}
		if w.handle(ctx, name, info, held) {
			handled++
		}
	}
	for name := range w.retries {
		if !present[name] {
			delete(w.retries, name)
		}
	}
	for name := range w.stuck {
		if !present[name] {
			delete(w.stuck, name)
		}
	}
}

// eligible reports whether a name in outbound/ is a finished message file.
// Writers write a dot name or a .tmp name and rename it when complete.
func eligible(name string) bool {
	return !strings.HasPrefix(name, ".") && !strings.HasSuffix(name, ".tmp") && strings.HasSuffix(name, ".json")
}

// handle reads, checks and posts one file. It reports whether the file
// counts against MaxPerScan: it does unless it vanished or was deferred
// behind a held channel.
func (w *Watcher) handle(ctx context.Context, name string, info fs.FileInfo, held map[string]bool) bool {
	msg, opened, err := w.read(name, info)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false
	case err != nil:
		w.refuse(name, info, err.Error())
		return true
	case held[msg.ChannelID]:
		return false
	}
	if !w.opts.Allowed(msg.ChannelID) {
		w.refuse(name, opened, fmt.Sprintf("channel %s is not allowed", msg.ChannelID))
		return true
	}
	if w.fromAgent(opened) && w.opts.AgentAllowed != nil && !w.opts.AgentAllowed(msg.ChannelID) {
		w.refuse(name, opened, fmt.Sprintf("the agent may not post in channel %s: it has no conversation there", msg.ChannelID))
		return true
	}
	files, err := w.resolve(msg.Files)
	if err != nil {
		w.refuse(name, opened, err.Error())
		return true
	}

	log := w.log.With().Str("file", name).Str("channel", msg.ChannelID).Logger()
	if err := w.post.Post(ctx, msg.ChannelID, msg.Text, files); err != nil {
		if ctx.Err() != nil {
			return true // shutting down: not the message's fault
		}
		held[msg.ChannelID] = true
		w.postFailed(name, opened, msg.ChannelID, err)
		return true
	}
	delete(w.retries, name)
	log.Info().Int("files", len(files)).Msg("posted outbound message")
	w.receipt(name, opened, ReceiptPosted)
	if err := os.Remove(filepath.Join(w.outbound, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		w.stuck[name] = stuck{info: opened}
		log.Error().Err(err).Msg("cannot remove posted message file; it is not posted again while unchanged")
	}
	return true
}

// fromAgent reports whether a message file was written by the agent's
// user (the owner of the opened file; outbound/ is sticky, so the agent
// cannot pass its file off as another's by renaming it).
func (w *Watcher) fromAgent(opened fs.FileInfo) bool {
	if w.opts.Agent == nil || opened == nil {
		return false
	}
	st, ok := opened.Sys().(*syscall.Stat_t)
	return !ok || st.Uid == w.opts.Agent.UID
}

// read opens a file without following symlinks and parses it. The returned
// FileInfo is that of the file read. An error other than fs.ErrNotExist is
// the reason to refuse the file.
func (w *Watcher) read(name string, info fs.FileInfo) (Message, fs.FileInfo, error) {
	if !info.Mode().IsRegular() {
		return Message{}, nil, errNotRegular
	}
	// O_NONBLOCK: a FIFO swapped in after the listing must not block the
	// open; the Stat below then refuses it.
	f, err := os.OpenFile(filepath.Join(w.outbound, name), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ELOOP) {
		return Message{}, nil, errNotRegular
	}
	if err != nil {
		return Message{}, nil, err
	}
	defer f.Close()
	opened, err := f.Stat()
	if err != nil {
		return Message{}, nil, err
	}
	if !opened.Mode().IsRegular() {
		return Message{}, nil, errNotRegular
	}
	if st, ok := opened.Sys().(*syscall.Stat_t); !ok || st.Nlink != 1 {
		return Message{}, nil, errOtherNames
	}
	tooLarge := fmt.Errorf("the file is larger than %d bytes", w.opts.MaxSize)
	if opened.Size() > w.opts.MaxSize {
		return Message{}, nil, tooLarge
	}
	// The limit also holds if the file grows while it is read.
	data, err := io.ReadAll(io.LimitReader(f, w.opts.MaxSize+1))
	if err != nil {
		return Message{}, nil, fmt.Errorf("read: %w", err)
	}
	if int64(len(data)) > w.opts.MaxSize {
		return Message{}, nil, tooLarge
	}
	msg, err := Parse(data)
	return msg, opened, err
}

// resolve turns a message's files into the paths to attach.
func (w *Watcher) resolve(files []string) ([]string, error) {
	if len(files) == 0 {
		return nil, nil
	}
	if w.opts.ResolveFile == nil {
		return nil, errors.New("files are not accepted: attachments are turned off")
	}
	out := make([]string, len(files))
	for i, p := range files {
		abs, err := w.opts.ResolveFile(p)
		if err != nil {
			return nil, fmt.Errorf("files[%d]: %w", i, err)
		}
		out[i] = abs
	}
	return out, nil
}

// postFailed records a failed post and schedules the next try, or gives the
// file up once it has failed for GiveUpAfter.
func (w *Watcher) postFailed(name string, info fs.FileInfo, channel string, err error) {
	now := w.opts.Clock.Now()
	r := w.retries[name]
	if r == nil {
		r = &retry{first: now}
		w.retries[name] = r
	}
	r.channel = channel
	r.failures++
	if failing := now.Sub(r.first); failing >= w.opts.GiveUpAfter {
		w.refuse(name, info, fmt.Sprintf("posting failed for %s (%d tries), last error: %v", failing.Round(time.Second), r.failures, err))
		return
	}
	wait := backoff(r.failures)
	r.next = now.Add(wait)
	w.log.Warn().Err(err).Str("file", name).Str("channel", channel).
		Int("failures", r.failures).Int64("retry_in_ms", wait.Milliseconds()).Msg("posting outbound message failed; will retry")
}

// backoff is the wait after the nth consecutive failure (n >= 1).
func backoff(n int) time.Duration {
	d := minBackoff
	for i := 1; i < n && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, maxBackoff)
}

// refuse moves a file to failed/ and writes why next to it. The reason is
// logged, never the file's content.
func (w *Watcher) refuse(name string, info fs.FileInfo, reason string) {
	delete(w.retries, name)
	reason = oneLine(reason)
	log := w.log.With().Str("file", name).Str("reason", reason).Logger()
	w.receipt(name, info, ReceiptRefused+reason)
	moved, err := w.moveToFailed(name, reason)
	if err != nil {
		w.stuck[name] = stuck{info: info, reason: reason}
		log.Error().Err(err).Msg("refused outbound message; cannot move it to failed/")
		return
	}
	log.Warn().Str("moved_to", moved).Msg("refused outbound message")
}

// finishStuck tries again, quietly, to take a finished file out of
// outbound/.
func (w *Watcher) finishStuck(name string, s stuck) {
	var err error
	if s.reason == "" {
		err = os.Remove(filepath.Join(w.outbound, name))
	} else {
		var moved string
		if moved, err = w.moveToFailed(name, s.reason); err == nil {
			w.log.Warn().Str("file", name).Str("reason", s.reason).Str("moved_to", moved).Msg("refused outbound message")
		}
	}
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		delete(w.stuck, name)
	}
}

// receipt tells the agent what became of its message name (see
// ReceiptsDir), before the file leaves outbound/: once it is gone, the
// receipt is there. Messages of other writers get none.
func (w *Watcher) receipt(name string, info fs.FileInfo, outcome string) {
	if w.receipts == "" || !w.fromAgent(info) {
		return
	}
	if err := writeReceipt(w.receipts, name, outcome, w.opts.Agent.GID); err != nil {
		w.log.Warn().Err(err).Str("file", name).Msg("cannot write the receipt of an outbound message; gateway send will not know what became of it")
	}
}

// writeReceipt writes outcome into dir/name, readable by the group gid,
// through a temporary file renamed into place.
func writeReceipt(dir, name, outcome string, gid uint32) error {
	f, err := os.CreateTemp(dir, ".receipt-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.WriteString(outcome + "\n")
	if err == nil {
		err = f.Chown(-1, int(gid))
	}
	if err == nil {
		err = f.Chmod(0o640)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// pruneReceipts removes the receipts older than ReceiptTTL.
func (w *Watcher) pruneReceipts() {
	if w.receipts == "" {
		return
	}
	entries, err := os.ReadDir(w.receipts)
	if err != nil {
		return
	}
	cutoff := w.opts.Clock.Now().Add(-ReceiptTTL)
	for _, e := range entries {
		if info, err := e.Info(); err == nil && info.ModTime().Before(cutoff) {
			os.Remove(filepath.Join(w.receipts, e.Name()))
		}
	}
}

// moveToFailed renames outbound/name into failed/ under the same name, or
// name-1, name-2… before the extension if that is taken, never replacing a
// file, and writes reason to <new name>.reason.txt. It returns the new
// name.
func (w *Watcher) moveToFailed(name, reason string) (string, error) {
	src := filepath.Join(w.outbound, name)
	ext := filepath.Ext(name)
	stem := strings.TrimSuffix(name, ext)
	for i := 0; i < 1000; i++ {
		moved := name
		if i > 0 {
			moved = fmt.Sprintf("%s-%d%s", stem, i, ext)
		}
		dst := filepath.Join(w.failed, moved)
		if _, err := os.Lstat(dst + ReasonSuffix); !errors.Is(err, fs.ErrNotExist) {
			continue // taken (or unknown): the reason must not replace another
		}
		err := renameNoReplace(src, dst)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		if err := writeReason(dst+ReasonSuffix, reason); err != nil {
			w.log.Error().Err(err).Str("file", moved).Msg("cannot write the reason of a refused message")
		}
		return moved, nil
	}
	return "", fmt.Errorf("no free name for %s in %s", name, w.failed)
}

// renameNoReplace renames src to dst, failing with fs.ErrExist if dst
// exists. File systems without RENAME_NOREPLACE get a check then a rename,
// which is as good while this Watcher is the only writer of failed/.
func renameNoReplace(src, dst string) error {
	err := unix.Renameat2(unix.AT_FDCWD, src, unix.AT_FDCWD, dst, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
		if _, lerr := os.Lstat(dst); lerr == nil {
			err = unix.EEXIST
		} else {
			err = unix.Rename(src, dst)
		}
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: src, New: dst, Err: err}
	}
	return nil
}

// writeReason creates a reason file holding one line; it never replaces
// one.
func writeReason(path, reason string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(reason + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// oneLine folds a reason onto one line: errors from a Poster or a resolver
// may span several.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		return "refused"
	}
	return s
}

// sameFile reports whether two stats are of the same file, unchanged.
func sameFile(a, b fs.FileInfo) bool {
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}
