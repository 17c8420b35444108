package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/cluster"
	"github.com/agentgateway/gateway/internal/jsinbox"
	"github.com/agentgateway/gateway/internal/natstest"
)

// doctor with NATS_URL lists the processes that beat: one line each with
// its role, version and turns, after a summary. Before any process has
// started it says so and creates nothing.
func TestDoctorListsTheWorkers(t *testing.T) {
	s := natstest.Start(t, t.TempDir())
	envFile, _ := cliEnv(t, scriptCLI(t, answersOrHangs), "NATS_URL="+s.ClientURL())
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	_, out, _ := runCode(t, "", "doctor", "--env-file", envFile)
	if want := "[ok  ] workers    no gateway process has started with this NATS yet"; !strings.Contains(out, want) {
		t.Errorf("doctor on a fresh server lacks %q:\n%s", want, out)
	}
	if _, err := js.KeyValue(ctx, cluster.BucketWorkers); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Fatalf("doctor made the bucket %s (%v)", cluster.BucketWorkers, err)
	}

	now := time.Now()
	turn := cluster.Turn{Lane: "123456789012345678", Event: 42, Since: now.Add(-90 * time.Second)}
	for _, self := range []cluster.Worker{
		{Name: "run-1", Role: cluster.RoleRun, Version: "v1.2.3", Started: now.Add(-2 * time.Hour)},
		{Name: "worker-1", Role: cluster.RoleWorker, Version: "v1.2.3", Started: now.Add(-time.Hour), Slots: 4},
	} {
		o := cluster.RegistryOptions{Self: self, Log: zerolog.New(zerolog.NewTestWriter(t))}
		if self.Slots > 0 {
			o.Turns = func() []cluster.Turn { return []cluster.Turn{turn} }
		}
		r, err := cluster.OpenRegistry(ctx, js, o)
		if err != nil {
			t.Fatal(err)
		}
		bctx, stop := context.WithCancel(ctx)
		done := make(chan error)
		go func() { done <- r.Beat(bctx) }()
		t.Cleanup(func() { stop(); <-done })
	}
	waitListed(t, ctx, js, 2)

	_, out, _ = runCode(t, "", "doctor", "--env-file", envFile)
	for _, want := range []string{
		"[ok  ] workers    2 gateway processes running: 1 of 4 turn slots busy\n",
		"[ok  ] workers    run-1 (run v1.2.3): last heartbeat ",
		" ago, up 2h0m",
		", runs no turns (MAX_CONCURRENT_QUERIES=0)\n",
		"[ok  ] workers    worker-1 (worker v1.2.3): last heartbeat ",
		" ago, up 1h0m",
		", 1 of 4 slots busy: channel 123456789012345678 event 42 for 1m3",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "[warn] workers") {
		t.Errorf("doctor warns about the workers of a complete gateway:\n%s", out)
	}
}

// waitListed waits until n processes are listed.
func waitListed(t *testing.T, ctx context.Context, js jetstream.JetStream, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ws, err := cluster.ReadWorkers(ctx, js, cluster.RegistryOptions{})
		if err == nil && len(ws) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("listed %d processes (%v), want %d", len(ws), err, n)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func TestDescribeWorkers(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	run := cluster.Worker{Name: "run-1", Role: cluster.RoleRun, Version: "v1", Started: now.Add(-time.Hour), Beat: now.Add(-2 * time.Second)}
	worker := cluster.Worker{Name: "w-1", Role: cluster.RoleWorker, Started: now.Add(-time.Minute), Beat: now.Add(time.Second), Slots: 2,
		Turns: []cluster.Turn{{Lane: "99", Event: 7, Since: now.Add(-5 * time.Second)}, {Lane: "system", Event: 8, Since: now}}}
	tests := []struct {
		name    string
		workers []cluster.Worker
		err     error
		want    []string
	}{
		{"no bucket yet", nil, fmt.Errorf("bucket %s: %w", cluster.BucketWorkers, jsinbox.ErrNotSetUp), []string{
			"ok: no gateway process has started with this NATS yet: each `gateway run` and `gateway worker` lists itself in the bucket gateway-workers"}},
		{"unreadable", nil, errors.New("nats: timeout"), []string{
			"warn: cannot list the gateway's processes: nats: timeout"}},
		{"none running", nil, nil, []string{
			"warn: no gateway process is running: none has sent a heartbeat in the last 30s, so nothing takes or runs prompts (start `gateway run`, and `gateway worker` on other machines)"}},
		{"a run and a worker", []cluster.Worker{run, worker}, nil, []string{
			"ok: 2 gateway processes running: 2 of 2 turn slots busy",
			"ok: run-1 (run v1): last heartbeat 2s ago, up 1h0m0s, runs no turns (MAX_CONCURRENT_QUERIES=0)",
			// Its beat is ahead of this clock: 0s, not a negative age.
			"ok: w-1 (worker): last heartbeat 0s ago, up 1m0s, 2 of 2 slots busy: channel 99 event 7 for 5s, the system lane event 8 for 0s"}},
		{"workers only", []cluster.Worker{worker}, nil, []string{
			"ok: 1 gateway process running: 2 of 2 turn slots busy",
			"ok: w-1 (worker): last heartbeat 0s ago, up 1m0s, 2 of 2 slots busy: channel 99 event 7 for 5s, the system lane event 8 for 0s",
			"warn: no `gateway run` is running: nothing takes prompts from Discord or webhooks, and the schedule does not fire"}},
		{"no slots anywhere", []cluster.Worker{run}, nil, []string{
			"ok: 1 gateway process running: 0 of 0 turn slots busy",
			"ok: run-1 (run v1): last heartbeat 2s ago, up 1h0m0s, runs no turns (MAX_CONCURRENT_QUERIES=0)",
			"warn: no process runs turns: every one has MAX_CONCURRENT_QUERIES=0 (start a `gateway worker`)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, c := range describeWorkers(tt.workers, tt.err, now) {
				mark := "ok"
				switch {
				case c.Warning:
					mark = "warn"
				case !c.OK:
					mark = "FAIL"
				}
				if c.Name != "workers" || c.need != "" {
					t.Errorf("check %+v: want named workers, needing nothing", c)
				}
				got = append(got, mark+": "+c.Detail)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("checks (-want +got):\n%s", d)
			}
		})
	}
}
