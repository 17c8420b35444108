package agent

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/persona"
)

func TestRemoveStalePromptFiles(t *testing.T) {
	dir := t.TempDir()
	// A pid that ran and is gone: a gateway that crashed.
	cmd := exec.Command("/bin/true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := cmd.Process.Pid
	self, parent := os.Getpid(), os.Getppid()

	// A file this process writes and still uses, named through an unclean
	// path on purpose.
	c := &promptCache{dir: dir + "/./"}
	_, release, err := c.acquire(persona.Files{"soul.md": "be kind"})
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	live := filepath.Base(c.current.path)
	if pid, ok := promptFileOwner(live); !ok || pid != self {
		t.Fatalf("prompt file %q names pid %d (%v), want %d", live, pid, ok, self)
	}

	name := func(pid int, rest string) string { return promptFilePrefix + strconv.Itoa(pid) + "-" + rest + ".md" }
	files := []string{
		name(dead, "1"),         // stale: its gateway is gone
		name(dead, "2"),         // stale
		name(self, "3"),         // stale: our pid, but not written by this process
		name(parent, "4"),       // another live gateway's
		"gateway-prompt-5.md",   // no pid in the name: not ours to judge
		"gateway-prompt-x-6.md", // not a pid
		"notes.md",
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	RemoveStalePromptFiles(dir, zerolog.New(zerolog.NewTestWriter(t)))

	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	want := []string{live, name(parent, "4"), "gateway-prompt-5.md", "gateway-prompt-x-6.md", "notes.md"}
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("files left (-want +got):\n%s", diff)
	}

	// Once released and replaced, the live file goes the usual way and
	// the cleanup does not trip over it.
	release()
	c.close()
	RemoveStalePromptFiles(dir, zerolog.New(zerolog.NewTestWriter(t)))
	if _, err := os.Stat(filepath.Join(dir, live)); !os.IsNotExist(err) {
		t.Errorf("prompt file after close: %v, want it removed", err)
	}
}

func TestPromptFileOwner(t *testing.T) {
	tests := []struct {
		name string
		pid  int
		ok   bool
	}{
		{"gateway-prompt-42-123.md", 42, true},
		{"gateway-prompt-42-.md", 42, true},
		{"gateway-prompt-123.md", 0, false},
		{"gateway-prompt--1-2.md", 0, false},
		{"gateway-prompt-0-2.md", 0, false},
		{"gateway-prompt-042-2.md", 0, false},
		{"gateway-prompt-+42-2.md", 0, false},
		{"other-42-1.md", 0, false},
	}
	for _, tt := range tests {
		pid, ok := promptFileOwner(tt.name)
		if pid != tt.pid || ok != tt.ok {
			t.Errorf("promptFileOwner(%q) = %d, %v; want %d, %v", tt.name, pid, ok, tt.pid, tt.ok)
		}
	}
}

// A run's own sections share one file per distinct text while the persona
// is unchanged; a persona change removes the variants no run uses, and the
// others when their runs end.
func TestPromptVariants(t *testing.T) {
	dir := t.TempDir()
	c := &promptCache{dir: dir}
	files := persona.Files{"Identity": "# Identity\nName: A\n"}
	p, release, err := c.acquire(files)
	if err != nil {
		t.Fatal(err)
	}
	a1, r1, err := c.variant(p, "## Discord Actions\n\nx\n\n")
	if err != nil {
		t.Fatal(err)
	}
	a2, r2, _ := c.variant(p, "## Discord Actions\n\nx\n\n")
	b1, rb, _ := c.variant(p, "## Channel Instructions\n\ny\n\n")
	if a1 != a2 || a1 == b1 {
		t.Fatalf("variant files: %s %s %s; want the same text to share one", a1, a2, b1)
	}
	if data, _ := os.ReadFile(a1); string(data) != p.text+"## Discord Actions\n\nx\n\n" {
		t.Errorf("variant holds %q", data)
	}
	r1()
	r2()
	release()
	if _, err := os.Stat(a1); err != nil {
		t.Errorf("an idle variant of the current prompt was removed: %v", err)
	}
	// The persona changes while b's run still holds its file.
	if _, release2, err := c.acquire(persona.Files{"Identity": "# Identity\nName: B\n"}); err != nil {
		t.Fatal(err)
	} else {
		defer release2()
	}
	if _, err := os.Stat(a1); !os.IsNotExist(err) {
		t.Errorf("an idle variant of a stale prompt is still there: %v", err)
	}
	if _, err := os.Stat(b1); err != nil {
		t.Errorf("a variant in use was removed: %v", err)
	}
	rb()
	if _, err := os.Stat(b1); !os.IsNotExist(err) {
		t.Errorf("a stale variant outlived its last run: %v", err)
	}
}
