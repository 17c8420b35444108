package gateway

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/jonboulle/clockwork"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/fakediscord"
)

const heldAgents = `# Agents

Be brief.
`

// scriptedClaude is a stand-in for the claude CLI, driven through the real
// claude adapter: asked to add a job, it calls Write and appends a cron job
// to agents.md in its working directory (CONFIG_DIR), as claude with
// acceptEdits does; any other prompt is answered "Cron ran.".
const scriptedClaude = `#!/bin/sh
prompt=$(cat)
init='{"type":"system","subtype":"init","cwd":"/w","session_id":"s-1","tools":["Write"],"model":"fake"}'
case "$prompt" in
*"add a job"*)
	echo "$init"
	echo '{"type":"assistant","session_id":"s-1","message":{"id":"m1","role":"assistant","content":[{"type":"tool_use","id":"tu1","name":"Write","input":{"file_path":"agents.md"}}]}}'
	cat >> agents.md <<'EOF'

## Cron Jobs

### spam
Cron: * * * * *
Instruction: Post an advert.
EOF
	echo '{"type":"user","session_id":"s-1","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"tu1","content":"File written"}]}}'
	echo '{"type":"result","subtype":"success","is_error":false,"result":"I added the job.","session_id":"s-1","total_cost_usd":0.01,"num_turns":2}'
	;;
*)
	echo "$init"
	echo '{"type":"result","subtype":"success","is_error":false,"result":"Cron ran.","session_id":"s-2","total_cost_usd":0.01,"num_turns":1}'
	;;
esac
`

func TestScheduleChangeByTheAgentWaitsForApply(t *testing.T) {
	script := filepath.Join(t.TempDir(), "claude")
	if err := os.WriteFile(script, []byte(scriptedClaude), 0o755); err != nil {
		t.Fatal(err)
	}
	claude, err := backends.New(config.BackendClaude, backends.Options{Binary: script, Env: os.Environ()})
	if err != nil {
		t.Fatal(err)
	}
	clock := clockwork.NewFakeClock()
	var ops discord.ChannelID
	var approver, stranger discord.User
	h := startGateway(t, harnessOptions{
		clock:   clock,
		backend: claude,
		files:   map[string]string{"agents.md": heldAgents},
		setup: func(h *harness) map[string]string {
			ops = h.fd.AddChannel(fakediscord.Channel{GuildID: h.guild, Name: "ops"})
			approver, stranger = h.fd.User("boss"), h.fd.User("mallory")
			return map[string]string{
				config.EnvOutputChannelID: ops.String(),
				config.EnvApproverIDs:     approver.ID.String(),
			}
		},
	})
	agentsPath := filepath.Join(h.cfg.ConfigDir, "agents.md")

	h.mention(h.channel, "please add a job that posts every minute")
	if got := h.waitReplies(h.channel, 1)[0].Content; got != "I added the job." {
		t.Fatalf("reply = %q", got)
	}
	var held fakediscord.Message
	h.fd.Wait(t, "the held change in the output channel", waitLong, func() bool {
		for _, m := range h.fd.BotMessages(ops) {
			if len(m.Buttons()) == 2 {
				held = m
				return true
			}
		}
		return false
	})
	for _, want := range []string{"held for approval", "agents.md", "Write", "spam", "* * * * *", "Post an advert."} {
		if !strings.Contains(held.Content, want) {
			t.Errorf("held message does not say %q:\n%s", want, held.Content)
		}
	}
	if b, _ := os.ReadFile(agentsPath); string(b) != heldAgents {
		t.Fatalf("agents.md while held:\n%s\nwant it put back as it was", b)
	}
	if strings.Contains(h.logs.String(), `"cron":"spam"`) {
		t.Fatalf("the held job was scheduled:\n%s", h.logs.String())
	}

	// Someone who is not an approver is told so, privately; nothing changes.
	apply := held.Buttons()[0].ID
	h.fd.Press(ops, held.ID, stranger, apply, discord.PermissionAdministrator)
	h.fd.Wait(t, "the refusal", waitLong, func() bool {
		for _, a := range h.fd.Answers() {
			if a.Ephemeral && strings.Contains(a.Content, "Only the gateway's approvers") {
				return true
			}
		}
		return false
	})
	if m, _ := h.fd.Message(ops, held.ID); len(m.Buttons()) != 2 {
		t.Fatal("a refused press changed the message")
	}

	h.fd.Press(ops, held.ID, approver, apply, 0)
	h.fd.Wait(t, "the message to say it was applied", waitLong, func() bool {
		m, _ := h.fd.Message(ops, held.ID)
		return len(m.Buttons()) == 0 && strings.Contains(m.Content, "Applied by")
	})
	if b, _ := os.ReadFile(agentsPath); !strings.Contains(string(b), "### spam") {
		t.Fatalf("agents.md after Apply:\n%s", b)
	}
	// The job is scheduled now, and runs.
	advance(t, clock, 1, time.Minute)
	h.fd.Wait(t, "the approved job to run", waitLong, func() bool {
		for _, m := range h.fd.BotMessages(ops) {
			if m.Content == "Cron ran." {
				return true
			}
		}
		return false
	})
}
