package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/fakediscord"
	"github.com/agentgateway/gateway/internal/sdnotify"
)

// runCmd runs the command line args and returns the exit code, stdout and
// stderr.
func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, streams{in: strings.NewReader(""), out: &out, errOut: &errOut})
	return code, out.String(), errOut.String()
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestInitCreatesTheExamplePersonaAndACommentedEnv(t *testing.T) {
	root := t.TempDir()
	work := filepath.Join(root, "work")
	if err := os.Mkdir(work, 0o700); err != nil {
		t.Fatal(err)
	}
	example, err := filepath.Abs(filepath.Join("..", "..", "config"))
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(work)
	t.Setenv(config.EnvBackend, "")
	dir := filepath.Join(root, "srv", "config")
	code, out, errOut := runCmd(t, "init", dir)
	if code != exitOK {
		t.Fatalf("init: exit %d\n%s", code, errOut)
	}
	// The example persona, as the repository has it; memory.md from boot.md.
	for _, name := range []string{"boot.md", "soul.md", "identity.md", "agents.md", "user.md", "tools.md", "heartbeat.md"} {
		if got, want := readFile(t, filepath.Join(dir, name)), readFile(t, filepath.Join(example, name)); got != want {
			t.Errorf("%s differs from the example persona's:\n%s", name, cmp.Diff(want, got))
		}
		if !strings.Contains(out, "created "+filepath.Join(dir, name)+"\n") {
			t.Errorf("output does not list %s:\n%s", name, out)
		}
	}
	if got := readFile(t, filepath.Join(dir, "memory.md")); got != "# Memory\n" {
		t.Errorf("memory.md = %q", got)
	}
	// The .env is where the next command, run here, reads it; the output
	// says which secrets go in it and that command.
	envPath := filepath.Join(work, ".env")
	if !strings.HasSuffix(out, "next: set DISCORD_BOT_TOKEN and ANTHROPIC_API_KEY in .env, then run:\n  gateway doctor\n") {
		t.Errorf("init does not end with the next command:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(root, "srv", ".env")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("init wrote a .env next to the config dir, which no command reads (%v)", err)
	}
	if got, want := readFile(t, envPath), config.CommentedEnv(map[string]string{config.EnvConfigDir: dir}); got != want {
		t.Errorf(".env differs from the template (-want +got):\n%s", cmp.Diff(want, got))
	}
	for path, want := range map[string]os.FileMode{envPath: 0o600, dir: 0o700 | os.ModeDir, filepath.Join(dir, "soul.md"): 0o600} {
		if fi, err := os.Stat(path); err != nil || fi.Mode() != want {
			t.Errorf("%s: mode %v (%v), want %v", path, fi.Mode(), err, want)
		}
	}
	cfg, err := config.Load(config.LoadOptions{Environ: []string{}})
	if err != nil || cfg.ConfigDir != dir {
		t.Errorf("the .env gives CONFIG_DIR %q (%v), want %q", cfg.ConfigDir, err, dir)
	}

	// Again: the .env is kept, and nothing is written.
	os.WriteFile(filepath.Join(dir, "soul.md"), []byte("# My soul\n"), 0o600)
	os.WriteFile(envPath, []byte("DISCORD_BOT_TOKEN=mine\n"), 0o600)
	code, _, errOut = runCmd(t, "init", dir)
	if code != exitError || !strings.Contains(errOut, "--force") {
		t.Errorf("init over an existing .env: exit %d, want %d with advice:\n%s", code, exitError, errOut)
	}
	if got := readFile(t, envPath); got != "DISCORD_BOT_TOKEN=mine\n" {
		t.Errorf("the .env was overwritten without --force: %q", got)
	}

	// --force replaces the .env, never a persona file.
	code, out, errOut = runCmd(t, "init", "--force", dir)
	if code != exitOK {
		t.Fatalf("init --force: exit %d\n%s", code, errOut)
	}
	if strings.Contains(out, "created") {
		t.Errorf("init --force created files that exist:\n%s", out)
	}
	if got := readFile(t, filepath.Join(dir, "soul.md")); got != "# My soul\n" {
		t.Errorf("soul.md was overwritten: %q", got)
	}
	if got := readFile(t, envPath); !strings.Contains(got, "#DISCORD_BOT_TOKEN=\n") {
		t.Errorf("--force did not rewrite the .env:\n%s", got)
	}
}

func TestInitDefaultsAndEnvFile(t *testing.T) {
	root := t.TempDir()
	t.Chdir(root)
	t.Setenv(config.EnvConfigDir, "")
	code, _, errOut := runCmd(t, "init")
	if code != exitOK {
		t.Fatalf("init: exit %d\n%s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(root, "config", "soul.md")); err != nil {
		t.Errorf("./config not created: %v", err)
	}
	// Without a directory, CONFIG_DIR is left to its default.
	if got := readFile(t, filepath.Join(root, ".env")); got != config.CommentedEnv(nil) {
		t.Errorf("./.env is not the plain template:\n%s", got)
	}

	other := filepath.Join(root, "etc", "gateway.env")
	os.MkdirAll(filepath.Dir(other), 0o700)
	code, out, errOut := runCmd(t, "init", "--env-file", other, "state")
	if code != exitOK {
		t.Fatalf("init --env-file: exit %d\n%s", code, errOut)
	}
	if want := "\n  gateway --env-file " + other + " doctor\n"; !strings.HasSuffix(out, want) {
		t.Errorf("init --env-file does not end with %q:\n%s", want, out)
	}
	if got := readFile(t, other); !strings.Contains(got, "\nCONFIG_DIR="+filepath.Join(root, "state")+"\n") {
		t.Errorf("%s does not set CONFIG_DIR:\n%s", other, got)
	}
	if _, err := os.Stat(filepath.Join(root, "state", "identity.md")); err != nil {
		t.Errorf("state/ not created: %v", err)
	}
}

// configLines parses `gateway config` output into name -> value, source.
func configLines(t *testing.T, out string) map[string][2]string {
	t.Helper()
	m := map[string][2]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(l, "# ") {
			continue
		}
		setting, source, ok := strings.Cut(l, "  # ")
		name, value, ok2 := strings.Cut(setting, "=")
		if !ok || !ok2 {
			t.Fatalf("line %q is not NAME=value  # source", l)
		}
		m[name] = [2]string{strings.TrimRight(value, " "), source}
	}
	return m
}

func TestConfigShowsValuesAndSources(t *testing.T) {
	dir := t.TempDir()
	env := filepath.Join(dir, ".env")
	os.WriteFile(env, []byte(strings.Join([]string{
		"AGENT_MODEL=from-dotenv", // the environment wins
		"LOG_LEVEL=debug",
		"ANTHROPIC_API_KEY=sk-ant-secret",
		"CONFIG_DIR=" + filepath.Join(dir, "config"),
	}, "\n")), 0o600)
	for _, name := range []string{"LOG_LEVEL", "ANTHROPIC_API_KEY", "CONFIG_DIR", "AGENT_MAX_TURNS"} {
		t.Setenv(name, "")
	}
	t.Setenv("AGENT_MODEL", "from-env")
	t.Setenv("DISCORD_BOT_TOKEN", "discord-secret")

	code, out, errOut := runCmd(t, "config", "--env-file", env)
	if code != exitOK {
		t.Fatalf("config: exit %d\n%s", code, errOut)
	}
	got := configLines(t, out)
	for name, want := range map[string][2]string{
		"AGENT_MODEL":       {"from-env", config.SourceEnvironment},
		"LOG_LEVEL":         {"debug", config.SourceEnvFile},
		"AGENT_MAX_TURNS":   {"25", config.SourceDefault},
		"ANTHROPIC_API_KEY": {"<redacted>", config.SourceEnvFile},
		"DISCORD_BOT_TOKEN": {"<redacted>", config.SourceEnvironment},
	} {
		if got[name] != want {
			t.Errorf("%s = %q, want %q", name, got[name], want)
		}
	}
	if strings.Contains(out, "secret") {
		t.Errorf("config printed a secret:\n%s", out)
	}
	if !strings.HasPrefix(out, "# sources: environment, .env ("+env+")") {
		t.Errorf("config does not say which .env it read:\n%s", out)
	}

	code, out, _ = runCmd(t, "config", "--json", "--env-file", env)
	var doc struct {
		EnvFile  string           `json:"env_file"`
		Settings []config.Setting `json:"settings"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != exitOK {
		t.Fatalf("config --json: exit %d, %v:\n%s", code, err, out)
	}
	if doc.EnvFile != env || len(doc.Settings) != len(got) {
		t.Errorf("config --json: env file %q, %d settings; want %q, %d", doc.EnvFile, len(doc.Settings), env, len(got))
	}
}

func TestConfigMarksInvalidValues(t *testing.T) {
	dir := t.TempDir()
	env := filepath.Join(dir, ".env")
	os.WriteFile(env, []byte("QUERY_TIMEOUT_MS=soon\nCONFIG_DIR="+dir+"\n"), 0o600)
	t.Setenv("QUERY_TIMEOUT_MS", "")
	code, out, errOut := runCmd(t, "config", "--env-file", env)
	if code != exitConfig || !strings.Contains(errOut, "QUERY_TIMEOUT_MS") {
		t.Errorf("exit %d, want %d with the problem:\n%s", code, exitConfig, errOut)
	}
	if got, want := configLines(t, out)["QUERY_TIMEOUT_MS"], [2]string{"120000", "default (invalid in .env)"}; got != want {
		t.Errorf("QUERY_TIMEOUT_MS = %q, want %q", got, want)
	}
}

func TestHealthcheck(t *testing.T) {
	status := http.StatusOK
	var gotPath, gotAuth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPath, gotAuth = r.URL.Path, r.Header.Get("Authorization")
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	dir := t.TempDir()
	envFile := func(lines ...string) string {
		path := filepath.Join(t.TempDir(), ".env")
		os.WriteFile(path, []byte(strings.Join(append(lines, "CONFIG_DIR="+dir), "\n")+"\n"), 0o600)
		return path
	}
	t.Setenv("ADMIN_ADDR", "")
	t.Setenv("ADMIN_TOKEN", "")

	if code, _, errOut := runCmd(t, "healthcheck", "--env-file", envFile("ADMIN_ADDR="+addr, "ADMIN_TOKEN=tok-0123456789abcdef")); code != exitOK {
		t.Errorf("healthy: exit %d\n%s", code, errOut)
	}
	if gotPath != "/healthz" || gotAuth != "Bearer tok-0123456789abcdef" {
		t.Errorf("request: path %q, Authorization %q", gotPath, gotAuth)
	}

	status = http.StatusServiceUnavailable
	if code, _, errOut := runCmd(t, "healthcheck", "--env-file", envFile("ADMIN_ADDR="+addr)); code != exitError || !strings.Contains(errOut, "503 Service Unavailable") {
		t.Errorf("503: exit %d, want %d\n%s", code, exitError, errOut)
	}
	if code, _, errOut := runCmd(t, "healthcheck", "--env-file", envFile()); code != exitError || !strings.Contains(errOut, "ADMIN_ADDR") {
		t.Errorf("no ADMIN_ADDR: exit %d, want %d\n%s", code, exitError, errOut)
	}
	// Nothing listens there any more.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	if code, _, _ := runCmd(t, "healthcheck", "--env-file", envFile("ADMIN_ADDR="+closed)); code != exitError {
		t.Errorf("connection refused: exit %d, want %d", code, exitError)
	}
	// A problem with another setting exits 1 too, never Docker's reserved 2.
	if code, _, _ := runCmd(t, "healthcheck", "--env-file", envFile("ADMIN_ADDR="+addr, "QUERY_TIMEOUT_MS=soon")); code != exitError {
		t.Errorf("with an invalid setting: exit %d, want %d", code, exitError)
	}
}

func TestDialAddr(t *testing.T) {
	for listen, want := range map[string]string{
		"127.0.0.1:8081": "127.0.0.1:8081",
		":8081":          "127.0.0.1:8081",
		"0.0.0.0:8081":   "127.0.0.1:8081",
		"[::]:8081":      "127.0.0.1:8081",
		"[::1]:8081":     "[::1]:8081",
		"10.0.0.5:8081":  "10.0.0.5:8081",
		"localhost:8081": "localhost:8081",
	} {
		if got := dialAddr(listen); got != want {
			t.Errorf("dialAddr(%q) = %q, want %q", listen, got, want)
		}
	}
}

// Under systemd (Type=notify) run says READY=1 once connected, feeds the
// watchdog, and says STOPPING=1 as soon as the shutdown begins.
func TestRunNotifiesSystemd(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	received := make(chan string, 64)
	go func() {
		buf := make([]byte, 1024)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				close(received)
				return
			}
			received <- string(buf[:n])
		}
	}()
	// pings counts the watchdog's pings; next returns the next other
	// notification.
	pings := 0
	next := func() string {
		t.Helper()
		for {
			select {
			case m, ok := <-received:
				if !ok {
					t.Fatal("notify socket closed")
				}
				if m == "WATCHDOG=1" {
					pings++
					continue
				}
				return m
			case <-time.After(30 * time.Second):
				t.Fatal("no notification")
			}
		}
	}

	fd := fakediscord.Start(t)
	dir := t.TempDir()
	env := filepath.Join(dir, ".env")
	os.WriteFile(env, []byte(strings.Join([]string{
		"DISCORD_BOT_TOKEN=" + fakediscord.DefaultToken,
		"ANTHROPIC_API_KEY=sk-ant-test",
		"DISCORD_API_BASE_URL=" + fd.APIBaseURL(),
		"DISCORD_GATEWAY_URL=" + fd.GatewayURL(),
		"AGENT_CLI_PATH=" + fakeClaude(t, "text.jsonl"),
		"CONFIG_DIR=" + filepath.Join(dir, "config"),
		"PERMISSION_MODE=acceptEdits",
	}, "\n")), 0o600)
	// A 20 ms watchdog: pings every 10 ms.
	notify := sdnotify.New(func(k string) string {
		return map[string]string{sdnotify.EnvSocket: sock, sdnotify.EnvWatchdogUSec: "20000"}[k]
	}, os.Getpid())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	// The gateway logs from several goroutines, as to os.Stderr.
	errOut := &lockedWriter{}
	go func() {
		done <- runRun(ctx, runOptions{io: streams{out: io.Discard, errOut: errOut}, envFile: env, notify: notify})
	}()
	if m := next(); m != "READY=1" {
		t.Fatalf("notification %q, want READY=1", m)
	}
	cancel()
	if m := next(); m != "STOPPING=1" {
		t.Errorf("notification %q, want STOPPING=1", m)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run: %v\n%s", err, errOut)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not stop")
	}
	// The loop pings at once, before the connection to Discord.
	if pings == 0 {
		t.Error("the watchdog was never fed")
	}
}

// lockedWriter is a buffer that goroutines may write at once.
type lockedWriter struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// init fills the folder CONFIG_DIR names, as every other command reads it:
// an argument wins over it, and it over ./config. The .env goes where
// `gateway run` in the same folder reads it (./.env, or --env-file), and
// names the folder filled.
func TestInitHonoursConfigDir(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     string // CONFIG_DIR, relative to the test's folder
		args    []string
		wantDir string
		wantEnv string // the .env written
	}{
		{"CONFIG_DIR names the folder", "x", nil, "x", ".env"},
		{"an argument wins over CONFIG_DIR", "x", []string{"y"}, "y", ".env"},
		{"--env-file with CONFIG_DIR", "x", []string{"--env-file", "etc/gateway.env"}, "x", "etc/gateway.env"},
		{"without either, ./config", "", nil, "config", ".env"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			t.Chdir(root)
			os.MkdirAll(filepath.Join(root, "etc"), 0o700)
			if tc.env != "" {
				t.Setenv(config.EnvConfigDir, filepath.Join(root, tc.env))
			} else {
				t.Setenv(config.EnvConfigDir, "")
			}
			code, out, errOut := runCmd(t, append([]string{"init"}, tc.args...)...)
			if code != exitOK {
				t.Fatalf("init: exit %d\n%s", code, errOut)
			}
			dir := filepath.Join(root, tc.wantDir)
			if _, err := os.Stat(filepath.Join(dir, "soul.md")); err != nil {
				t.Errorf("%s not filled: %v\n%s", tc.wantDir, err, out)
			}
			for _, other := range []string{"x", "y", "config"} {
				if other == tc.wantDir {
					continue
				}
				if _, err := os.Stat(filepath.Join(root, other)); !os.IsNotExist(err) {
					t.Errorf("%s/ created too (%v)", other, err)
				}
			}
			envPath := filepath.Join(root, tc.wantEnv)
			// The .env alone, with no environment, leads to the folder filled.
			cfg, err := config.Load(config.LoadOptions{EnvFile: envPath, Environ: []string{}})
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := filepath.Abs(cfg.ConfigDir); got != dir {
				t.Errorf("%s gives CONFIG_DIR %q, want %q", tc.wantEnv, got, dir)
			}
		})
	}
}
