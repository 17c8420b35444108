package discord

import (
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// recordingMonitor is a Monitor that records what it is told.
type recordingMonitor struct {
	mu       sync.Mutex
	requests []string
	conns    []string
	caught   []int
}

func (m *recordingMonitor) Request(method, route string, status int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests = append(m.requests, method+" "+route+" "+http.StatusText(status))
}

func (m *recordingMonitor) Connection(up, resumed bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case !up:
		m.conns = append(m.conns, "down")
	case resumed:
		m.conns = append(m.conns, "resumed")
	default:
		m.conns = append(m.conns, "ready")
	}
}

func (m *recordingMonitor) CaughtUp(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.caught = append(m.caught, n)
}

func (m *recordingMonitor) connections() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.conns)
}

func (m *recordingMonitor) got() (requests []string, caught []int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.requests), slices.Clone(m.caught)
}

func TestRoute(t *testing.T) {
	tests := []struct{ path, want string }{
		{"/channels/123/messages", "/channels/{id}/messages"},
		{"/channels/123/messages/456", "/channels/{id}/messages/{id}"},
		{"/channels/1/messages/2/reactions/⏳/@me", "/channels/{id}/messages/{id}/reactions/{emoji}/@me"},
		{"/channels/1/messages/2/reactions/party:99/@me", "/channels/{id}/messages/{id}/reactions/{emoji}/@me"},
		{"/interactions/77/aW50ZXJhY3Rpb246OnRva2Vu/callback", "/interactions/{id}/{token}/callback"},
		{"/webhooks/5/tok-en_Ab9/messages/@original", "/webhooks/{id}/{token}/messages/@original"},
		{"/applications/5/commands", "/applications/{id}/commands"},
		{"/channels/1/typing", "/channels/{id}/typing"},
		{"/users/@me", "/users/@me"},
		{"/guilds/9/members/Weird.Name", "/guilds/{id}/members/{x}"},
		{"/", "/"},
	}
	for _, tt := range tests {
		if got := route(tt.path); got != tt.want {
			t.Errorf("route(%q) = %q, want %q", tt.path, got, tt.want)
		}
	}
}

func TestTransportTellsEachAttempt(t *testing.T) {
	srv := &countingServer{statuses: []int{http.StatusTooManyRequests, http.StatusOK}}
	tr, base := newTestTransport(t, srv)
	m := &recordingMonitor{}
	tr.observe = m.Request
	do(t, tr, http.MethodPost, "https://discord.com/api/v9/channels/42/messages", `{"content":"hi"}`)
	do(t, tr, http.MethodGet, base+"/elsewhere", "")
	got, _ := m.got()
	want := []string{
		"POST /channels/{id}/messages Too Many Requests",
		"POST /channels/{id}/messages OK",
		"GET other OK",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests told (-want +got):\n%s", diff)
	}
}

func TestConnectedFollowsTheGatewayConnection(t *testing.T) {
	m := &recordingMonitor{}
	tb := startBot(t, Options{Monitor: m})
	if !tb.Connected() {
		t.Fatal("not Connected after Open")
	}
	// Dropped with Discord unreachable: the bot stays disconnected.
	// (arikawa dials at most once per 5 s: each reconnect takes that.)
	tb.fd.Offline()
	tb.fd.Disconnect(4000, true)
	tb.fd.Wait(t, "Connected false", waitLong, func() bool { return !tb.Connected() })
	// Back: the session resumes.
	tb.fd.Online()
	tb.fd.Wait(t, "Connected again", waitLong, tb.Connected)
	// Dropped for good (4007, invalid sequence): a new session, and a
	// catch-up.
	tb.fd.Disconnect(4007, false)
	tb.fd.Wait(t, "the new session", waitLong, func() bool { return len(m.connections()) >= 5 })
	tb.fd.Wait(t, "Connected after the new session", waitLong, tb.Connected)
	want := []string{"ready", "down", "resumed", "down", "ready"}
	if diff := cmp.Diff(want, m.connections()); diff != "" {
		t.Errorf("connection changes (-want +got):\n%s", diff)
	}
	tb.fd.Wait(t, "the catch-up", waitLong, func() bool { _, c := m.got(); return len(c) > 0 })
	requests, _ := m.got()
	if !slices.Contains(requests, "PUT /applications/{id}/commands OK") {
		t.Errorf("the command registration is not among the requests told: %q", requests)
	}
	tb.Close()
	if tb.Connected() {
		t.Error("Connected after Close")
	}
}
