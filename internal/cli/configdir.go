package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// accessFunc asks whether this process may use path as mode says
// (unix.R_OK, W_OK, X_OK); unix.Access by default. Tests running as root,
// whom the kernel lets through, answer for another user with it.
type accessFunc func(path string, mode uint32) error

// errConfigDir is a CONFIG_DIR the gateway cannot use: a file, a folder
// this user may not read and write, or one that cannot be created.
var errConfigDir = errors.New("unusable CONFIG_DIR")

// configDirState checks that dir can be the gateway's CONFIG_DIR, before
// anything reads from it: one error that names the cause (wrapping
// errConfigDir), instead of a missing file per persona section and a
// failed lock. exists reports whether the folder is already there; a
// missing folder is fine when it can be created.
func configDirState(dir string, access accessFunc) (exists bool, err error) {
	if access == nil {
		access = unix.Access
	}
	problem := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{errConfigDir}, args...)...)
	}
	fi, err := os.Stat(dir)
	switch {
	case err == nil && !fi.IsDir():
		return true, problem("%s is a file, not a folder: set CONFIG_DIR to a folder (gateway init DIR makes one)", dir)
	case err == nil:
		if err := access(dir, unix.R_OK|unix.W_OK|unix.X_OK); err != nil {
			return true, problem("%s cannot be read and written by this user (uid %d): %v; run the gateway as the folder's owner or give it to this user", dir, os.Geteuid(), err)
		}
		return true, nil
	case errors.Is(err, fs.ErrPermission):
		return false, problem("%s cannot be reached: a folder above it does not let this user (uid %d) in", dir, os.Geteuid())
	}
	// Missing (or under a file): whether it can be created depends on the
	// nearest thing above it that exists.
	for parent := filepath.Dir(dir); ; parent = filepath.Dir(parent) {
		pi, err := os.Stat(parent)
		switch {
		case err == nil && !pi.IsDir():
			return false, problem("%s cannot be created: %s is a file, not a folder", dir, parent)
		case err == nil:
			if err := access(parent, unix.W_OK|unix.X_OK); err != nil {
				return false, problem("%s cannot be created: this user (uid %d) may not write in %s (%v); create it as its owner, or pick another folder", dir, os.Geteuid(), parent, err)
			}
			return false, nil
		case errors.Is(err, fs.ErrPermission):
			return false, problem("%s cannot be created: a folder above it does not let this user (uid %d) in", dir, os.Geteuid())
		}
		if parent == filepath.Dir(parent) {
			return false, nil
		}
	}
}
