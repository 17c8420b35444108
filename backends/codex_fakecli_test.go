package backends

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as a scriptable fake codex CLI, the classic
// helper-process way: a wrapper script (codexFakeCLI) sets CODEX_FAKE_*
// and execs this binary with -test.run selecting TestCodexFakeCLIProcess,
// which then acts as the CLI and exits instead of testing. (The package's
// TestMain belongs to the fake claude.)
func TestCodexFakeCLIProcess(t *testing.T) {
	mode := os.Getenv("CODEX_FAKE_MODE")
	if mode == "" {
		t.Skip("only runs as the fake codex CLI")
	}
	args := os.Args
	if i := slices.Index(args, "--"); i >= 0 {
		args = args[i+1:]
	}
	os.Exit(runFakeCodex(mode, args))
}

// codexFakeRecord is what the fake CLI saw, written to CODEX_FAKE_DIR.
type codexFakeRecord struct {
	Args          []string
	Stdin         string
	Env           []string
	Cwd           string
	Pid           int
	Profile       string // content of the -p profile file in CODEX_HOME
	GrandchildPid int
}

// Fake codex modes.
const (
	codexFakeStream         = "stream"           // print CODEX_FAKE_STREAM, CODEX_FAKE_STDERR; exit CODEX_FAKE_EXIT
	codexFakeHang           = "hang"             // print thread.started, then never finish
	codexFakeHangIgnoreTerm = "hang_ignore_term" // same, ignoring SIGTERM
	codexFakeGrandchild     = "grandchild"       // start `sleep 300`, print thread.started, hang
)

const codexFakeStart = `{"type":"thread.started","thread_id":"0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"}`

func runFakeCodex(mode string, args []string) int {
	stdin, _ := io.ReadAll(os.Stdin)
	rec := codexFakeRecord{Args: args, Stdin: string(stdin), Env: os.Environ(), Pid: os.Getpid()}
	rec.Cwd, _ = os.Getwd()
	if i := slices.Index(args, "-p"); i >= 0 && i+1 < len(args) {
		home := os.Getenv("CODEX_HOME")
		if home == "" {
			home = filepath.Join(os.Getenv("HOME"), ".codex")
		}
		b, err := os.ReadFile(filepath.Join(home, args[i+1]+".config.toml"))
		if err != nil {
			fmt.Fprintln(os.Stderr, "fake: profile:", err)
			return 98
		}
		rec.Profile = string(b)
	}
	if mode == codexFakeHangIgnoreTerm {
		signal.Ignore(syscall.SIGTERM)
	}
	if mode == codexFakeGrandchild {
		cmd := exec.Command("sleep", "300")
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "fake: start grandchild:", err)
			return 99
		}
		rec.GrandchildPid = cmd.Process.Pid
	}
	b, _ := json.Marshal(rec)
	dir := os.Getenv("CODEX_FAKE_DIR")
	if err := os.WriteFile(filepath.Join(dir, "record.json.tmp"), b, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, "fake:", err)
		return 99
	}
	if err := os.Rename(filepath.Join(dir, "record.json.tmp"), filepath.Join(dir, "record.json")); err != nil {
		fmt.Fprintln(os.Stderr, "fake:", err)
		return 99
	}

	switch mode {
	case codexFakeStream:
		if f := os.Getenv("CODEX_FAKE_STREAM"); f != "" {
			b, err := os.ReadFile(f)
			if err != nil {
				fmt.Fprintln(os.Stderr, "fake:", err)
				return 99
			}
			os.Stdout.Write(b)
		}
		io.WriteString(os.Stderr, os.Getenv("CODEX_FAKE_STDERR"))
		code, _ := strconv.Atoi(os.Getenv("CODEX_FAKE_EXIT"))
		return code
	case codexFakeHang, codexFakeHangIgnoreTerm, codexFakeGrandchild:
		fmt.Println(codexFakeStart)
		time.Sleep(time.Hour) // the hang under test
		return 0
	}
	fmt.Fprintln(os.Stderr, "fake: unknown mode", mode)
	return 99
}

// codexFakeCLI writes a wrapper script that runs this test binary as a
// fake codex in the given mode, and returns its path and the directory
// the fake records into. vars become more CODEX_FAKE_* settings.
func codexFakeCLI(t *testing.T, mode string, vars map[string]string) (bin, dir string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	var sb strings.Builder
	sb.WriteString("#!/bin/sh\n")
	set := func(k, v string) { fmt.Fprintf(&sb, "export %s=%s\n", k, shellQuote(v)) }
	set("GORACE", "atexit_sleep_ms=0")
	set("CODEX_FAKE_MODE", mode)
	set("CODEX_FAKE_DIR", dir)
	for k, v := range vars {
		set("CODEX_FAKE_"+k, v)
	}
	fmt.Fprintf(&sb, "exec %s -test.run='^TestCodexFakeCLIProcess$' -- \"$@\"\n", shellQuote(self))
	bin = filepath.Join(dir, "codex")
	// Written by a child process (install): see fakeCLI on ETXTBSY.
	src := filepath.Join(dir, "codex.src")
	if err := os.WriteFile(src, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("install", "-m", "0755", src, bin).CombinedOutput(); err != nil {
		t.Fatalf("install fake CLI: %v: %s", err, out)
	}
	return bin, dir
}

// codexReadRecord returns what the fake CLI recorded.
func codexReadRecord(t *testing.T, dir string) codexFakeRecord {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "record.json"))
	if err != nil {
		t.Fatalf("the fake CLI left no record: %v", err)
	}
	var rec codexFakeRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

// codexWriteStream writes lines to a file for CODEX_FAKE_STREAM.
func codexWriteStream(t *testing.T, lines ...string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "stream.jsonl")
	if err := os.WriteFile(f, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}
