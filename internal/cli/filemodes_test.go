package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/config"
)

// modeSetup is a gateway's files with chosen modes: .env, CONFIG_DIR with
// sessions.json and memory.md, a token file and a model key file.
type modeSetup struct {
	env, dir, sessions, memory, token, key os.FileMode
	agentUser                              string
}

// write creates the files of s under a new directory, loads the
// configuration they make and returns it with the paths.
func (s modeSetup) write(t *testing.T) (cfg *config.Config, envFile, dir, token string) {
	t.Helper()
	root := t.TempDir()
	dir = filepath.Join(root, "config")
	envFile = filepath.Join(root, ".env")
	token = filepath.Join(root, "discord-token")
	key := filepath.Join(root, "anthropic-key")
	files := []struct {
		path    string
		content string
		mode    os.FileMode
	}{
		{envFile, "CONFIG_DIR=" + dir + "\nDISCORD_BOT_TOKEN_FILE=" + token + "\nANTHROPIC_API_KEY_FILE=" + key + "\n", s.env},
		{token, "not-a-real-token\n", s.token},
		{key, "sk-test\n", s.key},
		{filepath.Join(dir, "sessions.json"), "{}\n", s.sessions},
		{filepath.Join(dir, "memory.md"), "# Memory\n", s.memory},
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if err := os.WriteFile(f.path, []byte(f.content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(f.path, f.mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, s.dir); err != nil {
		t.Fatal(err)
	}
	environ := []string{}
	if s.agentUser != "" {
		environ = append(environ, "AGENT_USER="+s.agentUser)
	}
	cfg, err := config.Load(config.LoadOptions{EnvFile: envFile, Environ: environ})
	if err != nil {
		t.Fatal(err)
	}
	return cfg, envFile, dir, token
}

func TestFileModeChecks(t *testing.T) {
	tight := modeSetup{env: 0o600, dir: 0o700, sessions: 0o600, memory: 0o600, token: 0o400, key: 0o400}
	tests := []struct {
		name  string
		setup func(s *modeSetup)
		want  func(envFile, dir, token string) []string
	}{
		{
			name:  "all the gateway's own",
			setup: func(*modeSetup) {},
			want:  func(string, string, string) []string { return nil },
		},
		{
			name: "readable .env",
			setup: func(s *modeSetup) {
				s.env = 0o644
			},
			want: func(envFile, _, _ string) []string {
				return []string{envFile + " is 0644: other users can read the secrets in it; fix: chmod 600 " + envFile}
			},
		},
		{
			name: "group-readable .env",
			setup: func(s *modeSetup) {
				s.env = 0o640
			},
			want: func(envFile, _, _ string) []string {
				return []string{envFile + " is 0640: other users can read the secrets in it; fix: chmod 600 " + envFile}
			},
		},
		{
			name: "token file readable, the model key file too",
			setup: func(s *modeSetup) {
				s.token, s.key = 0o444, 0o444
			},
			want: func(_, _, token string) []string {
				return []string{token + " (DISCORD_BOT_TOKEN_FILE) is 0444: other users can read DISCORD_BOT_TOKEN; fix: chmod 600 " + token}
			},
		},
		{
			name: "open CONFIG_DIR and an old sessions.json",
			setup: func(s *modeSetup) {
				s.dir, s.sessions = 0o755, 0o644
			},
			want: func(_, dir, _ string) []string {
				sessions := filepath.Join(dir, "sessions.json")
				return []string{
					sessions + " is 0644: other users can read the gateway's state; fix: chmod 600 " + sessions,
					"CONFIG_DIR " + dir + " is 0755: every user may look into it, where the gateway keeps sessions.json; fix: chmod 700 " + dir,
				}
			},
		},
		{
			name: "CONFIG_DIR others may only enter, with AGENT_USER",
			setup: func(s *modeSetup) {
				s.dir, s.agentUser = 0o751, "gateway-agent"
			},
			want: func(_, dir, _ string) []string {
				return []string{"CONFIG_DIR " + dir + " is 0751: every user may look into it, where the gateway keeps sessions.json; fix: chmod o-rwx " + dir}
			},
		},
		{
			name: "group may read CONFIG_DIR and memory.md (the AGENT_USER layout)",
			setup: func(s *modeSetup) {
				s.dir, s.memory, s.agentUser = 0o750, 0o660, "gateway-agent"
			},
			want: func(string, string, string) []string { return nil },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tight
			tt.setup(&s)
			cfg, envFile, dir, token := s.write(t)
			var got []string
			for _, c := range fileModeChecks(cfg, envFile) {
				if !c.Warning || c.Name != "file-modes" {
					t.Errorf("check %+v is not a file-modes warning", c)
				}
				got = append(got, c.Detail)
			}
			if diff := cmp.Diff(tt.want(envFile, dir, token), got); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFileModeChecksNeedStateFiles: a CONFIG_DIR others may read that holds
// no state yet (only persona files) is not warned about.
func TestFileModeChecksNeedStateFiles(t *testing.T) {
	cfg, envFile, dir, _ := modeSetup{env: 0o600, dir: 0o755, sessions: 0o600, memory: 0o644, token: 0o400, key: 0o400}.write(t)
	if err := os.Remove(filepath.Join(dir, "sessions.json")); err != nil {
		t.Fatal(err)
	}
	if got := fileModeChecks(cfg, envFile); len(got) != 0 {
		t.Errorf("warnings for a CONFIG_DIR without state: %+v", got)
	}
}

// TestDoctorWarnsAboutFileModes: doctor shows the warnings and they do not
// fail it on their own.
func TestDoctorWarnsAboutFileModes(t *testing.T) {
	_, envFile := chatEnv(t)
	if err := os.Chmod(envFile, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DISCORD_BOT_TOKEN", "")
	report, out := doctorJSON(t, envFile)
	want := check{Name: "file-modes", Warning: true,
		Detail: envFile + " is 0644: other users can read the secrets in it; fix: chmod 600 " + envFile}
	for _, c := range report.Checks {
		if c == want {
			return
		}
	}
	t.Errorf("doctor shows no warning about the .env file's mode:\n%s", out)
}

// TestChatKeepsItsStateFilesPrivate: with a umask that lets everyone read
// what is created, the files chat writes in CONFIG_DIR that are not the
// persona's (sessions.json, the lock file) are the gateway's alone, and so
// is CONFIG_DIR.
func TestChatKeepsItsStateFilesPrivate(t *testing.T) {
	old := unix.Umask(0)
	t.Cleanup(func() { unix.Umask(old) })
	configDir, envFile := chatEnv(t)
	err := runChat(context.Background(), chatOptions{
		io:      streams{in: strings.NewReader(""), out: &bytes.Buffer{}, errOut: &bytes.Buffer{}},
		envFile: envFile, backend: &backends.Fake{}, message: "hello", session: "docs",
	})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(configDir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("CONFIG_DIR is %s, want 0700", modeString(fi.Mode()))
	}
	entries, err := os.ReadDir(configDir)
	if err != nil {
		t.Fatal(err)
	}
	var state []string
	for _, e := range entries {
		if e.IsDir() || strings.HasSuffix(e.Name(), ".md") {
			continue
		}
		state = append(state, e.Name())
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s is %s, want 0600", e.Name(), modeString(info.Mode()))
		}
	}
	for _, name := range []string{"sessions.json", ".gateway.lock"} {
		if !slices.Contains(state, name) {
			t.Errorf("chat wrote no %s (state files: %v): the test checks nothing", name, state)
		}
	}
}

// doctor warns that bypassPermissions as the gateway's own user reaches
// .env and agents.md, and stops warning once AGENT_USER is set.
func TestDoctorWarnsAboutBypassAsTheGatewayUser(t *testing.T) {
	_, envFile := chatEnv(t)
	for _, agentUser := range []string{"", "nobody"} {
		t.Setenv("PERMISSION_MODE", "bypassPermissions")
		t.Setenv("AGENT_USER", agentUser)
		report, out := doctorJSON(t, envFile)
		warned := slices.Contains(report.Checks, check{Name: "security", Warning: true, Detail: config.SameUserBypassWarning})
		if warned != (agentUser == "") {
			t.Errorf("AGENT_USER=%q: warned = %v\n%s", agentUser, warned, out)
		}
	}
}

// doctorJSON runs `doctor --json` with envFile and returns its report and
// its raw output (for failure messages).
func doctorJSON(t *testing.T, envFile string) (report struct {
	Checks []check `json:"checks"`
}, out string) {
	t.Helper()
	var b bytes.Buffer
	run(context.Background(), []string{"doctor", "--json", "--env-file", envFile}, streams{in: strings.NewReader(""), out: &b, errOut: &bytes.Buffer{}})
	if err := json.Unmarshal(b.Bytes(), &report); err != nil {
		t.Fatalf("doctor --json output is not JSON: %v\n%s", err, b.String())
	}
	return report, b.String()
}
