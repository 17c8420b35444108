package kvlog

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/natstest"
)

// memory is a local copy in memory: what survives a "restart" is the
// value itself.
type memory struct {
	mu      sync.Mutex
	own     []Record
	applied []Message
}

func (m *memory) Position() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.applied) == 0 {
		return 0
	}
	return m.applied[len(m.applied)-1].Seq
}

func (m *memory) Apply(msg Message) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.applied = append(m.applied, msg)
	return nil
}

func (m *memory) Own(after uint64, limit int) ([]Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Record
	for _, r := range m.own {
		if r.N > after && (limit <= 0 || len(out) < limit) {
			out = append(out, r)
		}
	}
	return out, nil
}

// record numbers a record, keeps it and publishes it, as a copy does.
func (m *memory) record(l *Log, data string) {
	m.mu.Lock()
	r := Record{N: l.Next(), Data: []byte(data)}
	m.own = append(m.own, r)
	m.mu.Unlock()
	l.Publish(r)
}

func (m *memory) data() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, a := range m.applied {
		out = append(out, a.Origin+":"+string(a.Data))
	}
	return out
}

func jsOf(t *testing.T) jetstream.JetStream {
	t.Helper()
	s := natstest.Start(t, t.TempDir())
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func options(t *testing.T, origin string) Options {
	return Options{Stream: "TEST_LOG", Subject: "test.log", Origin: origin, MaxAge: time.Hour,
		Retry: 10 * time.Millisecond, Log: zerolog.New(zerolog.NewTestWriter(t))}
}

func run(t *testing.T, l *Log) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
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

func TestRecordsBeyondMaxPendingAreReadBackFromTheCopy(t *testing.T) {
	js := jsOf(t)
	ctx := context.Background()
	oa := options(t, "a")
	oa.MaxPending = 3
	var a, b memory
	la, err := Open(ctx, js, oa, &a)
	if err != nil {
		t.Fatal(err)
	}
	// Ten records before the publisher runs: seven are left out of the
	// queue and come back from the copy.
	var want []string
	for _, d := range []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"} {
		a.record(la, d)
		want = append(want, "a:"+d)
	}
	lb, err := Open(ctx, js, options(t, "b"), &b)
	if err != nil {
		t.Fatal(err)
	}
	run(t, la)
	run(t, lb)
	waitFor(t, "every record on b", func() bool { return len(b.data()) >= len(want) })
	if diff := cmp.Diff(want, b.data()); diff != "" {
		t.Errorf("b applied (-want +got):\n%s", diff)
	}
	if got := la.Behind(); got != 0 {
		t.Errorf("a is %d behind, want 0", got)
	}
	if len(a.applied) != 0 {
		t.Errorf("a applied its own records: %v", a.data())
	}
}

func TestSettingsThatDifferAreRefused(t *testing.T) {
	js := jsOf(t)
	ctx := context.Background()
	if _, err := Open(ctx, js, options(t, "a"), &memory{}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		change func(*Options)
		want   []string
	}{
		{"max age", func(o *Options) { o.MaxAge = 2 * time.Hour }, []string{"max age is 1h0m0s, want 2h0m0s", "nats stream edit TEST_LOG --max-age"}},
		{"max age unlimited", func(o *Options) { o.MaxAge = 0 }, []string{"max age is 1h0m0s, want unlimited"}},
		{"replicas", func(o *Options) { o.Replicas = 3 }, []string{"replicas are 1, want 3", "NATS_REPLICAS=1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := options(t, "a")
			tc.change(&o)
			_, err := Open(ctx, js, o, &memory{})
			if err == nil {
				t.Fatal("Open accepted a stream that differs")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	if err := Check(ctx, js, Options{Stream: "OTHER", Subject: "other", Origin: "a"}); !errors.Is(err, ErrNotSetUp) {
		t.Errorf("Check of a missing stream = %v, want ErrNotSetUp", err)
	}
}

func TestLoadOriginIsStable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node-id")
	first, err := LoadOrigin(path, "host.example.com")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(first, "host-example-com-") || !originPattern().MatchString(first) {
		t.Errorf("origin %q: want the host name and a suffix, as a subject token", first)
	}
	again, err := LoadOrigin(path, "other")
	if err != nil || again != first {
		t.Errorf("second LoadOrigin = %q, %v; want %q", again, err, first)
	}
}

func TestBadOriginIsRefused(t *testing.T) {
	for _, origin := range []string{"", "a.b", "a*", "a b", strings.Repeat("x", 65)} {
		if _, err := Open(context.Background(), nil, Options{Stream: "S", Subject: "s", Origin: origin}, &memory{}); !errors.Is(err, ErrBadOrigin) {
			t.Errorf("origin %q: %v, want ErrBadOrigin", origin, err)
		}
	}
}

// A stopping process publishes what it recorded after its Run stopped
// (its last turns, during the drain), so the others count it before it
// starts again.
func TestFlushPublishesWhatWaitsAtTheStop(t *testing.T) {
	js := jsOf(t)
	ctx := context.Background()
	a, b := &memory{}, &memory{}
	la, err := Open(ctx, js, options(t, "a"), a)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := Open(ctx, js, options(t, "b"), b)
	if err != nil {
		t.Fatal(err)
	}
	run(t, lb)
	a.record(la, "during the drain") // a's Run never runs again
	if err := la.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b to apply a's record", func() bool { return len(b.data()) == 1 })
	if got := b.data(); got[0] != "a:during the drain" {
		t.Fatalf("b applied %q", got)
	}
}
