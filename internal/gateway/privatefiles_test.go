package gateway

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/agentgateway/gateway/internal/config"
)

// The file guard refuses to send the NATS credentials file, as it refuses
// the secret files: its keys sign in to the gateway's event store.
func TestGuardProtectsTheNATSCreds(t *testing.T) {
	dir := t.TempDir()
	creds := filepath.Join(dir, "gateway.creds")
	if err := os.WriteFile(creds, []byte("-----BEGIN NATS USER JWT-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(config.LoadOptions{Environ: []string{
		config.EnvConfigDir + "=" + dir, config.EnvNATSURL + "=nats://127.0.0.1:4222", config.EnvNATSCredsFile + "=" + creds,
	}})
	if err != nil {
		t.Fatal(err)
	}
	g, err := newGuard(cfg, "", func() []string { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(g.Protected, creds) {
		t.Errorf("protected files = %v, want the NATS creds file", g.Protected)
	}
}
