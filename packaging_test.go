package gateway

import (
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/agentgateway/gateway/internal/config"
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
