package cluster

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentgateway/gateway/internal/natstest"
)

// startCluster starts n servers routed to each other as one JetStream
// cluster and waits until it has a meta leader.
func startCluster(t *testing.T, n int) []*server.Server {
	t.Helper()
	ports := make([]int, n)
	var routes []string
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		must(t, err)
		ports[i] = l.Addr().(*net.TCPAddr).Port
		l.Close()
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", ports[i]))
	}
	var servers []*server.Server
	for i := range n {
		servers = append(servers, natstest.StartWith(t, &server.Options{
			ServerName: fmt.Sprintf("n%d", i), Host: "127.0.0.1", Port: server.RANDOM_PORT,
			JetStream: true, StoreDir: t.TempDir(),
			Cluster: server.ClusterOpts{Name: "gw", Host: "127.0.0.1", Port: ports[i]},
			Routes:  server.RoutesFromStr(strings.Join(routes, ",")),
		}))
	}
	js := dialAll(t, servers).js
	waitFor(t, 30*time.Second, "a JetStream meta leader", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := js.AccountInfo(ctx)
		return err == nil
	})
	return servers
}

// dialAll connects to any of the servers, reconnecting for ever.
func dialAll(t *testing.T, servers []*server.Server) node {
	t.Helper()
	var urls []string
	for _, s := range servers {
		urls = append(urls, s.ClientURL())
	}
	nc, err := nats.Connect(strings.Join(urls, ","), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	must(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	must(t, err)
	return node{nc: nc, js: js}
}

// On three servers with replicas 3, the server leading the leases' bucket
// dies while a process holds the lease: the lease goes on (or is taken
// again) under a new leader, never held twice at once.
func TestLeaseSurvivesTheLossOfItsBucketsLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	const ttl, renew = 3 * time.Second, time.Second
	servers := startCluster(t, 3)
	st := newStage()
	for _, who := range []string{"a", "b"} {
		contend(t, dialAll(t, servers), LeaseOptions{Replicas: 3, TTL: ttl, Renew: renew, Holder: who,
			Log: testLog(t).With().Str("node", who).Logger()}, "scheduler", st.work(who))
	}
	waitFor(t, 30*time.Second, "a holder", func() bool { return st.holder() != "" })

	ctx := ctxFor(t)
	js := dialAll(t, servers).js
	s, err := js.Stream(ctx, "KV_"+BucketLeases)
	must(t, err)
	info, err := s.Info(ctx)
	must(t, err)
	if info.Config.Replicas != 3 || info.Cluster == nil {
		t.Fatalf("the bucket's stream: replicas %d, cluster %+v; want 3", info.Config.Replicas, info.Cluster)
	}
	leader := info.Cluster.Leader
	for _, srv := range servers {
		if srv.Name() == leader {
			srv.Shutdown()
			srv.WaitForShutdown()
		}
	}
	lost := time.Now()
	// A request sent as the server died gets no answer: each has a short
	// deadline, and is tried again.
	var rev uint64
	waitFor(t, 30*time.Second, "a renewal under a new leader", func() bool {
		c, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		kv, err := js.KeyValue(c, BucketLeases)
		if err != nil {
			return false
		}
		e, err := kv.Get(c, "scheduler")
		if err != nil {
			return false
		}
		if rev == 0 {
			rev = e.Revision()
		}
		return e.Revision() > rev && st.holder() != ""
	})
	t.Logf("the lease was renewed %s after its bucket's leader died (held by %s; %d takes in all)",
		time.Since(lost).Round(time.Millisecond), st.holder(), len(st.enters))
	st.check(t)
}
