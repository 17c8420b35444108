package agentuser

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentgateway/gateway/internal/proc"
)

// createUser adds a system user for the test, with its own group and a
// home directory, and removes both when the test ends. It skips the test
// where that is impossible.
func createUser(t *testing.T) *User {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test creates a user with useradd and runs a process as it (run it as root, e.g. in a container)")
	}
	useradd, err := exec.LookPath("useradd")
	if err != nil {
		t.Skip("needs useradd to create a user for the test (apt-get install passwd)")
	}
	userdel, err := exec.LookPath("userdel")
	if err != nil {
		t.Skip("needs userdel to remove the test user afterwards (apt-get install passwd)")
	}
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	name := "gwtest-agent-" + hex.EncodeToString(b[:])
	home := filepath.Join(os.TempDir(), name+"-home")
	out, err := exec.Command(useradd, "--system", "--no-create-home", "--user-group",
		"--home-dir", home, "--shell", "/usr/sbin/nologin", name).CombinedOutput()
	if err != nil {
		t.Fatalf("useradd %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command(userdel, name).CombinedOutput(); err != nil {
			t.Errorf("userdel %s: %v: %s", name, err, out)
		}
	})
	u, err := Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	chown(t, home, int(u.UID), int(u.GID))
	return u
}

func chown(t *testing.T, path string, uid, gid int) {
	t.Helper()
	if err := os.Chown(path, uid, gid); err != nil {
		t.Fatal(err)
	}
}

func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// prepareConfigDir lays out CONFIG_DIR as the README says: owned by the
// gateway (root) and readable by the agent's group, memory.md the agent's,
// .env and state the gateway's alone. It lives in the shared temp dir,
// since t.TempDir's parents are private to root.
func prepareConfigDir(t *testing.T, u *User) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "gwtest-config-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	chown(t, dir, 0, int(u.GID))
	chmod(t, dir, 0o750)
	files := map[string]string{
		"soul.md":       "be brief",
		"agents.md":     "# Cron Jobs\n",
		"memory.md":     "# Memory\n",
		".env":          "DISCORD_BOT_TOKEN=secret-token-value\n",
		"sessions.json": "{}\n",
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"soul.md", "agents.md"} {
		p := filepath.Join(dir, name)
		chown(t, p, 0, int(u.GID))
		chmod(t, p, 0o640)
	}
	chown(t, filepath.Join(dir, "memory.md"), int(u.UID), int(u.GID))
	return dir
}

// runAs runs a command as u through proc and returns its stdout and exit.
func runAs(t *testing.T, u *User, dir string, args ...string) (string, proc.Exit) {
	t.Helper()
	p, err := proc.Start(context.Background(), proc.Spec{
		Path:       args[0],
		Args:       args[1:],
		Dir:        dir,
		Env:        []string{"PATH=/usr/bin:/bin"},
		Credential: u.Credential(),
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(p.Stdout())
	if err != nil {
		t.Fatal(err)
	}
	exit, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out)), exit
}

func TestAgentUserForReal(t *testing.T) {
	u := createUser(t)
	dir := prepareConfigDir(t, u)
	setup := Setup{ConfigDir: dir, EnvFile: filepath.Join(dir, ".env"), TempDir: os.TempDir()}

	t.Run("process runs as the user", func(t *testing.T) {
		out, exit := runAs(t, u, dir, "id", "-u")
		if exit.Code != 0 || out != strconv.Itoa(int(u.UID)) {
			t.Fatalf("id -u = %q (%v), want %d", out, exit, u.UID)
		}
		out, _ = runAs(t, u, dir, "id", "-g")
		if out != strconv.Itoa(int(u.GID)) {
			t.Fatalf("id -g = %q, want %d", out, u.GID)
		}
		// Root's groups are dropped, not inherited.
		out, _ = runAs(t, u, dir, "id", "-G")
		if out != strconv.Itoa(int(u.GID)) {
			t.Fatalf("id -G = %q, want only %d", out, u.GID)
		}
	})

	t.Run("prepared dir passes, and the kernel agrees", func(t *testing.T) {
		if err := Check(u, setup); err != nil {
			t.Fatalf("Check: %v", err)
		}
		if out, exit := runAs(t, u, dir, "cat", ".env"); exit.Code == 0 || strings.Contains(out, "secret") {
			t.Errorf("the agent read .env: %q (%v)", out, exit)
		}
		if out, exit := runAs(t, u, dir, "cat", "soul.md"); exit.Code != 0 || out != "be brief" {
			t.Errorf("the agent cannot read soul.md: %q (%v)", out, exit)
		}
		if _, exit := runAs(t, u, dir, "sh", "-c", "echo fact >> memory.md"); exit.Code != 0 {
			t.Errorf("the agent cannot write memory.md (%v)", exit)
		}
		if _, exit := runAs(t, u, dir, "sh", "-c", "echo x >> agents.md"); exit.Code == 0 {
			t.Error("the agent wrote agents.md")
		}
		if _, exit := runAs(t, u, dir, "sh", "-c", "echo x > new.md"); exit.Code == 0 {
			t.Error("the agent created a file in CONFIG_DIR")
		}
	})

	t.Run("world-readable .env fails, naming it", func(t *testing.T) {
		env := filepath.Join(dir, ".env")
		chmod(t, env, 0o644)
		defer chmod(t, env, 0o600)
		err := Check(u, setup)
		var ce *CheckError
		if !errors.As(err, &ce) {
			t.Fatalf("Check = %v, want a *CheckError", err)
		}
		if len(ce.Problems) != 1 || ce.Problems[0].File != env || ce.Problems[0].Fix != "chmod 600 "+env {
			t.Errorf("problems = %+v, want one naming %s with chmod 600", ce.Problems, env)
		}
	})

	t.Run("memory.md not writable fails, naming it", func(t *testing.T) {
		mem := filepath.Join(dir, "memory.md")
		chown(t, mem, 0, 0)
		defer chown(t, mem, int(u.UID), int(u.GID))
		err := Check(u, setup)
		var ce *CheckError
		if !errors.As(err, &ce) {
			t.Fatalf("Check = %v, want a *CheckError", err)
		}
		if len(ce.Problems) != 1 || ce.Problems[0].File != mem || !strings.HasPrefix(ce.Problems[0].Fix, "chown "+u.Name+" "+mem) {
			t.Errorf("problems = %+v, want one naming %s with chown", ce.Problems, mem)
		}
	})
}
