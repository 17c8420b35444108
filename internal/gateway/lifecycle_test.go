package gateway

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/jonboulle/clockwork"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/config"
	gwdiscord "github.com/agentgateway/gateway/internal/discord"
	"github.com/agentgateway/gateway/internal/fakediscord"
)

// blockOn answers every prompt at once except "forever", which runs until
// its context ends; started receives each prompt as its turn starts.
func blockOn(started chan<- string) func(ctx context.Context, req backends.Request, emit func(backends.Event)) (backends.Result, error) {
	return func(ctx context.Context, req backends.Request, emit func(backends.Event)) (backends.Result, error) {
		started <- req.Prompt
		if req.Prompt == "forever" {
			<-ctx.Done()
			return backends.Result{}, &backends.Error{Kind: backends.KindCanceled, Err: ctx.Err()}
		}
		return backends.Result{SessionID: "s", Text: "done " + req.Prompt}, nil
	}
}

// A heartbeat waiting behind a prompt in its channel that /claude-stop
// drops fires again at its next interval, and the stop notice counts only
// prompts.
func TestHeartbeatDroppedByStopFiresAgain(t *testing.T) {
	clock := clockwork.NewFakeClock()
	started := make(chan string, 10)
	h := startGateway(t, harnessOptions{
		clock:   clock,
		files:   map[string]string{"heartbeat.md": "## inbox\nInterval: 60\nInstruction: Check the inbox.\n"},
		respond: blockOn(started),
		setup: func(h *harness) map[string]string {
			return map[string]string{config.EnvOutputChannelID: h.channel.String()}
		},
	})
	h.mention(h.channel, "forever")
	if p := <-started; p != "forever" {
		t.Fatalf("first run = %q", p)
	}
	advance(t, clock, 1, 60*time.Second)
	h.fd.Wait(t, "the heartbeat queued", waitLong, func() bool { return strings.Contains(h.logs.String(), "scheduled event enqueued") })

	stop := h.fd.InteractOptions(h.channel, h.user, "claude-stop", fakediscord.Option{Name: "all", Type: 5, Value: true})
	if got := h.answer(stop); got != "Stopped the prompt that was running; nothing of it is still running." {
		t.Errorf("stop answer = %q; a dropped heartbeat is not a waiting prompt", got)
	}
	h.fd.Wait(t, "the run to end", waitLong, func() bool { return strings.Contains(h.logs.String(), "stopped on request") })

	advance(t, clock, 1, 60*time.Second)
	select {
	case p := <-started:
		if p != "Check the inbox." {
			t.Errorf("next run = %q, want the heartbeat", p)
		}
	case <-time.After(waitLong):
		t.Fatalf("the heartbeat never fired again after /claude-stop dropped it; logs:\n%s", h.logs.String())
	}
}

// When Discord closes the connection for good, the shutdown hook is not
// run: its reply could not be delivered.
func TestShutdownHookSkippedWhenDiscordIsGone(t *testing.T) {
	agents := "## Hooks\n\n### shutdown\nInstruction: SHUTDOWN hook.\n"
	h := startGateway(t, harnessOptions{
		files: map[string]string{"agents.md": agents},
		setup: func(h *harness) map[string]string {
			return map[string]string{config.EnvOutputChannelID: h.channel.String()}
		},
	})
	h.fd.Disconnect(4004, false)
	select {
	case err := <-h.done:
		h.done <- err
		var fatal *gwdiscord.FatalError
		if !errors.As(err, &fatal) || fatal.Code != 4004 {
			t.Errorf("Run = %v, want the fatal close 4004", err)
		}
	case <-time.After(waitLong):
		t.Fatal("the gateway did not stop after a fatal close")
	}
	for _, p := range prompts(h.backend) {
		if strings.Contains(p, "SHUTDOWN hook.") {
			t.Error("the shutdown hook ran with Discord gone")
		}
	}
	if !strings.Contains(h.logs.String(), "shutdown hook skipped") {
		t.Errorf("the skip is not logged:\n%s", h.logs.String())
	}
}

// A second signal while the drain waits stops at once, with exit status 0:
// the prompt that was running and the one waiting stay in the inbox, each
// user is told once, and the next start answers both, once.
func TestSecondSignalStopsAtOnceAndKeepsPrompts(t *testing.T) {
	started := make(chan string, 10)
	signals := make(chan os.Signal, 1)
	first := startGateway(t, harnessOptions{respond: blockOn(started), signals: signals})
	running := first.mention(first.channel, "forever")
	if p := <-started; p != "forever" {
		t.Fatalf("first run = %q", p)
	}
	queued := first.mention(first.channel, "queued")
	reactPath := "/channels/" + first.channel.String() + "/messages/" + queued.ID.String() + "/reactions/"
	first.fd.Wait(t, "waiting mark", waitLong, func() bool { return len(first.requests("PUT", reactPath)) == 1 })

	first.cancel() // the first signal: drain
	first.fd.Wait(t, "the drain", waitLong, func() bool { return strings.Contains(first.logs.String(), "shutting down") })
	signals <- syscall.SIGTERM
	select {
	case err := <-first.done:
		first.done <- err
		if err != nil {
			t.Errorf("Run = %v, want nil: nothing is lost, the inbox keeps both prompts", err)
		}
	case <-time.After(waitLong / 2):
		t.Fatal("a second signal did not stop the gateway at once")
	}
	told := map[discord.MessageID]int{}
	for _, m := range first.fd.BotMessages(first.channel) {
		if m.Content != gwdiscord.RestartingNotice || m.Reference == nil {
			t.Errorf("the stopped gateway posted %q", m.Content)
			continue
		}
		told[m.Reference.MessageID]++
	}
	if told[running.ID] != 1 || told[queued.ID] != 1 {
		t.Errorf("restart notices per prompt = %v, want one each", told)
	}

	second := startGateway(t, harnessOptions{fd: first.fd, configDir: first.cfg.ConfigDir})
	second.channel = first.channel
	msgs := second.waitReplies(second.channel, 4)
	var got []string
	for _, m := range msgs[2:] {
		got = append(got, m.Content)
	}
	if want := "echo: forever|echo: queued"; strings.Join(got, "|") != want {
		t.Errorf("replies after the restart = %q, want %q", got, want)
	}
	second.stop()
	if n := len(second.fd.BotMessages(second.channel)); n != 4 {
		t.Errorf("%d bot messages, want 4 (two notices, two answers)", n)
	}
}

// A webhook that names no channel posts to OUTPUT_CHANNEL_ID, as README
// and doctor say.
func TestWebhookWithoutChannelPostsToOutputChannel(t *testing.T) {
	addr := make(chan string, 1)
	h := startGateway(t, harnessOptions{
		webhookAddr: addr,
		files: map[string]string{"agents.md": "## Webhooks\n\n### ping\nSecret-Env: WEBHOOK_PING\n" +
			"Instruction: Someone pinged: {{payload}}\n"},
		setup: func(h *harness) map[string]string {
			return map[string]string{
				config.EnvWebhookAddr:     "127.0.0.1:0",
				config.EnvOutputChannelID: h.channel.String(),
				"WEBHOOK_PING":            "ping-secret-value",
			}
		},
	})
	req, _ := http.NewRequest("POST", "http://"+<-addr+"/hooks/ping", bytes.NewReader([]byte(`hello`)))
	req.Header.Set("Authorization", "Bearer ping-secret-value")
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusAccepted {
		t.Fatalf("status %d, want 202", r.StatusCode)
	}
	msgs := h.waitReplies(h.channel, 1)
	if !strings.Contains(msgs[0].Content, "Someone pinged") {
		t.Errorf("post = %q", msgs[0].Content)
	}
}

// A webhook whose Secret-Env is not a WEBHOOK_ variable, or whose secret is
// short, is disabled in run: the start log says why, and even the right
// secret is refused without running the agent.
func TestWebhookWithWeakSecretIsDisabled(t *testing.T) {
	addr := make(chan string, 1)
	h := startGateway(t, harnessOptions{
		webhookAddr: addr,
		files: map[string]string{"agents.md": "## Webhooks\n\n### lang\nSecret-Env: LANG\nInstruction: {{payload}}\n\n" +
			"### short\nSecret-Env: WEBHOOK_SHORT\nInstruction: {{payload}}\n"},
		setup: func(h *harness) map[string]string {
			return map[string]string{
				config.EnvWebhookAddr:     "127.0.0.1:0",
				config.EnvOutputChannelID: h.channel.String(),
				"LANG":                    "C.UTF-8",
				"WEBHOOK_SHORT":           "C.UTF-8",
			}
		},
	})
	url := "http://" + <-addr + "/hooks/"
	for _, name := range []string{"lang", "short"} {
		req, _ := http.NewRequest("POST", url+name, bytes.NewReader([]byte(`hello`)))
		req.Header.Set("Authorization", "Bearer C.UTF-8")
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != http.StatusForbidden {
			t.Errorf("%s: status %d, want 403", name, r.StatusCode)
		}
	}
	logs := h.logs.String()
	for _, why := range []string{"Secret-Env LANG does not start with WEBHOOK_", "WEBHOOK_SHORT is 7 bytes long"} {
		if !strings.Contains(logs, why) {
			t.Errorf("the log does not say %q", why)
		}
	}
	if n := len(h.backend.Requests()); n != 0 {
		t.Errorf("a disabled webhook ran the agent %d times", n)
	}
}
