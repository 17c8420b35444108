package kvpersona

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/natstest"
	"github.com/agentgateway/gateway/internal/persona"
)

// connect opens a connection of its own to srv, as another machine would.
func connect(t *testing.T, srv *server.Server) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(srv.ClientURL())
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

// worker is one machine's CONFIG_DIR with its memory guard sharing
// memory.md through its own connection.
type worker struct {
	t     *testing.T
	path  string
	guard *persona.MemoryGuard
	mem   *Memory
}

func newWorker(t *testing.T, srv *server.Server, content string) *worker {
	t.Helper()
	path := filepath.Join(t.TempDir(), persona.MemoryFile)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	mem, err := OpenMemory(context.Background(), connect(t, srv), 1, zerolog.New(zerolog.NewTestWriter(t)))
	if err != nil {
		t.Fatal(err)
	}
	g := persona.NewMemoryGuard(path)
	g.Share(mem)
	return &worker{t: t, path: path, guard: g, mem: mem}
}

func (w *worker) read() string {
	w.t.Helper()
	data, err := os.ReadFile(w.path)
	if err != nil {
		w.t.Fatal(err)
	}
	return string(data)
}

func (w *worker) write(s string) {
	w.t.Helper()
	if err := os.WriteFile(w.path, []byte(s), 0o600); err != nil {
		w.t.Fatal(err)
	}
}

// run is one agent run: it begins, changes the file with edit, and ends.
func (w *worker) run(edit func(string) string) {
	w.t.Helper()
	r := w.guard.Begin()
	w.write(edit(w.read()))
	if err := r.End(); err != nil {
		w.t.Error(err)
	}
}

func add(fact string) func(string) string { return func(s string) string { return s + fact + "\n" } }

func sharedText(t *testing.T, m *Memory) string {
	t.Helper()
	s, _, err := m.get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// lines are the lines of s, without their order: the merge places lines
// from elsewhere after their neighbours, so two workers may order them
// differently.
func lines(s string) map[string]int {
	m := map[string]int{}
	for _, l := range strings.SplitAfter(s, "\n") {
		if l != "" {
			m[l]++
		}
	}
	return m
}

func wantLines(t *testing.T, what, got string, want ...string) {
	t.Helper()
	w := map[string]int{}
	for _, l := range want {
		w[l+"\n"]++
	}
	if diff := cmp.Diff(w, lines(got)); diff != "" {
		t.Errorf("%s (-want +got):\n%s\n%s", what, diff, got)
	}
}

// Two workers (two CONFIG_DIRs, two connections, one bucket) each run a
// turn that adds a fact, at the same time: after the next run starts, both
// facts are in the shared copy and in both files. A deletion made by one
// worker's run stays deleted on both.
func TestTwoWorkersKeepEveryFact(t *testing.T) {
	srv := natstest.Start(t, t.TempDir())
	const start = "# Memory\n- base\n"
	a, b := newWorker(t, srv, start), newWorker(t, srv, start)

	// Both runs begin before either ends, then end at once.
	ra, rb := a.guard.Begin(), b.guard.Begin()
	a.write(a.read() + "- fact A\n")
	b.write(b.read() + "- fact B\n")
	var wg sync.WaitGroup
	for _, r := range []*persona.MemoryRun{ra, rb} {
		wg.Go(func() {
			if err := r.End(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	a.guard.Begin().End()
	b.guard.Begin().End()
	for what, got := range map[string]string{"shared": sharedText(t, a.mem), "worker A": a.read(), "worker B": b.read()} {
		wantLines(t, what, got, "# Memory", "- base", "- fact A", "- fact B")
	}

	a.run(func(s string) string { return strings.Replace(s, "- base\n", "", 1) })
	b.run(add("- fact B2"))
	a.guard.Begin().End()
	for what, got := range map[string]string{"shared": sharedText(t, a.mem), "worker A": a.read(), "worker B": b.read()} {
		wantLines(t, what, got, "# Memory", "- fact A", "- fact B", "- fact B2")
	}
}

// Many runs on two workers add facts concurrently: every merge that meets
// another worker's write reads and merges again, and no fact is lost.
func TestTwoWorkersConcurrentRuns(t *testing.T) {
	srv := natstest.Start(t, t.TempDir())
	ws := []*worker{newWorker(t, srv, "# Memory\n"), newWorker(t, srv, "# Memory\n")}
	const rounds = 15
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Go(func() {
			for n := range rounds {
				w.run(add(fmt.Sprintf("- fact %d.%d", i, n)))
			}
		})
	}
	wg.Wait()
	want := []string{"# Memory"}
	for i := range ws {
		for n := range rounds {
			want = append(want, fmt.Sprintf("- fact %d.%d", i, n))
		}
	}
	for _, w := range ws {
		w.guard.Begin().End()
	}
	wantLines(t, "shared", sharedText(t, ws[0].mem), want...)
	for i, w := range ws {
		wantLines(t, fmt.Sprintf("worker %d", i), w.read(), want...)
	}
}

// A fact written while NATS cannot be reached stays in the file and
// reaches the shared copy at the next run that can reach it.
func TestFactWrittenOfflineIsMerged(t *testing.T) {
	srv := natstest.Start(t, t.TempDir())
	a := newWorker(t, srv, "# Memory\n")
	a.run(add("- online"))

	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	down, err := OpenMemory(context.Background(), js, 1, zerolog.New(zerolog.NewTestWriter(t)))
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	a.guard.Share(down)
	a.run(add("- offline"))
	wantLines(t, "file while offline", a.read(), "# Memory", "- online", "- offline")
	wantLines(t, "shared while offline", sharedText(t, a.mem), "# Memory", "- online")

	a.guard.Share(a.mem)
	a.guard.Begin().End()
	wantLines(t, "shared", sharedText(t, a.mem), "# Memory", "- online", "- offline")
}

// A worker restarts (a new guard, no base in memory) with the file it last
// merged, while another deleted a line and added one: the deletion is
// taken, not undone. A restart with a file changed since (a fact written
// offline) keeps every line of both.
func TestRestartedWorker(t *testing.T) {
	srv := natstest.Start(t, t.TempDir())
	a, b := newWorker(t, srv, "# Memory\n- old\n"), newWorker(t, srv, "# Memory\n- old\n")
	a.guard.Begin().End()
	b.guard.Begin().End()
	a.run(func(s string) string { return strings.Replace(s, "- old\n", "- new\n", 1) })

	restarted := persona.NewMemoryGuard(b.path)
	restarted.Share(b.mem)
	restarted.Begin().End()
	wantLines(t, "restarted worker", b.read(), "# Memory", "- new")

	b.write(b.read() + "- written before the restart\n")
	a.run(add("- later"))
	restarted = persona.NewMemoryGuard(b.path)
	restarted.Share(b.mem)
	restarted.Begin().End()
	for what, got := range map[string]string{"shared": sharedText(t, a.mem), "restarted worker": b.read()} {
		wantLines(t, what, got, "# Memory", "- new", "- written before the restart", "- later")
	}
}
