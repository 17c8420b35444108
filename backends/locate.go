package backends

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// ToolsDir is the folder, next to the gateway's bin/, where `make chat`,
// `make run` and `make clis` install each pinned CLI: .tools/<name>, with
// the binary in node_modules/.bin.
const ToolsDir = ".tools"

// packages are the npm packages of the CLIs the gateway knows, installed at
// the version in Tested.
var packages = map[string]string{
	"claude":   "@anthropic-ai/claude-code",
	"codex":    "@openai/codex",
	"gemini":   "@google/gemini-cli",
	"opencode": "opencode-ai",
	"pi":       "@mariozechner/pi-coding-agent",
}

// Package returns the npm package of the named CLI, "" for one the gateway
// knows no package of.
func Package(name string) string { return packages[name] }

// InstallCommand is the one way the gateway tells a person to install the
// named CLI: the tested version into .tools/<name> of root, where the
// gateway looks for it (LocateCLI). root is the folder to name ("" names
// it relatively: run from the folder that holds bin/). Empty for a CLI
// without a package.
func InstallCommand(name, root string) string {
	pkg, ok := packages[name]
	if !ok {
		return ""
	}
	return fmt.Sprintf("npm install --prefix %s %s@%s", filepath.Join(root, ToolsDir, name), pkg, Tested[name])
}

// installHint is the not-found advice for the named CLI: the pinned
// install, or the setting that names another binary.
func installHint(name, root string) string {
	if cmd := InstallCommand(name, root); cmd != "" {
		return "install the tested version with `" + cmd + "` or set AGENT_CLI_PATH"
	}
	return "install it or set AGENT_CLI_PATH"
}

// NotFoundAdvice is what to do about a missing CLI, for a person at the
// gateway's own terminal (doctor, chat): the install command names the
// folder LocateCLI searches, so it works from any directory.
func NotFoundAdvice(name string) string {
	return installHint(name, ProjectRoot())
}

// ProjectRoot is the folder whose .tools/ the running gateway searches:
// the one above bin/ for a binary in a bin folder (the repository's root
// for bin/gateway, /usr/local for /usr/local/bin/gateway), else the
// binary's own folder. "" when the executable cannot be found.
func ProjectRoot() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	if resolved, err := filepath.EvalSymlinks(exe); err == nil {
		exe = resolved
	}
	return projectRoot(exe)
}

func projectRoot(exe string) string {
	dir := filepath.Dir(exe)
	if filepath.Base(dir) == "bin" {
		return filepath.Dir(dir)
	}
	return dir
}

// ErrCLINotFound is the error of a CLI that is neither where the settings
// say, nor in the project's .tools/, nor on PATH.
var ErrCLINotFound = errors.New("not found")

// LocateCLI finds the binary of the named CLI. An explicit binary
// (AGENT_CLI_PATH) is the only place looked at; otherwise the pinned
// install in .tools/<name> next to the gateway's bin/ comes first, as
// `make run` has always put it first on PATH, then PATH. Only the
// executable's own folder is searched, never the working directory, so
// nothing a process can write where the gateway happens to be started
// decides what it runs.
func LocateCLI(name, binary string) (string, error) {
	return locateCLI(ProjectRoot(), name, binary)
}

// locateCLI is LocateCLI with the project's root given.
func locateCLI(root, name, binary string) (string, error) {
	if binary != "" {
		path, err := exec.LookPath(binary)
		if err != nil {
			return "", fmt.Errorf("%s: %w", binary, ErrCLINotFound)
		}
		return path, nil
	}
	if _, ok := packages[name]; ok {
		if root != "" {
			path := filepath.Join(root, ToolsDir, name, "node_modules", ".bin", name)
			if isExecutable(path) {
				return path, nil
			}
		}
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, ErrCLINotFound)
	}
	return path, nil
}

// isExecutable reports whether path is a regular file (after links) that
// someone may execute.
func isExecutable(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.Mode().IsRegular() && info.Mode().Perm()&0o111 != 0
}
