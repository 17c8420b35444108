package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/natstest"
)

// doctor's inbox check with NATS_URL: an unreachable server fails `run`
// naming NATS_URL; a server without the inbox's stream says the first run
// creates it, and creates nothing itself.
func TestDoctorChecksTheNATSInbox(t *testing.T) {
	s := natstest.Start(t, t.TempDir())
	load := func(url string) *config.Config {
		cfg, err := config.Load(config.LoadOptions{Environ: []string{config.EnvConfigDir + "=" + t.TempDir(), config.EnvNATSURL + "=" + url}})
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	ctx := context.Background()

	got := inboxChecks(ctx, load(s.ClientURL()))
	if len(got) == 0 || !got[0].OK || !strings.Contains(got[0].Detail, "not created yet") {
		t.Errorf("checks on an empty server = %+v, want OK saying the first run creates the stream", got)
	}
	if again := inboxChecks(ctx, load(s.ClientURL())); again[0].Detail != got[0].Detail {
		t.Errorf("a second check says %q: the first one changed the server", again[0].Detail)
	}

	down := inboxChecks(ctx, load("nats://127.0.0.1:1"))
	if len(down) != 1 || down[0].OK || !down[0].runOnly || !strings.Contains(down[0].Detail, "NATS_URL=nats://127.0.0.1:1") {
		t.Errorf("checks with no server = %+v, want a failure of run naming NATS_URL", down)
	}
}
