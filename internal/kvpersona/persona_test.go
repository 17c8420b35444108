package kvpersona

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/natstest"
	"github.com/agentgateway/gateway/internal/persona"
)

// writeTree writes files (name -> content, slash-separated) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// readTree reads every regular file under dir.
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		data, err := os.ReadFile(p)
		out[filepath.ToSlash(rel)] = string(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func openPersona(t *testing.T, srv *server.Server) *Persona {
	t.Helper()
	p, err := OpenPersona(context.Background(), connect(t, srv), 1)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mirror(t *testing.T, p *Persona) *Mirror {
	t.Helper()
	m, err := p.Mirror(context.Background(), zerolog.New(zerolog.NewTestWriter(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// waitEntry waits until the mirror's watch has delivered a revision of
// name that cond accepts.
func waitEntry(t *testing.T, m *Mirror, name string, cond func(entry, bool) bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		m.mu.Lock()
		e, ok := m.entries[name]
		updated := m.updated
		m.mu.Unlock()
		if cond(e, ok) {
			return
		}
		select {
		case <-updated:
		case <-deadline:
			t.Fatalf("the mirror never saw the change of %s", name)
		}
	}
}

func pushChanges(t *testing.T, p *Persona, dir string) Changes {
	t.Helper()
	ch, err := p.Push(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

func syncDir(t *testing.T, m *Mirror, dir string) []string {
	t.Helper()
	changed, err := m.Sync(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	return changed
}

var operatorDir = map[string]string{
	"soul.md":                     "# Soul\nkind\n",
	"identity.md":                 "# Identity\nAda\n",
	"agents.md":                   "# Operating Rules\n",
	"user.md":                     "# User\n",
	"tools.md":                    "# Tools\n",
	"heartbeat.md":                "# Heartbeat\n",
	"boot.md":                     "## Optional\n- projects.md\n- memory.md\n",
	"projects.md":                 "# Projects\n",
	"notes.md":                    "not listed anywhere\n",
	"memory.md":                   "# Memory\n- the agent's, never pushed\n",
	"sessions.json":               "{}",
	"skills/release/SKILL.md":     "---\nname: release\ndescription: d\n---\n",
	"skills/release/tools/run.sh": "echo hi\n",
	"skills/release/.hidden":      "no",
	"skills/README.md":            "next to the skills, not one",
}

var pushed = []string{
	"agents.md", "boot.md", "heartbeat.md", "identity.md", "projects.md",
	"skills/release/SKILL.md", "skills/release/tools/run.sh", "soul.md", "tools.md", "user.md",
}

// The operator pushes a directory; a worker's Sync writes exactly the
// persona files (never memory.md, state files or hidden ones) with mode
// 0600; an edit and a deletion reach the worker the same way.
func TestPushAndSync(t *testing.T) {
	srv := natstest.Start(t, t.TempDir())
	op, wk := t.TempDir(), t.TempDir()
	writeTree(t, op, operatorDir)
	writeTree(t, wk, map[string]string{"memory.md": "# Memory\n- the worker's\n", "own.md": "the worker's own\n"})
	p := openPersona(t, srv)
	m := mirror(t, openPersona(t, srv))

	if diff := cmp.Diff(Changes{Written: pushed}, pushChanges(t, p, op)); diff != "" {
		t.Errorf("first push (-want +got):\n%s", diff)
	}
	for _, name := range pushed {
		waitEntry(t, m, name, func(_ entry, ok bool) bool { return ok })
	}
	if diff := cmp.Diff(pushed, syncDir(t, m, wk)); diff != "" {
		t.Errorf("first sync wrote (-want +got):\n%s", diff)
	}
	want := map[string]string{"memory.md": "# Memory\n- the worker's\n", "own.md": "the worker's own\n"}
	for _, name := range pushed {
		want[name] = operatorDir[name]
	}
	if diff := cmp.Diff(want, readTree(t, wk)); diff != "" {
		t.Errorf("worker's CONFIG_DIR (-want +got):\n%s", diff)
	}
	for _, name := range pushed {
		fi, err := os.Stat(filepath.Join(wk, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", name, fi.Mode().Perm())
		}
	}
	if got := pushChanges(t, p, op); !got.Empty() {
		t.Errorf("a push of an unchanged directory changed %+v", got)
	}
	if got := syncDir(t, m, wk); len(got) != 0 {
		t.Errorf("a sync with nothing changed wrote %v", got)
	}

	writeTree(t, op, map[string]string{"soul.md": "# Soul\nkinder\n"})
	if err := os.Remove(filepath.Join(op, "tools.md")); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Changes{Written: []string{"soul.md"}, Deleted: []string{"tools.md"}}, pushChanges(t, p, op)); diff != "" {
		t.Errorf("second push (-want +got):\n%s", diff)
	}
	waitEntry(t, m, "tools.md", func(e entry, _ bool) bool { return e.deleted })
	waitEntry(t, m, "soul.md", func(e entry, _ bool) bool { return string(e.data) == "# Soul\nkinder\n" })
	if diff := cmp.Diff([]string{"soul.md", "tools.md"}, syncDir(t, m, wk)); diff != "" {
		t.Errorf("second sync (-want +got):\n%s", diff)
	}
	want["soul.md"] = "# Soul\nkinder\n"
	delete(want, "tools.md")
	if diff := cmp.Diff(want, readTree(t, wk)); diff != "" {
		t.Errorf("worker's CONFIG_DIR after the second push (-want +got):\n%s", diff)
	}

	// A file edited on the worker differs from the bucket: the next sync
	// puts the operator's back.
	writeTree(t, wk, map[string]string{"identity.md": "# Identity\nedited on the worker\n"})
	if diff := cmp.Diff([]string{"identity.md"}, syncDir(t, m, wk)); diff != "" {
		t.Errorf("sync after a local edit (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, readTree(t, wk)); diff != "" {
		t.Errorf("worker's CONFIG_DIR after a local edit (-want +got):\n%s", diff)
	}
}

// A Sync with nothing changed in the bucket costs no message to the
// server, so a worker can sync before every event.
func TestSyncCostsNoRoundTrip(t *testing.T) {
	srv := natstest.Start(t, t.TempDir())
	op, wk := t.TempDir(), t.TempDir()
	writeTree(t, op, operatorDir)
	p := openPersona(t, srv)
	pushChanges(t, p, op)
	m := mirror(t, p)
	syncDir(t, m, wk)
	varz := func() int64 {
		v, err := srv.Varz(nil)
		if err != nil {
			t.Fatal(err)
		}
		return v.InMsgs
	}
	before := varz()
	for range 100 {
		if got := syncDir(t, m, wk); len(got) != 0 {
			t.Fatalf("sync wrote %v", got)
		}
	}
	if after := varz(); after != before {
		t.Errorf("100 syncs sent %d messages to the server, want 0", after-before)
	}
}

// A file over the persona's limit refuses the push, naming the file, and
// the bucket is left as it was.
func TestPushRefusesTooLargeFile(t *testing.T) {
	srv := natstest.Start(t, t.TempDir())
	op := t.TempDir()
	writeTree(t, op, map[string]string{"soul.md": "# Soul\n"})
	p := openPersona(t, srv)
	pushChanges(t, p, op)
	tests := map[string]string{
		"user.md":                 strings.Repeat("x", persona.MaxFileSize+1),
		"skills/big/SKILL.md":     strings.Repeat("y", persona.MaxFileSize+1),
		"skills/big/data/huge.md": strings.Repeat("z", persona.MaxFileSize+1),
	}
	for name, content := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, map[string]string{"identity.md": "# Identity\n", name: content})
			_, err := p.Push(context.Background(), dir)
			if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "256 KiB") {
				t.Fatalf("push: %v; want an error naming %s and the limit", err, name)
			}
			if strings.Contains(err.Error(), dir) {
				t.Errorf("the error shows the directory's path: %v", err)
			}
			snap, err := p.snapshot(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(map[string][]byte{"soul.md": []byte("# Soul\n")}, snap); diff != "" {
				t.Errorf("bucket after a refused push (-want +got):\n%s", diff)
			}
		})
	}
}

// A worker writes only inside its CONFIG_DIR: not through a symbolic link
// in the way, and never a key that is not a persona file's name.
func TestSyncStaysInside(t *testing.T) {
	srv := natstest.Start(t, t.TempDir())
	p := openPersona(t, srv)
	ctx := context.Background()
	for key, value := range map[string]string{
		"skills/x/SKILL.md": "skill", "memory.md": "not the bucket's to give", "sessions.json": "{}",
		"skills/=2E=2E/escape.md": "out", "=2Essh/authorized_keys": "key",
	} {
		if _, err := p.kv.Put(ctx, key, []byte(value)); err != nil {
			t.Fatal(err)
		}
	}
	wk, elsewhere := t.TempDir(), t.TempDir()
	if err := os.Symlink(elsewhere, filepath.Join(wk, "skills")); err != nil {
		t.Fatal(err)
	}
	m := mirror(t, p)
	_, err := m.Sync(ctx, wk)
	if err == nil || !strings.Contains(err.Error(), "skills is a symbolic link") {
		t.Errorf("sync through a symbolic link: %v", err)
	}
	if got := readTree(t, elsewhere); len(got) != 0 {
		t.Errorf("sync wrote through the link: %v", got)
	}
	if got := readTree(t, wk); len(got) != 0 {
		t.Errorf("sync wrote %v; want nothing", got)
	}
}

// The Publisher pushes at its first call and then only when a file
// changed; an unchanged tick sends nothing to the server.
func TestPublisher(t *testing.T) {
	srv := natstest.Start(t, t.TempDir())
	op := t.TempDir()
	writeTree(t, op, map[string]string{"soul.md": "# Soul\n", "identity.md": "# Identity\n"})
	p := openPersona(t, srv)
	pub := p.Publisher(op)
	ctx := context.Background()
	publish := func() Changes {
		t.Helper()
		ch, err := pub.Publish(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return ch
	}
	if diff := cmp.Diff(Changes{Written: []string{"identity.md", "soul.md"}}, publish()); diff != "" {
		t.Errorf("first publish (-want +got):\n%s", diff)
	}
	v, _ := srv.Varz(nil)
	before := v.InMsgs
	if got := publish(); !got.Empty() {
		t.Errorf("an unchanged tick published %+v", got)
	}
	if v, _ := srv.Varz(nil); v.InMsgs != before {
		t.Errorf("an unchanged tick sent %d messages", v.InMsgs-before)
	}
	writeTree(t, op, map[string]string{"user.md": "# User\n"})
	if diff := cmp.Diff(Changes{Written: []string{"user.md"}}, publish()); diff != "" {
		t.Errorf("publish after a new file (-want +got):\n%s", diff)
	}
}

// validKey is the key syntax of JetStream KV (nats.go's keyValid).
var validKey = regexp.MustCompile(`^[-/_=\.a-zA-Z0-9]+$`)

func checkKey(t *testing.T, name string) {
	t.Helper()
	key := keyOf(name)
	if !validKey.MatchString(key) || strings.HasPrefix(key, ".") || strings.HasSuffix(key, ".") || strings.Contains(key, "..") {
		t.Fatalf("keyOf(%q) = %q: not a valid key", name, key)
	}
	back, err := nameOf(key)
	if err != nil {
		return // not a persona file name: never pushed
	}
	if back != name {
		t.Fatalf("nameOf(keyOf(%q)) = %q", name, back)
	}
}

func TestKeyOf(t *testing.T) {
	tests := map[string]string{
		"soul.md":                 "soul.md",
		"skills/x/SKILL.md":       "skills/x/SKILL.md",
		"a+b@c.md":                "a=2Bb=40c.md",
		"x..md":                   "x.=2Emd",
		"skills/x/a=b":            "skills/x/a=3Db",
		"skills/x/trailing.":      "skills/x/trailing=2E",
		"skills/x/with space.txt": "skills/x/with=20space.txt",
	}
	for name, want := range tests {
		t.Run(name, func(t *testing.T) {
			if got := keyOf(name); got != want {
				t.Errorf("keyOf(%q) = %q, want %q", name, got, want)
			}
			checkKey(t, name)
		})
	}
	for _, key := range []string{"memory.md", "sessions.json", "skills/x", "skills/=2E=2E/x", "=2Essh/k", "a/b.md", "skills//x/y", "bad=zz.md"} {
		if name, err := nameOf(key); err == nil {
			t.Errorf("nameOf(%q) = %q, want an error", key, name)
		}
	}
}

func FuzzKeyOf(f *testing.F) {
	for _, s := range []string{"soul.md", "skills/x/SKILL.md", "a+b@c.md", "x..md", ".", "skills/x/é.md"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if name == "" {
			return
		}
		checkKey(t, name)
	})
}
