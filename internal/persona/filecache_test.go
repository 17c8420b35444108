package persona

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
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

// settledCache reads path through a new cache until the cache serves it
// without looking at the file (the watch covers it), and returns a read
// function that counts the file's reads.
func settledCache(t *testing.T, path string) (read func() string, reads *int) {
	t.Helper()
	var c fileCache
	n := 0
	read = func() string {
		t.Helper()
		s, _, err := c.read(path, func() (string, error) {
			n++
			b, err := os.ReadFile(path)
			return string(b), err
		})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	read()
	c.mu.Lock()
	watched := c.entries[path].watched
	c.mu.Unlock()
	if !watched {
		t.Skip("the file system of the test's temp dir is not watched")
	}
	return read, &n
}

// settle backdates path past the racy window.
func settle(t *testing.T, path string) {
	t.Helper()
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
}

func TestFileCacheWatchSeesEveryEdit(t *testing.T) {
	cases := []struct {
		name string
		edit func(t *testing.T, path, other string)
	}{
		{"in place, same size and times", func(t *testing.T, path, _ string) {
			os.WriteFile(path, []byte("TWO"), 0o600)
			settle(t, path)
		}},
		{"replaced by a rename", func(t *testing.T, path, _ string) {
			tmp := path + ".tmp"
			os.WriteFile(tmp, []byte("TWO"), 0o600)
			settle(t, tmp)
			if err := os.Rename(tmp, path); err != nil {
				t.Fatal(err)
			}
		}},
		{"through a hard link in another directory", func(t *testing.T, _, other string) {
			f, err := os.OpenFile(other, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteAt([]byte("TWO"), 0)
			f.Close()
			settle(t, other)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f.md")
			other := filepath.Join(t.TempDir(), "link.md")
			os.WriteFile(path, []byte("one"), 0o600)
			if err := os.Link(path, other); err != nil {
				t.Fatal(err)
			}
			settle(t, path)
			read, reads := settledCache(t, path)
			if got := read(); got != "one" {
				t.Fatalf("read %q, want one", got)
			}
			n := *reads
			if read(); *reads != n {
				t.Fatalf("an unchanged, settled file was read again")
			}
			tc.edit(t, path, other)
			if got := read(); got != "TWO" {
				t.Errorf("read %q after the edit, want TWO", got)
			}
		})
	}
}

func TestFileCacheWatchSeesRemoval(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.md")
	os.WriteFile(path, []byte("one"), 0o600)
	settle(t, path)
	var c fileCache
	load := func() (string, error) { b, err := os.ReadFile(path); return string(b), err }
	for range 2 {
		if _, _, err := c.read(path, load); err != nil {
			t.Fatal(err)
		}
	}
	os.Remove(path)
	if _, _, err := c.read(path, load); err == nil {
		t.Error("a removed file was served from the cache")
	}
}

func TestFileCacheSeesSymlinkRetargeted(t *testing.T) {
	// A Kubernetes ConfigMap volume: f.md -> ..data/f.md, and an update
	// points ..data at a new directory.
	dir := t.TempDir()
	for _, v := range []string{"v1", "v2"} {
		os.Mkdir(filepath.Join(dir, v), 0o700)
		os.WriteFile(filepath.Join(dir, v, "f.md"), []byte(v), 0o600)
		settle(t, filepath.Join(dir, v, "f.md"))
	}
	os.Symlink("v1", filepath.Join(dir, "..data"))
	path := filepath.Join(dir, "f.md")
	os.Symlink(filepath.Join("..data", "f.md"), path)
	var c fileCache
	read := func() string {
		t.Helper()
		s, _, err := c.read(path, func() (string, error) { b, err := os.ReadFile(path); return string(b), err })
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if read() != "v1" || read() != "v1" {
		t.Fatal("the first version was not read")
	}
	os.Symlink("v2", filepath.Join(dir, "..data_tmp"))
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != "v2" {
		t.Errorf("read %q after the link was pointed at v2, want v2", got)
	}
}

func TestLoaderSeesSkillsDirectoryCreated(t *testing.T) {
	dir := t.TempDir()
	for _, s := range Sections {
		os.WriteFile(filepath.Join(dir, s.File), []byte("# "+s.Name+"\n"), 0o600)
	}
	l := NewLoader(dir)
	log := zerolog.New(zerolog.NewTestWriter(t))
	for range 2 {
		files, err := l.Load(log)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := files[SkillsSection]; ok {
			t.Fatal("a skills section without a skills directory")
		}
	}
	skill := filepath.Join(dir, SkillsDir, "notes", "SKILL.md")
	os.MkdirAll(filepath.Dir(skill), 0o700)
	os.WriteFile(skill, []byte("---\nname: notes\ndescription: Take notes.\n---\n"), 0o600)
	files, err := l.Load(log)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(files[SkillsSection], "notes: Take notes.") {
		t.Errorf("skills section after the directory was created = %q", files[SkillsSection])
	}
}
