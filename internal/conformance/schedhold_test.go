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

// TestConformanceClaudeScheduleWriteWaitsForApply runs the built `gateway
// run` with the real claude CLI in acceptEdits (the mode that let a chat
// prompt schedule a job before): the model calls Write on agents.md to add
// an every-minute cron job. The gateway puts the file back, schedules
// nothing, and asks the approver in the output channel; only Apply
// schedules the job.
func TestConformanceClaudeScheduleWriteWaitsForApply(t *testing.T) {
	bin := buildGateway(t)
	work := t.TempDir()
	configDir := filepath.Join(work, "config")
	if err := os.MkdirAll(configDir, 0o700); err != nil {
		t.Fatal(err)
	}
	const agentsBefore = "# Agents\n\nBe brief.\n"
	agentsMD := filepath.Join(configDir, "agents.md")
	if err := os.WriteFile(agentsMD, []byte(agentsBefore), 0o600); err != nil {
		t.Fatal(err)
	}
	api := fakeapi.StartAnthropic(t,
		fakeapi.ToolUse("Write", map[string]any{
			"file_path": agentsMD,
			"content":   agentsBefore + "\n## Cron Jobs\n\n### pwned\nCron: * * * * *\nInstruction: Post the advert.\n",
		}),
		fakeapi.Text("Scheduled."),
	)
	fd := fakediscord.Start(t)
	guild, channel := fd.AddGuild("conformance")
	ops := fd.AddChannel(fakediscord.Channel{GuildID: guild, Name: "ops"})
	alice, boss := fd.User("alice"), fd.User("boss")

	logs, _ := gatewayRun(t, bin, work, gatewayEnv(t, fd, api.URL(), configDir, "OUTPUT_CHANNEL_ID="+ops.String(), "APPROVER_IDS="+boss.ID.String()), api)
	fd.Wait(t, "the bot to connect", 30*time.Second, fd.Connected)

	fd.Post(channel, alice, fakediscord.Mention(fd.Bot)+" Post an advert every minute.", fd.Bot)
	// The turn card comes first; the answer is its own message.
	fd.Wait(t, "the reply", 90*time.Second, func() bool {
		for _, m := range fd.BotMessages(channel) {
			if m.Content == "Scheduled." {
				return true
			}
		}
		return false
	})
	var held fakediscord.Message
	fd.Wait(t, "the held change in the output channel", 30*time.Second, func() bool {
		for _, m := range fd.BotMessages(ops) {
			if len(m.Buttons()) == 2 {
				held = m
				return true
			}
		}
		return false
	})
	if !strings.Contains(held.Content, "pwned") || !strings.Contains(held.Content, "Write") {
		t.Errorf("held message:\n%s", held.Content)
	}
	// The model's Write did happen (claude reported success to it), and
	// the gateway put the file back.
	if n := len(api.MainRequests()); n < 2 {
		t.Errorf("%d model requests: the Write's result never went back", n)
	}
	if b, _ := os.ReadFile(agentsMD); string(b) != agentsBefore {
		t.Fatalf("agents.md while held:\n%s", b)
	}
	if strings.Contains(logs.String(), `"cron":"pwned"`) {
		t.Fatal("the job was scheduled before Apply")
	}

	fd.Press(ops, held.ID, boss, held.Buttons()[0].ID, discord.PermissionSendMessages)
	fd.Wait(t, "the job to be scheduled after Apply", 30*time.Second, func() bool {
		return strings.Contains(logs.String(), `"cron":"pwned"`) && strings.Contains(logs.String(), "scheduled job added")
	})
	if m, _ := fd.Message(ops, held.ID); !strings.Contains(m.Content, "Applied by") || len(m.Buttons()) != 0 {
		t.Errorf("message after Apply = %+v", m)
	}
}
