package backends

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// fakeInstall puts an executable named name at root's .tools/<name>, as
// the pinned install leaves it, and returns its path.
func fakeInstall(t *testing.T, root, name string) string {
	t.Helper()
	dir := filepath.Join(root, ToolsDir, name, "node_modules", ".bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte("#!/bin/sh\necho 1.0.0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLocateCLIFindsThePinnedInstallFirst(t *testing.T) {
	root := t.TempDir()
	onPath := t.TempDir()
	if err := os.WriteFile(filepath.Join(onPath, "claude"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", onPath)

	if got, err := locateCLI(root, "claude", ""); err != nil || got != filepath.Join(onPath, "claude") {
		t.Fatalf("without .tools: locateCLI = %q, %v; want the one on PATH", got, err)
	}
	pinned := fakeInstall(t, root, "claude")
	if got, err := locateCLI(root, "claude", ""); err != nil || got != pinned {
		t.Fatalf("with .tools: locateCLI = %q, %v; want %q", got, err, pinned)
	}
	// AGENT_CLI_PATH is the only place looked at when set.
	if _, err := locateCLI(root, "claude", filepath.Join(root, "elsewhere")); !errors.Is(err, ErrCLINotFound) {
		t.Fatalf("with a missing AGENT_CLI_PATH: err = %v, want ErrCLINotFound", err)
	}
	// A CLI without a package (an ACP agent) is looked up on PATH only.
	fakeInstall(t, root, "acp")
	if _, err := locateCLI(root, "acp", ""); !errors.Is(err, ErrCLINotFound) {
		t.Fatalf("acp: err = %v, want ErrCLINotFound (no .tools lookup)", err)
	}
}

func TestLocateCLISkipsAFileThatCannotRun(t *testing.T) {
	root := t.TempDir()
	t.Setenv("PATH", t.TempDir())
	path := fakeInstall(t, root, "codex")
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := locateCLI(root, "codex", ""); !errors.Is(err, ErrCLINotFound) {
		t.Fatalf("err = %v, want ErrCLINotFound", err)
	}
}

// The install command is the Makefile's pinned install, for every CLI the
// Makefile pins: same package, same version, same folder.
func TestInstallCommandIsTheMakefilesPin(t *testing.T) {
	makefile, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	for name := range Tested {
		pkg := regexp.MustCompile(`(?m)^` + name + `_PKG\s*:=\s*(\S+)$`).FindSubmatch(makefile)
		version := regexp.MustCompile(`(?m)^` + name + `_VERSION\s*:=\s*(\S+)$`).FindSubmatch(makefile)
		if pkg == nil || version == nil {
			t.Errorf("the Makefile pins no package or version for %s", name)
			continue
		}
		want := "npm install --prefix /srv/gw/.tools/" + name + " " + string(pkg[1]) + "@" + string(version[1])
		if got := InstallCommand(name, "/srv/gw"); got != want {
			t.Errorf("InstallCommand(%s) = %q, want %q", name, got, want)
		}
	}
	if got := InstallCommand("acp", "/srv/gw"); got != "" {
		t.Errorf("InstallCommand(acp) = %q, want none", got)
	}
}

func TestProjectRoot(t *testing.T) {
	for exe, want := range map[string]string{
		"/srv/gw/bin/gateway":    "/srv/gw",
		"/usr/local/bin/gateway": "/usr/local",
		"/tmp/gateway":           "/tmp",
		"/opt/gw/gateway":        "/opt/gw",
	} {
		if got := projectRoot(exe); got != want {
			t.Errorf("projectRoot(%s) = %s, want %s", exe, got, want)
		}
	}
}

// docs/backends.md gives each CLI's install line as the gateway does.
func TestBackendsDocGivesTheInstallCommands(t *testing.T) {
	doc, err := os.ReadFile("../docs/backends.md")
	if err != nil {
		t.Fatal(err)
	}
	for name := range Tested {
		if cmd := InstallCommand(name, ""); !strings.Contains(string(doc), cmd+"\n") {
			t.Errorf("docs/backends.md lacks the line %q", cmd)
		}
	}
}
