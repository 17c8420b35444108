package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/admin"
	"github.com/agentgateway/gateway/internal/admin/admintest"
	"github.com/agentgateway/gateway/internal/config"
)

const adminToken = "admin-token-for-the-tests-0123456789"

// adminGateway is a gateway with its admin server on a free port.
type adminGateway struct {
	*harness
	url string
	hub *admin.Hub
}

func startAdminGateway(t *testing.T, o harnessOptions) *adminGateway {
	t.Helper()
	o.env = withEnv(o.env, config.EnvAdminAddr, "127.0.0.1:0")
	o.env = withEnv(o.env, config.EnvAdminToken, adminToken)
	type ready struct {
		addr string
		hub  *admin.Hub
	}
	got := make(chan ready, 1)
	o.admin = func(addr string, hub *admin.Hub) { got <- ready{addr, hub} }
	h := startGateway(t, o)
	select {
	case r := <-got:
		return &adminGateway{harness: h, url: "http://" + r.addr, hub: r.hub}
	case <-time.After(waitLong):
		t.Fatal("the admin server did not start")
		return nil
	}
}

func (g *adminGateway) scrape() admintest.Samples {
	g.t.Helper()
	return admintest.Scrape(g.t, g.url+"/metrics", adminToken)
}

// status GETs path with the token and returns the status and body.
func (g *adminGateway) status(path string) (int, string) {
	g.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, g.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// scriptedTurn is a turn of the fake CLI: a model named at init, a tool
// call, a reply, tokens and a cost.
func scriptedTurn(ctx context.Context, req backends.Request, emit func(backends.Event)) (backends.Result, error) {
	emit(backends.Event{Kind: backends.EventInit, SessionID: "s", Model: "fake-model-1"})
	emit(backends.Event{Kind: backends.EventToolUse, Tool: &backends.ToolCall{ID: "t1", Name: "Bash", Input: `{"command":"go test ./..."}`}})
	emit(backends.Event{Kind: backends.EventToolResult, Tool: &backends.ToolCall{ID: "t1", Name: "Bash"}})
	emit(backends.Event{Kind: backends.EventText, Text: "done"})
	return backends.Result{SessionID: "s", Text: "done: " + req.Prompt, Model: "fake-model-1", CostUSD: 0.125,
		Usage: backends.Usage{InputTokens: 1000, OutputTokens: 50, CacheReadTokens: 7}}, nil
}

func TestAdminMetricsAfterTwoPrompts(t *testing.T) {
	g := startAdminGateway(t, harnessOptions{respond: scriptedTurn})
	g.mention(g.channel, "one")
	g.waitReplies(g.channel, 1)
	g.mention(g.channel, "two")
	g.waitReplies(g.channel, 2)

	// The numbers settle once both events have left the queue, their
	// replies are recorded as delivered in the inbox, and every REST call
	// the fake saw has been counted.
	messagesPath := "/channels/" + g.channel.String() + "/messages"
	fakeCount := func(method string, match func(path string) bool) int {
		n := 0
		for _, r := range g.fd.Requests() {
			if r.Method == method && match(r.Path) && r.Status == http.StatusOK {
				n++
			}
		}
		return n
	}
	posts := func() int { return fakeCount(http.MethodPost, func(p string) bool { return p == messagesPath }) }
	reactions := func() int {
		return fakeCount(http.MethodPut, func(p string) bool {
			return strings.HasPrefix(p, messagesPath+"/") && strings.Contains(p, "/reactions/")
		})
	}
	var s admintest.Samples
	g.fd.Wait(t, "the metrics to settle", waitLong, func() bool {
		s = g.scrape()
		return s.Get(`gateway_events_finished_total{kind="message",outcome="ok"}`) == 2 &&
			s.Get(`gateway_inbox_entries{state="done"}`) == 2 &&
			s.Get(`gateway_discord_requests_total{method="POST",route="/channels/{id}/messages",status="200"}`) == float64(posts()) &&
			s.Get(`gateway_discord_requests_total{method="PUT",route="/channels/{id}/messages/{id}/reactions/{emoji}/@me",status="200"}`) == float64(reactions())
	})
	if posts() < 2 {
		t.Errorf("the fake saw %d message posts, want at least the 2 replies", posts())
	}
	want := map[string]float64{
		`gateway_events_accepted_total{kind="message"}`:                                2,
		`gateway_events_finished_total{kind="message",outcome="ok"}`:                   2,
		`gateway_tool_calls_total{tool="Bash",outcome="ok"}`:                           2,
		`gateway_tokens_total{backend="fake",model="fake-model-1",type="input"}`:       2000,
		`gateway_tokens_total{backend="fake",model="fake-model-1",type="output"}`:      100,
		`gateway_tokens_total{backend="fake",model="fake-model-1",type="cache_read"}`:  14,
		`gateway_cost_usd_total{backend="fake",model="fake-model-1",estimate="false"}`: 0.25,
		`gateway_turn_duration_seconds_count{backend="fake",start="cold"}`:             2,
		`gateway_turn_first_output_seconds_count{backend="fake",start="cold"}`:         2,
		`gateway_queue_wait_seconds_count{lane_kind="channel"}`:                        2,
		`gateway_queue_waiting{lane_kind="channel"}`:                                   0,
		`gateway_events_running`:                  0,
		`gateway_discord_connected`:               1,
		`gateway_discord_reconnects_total`:        0,
		`gateway_inbox_entries{state="accepted"}`: 0,
	}
	for series, v := range want {
		if got := s.Get(series); got != v || !s.Has(series) {
			t.Errorf("%s = %v (present %v), want %v", series, got, s.Has(series), v)
		}
	}
	if s.Get("gateway_inbox_bytes") <= 0 || s.Get("gateway_process_resident_memory_bytes") <= 0 || s.Get("gateway_go_goroutines") <= 0 {
		t.Errorf("inbox size, RSS or goroutines missing: %v, %v, %v",
			s.Get("gateway_inbox_bytes"), s.Get("gateway_process_resident_memory_bytes"), s.Get("gateway_go_goroutines"))
	}
	for _, name := range s.Names() {
		if !strings.HasPrefix(name, admin.Prefix) {
			t.Errorf("metric %s lacks the prefix", name)
		}
	}
}

func TestAdminAuth(t *testing.T) {
	g := startAdminGateway(t, harnessOptions{})
	get := func(c *http.Client, path string, header map[string]string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, g.url+path, nil)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	plain := http.DefaultClient
	if code, _ := get(plain, "/healthz", nil); code != http.StatusOK {
		t.Errorf("/healthz without a token: %d", code)
	}
	if code, _ := get(plain, "/metrics", nil); code != http.StatusUnauthorized {
		t.Errorf("/metrics without a token: %d", code)
	}
	if code, _ := get(plain, "/metrics", map[string]string{"Authorization": "Bearer wrong"}); code != http.StatusUnauthorized {
		t.Errorf("/metrics with a wrong token: %d", code)
	}
	// The right token, once the pause after the wrong one is over.
	g.fd.Wait(t, "the right token taken", waitLong, func() bool {
		code, _ := get(plain, "/readyz", map[string]string{"Authorization": "Bearer " + adminToken})
		return code == http.StatusOK
	})
	// Logged in with the form, the cookie opens the page.
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	resp, err := browser.PostForm(g.url+"/login", url.Values{"token": {adminToken}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/" {
		t.Errorf("after login: %s at %s, want 200 at /", resp.Status, resp.Request.URL.Path)
	}
	if code, body := get(browser, "/metrics", nil); code != http.StatusOK || !strings.Contains(body, "gateway_discord_connected 1") {
		t.Errorf("/metrics with the cookie: %d", code)
	}
	if strings.Contains(g.logs.String(), adminToken) {
		t.Error("the admin token reached the log")
	}
	if !strings.Contains(g.logs.String(), `"addr":"`+strings.TrimPrefix(g.url, "http://")+`"`) {
		t.Errorf("the admin server's address is not logged:\n%s", g.logs.String())
	}
}

func TestAdminReadinessFollowsDiscordAndShutdown(t *testing.T) {
	release := make(chan struct{})
	g := startAdminGateway(t, harnessOptions{respond: func(ctx context.Context, req backends.Request, emit func(backends.Event)) (backends.Result, error) {
		if req.Prompt == "slow" {
			<-release
		}
		return backends.Result{SessionID: "s", Text: "ok"}, nil
	}})
	readyz := func() (int, string) {
		code, body := g.status("/readyz")
		var r struct {
			Ready  bool   `json:"ready"`
			Reason string `json:"reason"`
		}
		json.Unmarshal([]byte(body), &r)
		return code, r.Reason
	}
	if code, reason := readyz(); code != http.StatusOK {
		t.Fatalf("/readyz once connected: %d %q", code, reason)
	}
	// Dropped, with Discord unreachable meanwhile.
	g.fd.Offline()
	g.fd.Disconnect(4000, true)
	g.fd.Wait(t, "/readyz 503", waitLong, func() bool { code, _ := readyz(); return code == http.StatusServiceUnavailable })
	if _, reason := readyz(); reason != errDiscordDown.Error() {
		t.Errorf("reason %q, want %q", reason, errDiscordDown)
	}
	if code, _ := g.status("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz while Discord is away: %d", code)
	}
	g.fd.Online()
	g.fd.Wait(t, "/readyz 200 again", waitLong, func() bool { code, _ := readyz(); return code == http.StatusOK })
	s := g.scrape()
	for series, v := range map[string]float64{
		"gateway_discord_disconnects_total": 1,
		"gateway_discord_reconnects_total":  1,
		"gateway_discord_resumes_total":     1,
		"gateway_discord_connected":         1,
	} {
		if got := s.Get(series); got != v {
			t.Errorf("%s = %v, want %v", series, got, v)
		}
	}

	// Shutting down: not ready, still healthy, until the drain is over.
	g.mention(g.channel, "slow")
	g.backendCalls(1)
	g.cancel()
	// With every turn on a worker (GATEWAY_E2E_WORKER=1), this process
	// holds no turn: its drain has nothing to wait for, and it may be
	// gone before it is asked.
	onWorker := os.Getenv("GATEWAY_E2E_WORKER") == "1"
	g.fd.Wait(t, "/readyz to say shutting down", waitLong, func() bool {
		code, reason := readyz()
		return reason == errQueueClosed.Error() || onWorker && code == 0
	})
	if code, body := g.status("/healthz"); code != http.StatusOK && !onWorker {
		t.Errorf("/healthz during the drain: %d %q", code, body)
	}
	close(release)
	if err := g.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if code, body := g.status("/healthz"); code != 0 {
		t.Errorf("/healthz after Run returned: %d %q, want no answer", code, body)
	}
}

func TestAdminHubDeliversATurnInOrder(t *testing.T) {
	events := make(chan (<-chan admin.Event), 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := startGateway(t, harnessOptions{
		respond: scriptedTurn,
		env:     map[string]string{config.EnvAdminAddr: "127.0.0.1:0"},
		admin:   func(addr string, hub *admin.Hub) { events <- hub.Subscribe(ctx) },
	})
	sub := <-events
	h.mention(h.channel, "run the tests, <@"+h.user.ID.String()+">")
	var got []admin.Event
	deadline := time.After(waitLong)
	for done := false; !done; {
		select {
		case e := <-sub:
			if e.Type == admin.QueueChanged {
				continue
			}
			e.Time = time.Time{}
			got = append(got, e)
			done = e.Type == admin.TurnFinished
		case <-deadline:
			t.Fatalf("no TurnFinished; got %+v", got)
		}
	}
	if len(got) != 3 {
		t.Fatalf("events %+v, want a start, a tool and a finish", got)
	}
	id := got[0].EventID
	duration := got[2].Duration
	if id == 0 || duration <= 0 {
		t.Fatalf("event id %d, duration %v", id, duration)
	}
	want := []admin.Event{
		{Type: admin.TurnStarted, EventID: id, Channel: h.channel.String(), Kind: "message",
			Prompt: "run the tests, <\u200b@" + h.user.ID.String() + ">", Backend: "fake"},
		{Type: admin.ToolUsed, EventID: id, Tool: "Bash", Summary: "go test ./..."},
		{Type: admin.TurnFinished, EventID: id, Channel: h.channel.String(), Kind: "message", Outcome: "ok",
			Duration: duration, CostUSD: 0.125},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("hub events (-want +got):\n%s", diff)
	}
}

func TestAdminOffStartsNothing(t *testing.T) {
	var called atomic.Bool
	h := startGateway(t, harnessOptions{admin: func(string, *admin.Hub) { called.Store(true) }})
	h.mention(h.channel, "hello")
	h.waitReplies(h.channel, 1)
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	if called.Load() || strings.Contains(h.logs.String(), "admin server") {
		t.Errorf("an admin server started without ADMIN_ADDR:\n%s", h.logs.String())
	}
}
