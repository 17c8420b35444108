package gateway

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentgateway/gateway/internal/config"
	agentfiles "github.com/agentgateway/gateway/internal/files"
	gw "github.com/agentgateway/gateway/internal/gateway"
)

// find returns the first submatch of pattern in the file at path.
func find(t *testing.T, path, pattern string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(pattern).FindSubmatch(data)
	if m == nil {
		t.Fatalf("%s has no match for %s", path, pattern)
	}
	return string(m[1])
}

// The stop timeouts of compose.yaml and the systemd unit cover the
// gateway's drain with the default QUERY_TIMEOUT_MS, so that a turn in
// flight is not killed by a stop.
func TestStopTimeoutsCoverTheDrain(t *testing.T) {
	ms, err := strconv.Atoi(config.Default(config.EnvQueryTimeoutMS))
	if err != nil {
		t.Fatal(err)
	}
	// internal/gateway: the drain waits QUERY_TIMEOUT_MS plus 30 s, after
	// closing the webhook listener for up to 5 s.
	drain := time.Duration(ms)*time.Millisecond + 30*time.Second + 5*time.Second
	for _, tc := range []struct{ path, pattern string }{
		{"compose.yaml", `(?m)^\s*stop_grace_period:\s*(\d+)s\s*$`},
		{"contrib/systemd/gateway.service", `(?m)^TimeoutStopSec=(\d+)\s*$`},
	} {
		secs, err := strconv.Atoi(find(t, tc.path, tc.pattern))
		if err != nil {
			t.Fatal(err)
		}
		if got := time.Duration(secs) * time.Second; got < drain {
			t.Errorf("%s: stop timeout %v is shorter than the drain, %v", tc.path, got, drain)
		}
	}
}

// The Dockerfile installs the claude CLI the Makefile pins (the version
// the conformance suite covers) and builds with go.mod's Go.
func TestDockerfilePinsMatch(t *testing.T) {
	if got, want := find(t, "Dockerfile", `(?m)^ARG CLAUDE_VERSION=(\S+)$`), find(t, "Makefile", `(?m)^claude_VERSION\s*:=\s*(\S+)$`); got != want {
		t.Errorf("Dockerfile installs claude %s, the Makefile pins %s", got, want)
	}
	if got, want := find(t, "Dockerfile", `(?m)^ARG GO_VERSION=(\S+)$`), find(t, "go.mod", `(?m)^go (\S+)$`); got != want {
		t.Errorf("Dockerfile builds with Go %s, go.mod says %s", got, want)
	}
}

// The systemd unit's comments install the file `make release` builds and
// the claude CLI where the Dockerfile has it.
func TestSystemdUnitNamesWhatIsBuilt(t *testing.T) {
	out := find(t, "Makefile", `(?m)out=(dist/gateway-\$\(VERSION\)-\$\$os-\$\$arch)`)
	release := strings.NewReplacer("$(VERSION)", "<version>", "$$os", "linux", "$$arch", "amd64").Replace(out)
	unit, err := os.ReadFile("contrib/systemd/gateway.service")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(unit), "install -m 755 "+release+" /usr/local/bin/gateway") {
		t.Errorf("the unit does not install %s, the file make release builds", release)
	}
	// node's images install global packages under /usr/local.
	if img := find(t, "Dockerfile", `(?m)^FROM (node:\S+)\s*$`); !strings.HasPrefix(img, "node:") ||
		!strings.Contains(find(t, "Dockerfile", `(npm install -g [^\n]*claude-code)`), "npm install -g") {
		t.Fatalf("the Dockerfile no longer installs claude with npm -g on a node image: check the unit's claude path")
	}
	if !strings.Contains(string(unit), "/usr/local/bin/claude") {
		t.Errorf("the unit does not name /usr/local/bin/claude, where the Dockerfile's npm install -g puts claude")
	}
}

// A quick start from the clone (make run, make chat) leaves nothing the
// gateway writes into the example CONFIG_DIR untracked: .gitignore lists
// every state file and folder.
func TestGitignoreListsTheState(t *testing.T) {
	data, err := os.ReadFile(".gitignore")
	if err != nil {
		t.Fatal(err)
	}
	ignored := map[string]bool{}
	for _, l := range strings.Split(string(data), "\n") {
		ignored[strings.TrimSpace(l)] = true
	}
	// Every state file of CONFIG_DIR (StateNames), and its folders.
	var files []string
	for _, name := range gw.StateNames {
		if name != gw.ArchiveDir && name != gw.IPCDir {
			files = append(files, name)
		}
	}
	dirs := []string{gw.ArchiveDir, gw.IPCDir, agentfiles.GatewayDir}
	for _, f := range files {
		if !ignored["/config/"+f] {
			t.Errorf(".gitignore lacks /config/%s", f)
		}
	}
	for _, d := range dirs {
		if !ignored["/config/"+d+"/"] {
			t.Errorf(".gitignore lacks /config/%s/", d)
		}
	}
}

// make run and make chat are the two commands of the quick start: they
// build, install the pinned claude into .tools/ only when it is missing,
// and start bin/gateway, which finds that claude beside bin/ by itself, so
// no PATH line is printed.
func TestMakeRunAndChat(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	version := find(t, "Makefile", `(?m)^claude_VERSION\s*:=\s*(\S+)$`)
	tools := t.TempDir()
	dryRun := func(target string) string {
		t.Helper()
		out, err := exec.Command("make", "-n", target, "TOOLS="+tools).CombinedOutput()
		if err != nil {
			t.Fatalf("make -n %s: %v\n%s", target, err, out)
		}
		return string(out)
	}
	for _, target := range []string{"run", "chat"} {
		out := dryRun(target)
		for _, want := range []string{
			"go build", "npm install --prefix " + tools + "/claude", "@anthropic-ai/claude-code@" + version,
			"\n./bin/gateway " + target,
		} {
			if !strings.Contains(out, want) {
				t.Errorf("make %s lacks %q:\n%s", target, want, out)
			}
		}
		if strings.Contains(out, "PATH=") {
			t.Errorf("make %s prints a PATH line:\n%s", target, out)
		}
	}
	// Installed once: not again.
	if err := os.MkdirAll(filepath.Join(tools, "claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tools, "claude", ".installed-"+version), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if out := dryRun("run"); strings.Contains(out, "npm install") {
		t.Errorf("make run installs claude again:\n%s", out)
	}
}
