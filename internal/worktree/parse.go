package worktree

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// FileStat is what a diff did to one file.
type FileStat struct {
	// Path is the file's path in the repository; OldPath is set when the
	// file was renamed or copied from there.
	Path    string
	OldPath string `json:",omitempty"`
	// Added and Deleted count lines; both are zero for a binary file.
	Added, Deleted int
	Binary         bool
}

// ErrMalformed is the error of a parser given output git does not write.
var ErrMalformed = errors.New("malformed git output")

// ParseNumstat reads `git diff-tree -r -z --numstat` output: per file
// "added<TAB>deleted<TAB>path<NUL>", or for a rename or copy
// "added<TAB>deleted<TAB><NUL>old<NUL>new<NUL>"; a binary file counts as
// "-<TAB>-". Paths are bytes as git wrote them (no quoting with -z).
func ParseNumstat(out []byte) ([]FileStat, error) {
	var files []FileStat
	rest := out
	next := func() ([]byte, bool) {
		i := bytes.IndexByte(rest, 0)
		if i < 0 {
			return nil, false
		}
		field := rest[:i]
		rest = rest[i+1:]
		return field, true
	}
	for len(rest) > 0 {
		head, ok := next()
		if !ok {
			return nil, fmt.Errorf("numstat: unterminated entry: %w", ErrMalformed)
		}
		added, tail, ok1 := bytes.Cut(head, []byte{'\t'})
		deleted, path, ok2 := bytes.Cut(tail, []byte{'\t'})
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("numstat: entry without counts: %w", ErrMalformed)
		}
		var f FileStat
		switch {
		case string(added) == "-" && string(deleted) == "-":
			f.Binary = true
		default:
			a, err1 := count(added)
			d, err2 := count(deleted)
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("numstat: counts %q %q: %w", added, deleted, ErrMalformed)
			}
			f.Added, f.Deleted = a, d
		}
		if len(path) == 0 {
			// A rename or copy: the two paths follow.
			old, ok1 := next()
			cur, ok2 := next()
			if !ok1 || !ok2 || len(old) == 0 || len(cur) == 0 {
				return nil, fmt.Errorf("numstat: rename without its paths: %w", ErrMalformed)
			}
			f.OldPath, f.Path = string(old), string(cur)
		} else {
			f.Path = string(path)
		}
		files = append(files, f)
	}
	return files, nil
}

func count(b []byte) (int, error) {
	if len(b) == 0 || len(b) > 10 {
		return 0, ErrMalformed
	}
	n, err := strconv.Atoi(string(b))
	if err != nil || n < 0 || b[0] == '+' || b[0] == '-' {
		return 0, ErrMalformed
	}
	return n, nil
}

// nulFields splits NUL-terminated fields (git's -z lists), dropping
// empty ones.
func nulFields(out []byte) []string {
	var fields []string
	for _, f := range bytes.Split(out, []byte{0}) {
		if len(f) > 0 {
			fields = append(fields, string(f))
		}
	}
	return fields
}

// parseMergeTree reads `git merge-tree --write-tree --name-only
// --no-messages -z`: the tree's id, then the conflicted paths, each
// NUL-terminated.
func parseMergeTree(out []byte) (tree string, conflicts []string, err error) {
	head, rest, ok := bytes.Cut(out, []byte{0})
	if !ok || !isObjectID(string(head)) {
		return "", nil, fmt.Errorf("merge-tree: no tree id: %w", ErrMalformed)
	}
	return string(head), nulFields(rest), nil
}

// parseStatus reads `git status --porcelain=v1 -z`: per entry "XY path",
// and for a rename or copy (X or Y is R or C) the original path as a
// field of its own. It returns every path named, originals included.
func parseStatus(out []byte) ([]string, error) {
	var paths []string
	fields := bytes.Split(out, []byte{0})
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		if len(f) == 0 {
			if i == len(fields)-1 {
				break
			}
			return nil, fmt.Errorf("status: empty entry: %w", ErrMalformed)
		}
		if len(f) < 4 || f[2] != ' ' {
			return nil, fmt.Errorf("status: entry %q: %w", f, ErrMalformed)
		}
		paths = append(paths, string(f[3:]))
		if f[0] == 'R' || f[0] == 'C' || f[1] == 'R' || f[1] == 'C' {
			i++
			if i >= len(fields) || len(fields[i]) == 0 {
				return nil, fmt.Errorf("status: rename without its origin: %w", ErrMalformed)
			}
			paths = append(paths, string(fields[i]))
		}
	}
	return paths, nil
}

// listed is one worktree of `git worktree list --porcelain -z`.
type listed struct {
	path   string
	head   string
	branch string // refs/heads/…; empty when detached
	bare   bool
}

// parseWorktreeList reads `git worktree list --porcelain -z`: attributes
// ("worktree <path>", "HEAD <id>", "branch <ref>", "detached", "bare",
// "locked [reason]", "prunable [reason]") each NUL-terminated, a worktree
// ended by an empty field.
func parseWorktreeList(out []byte) ([]listed, error) {
	var list []listed
	var cur *listed
	for _, f := range bytes.Split(out, []byte{0}) {
		if len(f) == 0 {
			cur = nil
			continue
		}
		key, value, _ := strings.Cut(string(f), " ")
		if key == "worktree" {
			if value == "" {
				return nil, fmt.Errorf("worktree list: worktree without a path: %w", ErrMalformed)
			}
			list = append(list, listed{path: value})
			cur = &list[len(list)-1]
			continue
		}
		if cur == nil {
			return nil, fmt.Errorf("worktree list: %q outside a worktree: %w", key, ErrMalformed)
		}
		switch key {
		case "HEAD":
			cur.head = value
		case "branch":
			cur.branch = value
		case "bare":
			cur.bare = true
		}
	}
	return list, nil
}

// isObjectID reports whether s is a full object id (SHA-1 or SHA-256).
func isObjectID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}

// firstLine is out's first line, trimmed.
func firstLine(out []byte) string {
	line, _, _ := bytes.Cut(out, []byte{'\n'})
	return strings.TrimSpace(string(line))
}
