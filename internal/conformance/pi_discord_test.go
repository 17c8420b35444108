//go:build conformance

package conformance

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/diamondburned/arikawa/v3/discord"

	"github.com/agentgateway/gateway/internal/fakeapi"
	"github.com/agentgateway/gateway/internal/fakediscord"
)

// The built `gateway run` with AGENT_BACKEND=pi and the real pi: a bash
// call waits for a button under the prompt; somebody else's press changes
// nothing; the author's "Allow for this session" runs it, the message says
// who allowed it, and the same command in the next prompt runs without a
// question, on the same warm process.
func TestConformancePiDiscordApproval(t *testing.T) {
	bin := buildGateway(t)
	api := fakeapi.StartAnthropic(t,
		fakeapi.ToolUse("bash", map[string]any{"command": "echo hi >> out.txt"}),
		fakeapi.Text("Appended once."),
		fakeapi.ToolUse("bash", map[string]any{"command": "echo hi >> out.txt"}),
		fakeapi.Text("Appended twice."),
	)
	fd := fakediscord.Start(t)
	_, channel := fd.AddGuild("conformance")
	alice, bob := fd.User("alice"), fd.User("bob")
	work := t.TempDir()
	configDir := filepath.Join(work, "config")
	home := piRPCHome(t, api)
	env := gatewayEnv(t, fd, api.URL(), configDir,
		"AGENT_BACKEND=pi", "AGENT_CLI_PATH="+cliBinary(t, "pi"), "HOME="+home, "PI_OFFLINE=1",
		"AGENT_MODEL="+piModel, "PERMISSION_MODE=default", "TURN_CARD=off")
	logs, _ := gatewayRun(t, bin, work, env, api)
	fd.Wait(t, "the bot to connect", 30*time.Second, fd.Connected)

	prompt := fd.Post(channel, alice, fakediscord.Mention(fd.Bot)+" Append hi to out.txt.", fd.Bot)
	var ask fakediscord.Message
	fd.Wait(t, "the approval question", 90*time.Second, func() bool {
		for _, m := range fd.BotMessages(channel) {
			if strings.Contains(m.Content, "wants to use `bash`") && len(m.Buttons()) > 0 {
				ask = m
				return true
			}
		}
		return false
	})
	if !strings.Contains(ask.Content, "echo hi >> out.txt") || !strings.Contains(ask.Content, "<@"+alice.ID.String()+">") {
		t.Errorf("question = %q, want the command and the author", ask.Content)
	}
	if ask.Reference == nil || ask.Reference.MessageID != prompt.ID {
		t.Errorf("the question does not answer the prompt: %+v", ask.Reference)
	}
	button := func(label string) string {
		for _, b := range ask.Buttons() {
			if b.Label == label {
				return b.ID
			}
		}
		t.Fatalf("no %q button in %+v", label, ask.Buttons())
		return ""
	}
	fd.Press(channel, ask.ID, bob, button("Allow"), discord.PermissionSendMessages)
	if _, err := os.Stat(filepath.Join(configDir, "out.txt")); err == nil {
		t.Fatal("bob's press ran the command")
	}
	fd.Press(channel, ask.ID, alice, button("Allow for this session"), discord.PermissionSendMessages)
	fd.Wait(t, "the first reply", 90*time.Second, func() bool { return hasBotMessage(fd, channel, "Appended once.") })
	if m, ok := messageByID(fd, channel, ask.ID); !ok || !strings.Contains(m.Content, "Allowed for this session by <@"+alice.ID.String()+">") || len(m.Buttons()) != 0 {
		t.Errorf("answered question = %+v, want who allowed it and no buttons", m)
	}

	fd.Post(channel, alice, fakediscord.Mention(fd.Bot)+" Once more.", fd.Bot)
	fd.Wait(t, "the second reply", 90*time.Second, func() bool { return hasBotMessage(fd, channel, "Appended twice.") })
	if got, err := os.ReadFile(filepath.Join(configDir, "out.txt")); err != nil || string(got) != "hi\nhi\n" {
		t.Errorf("out.txt = %q, %v; want both appends", got, err)
	}
	questions := 0
	for _, m := range fd.BotMessages(channel) {
		if strings.Contains(m.Content, "wants to use") || strings.Contains(m.Content, "Allowed") {
			questions++
		}
	}
	if questions != 1 {
		t.Errorf("%d approval messages, want 1: the second call was allowed for the session", questions)
	}
	if n := strings.Count(logs.String(), "pi rpc process started"); n > 1 {
		t.Errorf("pi started %d times, want the warm process reused", n)
	}
}

func hasBotMessage(fd *fakediscord.Server, ch discord.ChannelID, text string) bool {
	for _, m := range fd.BotMessages(ch) {
		if strings.Contains(m.Content, text) {
			return true
		}
	}
	return false
}

func messageByID(fd *fakediscord.Server, ch discord.ChannelID, id discord.MessageID) (fakediscord.Message, bool) {
	for _, m := range fd.Messages(ch) {
		if m.ID == id {
			return m, true
		}
	}
	return fakediscord.Message{}, false
}
