// Package files moves files between Discord and the agent's working
// directory: the files attached to a prompt come in (Fetcher), the files
// the agent leaves in its outbox go out with the reply (Collect).
//
// Everything lives under <working dir>/.gateway/: attachments/<message>/
// for what came in, outbox/ for what the agent wants sent, sent/<event>/ for
// what the gateway took from the outbox. Names that come from outside (an
// attachment's filename) pass through SafeName, so no name can leave its
// folder. The agent may change anything below its working directory while
// the gateway works there, so every path below it is opened one component
// at a time relative to the folder before, never through a link, and
// files are read as the agent could read them (Guard). Everything here is
// safe for concurrent use.
package files

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Folders inside a working directory.
const (
	GatewayDir     = ".gateway"
	AttachmentsDir = GatewayDir + "/attachments"
	OutboxDir      = GatewayDir + "/outbox"
	SentDir        = GatewayDir + "/sent"
)

// maxNameBytes bounds a saved file's name; ext4 allows 255 bytes, and a
// suffix (-2) must still fit.
const maxNameBytes = 120

// SafeName turns a filename from outside into one that is a single, plain
// path element: no separators, no "." or "..", no control characters, no
// leading dot (a hidden file, or one the IPC watcher would skip), at most
// maxNameBytes bytes with its extension kept. An empty result becomes
// "file". SafeName is pure and idempotent.
func SafeName(name string) string {
	name = strings.ToValidUTF8(name, "_")
	var b strings.Builder
	for _, r := range name {
		switch {
		case r == '/' || r == '\\' || r == ':' || r == 0:
			b.WriteByte('_')
		case unicode.IsSpace(r):
			b.WriteByte(' ')
		case unicode.IsControl(r) || r == utf8.RuneError || unicode.Is(unicode.Bidi_Control, r):
			// Control and direction-override characters could hide what
			// a name really is when it is shown.
		default:
			b.WriteRune(r)
		}
	}
	s := strings.Trim(b.String(), " .")
	s = strings.TrimLeft(s, ".")
	if len(s) > maxNameBytes {
		ext := filepath.Ext(s)
		if len(ext) > 16 || !utf8.ValidString(ext) {
			ext = ""
		}
		stem := s[:len(s)-len(ext)]
		cut := maxNameBytes - len(ext)
		for cut > 0 && !utf8.RuneStart(stem[cut]) {
			cut--
		}
		s = strings.TrimRight(stem[:cut], " .") + ext
	}
	if s == "" || s == "." || s == ".." {
		return "file"
	}
	return s
}

// numbered returns name with n (n >= 2) before its extension:
// "log.txt" → "log-2.txt".
func numbered(name string, n int) string {
	ext := filepath.Ext(name)
	if ext == name {
		ext = ""
	}
	return strings.TrimSuffix(name, ext) + "-" + strconv.Itoa(n) + ext
}

// WithoutPath drops the path from a file error: log lines and messages
// name files, not where they are on the server.
func WithoutPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}
