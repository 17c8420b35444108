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

// The test binary doubles as a scriptable fake claude CLI: a small shell
// wrapper (see fakeCLI) sets FAKE_CLAUDE_* and execs this binary, whose
// TestMain then acts as the CLI instead of running tests. The wrapper sets
// the variables itself because the adapter passes only allowlisted
// variables to the CLI.
func TestMain(m *testing.M) {
	if mode := os.Getenv("FAKE_CLAUDE_MODE"); mode == fakeInteractive {
		os.Exit(runFakeInteractive())
	} else if mode != "" {
		os.Exit(runFakeClaude(mode))
	}
	os.Exit(m.Run())
}

// fakeRecord is what the fake CLI saw, written to FAKE_CLAUDE_DIR.
type fakeRecord struct {
	Args          []string
	Stdin         string
	Env           []string
	Cwd           string
	Pid           int
	SystemPrompt  string // content of the --append-system-prompt-file file
	GrandchildPid int
}

// Fake modes.
const (
	fakeStream         = "stream"           // print FAKE_CLAUDE_STREAM, FAKE_CLAUDE_STDERR; exit FAKE_CLAUDE_EXIT
	fakeStreamHang     = "stream_hang"      // print FAKE_CLAUDE_STREAM, then never finish (claude still retrying)
	fakeHang           = "hang"             // print an init line, then never finish
	fakeHangIgnoreTerm = "hang_ignore_term" // same, ignoring SIGTERM
	fakeGrandchild     = "grandchild"       // start `sleep 300`, print init, hang
	fakeCrash          = "crash"            // init, a delta, half a line, stderr, exit 3
	fakeGarbage        = "garbage"          // FAKE_CLAUDE_STREAM with non-JSON lines between
	fakeLongLine       = "longline"         // a 10 MB text line, a 20 MB tool result line, a result
)

const fakeInit = `{"type":"system","subtype":"init","cwd":"/w","session_id":"fake-session","tools":["Read"],"model":"claude-fake"}`

func runFakeClaude(mode string) int {
	stdin, _ := io.ReadAll(os.Stdin)
	rec := fakeRecord{Args: os.Args[1:], Stdin: string(stdin), Env: os.Environ(), Pid: os.Getpid()}
	rec.Cwd, _ = os.Getwd()
	for i, a := range os.Args[:len(os.Args)-1] {
		if a == "--append-system-prompt-file" {
			b, _ := os.ReadFile(os.Args[i+1])
			rec.SystemPrompt = string(b)
		}
	}
	if mode == fakeHangIgnoreTerm {
		signal.Ignore(syscall.SIGTERM)
	}
	if mode == fakeGrandchild {
		cmd := exec.Command("sleep", "300")
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, "fake: start grandchild:", err)
			return 99
		}
		rec.GrandchildPid = cmd.Process.Pid
	}
	if err := writeRecord(rec); err != nil {
		fmt.Fprintln(os.Stderr, "fake:", err)
		return 99
	}

	out := os.Stdout
	switch mode {
	case fakeStream, fakeGarbage:
		b, err := os.ReadFile(os.Getenv("FAKE_CLAUDE_STREAM"))
		if err != nil {
			fmt.Fprintln(os.Stderr, "fake:", err)
			return 99
		}
		for i, line := range strings.SplitAfter(string(b), "\n") {
			if mode == fakeGarbage {
				fmt.Fprintf(out, "garbage line %d: not json {\n\n[1,2\n", i)
			}
			io.WriteString(out, line)
		}
		if mode == fakeGarbage {
			io.WriteString(out, "\ntrailing garbage without newline")
		}
		io.WriteString(os.Stderr, os.Getenv("FAKE_CLAUDE_STDERR"))
		code, _ := strconv.Atoi(os.Getenv("FAKE_CLAUDE_EXIT"))
		return code
	case fakeStreamHang:
		b, err := os.ReadFile(os.Getenv("FAKE_CLAUDE_STREAM"))
		if err != nil {
			fmt.Fprintln(os.Stderr, "fake:", err)
			return 99
		}
		out.Write(b)
		time.Sleep(time.Hour) // still retrying, as far as the adapter can tell
		return 0
	case fakeHang, fakeHangIgnoreTerm, fakeGrandchild:
		fmt.Fprintln(out, fakeInit)
		time.Sleep(time.Hour) // the hang under test
		return 0
	case fakeCrash:
		fmt.Fprintln(out, fakeInit)
		fmt.Fprintln(out, `{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"partial"}},"session_id":"fake-session","parent_tool_use_id":null}`)
		io.WriteString(out, `{"type":"assistant","message":{"id":"msg_1","content":[{"type":"te`)
		io.WriteString(os.Stderr, "Error: fake crash\n    at main (cli.js:1:1)\n")
		return 3
	case fakeLongLine:
		fmt.Fprintln(out, fakeInit)
		long := strings.Repeat("x", 10<<20)
		fmt.Fprintf(out, `{"type":"assistant","message":{"id":"msg_1","model":"claude-fake","content":[{"type":"text","text":%q}]},"session_id":"fake-session","parent_tool_use_id":null}`+"\n", long)
		huge := strings.Repeat("y", 20<<20)
		fmt.Fprintf(out, `{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":%q}]},"session_id":"fake-session","parent_tool_use_id":null}`+"\n", huge)
		fmt.Fprintln(out, `{"type":"result","subtype":"success","is_error":false,"num_turns":1,"result":"done","session_id":"fake-session","total_cost_usd":0.5}`)
		return 0
	}
	fmt.Fprintln(os.Stderr, "fake: unknown mode", mode)
	return 99
}

func writeRecord(rec fakeRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	dir := os.Getenv("FAKE_CLAUDE_DIR")
	tmp := filepath.Join(dir, "record.json.tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, "record.json"))
}

// fakeCLI writes a wrapper script that runs this test binary as a fake
// claude in the given mode, and returns its path and the directory the
// fake records into. vars become more FAKE_CLAUDE_* settings.
func fakeCLI(t *testing.T, mode string, vars map[string]string) (bin, dir string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	var sb strings.Builder
	sb.WriteString("#!/bin/sh\n")
	set := func(k, v string) {
		fmt.Fprintf(&sb, "export %s=%s\n", k, shellQuote(v))
	}
	// The race detector otherwise sleeps 1 s before a clean exit.
	set("GORACE", "atexit_sleep_ms=0")
	set("FAKE_CLAUDE_MODE", mode)
	set("FAKE_CLAUDE_DIR", dir)
	for k, v := range vars {
		set("FAKE_CLAUDE_"+k, v)
	}
	fmt.Fprintf(&sb, "exec %s \"$@\"\n", shellQuote(self))
	bin = filepath.Join(dir, "claude")
	// The executable is written by a child process: a file this process had
	// open for writing can be inherited by a parallel test's fork, and
	// exec'ing it then fails with "text file busy".
	src := filepath.Join(dir, "claude.src")
	if err := os.WriteFile(src, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("install", "-m", "0755", src, bin).CombinedOutput(); err != nil {
		t.Fatalf("install fake CLI: %v: %s", err, out)
	}
	return bin, dir
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// readRecord returns what the fake CLI recorded.
func readRecord(t *testing.T, dir string) fakeRecord {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "record.json"))
	if err != nil {
		t.Fatalf("the fake CLI left no record: %v", err)
	}
	var rec fakeRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

// waitRecord waits until the fake CLI has written its record.
func waitRecord(t *testing.T, dir string, d time.Duration) fakeRecord {
	t.Helper()
	waitFor(t, d, "the fake CLI to start", func() bool {
		_, err := os.Stat(filepath.Join(dir, "record.json"))
		return err == nil
	})
	return readRecord(t, dir)
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		<-tick.C
	}
}

// processGone reports whether pid is gone or a zombie waiting for init.
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); err == syscall.ESRCH {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && len(s) > i+2 && s[i+2] == 'Z'
}
