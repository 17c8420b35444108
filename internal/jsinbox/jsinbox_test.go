package jsinbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentgateway/gateway/internal/inbox"
	"github.com/agentgateway/gateway/internal/queue"
)

func bg(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestAddKeepsTheIDItIsGiven(t *testing.T) {
	in := openInbox(t, connect(t, runServer(t, t.TempDir())), Options{Partitions: 2})
	must(t, in.Add(withID(event("100", "k1", 1), 1)))
	must(t, in.Add(withID(event("100", "k2", 2), 2)))
	if err := in.Add(withID(event("100", "k3", 3), 7)); err == nil {
		t.Fatal("Add with an id that is not the stream's next sequence succeeded")
	}
	if err := in.Add(withID(event("100", "k4", 4), 2)); err == nil {
		t.Fatal("Add with an old id succeeded")
	}
	if got := in.LastID(); got != 2 {
		t.Fatalf("LastID = %d after refused Adds, want 2: nothing refused may be stored", got)
	}
	if e, ok := in.Get(2); !ok || e.Event.Key != "k2" {
		t.Fatalf("Get(2) = %+v, %v", e, ok)
	}
}

func TestDuplicatesWithinAndBeyondTheWindow(t *testing.T) {
	const window = time.Second
	nc := connect(t, runServer(t, t.TempDir()))
	in := openInbox(t, nc, Options{Partitions: 2, DuplicateWindow: window})
	ctx := bg(t)

	first, err := in.Append(ctx, event("100", "k1", 1))
	must(t, err)
	if _, err := in.Append(ctx, event("100", "k1", 2)); !errors.Is(err, queue.ErrDuplicate) || !errors.Is(err, inbox.ErrDuplicate) {
		t.Fatalf("a repeat at once = %v, want ErrDuplicate", err)
	}

	// Within the window the stream refuses a repeat by itself: without the
	// key in gateway-keys, the PubAck says duplicate.
	must(t, in.keys.Purge(ctx, keyName("k1")))
	if _, err := in.Append(ctx, event("100", "k1", 3)); !errors.Is(err, queue.ErrDuplicate) {
		t.Fatalf("a repeat within the window, key forgotten = %v, want ErrDuplicate from the stream", err)
	}

	// Beyond the window the stream takes a repeat: wait until it does (a
	// raw publish with the same Nats-Msg-Id stores a copy), then the
	// inbox must still refuse the key, from gateway-keys.
	second, err := in.Append(ctx, event("200", "k2", 4))
	must(t, err)
	js, _ := jetstream.New(nc)
	var stored uint64
	waitFor(t, 10*window, "the duplicate window to pass", func() bool {
		ack, err := js.PublishMsg(ctx, &nats.Msg{Subject: in.Subject(event("300", "", 0)), Data: []byte(`{}`)}, jetstream.WithMsgID("k2"))
		must(t, err)
		stored = ack.Sequence
		return !ack.Duplicate
	})
	if _, err := in.Append(ctx, event("200", "k2", 5)); !errors.Is(err, queue.ErrDuplicate) {
		t.Fatalf("a repeat beyond the window = %v, want ErrDuplicate from gateway-keys", err)
	}
	if got := in.LastID(); got != stored {
		t.Fatalf("LastID = %d, want %d: the refused repeat was stored", got, stored)
	}
	for _, id := range []uint64{first.ID, second.ID} {
		if _, ok := in.Get(id); !ok {
			t.Errorf("event %d lost", id)
		}
	}
}

func TestLaneAndStreamLimits(t *testing.T) {
	in := openInbox(t, connect(t, runServer(t, t.TempDir())), Options{Partitions: 2, MaxDepth: 4, MaxPerLane: 2})
	ctx := bg(t)
	add := func(lane string, n int) (queue.Event, error) {
		e := event(lane, "", n)
		if lane == "system" {
			e.ChannelID = ""
		}
		return in.Append(ctx, e)
	}
	a1, err := add("100", 1)
	must(t, err)
	_, err = add("100", 2)
	must(t, err)
	var full *queue.FullError
	if _, err := add("100", 3); !errors.As(err, &full) || !full.Lane || full.Depth != 2 {
		t.Fatalf("a third event in a lane of 2 = %v, want a lane FullError of depth 2", err)
	}
	_, err = add("system", 4)
	must(t, err)
	_, err = add("a lane with spaces", 5)
	must(t, err)
	if _, err := add("200", 6); !errors.As(err, &full) || full.Lane || full.Depth != 4 {
		t.Fatalf("a fifth event in a stream of 4 = %v, want a FullError of depth 4", err)
	}
	// A finished event leaves the stream and frees its place.
	must(t, in.Finish(a1.ID, inbox.Answered))
	if _, err := add("100", 7); err != nil {
		t.Fatalf("after one finished, its lane refuses: %v", err)
	}
	lanes := map[string]int{}
	for _, e := range in.Unfinished() {
		lanes[e.Event.Lane]++
	}
	if diff := cmp.Diff(map[string]int{"100": 2, "system": 1, "a lane with spaces": 1}, lanes); diff != "" {
		t.Errorf("unfinished per lane (-want +got):\n%s", diff)
	}
}

func TestStateSurvivesAServerRestart(t *testing.T) {
	dir := t.TempDir()
	s := runServer(t, dir)
	nc := connect(t, s)
	opts := Options{Partitions: 4, MaxDepth: 10, MaxPerLane: 5}
	in := openInbox(t, nc, opts)
	prefix, created := in.NoncePrefix(), in.Created()
	ctx := bg(t)
	e1, err := in.Append(ctx, event("100", "k1", 1), Seen{Channel: "100", Message: "42"})
	must(t, err)
	e2, err := in.Append(ctx, event("100", "k2", 2))
	must(t, err)
	must(t, in.Started(e1.ID))
	must(t, in.Replied(e1.ID, "answer"))
	must(t, in.Delivered(e1.ID, 0, "m1"))
	nc.Close()
	s.Shutdown()
	s.WaitForShutdown()

	s = runServer(t, dir)
	in = openInbox(t, connect(t, s), opts)
	if in.NoncePrefix() != prefix || !in.Created().Equal(created) {
		t.Errorf("after a restart: prefix %q created %v, want %q %v", in.NoncePrefix(), in.Created(), prefix, created)
	}
	want := []Entry{
		{Event: e1, State: inbox.Running, Attempts: 1, Reply: "answer", Delivered: map[int]string{0: "m1"}},
		{Event: e2, State: inbox.Accepted},
	}
	if diff := cmp.Diff(want, in.Unfinished(), ignoreUpdated); diff != "" {
		t.Errorf("unfinished after a restart (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]Seen{"100": {Channel: "100", Message: "42"}}, in.LastSeen()); diff != "" {
		t.Errorf("last seen after a restart (-want +got):\n%s", diff)
	}
	if _, err := in.Append(ctx, event("100", "k1", 3)); !errors.Is(err, queue.ErrDuplicate) {
		t.Errorf("a key accepted before the restart = %v, want ErrDuplicate", err)
	}
}

func TestSettingsThatDifferAreRefused(t *testing.T) {
	base := Options{Partitions: 4, MaxDepth: 10, MaxPerLane: 3, DuplicateWindow: time.Minute}
	tests := []struct {
		name   string
		change func(*Options)
		want   []string // in the error
	}{
		{"partitions", func(o *Options) { o.Partitions = 8 }, []string{"made with 4 partitions", "asks for 8"}},
		{"fewer partitions", func(o *Options) { o.Partitions = 2 }, []string{"made with 4 partitions", "asks for 2"}},
		{"queue depth", func(o *Options) { o.MaxDepth = 20 }, []string{"max_msgs is 10, want 20", "MAX_QUEUE_DEPTH=10"}},
		{"lane limit", func(o *Options) { o.MaxPerLane = 0 }, []string{"max_msgs_per_subject is 3", "MAX_CHANNEL_QUEUE=3"}},
		{"duplicate window", func(o *Options) { o.DuplicateWindow = time.Hour }, []string{"duplicate_window is 1m0s, want 1h0m0s"}},
		{"key ttl", func(o *Options) { o.KeyTTL = time.Hour }, []string{"bucket gateway-keys", "ttl is 168h0m0s, want 1h0m0s"}},
		{"ack wait", func(o *Options) { o.AckWait = time.Minute * 5 }, []string{"consumer ev-0", "ack_wait 1m0s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nc := connect(t, runServer(t, t.TempDir()))
			openInbox(t, nc, base)
			js, _ := jetstream.New(nc)
			before, err := js.Stream(bg(t), StreamName)
			must(t, err)
			o := base
			tt.change(&o)
			_, err = Open(bg(t), nc, o)
			if err == nil {
				t.Fatal("Open with a different setting succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			after, err := js.Stream(bg(t), StreamName)
			must(t, err)
			if diff := cmp.Diff(before.CachedInfo().Config, after.CachedInfo().Config); diff != "" {
				t.Errorf("a refused Open changed the stream (-before +after):\n%s", diff)
			}
			if _, err := Open(bg(t), nc, base); err != nil {
				t.Errorf("Open with the original settings after a refusal: %v", err)
			}
		})
	}
	t.Run("subjects changed by hand", func(t *testing.T) {
		nc := connect(t, runServer(t, t.TempDir()))
		openInbox(t, nc, base)
		js, _ := jetstream.New(nc)
		cfg := base.withDefaults().streamConfig()
		cfg.Subjects = []string{"gateway.events.>"}
		if _, err := js.UpdateStream(bg(t), cfg); err != nil {
			t.Fatal(err)
		}
		_, err := Open(bg(t), nc, base)
		if err == nil || !strings.Contains(err.Error(), `subjects are ["gateway.events.>"]`) {
			t.Fatalf("Open over a stream with other subjects = %v", err)
		}
	})
}

func TestATakeoverFencesTheEarlierAttempt(t *testing.T) {
	nc := connect(t, runServer(t, t.TempDir()))
	a := openInbox(t, nc, Options{Partitions: 2})
	b := openInbox(t, nc, Options{Partitions: 2})
	e, err := a.Append(bg(t), event("100", "k", 1))
	must(t, err)
	must(t, a.Started(e.ID))
	must(t, a.ToolStarted(e.ID))
	// b takes the event over (its delivery moved there), then a, which
	// did not notice, tries to go on.
	en, err := b.Start(bg(t), e.ID)
	must(t, err)
	if en.Attempts != 2 || en.ToolStarted {
		t.Errorf("the takeover's entry = %+v, want attempt 2 with no tool yet", en)
	}
	if err := a.Replied(e.ID, "stale"); !errors.Is(err, ErrFenced) {
		t.Fatalf("the earlier attempt's Replied = %v, want ErrFenced", err)
	}
	if err := a.Finish(e.ID, inbox.Answered); !errors.Is(err, ErrFenced) {
		t.Fatalf("the earlier attempt's Finish = %v, want ErrFenced", err)
	}
	must(t, b.Replied(e.ID, "fresh"))
	got, _ := b.Get(e.ID)
	if got.Reply != "fresh" || got.State != inbox.Running {
		t.Errorf("after the takeover: %+v", got)
	}
	must(t, b.Finish(e.ID, inbox.Answered))
}

func TestSeenNeverGoesBackUnderConcurrentWriters(t *testing.T) {
	nc := connect(t, runServer(t, t.TempDir()))
	in := openInbox(t, nc, Options{Partitions: 2})
	other := openInbox(t, nc, Options{Partitions: 2})
	done := make(chan error, 2)
	for i, w := range []*Inbox{in, other} {
		go func() {
			for n := range 40 {
				if err := w.See(Seen{Channel: "100", Message: fmt.Sprint(1000 + n*2 + i)}); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	must(t, <-done)
	must(t, <-done)
	if got := in.LastSeen()["100"].Message; got != "1079" {
		t.Fatalf("newest seen = %s, want 1079 (the highest either wrote)", got)
	}
}

func TestClosedRefusesWrites(t *testing.T) {
	in := openInbox(t, connect(t, runServer(t, t.TempDir())), Options{Partitions: 1})
	in.Close()
	if err := in.Add(event("100", "", 1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Add after Close = %v", err)
	}
}
