package jsinbox

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentgateway/gateway/internal/queue"
)

// TestReplicasKeepEveryAcceptedEventWhenTheLeaderDies accepts events on a
// 3-node cluster with replicas 3, shuts down the stream's leader, and
// checks that every accepted event, its record and its key survive, and
// that the cluster takes new events under a new leader.
func TestReplicasKeepEveryAcceptedEventWhenTheLeaderDies(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	servers := runCluster(t, 3)
	nc := connect(t, servers...)
	opts := Options{Partitions: 4, Replicas: 3, MaxDepth: 1000, MaxPerLane: 100, Timeout: 10 * time.Second}
	in := openInbox(t, nc, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var accepted []queue.Event
	for n := range 40 {
		e, err := in.Append(ctx, event(fmt.Sprint(100+n%5), fmt.Sprint("k", n), n))
		must(t, err)
		accepted = append(accepted, e)
	}
	must(t, in.Started(accepted[0].ID))
	must(t, in.Replied(accepted[0].ID, "answer"))

	js, _ := jetstream.New(nc)
	s, err := js.Stream(ctx, StreamName)
	must(t, err)
	info, err := s.Info(ctx)
	must(t, err)
	if info.Config.Replicas != 3 || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
		t.Fatalf("stream cluster info %+v, want a leader and 2 replicas", info.Cluster)
	}
	leader := info.Cluster.Leader
	var dead bool
	for _, srv := range servers {
		if srv.Name() == leader {
			srv.Shutdown()
			srv.WaitForShutdown()
			dead = true
		}
	}
	if !dead {
		t.Fatalf("no server is named %q", leader)
	}
	waitFor(t, 30*time.Second, "a new stream leader", func() bool {
		c, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		info, err := s.Info(c)
		return err == nil && info.Cluster != nil && info.Cluster.Leader != "" && info.Cluster.Leader != leader
	})

	// A fresh Inbox, as another node would open it after the failover.
	after := openInbox(t, nc, opts)
	var got []uint64
	for _, en := range after.Unfinished() {
		got = append(got, en.Event.ID)
	}
	if len(got) != len(accepted) {
		t.Fatalf("%d events unfinished after the leader died, want all %d accepted", len(got), len(accepted))
	}
	for i, e := range accepted {
		if got[i] != e.ID {
			t.Fatalf("event %d: id %d after the failover, want %d", i, got[i], e.ID)
		}
	}
	if en, _ := after.Get(accepted[0].ID); en.Reply != "answer" {
		t.Errorf("the first event's record after the failover: %+v", en)
	}
	if _, err := after.Append(ctx, event("100", "k3", 99)); err == nil {
		t.Error("a key accepted before the failover was taken again")
	}
	waitFor(t, 30*time.Second, "the cluster to take a new event", func() bool {
		c, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := after.Append(c, event("100", "fresh", 100))
		return err == nil
	})
}
