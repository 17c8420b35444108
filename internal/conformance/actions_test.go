//go:build conformance

package conformance

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/google/go-cmp/cmp"

	"github.com/agentgateway/gateway/internal/actions"
	"github.com/agentgateway/gateway/internal/fakeapi"
	"github.com/agentgateway/gateway/internal/fakediscord"
)

// restCall is a REST call as the actions test compares them.
type restCall struct{ Method, Path string }

// writesOutside lists the bot's non-GET REST calls that are not about the
// prompt's channel or the slash commands: what its actions changed.
func writesOutside(fd *fakediscord.Server, prompt discord.ChannelID) []fakediscord.Request {
	var out []fakediscord.Request
	for _, r := range fd.Requests() {
		if r.Method == "GET" || strings.HasPrefix(r.Path, "/channels/"+prompt.String()+"/") ||
			strings.HasPrefix(r.Path, "/applications/") || strings.HasPrefix(r.Path, "/interactions/") {
			continue
		}
		out = append(out, r)
	}
	return out
}

// actionsHeading is how the runtime heads the section that teaches the
// actions in the system prompt.
const actionsHeading = "## Discord Actions"

// The built gateway with the real claude CLI: a reply carrying two action
// blocks creates a channel and posts in another one through Discord's REST
// API, and the prompt's answer is the reply without the blocks plus a Done
// line for each, in order. claude hands the section that teaches the
// actions, with its examples, to the model in the request's system; in a
// DM, where no action may run, the section is left out.
func TestConformanceClaudeDiscordActions(t *testing.T) {
	bin := buildGateway(t)
	work := t.TempDir()
	configDir := filepath.Join(work, "config")
	if err := os.MkdirAll(configDir, 0o700); err != nil {
		t.Fatal(err)
	}
	const (
		before = "Setting up the standup channel and telling everyone."
		after  = "Both are on their way."
		topic  = "Daily notes"
		notice = "Standup notes now live in #standup."
		// persona marks the persona's text in the system prompt.
		persona = "ACTIONS-PERSONA-MARK"
	)
	identity := "# Identity\n\nYou are Tova, the team's helper. " + persona + "\n"
	if err := os.WriteFile(filepath.Join(configDir, "identity.md"), []byte(identity), 0o600); err != nil {
		t.Fatal(err)
	}
	reply := before + "\n" +
		actions.OpenTag + `{"type":"channelCreate","name":"standup","topic":"` + topic + `"}` + actions.CloseTag + "\n" +
		actions.OpenTag + `{"type":"sendMessage","channel":"announcements","content":"` + notice + `"}` + actions.CloseTag + "\n" +
		after
	api := fakeapi.StartAnthropic(t, fakeapi.Text(reply), fakeapi.Text("Hello in private."))
	fd := fakediscord.Start(t)
	guild, general := fd.AddGuild("conformance")
	announcements := fd.AddChannel(fakediscord.Channel{GuildID: guild, Type: discord.GuildText, Name: "announcements"})
	dm := fd.AddChannel(fakediscord.Channel{Type: discord.DirectMessage})
	alice := fd.User("alice")
	gatewayRun(t, bin, work, gatewayEnv(t, fd, api.URL(), configDir), api)
	fd.Wait(t, "the bot to connect", 30*time.Second, fd.Connected)

	start := time.Now()
	prompt := fd.Post(general, alice, fakediscord.Mention(fd.Bot)+" Set up a standup channel and announce it.", fd.Bot)
	var answer fakediscord.Message
	fd.Wait(t, "the answer with the action report", 90*time.Second, func() bool {
		// The card, which replies to the prompt too, starts with its
		// status.
		for _, m := range fd.BotMessages(general) {
			if m.Reference != nil && m.Reference.MessageID == prompt.ID && strings.HasPrefix(m.Content, before) {
				answer = m
				return true
			}
		}
		return false
	})
	t.Logf("prompt -> answer with two actions run: %v", time.Since(start))

	// The two lines of blocks leave one blank line.
	want := before + "\n\n" + after + "\n\nDone: created #standup\nDone: posted in #announcements"
	if diff := cmp.Diff(want, answer.Content); diff != "" {
		t.Errorf("the answer (-want +got):\n%s", diff)
	}

	// What Discord received: the two calls, and nothing else changed.
	writes := writesOutside(fd, general)
	var calls []restCall
	for _, r := range writes {
		calls = append(calls, restCall{r.Method, r.Path})
	}
	wantCalls := []restCall{
		{"POST", "/guilds/" + guild.String() + "/channels"},
		{"POST", "/channels/" + announcements.String() + "/messages"},
	}
	if diff := cmp.Diff(wantCalls, calls); diff != "" {
		t.Fatalf("the REST calls of the actions (-want +got):\n%s", diff)
	}
	var created struct {
		Name  string              `json:"name"`
		Topic string              `json:"topic"`
		Type  discord.ChannelType `json:"type"`
	}
	if err := json.Unmarshal(writes[0].Body, &created); err != nil {
		t.Fatalf("the channel's body %s: %v", writes[0].Body, err)
	}
	if created.Name != "standup" || created.Topic != topic || created.Type != discord.GuildText {
		t.Errorf("POST /guilds/{id}/channels sent %s; want a text channel standup with the topic %q", writes[0].Body, topic)
	}
	var posted struct {
		Content         string `json:"content"`
		AllowedMentions *struct {
			Parse *[]string `json:"parse"`
		} `json:"allowed_mentions"`
	}
	if err := json.Unmarshal(writes[1].Body, &posted); err != nil {
		t.Fatalf("the message's body %s: %v", writes[1].Body, err)
	}
	if posted.Content != notice {
		t.Errorf("the message posted = %q, want %q", posted.Content, notice)
	}
	if m := posted.AllowedMentions; m == nil || m.Parse == nil || len(*m.Parse) != 0 {
		t.Errorf("the message's allowed_mentions in %s: want parse [] (no pings)", writes[1].Body)
	}
	var standup []discord.Channel
	for _, c := range fd.Channels(guild) {
		if c.Name == "standup" {
			standup = append(standup, c)
		}
	}
	if len(standup) != 1 || standup[0].Topic != topic {
		t.Errorf("the guild's standup channels = %+v, want one with the topic %q", standup, topic)
	}
	var inAnnouncements []string
	for _, m := range fd.BotMessages(announcements) {
		inAnnouncements = append(inAnnouncements, m.Content)
	}
	if diff := cmp.Diff([]string{notice}, inAnnouncements); diff != "" {
		t.Errorf("the bot's messages in #announcements (-want +got):\n%s", diff)
	}

	// What the model was taught.
	main := api.MainRequests()
	if len(main) != 1 {
		t.Fatalf("got %d main requests, want 1", len(main))
	}
	spec, ok := actions.Lookup("channelCreate")
	if !ok {
		t.Fatal("no channelCreate in the catalog")
	}
	example := actions.OpenTag + spec.Example + actions.CloseTag
	sys := main[0].System()
	at := strings.Index(sys, actionsHeading)
	if at < 0 || !strings.Contains(sys[at:], example) {
		t.Fatalf("the system claude sent has no %q section with %s:\n%s", actionsHeading, example, sys)
	}
	if p := strings.Index(sys, persona); p < 0 || p > at {
		t.Errorf("the persona (at %d) does not come before the actions section (at %d)", p, at)
	}
	blocks := main[0].SystemBlocks()
	last := blocks[len(blocks)-1]
	if i := strings.Index(last, actionsHeading); i >= 0 {
		t.Logf("system: %d blocks; the actions section starts at %d of the last block's %d chars (%d chars of it)",
			len(blocks), i, len(last), len(last)-i)
	}
	if strings.Contains(flatten(main[0]), actionsHeading) {
		t.Errorf("the actions section reached the messages too, not only the system")
	}

	// In a DM no action may run, and none is taught.
	hello := fd.Post(dm, alice, "Hello?")
	fd.Wait(t, "the answer in the DM", 90*time.Second, func() bool {
		_, ok := replyTo(fd, dm, hello.ID, "Hello in private.")
		return ok
	})
	main = api.MainRequests()
	if len(main) != 2 {
		t.Fatalf("got %d main requests, want 2", len(main))
	}
	dmSys := main[1].System()
	if !strings.Contains(dmSys, persona) {
		t.Fatalf("the system claude sent for the DM lacks the persona:\n%s", dmSys)
	}
	if strings.Contains(dmSys, actionsHeading) || strings.Contains(dmSys, actions.OpenTag) {
		t.Errorf("the system claude sent for the DM teaches the actions:\n%s", dmSys)
	}
	if m := flatten(main[1]); strings.Contains(m, actions.OpenTag) {
		t.Errorf("the DM's messages mention the actions:\n%s", m)
	}
}
