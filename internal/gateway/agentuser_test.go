package gateway

import (
	"errors"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/agentuser"
	"github.com/agentgateway/gateway/internal/config"
)

// TestNewCoreChecksAgentUser: with AGENT_USER set, NewCore refuses to
// start when the agent user cannot reach CONFIG_DIR (t.TempDir is private
// to the test's user), naming the directory; unset, the same setup starts.
func TestNewCoreChecksAgentUser(t *testing.T) {
	if _, err := user.Lookup("nobody"); err != nil {
		t.Skip("needs a user named nobody to stand for the agent user")
	}
	dir := t.TempDir()
	load := func(agentUser string) *config.Config {
		environ := []string{config.EnvConfigDir + "=" + dir, config.EnvPermissionMode + "=acceptEdits"}
		if agentUser != "" {
			environ = append(environ, config.EnvAgentUser+"="+agentUser)
		}
		cfg, err := config.Load(config.LoadOptions{Environ: environ})
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	opts := CoreOptions{Backend: &backends.Fake{}, Replier: countingReplier{}, EnvFile: filepath.Join(dir, ".env")}

	_, err := NewCore(load("nobody"), opts, zerolog.Nop())
	var ce *agentuser.CheckError
	if !errors.As(err, &ce) {
		t.Fatalf("NewCore = %v, want a *agentuser.CheckError", err)
	}
	if !strings.Contains(err.Error(), dir+": the agent cannot open CONFIG_DIR") {
		t.Errorf("the error does not name CONFIG_DIR:\n%v", err)
	}

	core, err := NewCore(load(""), opts, zerolog.Nop())
	if err != nil {
		t.Fatalf("without AGENT_USER: %v", err)
	}
	core.Runtime.Close()
}

func TestRunAs(t *testing.T) {
	if r, err := RunAs(&config.Config{}); r != nil || err != nil {
		t.Errorf("RunAs without AGENT_USER = %v, %v; want nil, nil", r, err)
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("needs a user named nobody")
	}
	r, err := RunAs(&config.Config{AgentUser: "nobody"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Name != "nobody" || r.Home != nobody.HomeDir || r.Credential.UID == 0 {
		t.Errorf("RunAs = %+v", r)
	}
	if _, err := RunAs(&config.Config{AgentUser: "gwtest-no-such-user"}); err == nil {
		t.Error("an unknown user: want an error")
	}
}
