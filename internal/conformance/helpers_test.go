//go:build conformance

package conformance

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// cliBinary is the absolute path of a pinned agent CLI, from <NAME>_BIN
// (CLAUDE_BIN, CODEX_BIN...), which `make conformance` sets after
// installing the CLI.
func cliBinary(t *testing.T, name string) string {
	t.Helper()
	env := strings.ToUpper(name) + "_BIN"
	bin := os.Getenv(env)
	if bin == "" {
		t.Fatalf("%s is not set: run `make conformance`, which installs the pinned %s CLI", env, name)
	}
	abs, err := filepath.Abs(bin)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// processesWith lists the pids whose environment contains entry (a
// KEY=value marker unique to one test's CLI runs).
func processesWith(entry string) []int {
	var pids []int
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		var pid int
		if _, err := fmt.Sscanf(d.Name(), "%d", &pid); err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil {
			continue
		}
		for _, kv := range strings.Split(string(env), "\x00") {
			if kv == entry {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}
