package dashboard

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"
)

var t0 = time.Date(2025, 6, 2, 14, 0, 0, 0, time.UTC)

func testOptions(t *testing.T) Options {
	return Options{Now: func() time.Time { return t0 }, Log: zerolog.New(zerolog.NewTestWriter(t))}
}

// sseEvent is one event read off a stream; a comment has name ":".
type sseEvent struct {
	name, data string
}

// readEvents parses the stream in the background.
func readEvents(body io.Reader) <-chan sseEvent {
	out := make(chan sseEvent, 64)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.name != "" || ev.data != "" {
					if ev.name == "" {
						ev.name = "message"
					}
					out <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, ":"):
				out <- sseEvent{name: ":", data: strings.TrimSpace(line[1:])}
			case strings.HasPrefix(line, "event: "):
				ev.name = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				ev.data += line[len("data: "):]
			}
		}
	}()
	return out
}

// next returns the next event that is not a comment.
func next(t *testing.T, events <-chan sseEvent) sseEvent {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("the stream ended")
			}
			if ev.name != ":" {
				return ev
			}
		case <-timeout:
			t.Fatal("no event within 5s")
		}
	}
}

func decode[T any](t *testing.T, ev sseEvent, name string) T {
	t.Helper()
	if ev.name != name {
		t.Fatalf("event %q (%s), want %q", ev.name, ev.data, name)
	}
	var v T
	if err := json.Unmarshal([]byte(ev.data), &v); err != nil {
		t.Fatalf("decode %s: %v", ev.data, err)
	}
	return v
}

// newServer serves h until the test and its streams end (registered
// before openStream's cleanup, so it runs after it).
func newServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// openStream connects to the handler's event stream.
func openStream(t *testing.T, srv *httptest.Server, path string) <-chan sseEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+path, nil)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET %s: %s %s", path, resp.Status, resp.Header.Get("Content-Type"))
	}
	return readEvents(resp.Body)
}

func TestEventsSnapshotThenTurnInOrder(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", PromptExcerpt+50)
	src := newFakeSource(State{
		Running: []Turn{{EventID: 7, ChannelID: "100", ChannelName: "general", Kind: "message", Prompt: long, StartedAt: t0.Add(-time.Minute)}},
		Health:  Health{Discord: true, CLI: "claude", CLIVersion: "2.1.0", Ready: true},
	})
	srv := newServer(t, Handler(src, testOptions(t)))
	events := openStream(t, srv, "/events")

	got := decode[State](t, next(t, events), "snapshot")
	want := State{
		Now: t0,
		Running: []Turn{{EventID: 7, ChannelID: "100", ChannelName: "general", Kind: "message",
			Prompt: strings.Repeat("é", PromptExcerpt-1) + "…", StartedAt: t0.Add(-time.Minute)}},
		Queue: []Lane{}, Activity: []Entry{}, Schedule: []Job{}, Sessions: []Session{},
		Health: Health{Discord: true, CLI: "claude", CLIVersion: "2.1.0", Ready: true},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("snapshot (-want +got):\n%s", d)
	}

	turn := Turn{EventID: 8, ChannelID: "200", ChannelName: "ops", Kind: "cron", Name: "daily", Prompt: "summarise", StartedAt: t0}
	finished := Entry{EventID: 8, Time: t0.Add(90 * time.Second), ChannelID: "200", ChannelName: "ops",
		Kind: "cron", Name: "daily", Outcome: "ok", Duration: 90 * time.Second, CostUSD: 0.0421}
	src.Publish(TurnStarted(turn))
	src.Publish(ToolUsed(8, "Bash"))
	src.Publish(TurnFinished(finished))

	if d := cmp.Diff(turn, decode[Turn](t, next(t, events), KindTurnStarted)); d != "" {
		t.Errorf("turn_started (-want +got):\n%s", d)
	}
	if d := cmp.Diff(ToolChange{EventID: 8, Tool: "Bash"}, decode[ToolChange](t, next(t, events), KindTool)); d != "" {
		t.Errorf("tool (-want +got):\n%s", d)
	}
	if d := cmp.Diff(finished, decode[Entry](t, next(t, events), KindTurnFinished)); d != "" {
		t.Errorf("turn_finished (-want +got):\n%s", d)
	}
}

func TestEventsEveryKind(t *testing.T) {
	t.Parallel()
	src := newFakeSource(State{})
	srv := newServer(t, Handler(src, testOptions(t)))
	events := openStream(t, srv, "/events")
	decode[State](t, next(t, events), "snapshot")

	tests := []struct {
		u    Update
		name string
		want string
	}{
		{QueueChanged([]Lane{{Lane: "100", Name: "general", Waiting: 2, Oldest: t0}}), "queue",
			`[{"lane":"100","name":"general","waiting":2,"oldest":"2025-06-02T14:00:00Z"}]`},
		{ScheduleChanged([]Job{{Kind: ScheduleCron, Name: "daily", Schedule: "0 9 * * *", NextRun: t0, Paused: true}}), "schedule",
			`[{"kind":"cron","name":"daily","schedule":"0 9 * * *","next_run":"2025-06-02T14:00:00Z","paused":true}]`},
		{SessionsChanged([]Session{{ChannelID: "100", SessionID: "3f2a9c1e", Model: "opus"}}), "sessions",
			`[{"channel_id":"100","session_id":"3f2a9c1e","model":"opus"}]`},
		{CostsChanged(Costs{Today: Spend{Total: 1.5, ByKind: map[string]float64{"message": 1.5}}}), "costs",
			`{"today":{"total_usd":1.5,"by_kind":{"message":1.5}},"week":{"total_usd":0}}`},
		{HealthChanged(Health{Discord: false, Ready: false, Reason: "discord disconnected"}), "health",
			`{"discord":false,"ready":false,"reason":"discord disconnected"}`},
	}
	for _, tt := range tests {
		src.Publish(tt.u)
		ev := next(t, events)
		if ev.name != tt.name || ev.data != tt.want {
			t.Errorf("published %s: got event %q %s, want %q %s", tt.u.Kind, ev.name, ev.data, tt.name, tt.want)
		}
	}
}

func TestEventsResyncSendsSnapshot(t *testing.T) {
	t.Parallel()
	src := newFakeSource(State{})
	srv := newServer(t, Handler(src, testOptions(t)))
	events := openStream(t, srv, "/events")
	decode[State](t, next(t, events), "snapshot")

	// The Source dropped changes for this reader: the page gets the whole
	// state again instead.
	src.mu.Lock()
	src.state.Running = []Turn{{EventID: 3, Kind: "message", Prompt: "hi", StartedAt: t0}}
	src.mu.Unlock()
	src.Publish(Update{Resync: true})

	got := decode[State](t, next(t, events), "snapshot")
	if d := cmp.Diff([]Turn{{EventID: 3, Kind: "message", Prompt: "hi", StartedAt: t0}}, got.Running); d != "" {
		t.Errorf("running after resync (-want +got):\n%s", d)
	}
}

func TestEventsKeepAlive(t *testing.T) {
	t.Parallel()
	opts := testOptions(t)
	opts.KeepAlive = 10 * time.Millisecond
	srv := newServer(t, Handler(newFakeSource(State{}), opts))
	events := openStream(t, srv, "/events")
	decode[State](t, next(t, events), "snapshot")
	timeout := time.After(5 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.name == ":" {
				return
			}
			t.Fatalf("unexpected event %q", ev.name)
		case <-timeout:
			t.Fatal("no keep-alive comment")
		}
	}
}

func TestEventsEnd(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		end  func(src *fakeSource, cancel context.CancelFunc)
	}{
		{"the client goes", func(_ *fakeSource, cancel context.CancelFunc) { cancel() }},
		{"the source ends the subscription", func(src *fakeSource, _ context.CancelFunc) { src.closeAll() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			src := newFakeSource(State{})
			h := Handler(src, testOptions(t))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req := httptest.NewRequestWithContext(ctx, "GET", "/events", nil)
			rec := httptest.NewRecorder()
			done := make(chan struct{})
			go func() {
				defer close(done)
				h.ServeHTTP(rec, req)
			}()
			waitFor(t, "a subscription", func() bool { return src.subscribers() == 1 })
			tt.end(src, cancel)
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("the stream did not end")
			}
			// The handler's subscription context ends with it.
			waitFor(t, "the subscription to end", func() bool { return src.subscribers() == 0 })
		})
	}
}

func TestActions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		path    string
		header  map[string]string
		err     error
		status  int
		calls   []string
		errText string
	}{
		{name: "stop", path: "/turns/42/stop", status: 200, calls: []string{"stop 42"}},
		{name: "run cron", path: "/schedule/cron/daily%20report/run", status: 200, calls: []string{"run cron daily report"}},
		{name: "run heartbeat", path: "/schedule/heartbeat/inbox/run", status: 200, calls: []string{"run heartbeat inbox"}},
		{name: "name with a slash", path: "/schedule/cron/a%2Fb/run", status: 200, calls: []string{"run cron a/b"}},
		{name: "reset", path: "/sessions/123456789/reset", status: 200, calls: []string{"reset 123456789"}},
		{name: "same origin", path: "/turns/42/stop", header: map[string]string{"Origin": "http://dash.example", "Sec-Fetch-Site": "same-origin"},
			status: 200, calls: []string{"stop 42"}},

		{name: "stop without the header", path: "/turns/42/stop", header: map[string]string{CSRFHeader: ""}, status: 403, errText: "missing"},
		{name: "run without the header", path: "/schedule/cron/daily/run", header: map[string]string{CSRFHeader: ""}, status: 403},
		{name: "reset without the header", path: "/sessions/1/reset", header: map[string]string{CSRFHeader: ""}, status: 403},
		{name: "wrong header value", path: "/turns/42/stop", header: map[string]string{CSRFHeader: "XMLHttpRequest"}, status: 403},
		{name: "other origin", path: "/turns/42/stop", header: map[string]string{"Origin": "https://evil.example"}, status: 403},
		{name: "cross-site fetch", path: "/turns/42/stop", header: map[string]string{"Sec-Fetch-Site": "cross-site"}, status: 403},

		{name: "bad id", path: "/turns/x/stop", status: 400},
		{name: "zero id", path: "/turns/0/stop", status: 400},
		{name: "bad kind", path: "/schedule/hook/daily/run", status: 400},
		{name: "no such turn", path: "/turns/9/stop", err: fmt.Errorf("event 9: %w", ErrNotFound),
			status: 404, calls: []string{"stop 9"}, errText: "event 9: not found"},
		{name: "busy", path: "/schedule/cron/daily/run", err: fmt.Errorf("daily is running: %w", ErrConflict),
			status: 409, calls: []string{"run cron daily"}},
		{name: "failure", path: "/sessions/1/reset", err: errors.New("disk full"), status: 500, calls: []string{"reset 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			src := newFakeSource(State{})
			src.err = tt.err
			h := Handler(src, testOptions(t))
			req := httptest.NewRequest("POST", "http://dash.example"+tt.path, nil)
			req.Header.Set(CSRFHeader, CSRFValue)
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.status {
				t.Errorf("status %d, want %d (%s)", rec.Code, tt.status, rec.Body)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			var a answer
			if err := json.Unmarshal(rec.Body.Bytes(), &a); err != nil {
				t.Fatalf("answer %q: %v", rec.Body, err)
			}
			if a.OK != (tt.status == 200) || (a.Error == "") != (tt.status == 200) {
				t.Errorf("answer %+v for status %d", a, tt.status)
			}
			if !strings.Contains(a.Error, tt.errText) {
				t.Errorf("error %q, want it to contain %q", a.Error, tt.errText)
			}
			if d := cmp.Diff(tt.calls, src.Calls()); d != "" {
				t.Errorf("source calls (-want +got):\n%s", d)
			}
		})
	}
}

func TestRoutes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		prefix, method, path string
		status               int
	}{
		{"", "GET", "/", 200},
		{"", "GET", "/nope", 404},
		{"", "GET", "/turns/1/stop", 405},
		{"", "POST", "/", 405},
		{"/dashboard", "GET", "/dashboard/", 200},
		{"/dashboard/", "GET", "/dashboard/", 200},
		{"dashboard", "POST", "/dashboard/turns/1/stop", 200},
		{"/dashboard/", "GET", "/", 404},
		{"/dashboard/", "POST", "/turns/1/stop", 404},
	}
	for _, tt := range tests {
		t.Run(tt.prefix+" "+tt.method+" "+tt.path, func(t *testing.T) {
			opts := testOptions(t)
			opts.Prefix = tt.prefix
			h := Handler(newFakeSource(State{}), opts)
			req := httptest.NewRequest(tt.method, tt.path, nil)
			req.Header.Set(CSRFHeader, CSRFValue)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.status {
				t.Errorf("status %d, want %d", rec.Code, tt.status)
			}
		})
	}

	// Under a prefix the page's script finds the stream under it too.
	opts := testOptions(t)
	opts.Prefix = "/dashboard/"
	srv := newServer(t, Handler(newFakeSource(State{}), opts))
	decode[State](t, next(t, openStream(t, srv, "/dashboard/events")), "snapshot")
	if body := getPage(t, srv.URL+"/dashboard/"); !strings.Contains(body, `data-base="/dashboard/"`) {
		t.Error("the page does not carry its prefix")
	}
}

func getPage(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET %s: %s %s", url, resp.Status, resp.Header.Get("Content-Type"))
	}
	return string(b)
}

func TestPageIsSelfContained(t *testing.T) {
	t.Parallel()
	srv := newServer(t, Handler(newFakeSource(State{}), testOptions(t)))
	body := getPage(t, srv.URL+"/")

	// Nothing is fetched from elsewhere: no absolute or protocol-relative
	// URL in a src or href, no @import or url() in the styles.
	external := regexp.MustCompile(`(?i)(src|href|action)\s*=\s*["']?\s*(https?:|//)|@import|url\(`)
	if m := external.FindString(body); m != "" {
		t.Errorf("the page refers to something external: %q", m)
	}
	for _, tag := range []string{"script", "style"} {
		if n := strings.Count(body, "<"+tag); n != 1 {
			t.Errorf("%d <%s> elements, want 1", n, tag)
		}
	}
	if !strings.Contains(body, `aria-live="polite"`) {
		t.Error("the running turns are not a live region")
	}
}

func TestPageRunsUnderItsContentSecurityPolicy(t *testing.T) {
	t.Parallel()
	srv := newServer(t, Handler(newFakeSource(State{}), testOptions(t)))
	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	policy := resp.Header.Get("Content-Security-Policy")
	if !strings.Contains(policy, "default-src 'none'") {
		t.Errorf("policy %q does not default to none", policy)
	}
	// The inline script and style are allowed by their hashes, so they
	// must reach the browser byte for byte as hashed.
	for _, tag := range []string{"script", "style"} {
		m := regexp.MustCompile(`(?s)<` + tag + `>(.*?)</` + tag + `>`).FindSubmatch(b)
		if m == nil {
			t.Fatalf("no <%s>", tag)
		}
		sum := sha256.Sum256(m[1])
		if h := "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"; !strings.Contains(policy, tag+"-src "+h) {
			t.Errorf("the <%s> content hashes to %s, which %q does not allow", tag, h, policy)
		}
	}
}

// The script builds the page from data with textContent only: prompts are
// user text and must never be parsed as markup.
func TestScriptNeverParsesDataAsMarkup(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"} {
		if strings.Contains(pageJS, bad) {
			t.Errorf("page.js uses %s", bad)
		}
	}
}

// On several processes (NATS_URL) the snapshot carries every process and
// each running turn names the process running it; later lists come as
// "processes" events.
func TestEventsProcesses(t *testing.T) {
	t.Parallel()
	procs := &Processes{
		Self: "run-1",
		Read: t0.Add(-2 * time.Second),
		List: []Process{
			{Name: "run-1", Role: "run", Version: "1.4.0", Started: t0.Add(-time.Hour), Slots: 0, Beat: t0.Add(-3 * time.Second)},
			{Name: "worker-a", Role: "worker", Version: "1.4.0", Started: t0.Add(-time.Hour), Slots: 4, Beat: t0.Add(-1 * time.Second),
				Turns: []ProcessTurn{{EventID: 7, Lane: "100", ChannelName: "general", Since: t0.Add(-time.Minute)}}},
		},
	}
	src := newFakeSource(State{
		Running:   []Turn{{EventID: 9, ChannelID: "200", Kind: "message", Prompt: "hi", StartedAt: t0, Process: "run-1"}},
		Processes: procs,
	})
	srv := newServer(t, Handler(src, testOptions(t)))
	events := openStream(t, srv, "/events")

	got := decode[State](t, next(t, events), "snapshot")
	if d := cmp.Diff(procs, got.Processes); d != "" {
		t.Errorf("processes (-want +got):\n%s", d)
	}
	if got.Running[0].Process != "run-1" {
		t.Errorf("running turn on %q, want run-1", got.Running[0].Process)
	}

	later := Processes{Self: "run-1", Read: t0, Error: "cannot be read", List: []Process{{Name: "worker-b", Role: "worker", Slots: 2, Beat: t0}}}
	src.Publish(ProcessesChanged(later))
	if d := cmp.Diff(later, decode[Processes](t, next(t, events), KindProcesses)); d != "" {
		t.Errorf("processes event (-want +got):\n%s", d)
	}
}

// On one machine there is no list of processes: the page gets no
// "processes" key at all and shows what it always showed.
func TestEventsNoProcessesOnOneMachine(t *testing.T) {
	t.Parallel()
	src := newFakeSource(State{Running: []Turn{{EventID: 9, Kind: "message", Prompt: "hi", StartedAt: t0}}})
	srv := newServer(t, Handler(src, testOptions(t)))
	ev := next(t, openStream(t, srv, "/events"))
	if ev.name != "snapshot" {
		t.Fatalf("first event %q", ev.name)
	}
	for _, key := range []string{`"processes"`, `"process"`} {
		if strings.Contains(ev.data, key) {
			t.Errorf("the snapshot of one machine has %s: %s", key, ev.data)
		}
	}
}

// A process list with no entries still reaches the page as a list, so
// that the page can say none has reported rather than hide the section.
func TestEventsEmptyProcessesIsAList(t *testing.T) {
	t.Parallel()
	src := newFakeSource(State{Processes: &Processes{Self: "run-1", List: []Process{{Name: "w"}}}})
	src.state.Processes.List = nil
	srv := newServer(t, Handler(src, testOptions(t)))
	ev := next(t, openStream(t, srv, "/events"))
	if !strings.Contains(ev.data, `"list":[]`) {
		t.Errorf("snapshot %s: want an empty list of processes", ev.data)
	}
}

// Channel names (threads are named by users), process names and versions
// come from outside: they reach the page only as JSON strings inside the
// event stream, never in the page's markup, and the JSON escapes <, >
// and &.
func TestHostileNamesNeverReachMarkup(t *testing.T) {
	t.Parallel()
	const hostile = `</script><img src=x onerror=alert(1)>&amp;`
	src := newFakeSource(State{
		Running: []Turn{{EventID: 1, ChannelID: "1", ChannelName: hostile, Kind: "message", Prompt: hostile, StartedAt: t0, Process: hostile}},
		Processes: &Processes{Self: hostile, List: []Process{{Name: hostile, Role: hostile, Version: hostile, Beat: t0,
			Turns: []ProcessTurn{{EventID: 1, Lane: hostile, ChannelName: hostile, Since: t0}}}}},
	})
	srv := newServer(t, Handler(src, testOptions(t)))
	events := openStream(t, srv, "/events")
	ev := next(t, events)
	src.Publish(ProcessesChanged(*src.Snapshot().Processes))
	ev2 := next(t, events)
	for _, e := range []sseEvent{ev, ev2} {
		if strings.ContainsAny(e.data, "<>") || strings.Contains(e.data, "&amp;") {
			t.Errorf("event %q carries raw markup: %s", e.name, e.data)
		}
		// It is still the same text once decoded.
		if !strings.Contains(e.data, `\u003c/script\u003e\u003cimg src=x onerror=alert(1)\u003e\u0026amp;`) {
			t.Errorf("event %q lost the name: %s", e.name, e.data)
		}
	}
	if body := getPage(t, srv.URL+"/"); strings.Contains(body, "onerror") {
		t.Error("the page's markup carries a name")
	}
}
