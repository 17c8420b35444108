package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/admin"
	"github.com/agentgateway/gateway/internal/dashboard"
	"github.com/agentgateway/gateway/internal/queue"
)

// sseEvents reads the dashboard's event stream: each event's name and
// data, in order.
func sseEvents(t *testing.T, ctx context.Context, url string) <-chan [2]string {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /events: %s", resp.Status)
	}
	out := make(chan [2]string, 64)
	go func() {
		defer resp.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
		var name string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				out <- [2]string{name, strings.TrimPrefix(line, "data: ")}
			}
		}
	}()
	return out
}

// The dashboard is served behind the admin server's auth, shows a running
// turn live, and its Stop does what the Discord Stop does.
func TestDashboardShowsAndStopsARunningTurn(t *testing.T) {
	g := startAdminGateway(t, harnessOptions{respond: func(ctx context.Context, req backends.Request, emit func(backends.Event)) (backends.Result, error) {
		emit(backends.Event{Kind: backends.EventInit, SessionID: "s"})
		emit(backends.Event{Kind: backends.EventToolUse, Tool: &backends.ToolCall{ID: "t1", Name: "Bash", Input: `{"command":"sleep 600"}`}})
		<-ctx.Done() // until stopped
		return backends.Result{}, ctx.Err()
	}})
	if code, body := g.status("/"); code != http.StatusOK || !strings.Contains(body, "<html") {
		t.Fatalf("GET / = %d %.80q", code, body)
	}
	resp, err := http.Get(g.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET / without the token = %d, want 401", resp.StatusCode)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := sseEvents(t, ctx, g.url+"/events")
	g.mention(g.channel, "work for a long time")
	var id uint64
	deadline := time.After(waitLong)
	for id == 0 {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("event stream ended")
			}
			if ev[0] != dashboard.KindTurnStarted {
				continue
			}
			var turn dashboard.Turn
			if err := json.Unmarshal([]byte(ev[1]), &turn); err != nil {
				t.Fatalf("turn_started %s: %v", ev[1], err)
			}
			if turn.ChannelID != g.channel.String() || turn.Prompt != "work for a long time" {
				t.Errorf("turn = %+v", turn)
			}
			id = turn.EventID
		case <-deadline:
			t.Fatal("no turn_started on the dashboard")
		}
	}

	stop := func(header bool) int {
		req, _ := http.NewRequest(http.MethodPost, g.url+"/turns/"+strconv.FormatUint(id, 10)+"/stop", nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		if header {
			req.Header.Set(dashboard.CSRFHeader, dashboard.CSRFValue)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := stop(false); code != http.StatusForbidden {
		t.Errorf("stop without the CSRF header = %d, want 403", code)
	}
	if code := stop(true); code != http.StatusOK {
		t.Fatalf("stop = %d", code)
	}
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("event stream ended before the turn finished")
			}
			if ev[0] != dashboard.KindTurnFinished {
				continue
			}
			var e dashboard.Entry
			json.Unmarshal([]byte(ev[1]), &e)
			if e.EventID != id || e.Outcome != "stopped" {
				t.Fatalf("finished = %+v, want event %d stopped", e, id)
			}
			if code := stop(true); code != http.StatusNotFound {
				t.Errorf("a second stop = %d, want 404", code)
			}
			return
		case <-deadline:
			t.Fatal("the stopped turn did not finish")
		}
	}
}

// Several subscribers read the hub, each at its own pace: the dashboard's
// own follower and one per open page. A page that reads a turn's start
// after the follower has read its end must not list the finished turn as
// running again; when that page then misses the end (it fell behind, and
// gets a resync instead), the turn would stay "running" for good.
func TestDashboardForgetsAFinishedTurnReadLate(t *testing.T) {
	hub := admin.NewHub(2, 0) // every subscriber buffers two events
	activity, err := dashboard.OpenActivityLog(filepath.Join(t.TempDir(), ActivityFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { activity.Close() })
	d := &dashboardSource{
		hub: hub, queue: queue.New(queue.Options{}, nil), activity: activity,
		name: func(string) string { return "" }, log: zerolog.New(zerolog.NewTestWriter(t)),
		running: map[uint64]dashboard.Turn{},
	}
	deadline := time.Now().Add(waitLong)
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			runtime.Gosched()
		}
	}
	running := func(id uint64) bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		_, ok := d.running[id]
		return ok
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go d.follow(ctx)
	waitFor("the follower to subscribe", func() bool { return hub.Subscribers() == 1 })
	page := d.Subscribe(ctx)
	waitFor("the page to subscribe", func() bool { return hub.Subscribers() == 2 })

	// finish publishes a turn's end and waits for the follower to read it,
	// so that the follower never falls behind.
	finish := func(id uint64) {
		t.Helper()
		hub.Publish(admin.Event{Type: admin.TurnFinished, EventID: id, Kind: "message", Outcome: "ok"})
		waitFor("the follower to record the end", func() bool {
			r := activity.Recent()
			return len(r) > 0 && r[0].EventID == id
		})
	}
	// The page's stream takes 16 updates (2 per finished turn) and nobody
	// reads it: its reader blocks, then the hub drops what the page has no
	// room for.
	for i := range 8 {
		finish(uint64(101 + i))
		waitFor("the page's stream to fill", func() bool { return len(page) == 2*(i+1) })
	}
	finish(109)
	hub.Publish(admin.Event{Type: admin.TurnStarted, EventID: 7, Channel: "100", Kind: "message", Prompt: "hi"})
	waitFor("the follower to list turn 7", func() bool { return running(7) })
	finish(110) // the page's buffer is full now
	finish(7)   // so the page never gets this end
	if running(7) {
		t.Fatal("turn 7 still runs after the follower read its end")
	}

	// The page catches up: turn 7's start, read late, then a resync for
	// the end it lost.
	next := uint64(111)
	for resynced := false; !resynced; {
		select {
		case u := <-page:
			resynced = u.Resync
		default:
			finish(next) // a resync comes with the next event the page has room for
			next++
		}
		if time.Now().After(deadline) {
			t.Fatal("the page got no resync")
		}
	}
	if running(7) {
		t.Error("turn 7, finished, is listed as running again after a page read its start late")
	}
}
