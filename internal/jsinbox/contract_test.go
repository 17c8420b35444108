package jsinbox

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	gocmp "cmp"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/agentgateway/gateway/internal/inbox"
	"github.com/agentgateway/gateway/internal/queue"
)

// store is what the gateway uses of an inbox, with Add returning the id
// the store gave: the embedded inbox takes the next one, JetStream
// assigns the stream sequence. The contract tests run against both.
type store interface {
	Append(e queue.Event, seen ...Seen) (uint64, error)
	Started(id uint64) error
	ToolStarted(id uint64) error
	Replied(id uint64, text string, files ...string) error
	Delivered(id uint64, chunk int, messageID string) error
	Finish(id uint64, s State) error
	See(seen ...Seen) error
	Get(id uint64) (Entry, bool)
	Unfinished() []Entry
	LastID() uint64
	LastSeen() map[string]Seen
	NoncePrefix() string
	Close() error
}

type embedded struct{ *inbox.Inbox }

func (s embedded) Append(e queue.Event, seen ...Seen) (uint64, error) {
	e.ID = s.LastID() + 1
	return e.ID, s.Add(e, seen...)
}

type onJetStream struct{ *Inbox }

func (s onJetStream) Append(e queue.Event, seen ...Seen) (uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := s.Inbox.Append(ctx, e, seen...)
	return got.ID, err
}

// stores gives each implementation's opener: each call opens the same
// durable state again, as a restart does (without closing the previous
// one: a crash). The embedded inbox is the exception: the previous one is
// closed first, because two of them must never write the same file; what a
// crash loses of its records that ride along is its own property test's
// (package inbox).
func stores(t *testing.T) map[string]func() store {
	path := filepath.Join(t.TempDir(), "inbox.log")
	nc := connect(t, runServer(t, t.TempDir()))
	var previous *inbox.Inbox
	return map[string]func() store{
		"embedded": func() store {
			if previous != nil {
				previous.Close()
			}
			in, err := inbox.Open(path, inbox.Options{})
			previous = in
			if err != nil {
				t.Fatal(err)
			}
			return embedded{in}
		},
		"jetstream": func() store {
			return onJetStream{openInbox(t, nc, Options{Partitions: 4})}
		},
	}
}

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// event is an event as the queue hands it to the journal: lane and time set.
func event(channel, key string, n int) queue.Event {
	return queue.Event{
		Kind: queue.KindMessage, Source: "discord", ChannelID: channel, Lane: channel,
		Text: fmt.Sprintf("prompt %d", n), Key: key, Time: t0.Add(time.Duration(n) * time.Second),
	}
}

func withID(e queue.Event, id uint64) queue.Event { e.ID = id; return e }

func TestContractLifecycleSurvivesReopen(t *testing.T) {
	for name, open := range stores(t) {
		t.Run(name, func(t *testing.T) {
			in := open()
			prefix := in.NoncePrefix()
			e1, e2, e3 := event("100", "k1", 1), event("100", "k2", 2), event("system", "", 3)
			id1 := mustID(t)(in.Append(e1, Seen{Channel: "100", Message: "9"}))
			id2 := mustID(t)(in.Append(e2, Seen{Channel: "100", Message: "10"}))
			must(t, in.Started(id1))
			must(t, in.ToolStarted(id1))
			must(t, in.Replied(id1, "the answer", "out.txt"))
			must(t, in.Delivered(id1, 0, "m1"))
			must(t, in.Delivered(id1, -1, "card"))
			id3 := mustID(t)(in.Append(e3))
			must(t, in.Finish(id3, inbox.Dropped))
			if !(id1 < id2 && id2 < id3) {
				t.Errorf("ids %d, %d, %d do not grow", id1, id2, id3)
			}
			if _, err := in.Append(event("100", "k1", 4)); !errors.Is(err, inbox.ErrDuplicate) {
				t.Fatalf("Append with an accepted key = %v, want ErrDuplicate", err)
			}
			must(t, in.See(Seen{Channel: "100", Message: "8"}, Seen{Channel: "200", Message: "5"}))
			if err := in.Finish(id2, inbox.Running); err == nil {
				t.Error("Finish with a state that is not an end state succeeded")
			}

			in = open()
			defer in.Close()
			if in.NoncePrefix() != prefix || len(prefix) != 8 {
				t.Errorf("nonce prefix %q after reopen, want %q", in.NoncePrefix(), prefix)
			}
			if in.LastID() != id3 {
				t.Errorf("LastID = %d, want %d", in.LastID(), id3)
			}
			want := []Entry{
				{Event: withID(e1, id1), State: inbox.Running, Attempts: 1, ToolStarted: true, Reply: "the answer",
					Files: []string{"out.txt"}, Delivered: map[int]string{0: "m1", -1: "card"}},
				{Event: withID(e2, id2), State: inbox.Accepted},
			}
			if diff := cmp.Diff(want, in.Unfinished(), ignoreUpdated); diff != "" {
				t.Errorf("unfinished after reopen (-want +got):\n%s", diff)
			}
			if e, _ := in.Get(id3); e.State != inbox.Dropped || e.Event.Text != e3.Text {
				t.Errorf("event %d = %+v, want it dropped", id3, e)
			}
			wantSeen := map[string]Seen{"100": {Channel: "100", Message: "10"}, "200": {Channel: "200", Message: "5"}}
			if diff := cmp.Diff(wantSeen, in.LastSeen()); diff != "" {
				t.Errorf("last seen (-want +got):\n%s (a newest message never goes back; 10 is newer than 9)", diff)
			}
			if err := in.Started(id3 + 1000); !errors.Is(err, inbox.ErrUnknown) {
				t.Errorf("Started(unknown) = %v, want ErrUnknown", err)
			}
			if _, ok := in.Get(id3 + 1000); ok {
				t.Error("Get(unknown) found something")
			}
		})
	}
}

var ignoreUpdated = cmp.Options{cmpopts.IgnoreFields(Entry{}, "Updated"), cmpopts.EquateEmpty()}

// model is what an inbox should hold, kept by the property test.
type model struct {
	entries map[uint64]Entry
	keys    map[string]bool
	lastID  uint64
}

// TestContractRandomOperationsAndRestarts runs random operations and
// restarts (a reopen without closing) and checks every event after each
// restart and at the end against a model.
func TestContractRandomOperationsAndRestarts(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		for name, open := range stores(t) {
			t.Run(fmt.Sprint(name, "/", seed), func(t *testing.T) {
				r := rand.New(rand.NewPCG(seed, 7))
				in := open()
				m := model{entries: map[uint64]Entry{}, keys: map[string]bool{}}
				var ids []uint64
				for step := range 150 {
					switch op := r.IntN(10); {
					case op < 3:
						key := ""
						if r.IntN(2) == 0 {
							key = fmt.Sprint("k", r.IntN(30))
						}
						ch := fmt.Sprint(100 + r.IntN(4))
						e := event(ch, key, step)
						id, err := in.Append(e)
						if key != "" && m.keys[key] {
							if !errors.Is(err, inbox.ErrDuplicate) {
								t.Fatalf("step %d: duplicate key %q: %v", step, key, err)
							}
							continue
						}
						must(t, err)
						if id <= m.lastID {
							t.Fatalf("step %d: id %d is not above %d", step, id, m.lastID)
						}
						m.lastID = id
						m.entries[id] = Entry{Event: withID(e, id), State: inbox.Accepted}
						ids = append(ids, id)
						if key != "" {
							m.keys[key] = true
						}
					case op < 9 && len(ids) > 0:
						id := ids[r.IntN(len(ids))]
						en := m.entries[id]
						if en.State.Finished() {
							continue
						}
						switch r.IntN(5) {
						case 0:
							must(t, in.Started(id))
							en.State, en.Attempts, en.ToolStarted = inbox.Running, en.Attempts+1, false
						case 1:
							must(t, in.ToolStarted(id))
							en.ToolStarted = true
						case 2:
							must(t, in.Replied(id, fmt.Sprint("reply ", step)))
							en.Reply = fmt.Sprint("reply ", step)
						case 3:
							must(t, in.Delivered(id, len(en.Delivered), fmt.Sprint("m", step)))
							d := map[int]string{}
							for k, v := range en.Delivered {
								d[k] = v
							}
							d[len(en.Delivered)] = fmt.Sprint("m", step)
							en.Delivered = d
						case 4:
							s := []State{inbox.Answered, inbox.Failed, inbox.Dropped}[r.IntN(3)]
							must(t, in.Finish(id, s))
							en.State = s
						}
						m.entries[id] = en
					case op == 9:
						in = open()
						check(t, in, m)
					}
				}
				in.Close()
				check(t, open(), m)
			})
		}
	}
}

func check(t *testing.T, in store, m model) {
	t.Helper()
	if in.LastID() != m.lastID {
		t.Fatalf("LastID = %d, want %d", in.LastID(), m.lastID)
	}
	var unfinished []Entry
	for id, want := range m.entries {
		got, ok := in.Get(id)
		if !ok {
			t.Fatalf("event %d lost", id)
		}
		if diff := cmp.Diff(want, got, ignoreUpdated); diff != "" {
			t.Fatalf("event %d (-want +got):\n%s", id, diff)
		}
		if !want.State.Finished() {
			unfinished = append(unfinished, want)
		}
	}
	sortEntries(unfinished)
	if diff := cmp.Diff(unfinished, in.Unfinished(), ignoreUpdated); diff != "" {
		t.Fatalf("unfinished (-want +got):\n%s", diff)
	}
}

func sortEntries(es []Entry) {
	slices.SortFunc(es, func(a, b Entry) int { return gocmp.Compare(a.Event.ID, b.Event.ID) })
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func mustID(t testing.TB) func(uint64, error) uint64 {
	return func(id uint64, err error) uint64 {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
}
