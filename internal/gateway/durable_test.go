package gateway

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/google/go-cmp/cmp"

	"github.com/agentgateway/gateway/internal/config"
	gwdiscord "github.com/agentgateway/gateway/internal/discord"
	"github.com/agentgateway/gateway/internal/fakediscord"
	"github.com/agentgateway/gateway/internal/inbox"
	"github.com/agentgateway/gateway/internal/queue"
)

// leftBehind is a CONFIG_DIR whose inbox holds what a killed gateway left,
// with a fake Discord that has the prompts.
type leftBehind struct {
	t       *testing.T
	fd      *fakediscord.Server
	guild   discord.GuildID
	channel discord.ChannelID
	user    discord.User
	dir     string
	in      Inbox
	// env selects the inbox (NATS_URL) for every start.
	env map[string]string
}

func newLeftBehind(t *testing.T) *leftBehind { return newLeftBehindIn(t, nil) }

// newLeftBehindIn is newLeftBehind with the inbox env selects.
func newLeftBehindIn(t *testing.T, env map[string]string) *leftBehind {
	fd := fakediscord.Start(t)
	guild, channel := fd.AddGuild("test")
	l := &leftBehind{t: t, fd: fd, guild: guild, channel: channel, user: fd.User("alice"), dir: t.TempDir(), env: env}
	in := openTestInbox(t, l.dir, env)
	l.in = in
	// The channel is known: a restart catches up on it.
	before := fd.Post(channel, l.user, "chatter before the prompts")
	if err := in.See(inbox.Seen{Channel: channel.String(), Message: before.ID.String(), Guild: guild.String()}); err != nil {
		t.Fatal(err)
	}
	return l
}

// prompt posts a mention and records it in the inbox as the killed
// gateway had accepted it (without the newest-seen mark, so the restart's
// catch-up fetches it again).
func (l *leftBehind) prompt(text string) (discord.Message, queue.Event) {
	m := l.fd.Post(l.channel, l.user, fakediscord.Mention(l.fd.Bot)+" "+text, l.fd.Bot)
	e := queue.Event{
		ID: l.in.LastID() + 1, Time: time.Now(), Kind: queue.KindMessage, Source: gwdiscord.Source,
		ChannelID: l.channel.String(), Lane: l.channel.String(), Text: text, UserID: l.user.ID.String(),
		GuildID: l.guild.String(), ReplyTo: m.ID.String(), Key: gwdiscord.MessageKey(m.ID.String()),
	}
	if err := l.in.Add(e); err != nil {
		l.t.Fatal(err)
	}
	return m, e
}

func (l *leftBehind) do(err error) {
	l.t.Helper()
	if err != nil {
		l.t.Fatal(err)
	}
}

// start closes the inbox (the killed gateway is gone) and starts a new one.
func (l *leftBehind) start(o harnessOptions) *harness {
	l.in.Close()
	o.fd, o.configDir = l.fd, l.dir
	for k, v := range l.env {
		o.env = withEnv(o.env, k, v)
	}
	h := startGateway(l.t, o)
	h.guild, h.channel, h.user = l.guild, l.channel, l.user
	return h
}

// repliesTo returns the bot's messages answering message id.
func repliesTo(fd *fakediscord.Server, ch discord.ChannelID, id discord.MessageID) []fakediscord.Message {
	var out []fakediscord.Message
	for _, m := range fd.BotMessages(ch) {
		if m.Reference != nil && m.Reference.MessageID == id {
			out = append(out, m)
		}
	}
	return out
}

func TestRestartAnswersAcceptedPromptsOnceInOrder(t *testing.T) {
	eachInbox(t, testRestartAnswersAcceptedPromptsOnceInOrder)
}

func testRestartAnswersAcceptedPromptsOnceInOrder(t *testing.T, env map[string]string) {
	l := newLeftBehindIn(t, env)
	first, _ := l.prompt("first")
	second, e2 := l.prompt("second")
	l.do(l.in.Started(e2.ID)) // it was running, no tool yet: run again
	h := l.start(harnessOptions{})
	msgs := h.waitReplies(h.channel, 2)
	if msgs[0].Content != "echo: first" || msgs[1].Content != "echo: second" {
		t.Fatalf("replies = %q, %q", msgs[0].Content, msgs[1].Content)
	}
	h.stop()
	for _, m := range []discord.Message{first, second} {
		if n := len(repliesTo(h.fd, h.channel, m.ID)); n != 1 {
			t.Errorf("prompt %s answered %d times, want once (the catch-up fetched it again)", m.Content, n)
		}
	}
	in := openTestInbox(t, l.dir, env)
	defer in.Close()
	if u := in.Unfinished(); len(u) != 0 {
		t.Errorf("unfinished after the answers: %+v", u)
	}
	checkNoInboxFile(t, env, l.dir)
}

func TestRestartDeliversOnlyTheRestOfAReply(t *testing.T) {
	l := newLeftBehind(t)
	m, e := l.prompt("long")
	long := strings.Repeat("word ", 1000) // three messages
	l.do(l.in.Started(e.ID))
	l.do(l.in.Replied(e.ID, long))
	l.do(l.in.Delivered(e.ID, 0, "1"))
	h := l.start(harnessOptions{})
	h.fd.Wait(t, "the rest of the reply", waitLong, func() bool { return len(h.fd.BotMessages(h.channel)) >= 2 })
	h.stop()
	msgs := h.fd.BotMessages(h.channel)
	if len(msgs) != 2 {
		t.Fatalf("%d messages posted after the restart, want the 2 not delivered before", len(msgs))
	}
	if len(h.backend.Requests()) != 0 {
		t.Error("the turn ran again although its reply was recorded")
	}
	if got := strings.Join([]string{msgs[0].Content, msgs[1].Content}, ""); !strings.HasSuffix(strings.TrimSpace(long), strings.TrimSpace(got)) {
		t.Errorf("the messages posted are not the reply's end")
	}
	_ = m
}

func TestInterruptedAfterAToolOffersRetry(t *testing.T) {
	l := newLeftBehind(t)
	m, e := l.prompt("deploy it")
	l.do(l.in.Started(e.ID))
	l.do(l.in.ToolStarted(e.ID))
	h := l.start(harnessOptions{})
	var notice fakediscord.Message
	h.fd.Wait(t, "the interrupted notice", waitLong, func() bool {
		rs := repliesTo(h.fd, h.channel, m.ID)
		if len(rs) == 1 && len(rs[0].Buttons()) == 1 {
			notice = rs[0]
			return true
		}
		return false
	})
	if !strings.Contains(notice.Content, "Retry") || len(h.backend.Requests()) != 0 {
		t.Fatalf("notice %q, %d runs: want a Retry offer and no run", notice.Content, len(h.backend.Requests()))
	}
	retry := notice.Buttons()[0].ID

	// Someone else cannot retry it.
	h.fd.Press(h.channel, notice.ID, h.fd.User("mallory"), retry, 0)
	h.fd.Wait(t, "the refusal", waitLong, func() bool { return answered(h.fd, retryNotYours) })

	h.fd.Press(h.channel, notice.ID, h.user, retry, 0)
	h.fd.Wait(t, "the retried answer", waitLong, func() bool {
		for _, r := range repliesTo(h.fd, h.channel, m.ID) {
			if r.Content == "echo: deploy it" {
				return true
			}
		}
		return false
	})
	h.fd.Wait(t, "the notice to say it was retried", waitLong, func() bool {
		got, _ := h.fd.Message(h.channel, notice.ID)
		return len(got.Buttons()) == 0 && strings.Contains(got.Content, "Retried by")
	})
	h.stop()
	if n := len(h.backend.Requests()); n != 1 {
		t.Errorf("%d runs, want one (the retry)", n)
	}
}

func answered(fd *fakediscord.Server, text string) bool {
	for _, a := range fd.Answers() {
		if a.Ephemeral && a.Content == text {
			return true
		}
	}
	return false
}

func TestDeadLetterIsReportedOnce(t *testing.T) {
	l := newLeftBehind(t)
	m, e := l.prompt("crash me")
	for range maxAttempts {
		l.do(l.in.Started(e.ID))
	}
	h := l.start(harnessOptions{})
	h.fd.Wait(t, "the dead letter notice", waitLong, func() bool { return len(repliesTo(h.fd, h.channel, m.ID)) == 1 })
	h.stop()
	if got := repliesTo(h.fd, h.channel, m.ID)[0].Content; !strings.Contains(got, "not tried again") {
		t.Errorf("notice = %q", got)
	}
	if len(h.backend.Requests()) != 0 {
		t.Error("a dead letter ran again")
	}
	// A further restart does not tell again.
	again := startGateway(t, harnessOptions{fd: h.fd, configDir: l.dir})
	again.stop()
	if n := len(repliesTo(h.fd, h.channel, m.ID)); n != 1 {
		t.Errorf("%d notices after another restart, want 1", n)
	}
}

func TestWebhookDeliveryRetriedIsAcceptedOnce(t *testing.T) {
	eachInbox(t, testWebhookDeliveryRetriedIsAcceptedOnce)
}

func testWebhookDeliveryRetriedIsAcceptedOnce(t *testing.T, env map[string]string) {
	addr := make(chan string, 1)
	const secret = "webhook-secret-value"
	h := startGateway(t, harnessOptions{
		webhookAddr: addr,
		env:         env,
		setup: func(h *harness) map[string]string {
			return map[string]string{config.EnvWebhookAddr: "127.0.0.1:0", "WEBHOOK_ONCE_SECRET": secret}
		},
		files: map[string]string{"agents.md": "## Webhooks\n\n### once\nSecret-Env: WEBHOOK_ONCE_SECRET\nInstruction: {{payload}}\n"},
	})
	url := "http://" + <-addr + "/hooks/once"
	post := func() map[string]any {
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader([]byte(`{"n":1}`)))
		req.Header.Set("Authorization", "Bearer "+secret)
		req.Header.Set("X-Delivery-Id", "d-1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("status %d, want 202", resp.StatusCode)
		}
		var body map[string]any
		json.NewDecoder(resp.Body).Decode(&body)
		return body
	}
	if first := post(); first["duplicate"] != nil {
		t.Fatalf("first delivery = %v", first)
	}
	if again := post(); again["duplicate"] != true {
		t.Fatalf("the same delivery again = %v, want 202 with duplicate", again)
	}
	h.backendCalls(1)
	h.stop()
	if n := len(h.backend.Requests()); n != 1 {
		t.Errorf("%d runs for one delivery sent twice", n)
	}
}

// The first start after an upgrade takes the newest message seen per
// channel from the earlier version's discord-state.json.
func TestUpgradeImportsTheDiscordStateFile(t *testing.T) {
	fd := fakediscord.Start(t)
	guild, channel := fd.AddGuild("test")
	alice := fd.User("alice")
	seen := fd.Post(channel, alice, "seen by the earlier version")
	missed := fd.Post(channel, alice, fakediscord.Mention(fd.Bot)+" missed while upgrading", fd.Bot)
	dir := t.TempDir()
	state := `{"version":1,"channels":{"` + channel.String() + `":{"last":"` + seen.ID.String() + `","guild":"` + guild.String() + `"}}}`
	if err := os.WriteFile(filepath.Join(dir, gwdiscord.StateFile), []byte(state), 0o600); err != nil {
		t.Fatal(err)
	}
	h := startGateway(t, harnessOptions{fd: fd, configDir: dir})
	h.fd.Wait(t, "the missed prompt answered", waitLong, func() bool { return len(repliesTo(fd, channel, missed.ID)) == 1 })
	h.stop()
	if _, err := os.Stat(filepath.Join(dir, gwdiscord.StateFile)); !os.IsNotExist(err) {
		t.Errorf("the imported state file is still there: %v", err)
	}
}

// The catch-up after a restart runs beside the event loop: a slash
// command is acknowledged at once while it waits for Discord, and a live
// prompt in the channel being caught up is answered after the missed one.
func TestCatchUpDoesNotHoldSlashCommands(t *testing.T) {
	first := startGateway(t, harnessOptions{})
	first.mention(first.channel, "before")
	first.waitReplies(first.channel, 1)
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	first.mention(first.channel, "while down")
	// History is slow to come: Discord rate-limits the first fetch.
	first.fd.Fail(fakediscord.Fault{Method: "GET", Path: "/channels/" + first.channel.String() + "/messages", Status: 429, RetryAfter: "1.5"})

	second := startGateway(t, harnessOptions{fd: first.fd, configDir: first.cfg.ConfigDir})
	second.guild, second.channel, second.user = first.guild, first.channel, first.user
	live := second.mention(second.channel, "live")
	id := second.fd.Interact(second.channel, second.user, "claude", map[string]string{"prompt": "slash"})
	second.fd.Wait(t, "the slash command's acknowledgement", waitLong, func() bool { return len(second.fd.Callbacks(id)) > 0 })
	if strings.Contains(second.logs.String(), "caught up on messages") {
		t.Fatal("the slash command was acknowledged only after the catch-up")
	}
	second.fd.Wait(t, "the live prompt's answer", waitLong, func() bool { return len(repliesTo(second.fd, second.channel, live.ID)) == 1 })
	var order []string
	for _, m := range second.fd.BotMessages(second.channel) {
		if m.Content == "echo: while down" || m.Content == "echo: live" {
			order = append(order, m.Content)
		}
	}
	if strings.Join(order, "|") != "echo: while down|echo: live" {
		t.Errorf("answers = %q, want the missed prompt first", order)
	}
}

// A prompt posted while the gateway was down, in a channel the bot had
// never seen a message in, is answered after the restart, also while the
// catch-up of the known channels is still running.
func TestRestartAnswersPromptInANewChannel(t *testing.T) {
	first := startGateway(t, harnessOptions{})
	first.mention(first.channel, "before")
	first.waitReplies(first.channel, 1)
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	fresh := first.fd.AddChannel(fakediscord.Channel{GuildID: first.guild, Name: "fresh"})
	missed := first.fd.Post(fresh, first.user, fakediscord.Mention(first.fd.Bot)+" in a new channel", first.fd.Bot)
	// The known channel's catch-up is slow.
	first.fd.Fail(fakediscord.Fault{Method: "GET", Path: "/channels/" + first.channel.String() + "/messages", Status: 429, RetryAfter: "1"})

	second := startGateway(t, harnessOptions{fd: first.fd, configDir: first.cfg.ConfigDir})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs:\n%s", second.logs.String())
		}
	})
	second.fd.Wait(t, "the prompt in the new channel answered", waitLong, func() bool {
		return len(repliesTo(second.fd, fresh, missed.ID)) == 1
	})
}

// A turn card a killed gateway left saying "Working" is closed at the next
// start, and the turn interrupted after a tool is offered a Retry.
func TestRestartClosesTheCardAKilledGatewayLeft(t *testing.T) {
	l := newLeftBehind(t)
	m, e := l.prompt("deploy it")
	card := l.fd.Post(l.channel, l.fd.Bot, "⏳ **Working** · 12s\n⋯ `Bash` `make deploy`")
	l.do(l.in.Started(e.ID))
	l.do(l.in.ToolStarted(e.ID))
	l.do(l.in.Delivered(e.ID, gwdiscord.CardChunk, card.ID.String()))
	h := l.start(harnessOptions{})
	h.fd.Wait(t, "the card closed", waitLong, func() bool {
		got, _ := h.fd.Message(h.channel, card.ID)
		return got.Content == gwdiscord.StaleCardNotice
	})
	h.fd.Wait(t, "the Retry offer", waitLong, func() bool {
		rs := repliesTo(h.fd, h.channel, m.ID)
		return len(rs) == 1 && len(rs[0].Buttons()) == 1
	})
}

// An approval a killed gateway left open is closed as denied, a question
// or plan as not answered.
func TestPlanResumeClosesApprovalsAndQuestionsInTheirOwnWords(t *testing.T) {
	const approvalChunk, questionChunk = -1001, -1000 - 1<<30 - 1
	p := planResume([]inbox.Entry{{
		Event:     queue.Event{ID: 1, ChannelID: "10"},
		State:     inbox.Running,
		Delivered: map[int]string{approvalChunk: "20", questionChunk: "21"},
	}})
	got := map[string]string{}
	for _, a := range p.approvals {
		got[a.message] = a.notice
	}
	want := map[string]string{"20": gwdiscord.StaleApprovalNotice, "21": gwdiscord.StaleQuestionNotice}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("notices by message (-want +got):\n%s", diff)
	}
}
