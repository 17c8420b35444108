package gateway

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/dashboard"
)

// On NATS the dashboard lists the gateway's processes, this one among
// them, and a running turn names the process running it.
func TestDashboardOnNATSNamesTheProcess(t *testing.T) {
	env := map[string]string{config.EnvNATSURL: runNATS(t).ClientURL(), config.EnvNATSPartitions: "8"}
	g := startAdminGateway(t, harnessOptions{env: env, respond: func(ctx context.Context, req backends.Request, emit func(backends.Event)) (backends.Result, error) {
		emit(backends.Event{Kind: backends.EventInit, SessionID: "s"})
		<-ctx.Done()
		return backends.Result{}, ctx.Err()
	}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := sseEvents(t, ctx, g.url+"/events")
	var snap dashboard.State
	select {
	case ev := <-events:
		if ev[0] != "snapshot" {
			t.Fatalf("first event %q", ev[0])
		}
		json.Unmarshal([]byte(ev[1]), &snap)
	case <-time.After(waitLong):
		t.Fatal("no snapshot")
	}
	if snap.Processes == nil || snap.Processes.Self == "" {
		t.Fatalf("no processes in the snapshot: %+v", snap.Processes)
	}
	self := snap.Processes.Self
	g.mention(g.channel, "work for a long time")
	deadline := time.After(waitLong)
	var turnOK, procOK bool
	for !turnOK || !procOK {
		select {
		case ev := <-events:
			switch ev[0] {
			case dashboard.KindTurnStarted:
				var tr dashboard.Turn
				json.Unmarshal([]byte(ev[1]), &tr)
				turnOK = tr.Process == self
				if !turnOK {
					t.Fatalf("turn on %q, want %q", tr.Process, self)
				}
			case dashboard.KindProcesses:
				var p dashboard.Processes
				json.Unmarshal([]byte(ev[1]), &p)
				for _, w := range p.List {
					if w.Name == self && len(w.Turns) == 1 && w.Turns[0].Lane == g.channel.String() {
						procOK = true
					}
				}
				t.Logf("processes: %s", ev[1])
			}
		case <-deadline:
			t.Fatalf("turn named %t, listed under its process %t", turnOK, procOK)
		}
	}
}
