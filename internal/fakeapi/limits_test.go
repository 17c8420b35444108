package fakeapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// While refusing, conversation requests get the API's 429 with the
// headers of the limit and take no turn; once lifted, the script goes on
// where it was.
func TestRefuseUntilAndLift(t *testing.T) {
	ctx := context.Background()
	a := StartAnthropic(t, Text("after the reset"))
	reset := time.Unix(1795791600, 0)
	a.RefuseUntil(reset)

	resp := post(t, ctx, a, "/v1/messages", mainBody)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("status %d", resp.StatusCode)
	}
	for k, want := range map[string]string{
		"anthropic-ratelimit-unified-status":               "rejected",
		"anthropic-ratelimit-unified-reset":                "1795791600",
		"anthropic-ratelimit-unified-representative-claim": "five_hour",
	} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	var e struct {
		Type  string `json:"type"`
		Error struct {
			Type string `json:"type"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || e.Type != "error" || e.Error.Type != "rate_limit_error" {
		t.Errorf("body = %s", body)
	}
	if a.Remaining() != 1 {
		t.Errorf("a refused request took a turn: %d left", a.Remaining())
	}
	if reqs := a.Requests(); len(reqs) != 1 || reqs[0].Kind != Refused {
		t.Errorf("requests = %s", a.Summary())
	}

	a.Lift()
	if names, _, _ := summarize(t, streamOf(t, a)); len(names) == 0 {
		t.Error("no stream after the lift")
	}
	if a.Remaining() != 0 {
		t.Errorf("%d turns left after the lift", a.Remaining())
	}
}

func TestRefuseRetryAfter(t *testing.T) {
	a := StartAnthropic(t)
	a.RefuseRetryAfter(1500 * time.Millisecond)
	resp := post(t, context.Background(), a, "/v1/messages", mainBody)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("retry-after") != "2" || resp.Header.Get("anthropic-ratelimit-unified-status") != "" {
		t.Errorf("status %d, headers %v", resp.StatusCode, resp.Header)
	}
}

func TestResponsesRefuseUntil(t *testing.T) {
	s := StartResponses(t, Text("after the reset"))
	s.RefuseUntil(time.Unix(1795791600, 0))
	body := `{"model":"m","stream":true,"tools":[{"type":"function","name":"f"}],"input":[]}`
	resp, err := http.Post(s.URL()+"/v1/responses", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var e struct {
		Error struct {
			Type     string `json:"type"`
			ResetsAt int64  `json:"resets_at"`
		} `json:"error"`
	}
	if resp.StatusCode != http.StatusTooManyRequests || json.Unmarshal(b, &e) != nil || e.Error.Type != "usage_limit_reached" || e.Error.ResetsAt != 1795791600 {
		t.Errorf("status %d body %s", resp.StatusCode, b)
	}
	if s.Remaining() != 1 {
		t.Error("a refused request took a turn")
	}
	s.Lift()
	resp, err = http.Post(s.URL()+"/v1/responses", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || s.Remaining() != 0 {
		t.Errorf("after the lift: status %d, %d turns left", resp.StatusCode, s.Remaining())
	}
}
