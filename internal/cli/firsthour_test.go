package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/agentgateway/gateway/internal/fakediscord"
)

// doctorLines runs doctor with access standing in for the kernel's
// answer about CONFIG_DIR, and returns its output's lines.
func doctorLines(t *testing.T, envFile string, access accessFunc) []string {
	t.Helper()
	var out strings.Builder
	err := runDoctor(context.Background(), doctorOptions{io: streams{out: &out, errOut: &out}, envFile: envFile, access: access})
	if err == nil {
		t.Fatalf("doctor passed with a CONFIG_DIR it cannot use:\n%s", out.String())
	}
	return strings.Split(strings.TrimSpace(out.String()), "\n")
}

// A CONFIG_DIR the gateway cannot use is one [FAIL] line that names the
// cause, not a "does not exist yet" followed by a missing file per persona
// section and the schedule's and inbox's complaints; chat and run need it
// fixed, and refuse with the same words (exit 2) before the lock file.
func TestDoctorAndChatSayOnceWhyCONFIGDIRCannotBeUsed(t *testing.T) {
	file := filepath.Join(t.TempDir(), "hostname")
	if err := os.WriteFile(file, []byte("box\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	readable := t.TempDir()
	denied := func(path string, mode uint32) error {
		if path == readable {
			return unix.EACCES
		}
		return nil
	}
	for _, tc := range []struct {
		name   string
		dir    string
		access accessFunc
		want   string
	}{
		{"a file", file, nil, file + " is a file, not a folder"},
		{"under a file", filepath.Join(file, "config"), nil, "cannot be created: " + file + " is a file, not a folder"},
		{"a folder this user cannot use", readable, denied, readable + " cannot be read and written by this user"},
		{"under a folder this user cannot write", filepath.Join(readable, "config"), denied, "cannot be created: this user (uid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			envFile, _ := cliEnv(t, scriptCLI(t, answersOrHangs), "CONFIG_DIR="+tc.dir)
			lines := doctorLines(t, envFile, tc.access)
			var dirLines []string
			for _, l := range lines {
				switch {
				case strings.Contains(l, tc.dir) && !strings.HasPrefix(l, "[FAIL] config-dir"):
					t.Errorf("a follow-on line about CONFIG_DIR: %s", l)
				case strings.HasPrefix(l, "[FAIL] config-dir"):
					dirLines = append(dirLines, l)
				case strings.HasPrefix(l, "[ok  ] config-dir"), strings.HasPrefix(l, "[warn] persona"),
					strings.HasPrefix(l, "[FAIL] heartbeat"), strings.HasPrefix(l, "[FAIL] schedule"), strings.HasPrefix(l, "[warn] worktrees"):
					t.Errorf("a line that reads the unusable folder: %s", l)
				}
			}
			if len(dirLines) != 1 || !strings.Contains(dirLines[0], tc.want) {
				t.Errorf("want one config-dir line saying %q, got %q", tc.want, dirLines)
			}
			for _, cmd := range []string{"chat", "run"} {
				want := cmd + ": needs a usable CONFIG_DIR"
				if !strings.Contains(strings.Join(lines, "\n"), want) {
					t.Errorf("doctor does not say %q:\n%s", want, strings.Join(lines, "\n"))
				}
			}
			if tc.access != nil {
				return // the kernel lets root in; the refusal is the doctor's
			}
			code, _, errOut := runCode(t, "", "chat", "--env-file", envFile, "-m", "hello")
			if code != exitConfig || !strings.Contains(errOut, tc.want) || strings.Contains(errOut, ".gateway.lock") {
				t.Errorf("chat: exit %d, want %d naming the cause:\n%s", code, exitConfig, errOut)
			}
		})
	}
}

// An invalid cron line is left out and the rest runs, as run and chat do:
// doctor warns, and both commands stay ready.
func TestDoctorSaysABadCronLineBlocksNothing(t *testing.T) {
	envFile, configDir := cliEnv(t, scriptCLI(t, answersOrHangs), "DISCORD_BOT_TOKEN="+fakediscord.DefaultToken)
	if err := os.MkdirAll(configDir, 0o700); err != nil {
		t.Fatal(err)
	}
	agents := "# Agents\n\n## Cron Jobs\n\n### broken\nCron: 61 * * * *\nInstruction: never\n\n### fine\nCron: 0 9 * * *\nInstruction: good morning\n"
	if err := os.WriteFile(filepath.Join(configDir, "agents.md"), []byte(agents), 0o600); err != nil {
		t.Fatal(err)
	}
	_, out, _ := runCode(t, "", "doctor", "--env-file", envFile)
	for _, want := range []string{"[warn] schedule   agents.md:", "left out; the rest of the schedule runs", "[ok  ] cron       fine", "\nchat: ready\n", "\nrun: ready\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}
}

// A key doctor has not tried is not called good: without --live it says
// the key is set and not tried.
func TestDoctorSaysTheKeyIsNotTriedWithoutLive(t *testing.T) {
	envFile, _ := cliEnv(t, scriptCLI(t, answersOrHangs))
	_, out, _ := runCode(t, "", "doctor", "--env-file", envFile)
	if !strings.Contains(out, "ANTHROPIC_API_KEY is set, not tried (gateway doctor --live runs one short turn with it)") {
		t.Errorf("doctor does not say the key is untried:\n%s", out)
	}
}

// sessions on a CONFIG_DIR that is not there says so (exit 1) rather than
// "No sessions yet".
func TestSessionsOnAMissingConfigDir(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nowhere")
	envFile := filepath.Join(t.TempDir(), ".env")
	if err := os.WriteFile(envFile, []byte("CONFIG_DIR="+missing+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCode(t, "", "sessions", "--env-file", envFile)
	if code != exitError || strings.Contains(out, "No sessions") || !strings.Contains(errOut, missing+" does not exist") {
		t.Errorf("sessions on a missing CONFIG_DIR: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
