package gateway

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/diamondburned/arikawa/v3/discord"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/config"
	gwdiscord "github.com/agentgateway/gateway/internal/discord"
	"github.com/agentgateway/gateway/internal/fakediscord"
)

// roleCast is who the role tests have: alice (h.user) holds the role,
// bob holds another, carol none.
type roleCast struct {
	role, other discord.RoleID
	bob, carol  discord.User
	dm          discord.ChannelID
}

func (c *roleCast) setup(h *harness) {
	c.role = h.fd.AddRole(h.guild, "agents")
	c.other = h.fd.AddRole(h.guild, "visitors")
	c.bob, c.carol = h.fd.User("bob"), h.fd.User("carol")
	h.fd.SetRoles(h.guild, h.user, c.role)
	h.fd.SetRoles(h.guild, c.bob, c.other)
	c.dm = h.fd.AddChannel(fakediscord.Channel{})
}

// refusedSlash runs /claude as user and checks it is refused with the
// ephemeral notice.
func refusedSlash(t *testing.T, h *harness, user discord.User) {
	t.Helper()
	id := h.fd.Interact(h.channel, user, "claude", map[string]string{"prompt": user.Username + " slash"})
	h.fd.Wait(t, "the refusal of "+user.Username+"'s /claude", waitLong, func() bool { return len(h.fd.Callbacks(id)) == 1 })
	for _, a := range h.fd.Answers() {
		if a.Interaction == id && (!a.Ephemeral || !strings.Contains(a.Content, "not allowed")) {
			t.Errorf("%s's /claude answered %+v, want the ephemeral refusal", user.Username, a)
		}
	}
}

// prompts are the prompts the agent was given, in order.
func (h *harness) prompts() string {
	var out []string
	for _, r := range h.backend.Requests() {
		out = append(out, r.Prompt)
	}
	return strings.Join(out, "|")
}

// With ALLOWED_ROLE_IDS alone, only the role's members may use the bot,
// by mention and by /claude; a direct message carries no roles, so even a
// member's is refused.
func TestAllowedRolesAlone(t *testing.T) {
	var c roleCast
	h := startGateway(t, harnessOptions{setup: func(h *harness) map[string]string {
		c.setup(h)
		return map[string]string{config.EnvAllowedRoleIDs: c.role.String()}
	}})
	bot := fakediscord.Mention(h.fd.Bot)
	h.fd.Post(h.channel, c.bob, bot+" bob asks", h.fd.Bot)
	h.fd.Post(h.channel, c.carol, bot+" carol asks", h.fd.Bot)
	h.fd.Post(c.dm, h.user, "alice in a DM")
	refusedSlash(t, h, c.bob)

	m := h.mention(h.channel, "alice asks")
	h.waitAnswer(h.channel, m.ID)
	id := h.fd.Interact(h.channel, h.user, "claude", map[string]string{"prompt": "alice slash"})
	if got := h.answer(id); got != "echo: alice slash" {
		t.Errorf("alice's /claude answered %q", got)
	}
	if got := h.prompts(); got != "alice asks|alice slash" {
		t.Errorf("prompts run = %q; only alice's in the guild may run", got)
	}
	if n := len(h.fd.BotMessages(c.dm)); n != 0 {
		t.Errorf("%d bot messages in the DM, want none: a DM carries no roles", n)
	}
	// Messages are taken in order: bob's, carol's and the DM were turned
	// away before alice's was taken.
	if n := strings.Count(h.logs.String(), "prompt refused by the allowlists"); n != 3 {
		t.Errorf("%d prompts refused by the allowlists, want 3 (bob, carol, alice's DM)", n)
	}
}

// With both ALLOWED_USER_IDS and ALLOWED_ROLE_IDS either suffices: a
// listed user without the role, and a member with it; the listed user
// may also write in a DM.
func TestAllowedRolesWithUsers(t *testing.T) {
	var c roleCast
	h := startGateway(t, harnessOptions{setup: func(h *harness) map[string]string {
		c.setup(h)
		return map[string]string{
			config.EnvAllowedRoleIDs: c.role.String(),
			config.EnvAllowedUserIDs: c.carol.ID.String(),
		}
	}})
	bot := fakediscord.Mention(h.fd.Bot)
	h.fd.Post(h.channel, c.bob, bot+" bob asks", h.fd.Bot)
	h.fd.Post(c.dm, h.user, "alice in a DM")
	refusedSlash(t, h, c.bob)

	m := h.mention(h.channel, "alice asks")
	h.waitAnswer(h.channel, m.ID)
	m = h.fd.Post(h.channel, c.carol, bot+" carol asks", h.fd.Bot)
	h.waitAnswer(h.channel, m.ID)
	dm := h.fd.AddChannel(fakediscord.Channel{})
	h.fd.Post(dm, c.carol, "carol in a DM")
	h.waitReplies(dm, 1)
	if got := h.prompts(); got != "alice asks|carol asks|carol in a DM" {
		t.Errorf("prompts run = %q", got)
	}
	if n := len(h.fd.BotMessages(c.dm)); n != 0 {
		t.Errorf("%d bot messages in alice's DM, want none", n)
	}
	if n := strings.Count(h.logs.String(), "prompt refused by the allowlists"); n != 2 {
		t.Errorf("%d prompts refused by the allowlists, want 2 (bob, alice's DM)", n)
	}
}

// With APPROVER_ROLE_IDS a member of the role answers another person's
// tool approval; a member without it is told privately that it is not
// theirs to answer, and nothing reaches the CLI.
func TestApproverByRole(t *testing.T) {
	var role discord.RoleID
	var olga, mallory discord.User
	h := startApprovalGateway(t, harnessOptions{setup: func(h *harness) map[string]string {
		role = h.fd.AddRole(h.guild, "approvers")
		other := h.fd.AddRole(h.guild, "visitors")
		olga, mallory = h.fd.User("olga"), h.fd.User("mallory")
		h.fd.SetRoles(h.guild, olga, role)
		h.fd.SetRoles(h.guild, mallory, other)
		return map[string]string{config.EnvApproverRoleIDs: role.String()}
	}})
	prompt := h.mention(h.channel, "please touch approved.txt")
	ask := h.waitApproval(h.channel)
	allow := button(t, ask, "Allow")

	refusal := h.fd.Press(h.channel, ask.ID, mallory, allow, 0)
	h.fd.Wait(t, "mallory's refusal", waitLong, func() bool {
		for _, a := range h.fd.Answers() {
			if a.Interaction == refusal && a.Ephemeral && strings.Contains(a.Content, "Only the person who asked") {
				return true
			}
		}
		return false
	})
	if got := h.answers(); len(got) != 0 {
		t.Fatalf("the CLI got an answer after a refused press: %+v", got)
	}

	h.fd.Press(h.channel, ask.ID, olga, allow, 0)
	h.fd.Wait(t, "the approval message to say Allowed by olga", waitLong, func() bool {
		m, _ := h.fd.Message(h.channel, ask.ID)
		return len(m.Buttons()) == 0 && strings.HasPrefix(m.Content, "✅ Allowed by <@"+olga.ID.String()+">")
	})
	reply := h.waitReply(h.channel, ask.ID)
	if reply.Content != cliAllowed || reply.Reference == nil || reply.Reference.MessageID != prompt.ID {
		t.Errorf("reply = %q (to %+v), want %q to the prompt", reply.Content, reply.Reference, cliAllowed)
	}
	if r := h.onlyAnswer().Response.Response; r.Behavior != "allow" {
		t.Errorf("the CLI's answer = %+v, want allow", r)
	}
}

// The gateway's own approvers (budget Lift, worktree merges, project
// switches) count roles like users: APPROVER_IDS or APPROVER_ROLE_IDS;
// without either, ALLOWED_USER_IDS or ALLOWED_ROLE_IDS; without any,
// Manage Server.
func TestIsApproverCountsRoles(t *testing.T) {
	tests := []struct {
		name string
		cfg  config.Config
		p    gwdiscord.Press
		want bool
	}{
		{"approver by id", config.Config{ApproverIDs: []string{"u"}}, gwdiscord.Press{UserID: "u"}, true},
		{"approver by role", config.Config{ApproverRoleIDs: []string{"r"}}, gwdiscord.Press{UserID: "u", Roles: []string{"x", "r"}}, true},
		{"ids and roles: the role suffices", config.Config{ApproverIDs: []string{"a"}, ApproverRoleIDs: []string{"r"}}, gwdiscord.Press{UserID: "u", Roles: []string{"r"}}, true},
		{"approver roles: another role", config.Config{ApproverRoleIDs: []string{"r"}}, gwdiscord.Press{UserID: "u", Roles: []string{"x"}, ManageGuild: true}, false},
		{"approver roles win over the allowlist", config.Config{ApproverRoleIDs: []string{"r"}, AllowedUserIDs: []string{"u"}}, gwdiscord.Press{UserID: "u"}, false},
		{"allowed role without approvers", config.Config{AllowedRoleIDs: []string{"r"}}, gwdiscord.Press{UserID: "u", Roles: []string{"r"}}, true},
		{"allowed role, not a member", config.Config{AllowedRoleIDs: []string{"r"}}, gwdiscord.Press{UserID: "u", ManageGuild: true}, false},
		{"nothing listed: Manage Server", config.Config{}, gwdiscord.Press{UserID: "u", ManageGuild: true}, true},
		{"nothing listed, no permission", config.Config{}, gwdiscord.Press{UserID: "u", Roles: []string{"r"}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := isApprover(&tt.cfg, tt.p); got != tt.want {
				t.Errorf("isApprover = %v, want %v", got, tt.want)
			}
		})
	}
}

// A schedule change the agent made is applied by a member of
// APPROVER_ROLE_IDS (beside an APPROVER_IDS user); a member without the
// role is refused, even with Administrator.
func TestApplyByApproverRole(t *testing.T) {
	script := filepath.Join(t.TempDir(), "claude")
	if err := os.WriteFile(script, []byte(scriptedClaude), 0o755); err != nil {
		t.Fatal(err)
	}
	claude, err := backends.New(config.BackendClaude, backends.Options{Binary: script, Env: os.Environ()})
	if err != nil {
		t.Fatal(err)
	}
	var ops discord.ChannelID
	var olga, mallory discord.User
	h := startGateway(t, harnessOptions{
		backend: claude,
		files:   map[string]string{"agents.md": heldAgents},
		setup: func(h *harness) map[string]string {
			ops = h.fd.AddChannel(fakediscord.Channel{GuildID: h.guild, Name: "ops"})
			role := h.fd.AddRole(h.guild, "approvers")
			olga, mallory = h.fd.User("olga"), h.fd.User("mallory")
			h.fd.SetRoles(h.guild, olga, role)
			return map[string]string{
				config.EnvOutputChannelID: ops.String(),
				config.EnvApproverIDs:     h.fd.User("boss").ID.String(),
				config.EnvApproverRoleIDs: role.String(),
			}
		},
	})
	h.mention(h.channel, "please add a job that posts every minute")
	h.waitReplies(h.channel, 1)
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
	apply := held.Buttons()[0].ID

	refusal := h.fd.Press(ops, held.ID, mallory, apply, discord.PermissionAdministrator)
	h.fd.Wait(t, "mallory's refusal", waitLong, func() bool {
		for _, a := range h.fd.Answers() {
			if a.Interaction == refusal && a.Ephemeral && strings.Contains(a.Content, "Only the gateway's approvers") {
				return true
			}
		}
		return false
	})
	h.fd.Press(ops, held.ID, olga, apply, 0)
	h.fd.Wait(t, "the change applied by olga", waitLong, func() bool {
		m, _ := h.fd.Message(ops, held.ID)
		return len(m.Buttons()) == 0 && strings.Contains(m.Content, "Applied by <@"+olga.ID.String()+">")
	})
	if b, _ := os.ReadFile(filepath.Join(h.cfg.ConfigDir, "agents.md")); !strings.Contains(string(b), "### spam") {
		t.Errorf("agents.md after Apply:\n%s", b)
	}
}
