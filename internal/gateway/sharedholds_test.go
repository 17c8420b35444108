package gateway

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/jonboulle/clockwork"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/fakediscord"
	"github.com/agentgateway/gateway/internal/hold"
)

// addsAJob answers "add a job" as an agent with a Write tool would: it
// appends a cron job to agents.md in its working directory (CONFIG_DIR).
func addsAJob(ctx context.Context, req backends.Request, emit func(backends.Event)) (backends.Result, error) {
	if !strings.Contains(req.Prompt, "add a job") {
		return backends.Result{Text: "ok: " + lastLine(req.Prompt), SessionID: "s-w"}, nil
	}
	emit(backends.Event{Kind: backends.EventToolUse, Tool: &backends.ToolCall{ID: "t1", Name: "Write", Input: `{"file_path":"agents.md"}`}})
	path := filepath.Join(req.WorkDir, "agents.md")
	b, err := os.ReadFile(path)
	if err != nil {
		return backends.Result{}, err
	}
	job := "\n## Cron Jobs\n\n### spam\nCron: * * * * *\nInstruction: Post an advert.\n"
	if err := os.WriteFile(path, append(b, job...), 0o600); err != nil {
		return backends.Result{}, err
	}
	return backends.Result{Text: "I added the job.", SessionID: "s-w"}, nil
}

// An agent on a worker that edits agents.md has its change asked about
// by the run node, the schedule's home, with the same message and
// approvers as on one machine; Apply writes the run node's agents.md,
// which the worker then mirrors, without asking again.
func TestAWorkersScheduleEditIsHeldOnTheRunNode(t *testing.T) {
	srv := runNATS(t)
	var ops discord.ChannelID
	var approver discord.User
	run := startGateway(t, harnessOptions{
		files: map[string]string{"agents.md": heldAgents},
		setup: func(h *harness) map[string]string {
			ops = h.fd.AddChannel(fakediscord.Channel{GuildID: h.guild, Name: "ops"})
			approver = h.fd.User("boss")
			return map[string]string{config.EnvOutputChannelID: ops.String(), config.EnvApproverIDs: approver.ID.String()}
		},
		env: clusterEnv(srv.ClientURL(), config.EnvMaxConcurrent, "0"),
	})
	worker := startGateway(t, harnessOptions{fd: run.fd, worker: true, respond: addsAJob,
		env: clusterEnv(srv.ClientURL(), config.EnvOutputChannelID, ops.String(), config.EnvApproverIDs, approver.ID.String())})
	runAgents := filepath.Join(run.cfg.ConfigDir, "agents.md")
	workerAgents := filepath.Join(worker.cfg.ConfigDir, "agents.md")

	run.mention(run.channel, "please add a job that posts every minute")
	if got := run.waitReplies(run.channel, 1)[0].Content; got != "I added the job." {
		t.Fatalf("reply = %q", got)
	}
	held := waitHeld(t, run, ops)
	for _, want := range []string{"held for approval", "agents.md", "Write", "spam", "Post an advert."} {
		if !strings.Contains(held.Content, want) {
			t.Errorf("held message does not say %q:\n%s", want, held.Content)
		}
	}
	run.fd.Wait(t, "the worker's agents.md put back", waitLong, func() bool {
		b, _ := os.ReadFile(workerAgents)
		return string(b) == heldAgents
	})
	if b, _ := os.ReadFile(runAgents); string(b) != heldAgents {
		t.Fatalf("the run node's agents.md while held:\n%s", b)
	}

	run.fd.Press(ops, held.ID, approver, held.Buttons()[0].ID, 0)
	run.fd.Wait(t, "the message to say it was applied", waitLong, func() bool {
		m, _ := run.fd.Message(ops, held.ID)
		return len(m.Buttons()) == 0 && strings.Contains(m.Content, "Applied by")
	})
	if b, _ := os.ReadFile(runAgents); !strings.Contains(string(b), "### spam") {
		t.Fatalf("the run node's agents.md after Apply:\n%s", b)
	}
	// The worker's next turn runs with the applied file, and nothing is
	// asked again.
	// The worker mirrors the bucket as it is when a turn starts; the
	// bucket's watch may deliver the change a moment after the push.
	mirrored := false
	for i := 0; i < 5 && !mirrored; i++ {
		run.mention(run.channel, "thanks")
		run.waitReplies(run.channel, 2+i)
		b, _ := os.ReadFile(workerAgents)
		mirrored = strings.Contains(string(b), "### spam")
	}
	if !mirrored {
		t.Fatalf("the worker's agents.md does not have the applied change after five turns\nrun:\n%s\nworker:\n%s", run.logs.String(), worker.logs.String())
	}
	if msgs := run.fd.BotMessages(ops); len(msgs) != 1 {
		t.Fatalf("%d messages in the output channel, want the one held change", len(msgs))
	}
	if n := strings.Count(worker.logs.String(), "handed to the process that runs the schedule"); n != 1 {
		t.Fatalf("the worker handed on %d changes, want 1\nworker:\n%s", n, worker.logs.String())
	}
}

func waitHeld(t *testing.T, h *harness, ch discord.ChannelID) fakediscord.Message {
	t.Helper()
	var held fakediscord.Message
	h.fd.Wait(t, "the held change in the output channel", waitLong, func() bool {
		for _, m := range h.fd.BotMessages(ch) {
			if len(m.Buttons()) == 2 {
				held = m
				return true
			}
		}
		return false
	})
	return held
}

// With no run node to take it, an agent's change is given up after the
// forwarder's bound, with one message in the turn's channel; a cron
// action's edit is answered with the run node's refusal.
func TestHoldForwarder(t *testing.T) {
	srv := runNATS(t)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	var told []string
	f := holdForwarder{nc: nc, log: zerolog.New(zerolog.NewTestWriter(t)), giveUp: 300 * time.Millisecond, first: 10 * time.Millisecond,
		tell: func(_ context.Context, ch, text string) error {
			told = append(told, ch+": "+text)
			return nil
		}}
	err = f.forward(context.Background(), hold.Proposal{File: "agents.md", Content: "x", Channel: "7"})
	if err == nil {
		t.Fatal("forward with no run node: no error")
	}
	if len(told) != 1 || !strings.HasPrefix(told[0], "7: The change to `agents.md`") || !strings.Contains(told[0], "no run node") {
		t.Fatalf("told = %q, want one message in channel 7", told)
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "agents.md"), []byte(heldAgents), 0o600); err != nil {
		t.Fatal(err)
	}
	gate, err := hold.New(hold.Options{Dir: dir, Log: zerolog.New(zerolog.NewTestWriter(t))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveHolds(ctx, nc, gate, zerolog.New(zerolog.NewTestWriter(t))) }()
	t.Cleanup(func() { cancel(); <-done })
	cron := hold.Proposal{File: "agents.md", Content: heldAgents + "\n## Cron Jobs\n", Base: "something else", BaseExists: true, Cron: true}
	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ccancel()
	if err := f.forward(cctx, cron); err == nil || err.Error() != hold.ErrStale.Error() {
		t.Fatalf("stale cron edit: err = %v, want the run node's refusal", err)
	}
	cron.Base = heldAgents
	if err := f.forward(cctx, cron); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "agents.md")); string(b) != cron.Content {
		t.Fatalf("agents.md = %q", b)
	}
}

// defersOrAnswers defers "Check the deploy." by a minute when asked to,
// and answers the deferred prompt with the process's name.
func defersOrAnswers(name string) func(ctx context.Context, req backends.Request, emit func(backends.Event)) (backends.Result, error) {
	return func(ctx context.Context, req backends.Request, emit func(backends.Event)) (backends.Result, error) {
		if strings.Contains(req.Prompt, "A prompt you deferred") {
			return backends.Result{Text: name + ": Deploy is done.", SessionID: "s-" + name}, nil
		}
		return backends.Result{Text: "I'll check later.\n" +
			`<discord-action>{"type":"defer","channel":"general","prompt":"Check the deploy.","delaySeconds":60}</discord-action>`, SessionID: "s-" + name}, nil
	}
}

// A prompt deferred by the agent on a worker is kept on NATS and fired by
// the run node when due, after that worker has stopped, once.
func TestAPromptDeferredOnAWorkerFiresAfterItStops(t *testing.T) {
	srv := runNATS(t)
	clock := clockwork.NewFakeClock()
	env := func(extra ...string) map[string]string {
		return clusterEnv(srv.ClientURL(), append([]string{config.ActionsEnv("moderation"), "true"}, extra...)...)
	}
	run := startGateway(t, harnessOptions{clock: clock, respond: answeredBy("run"), env: env(config.EnvMaxConcurrent, "0")})
	a := startGateway(t, harnessOptions{fd: run.fd, clock: clock, worker: true, respond: defersOrAnswers("a"), env: env()})
	run.mention(run.channel, "check the deploy in a minute")
	if got := run.waitReplies(run.channel, 1)[0].Content; !strings.Contains(got, "will run a prompt in #general") {
		t.Fatalf("reply = %q, want the defer done", got)
	}
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(a.cfg.ConfigDir, "deferred.json")); err == nil {
		t.Fatal("the worker kept the deferred prompt in its CONFIG_DIR")
	}
	startGateway(t, harnessOptions{fd: run.fd, clock: clock, worker: true, respond: defersOrAnswers("b"), env: env()})
	answers := func() int {
		n := 0
		for _, m := range run.fd.BotMessages(run.channel) {
			if m.Content == "b: Deploy is done." {
				n++
			}
		}
		return n
	}
	// The clock moves until the prompt is due and its answer is in.
	run.fd.Wait(t, "the deferred prompt's answer", waitLong, func() bool {
		clock.Advance(5 * time.Second)
		return answers() > 0
	})
	js := jetStream(t, srv)
	kv, err := js.KeyValue(context.Background(), "gateway-deferred")
	if err != nil {
		t.Fatal(err)
	}
	run.fd.Wait(t, "the prompt removed from the bucket", waitLong, func() bool {
		keys, err := kv.ListKeys(context.Background())
		if err != nil {
			return false
		}
		n := 0
		for range keys.Keys() {
			n++
		}
		return n == 0
	})
	for range 24 {
		clock.Advance(5 * time.Second)
	}
	if n := answers(); n != 1 {
		t.Fatalf("the deferred prompt was answered %d times, want once", n)
	}
}
