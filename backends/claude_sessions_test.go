package backends

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentgateway/gateway/internal/proc"
)

const (
	testSessionID  = "0b6f3d2e-5a41-4c8e-9f00-1234567890ab"
	testTranscript = `{"type":"user","message":{"role":"user","content":"hello"}}` + "\n"
	testSecret     = "ANTHROPIC_API_KEY=sk-ant-api03-not-for-the-agent-0123456789\n"
)

// sessionRig is an agent's home with one claude session, and a secret of
// the gateway's (its .env, root-only under AGENT_USER) beside it.
type sessionRig struct {
	dir    string // holds everything below
	home   string // the agent's home
	secret string // the gateway's .env
	from   string // the working directory the session was last used in
	to     string // the one the channel moves to
	c      *Claude
	// uid and gid own the agent's files: nobody's with an agent user, the
	// test's own without.
	uid, gid int
	agent    bool
}

// newSessionRig makes the rig; agent runs claude as nobody (AGENT_USER),
// else as the gateway's own user.
func newSessionRig(t *testing.T, agent bool) *sessionRig {
	t.Helper()
	// Not t.TempDir: its parents are private to root, and nobody must
	// reach the home.
	dir, err := os.MkdirTemp("", "gwtest-move-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r := &sessionRig{
		dir: dir, home: filepath.Join(dir, "home"), secret: filepath.Join(dir, "gateway", ".env"),
		from: filepath.Join(dir, "work", "old"), to: filepath.Join(dir, "work", "new"),
		uid: os.Geteuid(), gid: os.Getegid(), agent: agent,
	}
	opts := Options{Env: []string{"PATH=/bin", "HOME=" + r.home}}
	if agent {
		const nobody = 65534
		r.uid, r.gid = nobody, nobody
		opts.RunAs = &RunAs{Name: "nobody", Home: r.home, Credential: proc.Credential{UID: nobody, GID: nobody}}
	}
	r.c = NewClaude(opts)
	r.mkdir(t, filepath.Dir(r.secret), 0o700, false)
	r.write(t, r.secret, testSecret, false)
	r.mkdir(t, r.oldDir(), 0o700, true)
	r.write(t, r.oldTranscript(), testTranscript, true)
	return r
}

func (r *sessionRig) projects() string { return filepath.Join(r.home, ".claude", "projects") }
func (r *sessionRig) oldDir() string   { return filepath.Join(r.projects(), claudeProjectDir(r.from)) }
func (r *sessionRig) newDir() string   { return filepath.Join(r.projects(), claudeProjectDir(r.to)) }
func (r *sessionRig) oldTranscript() string {
	return filepath.Join(r.oldDir(), testSessionID+".jsonl")
}
func (r *sessionRig) newTranscript() string {
	return filepath.Join(r.newDir(), testSessionID+".jsonl")
}

// mkdir makes path and its missing parents, the agent's when agents.
func (r *sessionRig) mkdir(t *testing.T, path string, mode os.FileMode, agents bool) {
	t.Helper()
	var made []string
	for p := path; ; p = filepath.Dir(p) {
		if _, err := os.Lstat(p); err == nil {
			break
		}
		made = append(made, p)
	}
	if err := os.MkdirAll(path, mode); err != nil {
		t.Fatal(err)
	}
	if agents {
		for _, p := range made {
			r.own(t, p)
		}
	}
}

// write writes a file, the agent's when agents.
func (r *sessionRig) write(t *testing.T, path, text string, agents bool) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if agents {
		r.own(t, path)
	}
}

// own gives path to the agent, as if the agent had made it.
func (r *sessionRig) own(t *testing.T, path string) {
	t.Helper()
	if err := os.Lchown(path, r.uid, r.gid); err != nil {
		t.Fatal(err)
	}
}

// replace puts a link to target in place of path, as the agent would.
func (r *sessionRig) replace(t *testing.T, path, target string) {
	t.Helper()
	if err := os.RemoveAll(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	r.own(t, path)
}

// copiesOfSecret lists the regular files under the rig, other than the
// ones given, that hold the secret.
func (r *sessionRig) copiesOfSecret(t *testing.T, planted ...string) []string {
	t.Helper()
	var known []os.FileInfo
	for _, p := range append(planted, r.secret) {
		if fi, err := os.Stat(p); err == nil {
			known = append(known, fi)
		}
	}
	var out []string
	filepath.WalkDir(r.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return nil
		}
		for _, k := range known {
			if os.SameFile(fi, k) {
				return nil
			}
		}
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(strings.TrimSpace(testSecret))) {
			out = append(out, strings.TrimPrefix(p, r.dir))
		}
		return nil
	})
	return out
}

// move runs MoveSession, and fails the test when it has not returned
// within a few seconds (a FIFO would hold it forever): then it opens the
// FIFO for writing so the read ends.
func (r *sessionRig) move(t *testing.T) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- r.c.MoveSession(testSessionID, r.from, r.to) }()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		t.Errorf("MoveSession has not returned after 5s: it waits on something the agent controls")
		if fd, err := syscall.Open(r.oldTranscript(), syscall.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			syscall.Close(fd)
		}
		return <-done
	}
}

// sessionModes are the two ways the agent runs: as the gateway's own user,
// and as another (nobody), which needs root.
func sessionModes(t *testing.T) []bool {
	if os.Geteuid() == 0 {
		return []bool{false, true}
	}
	t.Log("not root: the agent-user half is skipped")
	return []bool{false}
}

func modeName(agent bool) string {
	if agent {
		return "agent-user"
	}
	return "gateway-user"
}

// TestMoveSessionCopiesTheTranscript: the transcript reaches the new
// directory's folder, the agent's, and a second move leaves it alone.
func TestMoveSessionCopiesTheTranscript(t *testing.T) {
	for _, agent := range sessionModes(t) {
		t.Run(modeName(agent), func(t *testing.T) {
			r := newSessionRig(t, agent)
			if err := r.move(t); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(r.newTranscript())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(testTranscript, string(got)); diff != "" {
				t.Errorf("copied transcript (-want +got):\n%s", diff)
			}
			for path, mode := range map[string]os.FileMode{r.newDir(): 0o700 | fs.ModeDir, r.newTranscript(): 0o600} {
				fi, err := os.Lstat(path)
				if err != nil {
					t.Fatal(err)
				}
				st := fi.Sys().(*syscall.Stat_t)
				if fi.Mode() != mode || int(st.Uid) != r.uid || int(st.Gid) != r.gid {
					t.Errorf("%s: %v %d:%d, want %v %d:%d", strings.TrimPrefix(path, r.dir), fi.Mode(), st.Uid, st.Gid, mode, r.uid, r.gid)
				}
			}
			// The new directory's own copy is kept on a second move.
			r.write(t, r.newTranscript(), "kept\n", true)
			if err := r.move(t); err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(r.newTranscript()); string(got) != "kept\n" {
				t.Errorf("a second move overwrote the new directory's transcript: %q", got)
			}
			if got, _ := os.ReadFile(r.oldTranscript()); string(got) != testTranscript {
				t.Errorf("the old directory's transcript changed: %q", got)
			}
		})
	}
}

// TestMoveSessionRefusesWhatTheAgentPlanted: the agent owns its home and
// knows its session id, so it can put a link, a hard link or a FIFO where
// the gateway looks for the transcript or writes the copy. The gateway
// copies nothing it could not read as the agent, writes nowhere but the
// agent's own folder, and says why without naming a server path.
func TestMoveSessionRefusesWhatTheAgentPlanted(t *testing.T) {
	tests := []struct {
		name string
		// plant sets the trap and returns the files it put the secret in.
		plant func(t *testing.T, r *sessionRig) []string
		// refused: MoveSession must return an error.
		refused bool
	}{
		{
			name: "transcript is a link to the secret",
			plant: func(t *testing.T, r *sessionRig) []string {
				r.replace(t, r.oldTranscript(), r.secret)
				return nil
			},
			refused: true,
		},
		{
			name: "transcript is a hard link to the secret",
			plant: func(t *testing.T, r *sessionRig) []string {
				if err := os.Remove(r.oldTranscript()); err != nil {
					t.Fatal(err)
				}
				if err := os.Link(r.secret, r.oldTranscript()); err != nil {
					t.Skipf("no hard link: %v", err)
				}
				return nil
			},
			refused: true,
		},
		{
			// The agent could read it: refused for its second name alone.
			name: "transcript is a hard link to a readable file",
			plant: func(t *testing.T, r *sessionRig) []string {
				if err := os.Chmod(r.secret, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(filepath.Dir(r.secret), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Remove(r.oldTranscript()); err != nil {
					t.Fatal(err)
				}
				if err := os.Link(r.secret, r.oldTranscript()); err != nil {
					t.Skipf("no hard link: %v", err)
				}
				return nil
			},
			refused: true,
		},
		{
			name: "transcript is another user's readable file",
			plant: func(t *testing.T, r *sessionRig) []string {
				if os.Geteuid() != 0 {
					t.Skip("needs root to make a file of another user")
				}
				r.write(t, r.oldTranscript(), testSecret, false)
				if err := os.Chmod(r.oldTranscript(), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Lchown(r.oldTranscript(), r.uid+1, r.gid); err != nil {
					t.Fatal(err)
				}
				return []string{r.oldTranscript()}
			},
			refused: true,
		},
		{
			name: "transcript is a FIFO",
			plant: func(t *testing.T, r *sessionRig) []string {
				if err := os.Remove(r.oldTranscript()); err != nil {
					t.Fatal(err)
				}
				if err := syscall.Mkfifo(r.oldTranscript(), 0o600); err != nil {
					t.Fatal(err)
				}
				r.own(t, r.oldTranscript())
				return nil
			},
			refused: true,
		},
		{
			name: "old project folder is a link to a folder of the gateway's",
			plant: func(t *testing.T, r *sessionRig) []string {
				// A root-only folder holding a file of the session's name.
				private := filepath.Join(r.dir, "gateway", "sessions")
				r.mkdir(t, private, 0o700, false)
				planted := filepath.Join(private, testSessionID+".jsonl")
				r.write(t, planted, testSecret, false)
				r.replace(t, r.oldDir(), private)
				return []string{planted}
			},
			refused: true,
		},
		{
			name: "claude folder is a link to a home of the gateway's",
			plant: func(t *testing.T, r *sessionRig) []string {
				other := filepath.Join(r.dir, "gateway", "home", ".claude")
				dir := filepath.Join(other, "projects", claudeProjectDir(r.from))
				r.mkdir(t, dir, 0o700, false)
				planted := filepath.Join(dir, testSessionID+".jsonl")
				r.write(t, planted, testSecret, false)
				r.replace(t, filepath.Join(r.home, ".claude"), other)
				return []string{planted}
			},
			refused: true,
		},
		{
			name: "new project folder is a link to a folder of the gateway's",
			plant: func(t *testing.T, r *sessionRig) []string {
				// The agent's own transcript, written where the agent may not.
				r.write(t, r.oldTranscript(), testSecret, true)
				private := filepath.Join(r.dir, "gateway", "etc")
				r.mkdir(t, private, 0o755, false)
				r.mkdir(t, r.projects(), 0o700, true)
				r.replace(t, r.newDir(), private)
				return []string{r.oldTranscript()}
			},
			refused: true,
		},
		{
			name: "new transcript is a link to where the gateway's files are",
			plant: func(t *testing.T, r *sessionRig) []string {
				r.write(t, r.oldTranscript(), testSecret, true)
				r.mkdir(t, r.newDir(), 0o700, true)
				if err := os.Symlink(filepath.Join(r.dir, "gateway", "planted"), r.newTranscript()); err != nil {
					t.Fatal(err)
				}
				r.own(t, r.newTranscript())
				return []string{r.oldTranscript()}
			},
			// The new directory has a session of that id: left alone.
			refused: false,
		},
	}
	for _, agent := range sessionModes(t) {
		for _, tc := range tests {
			t.Run(modeName(agent)+"/"+tc.name, func(t *testing.T) {
				r := newSessionRig(t, agent)
				planted := tc.plant(t, r)
				err := r.move(t)
				if tc.refused && err == nil {
					t.Errorf("MoveSession succeeded")
				}
				if err != nil {
					t.Logf("refused: %v", err)
					for _, p := range []string{r.dir, claudeProjectDir(r.dir)} {
						if strings.Contains(err.Error(), p) {
							t.Errorf("the error names a server path: %v", err)
						}
					}
				}
				if got := r.copiesOfSecret(t, planted...); len(got) > 0 {
					t.Errorf("the secret was copied to %v", got)
				}
				if _, err := os.Lstat(filepath.Join(r.dir, "gateway", "planted")); err == nil {
					t.Errorf("a file was written through the agent's link")
				}
				if entries, _ := os.ReadDir(filepath.Join(r.dir, "gateway", "etc")); len(entries) > 0 {
					t.Errorf("a file was written into the gateway's folder through the agent's link: %v", entries[0].Name())
				}
			})
		}
	}
}

// TestClaudeConfigRoot: the part of claude's config directory below the
// agent's home is walked without links; the rest is the operator's.
func TestClaudeConfigRoot(t *testing.T) {
	tests := []struct {
		env       []string
		root, rel string
	}{
		{[]string{"HOME=/home/agent"}, "/home/agent", ".claude"},
		{[]string{"HOME=/home/agent", "CLAUDE_CONFIG_DIR=/home/agent/cfg/claude"}, "/home/agent", "cfg/claude"},
		{[]string{"HOME=/home/agent", "CLAUDE_CONFIG_DIR=/srv/claude"}, "/srv/claude", ""},
		{[]string{"HOME=/home/agent", "CLAUDE_CONFIG_DIR=/home/agent"}, "/home/agent", ""},
		{[]string{"HOME=/home/agent", "CLAUDE_CONFIG_DIR=/home/agent/../other"}, "/home/agent/../other", ""},
		{[]string{"CLAUDE_CONFIG_DIR=/srv/claude"}, "/srv/claude", ""},
		{[]string{"HOME=/home/agent", "CLAUDE_CONFIG_DIR="}, "/home/agent", ".claude"},
		{[]string{"PATH=/bin"}, "", ""},
	}
	for _, tc := range tests {
		c := &Claude{opts: Options{Env: tc.env}}
		root, rel := c.configRoot()
		if diff := cmp.Diff([2]string{tc.root, tc.rel}, [2]string{root, rel}); diff != "" {
			t.Errorf("%v (-want +got):\n%s", tc.env, diff)
		}
	}
}
