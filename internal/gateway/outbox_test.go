package gateway

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/diamondburned/arikawa/v3/discord"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/fakediscord"
	"github.com/agentgateway/gateway/internal/reply"
)

// answerOf returns a backend that answers every prompt with text.
func answerOf(text string) func(context.Context, backends.Request, func(backends.Event)) (backends.Result, error) {
	return func(context.Context, backends.Request, func(backends.Event)) (backends.Result, error) {
		return backends.Result{SessionID: "s", Text: text}, nil
	}
}

// bigAnswer is an answer of n characters in many lines.
func bigAnswer(n int) string {
	line := "A line of an answer far too long for Discord, and then some more.\n"
	return strings.Repeat(line, n/len(line)+1)[:n]
}

// While Discord refuses a channel's messages, its finished turn's reply
// waits outside the queue: with one concurrency slot, another channel's
// prompt runs and is answered meanwhile, and when Discord recovers the
// pending reply is posted, once.
func TestPendingReplyFreesTheSlotAndArrivesOnce(t *testing.T) {
	var other discord.ChannelID
	h := startGateway(t, harnessOptions{
		env: map[string]string{config.EnvMaxConcurrent: "1"},
		setup: func(h *harness) map[string]string {
			other = h.fd.AddChannel(fakediscord.Channel{GuildID: h.guild, Type: discord.GuildText, Name: "other"})
			return nil
		},
	})
	path := "/channels/" + h.channel.String() + "/messages"
	h.fd.Fail(fakediscord.Fault{Method: "POST", Path: path, Status: 503, Times: 1 << 30})
	h.mention(h.channel, "first")
	h.fd.Wait(t, "the reply retried", waitLong, func() bool { return len(h.requests("POST", path)) >= 2 })

	h.mention(other, "second")
	if msgs := h.waitReplies(other, 1); msgs[0].Content != "echo: second" {
		t.Errorf("other channel's reply = %q", msgs[0].Content)
	}
	h.fd.Wait(t, "both turns finished", waitLong, func() bool { return strings.Count(h.logs.String(), `"event finished"`) == 2 })
	if n := len(h.fd.BotMessages(h.channel)); n != 0 {
		t.Fatalf("%d messages posted while Discord failed", n)
	}

	h.fd.ClearFaults()
	h.waitReplies(h.channel, 1)
	if err := h.stop(); err != nil {
		t.Error(err)
	}
	msgs := h.fd.BotMessages(h.channel)
	if len(msgs) != 1 || msgs[0].Content != "echo: first" {
		t.Errorf("messages = %+v, want the pending reply exactly once", msgs)
	}
	if !strings.Contains(h.logs.String(), "pending reply delivered") {
		t.Error("the late delivery is not logged")
	}
}

// MAX_REPLY_MESSAGES caps an answer: its beginning is posted, then a
// message that says it was cut, with the whole answer attached.
func TestLongAnswerIsCappedWithTheAnswerAttached(t *testing.T) {
	text := bigAnswer(12 * reply.DiscordLimit)
	h := startGateway(t, harnessOptions{
		env:     map[string]string{config.EnvMaxReplyMessages: "4"},
		respond: answerOf(text),
	})
	h.mention(h.channel, "tell me everything")
	msgs := h.waitReplies(h.channel, 4)
	if err := h.stop(); err != nil {
		t.Error(err)
	}
	if msgs = h.fd.BotMessages(h.channel); len(msgs) != 4 {
		t.Fatalf("%d messages, want 4 (MAX_REPLY_MESSAGES)", len(msgs))
	}
	last := msgs[3]
	if len(last.Files) != 1 || last.Files[0].Name != "answer.md" || string(last.Files[0].Data) != text {
		t.Fatalf("the last message does not attach the whole answer as answer.md: %q, %d files", last.Content, len(last.Files))
	}
	if !strings.Contains(last.Content, "24,000 characters long") {
		t.Errorf("last message = %q; want the answer's length", last.Content)
	}
	var am struct {
		Parse []string `json:"parse"`
	}
	if err := json.Unmarshal(last.AllowedMentions, &am); err != nil || am.Parse == nil || len(am.Parse) != 0 || last.Nonce == "" {
		t.Errorf("the upload has allowed_mentions %s and nonce %q; want parse: [] and a nonce", last.AllowedMentions, last.Nonce)
	}
}

func TestLongSlashAnswerIsCappedWithTheAnswerAttached(t *testing.T) {
	text := bigAnswer(30 * reply.DiscordLimit)
	h := startGateway(t, harnessOptions{respond: answerOf(text)})
	id := h.fd.Interact(h.channel, h.user, "claude", map[string]string{"prompt": "everything"})
	answers := func() []fakediscord.Message {
		var out []fakediscord.Message
		for _, a := range h.fd.Answers() {
			if a.Interaction == id {
				out = append(out, a)
			}
		}
		return out
	}
	h.fd.Wait(t, "the attachment", waitLong, func() bool {
		a := answers()
		return len(a) > 0 && len(a[len(a)-1].Files) == 1
	})
	got := answers()
	if len(got) != 10 {
		t.Errorf("%d answers, want 10 (the default cap)", len(got))
	}
	if f := got[len(got)-1].Files[0]; f.Name != "answer.md" || string(f.Data) != text {
		t.Errorf("attached %q with %d bytes, want answer.md with the whole answer", f.Name, len(f.Data))
	}
}

// A flood of prompts into a full channel gets one busy notice; the other
// refused prompts are marked, and every refusal is logged with the depth.
func TestFloodIntoAFullQueueGetsOneBusyNotice(t *testing.T) {
	release := make(chan struct{})
	h := startGateway(t, harnessOptions{
		env: map[string]string{config.EnvMaxChannelQueue: "1"},
		respond: func(ctx context.Context, req backends.Request, emit func(backends.Event)) (backends.Result, error) {
			if req.Prompt == "first" {
				<-release
			}
			return backends.Result{SessionID: "s", Text: "done " + req.Prompt}, nil
		},
	})
	defer close(release)
	h.mention(h.channel, "first")
	h.backendCalls(1)
	h.mention(h.channel, "waits")
	const refused = 12
	for range refused {
		h.mention(h.channel, "flood")
	}
	refusals := func() []string {
		var out []string
		for _, line := range strings.Split(h.logs.String(), "\n") {
			if strings.Contains(line, "prompt refused: the queue is full") {
				out = append(out, line)
			}
		}
		return out
	}
	marks := func() int {
		n := 0
		for _, r := range h.requests("PUT", "/channels/"+h.channel.String()+"/messages/") {
			if strings.HasSuffix(r.Path, "/reactions/🚫/@me") {
				n++
			}
		}
		return n
	}
	// The notice is posted after the first refusal is marked: wait for it too.
	h.fd.Wait(t, "every refusal and the notice", waitLong, func() bool {
		return len(refusals()) == refused && marks() == refused-1 && len(h.fd.BotMessages(h.channel)) > 0
	})
	msgs := h.fd.BotMessages(h.channel)
	if len(msgs) != 1 || !strings.HasPrefix(msgs[0].Content, "This channel already has 1 prompt waiting.") {
		t.Errorf("messages = %+v, want one channel-limit notice", msgs)
	}
	for _, line := range refusals() {
		if !strings.Contains(line, `"depth":1`) || !strings.Contains(line, `"channel_limit":true`) {
			t.Errorf("refusal log lacks the depth: %s", line)
		}
	}
	// The flood fills only its own channel: another one is answered.
	other := h.fd.AddChannel(fakediscord.Channel{GuildID: h.guild, Type: discord.GuildText, Name: "other"})
	h.mention(other, "elsewhere")
	if msgs := h.waitReplies(other, 1); msgs[0].Content != "done elsewhere" {
		t.Errorf("other channel got %q", msgs[0].Content)
	}
}
