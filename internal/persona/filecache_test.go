package persona

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestFileCacheSeesEveryEdit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.md")
	var c fileCache
	reads := 0
	read := func() string {
		t.Helper()
		s, _, err := c.read(path, func() (string, error) {
			reads++
			b, err := os.ReadFile(path)
			return string(b), err
		})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	old := time.Now().Add(-time.Hour)
	os.WriteFile(path, []byte("one"), 0o600)
	os.Chtimes(path, old, old)
	if read() != "one" || read() != "one" || reads != 1 {
		t.Fatalf("an unchanged, settled file was read %d times, want 1", reads)
	}
	// Same size, same modification time: the change time still differs.
	os.WriteFile(path, []byte("two"), 0o600)
	os.Chtimes(path, old, old)
	if got := read(); got != "two" {
		t.Fatalf("read %q after a same-size edit, want two", got)
	}
	// A file modified just now is always read again (racy window).
	os.WriteFile(path, []byte("three"), 0o600)
	read()
	n := reads
	read()
	if reads != n+1 {
		t.Errorf("a freshly modified file came from the cache")
	}
	os.Remove(path)
	if _, _, err := c.read(path, func() (string, error) { _, err := os.ReadFile(path); return "", err }); err == nil {
		t.Error("a removed file was served from the cache")
	}
}
