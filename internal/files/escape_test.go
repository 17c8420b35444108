package files

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/agentgateway/gateway/internal/proc"
	"github.com/agentgateway/gateway/internal/queue"
)

// listing names what is in dir (nil when it is empty or missing).
func listing(t *testing.T, dir string) []string {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// An agent that replaces one of the outbox's own folders with a link gets
// nothing through it: no file of the link's target is taken or sent, and
// nothing is moved into the folder a link points at.
func TestCollectRefusesLinkedFolders(t *testing.T) {
	tests := []struct {
		name string
		// plant prepares work (the working directory) with secrets (a
		// folder of the gateway's, holding token.txt) and outside (an
		// empty folder elsewhere).
		plant func(t *testing.T, work, secrets, outside string)
		// untouched is the folder whose listing must not change.
		untouched func(secrets, outside string) string
	}{
		{
			name: "outbox is a link to a secrets folder",
			plant: func(t *testing.T, work, secrets, outside string) {
				mkdir(t, filepath.Join(work, GatewayDir))
				symlink(t, secrets, filepath.Join(work, OutboxDir))
			},
			untouched: func(secrets, _ string) string { return secrets },
		},
		{
			name: ".gateway is a link to a folder with an outbox",
			plant: func(t *testing.T, work, secrets, outside string) {
				mkdir(t, filepath.Join(secrets, "outbox"))
				writeFile(t, filepath.Join(secrets, "outbox", "env"), "TOKEN=Bot-SECRET-1")
				symlink(t, secrets, filepath.Join(work, GatewayDir))
			},
			untouched: func(secrets, _ string) string { return filepath.Join(secrets, "outbox") },
		},
		{
			name: "sent/<event> is a link to a folder elsewhere",
			plant: func(t *testing.T, work, secrets, outside string) {
				mkdir(t, filepath.Join(work, OutboxDir))
				mkdir(t, filepath.Join(work, SentDir))
				writeFile(t, filepath.Join(work, OutboxDir, "ld.so.preload"), "/tmp/evil.so\n")
				symlink(t, outside, filepath.Join(work, SentDir, "7"))
			},
			untouched: func(_, outside string) string { return outside },
		},
		{
			name: "sent is a link to a folder elsewhere",
			plant: func(t *testing.T, work, secrets, outside string) {
				mkdir(t, filepath.Join(work, OutboxDir))
				writeFile(t, filepath.Join(work, OutboxDir, "ld.so.preload"), "/tmp/evil.so\n")
				symlink(t, outside, filepath.Join(work, SentDir))
			},
			untouched: func(_, outside string) string { return outside },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			work, secrets, outside := t.TempDir(), t.TempDir(), t.TempDir()
			writeFile(t, filepath.Join(secrets, "token.txt"), "Bot-SECRET-1")
			tt.plant(t, work, secrets, outside)
			watched := tt.untouched(secrets, outside)
			before := listing(t, watched)

			c, _ := Collect(work, 7, Limits{Files: 10, Bytes: 1 << 20})
			if len(c.Files) != 0 {
				t.Errorf("Collect took %d files through a link: %+v", len(c.Files), c.Files)
			}
			if diff := cmp.Diff(before, listing(t, watched)); diff != "" {
				t.Errorf("the folder behind the link changed (-before +after):\n%s", diff)
			}
		})
	}
}

// An agent that links the folder the next prompt's attachments go to (or
// .gateway, or attachments) gets no file written through the link.
func TestFetchRefusesLinkedFolders(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("from a Discord user\n"))
	}))
	t.Cleanup(srv.Close)
	f := NewFetcher(srv.URL, 1<<20, 1<<20)
	list := []queue.Attachment{{Name: "ld.so.preload", URL: srv.URL + "/a", Size: 20}}

	tests := []struct {
		name string
		link string // relative to the working directory
	}{
		{"the message's folder", AttachmentsDir + "/1234"},
		{"attachments", AttachmentsDir},
		{".gateway", GatewayDir},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			work, outside := t.TempDir(), t.TempDir()
			mkdir(t, filepath.Dir(filepath.Join(work, tt.link)))
			symlink(t, outside, filepath.Join(work, tt.link))
			got := f.Fetch(context.Background(), work, "1234", list)
			if len(got) != 1 || got[0].Path != "" {
				t.Errorf("Fetch saved %+v through a link", got)
			}
			if names := listing(t, outside); len(names) != 0 {
				t.Errorf("written through the link: %v", names)
			}
		})
	}
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// nobody is the agent user of the tests that need root.
var nobody = &proc.Credential{UID: 65534, GID: 65534}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to act as another user")
	}
}

func chown(t *testing.T, path string, c *proc.Credential) {
	t.Helper()
	if err := os.Lchown(path, int(c.UID), int(c.GID)); err != nil {
		t.Fatal(err)
	}
}

// Under AGENT_USER the outbox sends only what the agent itself could
// read, its sent folders are the agent's, and an outbox that is not the
// agent's is not touched.
func TestCollectAsTheAgent(t *testing.T) {
	needRoot(t)
	work := t.TempDir()
	outbox := filepath.Join(work, OutboxDir)
	mkdir(t, outbox)
	for _, p := range []string{work, filepath.Join(work, GatewayDir), outbox} {
		chown(t, p, nobody)
	}
	writeFile(t, filepath.Join(outbox, "mine.txt"), "the agent's\n")
	chown(t, filepath.Join(outbox, "mine.txt"), nobody)
	writeFile(t, filepath.Join(outbox, "roots.txt"), "root's only\n") // 0600 root

	c, err := Collect(work, 9, Limits{Guard: &Guard{Agent: nobody}})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range c.Files {
		names = append(names, f.Name)
	}
	if diff := cmp.Diff([]string{"mine.txt"}, names); diff != "" {
		t.Errorf("sent (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"roots.txt (the agent cannot read it)"}, c.Skipped); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
	for _, p := range []string{filepath.Join(work, SentDir), filepath.Join(work, SentDir, "9")} {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil || st.Uid != nobody.UID {
			t.Errorf("%s: owner %d, %v; want the agent's", filepath.Base(p), st.Uid, err)
		}
	}
	// Read, at the upload, is as the agent too.
	g := &Guard{Agent: nobody}
	if data, err := g.Read(c.Files[0].Path, c.Files[0].Root, 100); err != nil || string(data) != "the agent's\n" {
		t.Errorf("Read = %q, %v", data, err)
	}
	if _, err := g.Read(filepath.Join(work, SentDir, "9", "roots.txt"), work, 100); !errors.Is(err, ErrDenied) {
		t.Errorf("Read of root's file = %v, want ErrDenied", err)
	}

	// An outbox of another user's: an error, nothing moves.
	writeFile(t, filepath.Join(outbox, "next.txt"), "x")
	chown(t, outbox, &proc.Credential{UID: 0, GID: 0})
	if c, err := Collect(work, 10, Limits{Guard: &Guard{Agent: nobody}}); !errors.Is(err, ErrNotOwned) || len(c.Files) != 0 {
		t.Errorf("Collect from root's outbox = %+v, %v; want ErrNotOwned", c, err)
	}
	if _, err := os.Stat(filepath.Join(outbox, "next.txt")); err != nil {
		t.Errorf("the file was moved: %v", err)
	}
}

// Under AGENT_USER the attachments' folders and files are the agent's, so
// it can read what it was sent.
func TestFetchAsTheAgent(t *testing.T) {
	needRoot(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("hello\n")) }))
	t.Cleanup(srv.Close)
	f := NewFetcher(srv.URL, 1<<20, 1<<20)
	f.Guard = &Guard{Agent: nobody}
	work := t.TempDir()
	chown(t, work, nobody)
	got := f.Fetch(context.Background(), work, "77", []queue.Attachment{{Name: "a.txt", URL: srv.URL + "/a", Size: 6}})
	if len(got) != 1 || got[0].Path == "" || got[0].Text != "hello\n" {
		t.Fatalf("Fetch = %+v", got)
	}
	for _, p := range []string{filepath.Join(work, GatewayDir), filepath.Join(work, AttachmentsDir), filepath.Dir(got[0].Path), got[0].Path} {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil || st.Uid != nobody.UID || st.Gid != nobody.GID {
			t.Errorf("%s: owner %d:%d, %v; want the agent's", filepath.Base(p), st.Uid, st.Gid, err)
		}
	}
}

// The gateway's state is refused whatever path leads to it: from CONFIG_DIR
// as the working directory, from a folder above it, through a hard link.
func TestGuardRefusesState(t *testing.T) {
	top := t.TempDir()
	config := filepath.Join(top, "config")
	mkdir(t, filepath.Join(config, "conversations", "dm-1"))
	writeFile(t, filepath.Join(config, "sessions.json"), "{}")
	writeFile(t, filepath.Join(config, "conversations", "dm-1", "today.md"), "a DM")
	writeFile(t, filepath.Join(config, "report.txt"), "the agent's")
	env := filepath.Join(top, "dot-env")
	writeFile(t, env, "TOKEN=x")
	if err := os.Link(filepath.Join(config, "sessions.json"), filepath.Join(config, "copy.json")); err != nil {
		t.Fatal(err)
	}
	g := &Guard{StateDir: config, Protected: []string{env}, State: func(name string) bool {
		return name == "sessions.json" || name == "conversations"
	}}
	tests := []struct {
		root, path string
		want       error
	}{
		{config, "sessions.json", ErrState},
		{config, "conversations/dm-1/today.md", ErrState},
		{top, "config/sessions.json", ErrState},
		{top, "config/conversations/dm-1/today.md", ErrState},
		{config, "copy.json", ErrState},
		{top, "dot-env", ErrState},
		{filepath.Join(config, "conversations"), "dm-1/today.md", ErrState},
		{config, "report.txt", nil},
		{config, "../dot-env", ErrOutside},
	}
	for _, tt := range tests {
		_, err := g.Read(filepath.Join(tt.root, tt.path), tt.root, 100)
		if tt.path == "../dot-env" {
			_, err = g.Read(tt.path, tt.root, 100)
		}
		if !errors.Is(err, tt.want) {
			t.Errorf("Read(%s) = %v, want %v", tt.path, err, tt.want)
		}
	}
}

// relPath never lets a path out of its root: whatever it accepts, joined
// to the root, stays below it.
func FuzzRelPath(f *testing.F) {
	for _, s := range []string{"a.txt", "../x", "/root/x", "/etc/passwd", "a/../../b", ".", "", "./a/./b", "a//b", "/root/../root/a"} {
		f.Add("/root", s)
	}
	f.Fuzz(func(t *testing.T, root, path string) {
		if !filepath.IsAbs(root) {
			return
		}
		rel, err := relPath(root, path)
		if err != nil {
			return
		}
		root = filepath.Clean(root)
		joined := filepath.Join(root, rel)
		if !filepath.IsLocal(rel) || joined == root || !strings.HasPrefix(joined, strings.TrimSuffix(root, "/")+"/") {
			t.Fatalf("relPath(%q, %q) = %q: leads to %q, not below the root", root, path, rel, joined)
		}
	})
}
