package cost

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"path/filepath"
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

// cluster is one NATS server the test can stop and start again on the
// same port and store.
type cluster struct {
	t    *testing.T
	dir  string
	port int
	srv  *server.Server
}

func startNATS(t *testing.T) *cluster {
	t.Helper()
	c := &cluster{t: t, dir: t.TempDir()}
	c.srv = natstest.Start(t, c.dir)
	c.port = c.srv.Addr().(*net.TCPAddr).Port
	return c
}

func (c *cluster) stop() {
	c.srv.Shutdown()
	c.srv.WaitForShutdown()
}

func (c *cluster) restart() {
	c.t.Helper()
	c.srv = natstest.StartWith(c.t, &server.Options{ServerName: "solo", Host: "127.0.0.1", Port: c.port,
		JetStream: true, StoreDir: c.dir})
}

// connect is a connection that reconnects for ever, as the gateway's does.
func (c *cluster) connect() jetstream.JetStream {
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

// process is one gateway process: its ledger in its own directory,
// shared through the stream.
type process struct {
	t      *testing.T
	nats   *cluster
	path   string
	origin string

	ledger *Ledger
	log    *kvlog.Log
	cancel context.CancelFunc
	done   chan struct{}
}

func newProcess(t *testing.T, c *cluster, origin string) *process {
	t.Helper()
	p := &process{t: t, nats: c, path: filepath.Join(t.TempDir(), FileName), origin: origin}
	p.start()
	t.Cleanup(p.stop)
	return p
}

func (p *process) start() {
	p.t.Helper()
	l, err := Open(p.path, nil)
	if err != nil {
		p.t.Fatal(err)
	}
	o := StreamOptions(1, p.origin)
	o.Log = zerolog.New(zerolog.NewTestWriter(p.t))
	o.Retry = 10 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lg, err := kvlog.Open(ctx, p.nats.connect(), o, l)
	if err != nil {
		p.t.Fatal(err)
	}
	l.Share(lg)
	run, stop := context.WithCancel(context.Background())
	p.ledger, p.log, p.cancel, p.done = l, lg, stop, make(chan struct{})
	go func() {
		defer close(p.done)
		lg.Run(run)
	}()
}

// stop ends the process as a shutdown does: the ledger written, the
// log's goroutines gone.
func (p *process) stop() {
	if p.cancel == nil {
		return
	}
	p.cancel()
	<-p.done
	p.ledger.Close()
	p.cancel = nil
}

func (p *process) restart() {
	p.stop()
	p.start()
}

// waitFor polls cond until it holds or the deadline passes.
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

// spent is the ledger's total today and in the channel, in whole cents.
func spent(l *Ledger, now time.Time, channel string) (gateway, inChannel int) {
	gw, ch := l.Spent(now, channel)
	return int(gw*100 + 0.5), int(ch*100 + 0.5)
}

func TestSharedTurnCountsOnTheOtherProcess(t *testing.T) {
	c := startNATS(t)
	a, b := newProcess(t, c, "a"), newProcess(t, c, "b")
	now := time.Now()
	if err := a.ledger.Record(Entry{Time: now, Channel: "c1", Kind: "message", CostUSD: 3, Outcome: "ok"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the turn on b", func() bool { gw, _ := spent(b.ledger, now, "c1"); return gw == 300 })
	budget := Budget{ChannelDailyUSD: 3}
	if diff := cmp.Diff(Verdict{Level: LevelOver, Channel: true, SpentUSD: 3, LimitUSD: 3}, b.ledger.Check(budget, now, "c1")); diff != "" {
		t.Errorf("b's check (-want +got):\n%s", diff)
	}
	r := b.ledger.Report(now, "c1")
	if r.Today.Turns != 1 || r.GatewayMonth.Turns != 1 || r.Today.ByKind["message"] != 3 {
		t.Errorf("b's report: today %+v, month %+v; want one turn of $3", r.Today, r.GatewayMonth)
	}
	// b's own turn counts on a, and a's turn is not sent back to it.
	if err := b.ledger.Record(Entry{Time: now, Channel: "c2", Kind: "cron", CostUSD: 1, Outcome: "ok"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b's turn on a", func() bool { gw, _ := spent(a.ledger, now, ""); return gw == 400 })
	waitFor(t, "a's copy at the end of the stream", func() bool { return a.log.Position() == 2 && b.log.Position() == 2 })
	for name, l := range map[string]*Ledger{"a": a.ledger, "b": b.ledger} {
		if gw, ch := spent(l, now, "c1"); gw != 400 || ch != 300 {
			t.Errorf("%s spent %d¢ (c1 %d¢), want 400¢ (300¢)", name, gw, ch)
		}
	}
}

func TestSharedLiftAppliesOnTheOtherProcess(t *testing.T) {
	c := startNATS(t)
	a, b := newProcess(t, c, "a"), newProcess(t, c, "b")
	now := time.Now()
	if err := a.ledger.Record(Entry{Time: now, Channel: "c1", Kind: "message", CostUSD: 5}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the turn on b", func() bool { gw, _ := spent(b.ledger, now, ""); return gw == 500 })
	budget := Budget{DailyUSD: 4, ChannelDailyUSD: 4}
	if got := a.ledger.Check(budget, now, "c1").Level; got != LevelOver {
		t.Fatalf("a's check before the lift = %v, want over", got)
	}
	if err := b.ledger.Lift(now, "c1", "op"); err != nil {
		t.Fatal(err)
	}
	if err := b.ledger.Lift(now, "", "op"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the lifts on a", func() bool { return a.ledger.Lifted(now, "c1") && a.ledger.Lifted(now, "") })
	if got := a.ledger.Check(budget, now, "c1"); got.Level != LevelOK {
		t.Errorf("a's check after the lift = %+v, want OK", got)
	}
	// The lift is in a's file: it holds after a restart without NATS' help.
	a.stop()
	l, err := Open(a.path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if !l.Lifted(now, "c1") {
		t.Error("a's ledger file lost the lift")
	}
}

func TestSharedRestartCatchesUpWithoutCountingTwice(t *testing.T) {
	c := startNATS(t)
	a, b := newProcess(t, c, "a"), newProcess(t, c, "b")
	now := time.Now()
	record := func(p *process, usd float64) {
		t.Helper()
		if err := p.ledger.Record(Entry{Time: now, Channel: "c1", Kind: "message", CostUSD: usd}); err != nil {
			t.Fatal(err)
		}
	}
	record(a, 1)
	record(a, 2)
	waitFor(t, "a's turns on b", func() bool { gw, _ := spent(b.ledger, now, ""); return gw == 300 })
	b.stop()
	record(a, 4) // while b is down
	b.start()
	waitFor(t, "b caught up", func() bool { return b.log.Position() == 3 })
	if gw, _ := spent(b.ledger, now, ""); gw != 700 {
		t.Errorf("b after a restart spent %d¢, want 700¢", gw)
	}
	// Another restart with nothing new reads nothing again.
	b.restart()
	if gw, _ := spent(b.ledger, now, ""); gw != 700 {
		t.Errorf("b after a second restart spent %d¢, want 700¢", gw)
	}
	if r := b.ledger.Report(now, "c1"); r.Today.Turns != 3 {
		t.Errorf("b counts %d turns, want 3", r.Today.Turns)
	}
}

func TestSharedRecordWhileNATSIsDown(t *testing.T) {
	c := startNATS(t)
	a, b := newProcess(t, c, "a"), newProcess(t, c, "b")
	now := time.Now()
	if err := a.ledger.Record(Entry{Time: now, Channel: "c1", Kind: "message", CostUSD: 1}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first turn on b", func() bool { gw, _ := spent(b.ledger, now, ""); return gw == 100 })

	c.stop()
	done := make(chan error, 1)
	go func() { done <- a.ledger.Record(Entry{Time: now, Channel: "c1", Kind: "message", CostUSD: 2}) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Record waited on NATS")
	}
	if gw, _ := spent(a.ledger, now, ""); gw != 300 {
		t.Errorf("a spent %d¢ with NATS down, want 300¢", gw)
	}
	waitFor(t, "a to see that its record is not published", func() bool { return a.log.Behind() == 1 })

	c.restart()
	waitFor(t, "the second turn on b", func() bool { gw, _ := spent(b.ledger, now, ""); return gw == 300 })
	waitFor(t, "a's record published", func() bool { return a.log.Behind() == 0 })
	b.restart()
	waitFor(t, "b at the end of the stream", func() bool { return b.log.Position() == 2 })
	if gw, _ := spent(b.ledger, now, ""); gw != 300 {
		t.Errorf("b spent %d¢ after a restart, want 300¢ (each turn once)", gw)
	}
}

func TestSharedRecordsMadeBeforeACrashArePublishedAtTheNextStart(t *testing.T) {
	c := startNATS(t)
	a, b := newProcess(t, c, "a"), newProcess(t, c, "b")
	now := time.Now()
	c.stop()
	for _, usd := range []float64{1, 2} {
		if err := a.ledger.Record(Entry{Time: now, Channel: "c1", Kind: "message", CostUSD: usd}); err != nil {
			t.Fatal(err)
		}
	}
	a.stop() // the records are in a's file, never published
	c.restart()
	a.start()
	waitFor(t, "a's records on b", func() bool { gw, _ := spent(b.ledger, now, ""); return gw == 300 })
	waitFor(t, "a published", func() bool { return a.log.Behind() == 0 })
	// Starting again publishes nothing twice.
	a.restart()
	if err := a.ledger.Record(Entry{Time: now, Channel: "c1", Kind: "message", CostUSD: 4}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the third record on b", func() bool { return b.log.Position() == 3 })
	if gw, _ := spent(b.ledger, now, ""); gw != 700 {
		t.Errorf("b spent %d¢, want 700¢", gw)
	}
	if gw, _ := spent(a.ledger, now, ""); gw != 700 {
		t.Errorf("a spent %d¢, want 700¢", gw)
	}
}

// TestSharedTotalsAreTheSumOfAllRecords records on three processes in a
// random order, restarting them at random moments, and checks that every
// process ends with the totals of all the records, each counted once.
func TestSharedTotalsAreTheSumOfAllRecords(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 26))
			c := startNATS(t)
			procs := []*process{newProcess(t, c, "p0"), newProcess(t, c, "p1"), newProcess(t, c, "p2")}
			now := time.Now()
			want := map[string]int{}
			turns := 0
			for range 60 {
				p := procs[rng.IntN(len(procs))]
				if rng.IntN(8) == 0 {
					p.restart()
					continue
				}
				cents := 1 + rng.IntN(500)
				ch := fmt.Sprintf("c%d", rng.IntN(3))
				want[ch] += cents
				turns++
				if err := p.ledger.Record(Entry{Time: now, Channel: ch, Kind: "message", CostUSD: float64(cents) / 100}); err != nil {
					t.Fatal(err)
				}
			}
			total := 0
			for _, v := range want {
				total += v
			}
			for i, p := range procs {
				waitFor(t, fmt.Sprintf("p%d published", i), func() bool { return p.log.Behind() == 0 })
			}
			for i, p := range procs {
				waitFor(t, fmt.Sprintf("p%d at the end of the stream", i), func() bool { return p.log.Position() == uint64(turns) })
				got := map[string]int{}
				for ch := range want {
					_, got[ch] = spent(p.ledger, now, ch)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("p%d's totals per channel (-want +got):\n%s", i, diff)
				}
				if r := p.ledger.Report(now, ""); r.GatewayToday.Turns != turns {
					t.Errorf("p%d counts %d turns, want %d", i, r.GatewayToday.Turns, turns)
				}
				// And after a restart, from its file alone.
				p.restart()
				if gw, _ := spent(p.ledger, now, ""); gw != total {
					t.Errorf("p%d after a restart spent %d¢, want %d¢", i, gw, total)
				}
			}
		})
	}
}

// FuzzApply feeds another process's record as raw bytes: it is applied
// or refused, and the totals never turn negative or not a number.
func FuzzApply(f *testing.F) {
	f.Add([]byte(`{"time":"2026-11-25T10:00:00Z","channel":"c","kind":"message","cost_usd":1.5,"duration_ns":0,"outcome":"ok"}`))
	f.Add([]byte(`{"lift":{"day":"2026-11-25","channel":"c","by":"op"}}`))
	f.Add([]byte(`{"time":"2026-11-25T10:00:00Z","cost_usd":-1}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := Open("", time.UTC)
		if err != nil {
			t.Fatal(err)
		}
		err = l.Apply(kvlog.Message{Seq: 1, Origin: "o", N: 1, Data: data})
		if got := l.Position(); (err == nil) != (got == 1) {
			t.Errorf("Apply = %v and position %d: a refused record must not move it", err, got)
		}
		for _, d := range l.days {
			if d.all.USD < 0 || math.IsNaN(d.all.USD) || math.IsInf(d.all.USD, 0) {
				t.Errorf("totals %v after applying %q", d.all.USD, data)
			}
		}
	})
}
