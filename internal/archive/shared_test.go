package archive

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/kvlog"
	"github.com/agentgateway/gateway/internal/natstest"
)

// natsServer is one NATS server the test can stop and start again on the
// same port and store.
type natsServer struct {
	t    *testing.T
	dir  string
	port int
	srv  *server.Server
}

func startNATS(t *testing.T) *natsServer {
	t.Helper()
	c := &natsServer{t: t, dir: t.TempDir()}
	c.srv = natstest.Start(t, c.dir)
	c.port = c.srv.Addr().(*net.TCPAddr).Port
	return c
}

func (c *natsServer) stop() {
	c.srv.Shutdown()
	c.srv.WaitForShutdown()
}

func (c *natsServer) restart() {
	c.t.Helper()
	c.srv = natstest.StartWith(c.t, &server.Options{ServerName: "solo", Host: "127.0.0.1", Port: c.port,
		JetStream: true, StoreDir: c.dir})
}

func (c *natsServer) connect() jetstream.JetStream {
	c.t.Helper()
	nc, err := nats.Connect(c.srv.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond),
		nats.RetryOnFailedConnect(true))
	if err != nil {
		c.t.Fatalf("connect: %v", err)
	}
	c.t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		c.t.Fatal(err)
	}
	return js
}

// process is one gateway process with its archive in its own directory.
type process struct {
	t      *testing.T
	nats   *natsServer
	dir    string
	origin string

	archive *Archive
	log     *kvlog.Log
	cancel  context.CancelFunc
	done    chan struct{}
}

func newProcess(t *testing.T, c *natsServer, origin string) *process {
	t.Helper()
	p := &process{t: t, nats: c, dir: filepath.Join(t.TempDir(), "conversations"), origin: origin}
	p.start()
	t.Cleanup(p.stop)
	return p
}

func (p *process) start() {
	p.t.Helper()
	log := zerolog.New(zerolog.NewTestWriter(p.t))
	a, err := Open(Options{Dir: p.dir, Keep: 5, Days: 30}, log)
	if err != nil {
		p.t.Fatal(err)
	}
	o := StreamOptions(1, 30, p.origin)
	o.Log = log
	o.Retry = 10 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lg, err := kvlog.Open(ctx, p.nats.connect(), o, a)
	if err != nil {
		p.t.Fatal(err)
	}
	a.Share(lg)
	run, stop := context.WithCancel(context.Background())
	p.archive, p.log, p.cancel, p.done = a, lg, stop, make(chan struct{})
	go func() {
		defer close(p.done)
		lg.Run(run)
	}()
}

func (p *process) stop() {
	if p.cancel == nil {
		return
	}
	p.cancel()
	<-p.done
	p.cancel = nil
}

func (p *process) restart() {
	p.stop()
	p.start()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// prompts are the prompts of the channel's recent exchanges, oldest
// first.
func prompts(a *Archive, channel string) []string {
	var out []string
	for _, e := range a.Recent(channel) {
		out = append(out, e.Prompt)
	}
	return out
}

func TestSharedExchangeIsInTheOtherProcessRecent(t *testing.T) {
	c := startNATS(t)
	a, b := newProcess(t, c, "a"), newProcess(t, c, "b")
	t0 := time.Now().Round(time.Second)
	if err := a.archive.Append(Entry{Time: t0, ChannelID: "100", Kind: "message", Author: "ann", Prompt: "hello", Reply: "hi"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the exchange on b", func() bool { return len(b.archive.Recent("100")) == 1 })
	got := b.archive.Recent("100")[0]
	want := Entry{Time: t0, ChannelID: "100", Kind: "message", Author: "ann", Prompt: "hello", Reply: "hi", Origin: "a", N: 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("b's recent exchange (-want +got):\n%s", diff)
	}
	// It is in b's day file too, for people.
	day, err := os.ReadFile(filepath.Join(b.dir, "100", t0.Format(time.DateOnly)+".md"))
	if err != nil || !strings.Contains(string(day), "hello") {
		t.Errorf("b's day file = %q, %v; want the exchange", day, err)
	}
	// b answers the next prompt; a sees both, in order, and only once.
	if err := b.archive.Append(Entry{Time: t0.Add(time.Minute), ChannelID: "100", Kind: "message", Prompt: "again", Reply: "yes"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both processes at the end", func() bool { return a.log.Position() == 2 && b.log.Position() == 2 })
	for name, p := range map[string]*process{"a": a, "b": b} {
		if diff := cmp.Diff([]string{"hello", "again"}, prompts(p.archive, "100")); diff != "" {
			t.Errorf("%s's recent prompts (-want +got):\n%s", name, diff)
		}
	}
}

func TestSharedExchangeArrivingLateKeepsTimeOrder(t *testing.T) {
	c := startNATS(t)
	a, b := newProcess(t, c, "a"), newProcess(t, c, "b")
	t0 := time.Now().Round(time.Second)
	c.stop()
	// a's turn finished first, but NATS was down: b records the next one
	// before a's arrives.
	if err := a.archive.Append(Entry{Time: t0, ChannelID: "100", Prompt: "first"}); err != nil {
		t.Fatal(err)
	}
	if err := b.archive.Append(Entry{Time: t0.Add(time.Minute), ChannelID: "100", Prompt: "second"}); err != nil {
		t.Fatal(err)
	}
	c.restart()
	waitFor(t, "both exchanges on both", func() bool {
		return len(a.archive.Recent("100")) == 2 && len(b.archive.Recent("100")) == 2
	})
	for name, p := range map[string]*process{"a": a, "b": b} {
		if diff := cmp.Diff([]string{"first", "second"}, prompts(p.archive, "100")); diff != "" {
			t.Errorf("%s's recent prompts (-want +got):\n%s", name, diff)
		}
	}
}

func TestSharedArchiveRestartCatchesUpOnce(t *testing.T) {
	c := startNATS(t)
	a, b := newProcess(t, c, "a"), newProcess(t, c, "b")
	t0 := time.Now().Round(time.Second)
	appendOn := func(p *process, i int) {
		t.Helper()
		if err := p.archive.Append(Entry{Time: t0.Add(time.Duration(i) * time.Second), ChannelID: "100", Prompt: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	appendOn(a, 1)
	waitFor(t, "b has 1", func() bool { return len(b.archive.Recent("100")) == 1 })
	b.stop()
	appendOn(a, 2)
	c.stop()
	appendOn(a, 3) // NATS down: published once it is back
	a.stop()       // and a stops before that: its next start publishes it
	c.restart()
	a.start()
	b.start()
	waitFor(t, "b at the end", func() bool { return b.log.Position() == 3 })
	b.restart()
	appendOn(a, 4)
	waitFor(t, "b at the end again", func() bool { return b.log.Position() == 4 })
	if diff := cmp.Diff([]string{"1", "2", "3", "4"}, prompts(b.archive, "100")); diff != "" {
		t.Errorf("b's recent prompts (-want +got):\n%s", diff)
	}
	day, err := os.ReadFile(filepath.Join(b.dir, "100", t0.Format(time.DateOnly)+".md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(day), "\n### "); n != 4 {
		t.Errorf("b's day file has %d entries, want 4:\n%s", n, day)
	}
}

func TestSharedArchiveWithoutShareHasNoJournal(t *testing.T) {
	dir := t.TempDir()
	a, err := Open(Options{Dir: dir, Keep: 5}, zerolog.New(zerolog.NewTestWriter(t)))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Append(Entry{ChannelID: "100", Prompt: "p"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, JournalFile)); !os.IsNotExist(err) {
		t.Errorf("a journal without the shared mode: %v", err)
	}
}
