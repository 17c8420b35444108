package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/fakediscord"
)

// A [FAIL] line means a command is not ready: the verdict never says
// "ready" under one.
func TestCommandReadinessCountsEveryFailure(t *testing.T) {
	tests := []struct {
		name   string
		checks []check
		want   []string
	}{
		{"all well", []check{{Name: "config", OK: true}}, []string{"chat: ready", "run: ready"}},
		{"a warning is not a failure", []check{{Name: "security", Warning: true}}, []string{"chat: ready", "run: ready"}},
		{"a failure with its need", []check{{Name: "agent-cli", need: "the claude CLI"}},
			[]string{"chat: needs the claude CLI", "run: needs the claude CLI"}},
		{"run's own need", []check{{Name: "discord", need: "DISCORD_BOT_TOKEN", runOnly: true, Warning: true}},
			[]string{"chat: ready", "run: needs DISCORD_BOT_TOKEN"}},
		{"a failure that names no need", []check{{Name: "cost"}},
			[]string{"chat: needs the cost problem above fixed", "run: needs the cost problem above fixed"}},
		{"run's failure that names no need", []check{{Name: "schedule", runOnly: true}},
			[]string{"chat: ready", "run: needs the schedule problem above fixed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, r := range commandReadiness(tt.checks) {
				got = append(got, r.String())
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("readiness (-want +got):\n%s", d)
			}
		})
	}
}

// doctor --online with a token Discord refuses: [FAIL] discord, run is not
// ready, and doctor exits non-zero; chat, which needs no Discord, is.
func TestDoctorOnlineRefusedTokenIsNotReady(t *testing.T) {
	fd := fakediscord.Start(t)
	envFile, _ := cliEnv(t, scriptCLI(t, answersOrHangs),
		"DISCORD_BOT_TOKEN=MTIzNDU2Nzg5MDEyMzQ1Njc4OQ.abcdef.ghijklmnopqrstuvwxyz0123456789",
		"DISCORD_API_BASE_URL="+fd.APIBaseURL())
	t.Setenv("DISCORD_BOT_TOKEN", "")
	code, out, _ := runCode(t, "", "doctor", "--online", "--env-file", envFile)
	if code == exitOK {
		t.Errorf("doctor exit 0 with a refused token:\n%s", out)
	}
	for _, want := range []string{"[FAIL] discord    Discord rejected the token (401)", "\nchat: ready\n", "\nrun: needs a DISCORD_BOT_TOKEN Discord accepts\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "run: ready") {
		t.Errorf("doctor says run is ready under a [FAIL]:\n%s", out)
	}
}

// doctor reads a fresh clone's config/ as the example it is: a CONFIG_DIR
// with no state file yet draws no mode warning, and the first run or chat
// makes it private, so doctor has nothing to warn about afterwards either.
func TestFirstChatMakesConfigDirPrivate(t *testing.T) {
	envFile, configDir := cliEnv(t, scriptCLI(t, answersOrHangs))
	if err := os.MkdirAll(configDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(configDir, 0o755); err != nil { // as git leaves it under umask 022
		t.Fatal(err)
	}
	if _, out, _ := runCode(t, "", "doctor", "--env-file", envFile); strings.Contains(out, "file-modes") {
		t.Errorf("doctor warns about a CONFIG_DIR with no state yet:\n%s", out)
	}
	if code, _, errOut := runCode(t, "", "chat", "-m", "hello", "--env-file", envFile); code != exitOK {
		t.Fatalf("chat: exit %d\n%s", code, errOut)
	}
	fi, err := os.Stat(configDir)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o700 {
		t.Errorf("CONFIG_DIR is %04o after the first chat, want 0700", got)
	}
	if _, out, _ := runCode(t, "", "doctor", "--env-file", envFile); strings.Contains(out, "file-modes") {
		t.Errorf("doctor warns about file modes after the first chat:\n%s", out)
	}
}

// Only a CONFIG_DIR of the gateway's own user is made private: another
// user's folder, or one shared with AGENT_USER, is left as it is.
func TestMakeConfigDirPrivate(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a folder to another user")
	}
	tests := []struct {
		name      string
		owner     int
		agentUser bool
		want      os.FileMode
	}{
		{"the gateway's own", os.Geteuid(), false, 0o700},
		{"another user's", 65534, false, 0o755},
		{"shared with AGENT_USER", os.Geteuid(), true, 0o755},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "config")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(dir, tt.owner, -1); err != nil {
				t.Fatal(err)
			}
			makePrivate(dir, tt.agentUser, zerolog.New(zerolog.NewTestWriter(t)))
			fi, err := os.Stat(dir)
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode().Perm(); got != tt.want {
				t.Errorf("mode %04o, want %04o", got, tt.want)
			}
		})
	}
}

// The Dockerfile's HEALTHCHECK runs `gateway healthcheck`: an operator who
// reads it finds the command in --help.
func TestHelpListsHealthcheck(t *testing.T) {
	code, out, errOut := runCode(t, "", "--help")
	if code != exitOK {
		t.Fatalf("--help: exit %d\n%s", code, errOut)
	}
	if !strings.Contains(out, "\n  healthcheck ") {
		t.Errorf("--help does not list healthcheck:\n%s", out)
	}
}

// A DISCORD_GATEWAY_URL that answers the websocket handshake with an HTTP
// error (here a 404: the REST base given as the gateway) can never work:
// run stops at once naming the setting, instead of retrying "bad
// handshake" until the connect timeout, and exits 2 like any other
// configuration problem.
func TestRunStopsOnAGatewayURLThatCannotWork(t *testing.T) {
	fd := fakediscord.Start(t)
	wrong := strings.TrimSuffix(fd.GatewayURL(), "/gateway") + "/api/gateway" // no such path
	envFile, _ := cliEnv(t, scriptCLI(t, answersOrHangs),
		"DISCORD_BOT_TOKEN="+fakediscord.DefaultToken,
		"DISCORD_API_BASE_URL="+fd.APIBaseURL(),
		"DISCORD_GATEWAY_URL="+wrong)
	t.Setenv("DISCORD_BOT_TOKEN", "")
	type result struct {
		code   int
		stderr string
	}
	done := make(chan result, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// The Discord client may still log its last reconnect attempt.
		var out, errOut lockedWriter
		code := run(ctx, []string{"run", "--env-file", envFile}, streams{in: strings.NewReader(""), out: &out, errOut: &errOut})
		done <- result{code, errOut.String()}
	}()
	select {
	case r := <-done:
		if r.code != exitConfig {
			t.Errorf("exit %d, want %d", r.code, exitConfig)
		}
		for _, want := range []string{"HTTP 404", "DISCORD_GATEWAY_URL"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
			}
		}
	case <-time.After(20 * time.Second):
		cancel()
		r := <-done
		t.Fatalf("run kept retrying a gateway URL that answers 404:\n%s", r.stderr)
	}
}
