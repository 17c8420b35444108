package gateway

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/diamondburned/arikawa/v3/discord"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/fakediscord"
	"github.com/agentgateway/gateway/internal/session"
	"github.com/agentgateway/gateway/internal/threads"
)

// sessionsByPrompt is a scripted backend that starts a numbered session
// for a turn without one and keeps the one it resumes.
type sessionsByPrompt struct {
	mu   sync.Mutex
	next int
}

func (s *sessionsByPrompt) respond(_ context.Context, req backends.Request, _ func(backends.Event)) (backends.Result, error) {
	id := req.SessionID
	if id == "" {
		s.mu.Lock()
		s.next++
		id = fmt.Sprintf("session-%d", s.next)
		s.mu.Unlock()
	}
	return backends.Result{SessionID: id, Text: "answer to " + req.Prompt}, nil
}

func threadHarness(t *testing.T, env map[string]string) *harness {
	t.Helper()
	sp := &sessionsByPrompt{}
	env = withEnv(env, config.EnvThreads, config.ThreadsAuto)
	return startGateway(t, harnessOptions{respond: sp.respond, env: env})
}

// waitThread waits for the thread opened on message m and returns it.
func (h *harness) waitThread(m discord.Message) discord.Channel {
	h.t.Helper()
	var th discord.Channel
	h.fd.Wait(h.t, "a thread on the prompt", waitLong, func() bool {
		for _, c := range h.fd.Threads(m.ChannelID) {
			if c.ID == discord.ChannelID(m.ID) {
				th = c
				return true
			}
		}
		return false
	})
	return th
}

func (h *harness) threadSession(thread discord.ChannelID) string {
	h.t.Helper()
	store, _, err := session.Open(filepath.Join(h.cfg.ConfigDir, session.FileName))
	if err != nil {
		h.t.Fatal(err)
	}
	b, _ := store.Get(thread.String())
	return b.SessionID
}

func TestMentionOpensAThreadThatCarriesTheConversation(t *testing.T) {
	h := threadHarness(t, nil)

	first := h.mention(h.channel, "Fix the login bug\nIt fails on Safari since Tuesday.")
	th := h.waitThread(first)
	if th.Name != "Fix the login bug" {
		t.Errorf("thread name = %q, want the prompt's first line", th.Name)
	}
	if th.Type != discord.GuildPublicThread {
		t.Errorf("thread type = %v, want a public thread", th.Type)
	}
	if th.ThreadMetadata == nil || th.ThreadMetadata.AutoArchiveDuration != discord.SevenDaysArchive {
		t.Errorf("thread metadata = %+v, want auto-archive after a week (THREAD_ARCHIVE's default)", th.ThreadMetadata)
	}
	answers := h.waitReplies(th.ID, 1)
	if !strings.Contains(answers[0].Content, "answer to Fix the login bug") {
		t.Errorf("answer in the thread = %q", answers[0].Content)
	}
	if answers[0].Reference != nil {
		t.Errorf("the answer in the thread replies to %+v: Discord refuses replies across channels", answers[0].Reference)
	}
	if members := h.fd.ThreadMembers(th.ID); !slices.Contains(members, h.user.ID) {
		t.Errorf("thread members = %v, want the asker among them (the thread shows in their list)", members)
	}
	firstSession := h.threadSession(th.ID)
	if firstSession == "" {
		t.Fatal("the thread has no session of its own")
	}

	// In the bot's thread, no mention is needed, and the thread's session
	// goes on.
	h.fd.Post(th.ID, h.user, "and add a test for it")
	h.waitReplies(th.ID, 2)
	h.backendCalls(2)
	if got := h.backend.Requests()[1].SessionID; got != firstSession {
		t.Errorf("the second prompt in the thread resumed %q, want the thread's session %q", got, firstSession)
	}

	// Another task opens another thread and another session.
	second := h.mention(h.channel, "Write the release notes")
	th2 := h.waitThread(second)
	h.waitReplies(th2.ID, 1)
	h.backendCalls(3)
	if got := h.backend.Requests()[2].SessionID; got != "" {
		t.Errorf("a new thread resumed %q, want a fresh session", got)
	}
	h.fd.Post(th2.ID, h.user, "shorter please")
	h.waitReplies(th2.ID, 2)
	h.backendCalls(4)
	if got, other := h.backend.Requests()[3].SessionID, h.threadSession(th2.ID); got != other || got == firstSession {
		t.Errorf("the second thread resumed %q, want its own session %q (not the first thread's %q)", got, other, firstSession)
	}
	if msgs := h.fd.BotMessages(h.channel); len(msgs) != 0 {
		t.Errorf("the bot posted %d messages in the channel itself, want its answers in the threads: %+v", len(msgs), msgs[0].Content)
	}

	list, _, err := threads.Open(filepath.Join(h.cfg.ConfigDir, threads.FileName))
	if err != nil {
		t.Fatal(err)
	}
	got, ok := list.Get(th.ID.String())
	if !ok || got.Parent != h.channel.String() || got.Author != h.user.ID.String() || got.LastUsed.IsZero() {
		t.Errorf("threads.json holds %+v (known %v), want the thread with its channel, author and last use", got, ok)
	}
}

func TestThreadInheritsTheChannelsSettingsAndKeepsItsOwn(t *testing.T) {
	h := threadHarness(t, nil)
	set := h.fd.Interact(h.channel, h.user, "model", map[string]string{"name": "opus"})
	h.fd.Wait(t, "/model's answer", waitLong, func() bool { return len(h.fd.Callbacks(set)) == 1 })

	th := h.waitThread(h.mention(h.channel, "first task"))
	h.waitReplies(th.ID, 1)
	if got := h.backend.Requests()[0].Model; got != "opus" {
		t.Errorf("the thread's turn used model %q, want the channel's opus", got)
	}
	own := h.fd.Interact(th.ID, h.user, "model", map[string]string{"name": "haiku"})
	h.fd.Wait(t, "/model's answer in the thread", waitLong, func() bool { return len(h.fd.Callbacks(own)) == 1 })
	h.fd.Post(th.ID, h.user, "again")
	h.waitReplies(th.ID, 2)
	h.backendCalls(2)
	if got := h.backend.Requests()[1].Model; got != "haiku" {
		t.Errorf("after /model in the thread its turn used %q, want haiku", got)
	}
	th2 := h.waitThread(h.mention(h.channel, "second task"))
	h.waitReplies(th2.ID, 1)
	h.backendCalls(3)
	if got := h.backend.Requests()[2].Model; got != "opus" {
		t.Errorf("a new thread used %q, want the channel's opus (the first thread's haiku is its own)", got)
	}
}

func TestResetInAThreadResetsOnlyThatThread(t *testing.T) {
	h := threadHarness(t, nil)
	th := h.waitThread(h.mention(h.channel, "task one"))
	h.waitReplies(th.ID, 1)
	th2 := h.waitThread(h.mention(h.channel, "task two"))
	h.waitReplies(th2.ID, 1)
	keep := h.threadSession(th2.ID)

	reset := h.fd.Interact(th.ID, h.user, "claude-reset", nil)
	h.fd.Wait(t, "reset answer", waitLong, func() bool { return len(h.fd.Callbacks(reset)) == 1 })
	if got := h.threadSession(th.ID); got != "" {
		t.Errorf("the thread still has session %q after /claude-reset in it", got)
	}
	if got := h.threadSession(th2.ID); got != keep {
		t.Errorf("the other thread's session is %q after a reset elsewhere, want %q", got, keep)
	}
}

func TestThreadsOffAnswersInTheChannel(t *testing.T) {
	sp := &sessionsByPrompt{}
	h := startGateway(t, harnessOptions{respond: sp.respond, env: map[string]string{config.EnvThreads: config.ThreadsOff}})
	h.mention(h.channel, "no thread please")
	h.waitReplies(h.channel, 1)
	if ths := h.fd.Threads(h.channel); len(ths) != 0 {
		t.Errorf("THREADS=off opened %d threads", len(ths))
	}
}

func TestDirectMessagesOpenNoThread(t *testing.T) {
	h := threadHarness(t, nil)
	dm := h.fd.AddChannel(fakediscord.Channel{})
	h.fd.Post(dm, h.user, "hello in private")
	h.waitReplies(dm, 1)
}

// In a thread someone else made, the bot answers only when mentioned, as
// in a channel, and answers in that thread without opening another.
func TestThreadsOthersMadeNeedAMention(t *testing.T) {
	h := threadHarness(t, nil)
	theirs := h.fd.AddChannel(fakediscord.Channel{GuildID: h.guild, ParentID: h.channel, Type: discord.GuildPublicThread, Name: "their chat"})
	h.fd.Post(theirs, h.user, "talking among ourselves")
	h.mention(theirs, "now a question for the bot")
	answers := h.waitReplies(theirs, 1)
	h.backendCalls(1)
	if got := h.backend.Requests(); len(got) != 1 || got[0].Prompt != "now a question for the bot" {
		t.Errorf("prompts = %+v, want only the mention", got)
	}
	if !strings.Contains(answers[0].Content, "now a question") || answers[0].Reference == nil {
		t.Errorf("answer = %q (reference %+v), want a reply in their thread", answers[0].Content, answers[0].Reference)
	}
	if ths := h.fd.Threads(h.channel); len(ths) != 1 {
		t.Errorf("the channel has %d threads, want only theirs", len(ths))
	}
}

// A message posted in one of the bot's threads while the gateway was down
// is answered after the restart, without a mention.
func TestThreadMessageWhileDownIsCaughtUp(t *testing.T) {
	sp := &sessionsByPrompt{}
	env := map[string]string{config.EnvThreads: config.ThreadsAuto}
	first := startGateway(t, harnessOptions{respond: sp.respond, env: env})
	th := first.waitThread(first.mention(first.channel, "a long task"))
	first.waitReplies(th.ID, 1)
	session := first.threadSession(th.ID)
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}
	first.fd.Post(th.ID, first.user, "one more thing")

	second := startGateway(t, harnessOptions{respond: sp.respond, env: env, fd: first.fd, configDir: first.cfg.ConfigDir})
	second.fd.Wait(t, "the missed prompt's answer in the thread", waitLong, func() bool {
		for _, m := range second.fd.BotMessages(th.ID) {
			if strings.Contains(m.Content, "answer to one more thing") {
				return true
			}
		}
		return false
	})
	if got := second.backend.Requests()[0].SessionID; got != session {
		t.Errorf("the missed prompt resumed %q, want the thread's session %q", got, session)
	}
}

// When Discord refuses the thread, the prompt is still answered: in its
// channel, as a reply, after one line saying why.
func TestRefusedThreadIsAnsweredInTheChannel(t *testing.T) {
	h := threadHarness(t, nil)
	h.fd.Fail(fakediscord.Fault{Method: "POST", Path: "/channels/" + h.channel.String() + "/messages/", Status: 403, Times: 5})
	m := h.mention(h.channel, "please answer anyway")
	h.fd.Wait(t, "the answer in the channel", waitLong, func() bool { return len(repliesTo(h.fd, h.channel, m.ID)) == 2 })
	got := repliesTo(h.fd, h.channel, m.ID)
	if !strings.Contains(got[0].Content, "could not open a thread") || !strings.Contains(got[1].Content, "answer to please answer anyway") {
		t.Errorf("replies = %q, %q; want the reason, then the answer", got[0].Content, got[1].Content)
	}
	list, _, err := threads.Open(filepath.Join(h.cfg.ConfigDir, threads.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if list.Owns(m.ID.String()) {
		t.Error("threads.json lists the thread Discord refused")
	}
	if got := h.threadSession(h.channel); got == "" {
		t.Error("the answer in the channel left no session for the channel's next prompt")
	}
}

// A prompt that would open a thread, sent while the gateway stops, is told
// about the restart under the prompt itself (its thread does not exist
// yet), and its thread opens and answers at the next start.
func TestPromptKeptAtShutdownOpensItsThreadAfterTheRestart(t *testing.T) {
	started := make(chan struct{})
	release := make(chan struct{})
	env := map[string]string{config.EnvThreads: config.ThreadsAuto}
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
	h.fd.Wait(t, "the restart notice under the prompt", waitLong, func() bool {
		for _, m := range h.fd.BotMessages(h.channel) {
			if m.Reference != nil && m.Reference.MessageID == late.ID && strings.Contains(m.Content, "restarting") {
				return true
			}
		}
		return false
	})
	close(release)
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	next := startGateway(t, harnessOptions{fd: h.fd, configDir: h.cfg.ConfigDir, env: env})
	th := next.waitThread(late)
	next.fd.Wait(t, "the kept prompt answered in its thread", waitLong, func() bool {
		for _, m := range next.fd.BotMessages(th.ID) {
			if m.Content == "echo: too late" {
				return true
			}
		}
		return false
	})
}

// Where the bot may not open threads, prompts are answered in the channel,
// and the channel is told once which permission is missing.
func TestMissingThreadPermissionIsNamedOnce(t *testing.T) {
	h := threadHarness(t, nil)
	// The overwrite's CHANNEL_UPDATE reaches the bot before the prompts:
	// the gateway delivers events in order.
	h.fd.DenyBot(h.channel, discord.PermissionCreatePublicThreads)
	first := h.mention(h.channel, "first question")
	h.fd.Wait(t, "the first answer in the channel", waitLong, func() bool { return len(repliesTo(h.fd, h.channel, first.ID)) == 2 })
	second := h.mention(h.channel, "second question")
	h.fd.Wait(t, "the second answer in the channel", waitLong, func() bool { return len(repliesTo(h.fd, h.channel, second.ID)) == 1 })
	var notes []string
	for _, m := range h.fd.BotMessages(h.channel) {
		if strings.Contains(m.Content, "Create Public Threads") {
			notes = append(notes, m.Content)
		}
	}
	if len(notes) != 1 {
		t.Errorf("the missing permission was named %d times, want once: %q", len(notes), notes)
	}
	if ths := h.fd.Threads(h.channel); len(ths) != 0 {
		t.Errorf("%d threads opened without the permission", len(ths))
	}
	if n := len(h.requests("POST", "/channels/"+h.channel.String()+"/messages/")); n != 0 {
		t.Errorf("%d attempts to open a thread the bot may not open", n)
	}
}

// /claude in a text channel answers with the prompt and opens the thread
// on that answer; the turn answers in the thread.
func TestSlashPromptOpensAThreadOnItsAnswer(t *testing.T) {
	h := threadHarness(t, nil)
	id := h.fd.Interact(h.channel, h.user, "claude", map[string]string{"prompt": "Plan the release\nwith notes"})
	var original fakediscord.Message
	h.fd.Wait(t, "the command's answer", waitLong, func() bool {
		for _, a := range h.fd.Answers() {
			if a.Interaction == id && a.Original {
				original = a
				return true
			}
		}
		return false
	})
	if !strings.Contains(original.Content, "Plan the release") || original.Ephemeral {
		t.Errorf("the command's answer = %q (ephemeral %v), want the prompt, visible", original.Content, original.Ephemeral)
	}
	var th discord.Channel
	h.fd.Wait(t, "the thread", waitLong, func() bool {
		for _, c := range h.fd.Threads(h.channel) {
			th = c
			return true
		}
		return false
	})
	if th.ID != discord.ChannelID(original.ID) || th.Name != "Plan the release" {
		t.Errorf("thread %v %q, want one on the command's answer %v named after the prompt", th.ID, th.Name, original.ID)
	}
	got := h.waitReplies(th.ID, 1)
	if !strings.Contains(got[0].Content, "answer to Plan the release") {
		t.Errorf("answer in the thread = %q", got[0].Content)
	}
	h.fd.Post(th.ID, h.user, "and a changelog")
	h.waitReplies(th.ID, 2)
	h.backendCalls(2)
	if first, second := h.backend.Requests()[0], h.backend.Requests()[1]; second.SessionID == "" || second.SessionID != h.threadSession(th.ID) {
		t.Errorf("the message in the thread resumed %q after %q, want the thread's session", second.SessionID, first.SessionID)
	}
	for _, a := range h.fd.Answers() {
		if a.Interaction == id && a.Original && a.Content != original.Content {
			t.Errorf("the command's answer was changed to %q; the answer belongs in the thread", a.Content)
		}
	}
}

// A channel's daily budget covers the threads opened in it: opening a new
// thread does not start a new budget.
func TestChannelBudgetCoversItsThreads(t *testing.T) {
	h := startGateway(t, harnessOptions{
		env: map[string]string{config.EnvChannelBudget: "1", config.EnvThreads: config.ThreadsAuto},
		respond: func(ctx context.Context, req backends.Request, emit func(backends.Event)) (backends.Result, error) {
			return backends.Result{SessionID: "s-" + req.Prompt, Text: "done " + req.Prompt, CostUSD: 0.6}, nil
		},
	})
	for _, p := range []string{"one", "two"} {
		th := h.waitThread(h.mention(h.channel, p))
		h.waitReplies(th.ID, 1)
	}
	third := h.waitThread(h.mention(h.channel, "three"))
	// The refusal, and the first refusal's Lift button, in either order.
	var refusal string
	for _, m := range h.waitReplies(third.ID, 2) {
		if strings.HasPrefix(m.Content, "Not run:") {
			refusal = m.Content
		}
	}
	if !strings.Contains(refusal, "daily budget of $1.00 is used up") {
		t.Errorf("the third thread's refusal = %q, want the channel's budget", refusal)
	}
	if n := len(h.backend.Requests()); n != 2 {
		t.Errorf("%d runs, want 2: the third thread was over its channel's budget", n)
	}
	if cost := h.answer(h.fd.Interact(third.ID, h.user, "cost", nil)); !strings.Contains(cost, "$1.20") {
		t.Errorf("/cost in a thread = %q, want its channel's $1.20", cost)
	}
}

// A thread the bot owns but did not open for a task (the agent made it
// with an action) is a place where people talk: a mention is needed there.
func TestBotsOtherThreadsNeedAMention(t *testing.T) {
	h := threadHarness(t, nil)
	other := h.fd.StartThreadAsUser(h.channel, h.fd.Bot, "standup notes")
	h.fd.Post(other, h.user, "my update: all good")
	h.mention(other, "summarise the updates")
	h.waitReplies(other, 1)
	h.backendCalls(1)
	if got := h.backend.Requests(); len(got) != 1 || got[0].Prompt != "summarise the updates" {
		t.Errorf("prompts = %+v, want only the mention", got)
	}
}
