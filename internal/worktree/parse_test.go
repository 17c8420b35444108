package worktree

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var numstatCases = []struct {
	name string
	in   string
	want []FileStat
	err  bool
}{
	{"empty", "", nil, false},
	{"one file", "3\t1\tf.txt\x00", []FileStat{{Path: "f.txt", Added: 3, Deleted: 1}}, false},
	{"binary", "-\t-\timg.png\x00", []FileStat{{Path: "img.png", Binary: true}}, false},
	{"rename", "0\t0\t\x00old name.txt\x00new\tname.txt\x00", []FileStat{{OldPath: "old name.txt", Path: "new\tname.txt"}}, false},
	{"a newline and unicode in a name", "1\t0\ta\nb/é.md\x00", []FileStat{{Path: "a\nb/é.md", Added: 1}}, false},
	{"several", "1\t2\ta\x00-\t-\tb\x005\t0\t\x00c\x00d\x00", []FileStat{
		{Path: "a", Added: 1, Deleted: 2}, {Path: "b", Binary: true}, {OldPath: "c", Path: "d", Added: 5}}, false},
	{"unterminated", "1\t2\ta", nil, true},
	{"no counts", "a\x00", nil, true},
	{"bad count", "x\t1\ta\x00", nil, true},
	{"negative", "-1\t1\ta\x00", nil, true},
	{"half binary", "-\t1\ta\x00", nil, true},
	{"rename without paths", "1\t1\t\x00old\x00", nil, true},
}

func TestParseNumstat(t *testing.T) {
	for _, tc := range numstatCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseNumstat([]byte(tc.in))
			if tc.err {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("ParseNumstat = %+v, %v; want ErrMalformed", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzParseNumstat: whatever git writes, the parser returns entries or
// ErrMalformed, never panics; an entry has a path, no negative count, no
// lines counted for a binary file; and printing what it parsed back in
// git's format parses to the same entries.
func FuzzParseNumstat(f *testing.F) {
	for _, tc := range numstatCases {
		f.Add([]byte(tc.in))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		files, err := ParseNumstat(in)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		var again bytes.Buffer
		for _, f := range files {
			if f.Path == "" || f.Added < 0 || f.Deleted < 0 || (f.Binary && f.Added+f.Deleted > 0) {
				t.Fatalf("bad entry %+v from %q", f, in)
			}
			if strings.ContainsRune(f.Path, 0) || strings.ContainsRune(f.OldPath, 0) {
				t.Fatalf("a NUL in a path: %+v", f)
			}
			counts := "-\t-"
			if !f.Binary {
				counts = strconv.Itoa(f.Added) + "\t" + strconv.Itoa(f.Deleted)
			}
			if f.OldPath != "" {
				again.WriteString(counts + "\t\x00" + f.OldPath + "\x00" + f.Path + "\x00")
			} else {
				again.WriteString(counts + "\t" + f.Path + "\x00")
			}
		}
		round, err := ParseNumstat(again.Bytes())
		if err != nil {
			t.Fatalf("its own output %q: %v", again.Bytes(), err)
		}
		if diff := cmp.Diff(files, round); diff != "" {
			t.Fatalf("round trip (-first +second):\n%s", diff)
		}
	})
}

var statusCases = []struct {
	name string
	in   string
	want []string
	err  bool
}{
	{"clean", "", nil, false},
	{"changes", " M f.txt\x00?? new dir/a.txt\x00D  gone\x00", []string{"f.txt", "new dir/a.txt", "gone"}, false},
	{"rename", "R  new\x00old\x00 M x\x00", []string{"new", "old", "x"}, false},
	{"rename without origin", "R  new\x00", nil, true},
	{"short", "M\x00", nil, true},
	{"empty entry", "\x00 M x\x00", nil, true},
}

func TestParseStatus(t *testing.T) {
	for _, tc := range statusCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStatus([]byte(tc.in))
			if tc.err != (err != nil) {
				t.Fatalf("parseStatus = %v, %v", got, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzParseStatus(f *testing.F) {
	for _, tc := range statusCases {
		f.Add([]byte(tc.in))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		paths, err := parseStatus(in)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v is not ErrMalformed", err)
			}
			return
		}
		for _, p := range paths {
			if p == "" || strings.ContainsRune(p, 0) {
				t.Fatalf("path %q from %q", p, in)
			}
		}
		if len(paths) > bytes.Count(in, []byte{0})+1 {
			t.Fatalf("%d paths from %d fields", len(paths), bytes.Count(in, []byte{0})+1)
		}
	})
}

const sha = "0123456789abcdef0123456789abcdef01234567"

var mergeTreeCases = []struct {
	name      string
	in        string
	tree      string
	conflicts []string
	err       bool
}{
	{"clean", sha + "\x00", sha, nil, false},
	{"conflicts", sha + "\x00f.txt\x00sp ace\x00", sha, []string{"f.txt", "sp ace"}, false},
	{"no tree", "f.txt\x00", "", nil, true},
	{"nothing", "", "", nil, true},
}

func TestParseMergeTree(t *testing.T) {
	for _, tc := range mergeTreeCases {
		t.Run(tc.name, func(t *testing.T) {
			tree, conflicts, err := parseMergeTree([]byte(tc.in))
			if tc.err != (err != nil) || tree != tc.tree {
				t.Fatalf("parseMergeTree = %q, %v, %v", tree, conflicts, err)
			}
			if diff := cmp.Diff(tc.conflicts, conflicts); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzParseMergeTree(f *testing.F) {
	for _, tc := range mergeTreeCases {
		f.Add([]byte(tc.in))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		tree, conflicts, err := parseMergeTree(in)
		if err != nil {
			return
		}
		if !isObjectID(tree) {
			t.Fatalf("tree %q", tree)
		}
		for _, c := range conflicts {
			if c == "" || strings.ContainsRune(c, 0) {
				t.Fatalf("conflict %q", c)
			}
		}
	})
}

var worktreeListCases = []struct {
	name string
	in   string
	want []listed
	err  bool
}{
	{"main and a thread", "worktree /p/app\x00HEAD " + sha + "\x00branch refs/heads/main\x00\x00" +
		"worktree /p/.worktrees/app/1\x00HEAD " + sha + "\x00branch refs/heads/gateway/1\x00locked\x00\x00",
		[]listed{{path: "/p/app", head: sha, branch: "refs/heads/main"}, {path: "/p/.worktrees/app/1", head: sha, branch: "refs/heads/gateway/1"}}, false},
	{"detached and bare", "worktree /r\x00bare\x00\x00worktree /w\x00HEAD " + sha + "\x00detached\x00\x00",
		[]listed{{path: "/r", bare: true}, {path: "/w", head: sha}}, false},
	{"attribute first", "HEAD " + sha + "\x00", nil, true},
	{"no path", "worktree \x00", nil, true},
}

func TestParseWorktreeList(t *testing.T) {
	for _, tc := range worktreeListCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseWorktreeList([]byte(tc.in))
			if tc.err != (err != nil) {
				t.Fatalf("parseWorktreeList = %v, %v", got, err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(listed{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzParseWorktreeList(f *testing.F) {
	for _, tc := range worktreeListCases {
		f.Add([]byte(tc.in))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		list, err := parseWorktreeList(in)
		if err != nil {
			return
		}
		for _, l := range list {
			if l.path == "" {
				t.Fatalf("a worktree without a path from %q", in)
			}
		}
	})
}
