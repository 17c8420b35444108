package atomicfile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestWriteReplacesAndLeavesNoTemp(t *testing.T) {
	for name, write := range map[string]func(string, []byte, os.FileMode) error{"Write": Write, "Replace": Replace} {
		t.Run(name, func(t *testing.T) { testReplacesAndLeavesNoTemp(t, write) })
	}
}

func testReplacesAndLeavesNoTemp(t *testing.T, write func(string, []byte, os.FileMode) error) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sessions.json")
	for _, content := range []string{"first", "second, longer content"} {
		if err := write(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != content {
			t.Fatalf("read %q, %v; want %q", got, err, content)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only the file", len(entries))
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v, want 0600", fi.Mode().Perm())
	}
}

func TestWriteFailureLeavesNoTemp(t *testing.T) {
	dir := t.TempDir()
	// A non-empty directory where the file should be makes the rename fail.
	path := filepath.Join(dir, "memory.md")
	if err := os.MkdirAll(filepath.Join(path, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, []byte("new"), 0o644); err == nil {
		t.Fatal("write over a non-empty directory succeeded")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want no temp file left", len(entries))
	}
}

// TestWriteKeepsOwner: replacing a file another user owns (memory.md, the
// agent user's) leaves it that user's.
func TestWriteKeepsOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a file to another user")
	}
	const nobody = 65534
	path := filepath.Join(t.TempDir(), "memory.md")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, []byte("merged"), 0o600); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != nobody || st.Gid != nobody {
		t.Errorf("owner %d:%d after Write, want %d:%d", st.Uid, st.Gid, nobody, nobody)
	}
}

// TestWriteSetsExactlyPerm: the replacement has the mode asked for, not the
// old file's nor one the umask narrowed or widened.
func TestWriteSetsExactlyPerm(t *testing.T) {
	for _, tt := range []struct {
		old, perm, umask os.FileMode
	}{
		{old: 0o644, perm: 0o600, umask: 0},
		{old: 0o600, perm: 0o640, umask: 0o077},
	} {
		path := filepath.Join(t.TempDir(), "state.json")
		if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, tt.old); err != nil {
			t.Fatal(err)
		}
		prev := syscall.Umask(int(tt.umask))
		err := Write(path, []byte("new"), tt.perm)
		syscall.Umask(prev)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != tt.perm {
			t.Errorf("replacing a %04o file with perm %04o under umask %04o: mode %04o", tt.old, tt.perm, tt.umask, fi.Mode().Perm())
		}
	}
}

func TestCreateNeverOverwrites(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.md")
	created, err := Create(path, []byte("first"), 0o600)
	if err != nil || !created {
		t.Fatalf("Create = %v, %v", created, err)
	}
	created, err = Create(path, []byte("second"), 0o600)
	if err != nil || created {
		t.Fatalf("second Create = %v, %v", created, err)
	}
	if data, _ := os.ReadFile(path); string(data) != "first" {
		t.Errorf("file = %q", data)
	}
	// A dangling symlink is something too.
	link := filepath.Join(dir, "b.md")
	if err := os.Symlink("nowhere", link); err != nil {
		t.Fatal(err)
	}
	if created, err := Create(link, []byte("x"), 0o600); err != nil || created {
		t.Errorf("Create over a dangling symlink = %v, %v", created, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("dir holds %d entries: temp files left?", len(entries))
	}
}
