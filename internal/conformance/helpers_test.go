//go:build conformance

package conformance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/agent"
	"github.com/agentgateway/gateway/internal/fakediscord"
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

// otherPids lists the pids in /proc but the test's own.
func otherPids() []int {
	var pids []int
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		var pid int
		if _, err := fmt.Sscanf(d.Name(), "%d", &pid); err == nil && pid != os.Getpid() {
			pids = append(pids, pid)
		}
	}
	return pids
}

// processesWith lists the pids whose environment contains entry (a
// KEY=value marker unique to one test's CLI runs).
func processesWith(entry string) []int {
	var pids []int
	for _, pid := range otherPids() {
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

// assertNoSecretsIn fails for each process whose environment holds one of
// secrets: the agent CLI must never see the gateway's (DESIGN decision 7).
func assertNoSecretsIn(t *testing.T, pids []int, secrets ...string) {
	t.Helper()
	for _, pid := range pids {
		env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		for _, secret := range secrets {
			if strings.Contains(string(env), secret) {
				t.Errorf("process %d has %q in its environment", pid, secret)
			}
		}
	}
}

// assertTimedOut checks that a turn ended by the query timeout and told the
// user so.
func assertTimedOut(t *testing.T, out agent.Outcome) {
	t.Helper()
	if !errors.Is(out.Err, backends.ErrTimeout) {
		t.Errorf("err = %v, want timeout", out.Err)
	}
	if !strings.Contains(out.Reply, "Timed out") {
		t.Errorf("reply = %q", out.Reply)
	}
}

// waitProcessesGone waits until no process carries marker, failing when
// ctx ends first.
func waitProcessesGone(ctx context.Context, t *testing.T, marker string) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond) // polling /proc; there is no event to wait on
	defer tick.Stop()
	for {
		left := processesWith(marker)
		if len(left) == 0 {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("processes left behind after the timeout: %v", left)
		}
		<-tick.C
	}
}

// buildGateway builds cmd/gateway into a temp dir and returns its path.
func buildGateway(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gateway")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/gateway").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

// gatewayEnv is the environment of `gateway run` against the fake Discord
// at fd and the fake model API at apiURL, with the real claude CLI; extra
// settings are appended.
func gatewayEnv(t *testing.T, fd *fakediscord.Server, apiURL, configDir string, extra ...string) []string {
	return append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + t.TempDir(),
		"CONFIG_DIR=" + configDir,
		"AGENT_CLI_PATH=" + cliBinary(t, "claude"),
		"PERMISSION_MODE=acceptEdits",
		"QUERY_TIMEOUT_MS=60000",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"CLAUDE_CODE_MAX_RETRIES=0",
		"DISABLE_AUTOUPDATER=1",
		"ANTHROPIC_API_KEY=" + apiKey,
		"ANTHROPIC_BASE_URL=" + apiURL,
		"DISCORD_BOT_TOKEN=" + fakediscord.DefaultToken,
		"DISCORD_API_BASE_URL=" + fd.APIBaseURL(),
		"DISCORD_GATEWAY_URL=" + fd.GatewayURL(),
		"LOG_FORMAT=json",
		// Before extra: exec.Cmd keeps the last value of a name, so a
		// test of threads turns them on; the others look for answers in
		// the channel.
		"THREADS=off",
	}, extra...)
}
