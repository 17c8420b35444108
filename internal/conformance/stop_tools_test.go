//go:build conformance

package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/fakeapi"
)

// Stop while a shell tool runs. With warm processes a stop is soft: the
// CLI is interrupted and kept for the next prompt. The turn may only be
// reported stopped once the tool's commands are gone too: a build or a
// `sleep` the agent started must not keep running (and writing files)
// after the user was told it stopped.

// stopToolsAgent is one warm backend on its real CLI, its fake model API
// scripted with a shell call running command and then texts.
type stopToolsAgent struct {
	backend backends.Backend
	dir     string
	request func(prompt, session string) backends.Request
}

type stopToolsCase struct {
	name  string
	start func(t *testing.T, command string) stopToolsAgent
}

// stopToolsAfter is what the model answers after the stop: twice, in case
// a CLI sends the killed tool's result to the model before it ends the
// turn.
var stopToolsAfter = []fakeapi.Turn{fakeapi.Text("After the stop."), fakeapi.Text("After the stop.")}

func stopToolsCases() []stopToolsCase {
	bypass := func(r backends.Request) backends.Request { r.PermissionMode = "bypassPermissions"; return r }
	return []stopToolsCase{
		{name: "claude", start: func(t *testing.T, command string) stopToolsAgent {
			turns := append([]fakeapi.Turn{fakeapi.ToolUse("Bash", map[string]any{"command": command, "description": "wait"})}, stopToolsAfter...)
			api := fakeapi.StartAnthropic(t, turns...)
			t.Cleanup(func() {
				if reqs := api.MainRequests(); t.Failed() && len(reqs) > 1 {
					t.Logf("the model's second request: %+v", reqs[1].Messages())
				}
			})
			b, dir := stopToolsClaude(t, api)
			return stopToolsAgent{backend: b, dir: dir, request: func(prompt, session string) backends.Request {
				return bypass(backends.Request{Prompt: prompt, SessionID: session, Key: "chan-1", WorkDir: dir, MaxTurns: 10})
			}}
		}},
		{name: "codex", start: func(t *testing.T, command string) stopToolsAgent {
			input, _ := json.Marshal(map[string]any{"cmd": command})
			turns := append([]fakeapi.Turn{{ToolCalls: []fakeapi.ToolCall{{Name: "exec_command", Input: input}}}}, stopToolsAfter...)
			b := codexAppBackend(t, fakeapi.StartResponses(t, turns...))
			dir := t.TempDir()
			return stopToolsAgent{backend: b, dir: dir, request: func(prompt, session string) backends.Request {
				r := codexAppRequest(dir, prompt)
				r.SessionID = session
				return bypass(r)
			}}
		}},
		{name: "gemini", start: func(t *testing.T, command string) stopToolsAgent {
			turns := append([]fakeapi.Turn{fakeapi.ToolUse("run_shell_command", map[string]any{"command": command})}, stopToolsAfter...)
			a := acpGeminiWith(t, cliBinary(t, "gemini"), false, acpWarm(), turns...)
			return stopToolsAgent{backend: a.backend, dir: a.work, request: func(prompt, session string) backends.Request {
				return bypass(backends.Request{Prompt: prompt, SessionID: session, Key: "c1", WorkDir: a.work, Model: geminiModel})
			}}
		}},
		{name: "opencode", start: func(t *testing.T, command string) stopToolsAgent {
			turns := append([]fakeapi.Turn{fakeapi.ToolUse("bash", map[string]any{"command": command, "description": "wait"})}, stopToolsAfter...)
			a := acpOpencodeWith(t, cliBinary(t, "opencode"), acpWarm(), turns...)
			return stopToolsAgent{backend: a.backend, dir: a.work, request: func(prompt, session string) backends.Request {
				return bypass(backends.Request{Prompt: prompt, SessionID: session, Key: "c1", WorkDir: a.work})
			}}
		}},
		{name: "pi", start: func(t *testing.T, command string) stopToolsAgent {
			api := fakeapi.StartAnthropic(t, append([]fakeapi.Turn{fakeapi.ToolUse("bash", map[string]any{"command": command})}, stopToolsAfter...)...)
			b := piRPCBackend(t, piRPCHome(t, api))
			dir := t.TempDir()
			return stopToolsAgent{backend: b, dir: dir, request: func(prompt, session string) backends.Request {
				return bypass(piRPCReq(dir, prompt, session))
			}}
		}},
	}
}

// stopToolsClaude is the claude adapter with warm processes on against
// api, allowed to skip permissions as root (IS_SANDBOX), and a WorkDir.
func stopToolsClaude(t *testing.T, api *fakeapi.Anthropic) (backends.Backend, string) {
	t.Helper()
	b, err := backends.New("claude", backends.Options{
		Binary: cliBinary(t, "claude"),
		Env: []string{
			"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "IS_SANDBOX=1",
			"ANTHROPIC_BASE_URL=" + api.URL(), "ANTHROPIC_API_KEY=" + apiKey,
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "CLAUDE_CODE_MAX_RETRIES=0",
			"DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1", "DISABLE_ERROR_REPORTING=1",
		},
		KillGrace: 2 * time.Second,
		Log:       zerolog.New(zerolog.NewTestWriter(t)),
		Warm:      backends.WarmOptions{Interactive: true, KeepAlive: time.Hour, MaxProcesses: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.(io.Closer).Close() })
	return b, t.TempDir()
}

// stopToolsCommands are the shell commands stopped: the sleep in the
// foreground, and in a job the shell waits for (it outlives a shell that
// is killed on its own). claude refuses a command that starts with sleep.
var stopToolsCommands = []struct{ name, format string }{
	{"foreground", "echo waiting && sleep %s && touch late.txt"},
	{"job", "echo waiting; (sleep %s && touch late.txt) & wait"},
	// A program that ignores SIGTERM (the ignored signal is inherited).
	{"ignores-term", "echo waiting; trap '' TERM; sleep %s && touch late.txt"},
}

func TestConformanceStopEndsToolCommands(t *testing.T) {
	for i, sc := range stopToolsCases() {
		for j, cmd := range stopToolsCommands {
			t.Run(sc.name+"/"+cmd.name, func(t *testing.T) {
				// A duration no other test uses marks this run's commands.
				marker := fmt.Sprintf("37.%d%d%d", 100+i, j, os.Getpid()%1000)
				stopTools(t, sc.start(t, fmt.Sprintf(cmd.format, marker)), marker)
			})
		}
	}
}

// stopTools stops a's turn while its shell command, marked by marker,
// runs, and checks what is left.
func stopTools(t *testing.T, a stopToolsAgent, marker string) {
	t.Cleanup(func() { killMarked(marker) })

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var session string
	done := make(chan error, 1)
	go func() {
		_, err := a.backend.Run(ctx, a.request("Wait a while.", ""), func(e backends.Event) {
			if e.Kind == backends.EventInit && e.SessionID != "" {
				session = e.SessionID
			}
		})
		done <- err
	}()
	sleeper := waitForSleep(t, marker, done)
	before := warmProcesses(a.backend)
	group, _ := warmPgid(sleeper)
	cli := parentOf(group)
	t.Logf("while the tool runs: the CLI %d's descendants: %s", cli, descendants(cli))
	cancel()
	stopped := time.Now()
	var err error
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not return within 60s of the stop")
	}
	returned := time.Now()
	t.Logf("Run returned %v after the stop", returned.Sub(stopped).Round(time.Millisecond))
	var be *backends.Error
	if !errors.As(err, &be) || be.Kind != backends.KindCanceled {
		t.Fatalf("stopped turn: err = %v, want KindCanceled", err)
	}

	if running := markedProcesses(marker); len(running) > 0 {
		t.Errorf("the turn was reported stopped while its tool's commands still ran: %v", running)
	}
	left := waitMarkedGone(marker, 5*time.Second)
	if len(left) > 0 {
		t.Errorf("%d s after Run returned, the tool's commands still run: %v (the sleep was pid %d)", 5, left, sleeper)
	} else {
		t.Logf("the tool's commands were gone %v after Run returned", time.Since(returned).Round(time.Millisecond))
	}
	if _, err := os.Stat(filepath.Join(a.dir, "late.txt")); err == nil {
		t.Error("late.txt exists: the stopped command went on")
	}

	if w := warmProcesses(a.backend); w.Processes != before.Processes || w.Processes == 0 {
		t.Errorf("warm processes %+v after the stop, %+v before: want the process kept", w, before)
	}
	res, err := a.backend.Run(context.Background(), a.request("Are you there?", session), nil)
	if err != nil {
		t.Fatalf("turn after the stop: %v", err)
	}
	t.Logf("idle after the next turn: the CLI %d's descendants: %s", cli, descendants(cli))
	if res.Text != "After the stop." || !res.Warm || (session != "" && res.SessionID != session) {
		t.Errorf("turn after the stop = %+v, want %q warm in session %q", res, "After the stop.", session)
	}
}

func warmProcesses(b backends.Backend) backends.WarmStats {
	return b.(interface{ Warm() backends.WarmStats }).Warm()
}

// waitForSleep waits until a `sleep <marker>` process runs and returns its
// pid; it fails when the turn ends first.
func waitForSleep(t *testing.T, marker string, done <-chan error) int {
	t.Helper()
	deadline := time.After(90 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond) // polling /proc; there is no event to wait on
	defer tick.Stop()
	for {
		for _, pid := range markedProcesses(marker) {
			if args := procArgs(pid); len(args) == 2 && filepath.Base(args[0]) == "sleep" {
				return pid
			}
		}
		select {
		case err := <-done:
			t.Fatalf("the turn ended before the tool ran: %v", err)
		case <-deadline:
			t.Fatal("no sleep process within 90s")
		case <-tick.C:
		}
	}
}

// markedProcesses lists the live processes (not zombies) with marker as
// one of their arguments or inside one (sh -c "sleep <marker> && ...").
func markedProcesses(marker string) []int {
	var pids []int
	for _, pid := range otherPids() {
		if _, ok := warmPgid(pid); !ok {
			continue // gone or a zombie
		}
		for _, arg := range procArgs(pid) {
			if strings.Contains(arg, marker) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

func procArgs(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
}

// waitMarkedGone polls until no process carries marker or within has
// passed, and returns what is left.
func waitMarkedGone(marker string, within time.Duration) []int {
	deadline := time.Now().Add(within)
	tick := time.NewTicker(20 * time.Millisecond) // polling /proc; there is no event to wait on
	defer tick.Stop()
	for {
		left := markedProcesses(marker)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		<-tick.C
	}
}

// killMarked ends what a failed run left behind, so it does not outlive
// the test.
func killMarked(marker string) {
	for _, pid := range markedProcesses(marker) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// parentOf is pid's parent.
func parentOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	var ppid int
	fmt.Sscan(f[1], &ppid)
	return ppid
}

// descendants describes the live descendants of root: pid, group, parent
// and command.
func descendants(root int) string {
	var out []string
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		var pid int
		if _, err := fmt.Sscanf(d.Name(), "%d", &pid); err != nil {
			continue
		}
		g, ok := warmPgid(pid)
		if !ok {
			continue
		}
		for p := parentOf(pid); p > 1; p = parentOf(p) {
			if p == root {
				args := procArgs(pid)
				cmd := strings.Join(args, " ")
				cmd = cmd[:min(len(cmd), 80)]
				out = append(out, fmt.Sprintf("%d(pgid %d, ppid %d) %q", pid, g, parentOf(pid), cmd))
				break
			}
		}
	}
	return strings.Join(out, "; ")
}
