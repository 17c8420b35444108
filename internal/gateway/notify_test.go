package gateway

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/google/go-cmp/cmp"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/config"
)

// allowedMentions is allowed_mentions as the bot sent it.
type allowedMentions struct {
	Parse []string `json:"parse"`
	Users []string `json:"users"`
	Roles []string `json:"roles"`
}

func decodeMentions(t *testing.T, raw json.RawMessage) allowedMentions {
	t.Helper()
	var am allowedMentions
	if err := json.Unmarshal(raw, &am); err != nil {
		t.Fatalf("allowed_mentions %s: %v", raw, err)
	}
	if am.Parse == nil {
		t.Errorf("allowed_mentions %s has no parse: Discord would then ping whatever the text mentions", raw)
	}
	return am
}

// notifyHarness starts a gateway with NOTIFY_AFTER set to after, whose
// agent answers with a text that mentions another user, a role and
// @everyone.
func notifyHarness(t *testing.T, after string) (*harness, discord.User) {
	t.Helper()
	var bob discord.User
	h := startGateway(t, harnessOptions{
		env: map[string]string{config.EnvNotifyAfter: after},
		setup: func(h *harness) map[string]string {
			bob = h.fd.User("bob")
			return nil
		},
		respond: func(_ context.Context, req backends.Request, _ func(backends.Event)) (backends.Result, error) {
			text := "Done: " + req.Prompt + ". Tell <@" + bob.ID.String() + "> and <@&42>, and @everyone."
			return backends.Result{SessionID: "s", Text: text}, nil
		},
	})
	return h, bob
}

// A turn that ran longer than NOTIFY_AFTER (1ns here: every turn does)
// mentions its author at the start of its answer's first message, and the
// message's allowed_mentions name that user alone: the author's phone
// buzzes, while the user, the role and @everyone the agent wrote ping
// nobody. The answer's later messages ping nobody either.
func TestLongTurnPingsItsAuthorOnly(t *testing.T) {
	h, bob := notifyHarness(t, "1ns")
	alice := h.user.ID.String()

	m := h.mention(h.channel, "build it "+strings.Repeat("word ", 450))
	first := h.waitAnswer(h.channel, m.ID)
	if want := "<@" + alice + "> Done: build it"; !strings.HasPrefix(first.Content, want) {
		t.Errorf("first message = %.60q…, want it to begin %q", first.Content, want)
	}
	am := decodeMentions(t, first.AllowedMentions)
	if diff := cmp.Diff(allowedMentions{Parse: []string{}, Users: []string{alice}}, am); diff != "" {
		t.Errorf("first message's allowed_mentions (-want +got):\n%s", diff)
	}
	h.fd.Wait(t, "the answer's second message", waitLong, func() bool { return len(h.fd.BotMessages(h.channel)) >= 2 })
	for _, later := range h.fd.BotMessages(h.channel)[1:] {
		if am := decodeMentions(t, later.AllowedMentions); len(am.Users) != 0 || len(am.Roles) != 0 || len(am.Parse) != 0 {
			t.Errorf("a later message of the answer may ping: %s", later.AllowedMentions)
		}
		if strings.Contains(later.Content, "<@"+alice+">") {
			t.Errorf("a later message mentions the author again: %.60q", later.Content)
		}
	}
	if strings.Contains(string(first.AllowedMentions), bob.ID.String()) {
		t.Errorf("bob, named by the agent, may be pinged: %s", first.AllowedMentions)
	}
}

// A /claude command's answer edits its "thinking" response: a long turn
// pings its user there the same way.
func TestLongSlashTurnPingsItsUser(t *testing.T) {
	h, _ := notifyHarness(t, "1ns")
	alice := h.user.ID.String()
	id := h.fd.Interact(h.channel, h.user, "claude", map[string]string{"prompt": "deploy"})
	if got, want := h.answer(id), "<@"+alice+"> Done: deploy."; !strings.HasPrefix(got, want) {
		t.Errorf("answer = %q, want it to begin %q", got, want)
	}
	for _, a := range h.fd.Answers() {
		if a.Interaction == id && a.Original {
			if diff := cmp.Diff(allowedMentions{Parse: []string{}, Users: []string{alice}}, decodeMentions(t, a.AllowedMentions)); diff != "" {
				t.Errorf("answer's allowed_mentions (-want +got):\n%s", diff)
			}
		}
	}
}

// A turn shorter than NOTIFY_AFTER, or any turn with NOTIFY_AFTER=0, is
// answered without a mention, and its allowed_mentions name nobody.
func TestShortTurnDoesNotPing(t *testing.T) {
	for _, after := range []string{"1h", "0"} {
		t.Run(after, func(t *testing.T) {
			h, _ := notifyHarness(t, after)
			m := h.mention(h.channel, "quick")
			got := h.waitAnswer(h.channel, m.ID)
			if !strings.HasPrefix(got.Content, "Done: quick.") {
				t.Errorf("answer = %q, want no mention in front", got.Content)
			}
			if am := decodeMentions(t, got.AllowedMentions); len(am.Users) != 0 || len(am.Roles) != 0 || len(am.Parse) != 0 {
				t.Errorf("allowed_mentions = %s, want nobody named", got.AllowedMentions)
			}
		})
	}
}
