package project

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tree builds root/{app,app/src,file.txt} and an outside directory with
// links pointing in and out.
func tree(t testing.TB) (root, outside string) {
	t.Helper()
	base := t.TempDir()
	root, outside = filepath.Join(base, "projects"), filepath.Join(base, "secret")
	for _, d := range []string{filepath.Join(root, "app", "src"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "file.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	mustLink(t, outside, filepath.Join(root, "escape"))
	mustLink(t, filepath.Join(root, "app"), filepath.Join(root, "alias"))
	mustLink(t, "../../secret", filepath.Join(root, "app", "up"))
	return root, outside
}

func mustLink(t testing.TB, target, name string) {
	t.Helper()
	if err := os.Symlink(target, name); err != nil {
		t.Fatal(err)
	}
}

func TestResolve(t *testing.T) {
	root, outside := tree(t)
	app := filepath.Join(root, "app")
	tests := []struct {
		input string
		want  string
		err   error
	}{
		{"app", app, nil},
		{"app/src", filepath.Join(app, "src"), nil},
		{"./app/../app", app, nil},
		{app, app, nil},
		{".", root, nil},
		{"alias", app, nil}, // a link that stays inside is followed
		{"  app  ", app, nil},
		{"../secret", "", ErrOutside},
		{"app/../../secret", "", ErrOutside},
		{outside, "", ErrOutside},
		{"/etc", "", ErrOutside},
		{"escape", "", ErrOutside},    // a link to outside
		{"app/up", "", ErrOutside},    // a relative link to outside
		{"escape/x", "", ErrNotFound}, // below an escaping link, missing: not found or outside, never accepted
		{"missing", "", ErrNotFound},
		{"file.txt", "", ErrNotDir},
		{"", "", ErrEmpty},
		{"a\x00b", "", ErrNotFound},
	}
	for _, tt := range tests {
		got, err := Resolve(root, tt.input)
		if tt.input == "escape/x" {
			if err == nil {
				t.Errorf("Resolve(%q) = %q, want a refusal", tt.input, got)
			}
			continue
		}
		if !errors.Is(err, tt.err) || got != tt.want {
			t.Errorf("Resolve(%q) = %q, %v; want %q, %v", tt.input, got, err, tt.want, tt.err)
		}
	}
}

// A root that is itself reached through a link works, and its targets are
// judged against the real root.
func TestResolveThroughLinkedRoot(t *testing.T) {
	root, _ := tree(t)
	linked := filepath.Join(t.TempDir(), "linked")
	mustLink(t, root, linked)
	got, err := Resolve(linked, "app")
	if err != nil || got != filepath.Join(root, "app") {
		t.Fatalf("Resolve via linked root = %q, %v", got, err)
	}
	if _, err := Resolve(linked, "escape"); !errors.Is(err, ErrOutside) {
		t.Fatalf("escape via linked root: %v", err)
	}
	if Show(linked, got) != "app" {
		t.Fatalf("Show = %q", Show(linked, got))
	}
}

func TestResolveMissingRoot(t *testing.T) {
	if _, err := Resolve(filepath.Join(t.TempDir(), "nope"), "x"); !errors.Is(err, ErrRootMissing) {
		t.Fatalf("err = %v", err)
	}
}

// Whatever is typed, an accepted path is a directory inside the real root.
func FuzzResolve(f *testing.F) {
	for _, s := range []string{"app", "../secret", "escape", "alias/src", "/", "app/up/..", "....//app", "app/./../escape/.."} {
		f.Add(s)
	}
	root, _ := tree(f)
	f.Fuzz(func(t *testing.T, input string) {
		got, err := Resolve(root, input)
		if err != nil {
			return
		}
		realRoot, _ := filepath.EvalSymlinks(root)
		if !within(realRoot, got) {
			t.Fatalf("Resolve(%q) = %q, outside %q", input, got, realRoot)
		}
		if st, err := os.Stat(got); err != nil || !st.IsDir() {
			t.Fatalf("Resolve(%q) = %q, not a directory", input, got)
		}
		if strings.Contains(got, "..") && !strings.Contains(realRoot, "..") {
			t.Fatalf("Resolve(%q) = %q, not clean", input, got)
		}
	})
}
