package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentgateway/gateway/internal/cluster"
	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/jsinbox"
	"github.com/agentgateway/gateway/internal/queue"
)

// workerChecks list the gateway's processes that NATS knows of (each
// one's heartbeat in cluster.BucketWorkers), creating nothing.
func workerChecks(ctx context.Context, cfg *config.Config, now time.Time) []check {
	opts := []nats.Option{nats.Name("gateway-doctor"), nats.Timeout(5 * time.Second)}
	switch {
	case cfg.NATSCredsFile != "":
		opts = append(opts, nats.UserCredentials(cfg.NATSCredsFile))
	case cfg.NATSToken != "":
		opts = append(opts, nats.Token(cfg.NATSToken))
	}
	nc, err := nats.Connect(strings.Join(cfg.NATSURLs, ","), opts...)
	if err != nil {
		return describeWorkers(nil, fmt.Errorf("cannot connect to NATS: %w", err), now)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return describeWorkers(nil, err, now)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ws, err := cluster.ReadWorkers(ctx, js, cluster.RegistryOptions{Replicas: cfg.NATSReplicas})
	return describeWorkers(ws, err, now)
}

// describeWorkers is the doctor's report on the processes listed (err is
// ReadWorkers's).
func describeWorkers(ws []cluster.Worker, err error, now time.Time) []check {
	const name = "workers"
	switch {
	case errors.Is(err, jsinbox.ErrNotSetUp):
		return []check{{Name: name, OK: true, Detail: "no gateway process has started with this NATS yet: each `gateway run` and `gateway worker` lists itself in the bucket " + cluster.BucketWorkers}}
	case err != nil:
		return []check{{Name: name, Warning: true, Detail: "cannot list the gateway's processes: " + err.Error()}}
	case len(ws) == 0:
		return []check{{Name: name, Warning: true, Detail: fmt.Sprintf("no gateway process is running: none has sent a heartbeat in the last %s, so nothing takes or runs prompts (start `gateway run`, and `gateway worker` on other machines)", cluster.DefaultWorkerTTL)}}
	}
	runs, slots, busy := 0, 0, 0
	for _, w := range ws {
		if w.Role == cluster.RoleRun {
			runs++
		}
		slots += w.Slots
		busy += len(w.Turns)
	}
	out := []check{{Name: name, OK: true, Detail: fmt.Sprintf("%d %s running: %d of %d turn slots busy", len(ws), pluralWord(len(ws), "gateway process", "gateway processes"), busy, slots)}}
	for _, w := range ws {
		out = append(out, check{Name: name, OK: true, Detail: describeWorker(w, now)})
	}
	if runs == 0 {
		out = append(out, check{Name: name, Warning: true, Detail: "no `gateway run` is running: nothing takes prompts from Discord or webhooks, and the schedule does not fire"})
	}
	if slots == 0 {
		out = append(out, check{Name: name, Warning: true, Detail: "no process runs turns: every one has MAX_CONCURRENT_QUERIES=0 (start a `gateway worker`)"})
	}
	return out
}

// describeWorker is one process's line: who, how fresh, what it runs.
func describeWorker(w cluster.Worker, now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s", w.Name, w.Role)
	if w.Version != "" {
		b.WriteString(" " + w.Version)
	}
	fmt.Fprintf(&b, "): last heartbeat %s ago, up %s, ", age(now, w.Beat), age(now, w.Started))
	if w.Slots == 0 {
		b.WriteString("runs no turns (MAX_CONCURRENT_QUERIES=0)")
		return b.String()
	}
	fmt.Fprintf(&b, "%d of %d slots busy", len(w.Turns), w.Slots)
	for i, t := range w.Turns {
		sep := ", "
		if i == 0 {
			sep = ": "
		}
		fmt.Fprintf(&b, "%s%s event %d for %s", sep, laneText(t.Lane), t.Event, age(now, t.Since))
	}
	return b.String()
}

// laneText names a lane: a channel's id, or the schedule's and webhooks'
// shared lane.
func laneText(lane string) string {
	if lane == queue.SystemLane {
		return "the system lane"
	}
	return "channel " + lane
}

// age is how long ago at was, to the second; a clock ahead of this one
// reads as 0s.
func age(now, at time.Time) time.Duration {
	return max(now.Sub(at), 0).Round(time.Second)
}
