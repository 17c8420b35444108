package gateway

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/diamondburned/arikawa/v3/discord"

	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/fakediscord"
)

// A webhook run's reaction prompt does not let it out of its limits: only
// an approver's reaction answers it (the channel's users' and strangers'
// do not), and the turn that answer starts is gated as the webhook run
// was: memory, crons, defer and destructive actions stay refused, and it
// is not taught them. Like the run that asked, it runs in a fresh session,
// not in the channel's conversation that people's prompts continue.
func TestReactionPromptAnswerKeepsAWebhookRunsLimits(t *testing.T) {
	cli := newActionsCLI(t)
	addr := make(chan string, 1)
	const secret = "webhook-secret-value"
	approver := discord.User{ID: 900000000000000009, Username: "root"}
	h := cli.start(harnessOptions{
		webhookAddr: addr,
		env: map[string]string{
			config.EnvWebhookAddr:   "127.0.0.1:0",
			"WEBHOOK_DEPLOY_SECRET": secret,
			config.EnvApproverIDs:   approver.ID.String(),
		},
	})
	agents := "# Operating Rules\n\n## Webhooks\n\n### deploy\nSecret-Env: WEBHOOK_DEPLOY_SECRET\nChannel: " +
		h.channel.String() + "\nInstruction: reply:hook A deploy is ready: {{payload}}\n"
	if err := os.WriteFile(filepath.Join(h.cfg.ConfigDir, "agents.md"), []byte(agents), 0o600); err != nil {
		t.Fatal(err)
	}
	cli.reply("hook", `Asking.
<discord-action>{"type":"reactionPrompt","question":"Deploy now? reply:answer","emoji":["✅","❌"]}</discord-action>`)
	cli.reply("answer", `Deploying.
<discord-action>{"type":"memoryRemember","text":"deploys need no approval"}</discord-action>
<discord-action>{"type":"cronCreate","name":"redeploy","schedule":"* * * * *","prompt":"Deploy again."}</discord-action>
<discord-action>{"type":"sendMessage","channel":"general","content":"Deploy started."}</discord-action>`)
	// The channel has a conversation going: the answer does not join it.
	cli.reply("hello", "Hello.")
	p := h.mention(h.channel, "reply:hello hi")
	h.waitAnswer(h.channel, p.ID)
	postWebhook(t, h, "http://"+<-addr+"/hooks/deploy", secret, []byte("api v2"))

	var question fakediscord.Message
	h.fd.Wait(t, "the webhook run's question", waitLong, func() bool {
		for _, m := range h.fd.BotMessages(h.channel) {
			if strings.HasPrefix(m.Content, "❓ Deploy now?") && len(h.fd.Reactions(h.channel, m.ID)["❌"]) == 1 {
				question = m
				return true
			}
		}
		return false
	})
	h.fd.React(h.channel, question.ID, stranger(h), "✅")
	h.fd.React(h.channel, question.ID, h.user, "✅")
	h.fd.React(h.channel, question.ID, approver, "✅")
	checkReply(t, "answer", h.waitAnswer(h.channel, question.ID), "Deploying.\n\n"+
		"Failed: memoryRemember: not allowed in a scheduled or webhook-triggered run\n"+
		"Failed: cronCreate: not allowed in a scheduled or webhook-triggered run\n"+
		"Done: posted in #general")

	runs := cli.named("answer")
	if len(runs) != 1 || !strings.Contains(runs[0].prompt, "root reacted ✅") {
		t.Fatalf("answer runs = %+v, want one with the approver's reaction", runs)
	}
	if strings.Contains(runs[0].args, "--resume") {
		t.Errorf("the answer's turn resumed the channel's conversation:\n%s", runs[0].args)
	}
	for _, typ := range []string{"memoryRemember", "cronCreate", "defer", "modelSet", "roleAdd"} {
		if strings.Contains(runs[0].system, `"type":"`+typ+`"`) {
			t.Errorf("the answer's turn is taught %s", typ)
		}
	}
	if strings.Contains(readMemory(t, h), "deploys need no approval") {
		t.Error("the answer to a webhook run's question wrote to memory.md")
	}
}
