package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/spf13/cobra"

	"github.com/agentgateway/gateway/internal/atomicfile"
	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/dirlock"
	"github.com/agentgateway/gateway/internal/discord"
	"github.com/agentgateway/gateway/internal/gateway"
	"github.com/agentgateway/gateway/internal/ipc"
)

// Exit codes of `gateway send` besides exitOK (posted), exitError (moved
// to failed/) and exitConfig (usage).
const (
	// exitTimeout: the message was still waiting in outbound/ when
	// --timeout ran out. It stays there and may still be posted.
	exitTimeout = 3
	// exitUnknown: the gateway took the message out of outbound/, but this
	// user may not look into failed/ and found no receipt it may read, so
	// whether it was posted cannot be told.
	exitUnknown = 4
)

// exitCodeError ends a command with a code of its own.
type exitCodeError struct {
	code int
	err  error
}

func (e *exitCodeError) Error() string { return e.err.Error() }
func (e *exitCodeError) Unwrap() error { return e.err }

// notReady is a send that cannot work yet: no gateway runs to post it, or
// there is no IPC folder. It exits with exitConfig, as a usage error does.
func notReady(format string, args ...any) error {
	return &configError{fmt.Errorf(format, args...)}
}

// Names a send writes into outbound/: the message is send-<id>.json and
// its attachments are copied under .send-<id>/ (a dot name the watcher
// never reads as a message).
const (
	sendPrefix      = "send-"
	sendFilesPrefix = ".send-"
)

// sendPollEvery is how often send looks whether its message left
// outbound/. The watcher scans every ipc.DefaultInterval.
const sendPollEvery = 200 * time.Millisecond

// sendLeftoverAge is how old a folder of copied attachments whose message
// is gone must be before a later send removes it: younger, it may belong
// to a send still writing its message.
const sendLeftoverAge = time.Hour

type sendOptions struct {
	io      streams
	envFile string
	ipcDir  string
	channel string
	files   []string
	args    []string
	noWait  bool
	timeout time.Duration
	// uploadLimit is the largest file that may be attached.
	uploadLimit int64
	clock       clockwork.Clock
}

func newSendCmd(io streams) *cobra.Command {
	opts := sendOptions{io: io, uploadLimit: discord.DefaultUploadLimit, clock: clockwork.NewRealClock()}
	cmd := &cobra.Command{
		Use:   "send --channel ID [--file PATH]... [TEXT... | -]",
		Short: "Post a message through the running gateway's IPC folder",
		Long: `send posts a message to a Discord channel through the running gateway:
it writes the message into CONFIG_DIR/ipc/outbound (atomically), copies
the files named with --file next to it, and waits until the gateway has
posted it or refused it. TEXT is the arguments joined by spaces; "-"
reads it from standard input. The channel must be one the gateway may post
in (ALLOWED_CHANNEL_IDS, ALLOWED_GUILD_IDS; the agent only where it has a
conversation, or OUTPUT_CHANNEL_ID).

Exit codes:
  0  posted (with --no-wait: queued)
  1  refused by the gateway (the reason is printed) or another error
  2  usage: a bad --channel id, nothing to send, a file too large, an
     unknown flag; or no gateway running, no IPC folder
  3  still not posted when --timeout ran out (the message stays queued)
  4  taken by the gateway, but this user may not read ipc/failed, so
     whether it was posted cannot be told (the agent under AGENT_USER)`,
		Example: `  $ gateway send --channel 123456789012345678 "Backup finished"
  $ df -h | gateway send --channel 123456789012345678 -
  $ gateway send --channel 123456789012345678 --file report.pdf "Weekly report"
  $ gateway send --channel 123456789012345678 --no-wait "Deploy started"`,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.envFile, _ = cmd.Flags().GetString("env-file")
			opts.args = args
			ctx, stop := untilInterrupt(cmd.Context(), io.interrupts)
			defer stop()
			return runSend(ctx, opts)
		},
	}
	cmd.Flags().StringVar(&opts.channel, "channel", "", "the Discord channel id to post in (required)")
	cmd.Flags().StringArrayVar(&opts.files, "file", nil, "attach this file (repeatable, at most 10)")
	cmd.Flags().BoolVar(&opts.noWait, "no-wait", false, "return once the message is queued, without waiting for the post")
	cmd.Flags().DurationVar(&opts.timeout, "timeout", 2*time.Minute, "how long to wait for the post")
	cmd.Flags().StringVar(&opts.ipcDir, "ipc-dir", "", "the gateway's IPC folder (default: CONFIG_DIR/ipc)")
	return cmd
}

func runSend(ctx context.Context, opts sendOptions) error {
	msg, err := sendMessage(opts)
	if err != nil {
		return err
	}
	dir, err := sendIPCDir(opts)
	if err != nil {
		return err
	}
	outbound := filepath.Join(dir, ipc.OutboundDir)
	if err := gatewayRunning(filepath.Dir(dir)); err != nil {
		return err
	}
	if fi, err := os.Stat(outbound); err != nil || !fi.IsDir() {
		return notReady("there is no IPC folder at %s: start `gateway run` once to create it (or name it with --ipc-dir)", outbound)
	}
	sweepLeftovers(outbound, opts.clock.Now())

	name, err := queueMessage(outbound, msg, opts.files, opts.clock.Now())
	if err != nil {
		return err
	}
	if opts.noWait {
		fmt.Fprintln(opts.io.out, "queued", name)
		return nil
	}
	err = awaitOutcome(ctx, opts.clock, dir, name, opts.timeout)
	var coded *exitCodeError
	if !errors.As(err, &coded) || coded.code != exitTimeout {
		// Posted or refused: the copies are no longer needed.
		os.RemoveAll(filepath.Join(outbound, sendFilesPrefix+sendID(name)))
	}
	return err
}

// channelIDHint says what --channel takes and where to find it.
const channelIDHint = "a number such as 123456789012345678; in Discord: turn on Developer Mode, right-click the channel, Copy Channel ID"

// sendMessage checks the command line and builds the message without the
// files (queueMessage adds them once copied).
func sendMessage(opts sendOptions) (ipc.Message, error) {
	if opts.channel == "" {
		return ipc.Message{}, usagef("--channel is required: the id of the Discord channel to post in (%s)", channelIDHint)
	}
	if !opts.noWait && opts.timeout <= 0 {
		return ipc.Message{}, usagef("--timeout %s: give a time to wait longer than 0, such as 2m", opts.timeout)
	}
	if !ipc.ValidChannelID(opts.channel) {
		return ipc.Message{}, usagef("--channel %q is not a Discord channel id (%s)", opts.channel, channelIDHint)
	}
	text, err := sendText(opts)
	if err != nil {
		return ipc.Message{}, err
	}
	if len(text) > ipc.MaxText {
		return ipc.Message{}, usagef("the text is longer than %d bytes", ipc.MaxText)
	}
	if strings.TrimSpace(text) == "" && len(opts.files) == 0 {
		return ipc.Message{}, usagef(`nothing to send: give the text as arguments, "-" to read it from standard input, or --file`)
	}
	if len(opts.files) > ipc.MaxFiles {
		return ipc.Message{}, usagef("at most %d files may be attached to one message, got %d", ipc.MaxFiles, len(opts.files))
	}
	for _, f := range opts.files {
		if err := checkAttachment(f, opts.uploadLimit); err != nil {
			return ipc.Message{}, err
		}
	}
	msg := ipc.Message{ChannelID: opts.channel, Text: text}
	// Parse is what the watcher applies: the same checks, the same words.
	probe := msg
	for range opts.files {
		probe.Files = append(probe.Files, "f")
	}
	data, err := json.Marshal(probe)
	if err != nil {
		return ipc.Message{}, fmt.Errorf("encode the message: %w", err)
	}
	if _, err := ipc.Parse(data); err != nil {
		return ipc.Message{}, usagef("%w", err)
	}
	return msg, nil
}

// sendText is the message text: the arguments joined by spaces, or
// standard input for "-".
func sendText(opts sendOptions) (string, error) {
	if len(opts.args) == 1 && opts.args[0] == "-" {
		data, err := io.ReadAll(io.LimitReader(opts.io.in, ipc.MaxText+1))
		if err != nil {
			return "", fmt.Errorf("read the text from standard input: %w", err)
		}
		if len(data) > ipc.MaxText {
			return "", usagef("the text is longer than %d bytes", ipc.MaxText)
		}
		return strings.TrimRight(string(data), "\n"), nil
	}
	for _, a := range opts.args {
		if a == "-" {
			return "", usagef(`"-" (read the text from standard input) must be the only argument`)
		}
	}
	return strings.Join(opts.args, " "), nil
}

// checkAttachment refuses a file that cannot be posted: missing, not a
// regular file, or over Discord's upload limit.
func checkAttachment(path string, limit int64) error {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return usagef("cannot attach %s: %w", path, err)
	case !fi.Mode().IsRegular():
		return usagef("cannot attach %s: not a regular file", path)
	case fi.Size() > limit:
		return usagef("cannot attach %s: %d bytes, larger than Discord's upload limit (%d MB)", path, fi.Size(), limit>>20)
	}
	return nil
}

// sendIPCDir is --ipc-dir, or else CONFIG_DIR/ipc from the environment
// and the .env file. When neither names CONFIG_DIR, a working directory
// with an IPC folder is taken for CONFIG_DIR: the agent runs there (its
// CLI gets no CONFIG_DIR variable and cannot read the .env).
func sendIPCDir(opts sendOptions) (string, error) {
	if opts.ipcDir != "" {
		return filepath.Abs(opts.ipcDir)
	}
	cfg, err := loadConfig(opts.envFile, forDoctor)
	if cfg == nil {
		return "", err
	}
	if cfg.Source(config.EnvConfigDir) == config.SourceDefault {
		if fi, err := os.Stat(filepath.Join(gateway.IPCDir, ipc.OutboundDir)); err == nil && fi.IsDir() {
			return filepath.Abs(gateway.IPCDir)
		}
	}
	return filepath.Join(cfg.ConfigDir, gateway.IPCDir), nil
}

// gatewayRunning refuses when no `gateway run` holds configDir: nothing
// would post the message. The lock file belongs to the gateway's user; a
// user that may not open it (the agent) cannot tell, and goes on.
func gatewayRunning(configDir string) error {
	f, err := os.Open(filepath.Join(configDir, dirlock.FileName))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return notReady("the gateway is not running: no `gateway run` has used %s", configDir)
	case err != nil:
		return nil
	}
	defer f.Close()
	// A shared lock is granted only while no gateway holds its exclusive
	// one; it is given back at once.
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err == nil {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return notReady("the gateway is not running: start `gateway run` (messages in the IPC folder are posted only while it runs)")
	}
	line := make([]byte, 256)
	n, _ := f.ReadAt(line, 0)
	if strings.Contains(string(line[:n]), "gateway chat") {
		return notReady("CONFIG_DIR is held by `gateway chat`, which does not post from the IPC folder: only `gateway run` does")
	}
	return nil
}

// queueMessage copies the files into outbound/.send-<id>/ and then writes
// outbound/send-<id>.json atomically (a dot temp name renamed into place,
// which the watcher never reads half-written). It returns the message's
// file name. The id starts with the time, so that the watcher, which
// takes files in name order, posts a script's messages in order.
func queueMessage(outbound string, msg ipc.Message, files []string, now time.Time) (string, error) {
	id, err := newSendID(now)
	if err != nil {
		return "", err
	}
	if len(files) > 0 {
		copies := filepath.Join(outbound, sendFilesPrefix+id)
		if err := os.Mkdir(copies, 0o755); err != nil {
			return "", fmt.Errorf("copy the files into the IPC folder: %w", err)
		}
		for i, src := range files {
			rel, err := copyAttachment(copies, i, src)
			if err != nil {
				os.RemoveAll(copies)
				return "", err
			}
			// Relative paths in a message are relative to the IPC folder.
			msg.Files = append(msg.Files, filepath.Join(ipc.OutboundDir, sendFilesPrefix+id, rel))
		}
	}
	data, err := json.Marshal(msg)
	if err != nil {
		return "", fmt.Errorf("encode the message: %w", err)
	}
	name := sendPrefix + id + ".json"
	// 0644: outbound/ itself is open only to the gateway and the agent's
	// group, and the gateway reads attachments as the agent would.
	if err := atomicfile.Write(filepath.Join(outbound, name), data, 0o644); err != nil {
		os.RemoveAll(filepath.Join(outbound, sendFilesPrefix+id))
		return "", fmt.Errorf("write the message into the IPC folder: %w", err)
	}
	return name, nil
}

// copyAttachment copies src to copies/<i>/<its name> and returns that
// path relative to copies. Each file has a folder of its own so that two
// files of the same name keep it.
func copyAttachment(copies string, i int, src string) (string, error) {
	rel := filepath.Join(fmt.Sprint(i), filepath.Base(src))
	if err := os.Mkdir(filepath.Join(copies, fmt.Sprint(i)), 0o755); err != nil {
		return "", fmt.Errorf("copy %s into the IPC folder: %w", src, err)
	}
	in, err := os.Open(src)
	if err != nil {
		return "", fmt.Errorf("attach %s: %w", src, err)
	}
	defer in.Close()
	out, err := os.OpenFile(filepath.Join(copies, rel), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", fmt.Errorf("copy %s into the IPC folder: %w", src, err)
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("copy %s into the IPC folder: %w", src, err)
	}
	return rel, nil
}

// newSendID is a message id: the time to the nanosecond, then random
// hex, so that ids sort by time and never collide.
func newSendID(now time.Time) (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("make a message id: %w", err)
	}
	return now.UTC().Format("20060102T150405.000000000Z") + "-" + hex.EncodeToString(b[:]), nil
}

// sendID is the id in a message file's name.
func sendID(name string) string {
	return strings.TrimSuffix(strings.TrimPrefix(name, sendPrefix), ".json")
}

// sweepLeftovers removes the copied attachments of earlier sends whose
// message has left outbound/ (a send with --no-wait, or one interrupted).
// outbound/ is sticky: a user removes only the folders it made.
func sweepLeftovers(outbound string, now time.Time) {
	entries, err := os.ReadDir(outbound)
	if err != nil {
		return
	}
	for _, e := range entries {
		id, ok := strings.CutPrefix(e.Name(), sendFilesPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		if _, err := os.Lstat(filepath.Join(outbound, sendPrefix+id+".json")); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if fi, err := e.Info(); err != nil || now.Sub(fi.ModTime()) < sendLeftoverAge {
			continue
		}
		os.RemoveAll(filepath.Join(outbound, e.Name()))
	}
}

// awaitOutcome waits until the message file name leaves outbound/: it
// was posted (nil) or moved to failed/ (an error with the reason). The
// watcher moves a refused file with one rename, so a file gone from
// outbound/ and absent from failed/ was posted.
func awaitOutcome(ctx context.Context, clock clockwork.Clock, dir, name string, timeout time.Duration) error {
	outbound := filepath.Join(dir, ipc.OutboundDir, name)
	deadline := clock.After(timeout)
	tick := clock.NewTicker(sendPollEvery)
	defer tick.Stop()
	for {
		_, err := os.Lstat(outbound)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return outcome(ctx, clock, dir, name)
		case err != nil:
			return fmt.Errorf("watch the message in the IPC folder: %w", err)
		}
		select {
		case <-ctx.Done():
			return &exitCodeError{exitTimeout, fmt.Errorf("stopped waiting: %s is still queued and may yet be posted", name)}
		case <-deadline:
			return &exitCodeError{exitTimeout, fmt.Errorf("not posted within %s (is the gateway connected to Discord?); %s stays queued and may yet be posted", timeout, name)}
		case <-tick.Chan():
		}
	}
}

// outcome says what became of a message that left outbound/ of the IPC
// folder dir: a file in failed/ was refused. A user who may not look into
// failed/ (the agent under AGENT_USER) reads the receipt the gateway left
// for it instead (ipc.ReceiptsDir).
func outcome(ctx context.Context, clock clockwork.Clock, dir, name string) error {
	failed := filepath.Join(dir, ipc.FailedDir)
	_, err := os.Lstat(filepath.Join(failed, name))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case errors.Is(err, fs.ErrPermission):
		return receiptOutcome(filepath.Join(dir, ipc.ReceiptsDir, name))
	case err != nil:
		return fmt.Errorf("look for the message in ipc/failed: %w", err)
	}
	return &exitCodeError{exitError, fmt.Errorf("the gateway refused the message: %s", failedReason(ctx, clock, filepath.Join(failed, name+ipc.ReasonSuffix)))}
}

// receiptOutcome reads the gateway's receipt of a message.
func receiptOutcome(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return &exitCodeError{exitUnknown, errors.New("the gateway took the message, but left no receipt this user may read to tell whether it was posted")}
	}
	text := strings.TrimSpace(string(data))
	if reason, refused := strings.CutPrefix(text, ipc.ReceiptRefused); refused {
		return &exitCodeError{exitError, fmt.Errorf("the gateway refused the message: %s", reason)}
	}
	if text != ipc.ReceiptPosted {
		return &exitCodeError{exitUnknown, fmt.Errorf("the gateway's receipt says %q", text)}
	}
	return nil
}

// failedReason reads the reason the watcher writes just after moving a
// file to failed/, waiting a moment for it.
func failedReason(ctx context.Context, clock clockwork.Clock, path string) string {
	give := clock.After(2 * time.Second)
	tick := clock.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if data, err := os.ReadFile(path); err == nil && len(data) > 0 {
			return strings.TrimSpace(string(data))
		}
		select {
		case <-ctx.Done():
			return "no reason given"
		case <-give:
			return "no reason given"
		case <-tick.Chan():
		}
	}
}
