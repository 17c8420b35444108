package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentgateway/gateway/internal/fakediscord"
)

// TestDoctorWithTokenFile: doctor judges the token DISCORD_BOT_TOKEN_FILE
// names, and when the file cannot be read it names the variable and the
// file, once, without also calling the token unset.
func TestDoctorWithTokenFile(t *testing.T) {
	t.Setenv("DISCORD_BOT_TOKEN", "")
	t.Setenv("AGENT_CLI_PATH", "/nonexistent/claude")
	good := filepath.Join(t.TempDir(), "discord-token")
	if err := os.WriteFile(good, []byte(fakediscord.DefaultToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "absent")
	for _, tt := range []struct {
		name, path string
		want       check
		unwanted   string
	}{
		{"readable", good, check{Name: "discord", OK: true}, "DISCORD_BOT_TOKEN_FILE"},
		{"missing", missing, check{Name: "config", Detail: "DISCORD_BOT_TOKEN_FILE: cannot read " + missing + ": no such file or directory"}, "DISCORD_BOT_TOKEN is not set"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("DISCORD_BOT_TOKEN_FILE", tt.path)
			_, envFile := chatEnv(t)
			report, out := doctorJSON(t, envFile)
			found := false
			for _, c := range report.Checks {
				if c.Name == tt.want.Name && c.OK == tt.want.OK && (tt.want.Detail == "" || c.Detail == tt.want.Detail) {
					found = true
				}
				if strings.Contains(c.Detail, tt.unwanted) {
					t.Errorf("check %+v: want nothing about %q", c, tt.unwanted)
				}
			}
			if !found {
				t.Errorf("no check like %+v:\n%s", tt.want, out)
			}
			if strings.Contains(out, fakediscord.DefaultToken) {
				t.Error("doctor shows the token")
			}
		})
	}
}

// TestRunRefusesAnUnreadableTokenFile: run exits with the configuration's
// exit code, naming DISCORD_BOT_TOKEN_FILE and the file.
func TestRunRefusesAnUnreadableTokenFile(t *testing.T) {
	t.Setenv("DISCORD_BOT_TOKEN", "")
	missing := filepath.Join(t.TempDir(), "absent")
	t.Setenv("DISCORD_BOT_TOKEN_FILE", missing)
	_, envFile := chatEnv(t)
	var errOut bytes.Buffer
	code := run(context.Background(), []string{"run", "--env-file", envFile}, streams{in: strings.NewReader(""), out: &bytes.Buffer{}, errOut: &errOut})
	if code != exitConfig {
		t.Errorf("exit code = %d, want %d", code, exitConfig)
	}
	want := "DISCORD_BOT_TOKEN_FILE: cannot read " + missing + ": no such file or directory"
	if !strings.Contains(errOut.String(), want) {
		t.Errorf("error output lacks %q:\n%s", want, errOut.String())
	}
	if strings.Contains(errOut.String(), "missing DISCORD_BOT_TOKEN") {
		t.Errorf("error output calls the token missing besides:\n%s", errOut.String())
	}
}
