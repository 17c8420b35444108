package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/dashboard"
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
