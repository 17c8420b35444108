package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
)

// dumpableHelperEnv makes the test binary a helper process: "call" runs
// becomeNonDumpable first, "control" does not. Either prints its
// PR_GET_DUMPABLE and waits until its stdin closes.
const dumpableHelperEnv = "GATEWAY_TEST_DUMPABLE_HELPER"

func TestDumpableHelper(t *testing.T) {
	mode := os.Getenv(dumpableHelperEnv)
	if mode == "" {
		t.Skip("helper process for TestBecomeNonDumpable")
	}
	if mode == "call" {
		becomeNonDumpable(zerolog.New(os.Stderr))
	}
	d, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	if err != nil {
		fmt.Println("error", err)
	} else {
		fmt.Println(d)
	}
	// Wait for the parent to look at /proc/<pid>, then exit.
	bufio.NewReader(os.Stdin).ReadString('\n')
	os.Exit(0)
}

// TestBecomeNonDumpable: after becomeNonDumpable the kernel reports the
// process non-dumpable, and (checked when the test does not run as root,
// which may read anything) a process of the same user can no longer read
// its /proc/<pid>/environ, where the bot token would be; without the call
// it can.
func TestBecomeNonDumpable(t *testing.T) {
	if os.Getenv(dumpableHelperEnv) != "" {
		t.Skip("in the helper process")
	}
	for _, tt := range []struct {
		mode         string
		wantDumpable string
	}{
		{"call", "0"},
		{"control", "1"},
	} {
		t.Run(tt.mode, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestDumpableHelper$")
			cmd.Env = append(os.Environ(), dumpableHelperEnv+"="+tt.mode, "DISCORD_BOT_TOKEN=not-a-real-token")
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				stdin.Close()
				cmd.Wait()
			})
			line, err := bufio.NewReader(stdout).ReadString('\n')
			if err != nil {
				t.Fatalf("helper said %q: %v", line, err)
			}
			if got := strings.TrimSpace(line); got != tt.wantDumpable {
				t.Errorf("PR_GET_DUMPABLE in the helper = %s, want %s", got, tt.wantDumpable)
			}

			environ := "/proc/" + strconv.Itoa(cmd.Process.Pid) + "/environ"
			if os.Geteuid() == 0 {
				t.Logf("running as root, which reads %s either way: only PR_GET_DUMPABLE is checked", environ)
				return
			}
			b, err := os.ReadFile(environ)
			switch {
			case tt.mode == "call" && !errors.Is(err, fs.ErrPermission):
				t.Errorf("read %s of a non-dumpable process of the same user: %d bytes, %v; want permission denied", environ, len(b), err)
			case tt.mode == "control" && (err != nil || !strings.Contains(string(b), "DISCORD_BOT_TOKEN=")):
				t.Errorf("read %s of a dumpable process of the same user: %v; want its environment", environ, err)
			}
		})
	}
}
