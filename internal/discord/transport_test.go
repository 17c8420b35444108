package discord

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// countingServer answers with the scripted statuses in order, then 200,
// and records the bodies it received.
type countingServer struct {
	mu       sync.Mutex
	statuses []int
	header   http.Header
	// body is the answer's body; empty means {"retry_after": 0.01}.
	body   string
	bodies []string
	paths  []string
}

func (s *countingServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.bodies = append(s.bodies, string(b))
	s.paths = append(s.paths, r.URL.Path)
	status := 200
	if len(s.statuses) > 0 {
		status, s.statuses = s.statuses[0], s.statuses[1:]
	}
	s.mu.Unlock()
	for k, v := range s.header {
		w.Header()[k] = v
	}
	w.WriteHeader(status)
	body := s.body
	if body == "" {
		body = `{"retry_after": 0.01}`
	}
	io.WriteString(w, body)
}

func newTestTransport(t *testing.T, srv *countingServer) (*transport, string) {
	t.Helper()
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	tr, err := newTransport(nil, hs.URL+"/proxy/api/v9")
	if err != nil {
		t.Fatal(err)
	}
	tr.backoff = func(int) time.Duration { return time.Millisecond }
	return tr, hs.URL
}

func do(t *testing.T, tr *transport, method, url, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func TestTransportRewritesDiscordURLs(t *testing.T) {
	srv := &countingServer{}
	tr, _ := newTestTransport(t, srv)
	do(t, tr, "GET", "https://discord.com/api/v9//oauth2/applications/@me", "")
	do(t, tr, "GET", "https://discord.com/api/v9/channels/1/messages?after=5", "")
	want := []string{"/proxy/api/v9/oauth2/applications/@me", "/proxy/api/v9/channels/1/messages"}
	for i, p := range srv.paths {
		if p != want[i] {
			t.Errorf("path %d = %q, want %q", i, p, want[i])
		}
	}
}

// waits records the transport's waits instead of sleeping.
func waits(tr *transport) *[]time.Duration {
	var got []time.Duration
	tr.sleep = func(_ context.Context, d time.Duration) error {
		got = append(got, d)
		return nil
	}
	return &got
}

func TestTransportWaitsFractionalRetryAfter(t *testing.T) {
	srv := &countingServer{statuses: []int{429, 429}, header: http.Header{"Retry-After": {"0.03"}}, body: `{"message": "You are being rate limited."}`}
	tr, _ := newTestTransport(t, srv)
	got := waits(tr)
	resp := do(t, tr, "POST", "https://discord.com/api/v9/channels/1/messages", `{"content":"x"}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status = %d", resp.StatusCode)
	}
	if diff := cmp.Diff([]time.Duration{30 * time.Millisecond, 30 * time.Millisecond}, *got); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
	if len(srv.bodies) != 3 || srv.bodies[2] != `{"content":"x"}` {
		t.Errorf("bodies = %q, want the same body three times", srv.bodies)
	}
}

// The body's retry_after is exact; the Retry-After header may be rounded
// up to whole seconds, so it counts only when the body has no wait.
func TestTransportRetryAfterPrefersTheExactWait(t *testing.T) {
	for _, tc := range []struct {
		name   string
		header string
		body   string
		want   time.Duration
	}{
		{"the body's exact wait over the header's whole second", "1", `{"message": "You are being rate limited.", "retry_after": 0.05, "global": false}`, 50 * time.Millisecond},
		{"the body alone", "", `{"retry_after": 0.05}`, 50 * time.Millisecond},
		{"the header when the body has none", "0.3", `{"message": "x"}`, 300 * time.Millisecond},
		{"the header when the body is no JSON", "2", `<html>`, 2 * time.Second},
		{"the header when the body's wait is not a wait", "1", `{"retry_after": -3}`, time.Second},
		{"a second when neither says", "", `{}`, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := &countingServer{statuses: []int{429}, body: tc.body}
			if tc.header != "" {
				srv.header = http.Header{"Retry-After": {tc.header}}
			}
			tr, _ := newTestTransport(t, srv)
			got := waits(tr)
			if resp := do(t, tr, "POST", "https://discord.com/api/v9/channels/1/messages", "b"); resp.StatusCode != 200 {
				t.Fatalf("status = %d", resp.StatusCode)
			}
			if diff := cmp.Diff([]time.Duration{tc.want}, *got); diff != "" {
				t.Errorf("waits (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTransportRetryAfterFromBody(t *testing.T) {
	srv := &countingServer{statuses: []int{429}}
	tr, _ := newTestTransport(t, srv)
	if resp := do(t, tr, "POST", "https://discord.com/api/v9/x", "b"); resp.StatusCode != 200 {
		t.Errorf("status = %d", resp.StatusCode)
	}
}

func TestTransportRetries5xxOnlyWhenIdempotent(t *testing.T) {
	srv := &countingServer{statuses: []int{502}}
	tr, _ := newTestTransport(t, srv)
	if resp := do(t, tr, "POST", "https://discord.com/api/v9/x", "b"); resp.StatusCode != 502 {
		t.Errorf("POST status = %d, want the 502 handed back", resp.StatusCode)
	}
	srv.statuses = []int{502, 503}
	if resp := do(t, tr, "PATCH", "https://discord.com/api/v9/x", "b"); resp.StatusCode != 200 {
		t.Errorf("PATCH status = %d, want 200 after retries", resp.StatusCode)
	}
}

func TestTransportHandsBackLongWaitsNormalized(t *testing.T) {
	srv := &countingServer{statuses: []int{429}, header: http.Header{"Retry-After": {"120.5"}}, body: `{"retry_after": 120.5}`}
	tr, _ := newTestTransport(t, srv)
	resp := do(t, tr, "POST", "https://discord.com/api/v9/x", "b")
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "121" {
		t.Errorf("got %d Retry-After %q, want 429 with 121", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

func FuzzSeconds(f *testing.F) {
	for _, s := range []string{"0.5", "1", "", "-1", "NaN", "1e309", "Inf", " 2 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := seconds(s)
		if ok && (d < 0 || d > 24*time.Hour) {
			t.Fatalf("seconds(%q) = %v", s, d)
		}
	})
}
