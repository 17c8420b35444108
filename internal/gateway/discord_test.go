package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/admin"
	"github.com/agentgateway/gateway/internal/config"
	gwdiscord "github.com/agentgateway/gateway/internal/discord"
	"github.com/agentgateway/gateway/internal/fakediscord"
	"github.com/agentgateway/gateway/internal/session"
)

const waitLong = 20 * time.Second

// harness runs the whole gateway (Run) against the fake Discord and a
// fake backend.
type harness struct {
	t       *testing.T
	fd      *fakediscord.Server
	backend *backends.Fake
	cfg     *config.Config
	guild   discord.GuildID
	channel discord.ChannelID
	user    discord.User
	cancel  context.CancelFunc
	done    chan error
	logs    *syncBuffer
}

type harnessOptions struct {
	env     map[string]string
	respond func(ctx context.Context, req backends.Request, emit func(backends.Event)) (backends.Result, error)
	// setup runs against the fake before the gateway connects; it may
	// return more environment.
	setup func(h *harness) map[string]string
	token string
	// files are written into CONFIG_DIR before the start.
	files map[string]string
	clock clockwork.Clock
	// webhookAddr receives the webhook listener's address.
	webhookAddr chan string
	// fd and configDir, if set, are reused (a restart).
	fd        *fakediscord.Server
	configDir string
	// signals, if set, stands for SIGINT and SIGTERM during the drain.
	signals chan os.Signal
	// backend, if set, replaces the in-process fake (e.g. a real adapter
	// driving a scripted CLI).
	backend backends.Backend
	// cardDelay and cardEvery, if set, replace the turn card's timings.
	cardDelay, cardEvery time.Duration
	// admin, if set, is told the admin server's address and hub
	// (ADMIN_ADDR set in env).
	admin func(addr string, hub *admin.Hub)
	// worker starts a `gateway worker` (with fd set to the run node's
	// fake Discord).
	worker bool
}

func startGateway(t *testing.T, o harnessOptions) *harness {
	t.Helper()
	fd := o.fd
	h := &harness{t: t, fd: fd, backend: &backends.Fake{Respond: o.respond}, logs: &syncBuffer{}}
	if fd == nil {
		fd = fakediscord.Start(t)
		h.fd = fd
		h.guild, h.channel = fd.AddGuild("test")
		h.user = fd.User("alice")
	}
	if o.setup != nil {
		for k, v := range o.setup(h) {
			o.env = withEnv(o.env, k, v)
		}
	}
	token := o.token
	if token == "" {
		token = fakediscord.DefaultToken
	}
	configDir := o.configDir
	if configDir == "" {
		configDir = t.TempDir()
	}
	for name, content := range o.files {
		if err := os.WriteFile(filepath.Join(configDir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	env := map[string]string{
		config.EnvDiscordToken:      token,
		config.EnvDiscordAPIBaseURL: fd.APIBaseURL(),
		config.EnvDiscordGatewayURL: fd.GatewayURL(),
		config.EnvConfigDir:         configDir,
		config.EnvPermissionMode:    "default",
		config.EnvQueryTimeoutMS:    "10000",
		// Tests of the card turn it on; the others look at replies only.
		config.EnvTurnCard: config.TurnCardOff,
		// The scripted backends keep no sessions, so every turn would be
		// a new session given the recent conversation: the tests of the
		// archive turn it on; the others compare prompts as sent.
		config.EnvHistoryMessages: "0",
		// Tests of threads turn them on; the others look for answers in
		// the channel they posted in.
		config.EnvThreads: config.ThreadsOff,
	}
	for k, v := range o.env {
		env[k] = v
	}
	// GATEWAY_E2E_WORKER=1 runs a test's gateway as a gateway run that
	// only takes prompts and a gateway worker on a CONFIG_DIR of its own
	// that runs every turn, on a real NATS server: the same acceptance
	// checks must pass (make test-worker runs the ones that apply).
	spread := os.Getenv("GATEWAY_E2E_WORKER") == "1" && !o.worker && env[config.EnvNATSURL] == ""
	if spread {
		env[config.EnvNATSURL] = runNATS(t).ClientURL()
		env[config.EnvNATSPartitions] = "8"
		env[config.EnvNATSAckWait] = "3s"
		env[config.EnvMaxConcurrent] = "0"
	}
	var environ []string
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	cfg, err := config.Load(config.LoadOptions{Environ: environ, Require: config.RequireDiscord})
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	h.cfg = cfg
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	h.done = make(chan error, 1)
	ready := make(chan struct{})
	log := zerolog.New(h.logs)
	go func() {
		var backend backends.Backend = h.backend
		if o.backend != nil {
			backend = o.backend
		}
		h.done <- Run(ctx, cfg, Options{
			Backend: backend,
			Discord: gwdiscord.Options{
				FastReconnect:   true,
				TypingInterval:  50 * time.Millisecond,
				DeliveryBackoff: 10 * time.Millisecond,
				CardDelay:       o.cardDelay,
				CardEvery:       o.cardEvery,
			},
			ConnectTimeout:  waitLong,
			ShutdownTimeout: waitLong,
			Ready:           func() { close(ready) },
			Clock:           o.clock,
			Signals:         o.signals,
			ReloadInterval:  20 * time.Millisecond,
			WebhookReady: func(addr string) {
				if o.webhookAddr != nil {
					o.webhookAddr <- addr
				}
			},
			AdminReady: o.admin,
			Worker:     o.worker,
		}, log)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-h.done:
		case <-time.After(waitLong):
			t.Error("gateway did not stop")
		}
	})
	select {
	case <-ready:
	case err := <-h.done:
		h.done <- err
		return h
	case <-time.After(waitLong):
		t.Fatal("gateway did not connect")
	}
	if spread {
		wo := o
		wo.fd, wo.worker, wo.configDir, wo.setup = h.fd, true, "", nil
		wo.webhookAddr, wo.admin, wo.signals = nil, nil, nil
		if wo.backend == nil {
			wo.backend = h.backend // the test reads the requests there
		}
		wo.env = map[string]string{}
		for k, v := range env {
			if k != config.EnvConfigDir && k != config.EnvMaxConcurrent && k != config.EnvWebhookAddr && k != config.EnvAdminAddr {
				wo.env[k] = v
			}
		}
		startGateway(t, wo)
	}
	return h
}

// stop shuts the gateway down as SIGTERM would and returns Run's error.
func (h *harness) stop() error {
	h.t.Helper()
	h.cancel()
	select {
	case err := <-h.done:
		h.done <- err
		return err
	case <-time.After(waitLong):
		h.t.Fatal("gateway did not stop")
		return nil
	}
}

// mention posts a message mentioning the bot.
func (h *harness) mention(ch discord.ChannelID, text string) discord.Message {
	return h.fd.Post(ch, h.user, fakediscord.Mention(h.fd.Bot)+" "+text, h.fd.Bot)
}

// waitReplies waits until the bot has posted n messages in ch.
func (h *harness) waitReplies(ch discord.ChannelID, n int) []fakediscord.Message {
	h.t.Helper()
	h.fd.Wait(h.t, fmt.Sprintf("%d bot messages", n), waitLong, func() bool { return len(h.fd.BotMessages(ch)) >= n })
	return h.fd.BotMessages(ch)
}

// waitingMark is the ⏳ reaction's part of a reactions path (the fake
// records paths decoded).
const waitingMark = "⏳"

func (h *harness) requests(method, prefix string) []fakediscord.Request {
	var out []fakediscord.Request
	for _, r := range h.fd.Requests() {
		if r.Method == method && strings.HasPrefix(r.Path, prefix) {
			out = append(out, r)
		}
	}
	return out
}

// settle waits until the gateway's queue is idle and the backend has seen n
// requests, so that "nothing else happens" can be asserted.
func (h *harness) backendCalls(n int) {
	h.t.Helper()
	h.fd.Wait(h.t, fmt.Sprintf("%d backend calls", n), waitLong, func() bool { return len(h.backend.Requests()) >= n })
}

func withEnv(env map[string]string, k, v string) map[string]string {
	if env == nil {
		env = map[string]string{}
	}
	env[k] = v
	return env
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestMentionGetsTypingAndReply(t *testing.T) {
	release := make(chan struct{})
	h := startGateway(t, harnessOptions{respond: func(ctx context.Context, req backends.Request, emit func(backends.Event)) (backends.Result, error) {
		<-release
		return backends.Result{SessionID: "s1", Text: "hello " + req.Prompt}, nil
	}})
	if !strings.Contains(h.logs.String(), `"user":"gatewaybot"`) || !strings.Contains(h.logs.String(), `"guilds":1`) {
		t.Errorf("READY log lacks the bot's name and guild count:\n%s", h.logs.String())
	}
	prompt := h.mention(h.channel, "what is  <#"+h.channel.String()+">?")
	typingPath := "/channels/" + h.channel.String() + "/typing"
	// The indicator is renewed while the run lasts (interval 50 ms here).
	h.fd.Wait(t, "typing renewed", waitLong, func() bool { return len(h.requests("POST", typingPath)) >= 3 })
	close(release)

	msgs := h.waitReplies(h.channel, 1)
	if got, want := msgs[0].Content, "hello what is  #general?"; got != want {
		t.Errorf("reply = %q, want %q", got, want)
	}
	if msgs[0].Reference == nil || msgs[0].Reference.MessageID != prompt.ID {
		t.Errorf("reply does not reference the prompt: %+v", msgs[0].Reference)
	}
	var am struct {
		Parse []string `json:"parse"`
	}
	if err := json.Unmarshal(msgs[0].AllowedMentions, &am); err != nil || am.Parse == nil || len(am.Parse) != 0 {
		t.Errorf("allowed_mentions = %s, want parse: []", msgs[0].AllowedMentions)
	}
	req := h.backend.Requests()[0]
	if req.Prompt != "what is  #general?" {
		t.Errorf("backend prompt = %q", req.Prompt)
	}
	// Intents: guild messages, DMs, message content, reactions.
	var identify struct {
		Intents uint64 `json:"intents"`
	}
	for _, f := range h.fd.Frames() {
		if f.FromBot && f.Op == 2 {
			json.Unmarshal(f.Data, &identify)
		}
	}
	if uint64(gwdiscord.Intents)&identify.Intents != uint64(gwdiscord.Intents) {
		t.Errorf("IDENTIFY intents = %b, want %b", identify.Intents, gwdiscord.Intents)
	}
	if err := h.stop(); err != nil {
		t.Errorf("Run = %v, want nil", err)
	}
}

func TestSlashCommands(t *testing.T) {
	h := startGateway(t, harnessOptions{})
	h.fd.Wait(t, "commands registered", waitLong, func() bool { return h.fd.Commands() != nil })
	var cmds []struct {
		Name    string `json:"name"`
		Options []struct {
			Name     string `json:"name"`
			Required bool   `json:"required"`
		} `json:"options"`
	}
	json.Unmarshal(h.fd.Commands(), &cmds)
	var names []string
	for _, c := range cmds {
		names = append(names, c.Name)
	}
	if strings.Join(names, " ") != "claude claude-reset claude-stop project model resume system-prompt status cost compact plan" ||
		len(cmds[0].Options) != 2 || cmds[0].Options[0].Name != "prompt" || !cmds[0].Options[0].Required ||
		cmds[0].Options[1].Name != "file" || cmds[0].Options[1].Required ||
		len(cmds[2].Options) != 1 || cmds[2].Options[0].Name != "all" || cmds[2].Options[0].Required {
		t.Fatalf("registered commands = %s", h.fd.Commands())
	}

	id := h.fd.Interact(h.channel, h.user, "claude", map[string]string{"prompt": "  exactly this <@1> "})
	h.fd.Wait(t, "slash answer", waitLong, func() bool {
		for _, a := range h.fd.Answers() {
			if a.Interaction == id && a.Edited {
				return true
			}
		}
		return false
	})
	if got := h.fd.Callbacks(id); len(got) != 1 || got[0] != 5 {
		t.Errorf("callbacks = %v, want one deferral (5)", got)
	}
	if got := h.backend.Requests()[0].Prompt; got != "  exactly this <@1> " {
		t.Errorf("prompt = %q, want the option value exactly", got)
	}
	for _, a := range h.fd.Answers() {
		if a.Interaction == id && a.Content != "echo:   exactly this <@1> " {
			t.Errorf("answer = %q", a.Content)
		}
	}
	if _, ok := h.sessionBinding(); !ok {
		t.Fatal("no session binding after /claude")
	}

	reset := h.fd.Interact(h.channel, h.user, "claude-reset", nil)
	h.fd.Wait(t, "reset answer", waitLong, func() bool { return len(h.fd.Callbacks(reset)) == 1 })
	if _, ok := h.sessionBinding(); ok {
		t.Error("binding still present after /claude-reset")
	}
	for _, a := range h.fd.Answers() {
		if a.Interaction == reset && !strings.Contains(a.Content, "new conversation") {
			t.Errorf("reset answer = %q", a.Content)
		}
	}
	// The next prompt starts a fresh session.
	h.mention(h.channel, "again")
	h.waitReplies(h.channel, 1)
	if got := h.backend.Requests()[1].SessionID; got != "" {
		t.Errorf("prompt after reset resumed %q", got)
	}
}

func (h *harness) sessionBinding() (string, bool) {
	store, _, err := session.Open(filepath.Join(h.cfg.ConfigDir, session.FileName))
	if err != nil {
		h.t.Fatal(err)
	}
	b, ok := store.Get(h.channel.String())
	return b.SessionID, ok
}

func TestLongReplyIsSplitIntoWellFormedChunks(t *testing.T) {
	code := strings.Repeat("fmt.Println(\"line\")\n", 150) // ~3,000 chars
	long := "Here is the program:\n```go\n" + code + "```\nAnd some prose after it. " + strings.Repeat("word ", 350)
	if n := utf8.RuneCountInString(long); n < 4500 {
		t.Fatalf("test reply is %d characters", n)
	}
	h := startGateway(t, harnessOptions{respond: func(ctx context.Context, req backends.Request, emit func(backends.Event)) (backends.Result, error) {
		return backends.Result{SessionID: "s", Text: long}, nil
	}})
	h.mention(h.channel, "show me")
	h.fd.Wait(t, "all chunks", waitLong, func() bool {
		var b strings.Builder
		for _, m := range h.fd.BotMessages(h.channel) {
			b.WriteString(m.Content)
		}
		return strings.Contains(b.String(), "word word")
	})
	msgs := h.fd.BotMessages(h.channel)
	if len(msgs) < 3 {
		t.Fatalf("%d chunks, want at least 3", len(msgs))
	}
	for i, m := range msgs {
		if n := utf8.RuneCountInString(m.Content); n > 2000 {
			t.Errorf("chunk %d has %d characters", i, n)
		}
		if strings.Count(m.Content, "```")%2 != 0 {
			t.Errorf("chunk %d has an unbalanced code fence:\n%s", i, m.Content)
		}
		if (m.Reference != nil) != (i == 0) {
			t.Errorf("chunk %d reference = %v; only the first replies to the prompt", i, m.Reference)
		}
	}
}

func TestBotsAreIgnored(t *testing.T) {
	h := startGateway(t, harnessOptions{})
	other := h.fd.BotUser("otherbot")
	h.fd.Post(h.channel, other, fakediscord.Mention(h.fd.Bot)+" loop?", h.fd.Bot)
	h.fd.Post(h.channel, h.fd.Bot, fakediscord.Mention(h.fd.Bot)+" me?", h.fd.Bot)
	// A human prompt afterwards is answered, and is the only one.
	h.mention(h.channel, "human")
	// The bot's own message above counts as one of its messages.
	msgs := h.waitReplies(h.channel, 2)
	if got := h.backend.Requests(); len(got) != 1 || got[0].Prompt != "human" {
		t.Errorf("backend requests = %+v, want only the human's", got)
	}
	if len(msgs) != 2 || msgs[1].Content != "echo: human" {
		t.Errorf("bot messages = %+v", msgs)
	}
}

func TestDirectMessagesNeedNoMention(t *testing.T) {
	h := startGateway(t, harnessOptions{})
	dm := h.fd.AddChannel(fakediscord.Channel{})
	h.fd.Post(dm, h.user, "hi there")
	msgs := h.waitReplies(dm, 1)
	if msgs[0].Content != "echo: hi there" {
		t.Errorf("reply = %q", msgs[0].Content)
	}
	// A guild message without a mention is not a prompt.
	h.fd.Post(h.channel, h.user, "just chatting")
	h.mention(h.channel, "now me")
	h.waitReplies(h.channel, 1)
	if n := len(h.backend.Requests()); n != 2 {
		t.Errorf("%d backend calls, want 2", n)
	}
}

func TestAllowlists(t *testing.T) {
	var other, thread, dm discord.ChannelID
	var bob discord.User
	h := startGateway(t, harnessOptions{setup: func(h *harness) map[string]string {
		other = h.fd.AddChannel(fakediscord.Channel{GuildID: h.guild, Type: discord.GuildText, Name: "other"})
		thread = h.fd.AddChannel(fakediscord.Channel{GuildID: h.guild, ParentID: h.channel, Type: discord.GuildPublicThread, Name: "t"})
		dm = h.fd.AddChannel(fakediscord.Channel{})
		bob = h.fd.User("bob")
		return map[string]string{
			config.EnvAllowedUserIDs:    h.user.ID.String(),
			config.EnvAllowedChannelIDs: h.channel.String(),
		}
	}})
	bot := fakediscord.Mention(h.fd.Bot)
	h.fd.Post(h.channel, bob, bot+" bob here", h.fd.Bot)
	h.fd.Post(other, h.user, bot+" wrong channel", h.fd.Bot)
	denied := h.fd.Interact(h.channel, bob, "claude", map[string]string{"prompt": "let me in"})
	h.fd.Wait(t, "refusal", waitLong, func() bool { return len(h.fd.Callbacks(denied)) == 1 })
	for _, a := range h.fd.Answers() {
		if a.Interaction == denied && (!a.Ephemeral || !strings.Contains(a.Content, "not allowed")) {
			t.Errorf("refusal = %+v, want an ephemeral notice", a)
		}
	}
	// A thread inherits its parent's place; DMs follow the user allowlist.
	h.fd.Post(thread, h.user, bot+" in thread", h.fd.Bot)
	h.waitReplies(thread, 1)
	h.fd.Post(dm, h.user, "in dm")
	h.waitReplies(dm, 1)
	h.fd.Post(h.channel, h.user, bot+" last", h.fd.Bot)
	h.waitReplies(h.channel, 1)
	var prompts []string
	for _, r := range h.backend.Requests() {
		prompts = append(prompts, r.Prompt)
	}
	if strings.Join(prompts, "|") != "in thread|in dm|last" {
		t.Errorf("prompts run = %q; bob and the other channel must be refused", prompts)
	}
	if len(h.fd.BotMessages(other)) != 0 {
		t.Error("the bot answered in a channel outside the allowlist")
	}
}

func TestRateLimitWithFractionalRetryAfterPostsOnce(t *testing.T) {
	h := startGateway(t, harnessOptions{})
	path := "/channels/" + h.channel.String() + "/messages"
	h.fd.Fail(fakediscord.Fault{Method: "POST", Path: path, Status: 429, RetryAfter: "0.05", Times: 2})
	h.mention(h.channel, "hi")
	h.waitReplies(h.channel, 1)
	// Let any duplicate retries land before counting.
	h.fd.Wait(t, "three send attempts", waitLong, func() bool { return len(h.requests("POST", path)) >= 3 })
	stopErr := h.stop()
	if n := len(h.fd.BotMessages(h.channel)); n != 1 {
		t.Errorf("%d messages posted, want exactly 1", n)
	}
	attempts := h.requests("POST", path)
	if len(attempts) != 3 {
		t.Errorf("%d send attempts, want 3 (two 429s, one success)", len(attempts))
	}
	if gap := attempts[1].Time.Sub(attempts[0].Time); gap < 40*time.Millisecond {
		t.Errorf("retried after %v, before Retry-After 0.05 s", gap)
	}
	if stopErr != nil {
		t.Error(stopErr)
	}
}

func TestServerErrorAfterPostingDoesNotDuplicate(t *testing.T) {
	h := startGateway(t, harnessOptions{})
	path := "/channels/" + h.channel.String() + "/messages"
	// Discord (or a proxy) posts the message but answers 502 twice.
	h.fd.Fail(fakediscord.Fault{Method: "POST", Path: path, Status: 502, Times: 2, Apply: true})
	h.mention(h.channel, "hi")
	h.fd.Wait(t, "retries", waitLong, func() bool { return len(h.requests("POST", path)) >= 3 })
	h.stop()
	msgs := h.fd.BotMessages(h.channel)
	if len(msgs) != 1 || msgs[0].Content != "echo: hi" {
		t.Errorf("messages = %+v, want exactly one echo", msgs)
	}
}

// A reply Discord keeps refusing is logged as pending, with the channel and
// its length and nothing secret, while it is retried.
func TestPendingReplyIsLoggedWithoutSecrets(t *testing.T) {
	h := startGateway(t, harnessOptions{})
	path := "/channels/" + h.channel.String() + "/messages"
	h.fd.Fail(fakediscord.Fault{Method: "POST", Path: path, Status: 503, Times: 100})
	t.Cleanup(h.fd.ClearFaults)
	h.mention(h.channel, "into the void")
	h.fd.Wait(t, "the failure logged", waitLong, func() bool { return strings.Contains(h.logs.String(), "reply not delivered yet") })
	logs := h.logs.String()
	if !strings.Contains(logs, `"channel":"`+h.channel.String()+`"`) || !strings.Contains(logs, `"length":`) {
		t.Errorf("the failure log lacks the channel id or length:\n%s", logs)
	}
	if strings.Contains(logs, fakediscord.DefaultToken) {
		t.Error("the bot token reached the log")
	}
}

func TestResumeAfterDropLosesNothing(t *testing.T) {
	h := startGateway(t, harnessOptions{})
	h.mention(h.channel, "one")
	h.waitReplies(h.channel, 1)

	h.fd.Offline()
	h.fd.Disconnect(1006, true)
	h.mention(h.channel, "two") // sent while the bot is away
	h.fd.Online()

	msgs := h.waitReplies(h.channel, 2)
	_, resumes, _ := h.fd.Counts()
	if resumes != 1 {
		t.Errorf("%d resumes, want 1", resumes)
	}
	if msgs[1].Content != "echo: two" {
		t.Errorf("second reply = %q", msgs[1].Content)
	}
	h.mention(h.channel, "three")
	h.waitReplies(h.channel, 3)
	if n := len(h.backend.Requests()); n != 3 {
		t.Errorf("%d runs, want 3", n)
	}
}

func TestNewSessionCatchesUpMissedMentionsOnce(t *testing.T) {
	h := startGateway(t, harnessOptions{})
	h.mention(h.channel, "before")
	h.waitReplies(h.channel, 1)

	h.fd.Offline()
	h.fd.Disconnect(1006, false) // the session cannot be resumed
	h.fd.Post(h.channel, h.user, "no mention, not a prompt")
	h.mention(h.channel, "missed one")
	h.mention(h.channel, "missed two")
	h.fd.Online()

	h.waitReplies(h.channel, 3)
	identifies, _, _ := h.fd.Counts()
	if identifies != 2 {
		t.Errorf("%d IDENTIFYs, want 2", identifies)
	}
	h.mention(h.channel, "after")
	msgs := h.waitReplies(h.channel, 4)
	var got []string
	for _, m := range msgs {
		got = append(got, m.Content)
	}
	want := "echo: before|echo: missed one|echo: missed two|echo: after"
	if strings.Join(got, "|") != want {
		t.Errorf("replies = %q, want %q (each once, in order)", got, want)
	}
}

func TestBadTokenExitsWithAdvice(t *testing.T) {
	h := startGateway(t, harnessOptions{token: "wrong-token"})
	var err error
	select {
	case err = <-h.done:
		h.done <- err
	case <-time.After(waitLong):
		t.Fatal("Run did not fail")
	}
	var fatal *gwdiscord.FatalError
	if !errors.As(err, &fatal) || fatal.Code != 4004 {
		t.Fatalf("Run = %v, want a FatalError 4004", err)
	}
	if !strings.Contains(err.Error(), "DISCORD_BOT_TOKEN") || strings.Contains(err.Error(), "wrong-token") {
		t.Errorf("error = %q; want advice naming DISCORD_BOT_TOKEN and no token", err)
	}
}

// A prompt that arrives during the shutdown is kept in the inbox: its
// user is told once, and the next start answers it.
func TestShutdownDeliversInFlightReplyAndKeepsNewPrompts(t *testing.T) {
	eachInbox(t, testShutdownDeliversInFlightReplyAndKeepsNewPrompts)
}

func testShutdownDeliversInFlightReplyAndKeepsNewPrompts(t *testing.T, env map[string]string) {
	started := make(chan struct{})
	release := make(chan struct{})
	h := startGateway(t, harnessOptions{env: env, respond: func(ctx context.Context, req backends.Request, emit func(backends.Event)) (backends.Result, error) {
		close(started)
		<-release
		return backends.Result{SessionID: "s", Text: "finished " + req.Prompt}, nil
	}})
	h.mention(h.channel, "long job")
	<-started
	h.cancel() // SIGTERM
	h.fd.Wait(t, "intake stopped", waitLong, func() bool { return strings.Contains(h.logs.String(), "shutting down") })
	late := h.mention(h.channel, "too late")
	h.fd.Wait(t, "shutdown notice", waitLong, func() bool {
		for _, m := range h.fd.BotMessages(h.channel) {
			if m.Reference != nil && m.Reference.MessageID == late.ID {
				return true
			}
		}
		return false
	})
	close(release)
	var err error
	select {
	case err = <-h.done:
		h.done <- err
	case <-time.After(waitLong):
		t.Fatal("gateway did not stop")
	}
	if err != nil {
		t.Errorf("Run = %v, want nil (exit 0)", err)
	}
	var got []string
	for _, m := range h.fd.BotMessages(h.channel) {
		got = append(got, m.Content)
	}
	if len(got) != 2 || got[0] != gwdiscord.RestartingNotice || got[1] != "finished long job" {
		t.Errorf("messages = %q, want one restart notice and the finished reply", got)
	}
	if n := len(h.backend.Requests()); n != 1 {
		t.Errorf("%d runs, want 1", n)
	}
	next := startGateway(t, harnessOptions{env: env, fd: h.fd, configDir: h.cfg.ConfigDir})
	next.fd.Wait(t, "the kept prompt answered", waitLong, func() bool {
		for _, m := range next.fd.BotMessages(h.channel) {
			if m.Content == "echo: too late" && m.Reference != nil && m.Reference.MessageID == late.ID {
				return true
			}
		}
		return false
	})
	checkNoInboxFile(t, env, h.cfg.ConfigDir)
}

func TestQueuedPromptIsMarkedAndBusyQueueRefuses(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	h := startGateway(t, harnessOptions{
		env: map[string]string{config.EnvMaxQueueDepth: "1"},
		respond: func(ctx context.Context, req backends.Request, emit func(backends.Event)) (backends.Result, error) {
			if req.Prompt == "first" {
				<-release
			}
			return backends.Result{SessionID: "s", Text: "done " + req.Prompt}, nil
		},
	})
	h.mention(h.channel, "first")
	h.backendCalls(1)
	second := h.mention(h.channel, "second")
	reactPath := "/channels/" + h.channel.String() + "/messages/" + second.ID.String() + "/reactions/"
	h.fd.Wait(t, "waiting mark", waitLong, func() bool { return len(h.requests("PUT", reactPath+waitingMark)) == 1 })
	third := h.mention(h.channel, "third")
	h.fd.Wait(t, "busy notice", waitLong, func() bool {
		for _, m := range h.fd.BotMessages(h.channel) {
			if m.Reference != nil && m.Reference.MessageID == third.ID && strings.Contains(m.Content, "busy") {
				return true
			}
		}
		return false
	})
	once.Do(func() { close(release) })
	h.waitReplies(h.channel, 3)
	h.fd.Wait(t, "mark removed", waitLong, func() bool { return len(h.requests("DELETE", reactPath+waitingMark)) == 1 })
	if n := len(h.backend.Requests()); n != 2 {
		t.Errorf("%d runs, want 2 (the third was refused)", n)
	}
}

func TestIntakeKeepsChannelOrder(t *testing.T) {
	h := startGateway(t, harnessOptions{env: map[string]string{config.EnvMaxChannelQueue: "100"}})
	const n = 25
	for i := range n {
		h.mention(h.channel, fmt.Sprintf("prompt %02d", i))
	}
	h.waitReplies(h.channel, n)
	for i, r := range h.backend.Requests() {
		if want := fmt.Sprintf("prompt %02d", i); r.Prompt != want {
			t.Fatalf("run %d had prompt %q, want %q", i, r.Prompt, want)
		}
	}
	for i, m := range h.fd.BotMessages(h.channel) {
		if want := fmt.Sprintf("echo: prompt %02d", i); m.Content != want {
			t.Fatalf("reply %d = %q, want %q", i, m.Content, want)
		}
	}
}

func TestStopCommandKillsTheRunAndDropsWaitingPrompts(t *testing.T) {
	started := make(chan string, 10)
	h := startGateway(t, harnessOptions{respond: func(ctx context.Context, req backends.Request, emit func(backends.Event)) (backends.Result, error) {
		started <- req.Prompt
		if req.Prompt == "forever" {
			<-ctx.Done()
			return backends.Result{}, &backends.Error{Kind: backends.KindCanceled, Err: ctx.Err()}
		}
		return backends.Result{SessionID: "s", Text: "done " + req.Prompt}, nil
	}})
	h.mention(h.channel, "forever")
	if p := <-started; p != "forever" {
		t.Fatalf("first run = %q", p)
	}
	queued := h.mention(h.channel, "queued")
	reactPath := "/channels/" + h.channel.String() + "/messages/" + queued.ID.String() + "/reactions/"
	h.fd.Wait(t, "waiting mark", waitLong, func() bool { return len(h.requests("PUT", reactPath+waitingMark)) == 1 })

	stop := h.fd.InteractOptions(h.channel, h.user, "claude-stop", fakediscord.Option{Name: "all", Type: 5, Value: true})
	if got := h.answer(stop); got != "Stopped the prompt that was running; nothing of it is still running. Dropped 1 waiting prompt." {
		t.Errorf("stop answer = %q", got)
	}
	h.fd.Wait(t, "mark removed", waitLong, func() bool { return len(h.requests("DELETE", reactPath+waitingMark)) == 1 })
	h.fd.Wait(t, "the run to end", waitLong, func() bool { return strings.Contains(h.logs.String(), "stopped on request") })

	// The dropped prompt's author is told; the channel works again, and
	// the stopped run posted nothing.
	h.mention(h.channel, "next")
	msgs := h.waitReplies(h.channel, 2)
	if len(msgs) != 2 || !strings.HasPrefix(msgs[0].Content, "Not answered: the work in this channel was stopped") ||
		msgs[0].Reference == nil || msgs[0].Reference.MessageID != queued.ID || msgs[1].Content != "done next" {
		t.Errorf("messages = %+v, want the drop notice on the queued prompt, then the next prompt's reply", msgs)
	}
	if got := prompts(h.backend); strings.Join(got, "|") != "forever|next" {
		t.Errorf("runs = %q; the dropped prompt must not run", got)
	}
}

func TestRestartAnswersPromptsSentWhileDown(t *testing.T) {
	eachInbox(t, testRestartAnswersPromptsSentWhileDown)
}

func testRestartAnswersPromptsSentWhileDown(t *testing.T, env map[string]string) {
	first := startGateway(t, harnessOptions{env: env})
	first.mention(first.channel, "before")
	first.waitReplies(first.channel, 1)
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	// While the gateway is down.
	first.mention(first.channel, "while down")
	first.fd.Post(first.channel, first.user, "chatter, not a prompt")

	second := startGateway(t, harnessOptions{env: env, fd: first.fd, configDir: first.cfg.ConfigDir})
	second.guild, second.channel, second.user = first.guild, first.channel, first.user
	defer checkNoInboxFile(t, env, first.cfg.ConfigDir)
	msgs := second.waitReplies(second.channel, 2)
	second.mention(second.channel, "after")
	msgs = second.waitReplies(second.channel, 3)
	var got []string
	for _, m := range msgs {
		got = append(got, m.Content)
	}
	if want := "echo: before|echo: while down|echo: after"; strings.Join(got, "|") != want {
		t.Errorf("replies = %q, want %q", got, want)
	}
	if got := prompts(second.backend); strings.Join(got, "|") != "while down|after" {
		t.Errorf("second gateway ran %q; the prompt answered before the restart must not run again", got)
	}
}

func TestStopAnswersARunningSlashCommand(t *testing.T) {
	started := make(chan struct{}, 1)
	h := startGateway(t, harnessOptions{respond: func(ctx context.Context, req backends.Request, emit func(backends.Event)) (backends.Result, error) {
		started <- struct{}{}
		<-ctx.Done()
		return backends.Result{}, &backends.Error{Kind: backends.KindCanceled, Err: ctx.Err()}
	}})
	slash := h.fd.Interact(h.channel, h.user, "claude", map[string]string{"prompt": "forever"})
	<-started
	h.fd.Wait(t, "the deferral", waitLong, func() bool { return len(h.fd.Callbacks(slash)) == 1 })
	stop := h.fd.Interact(h.channel, h.user, "claude-stop", nil)
	h.fd.Wait(t, "the stopped slash command answered", waitLong, func() bool {
		for _, a := range h.fd.Answers() {
			if a.Interaction == slash && a.Edited {
				return true
			}
		}
		return false
	})
	for _, a := range h.fd.Answers() {
		switch a.Interaction {
		case slash:
			if a.Content != "Stopped before it answered." {
				t.Errorf("stopped slash answer = %q", a.Content)
			}
		}
	}
	if got := h.answer(stop); got != "Stopped the prompt that was running; nothing of it is still running." {
		t.Errorf("stop answer = %q", got)
	}
}

// answer waits for an interaction's response to have content (a deferred
// one is edited) and returns it.
func (h *harness) answer(interaction string) string {
	h.t.Helper()
	var content string
	h.fd.Wait(h.t, "the answer to interaction "+interaction, waitLong, func() bool {
		for _, a := range h.fd.Answers() {
			if a.Interaction == interaction && a.Original && a.Content != "" {
				content = a.Content
				return true
			}
		}
		return false
	})
	return content
}
