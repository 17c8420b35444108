package backends

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as a scriptable fake opencode CLI, like the fake
// claude (claude_fakecli_test.go): a wrapper script sets FAKE_OPENCODE_*
// and execs this binary, and this init, which runs before TestMain, acts
// as the CLI instead of running tests.
func init() {
	if mode := os.Getenv("FAKE_OPENCODE_MODE"); mode != "" {
		os.Exit(runFakeOpencode(mode))
	}
}

// opencodeFakeRecord is what the fake opencode saw, written to
// FAKE_OPENCODE_DIR.
type opencodeFakeRecord struct {
	Args  []string
	Stdin string
	Env   []string
	Cwd   string
	Pid   int
	// Instructions is the content of each file named by the
	// "instructions" of OPENCODE_CONFIG_CONTENT, in order.
	Instructions  []string
	GrandchildPid int
}

// Fake opencode modes.
const (
	opencodeFakeStream         = "stream"           // print FAKE_OPENCODE_STREAM and FAKE_OPENCODE_STDERR; exit FAKE_OPENCODE_EXIT
	opencodeFakeHang           = "hang"             // print a step_start line, then never finish
	opencodeFakeHangIgnoreTerm = "hang_ignore_term" // the same, ignoring SIGTERM
	opencodeFakeGrandchild     = "grandchild"       // start `sleep 300`, print step_start, hang
	opencodeFakeStepThenHang   = "step_then_hang"   // a whole finished step, then hang (killed between steps)
)

const opencodeFakeStepStart = `{"type":"step_start","timestamp":1,"sessionID":"ses_fake","part":{"type":"step-start","messageID":"msg_1","sessionID":"ses_fake"}}`

func runFakeOpencode(mode string) int {
	stdin, _ := io.ReadAll(os.Stdin)
	rec := opencodeFakeRecord{Args: os.Args[1:], Stdin: string(stdin), Env: os.Environ(), Pid: os.Getpid()}
	rec.Cwd, _ = os.Getwd()
	var config struct {
		Instructions []string `json:"instructions"`
	}
	if json.Unmarshal([]byte(os.Getenv("OPENCODE_CONFIG_CONTENT")), &config) == nil {
		for _, f := range config.Instructions {
			b, _ := os.ReadFile(f)
			rec.Instructions = append(rec.Instructions, string(b))
		}
	}
	if mode == opencodeFakeHangIgnoreTerm {
		signal.Ignore(syscall.SIGTERM)
	}
	if mode == opencodeFakeGrandchild {
		cmd := exec.Command("sleep", "300")
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "fake: start grandchild:", err)
			return 99
		}
		rec.GrandchildPid = cmd.Process.Pid
	}
	if err := opencodeWriteRecord(rec); err != nil {
		fmt.Fprintln(os.Stderr, "fake:", err)
		return 99
	}
	switch mode {
	case opencodeFakeStream:
		b, err := os.ReadFile(os.Getenv("FAKE_OPENCODE_STREAM"))
		if err != nil {
			fmt.Fprintln(os.Stderr, "fake:", err)
			return 99
		}
		os.Stdout.Write(b)
		io.WriteString(os.Stderr, os.Getenv("FAKE_OPENCODE_STDERR"))
		code, _ := strconv.Atoi(os.Getenv("FAKE_OPENCODE_EXIT"))
		return code
	case opencodeFakeHang, opencodeFakeHangIgnoreTerm, opencodeFakeGrandchild:
		fmt.Println(opencodeFakeStepStart)
		time.Sleep(time.Hour) // the hang under test
		return 0
	case opencodeFakeStepThenHang:
		fmt.Println(opencodeFakeStepStart)
		fmt.Println(`{"type":"text","sessionID":"ses_fake","part":{"type":"text","messageID":"msg_1","text":"Let me check."}}`)
		fmt.Println(`{"type":"step_finish","sessionID":"ses_fake","part":{"type":"step-finish","messageID":"msg_1","reason":"tool-calls","tokens":{"input":1,"output":1},"cost":0}}`)
		time.Sleep(time.Hour)
		return 0
	}
	fmt.Fprintln(os.Stderr, "fake: unknown mode", mode)
	return 99
}

func opencodeWriteRecord(rec opencodeFakeRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	dir := os.Getenv("FAKE_OPENCODE_DIR")
	tmp := filepath.Join(dir, "record.json.tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, "record.json"))
}

// opencodeFakeCLI writes a wrapper script that runs this test binary as a
// fake opencode in the given mode, and returns its path and the directory
// the fake records into. vars become more FAKE_OPENCODE_* settings.
func opencodeFakeCLI(t *testing.T, mode string, vars map[string]string) (bin, dir string) {
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
	set("FAKE_OPENCODE_MODE", mode)
	set("FAKE_OPENCODE_DIR", dir)
	for k, v := range vars {
		set("FAKE_OPENCODE_"+k, v)
	}
	fmt.Fprintf(&sb, "exec %s \"$@\"\n", shellQuote(self))
	bin = filepath.Join(dir, "opencode")
	src := filepath.Join(dir, "opencode.src")
	if err := os.WriteFile(src, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	// Copied by a child process, so no fork of a parallel test inherits a
	// descriptor open for writing on it ("text file busy").
	if out, err := exec.Command("install", "-m", "0755", src, bin).CombinedOutput(); err != nil {
		t.Fatalf("install fake CLI: %v: %s", err, out)
	}
	return bin, dir
}

// opencodeReadRecord returns what the fake opencode recorded.
func opencodeReadRecord(t *testing.T, dir string) opencodeFakeRecord {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "record.json"))
	if err != nil {
		t.Fatalf("the fake CLI left no record: %v", err)
	}
	var rec opencodeFakeRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	return rec
}
