package gateway

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/config"
)

// advance waits until the scheduler has armed n timers on the fake clock,
// then moves the clock.
func advance(t *testing.T, clock *clockwork.FakeClock, n int, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := clock.BlockUntilContext(ctx, n); err != nil {
		t.Fatalf("waiting for %d timers: %v", n, err)
	}
	clock.Advance(d)
}

func prompts(b *backends.Fake) []string {
	var out []string
	for _, r := range b.Requests() {
		out = append(out, r.Prompt)
	}
	return out
}

func TestHeartbeatRepliesGoToOutputChannelExceptHeartbeatOK(t *testing.T) {
	clock := clockwork.NewFakeClock()
	h := startGateway(t, harnessOptions{
		clock: clock,
		files: map[string]string{"heartbeat.md": `# Heartbeat

## inbox
Interval: 60
Instruction: Check the inbox.

## quiet
Interval: 120
Instruction: Nothing to see;
answer HEARTBEAT_OK.
Model: cheap-model
`},
		setup: func(h *harness) map[string]string {
			return map[string]string{config.EnvOutputChannelID: h.channel.String()}
		},
		respond: func(ctx context.Context, req backends.Request, emit func(backends.Event)) (backends.Result, error) {
			if strings.Contains(req.Prompt, "HEARTBEAT_OK") {
				return backends.Result{Text: "**HEARTBEAT_OK**", CostUSD: 0.002}, nil
			}
			return backends.Result{Text: "You have mail.", CostUSD: 0.001}, nil
		},
	})
	advance(t, clock, 2, 60*time.Second)
	msgs := h.waitReplies(h.channel, 1)
	if msgs[0].Content != "You have mail." || msgs[0].Reference != nil {
		t.Errorf("heartbeat post = %+v", msgs[0])
	}
	// The check must have finished, or its next tick is skipped (tested in
	// internal/schedule).
	h.fd.Wait(t, "the first check to finish", waitLong, func() bool { return strings.Contains(h.logs.String(), "event finished") })
	advance(t, clock, 2, 60*time.Second)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("prompts %q\nlogs:\n%s", prompts(h.backend), h.logs.String())
		}
	})
	h.backendCalls(3)
	h.fd.Wait(t, "the quiet check logged", waitLong, func() bool { return strings.Contains(h.logs.String(), `"not_posted":true`) })
	h.waitReplies(h.channel, 2)
	var quiet backends.Request
	for _, r := range h.backend.Requests() {
		if strings.Contains(r.Prompt, "HEARTBEAT_OK") {
			quiet = r
		}
	}
	if quiet.Model != "cheap-model" || !strings.Contains(quiet.Prompt, "Nothing to see;\nanswer HEARTBEAT_OK.") {
		t.Errorf("quiet check request = model %q prompt %q", quiet.Model, quiet.Prompt)
	}
	h.stop()
	for _, m := range h.fd.BotMessages(h.channel) {
		if strings.Contains(m.Content, "HEARTBEAT_OK") {
			t.Errorf("HEARTBEAT_OK was posted: %q", m.Content)
		}
	}
	if n := len(h.fd.BotMessages(h.channel)); n != 2 {
		t.Errorf("%d posts, want 2 (inbox twice)", n)
	}
	if !strings.Contains(h.logs.String(), `"cost_usd":0.002`) {
		t.Error("the quiet check's cost was not logged")
	}
}

func TestHeartbeatAddedWhileRunningStarts(t *testing.T) {
	clock := clockwork.NewFakeClock()
	h := startGateway(t, harnessOptions{
		clock: clock,
		setup: func(h *harness) map[string]string {
			return map[string]string{config.EnvOutputChannelID: h.channel.String()}
		},
	})
	os.WriteFile(filepath.Join(h.cfg.ConfigDir, "heartbeat.md"), []byte("## late\nInterval: 300\nInstruction: Late check.\n"), 0o600)
	h.fd.Wait(t, "the reload", waitLong, func() bool { return strings.Contains(h.logs.String(), "no agent turn running: applying it") })
	advance(t, clock, 1, 300*time.Second)
	msgs := h.waitReplies(h.channel, 1)
	if msgs[0].Content != "echo: Late check." {
		t.Errorf("post = %q", msgs[0].Content)
	}

	// A broken edit keeps the last good schedule.
	os.WriteFile(filepath.Join(h.cfg.ConfigDir, "heartbeat.md"), []byte("## late\nInterval: soon\nInstruction: Late check.\n"), 0o600)
	h.fd.Wait(t, "the broken file reported", waitLong, func() bool {
		return strings.Contains(h.logs.String(), "keeping the last good schedule")
	})
	advance(t, clock, 1, 300*time.Second)
	h.waitReplies(h.channel, 2)
}

func TestWebhookEventIsAnsweredInItsChannel(t *testing.T) {
	addr := make(chan string, 1)
	const secret = "webhook-secret-value"
	h := startGateway(t, harnessOptions{
		webhookAddr: addr,
		setup: func(h *harness) map[string]string {
			return map[string]string{
				config.EnvWebhookAddr:   "127.0.0.1:0",
				"WEBHOOK_DEPLOY_SECRET": secret,
			}
		},
	})
	// The definition names the channel, known only now: write and reload.
	agents := "# Operating Rules\n\n## Webhooks\n\n### deploy\nSecret-Env: WEBHOOK_DEPLOY_SECRET\nChannel: " +
		h.channel.String() + "\nInstruction: A deploy finished. Summarise it: {{payload}}\n"
	os.WriteFile(filepath.Join(h.cfg.ConfigDir, "agents.md"), []byte(agents), 0o600)
	h.fd.Wait(t, "the reload", waitLong, func() bool { return strings.Contains(h.logs.String(), "no agent turn running: applying it") })
	url := "http://" + <-addr + "/hooks/deploy"

	body := []byte(`{"service":"api","status":"ok"}`)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	post := func(sig string) (status int, eventID uint64) {
		h.fd.Wait(t, "the webhook to answer", waitLong, func() bool {
			req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
			req.Header.Set("X-Signature-256", sig)
			r, err := http.DefaultClient.Do(req)
			if err != nil {
				return false
			}
			defer r.Body.Close()
			var answer struct {
				EventID uint64 `json:"event_id"`
			}
			json.NewDecoder(r.Body).Decode(&answer)
			status, eventID = r.StatusCode, answer.EventID
			// 404 until the reload has applied the definition.
			return r.StatusCode != http.StatusNotFound
		})
		return status, eventID
	}
	if status, _ := post("sha256=" + strings.Repeat("0", 64)); status != http.StatusUnauthorized {
		t.Errorf("bad signature: status %d, want 401", status)
	}
	if status, id := post("sha256=" + hex.EncodeToString(mac.Sum(nil))); status != http.StatusAccepted || id == 0 {
		t.Fatalf("status = %d, event id %d; want 202 with the id", status, id)
	}
	msgs := h.waitReplies(h.channel, 1)
	if !strings.Contains(msgs[0].Content, `{"service":"api","status":"ok"}`) {
		t.Errorf("reply = %q, want the payload echoed", msgs[0].Content)
	}
	p := h.backend.Requests()[0].Prompt
	if !strings.HasPrefix(p, "A deploy finished. Summarise it:") || !strings.Contains(strings.ToLower(p), "untrusted") {
		t.Errorf("prompt = %q", p)
	}
	if strings.Contains(h.logs.String(), secret) || strings.Contains(h.logs.String(), `"status":"ok"`) {
		t.Error("the secret or the payload reached the log")
	}
}

func TestLifecycleHooksRunInOrder(t *testing.T) {
	agents := `# Operating Rules

## Hooks

### startup
Instruction: STARTUP hook.

### agent_begin
Instruction: BEGIN hook.

### agent_stop
Instruction: STOP hook.

### shutdown
Instruction: SHUTDOWN hook.
`
	h := startGateway(t, harnessOptions{
		files: map[string]string{"agents.md": agents},
		setup: func(h *harness) map[string]string {
			return map[string]string{config.EnvOutputChannelID: h.channel.String()}
		},
	})
	h.waitReplies(h.channel, 1) // the startup hook's post
	h.mention(h.channel, "the prompt")
	h.waitReplies(h.channel, 2)
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range prompts(h.backend) {
		got = append(got, strings.SplitN(p, "\n", 2)[0])
	}
	want := []string{"STARTUP hook.", "BEGIN hook.", "the prompt", "STOP hook.", "SHUTDOWN hook."}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("runs = %q, want %q", got, want)
	}
	msgs := h.fd.BotMessages(h.channel)
	var contents []string
	for _, m := range msgs {
		contents = append(contents, strings.SplitN(m.Content, "\n", 2)[0])
	}
	// Startup and shutdown post to the output channel; the inline hooks
	// only log, so the prompt gets exactly one reply.
	wantPosts := []string{"echo: STARTUP hook.", "echo: the prompt", "echo: SHUTDOWN hook."}
	if strings.Join(contents, "|") != strings.Join(wantPosts, "|") {
		t.Errorf("posts = %q, want %q", contents, wantPosts)
	}
}
