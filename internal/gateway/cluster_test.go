package gateway

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/config"
	gwdiscord "github.com/agentgateway/gateway/internal/discord"
	"github.com/agentgateway/gateway/internal/fakediscord"
	"github.com/agentgateway/gateway/internal/queue"
)

// clusterEnv is the settings of one process of a gateway on NATS: a few
// partitions, a short ack wait (the failover time).
func clusterEnv(url string, extra ...string) map[string]string {
	env := map[string]string{config.EnvNATSURL: url, config.EnvNATSPartitions: "8", config.EnvNATSAckWait: "3s"}
	for i := 0; i+1 < len(extra); i += 2 {
		env[extra[i]] = extra[i+1]
	}
	return env
}

// answeredBy answers every prompt with the process's name.
func answeredBy(name string) func(ctx context.Context, req backends.Request, emit func(backends.Event)) (backends.Result, error) {
	return func(ctx context.Context, req backends.Request, emit func(backends.Event)) (backends.Result, error) {
		if strings.Contains(req.Prompt, "hang") {
			emit(backends.Event{Kind: backends.EventToolUse, Tool: &backends.ToolCall{ID: "t1", Name: "Read", Input: `{"file_path":"a.txt"}`}})
			<-ctx.Done()
			return backends.Result{}, ctx.Err()
		}
		return backends.Result{Text: name + ": " + lastLine(req.Prompt), SessionID: "s-" + name}, nil
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// With MAX_CONCURRENT_QUERIES=0 the run node only takes prompts: a worker
// on its own CONFIG_DIR runs the turn, posts the answer over REST and
// removes the ⏳ the run node placed, and the event leaves the stream.
func TestAWorkerAnswersWhatTheRunNodeTakes(t *testing.T) {
	srv := runNATS(t)
	run := startGateway(t, harnessOptions{respond: answeredBy("run"),
		env: clusterEnv(srv.ClientURL(), config.EnvMaxConcurrent, "0")})
	startGateway(t, harnessOptions{fd: run.fd, worker: true, respond: answeredBy("worker"),
		env: clusterEnv(srv.ClientURL())})
	prompt := run.mention(run.channel, "hello there")
	msgs := run.waitReplies(run.channel, 1)
	if !strings.HasPrefix(msgs[0].Content, "worker: ") || !strings.Contains(msgs[0].Content, "hello there") {
		t.Fatalf("reply = %q, want the worker's answer", msgs[0].Content)
	}
	run.fd.Wait(t, "the ⏳ removed", waitLong, func() bool {
		return len(run.fd.Reactions(run.channel, prompt.ID)["⏳"]) == 0
	})
	js := jetStream(t, srv)
	run.fd.Wait(t, "the stream empty", waitLong, func() bool {
		st, err := js.Stream(context.Background(), "GATEWAY_EVENTS")
		if err != nil {
			return false
		}
		info, err := st.Info(context.Background())
		return err == nil && info.State.Msgs == 0
	})
}

// A turn running on a worker stops from the run node, which holds the
// Discord connection, by the card's button, by 🛑 and by /claude-stop.
func TestAStopReachesTheWorkerRunningTheTurn(t *testing.T) {
	for _, how := range []string{"button", "reaction", "command"} {
		t.Run(how, func(t *testing.T) {
			srv := runNATS(t)
			card := config.EnvTurnCard
			run := startGateway(t, harnessOptions{respond: answeredBy("run"), cardEvery: 50 * time.Millisecond,
				env: clusterEnv(srv.ClientURL(), config.EnvMaxConcurrent, "0", card, config.TurnCardReceipt)})
			startGateway(t, harnessOptions{fd: run.fd, worker: true, respond: answeredBy("worker"), cardEvery: 50 * time.Millisecond,
				env: clusterEnv(srv.ClientURL(), card, config.TurnCardReceipt)})
			stranger := run.fd.User("mallory")
			prompt := run.mention(run.channel, "hang please")
			var cardMsg fakediscord.Message
			run.fd.Wait(t, "the card with its Stop buttons", waitLong, func() bool {
				var ok bool
				cardMsg, ok = run.card(run.channel, prompt.ID)
				m, _ := run.fd.Message(run.channel, cardMsg.ID)
				return ok && len(m.Buttons()) == 2
			})
			cardMsg, _ = run.fd.Message(run.channel, cardMsg.ID)
			refusal := run.fd.Press(run.channel, cardMsg.ID, stranger, cardMsg.Buttons()[0].ID, 0)
			run.fd.Wait(t, "the refusal", waitLong, func() bool { return len(run.fd.Callbacks(refusal)) == 1 })
			if cb := run.fd.Callbacks(refusal); cb[0] != 4 {
				t.Fatalf("stranger's press answered with callback %v, want the worker's ephemeral notice", cb)
			}
			var stopCmd string
			switch how {
			case "button":
				id := run.fd.Press(run.channel, cardMsg.ID, run.user, cardMsg.Buttons()[0].ID, 0)
				run.fd.Wait(t, "the press answered", waitLong, func() bool { return len(run.fd.Callbacks(id)) == 1 })
			case "reaction":
				run.fd.React(run.channel, prompt.ID, run.user, "🛑")
			case "command":
				stopCmd = run.fd.Interact(run.channel, run.user, "claude-stop", nil)
			}
			run.fd.Wait(t, "the card to say stopped", waitLong, func() bool {
				m, _ := run.fd.Message(run.channel, cardMsg.ID)
				return strings.HasPrefix(m.Content, "🛑 Stopped")
			})
			if stopCmd != "" {
				if got := run.answer(stopCmd); got != "Stopped the prompt that was running; nothing of it is still running." {
					t.Errorf("/claude-stop answer = %q", got)
				}
			}
			// The lane is free again: the next prompt is answered.
			run.mention(run.channel, "next")
			run.fd.Wait(t, "the next answer", waitLong, func() bool {
				for _, m := range run.fd.BotMessages(run.channel) {
					if strings.HasPrefix(m.Content, "worker: ") {
						return true
					}
				}
				return false
			})
		})
	}
}

// recording answers as name and records the session each turn resumed
// and the system prompt it was given.
type recording struct {
	mu       sync.Mutex
	name     string
	sessions []string
	prompts  []string
}

func (r *recording) respond(ctx context.Context, req backends.Request, emit func(backends.Event)) (backends.Result, error) {
	r.mu.Lock()
	r.sessions = append(r.sessions, req.SessionID)
	r.prompts = append(r.prompts, req.SystemPrompt)
	r.mu.Unlock()
	id := req.SessionID
	if id == "" {
		id = "s-" + r.name
	}
	return backends.Result{Text: r.name + ": " + lastLine(req.Prompt), SessionID: id, CostUSD: 0.25}, nil
}

func (r *recording) turns() ([]string, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.sessions), slices.Clone(r.prompts)
}

// When the worker that ran a channel's conversation is gone, the next
// prompt runs on another worker and resumes the same session; the
// operator's persona, edited on the run node, reaches the workers'
// prompts; a fact one worker's agent wrote to memory.md is in the other's.
func TestAConversationMovesToAnotherWorker(t *testing.T) {
	srv := runNATS(t)
	run := startGateway(t, harnessOptions{respond: answeredBy("run"),
		env: clusterEnv(srv.ClientURL(), config.EnvMaxConcurrent, "0")})
	a := &recording{name: "a"}
	wa := startGateway(t, harnessOptions{fd: run.fd, worker: true, respond: a.respond, env: clusterEnv(srv.ClientURL())})
	run.mention(run.channel, "first")
	if msgs := run.waitReplies(run.channel, 1); !strings.HasPrefix(msgs[0].Content, "a: ") {
		t.Fatalf("first reply = %q, want worker a's", msgs[0].Content)
	}
	// The agent on worker a writes a fact.
	if err := os.WriteFile(filepath.Join(wa.cfg.ConfigDir, "memory.md"), []byte("# Memory\n- the deploy key rotates on Mondays\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run.mention(run.channel, "second")
	run.waitReplies(run.channel, 2)
	if err := wa.stop(); err != nil {
		t.Fatal(err)
	}
	// The operator edits the persona where the files are.
	if err := os.WriteFile(filepath.Join(run.cfg.ConfigDir, "soul.md"), []byte("You are Ferdinand, the patient one.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	js := jetStream(t, srv)
	run.fd.Wait(t, "the persona published", waitLong, func() bool {
		kv, err := js.KeyValue(context.Background(), "gateway-persona")
		if err != nil {
			return false
		}
		e, err := kv.Get(context.Background(), "soul.md")
		return err == nil && strings.Contains(string(e.Value()), "Ferdinand")
	})
	b := &recording{name: "b"}
	startGateway(t, harnessOptions{fd: run.fd, worker: true, respond: b.respond, env: clusterEnv(srv.ClientURL())})
	var prompt string
	run.mention(run.channel, "third")
	msgs := run.waitReplies(run.channel, 3)
	if !strings.HasPrefix(msgs[2].Content, "b: ") {
		t.Fatalf("third reply = %q, want worker b's", msgs[2].Content)
	}
	sessions, prompts := b.turns()
	if len(sessions) != 1 || sessions[0] != "s-a" {
		t.Fatalf("worker b resumed %q, want the session worker a started (s-a)", sessions)
	}
	prompt = prompts[0]
	if !strings.Contains(prompt, "Ferdinand") {
		t.Errorf("worker b's system prompt lacks the persona edited on the run node")
	}
	if !strings.Contains(prompt, "the deploy key rotates on Mondays") {
		t.Errorf("worker b's system prompt lacks the fact worker a's agent wrote to memory.md")
	}
	// The run node counts the turns both workers ran (the shared ledger).
	var status string
	run.fd.Wait(t, "the run node's ledger to count the workers' turns", waitLong, func() bool {
		status = run.answer(run.fd.Interact(run.channel, run.user, "status", nil))
		return strings.Contains(status, "$0.7500 here")
	})
}

// A /claude command taken by the run node is answered, as its response,
// by the worker that runs the turn; with threads on, the thread opens on
// that response.
func TestAWorkerAnswersASlashCommand(t *testing.T) {
	for _, threads := range []string{config.ThreadsOff, config.ThreadsAuto} {
		t.Run("threads="+threads, func(t *testing.T) {
			srv := runNATS(t)
			run := startGateway(t, harnessOptions{respond: answeredBy("run"),
				env: clusterEnv(srv.ClientURL(), config.EnvMaxConcurrent, "0", config.EnvThreads, threads)})
			startGateway(t, harnessOptions{fd: run.fd, worker: true, respond: answeredBy("worker"),
				env: clusterEnv(srv.ClientURL(), config.EnvThreads, threads)})
			id := run.fd.Interact(run.channel, run.user, "claude", map[string]string{"prompt": "from a command"})
			run.fd.Wait(t, "the worker's answer", waitLong, func() bool {
				for _, a := range run.fd.Answers() {
					if a.Interaction == id && strings.Contains(a.Content, "worker: from a command") {
						return true
					}
				}
				for _, ch := range run.fd.Threads(run.channel) {
					for _, m := range run.fd.BotMessages(ch.ID) {
						if strings.Contains(m.Content, "worker: from a command") {
							return threads == config.ThreadsAuto && ch.ID != run.channel
						}
					}
				}
				return false
			})
		})
	}
}

// Two gateway runs share one stream: the schedule fires on one of them
// only (the lease), a heartbeat fires again once its previous event
// finished on the worker, and a mention both receive is answered once.
func TestTwoRunNodesOneScheduleOneAnswer(t *testing.T) {
	srv := runNATS(t)
	clock := clockwork.NewFakeClock()
	heartbeat := map[string]string{"heartbeat.md": "## inbox\nInterval: 60\nInstruction: Check the inbox.\n"}
	var first *harness
	out := func(h *harness) map[string]string {
		if first != nil {
			h = first
		}
		return map[string]string{config.EnvOutputChannelID: h.channel.String()}
	}
	first = startGateway(t, harnessOptions{clock: clock, files: heartbeat, setup: out,
		env: clusterEnv(srv.ClientURL(), config.EnvMaxConcurrent, "0")})
	second := startGateway(t, harnessOptions{fd: first.fd, clock: clock, files: heartbeat, setup: out,
		env: clusterEnv(srv.ClientURL(), config.EnvMaxConcurrent, "0")})
	w := &recording{name: "w"}
	startGateway(t, harnessOptions{fd: first.fd, worker: true, respond: w.respond, env: clusterEnv(srv.ClientURL())})

	checks := func() int {
		n := 0
		for _, m := range first.fd.BotMessages(first.channel) {
			if strings.Contains(m.Content, "Check the inbox.") {
				n++
			}
		}
		return n
	}
	advance(t, clock, 1, 60*time.Second)
	first.fd.Wait(t, "the heartbeat answered", waitLong, func() bool { return checks() == 1 })
	js := jetStream(t, srv)
	first.fd.Wait(t, "the heartbeat's event finished", waitLong, func() bool {
		st, err := js.Stream(context.Background(), "GATEWAY_EVENTS")
		if err != nil {
			return false
		}
		info, err := st.Info(context.Background())
		return err == nil && info.State.Msgs == 0
	})
	advance(t, clock, 1, 60*time.Second)
	first.fd.Wait(t, "the heartbeat answered again", waitLong, func() bool { return checks() == 2 })
	// The lease holder fires every run; the other node fires none.
	a := strings.Count(first.logs.String(), "scheduled event enqueued")
	b := strings.Count(second.logs.String(), "scheduled event enqueued")
	if min(a, b) != 0 || a+b != 2 {
		t.Errorf("the run nodes fired the schedule %d and %d times: one node must fire it, every time", a, b)
	}

	first.mention(first.channel, "once please")
	first.fd.Wait(t, "the answer", waitLong, func() bool {
		for _, m := range first.fd.BotMessages(first.channel) {
			if strings.Contains(m.Content, "once please") {
				return true
			}
		}
		return false
	})
	second.fd.Wait(t, "the other run node to see the mention", waitLong, func() bool {
		return strings.Contains(second.logs.String(), "prompt accepted") || strings.Contains(second.logs.String(), "duplicate")
	})
	n := 0
	for _, m := range first.fd.BotMessages(first.channel) {
		if strings.Contains(m.Content, "once please") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the mention both run nodes received was answered %d times", n)
	}
}

// /status on the run node says which process runs the channel's turn and
// lists the gateway's processes.
func TestStatusNamesTheProcessRunningTheTurn(t *testing.T) {
	srv := runNATS(t)
	run := startGateway(t, harnessOptions{respond: answeredBy("run"),
		env: clusterEnv(srv.ClientURL(), config.EnvMaxConcurrent, "0")})
	startGateway(t, harnessOptions{fd: run.fd, worker: true, respond: answeredBy("worker"), env: clusterEnv(srv.ClientURL())})
	run.mention(run.channel, "hang on")
	run.mention(run.channel, "and this")
	var got string
	run.fd.Wait(t, "/status to show the running turn", waitLong, func() bool {
		got = run.answer(run.fd.Interact(run.channel, run.user, "status", nil))
		return strings.Contains(got, "Running: a turn for")
	})
	for _, want := range []string{"on `", "waiting: 1", "(takes prompts)", "(worker, 1 of 5 busy)"} {
		if !strings.Contains(got, want) {
			t.Errorf("/status lacks %q:\n%s", want, got)
		}
	}
}

// A process whose event another one took over (it was cut off from NATS
// past the ack wait) learns so when it records the reply, and the Discord
// side then posts nothing: the other process answers.
func TestAReplyOfAnEventTakenOverIsRefused(t *testing.T) {
	srv := runNATS(t)
	env := clusterEnv(srv.ClientURL())
	a := openTestInbox(t, t.TempDir(), env)
	defer a.Close()
	b := openTestInbox(t, t.TempDir(), env)
	defer b.Close()
	e, err := a.(*natsInbox).Assign(queue.Event{Kind: queue.KindMessage, ChannelID: "123", Text: "hi", Key: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Started(e.ID); err != nil {
		t.Fatal(err)
	}
	if err := b.Started(e.ID); err != nil { // the takeover
		t.Fatal(err)
	}
	d := newDurable(a, zerolog.New(zerolog.NewTestWriter(t)))
	if err := d.Replied(e.ID, "late answer", nil); !errors.Is(err, gwdiscord.ErrTakenOver) {
		t.Fatalf("Replied after a takeover = %v, want ErrTakenOver", err)
	}
	if err := newDurable(b, zerolog.New(zerolog.NewTestWriter(t))).Replied(e.ID, "the answer", nil); err != nil {
		t.Fatalf("the new holder's Replied = %v", err)
	}
}
