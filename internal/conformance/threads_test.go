//go:build conformance

package conformance

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/diamondburned/arikawa/v3/discord"

	"github.com/agentgateway/gateway/internal/fakeapi"
	"github.com/agentgateway/gateway/internal/fakediscord"
)

// TestConformanceThreadsCarryTheirOwnConversations runs the built `gateway
// run` with the real claude CLI and the default THREADS=auto: a mention
// opens a thread that answers; a message in that thread, with no mention,
// continues the thread's conversation (the model is sent what was said in
// it); a second thread knows nothing of the first.
func TestConformanceThreadsCarryTheirOwnConversations(t *testing.T) {
	const word = "MARMALADE-5150"
	bin := buildGateway(t)
	api := fakeapi.StartAnthropic(t,
		fakeapi.Text("Noted: "+word+"."),
		fakeapi.Text("It was "+word+"."),
		fakeapi.Text("I know of no word."),
	)
	fd := fakediscord.Start(t)
	_, channel := fd.AddGuild("conformance")
	alice := fd.User("alice")
	work := t.TempDir()
	env := gatewayEnv(t, fd, api.URL(), filepath.Join(work, "config"), "THREADS=auto")
	gatewayRun(t, bin, work, env, api)
	fd.Wait(t, "the bot to connect", 30*time.Second, fd.Connected)

	first := fd.Post(channel, alice, fakediscord.Mention(fd.Bot)+" Remember the word "+word+".", fd.Bot)
	thread := discord.ChannelID(first.ID)
	opened := func(th discord.ChannelID) func() bool {
		return func() bool {
			for _, c := range fd.Threads(channel) {
				if c.ID == th {
					return true
				}
			}
			return false
		}
	}
	fd.Wait(t, "the thread", 30*time.Second, opened(thread))
	fd.Wait(t, "the answer in the thread", 90*time.Second, func() bool { return len(fd.BotMessages(thread)) >= 1 })
	if ths := fd.Threads(channel); len(ths) != 1 || ths[0].ID != thread || ths[0].Name != "Remember the word "+word+"." {
		t.Fatalf("threads = %+v, want one on the prompt named after it", ths)
	}

	fd.Post(thread, alice, "Which word was it?")
	second := fd.Post(channel, alice, fakediscord.Mention(fd.Bot)+" Which word did I give you?", fd.Bot)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	main, err := api.WaitMain(ctx, 3)
	if err != nil {
		t.Fatalf("the prompts never reached the model: %v\n%s", err, api.Summary())
	}
	var inThread, inOther *fakeapi.Request
	for i := range main[1:] {
		r := &main[1+i]
		switch body := string(r.Body); {
		case strings.Contains(body, "Which word was it?"):
			inThread = r
		case strings.Contains(body, "Which word did I give you?"):
			inOther = r
		}
	}
	if inThread == nil || inOther == nil {
		t.Fatalf("requests do not hold both prompts:\n%s", api.Summary())
	}
	if !strings.Contains(string(inThread.Body), word) {
		t.Errorf("the message in the thread did not continue its conversation:\n%s", flatten(*inThread))
	}
	if strings.Contains(string(inOther.Body), word) {
		t.Errorf("the second thread was sent the first thread's conversation:\n%s", flatten(*inOther))
	}
	fd.Wait(t, "the second thread", 30*time.Second, opened(discord.ChannelID(second.ID)))
	fd.Wait(t, "the second thread's answer", 90*time.Second, func() bool { return len(fd.BotMessages(discord.ChannelID(second.ID))) >= 1 })
	if msgs := fd.BotMessages(channel); len(msgs) != 0 {
		t.Errorf("the bot posted in the channel itself: %q", msgs[0].Content)
	}
}
