package inbox

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/agentgateway/gateway/internal/queue"
)

func open(t testing.TB, path string, opts Options) *Inbox {
	t.Helper()
	in, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func event(id uint64, key string) queue.Event {
	return queue.Event{ID: id, Kind: queue.KindMessage, Source: "discord", ChannelID: "c", Text: fmt.Sprintf("prompt %d", id), Key: key}
}

func TestLifecycleSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "inbox.log")
	in := open(t, path, Options{})
	prefix := in.NoncePrefix()
	must(t, in.Add(event(1, "k1"), Seen{Channel: "c", Message: "9"}))
	must(t, in.Add(event(2, "k2"), Seen{Channel: "c", Message: "10"}))
	must(t, in.Started(1))
	must(t, in.ToolStarted(1))
	must(t, in.Replied(1, "the answer"))
	must(t, in.Delivered(1, 0, "m1"))
	must(t, in.Add(event(3, "")))
	must(t, in.Finish(3, Dropped))
	if err := in.Add(event(4, "k1")); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("Add with a recorded key = %v, want ErrDuplicate", err)
	}
	if err := in.Add(event(2, "")); err == nil {
		t.Fatal("Add with an old id succeeded")
	}
	must(t, in.See(Seen{Channel: "c", Message: "8"}, Seen{Channel: "d", Message: "5"}))
	in.Close()

	in = open(t, path, Options{})
	defer in.Close()
	if in.NoncePrefix() != prefix || len(prefix) != 8 {
		t.Errorf("nonce prefix %q after reopen, want %q", in.NoncePrefix(), prefix)
	}
	if in.LastID() != 3 {
		t.Errorf("LastID = %d, want 3", in.LastID())
	}
	want := []Entry{
		{Event: event(1, "k1"), State: Running, Attempts: 1, ToolStarted: true, Reply: "the answer", Delivered: map[int]string{0: "m1"}},
		{Event: event(2, "k2"), State: Accepted},
	}
	if diff := cmp.Diff(want, in.Unfinished(), cmpopts.IgnoreFields(Entry{}, "Updated")); diff != "" {
		t.Errorf("unfinished after reopen (-want +got):\n%s", diff)
	}
	if e, _ := in.Get(3); e.State != Dropped {
		t.Errorf("event 3 = %v, want dropped", e.State)
	}
	wantSeen := map[string]Seen{"c": {Channel: "c", Message: "10"}, "d": {Channel: "d", Message: "5"}}
	if diff := cmp.Diff(wantSeen, in.LastSeen()); diff != "" {
		t.Errorf("last seen (-want +got):\n%s (a newest message never goes back; 10 is newer than 9)", diff)
	}
	if err := in.Started(99); !errors.Is(err, ErrUnknown) {
		t.Errorf("Started(unknown) = %v", err)
	}
}

func TestRetentionForgetsFinishedEventsAndTheirKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "inbox.log")
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	in := open(t, path, Options{KeepMax: 2, KeepFor: time.Hour, Now: clock})
	for id := uint64(1); id <= 5; id++ {
		must(t, in.Add(event(id, fmt.Sprint("k", id))))
	}
	for _, id := range []uint64{1, 2, 3} {
		must(t, in.Finish(id, Answered))
	}
	in.Close()
	in = open(t, path, Options{KeepMax: 2, KeepFor: time.Hour, Now: clock})
	must(t, in.rewrite())
	if _, ok := in.Get(1); ok {
		t.Error("the oldest finished event beyond KeepMax is still kept")
	}
	for _, id := range []uint64{2, 3, 4, 5} {
		if _, ok := in.Get(id); !ok {
			t.Errorf("event %d forgotten", id)
		}
	}
	if err := in.Add(event(6, "k1")); err != nil {
		t.Errorf("a forgotten event's key is still refused: %v", err)
	}
	now = now.Add(2 * time.Hour)
	must(t, in.rewrite())
	for id, want := range map[uint64]bool{2: false, 3: false, 4: true, 5: true, 6: true} {
		if _, ok := in.Get(id); ok != want {
			t.Errorf("after KeepFor: event %d kept = %v, want %v (unfinished ones are always kept)", id, ok, want)
		}
	}
	in.Close()
	in = open(t, path, Options{})
	defer in.Close()
	if in.LastID() != 6 {
		t.Errorf("LastID after compaction = %d, want 6", in.LastID())
	}
}

// model is what the inbox should hold, kept by the property test.
type model struct {
	entries map[uint64]Entry
	keys    map[string]bool
	lastID  uint64
}

func (m model) clone() model {
	c := model{entries: maps.Clone(m.entries), keys: maps.Clone(m.keys), lastID: m.lastID}
	for id, e := range c.entries {
		c.entries[id] = e.clone()
	}
	return c
}

// TestPropertyCrashesLoseNothing runs random mutations with crashes and
// compactions between them. After a crash the inbox must be the state
// after some prefix of the mutations that includes every synced one
// (Add, ToolStarted, Replied, a Finish without a reply): what rides along
// may be lost, only from the end, and never anything a caller waited for.
func TestPropertyCrashesLoseNothing(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 7))
			path := filepath.Join(t.TempDir(), "inbox.log")
			in := open(t, path, Options{})
			m := model{entries: map[uint64]Entry{}, keys: map[string]bool{}}
			// history holds the state after each mutation since the last
			// crash; history[durable:] are the states a crash may leave.
			history, durable := []model{m.clone()}, 0
			ids := func() []uint64 {
				var out []uint64
				for id := range m.entries {
					out = append(out, id)
				}
				slices.Sort(out)
				return out
			}
			for step := 0; step < 300; step++ {
				synced := true
				switch op := r.IntN(10); {
				case op < 3:
					m.lastID++
					key := ""
					if r.IntN(2) == 0 {
						key = fmt.Sprint("k", r.IntN(40))
					}
					e := event(m.lastID, key)
					err := in.Add(e)
					if key != "" && m.keys[key] {
						if !errors.Is(err, ErrDuplicate) {
							t.Fatalf("step %d: duplicate key %q: %v", step, key, err)
						}
						m.lastID--
						continue
					}
					must(t, err)
					m.entries[e.ID] = Entry{Event: e, State: Accepted}
					if key != "" {
						m.keys[key] = true
					}
				case op < 8 && len(m.entries) > 0:
					list := ids()
					id := list[r.IntN(len(list))]
					en := m.entries[id]
					if en.State.Finished() {
						continue
					}
					switch r.IntN(5) {
					case 0:
						must(t, in.Started(id))
						en.State, en.Attempts, en.ToolStarted = Running, en.Attempts+1, false
						synced = false
					case 1:
						if en.ToolStarted {
							continue // written once per attempt
						}
						must(t, in.ToolStarted(id))
						en.ToolStarted = true
					case 2:
						must(t, in.Replied(id, fmt.Sprint("reply ", step)))
						en.Reply = fmt.Sprint("reply ", step)
					case 3:
						must(t, in.Delivered(id, len(en.Delivered), fmt.Sprint("m", step)))
						d := maps.Clone(en.Delivered)
						if d == nil {
							d = map[int]string{}
						}
						d[len(en.Delivered)] = fmt.Sprint("m", step)
						en.Delivered = d
						synced = false
					case 4:
						s := []State{Answered, Failed, Dropped}[r.IntN(3)]
						must(t, in.Finish(id, s))
						en.State = s
						synced = !(s == Answered && en.Reply != "")
					}
					m.entries[id] = en
				case op == 8:
					crash(in)
					in = open(t, path, Options{})
					m = matchPrefix(t, in, history[durable:])
					history, durable = []model{m.clone()}, 0
					continue
				default:
					must(t, in.rewrite())
					check(t, in, m)
				}
				history = append(history, m.clone())
				if synced {
					durable = len(history) - 1
				}
			}
			in.Close()
			check(t, open(t, path, Options{}), m)
		})
	}
}

// matchPrefix returns the state of candidates that in holds, failing the
// test when it holds none of them.
func matchPrefix(t *testing.T, in *Inbox, candidates []model) model {
	t.Helper()
	for i := len(candidates) - 1; i >= 0; i-- {
		if same(in, candidates[i]) {
			return candidates[i].clone()
		}
	}
	last := candidates[len(candidates)-1]
	t.Fatalf("after a crash the inbox holds none of the %d states it may (the last synced one and those after it); against the newest:\n%s",
		len(candidates), diffState(in, last))
	return model{}
}

func same(in *Inbox, m model) bool { return diffState(in, m) == "" }

func diffState(in *Inbox, m model) string {
	if in.LastID() != m.lastID {
		return fmt.Sprintf("LastID = %d, want %d", in.LastID(), m.lastID)
	}
	if n := in.Stats().Entries; n != len(m.entries) {
		return fmt.Sprintf("%d entries, want %d", n, len(m.entries))
	}
	for id, want := range m.entries {
		got, ok := in.Get(id)
		if !ok {
			return fmt.Sprintf("event %d lost", id)
		}
		if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(Entry{}, "Updated"), cmpopts.EquateEmpty()); diff != "" {
			return fmt.Sprintf("event %d (-want +got):\n%s", id, diff)
		}
	}
	return ""
}

func check(t *testing.T, in *Inbox, m model) {
	t.Helper()
	if in.LastID() != m.lastID {
		t.Fatalf("LastID = %d, want %d", in.LastID(), m.lastID)
	}
	for id, want := range m.entries {
		got, ok := in.Get(id)
		if !ok {
			t.Fatalf("event %d lost", id)
		}
		if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(Entry{}, "Updated"), cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("event %d (-want +got):\n%s", id, diff)
		}
	}
	if n := in.Stats().Entries; n != len(m.entries) {
		t.Fatalf("%d entries, want %d", n, len(m.entries))
	}
}

// buildLog writes n events, each with a few mutations, and returns the
// file's bytes and where each record ends.
func buildLog(t *testing.T, path string, n int) []byte {
	t.Helper()
	in := open(t, path, Options{})
	for id := uint64(1); id <= uint64(n); id++ {
		must(t, in.Add(event(id, fmt.Sprint("k", id))))
		must(t, in.Started(id))
		must(t, in.Replied(id, "answer"))
	}
	in.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestTornTailLosesOnlyTheLastRecord(t *testing.T) {
	dir := t.TempDir()
	full := buildLog(t, filepath.Join(dir, "full.log"), 5)
	// Where the last record begins: replay all but it.
	probe := &Inbox{entries: map[uint64]*Entry{}, keys: map[string]uint64{}, seen: map[string]Seen{}}
	off, last := 0, 0
	for off < len(full) {
		r, n, err := decode(full[off:])
		if err != nil {
			t.Fatalf("the full log does not replay at %d", off)
		}
		if off > 0 {
			probe.apply(r)
		}
		last, off = off, off+n
	}
	for cut := last; cut < len(full); cut++ {
		path := filepath.Join(dir, fmt.Sprintf("cut-%d.log", cut))
		if err := os.WriteFile(path, full[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		in := open(t, path, Options{})
		if got := in.Recovered(); got != int64(cut-last) {
			t.Fatalf("cut at %d: recovered %d bytes, want %d", cut, got, cut-last)
		}
		for id := uint64(1); id <= 4; id++ {
			if e, ok := in.Get(id); !ok || e.Reply != "answer" {
				t.Fatalf("cut at %d: event %d = %+v, %v", cut, id, e, ok)
			}
		}
		if e, _ := in.Get(5); e.Reply != "" || e.State != Running {
			t.Fatalf("cut at %d: event 5 = %+v; its torn last record must be gone and the rest kept", cut, e)
		}
		must(t, in.Replied(5, "again"))
		in.Close()
		in = open(t, path, Options{})
		if e, _ := in.Get(5); e.Reply != "again" || in.Recovered() != 0 {
			t.Fatalf("cut at %d: a write after the recovery did not survive: %+v", cut, e)
		}
		in.Close()
	}
}

func TestCorruptMiddleCutsFromThere(t *testing.T) {
	dir := t.TempDir()
	full := buildLog(t, filepath.Join(dir, "full.log"), 6)
	flipped := append([]byte(nil), full...)
	flipped[len(full)/2] ^= 0x40
	path := filepath.Join(dir, "flipped.log")
	os.WriteFile(path, flipped, 0o600)
	in := open(t, path, Options{})
	defer in.Close()
	if in.Recovered() == 0 {
		t.Fatal("a flipped bit was not noticed")
	}
	if _, ok := in.Get(1); !ok {
		t.Fatal("records before the damage were lost")
	}
	garbage := append(append([]byte(nil), full...), []byte("\x05\x00\x00\x00garbage")...)
	gpath := filepath.Join(dir, "garbage.log")
	os.WriteFile(gpath, garbage, 0o600)
	g := open(t, gpath, Options{})
	defer g.Close()
	if g.Recovered() != 11 || g.LastID() != 6 {
		t.Fatalf("garbage after a good log: recovered %d, last id %d", g.Recovered(), g.LastID())
	}
}

func TestGroupCommitSharesSyncs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "inbox.log")
	in := open(t, path, Options{})
	var syncs atomic.Int64
	in.syncHook = func() { syncs.Add(1) }
	const n = 200
	for id := uint64(1); id <= n; id++ {
		must(t, in.Add(event(id, "")))
	}
	before := syncs.Load()
	var wg sync.WaitGroup
	for id := uint64(1); id <= n; id++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			must(t, in.Replied(id, fmt.Sprint("answer ", id)))
		}()
	}
	wg.Wait()
	if got := syncs.Load() - before; got >= n {
		t.Errorf("%d syncs for %d concurrent writes, want fewer (group commit)", got, n)
	} else {
		t.Logf("%d concurrent writes took %d syncs", n, got)
	}
	in.Close()
	in = open(t, path, Options{})
	defer in.Close()
	for id := uint64(1); id <= n; id++ {
		if e, _ := in.Get(id); e.Reply != fmt.Sprint("answer ", id) {
			t.Fatalf("after reopen event %d has reply %q", id, e.Reply)
		}
	}
}

type failingFile struct{ file }

var errDiskFull = errors.New("no space left on device")

func (failingFile) Sync() error { return errDiskFull }

func TestWriteFailureRefusesFurtherWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "inbox.log")
	in := open(t, path, Options{})
	defer in.Close()
	must(t, in.Add(event(1, "")))
	if err := in.Err(); err != nil {
		t.Fatalf("Err before any failure: %v", err)
	}
	in.mu.Lock()
	in.f = failingFile{in.f}
	in.mu.Unlock()
	if err := in.Add(event(2, "")); err == nil {
		t.Fatal("a failed sync was not reported")
	}
	if err := in.Started(1); err == nil {
		t.Fatal("a write after a failure was accepted")
	}
	if err := in.Err(); !errors.Is(err, errDiskFull) {
		t.Fatalf("Err after a failed write = %v, want the write's error", err)
	}
}

func TestErrAfterClose(t *testing.T) {
	in := open(t, filepath.Join(t.TempDir(), "inbox.log"), Options{})
	in.Close()
	if in.Err() == nil {
		t.Fatal("a closed inbox reports itself writable")
	}
}

func FuzzOpen(f *testing.F) {
	dir := f.TempDir()
	in, _ := Open(filepath.Join(dir, "seed.log"), Options{})
	in.Add(event(1, "k"))
	in.Started(1)
	in.Close()
	seed, _ := os.ReadFile(filepath.Join(dir, "seed.log"))
	f.Add(seed)
	f.Add([]byte{})
	f.Add([]byte("\xff\xff\xff\xff\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "inbox.log")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		in, err := Open(path, Options{})
		if err != nil {
			return
		}
		defer in.Close()
		e := event(in.LastID()+1, "")
		if err := in.Add(e); err != nil {
			t.Fatalf("Add after opening fuzzed data: %v", err)
		}
	})
}

func BenchmarkAddFinish(b *testing.B) {
	run := func(b *testing.B, parallel bool) {
		in := open(b, filepath.Join(b.TempDir(), "inbox.log"), Options{})
		defer in.Close()
		var next atomic.Uint64
		one := func() {
			// Ids must grow in Add order: take the id under the inbox's
			// own order by retrying on a lost race.
			for {
				id := next.Add(1)
				if err := in.Add(event(id, "")); err != nil {
					continue
				}
				in.Started(id)
				in.Replied(id, "answer")
				in.Delivered(id, 0, "m")
				in.Finish(id, Answered)
				return
			}
		}
		b.ResetTimer()
		if parallel {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					one()
				}
			})
		} else {
			for i := 0; i < b.N; i++ {
				one()
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	}
	b.Run("serial", func(b *testing.B) { run(b, false) })
	b.Run("parallel", func(b *testing.B) { run(b, true) })
}

// BenchmarkSizeAfter100kEvents reports the log's size after 100,000
// events with the default retention (KeepMax 10,000): compaction bounds it.
func BenchmarkSizeAfter100kEvents(b *testing.B) {
	for i := 0; i < b.N; i++ {
		path := filepath.Join(b.TempDir(), "inbox.log")
		in := open(b, path, Options{KeepMax: 10000})
		for id := uint64(1); id <= 100000; id++ {
			must(b, in.Add(event(id, fmt.Sprint("discord:message:", 1000000000000000+id))))
			must(b, in.Finish(id, Answered))
		}
		in.Close()
		fi, err := os.Stat(path)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(fi.Size()), "bytes")
		if fi.Size() > 16<<20 {
			b.Fatalf("inbox is %d bytes after 100,000 events: compaction does not bound it", fi.Size())
		}
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// crash drops in as a killed process would: what was written stays in
// the file, records still in memory are lost, and nothing is written
// afterwards.
func crash(in *Inbox) {
	in.mu.Lock()
	for in.flushing {
		in.cond.Wait()
	}
	in.buf = nil
	in.closed = true
	f := in.f
	in.mu.Unlock()
	close(in.stop)
	<-in.flusherDone
	f.Close()
}

func TestRidingRecordsReachTheDiskWithoutAnotherWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "inbox.log")
	in := open(t, path, Options{})
	defer in.Close()
	must(t, in.Add(event(1, "")))
	must(t, in.Started(1))
	must(t, in.Delivered(1, 0, "m1"))
	// Nothing else is written: the flusher must write them by itself.
	deadline := time.Now().Add(10 * time.Second)
	for {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		probe := &Inbox{entries: map[uint64]*Entry{}, keys: map[string]uint64{}, seen: map[string]Seen{}}
		probe.replay(data)
		if e := probe.entries[1]; e != nil && e.State == Running && e.Delivered[0] == "m1" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("Started and Delivered were not written within 10 s without another write to carry them")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestStagedAddsShareSyncs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "inbox.log")
	in := open(t, path, Options{})
	var syncs atomic.Int64
	in.syncHook = func() { syncs.Add(1) }
	// As the queue does: stage in id order under one lock, commit outside.
	const n = 200
	var mu sync.Mutex
	var next uint64
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mu.Lock()
			next++
			commit, err := in.Stage(event(next, ""))
			mu.Unlock()
			must(t, err)
			must(t, commit())
		}()
	}
	wg.Wait()
	if got := syncs.Load(); got >= n {
		t.Errorf("%d syncs for %d concurrent Adds, want fewer (group commit)", got, n)
	} else {
		t.Logf("%d concurrent Adds took %d syncs", n, got)
	}
	in.Close()
	in = open(t, path, Options{})
	defer in.Close()
	if st := in.Stats(); st.Waiting != n {
		t.Fatalf("after reopen %d waiting, want %d", st.Waiting, n)
	}
}

// Finished entries beyond the retention leave memory as events finish,
// not only when the log is compacted; their keys stay until then, so the
// log replays as it was written.
func TestRetentionBoundsMemoryBetweenCompactions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "inbox.log")
	in := open(t, path, Options{KeepMax: 8})
	for id := uint64(1); id <= 100; id++ {
		must(t, in.Add(event(id, fmt.Sprint("k", id))))
		must(t, in.Finish(id, Failed))
		if n := in.Stats().Entries; n > 8+8/4 {
			t.Fatalf("after %d finished events %d entries in memory, want at most %d", id, n, 8+8/4)
		}
	}
	if err := in.Add(event(101, "k1")); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("the key of a trimmed event, still in the log, was not refused: %v", err)
	}
	must(t, in.Add(event(101, "")))
	in.Close()
	in = open(t, path, Options{KeepMax: 8})
	defer in.Close()
	if in.LastID() != 101 {
		t.Fatalf("after reopen LastID = %d, want 101: the log did not replay whole", in.LastID())
	}
	if e, ok := in.Get(101); !ok || e.State != Accepted {
		t.Fatalf("event 101 after reopen: %+v, %v", e, ok)
	}
}

// A log grown past the compaction threshold is not rewritten while
// records keep coming (the rewrite would stall them), but once they stop,
// and at Close.
func TestCompactionWaitsForAQuietMoment(t *testing.T) {
	path := filepath.Join(t.TempDir(), "inbox.log")
	in := open(t, path, Options{KeepMax: 10})
	var compactions atomic.Int64
	created := in.Stats().LastCompaction // the new log's first write
	big := strings.Repeat("x", 4096)
	id := uint64(0)
	// Past compactMin (1 MiB) without a pause of compactQuiet.
	for in.Stats().Bytes < 2*compactMin {
		id++
		must(t, in.Add(event(id, "")))
		must(t, in.Replied(id, big))
		must(t, in.Finish(id, Failed))
		if !in.Stats().LastCompaction.Equal(created) {
			compactions.Add(1)
		}
	}
	if n := compactions.Load(); n > 0 {
		t.Errorf("compacted while records kept coming (%d checks saw a compaction)", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for in.Stats().LastCompaction.Equal(created) {
		if time.Now().After(deadline) {
			t.Fatal("a due compaction did not run once the writes stopped")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if b := in.Stats().Bytes; b > compactMin {
		t.Errorf("log is %d bytes after compacting 10 kept events", b)
	}
	must(t, in.Close())
}
