// Package project resolves the working directories channels may be bound
// to (/project): directories inside PROJECTS_ROOT, and nothing that leads
// out of it, by "..", an absolute path or a symbolic link.
package project

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Refusals, as the user who typed the path should read them. They never
// name a path on the server beyond what the user typed.
var (
	ErrOutside     = errors.New("that path leads outside the projects directory")
	ErrNotFound    = errors.New("there is no such directory in the projects directory")
	ErrNotDir      = errors.New("that is a file, not a directory")
	ErrEmpty       = errors.New("no path given")
	ErrUnreadable  = errors.New("that directory cannot be opened")
	ErrRootMissing = errors.New("the projects directory (PROJECTS_ROOT) does not exist")
)

// Resolve returns the real absolute path of the directory input names:
// relative to root, or absolute inside it. The path is resolved with every
// symbolic link followed, and must be root or lie below it (root's own
// links resolved too). It must exist and be a directory.
func Resolve(root, input string) (string, error) {
	input = strings.TrimSpace(input)
	if input == "" {
		return "", ErrEmpty
	}
	if strings.ContainsRune(input, 0) {
		return "", ErrNotFound
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", ErrRootMissing
	}
	realRoot, err = filepath.Abs(realRoot)
	if err != nil {
		return "", ErrRootMissing
	}
	path := input
	if !filepath.IsAbs(path) {
		path = filepath.Join(root, path)
	}
	// A lexical check first, so "../x" is refused whether or not it exists.
	if !within(filepath.Clean(root), filepath.Clean(path)) && !within(realRoot, filepath.Clean(path)) {
		return "", ErrOutside
	}
	real, err := filepath.EvalSymlinks(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", ErrNotFound
	case errors.Is(err, os.ErrPermission):
		return "", ErrUnreadable
	case err != nil:
		return "", ErrNotFound
	}
	if real, err = filepath.Abs(real); err != nil {
		return "", ErrNotFound
	}
	if !within(realRoot, real) {
		return "", ErrOutside
	}
	st, err := os.Stat(real)
	switch {
	case err != nil:
		return "", ErrUnreadable
	case !st.IsDir():
		return "", ErrNotDir
	}
	return real, nil
}

// within reports whether path is dir or below it; both must be clean.
func within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	if err != nil {
		return false
	}
	return rel == "." || (rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)))
}

// Show is how a project is named to users: its path relative to root
// ("." for root itself), or the base name when it is not below root (root
// changed since it was set).
func Show(root, dir string) string {
	if root != "" {
		if realRoot, err := filepath.EvalSymlinks(root); err == nil && within(filepath.Clean(realRoot), filepath.Clean(dir)) {
			rel, _ := filepath.Rel(realRoot, dir)
			return rel
		}
	}
	return filepath.Base(dir)
}

// Check reports, for an operator, whether root can serve as PROJECTS_ROOT.
func Check(root string) error {
	st, err := os.Stat(root)
	if err != nil {
		return fmt.Errorf("PROJECTS_ROOT: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("PROJECTS_ROOT is not a directory")
	}
	return nil
}
