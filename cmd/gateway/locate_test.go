package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentgateway/gateway/backends"
)

// bin/gateway, built as `make build` builds it, finds the claude that
// `make chat` installed into .tools/ beside bin/, with no PATH entry for it
// and from any working directory: doctor reports it, and chat starts with
// it.
func TestBuiltGatewayFindsTheProjectsCLI(t *testing.T) {
	root := t.TempDir()
	bin := filepath.Join(root, "bin", "gateway")
	build := exec.Command(findGoTool(t), "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	version := backends.Tested["claude"]
	cliDir := filepath.Join(root, backends.ToolsDir, "claude", "node_modules", ".bin")
	if err := os.MkdirAll(cliDir, 0o755); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\necho '" + version + " (Claude Code)'\n"
	if err := os.WriteFile(filepath.Join(cliDir, "claude"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	elsewhere := t.TempDir()
	env := []string{
		"PATH=/usr/bin:/bin", "HOME=" + elsewhere,
		"ANTHROPIC_API_KEY=sk-ant-test", "CONFIG_DIR=" + filepath.Join(elsewhere, "config"),
		"PERMISSION_MODE=acceptEdits",
	}
	doctor := exec.Command(bin, "doctor")
	doctor.Dir, doctor.Env = elsewhere, env
	out, _ := doctor.CombinedOutput()
	want := "(" + filepath.Join(cliDir, "claude") + ")"
	if !strings.Contains(string(out), want) {
		t.Errorf("doctor does not find the CLI in .tools/ (want %q):\n%s", want, out)
	}

	// Without it, doctor and chat say the one pinned install, naming the
	// folder they look in; chat refuses before running a turn.
	if err := os.RemoveAll(filepath.Join(root, backends.ToolsDir)); err != nil {
		t.Fatal(err)
	}
	install := backends.InstallCommand("claude", root)
	doctor = exec.Command(bin, "doctor")
	doctor.Dir, doctor.Env = elsewhere, env
	out, _ = doctor.CombinedOutput()
	if !strings.Contains(string(out), install) {
		t.Errorf("doctor does not say %q:\n%s", install, out)
	}
	chat := exec.Command(bin, "chat", "-m", "hello")
	chat.Dir, chat.Env = elsewhere, env
	out, err := chat.CombinedOutput()
	if code := chat.ProcessState.ExitCode(); err == nil || code != 1 {
		t.Errorf("chat without the CLI: exit %d (%v), want 1", code, err)
	}
	if !strings.Contains(string(out), install) || strings.Contains(string(out), "cli_not_found") {
		t.Errorf("chat without the CLI should refuse before the turn with %q:\n%s", install, out)
	}
}
