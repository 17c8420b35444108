// Package natstest runs real NATS servers with JetStream for tests, in the
// test's process; only tests import it, so the server never reaches the
// gateway's binary.
package natstest

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Start runs one JetStream server on a random local port, storing in dir,
// until the test ends.
func Start(t testing.TB, dir string) *server.Server {
	t.Helper()
	return StartWith(t, &server.Options{
		ServerName: "solo", Host: "127.0.0.1", Port: server.RANDOM_PORT,
		JetStream: true, StoreDir: dir,
	})
}

// StartWith runs a server with opts (quiet, no signal handlers) and waits
// until it takes connections; the test's cleanup shuts it down.
func StartWith(t testing.TB, opts *server.Options) *server.Server {
	t.Helper()
	opts.NoLog, opts.NoSigs = true, true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("nats server: %v", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server did not start")
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}
