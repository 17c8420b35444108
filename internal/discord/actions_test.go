package discord

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/diamondburned/arikawa/v3/utils/httputil"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/agentgateway/gateway/internal/actions"
	"github.com/agentgateway/gateway/internal/fakediscord"
	"github.com/agentgateway/gateway/internal/reply"
)

// actionCtx bounds one call of an action test.
func actionCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	t.Cleanup(cancel)
	return ctx
}

// body decodes the JSON body of the only request matching method and
// path exactly.
func (tb *testBot) body(method, path string) map[string]any {
	tb.t.Helper()
	var got []fakediscord.Request
	for _, r := range tb.fd.Requests() {
		if r.Method == method && r.Path == path {
			got = append(got, r)
		}
	}
	if len(got) != 1 {
		tb.t.Fatalf("%d requests %s %s, want 1", len(got), method, path)
	}
	var out map[string]any
	if len(got[0].Body) > 0 {
		if err := json.Unmarshal(got[0].Body, &out); err != nil {
			tb.t.Fatalf("%s %s body %q: %v", method, path, got[0].Body, err)
		}
	}
	return out
}

func (tb *testBot) botMessage(ch discord.ChannelID, id string) fakediscord.Message {
	tb.t.Helper()
	sf, err := discord.ParseSnowflake(id)
	if err != nil {
		tb.t.Fatalf("message id %q: %v", id, err)
	}
	return tb.message(ch, discord.MessageID(sf))
}

var noPingsJSON = map[string]any{"parse": []any{}}

func TestActionsChannels(t *testing.T) {
	tb := startBot(t, Options{})
	ctx := actionCtx(t)
	g := tb.guild.String()
	cat := tb.fd.AddChannel(fakediscord.Channel{GuildID: tb.guild, Type: discord.GuildCategory, Name: "Projects"})

	created, err := tb.CreateChannel(ctx, g, actions.NewChannel{Name: "standup", Topic: "Daily notes", ParentID: cat.String()})
	if err != nil {
		t.Fatal(err)
	}
	want := actions.Channel{ID: created.ID, Name: "standup", Topic: "Daily notes", ParentID: cat.String(), Type: 0}
	if diff := cmp.Diff(want, created); diff != "" {
		t.Errorf("CreateChannel (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]any{"name": "standup", "topic": "Daily notes", "parent_id": cat.String()},
		tb.body("POST", "/guilds/"+g+"/channels")); diff != "" {
		t.Errorf("create channel body (-want +got):\n%s", diff)
	}

	list, err := tb.Channels(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	wantList := []actions.Channel{
		{ID: tb.channel.String(), Name: "general"},
		{ID: cat.String(), Name: "Projects", Type: int(discord.GuildCategory)},
		want,
	}
	if diff := cmp.Diff(wantList, list); diff != "" {
		t.Errorf("Channels (-want +got):\n%s", diff)
	}

	// Only the topic changes; an empty topic clears it.
	topic := "Standup at 9:30"
	edited, err := tb.EditChannel(ctx, created.ID, nil, &topic)
	if err != nil {
		t.Fatal(err)
	}
	if edited.Name != "standup" || edited.Topic != topic {
		t.Errorf("EditChannel = %+v", edited)
	}
	if diff := cmp.Diff(map[string]any{"topic": topic}, tb.body("PATCH", "/channels/"+created.ID)); diff != "" {
		t.Errorf("edit body (-want +got):\n%s", diff)
	}
	name, none := "daily", ""
	if edited, err = tb.EditChannel(ctx, created.ID, &name, &none); err != nil || edited.Name != "daily" || edited.Topic != "" {
		t.Errorf("rename and clear = %+v, %v", edited, err)
	}

	if err := tb.DeleteChannel(ctx, created.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok := tb.fd.ChannelInfo(mustChannel(t, created.ID)); ok {
		t.Error("the channel is still there after DeleteChannel")
	}
}

func mustChannel(t *testing.T, id string) discord.ChannelID {
	t.Helper()
	sf, err := discord.ParseSnowflake(id)
	if err != nil {
		t.Fatal(err)
	}
	return discord.ChannelID(sf)
}

func TestActionsThreads(t *testing.T) {
	tb := startBot(t, Options{})
	ctx := actionCtx(t)
	ch := tb.channel.String()
	prompt := tb.fd.Post(tb.channel, tb.user, "release 1.2 is out")

	fromMsg, err := tb.CreateThread(ctx, ch, prompt.ID.String(), "Release 1.2")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(actions.Channel{ID: prompt.ID.String(), Name: "Release 1.2", ParentID: ch, Type: int(discord.GuildPublicThread)}, fromMsg); diff != "" {
		t.Errorf("thread from a message (-want +got):\n%s", diff)
	}
	// Without a message, the type must be given: API v9 would make the
	// thread private.
	plain, err := tb.CreateThread(ctx, ch, "", "Planning")
	if err != nil {
		t.Fatal(err)
	}
	if plain.Type != int(discord.GuildPublicThread) || plain.ParentID != ch {
		t.Errorf("thread without a message = %+v, want public in %s", plain, ch)
	}
	if diff := cmp.Diff(map[string]any{"name": "Planning", "type": float64(11), "auto_archive_duration": float64(1440)},
		tb.body("POST", "/channels/"+ch+"/threads")); diff != "" {
		t.Errorf("start thread body (-want +got):\n%s", diff)
	}

	tb.fd.ArchiveThread(mustChannel(t, plain.ID))
	archived, err := tb.ArchivedThreads(ctx, ch)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]actions.Channel{plain}, archived); diff != "" {
		t.Errorf("ArchivedThreads (-want +got):\n%s", diff)
	}
}

func TestActionsSend(t *testing.T) {
	tb := startBot(t, Options{NoncePrefix: "gw1"})
	ctx := actionCtx(t)
	ch := tb.channel.String()

	id, err := tb.Send(ctx, ch, "The build is green again, <@"+tb.user.ID.String()+">.", nil)
	if err != nil {
		t.Fatal(err)
	}
	m := tb.botMessage(tb.channel, id)
	if !strings.HasPrefix(m.Content, "The build is green") || !strings.HasPrefix(m.Nonce, "gw1s") || len(m.Nonce) > 25 {
		t.Errorf("message = %q with nonce %q; want the content and a nonce of at most 25 characters", m.Content, m.Nonce)
	}
	var mentions map[string]any
	json.Unmarshal(m.AllowedMentions, &mentions)
	if diff := cmp.Diff(noPingsJSON, mentions, cmpopts.IgnoreMapEntries(func(k string, _ any) bool { return k == "replied_user" })); diff != "" {
		t.Errorf("allowed_mentions (-want +got):\n%s", diff)
	}

	// A file goes up with the message, under its own name.
	dir := t.TempDir()
	path := filepath.Join(dir, "report.csv")
	if err := os.WriteFile(path, []byte("a,b\n1,2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	id, err = tb.Send(ctx, ch, "This week's report", []string{path})
	if err != nil {
		t.Fatal(err)
	}
	m = tb.botMessage(tb.channel, id)
	if len(m.Files) != 1 || m.Files[0].Name != "report.csv" || string(m.Files[0].Data) != "a,b\n1,2\n" || m.Files[0].ContentType != "text/csv; charset=utf-8" {
		t.Errorf("uploaded files = %+v", m.Files)
	}

	// Text past Discord's limit is split; the first message's id comes
	// back.
	long := strings.Repeat("word ", reply.DiscordLimit/5+100)
	before := len(tb.fd.BotMessages(tb.channel))
	id, err = tb.Send(ctx, ch, long, nil)
	if err != nil {
		t.Fatal(err)
	}
	msgs := tb.fd.BotMessages(tb.channel)
	if len(msgs) != before+2 || msgs[before].ID.String() != id {
		t.Errorf("a long message made %d messages (first %v), want 2 starting with %s", len(msgs)-before, msgs[before].ID, id)
	}
}

// A send that Discord carried out but answered with a 5xx is tried again
// with the same nonce: it is posted once and its id comes back.
func TestActionsSendRetriesWithoutDuplicates(t *testing.T) {
	tb := startBot(t, Options{DeliveryBackoff: time.Millisecond})
	ctx := actionCtx(t)
	path := "/channels/" + tb.channel.String() + "/messages"
	tb.fd.Fail(fakediscord.Fault{Method: "POST", Path: path, Status: 502, Apply: true})

	id, err := tb.Send(ctx, tb.channel.String(), "Deploy finished.", nil)
	if err != nil {
		t.Fatal(err)
	}
	msgs := tb.fd.BotMessages(tb.channel)
	if len(msgs) != 1 || msgs[0].ID.String() != id {
		t.Fatalf("bot messages = %d (want 1 with id %s)", len(msgs), id)
	}
	if n := len(tb.requests("POST", path)); n != 2 {
		t.Errorf("%d POSTs, want 2 (the failed one and its retry)", n)
	}
}

func TestActionsSendRefusesBadFiles(t *testing.T) {
	tb := startBot(t, Options{UploadLimit: 16})
	ctx := actionCtx(t)
	dir := t.TempDir()
	big := filepath.Join(dir, "big.bin")
	os.WriteFile(big, make([]byte, 17), 0o600)
	empty := filepath.Join(dir, "empty.txt")
	os.WriteFile(empty, nil, 0o600)

	tests := []struct {
		name string
		path string
		want string
	}{
		{"relative", "notes.txt", "not an absolute path"},
		{"missing", filepath.Join(dir, "gone.txt"), "no such file"},
		{"a folder", dir, "not a regular file"},
		{"empty", empty, "empty"},
		{"too large", big, "upload limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tb.Send(ctx, tb.channel.String(), "see file", []string{tt.path})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Send(%s) = %v, want an error saying %q", tt.name, err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), dir) {
				t.Errorf("the error names where the file is: %v", err)
			}
		})
	}
	if n := len(tb.fd.BotMessages(tb.channel)); n != 0 {
		t.Errorf("%d messages posted; a refused file must stop the send", n)
	}
}

func TestActionsMessages(t *testing.T) {
	tb := startBot(t, Options{})
	ctx := actionCtx(t)
	ch := tb.channel.String()
	first := tb.fd.Post(tb.channel, tb.user, "first")
	second := tb.fd.PostFiles(tb.channel, tb.user, "second", []fakediscord.Upload{{Name: "log.txt", ContentType: "text/plain", Data: []byte("x")}})

	msgs, err := tb.Messages(ctx, ch, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || msgs[0].ID != second.ID.String() || msgs[1].ID != first.ID.String() {
		t.Fatalf("Messages = %+v, want second then first", msgs)
	}
	want := actions.Message{
		ID: second.ID.String(), ChannelID: ch, AuthorID: tb.user.ID.String(), Author: "alice", Content: "second",
		// Discord's timestamps in JSON are whole seconds.
		Time: second.Timestamp.Time().Truncate(time.Second), Attachments: []string{string(second.Attachments[0].URL)},
	}
	if diff := cmp.Diff(want, msgs[0]); diff != "" {
		t.Errorf("newest message (-want +got):\n%s", diff)
	}
	if got := tb.requests("GET", "/channels/"+ch+"/messages"); len(got) != 1 || got[0].Query != "limit=2" {
		t.Errorf("history requests = %+v, want one with limit=2", got)
	}

	one, err := tb.Message(ctx, ch, first.ID.String())
	if err != nil || one.Content != "first" || one.Author != "alice" {
		t.Errorf("Message = %+v, %v", one, err)
	}

	// Reactions: unicode, and a custom emoji as a message shows it.
	if err := tb.React(ctx, ch, first.ID.String(), "👍"); err != nil {
		t.Fatal(err)
	}
	if err := tb.React(ctx, ch, first.ID.String(), "<:party:123456789012345678>"); err != nil {
		t.Fatal(err)
	}
	if err := tb.Unreact(ctx, ch, first.ID.String(), "👍"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string][]discord.UserID{"👍": {}, "party:123456789012345678": {tb.fd.Bot.ID}},
		tb.fd.Reactions(tb.channel, first.ID), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("reactions (-want +got):\n%s", diff)
	}

	// Pins, last pinned first.
	for _, id := range []discord.MessageID{first.ID, second.ID} {
		if err := tb.Pin(ctx, ch, id.String()); err != nil {
			t.Fatal(err)
		}
	}
	pins, err := tb.Pins(ctx, ch)
	if err != nil {
		t.Fatal(err)
	}
	if len(pins) != 2 || pins[0].ID != second.ID.String() || !pins[0].Pinned {
		t.Errorf("Pins = %+v, want second then first, pinned", pins)
	}
	if err := tb.Unpin(ctx, ch, first.ID.String()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]discord.MessageID{second.ID}, tb.fd.Pins(tb.channel)); diff != "" {
		t.Errorf("pins after unpin (-want +got):\n%s", diff)
	}

	// The bot edits and deletes its own message.
	id, err := tb.Send(ctx, ch, "The meeting is at 9.", nil)
	if err != nil {
		t.Fatal(err)
	}
	var d actions.Discord = tb.Bot
	if err := d.EditMessage(ctx, ch, id, "Corrected: the meeting is at 10."); err != nil {
		t.Fatal(err)
	}
	if m := tb.botMessage(tb.channel, id); m.Content != "Corrected: the meeting is at 10." || !m.Edited {
		t.Errorf("after EditMessage: %q (edited %v)", m.Content, m.Edited)
	}
	if err := d.DeleteMessage(ctx, ch, id); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{id}, idStrings(tb.fd.Deleted(tb.channel))); diff != "" {
		t.Errorf("deleted (-want +got):\n%s", diff)
	}
}

func idStrings(ids []discord.MessageID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.String()
	}
	return out
}

func TestActionsPoll(t *testing.T) {
	tb := startBot(t, Options{})
	ctx := actionCtx(t)
	p := actions.Poll{Question: "Lunch?", Answers: []string{"Pizza", "Sushi"}, Duration: 90 * time.Minute, MultiSelect: true}

	id, err := tb.CreatePoll(ctx, tb.channel.String(), p)
	if err != nil {
		t.Fatal(err)
	}
	// Posting the same poll again (a retry) shows it once.
	again, err := tb.CreatePoll(ctx, tb.channel.String(), p)
	if err != nil || again != id {
		t.Errorf("the same poll again = %s, %v; want %s", again, err, id)
	}
	polls := tb.fd.Polls(tb.channel)
	if len(polls) != 1 {
		t.Fatalf("%d polls, want 1", len(polls))
	}
	var mentions map[string]any
	json.Unmarshal(polls[0].AllowedMentions, &mentions)
	want := fakediscord.Poll{Message: polls[0].Message, Question: "Lunch?", Answers: []string{"Pizza", "Sushi"}, Hours: 2, MultiSelect: true}
	got := polls[0]
	got.AllowedMentions = nil
	if diff := cmp.Diff(want, got); diff != "" || got.Message.String() != id {
		t.Errorf("poll (-want +got):\n%s(id %s)", diff, id)
	}
	if mentions["parse"] == nil || len(mentions["parse"].([]any)) != 0 {
		t.Errorf("the poll's allowed_mentions = %s, want parse: []", polls[0].AllowedMentions)
	}
}

func TestActionsGuild(t *testing.T) {
	tb := startBot(t, Options{})
	ctx := actionCtx(t)
	g := tb.guild.String()
	crew := tb.fd.AddRole(tb.guild, "crew")
	oncall := tb.fd.AddRole(tb.guild, "on-call")
	bob := tb.fd.User("bob")
	tb.fd.AddMember(tb.guild, bob, crew)
	uid := bob.ID.String()

	roles, err := tb.Roles(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	wantRoles := []actions.Role{
		{ID: oncall.String(), Name: "on-call", Position: 2},
		{ID: crew.String(), Name: "crew", Position: 1},
		{ID: g, Name: "@everyone"},
	}
	if diff := cmp.Diff(wantRoles, roles); diff != "" {
		t.Errorf("Roles, highest first (-want +got):\n%s", diff)
	}

	// The reason reaches the audit log whole, line break and all.
	reason := "Covers the night shift\n— requested by ann"
	if err := tb.AddRole(ctx, g, uid, oncall.String(), reason); err != nil {
		t.Fatal(err)
	}
	if err := tb.RemoveRole(ctx, g, uid, crew.String(), ""); err != nil {
		t.Fatal(err)
	}
	m, err := tb.Member(ctx, g, uid)
	if err != nil {
		t.Fatal(err)
	}
	fm, _ := tb.fd.Member(tb.guild, bob.ID)
	want := actions.Member{UserID: uid, Username: "bob", RoleIDs: []string{oncall.String()}, Joined: fm.Joined}
	if diff := cmp.Diff(want, m); diff != "" {
		t.Errorf("Member (-want +got):\n%s", diff)
	}
	wantLog := []fakediscord.AuditEntry{
		{Action: "role_add", User: bob.ID, Role: oncall, Reason: reason},
		{Action: "role_remove", User: bob.ID, Role: crew},
	}
	if diff := cmp.Diff(wantLog, tb.fd.AuditLog(tb.guild)); diff != "" {
		t.Errorf("audit log (-want +got):\n%s", diff)
	}

	// An event without an end or a location gets the defaults Discord
	// requires of an external event.
	start := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	ev, err := tb.CreateEvent(ctx, g, actions.Event{Name: "Retro", Description: "Sprint 4", Start: start})
	if err != nil {
		t.Fatal(err)
	}
	wantEv := actions.Event{ID: ev.ID, Name: "Retro", Description: "Sprint 4", Location: defaultEventLocation, Start: start, End: start.Add(time.Hour)}
	if diff := cmp.Diff(wantEv, ev); diff != "" {
		t.Errorf("CreateEvent (-want +got):\n%s", diff)
	}
	body := tb.body("POST", "/guilds/"+g+"/scheduled-events")
	if _, has := body["channel_id"]; has || body["entity_type"] != float64(3) || body["privacy_level"] != float64(2) {
		t.Errorf("event body = %v; want an external, guild-only event without a channel", body)
	}
	evs, err := tb.Events(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]actions.Event{wantEv}, evs); diff != "" {
		t.Errorf("Events (-want +got):\n%s", diff)
	}
}

func TestActionsModeration(t *testing.T) {
	tb := startBot(t, Options{})
	ctx := actionCtx(t)
	g := tb.guild.String()
	bob, eve, mal := tb.fd.User("bob"), tb.fd.User("eve"), tb.fd.User("mal")
	tb.fd.AddMember(tb.guild, bob)
	tb.fd.AddMember(tb.guild, eve)

	until := time.Now().Add(10 * time.Minute).UTC().Truncate(time.Second)
	if err := tb.Timeout(ctx, g, bob.ID.String(), until, "spam"); err != nil {
		t.Fatal(err)
	}
	if err := tb.Timeout(ctx, g, bob.ID.String(), time.Time{}, "appealed"); err != nil {
		t.Fatal(err)
	}
	if err := tb.Kick(ctx, g, eve.ID.String(), "spam"); err != nil {
		t.Fatal(err)
	}
	if err := tb.Ban(ctx, g, mal.ID.String(), "raid"); err != nil {
		t.Fatal(err)
	}
	want := []fakediscord.AuditEntry{
		{Action: "timeout", User: bob.ID, Until: until, Reason: "spam"},
		{Action: "timeout", User: bob.ID, Reason: "appealed"},
		{Action: "kick", User: eve.ID, Reason: "spam"},
		{Action: "ban", User: mal.ID, Reason: "raid"},
	}
	if diff := cmp.Diff(want, tb.fd.AuditLog(tb.guild)); diff != "" {
		t.Errorf("audit log (-want +got):\n%s", diff)
	}
	if _, ok := tb.fd.Member(tb.guild, eve.ID); ok {
		t.Error("eve is still a member after Kick")
	}

	if err := tb.SetNickname(ctx, g, "Tova"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]any{"nick": "Tova"}, tb.body("PATCH", "/guilds/"+g+"/members/@me")); diff != "" || tb.fd.Nick(tb.guild) != "Tova" {
		t.Errorf("nickname body (-want +got):\n%s; fake's nick %q", diff, tb.fd.Nick(tb.guild))
	}
	if tb.BotID() != tb.fd.Bot.ID.String() {
		t.Errorf("BotID = %q, want %s", tb.BotID(), tb.fd.Bot.ID)
	}
}

// statusOf reads a refusal as a caller that does not know this package
// does.
func statusOf(err error) (status, code int, ok bool) {
	var r interface {
		HTTPStatus() int
		DiscordCode() int
	}
	if !errors.As(err, &r) {
		return 0, 0, false
	}
	return r.HTTPStatus(), r.DiscordCode(), true
}

func TestActionsErrorsCarryDiscordsStatus(t *testing.T) {
	tb := startBot(t, Options{})
	ctx := actionCtx(t)
	g, ch := tb.guild.String(), tb.channel.String()
	nobody := tb.fd.NewID().String()
	boss := tb.fd.User("boss")
	tb.fd.AddMember(tb.guild, boss)
	tb.fd.Protect(tb.guild, boss.ID)
	msg := tb.fd.Post(tb.channel, tb.user, "hi")

	tests := []struct {
		name         string
		call         func() error
		status, code int
		says         string
	}{
		{"channels of an unknown guild", func() error { _, err := tb.Channels(ctx, nobody); return err }, 404, 10004, "Unknown Guild"},
		{"a channel without a name", func() error { _, err := tb.CreateChannel(ctx, g, actions.NewChannel{}); return err }, 400, 50035, "name"},
		{"edit an unknown channel", func() error { n := "x"; _, err := tb.EditChannel(ctx, nobody, &n, nil); return err }, 404, 10003, "Unknown Channel"},
		{"delete an unknown channel", func() error { return tb.DeleteChannel(ctx, nobody) }, 404, 10003, "Unknown Channel"},
		{"thread from an unknown message", func() error { _, err := tb.CreateThread(ctx, ch, nobody, "t"); return err }, 404, 10008, "Unknown Message"},
		{"archived threads of an unknown channel", func() error { _, err := tb.ArchivedThreads(ctx, nobody); return err }, 404, 10003, "Unknown Channel"},
		{"send in an unknown channel", func() error { _, err := tb.Send(ctx, nobody, "hi", nil); return err }, 404, 10003, "Unknown Channel"},
		{"react to an unknown message", func() error { return tb.React(ctx, ch, nobody, "👍") }, 404, 10008, "Unknown Message"},
		{"react with a name", func() error { return tb.React(ctx, ch, msg.ID.String(), "thumbsup") }, 400, 10014, "Unknown Emoji"},
		{"unreact on an unknown message", func() error { return tb.Unreact(ctx, ch, nobody, "👍") }, 404, 10008, "Unknown Message"},
		{"read an unknown channel", func() error { _, err := tb.Messages(ctx, nobody, 5); return err }, 404, 10003, "Unknown Channel"},
		{"read an unknown message", func() error { _, err := tb.Message(ctx, ch, nobody); return err }, 404, 10008, "Unknown Message"},
		{"edit someone else's message", func() error { return tb.EditMessage(ctx, ch, msg.ID.String(), "x") }, 403, 50005, "another user"},
		{"delete an unknown message", func() error { return tb.DeleteMessage(ctx, ch, nobody) }, 404, 10008, "Unknown Message"},
		{"pin an unknown message", func() error { return tb.Pin(ctx, ch, nobody) }, 404, 10008, "Unknown Message"},
		{"unpin an unknown message", func() error { return tb.Unpin(ctx, ch, nobody) }, 404, 10008, "Unknown Message"},
		{"pins of an unknown channel", func() error { _, err := tb.Pins(ctx, nobody); return err }, 404, 10003, "Unknown Channel"},
		{"a poll without answers", func() error {
			_, err := tb.CreatePoll(ctx, ch, actions.Poll{Question: "?"})
			return err
		}, 400, 50035, "poll.answers"},
		{"an unknown member", func() error { _, err := tb.Member(ctx, g, nobody); return err }, 404, 10007, "Unknown Member"},
		{"roles of an unknown guild", func() error { _, err := tb.Roles(ctx, nobody); return err }, 404, 10004, "Unknown Guild"},
		{"an unknown role", func() error { return tb.AddRole(ctx, g, boss.ID.String(), nobody, "") }, 404, 10011, "Unknown Role"},
		{"a role for a protected member", func() error {
			return tb.RemoveRole(ctx, g, boss.ID.String(), tb.fd.AddRole(tb.guild, "r").String(), "")
		}, 403, 50013, "Missing Permissions"},
		{"an event in the past", func() error {
			_, err := tb.CreateEvent(ctx, g, actions.Event{Name: "Late", Start: time.Now().Add(-time.Hour)})
			return err
		}, 400, 50035, "scheduled_start_time"},
		{"events of an unknown guild", func() error { _, err := tb.Events(ctx, nobody); return err }, 404, 10004, "Unknown Guild"},
		{"time out a protected member", func() error { return tb.Timeout(ctx, g, boss.ID.String(), time.Now().Add(time.Minute), "") }, 403, 50013, "Missing Permissions"},
		{"kick an unknown member", func() error { return tb.Kick(ctx, g, nobody, "") }, 404, 10007, "Unknown Member"},
		{"ban a protected member", func() error { return tb.Ban(ctx, g, boss.ID.String(), "") }, 403, 50013, "Missing Permissions"},
		{"a nickname too long", func() error { return tb.SetNickname(ctx, g, strings.Repeat("n", 33)) }, 400, 50035, "nick"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			status, code, ok := statusOf(err)
			if !ok || status != tt.status || (tt.code != 0 && code != tt.code) {
				t.Fatalf("error %v: status %d code %d (refusal %v), want %d code %d", err, status, code, ok, tt.status, tt.code)
			}
			var herr *httputil.HTTPError
			if !errors.As(err, &herr) {
				t.Errorf("error %v does not wrap arikawa's HTTPError", err)
			}
			if !strings.Contains(err.Error(), tt.says) || !strings.Contains(err.Error(), "Discord refused") {
				t.Errorf("error %q does not say %q", err, tt.says)
			}
			if strings.Contains(err.Error(), tb.fd.Token) {
				t.Error("the token is in the error")
			}
		})
	}
	// The refusal reads as a person would want it.
	err := tb.Ban(ctx, g, boss.ID.String(), "")
	if want := "Discord refused: Missing Permissions (403, code 50013)"; !strings.HasSuffix(err.Error(), want) {
		t.Errorf("error = %q, want it to end with %q", err, want)
	}
}

func TestActionsRefuseInvalidIDsWithoutCallingDiscord(t *testing.T) {
	tb := startBot(t, Options{})
	ctx := actionCtx(t)
	before := len(tb.fd.Requests())
	calls := map[string]func() error{
		"channel": func() error { _, err := tb.Messages(ctx, "general", 5); return err },
		"message": func() error { return tb.Pin(ctx, tb.channel.String(), "latest") },
		"guild":   func() error { _, err := tb.Roles(ctx, ""); return err },
		"user":    func() error { return tb.Kick(ctx, tb.guild.String(), "@bob", "") },
		"role":    func() error { return tb.AddRole(ctx, tb.guild.String(), tb.user.ID.String(), "on-call", "") },
		"category": func() error {
			_, err := tb.CreateChannel(ctx, tb.guild.String(), actions.NewChannel{Name: "x", ParentID: "Projects"})
			return err
		},
	}
	for what, call := range calls {
		err := call()
		if err == nil || !strings.Contains(err.Error(), "invalid "+what+" id") {
			t.Errorf("%s: error %v, want one naming the invalid %s id", what, err, what)
		}
		if _, _, refused := statusOf(err); refused {
			t.Errorf("%s: a local error reads as Discord's refusal: %v", what, err)
		}
	}
	if got := tb.fd.Requests()[before:]; len(got) != 0 {
		for _, r := range got {
			if !strings.HasPrefix(r.Path, "/applications/") {
				t.Errorf("an invalid id reached Discord: %s %s", r.Method, r.Path)
			}
		}
	}
}

// A file checked by sendFile and then swapped for a link before the upload
// (the file itself, or a folder on its way) is not uploaded: the link's
// target is never read.
func TestActionsSendRefusesASwappedLink(t *testing.T) {
	tb := startBot(t, Options{})
	ctx := actionCtx(t)
	secret := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(secret, []byte("TOKEN=not-for-discord\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	if err := os.Symlink(secret, filepath.Join(work, "report.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(secret), filepath.Join(work, "sub")); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{filepath.Join(work, "report.txt"), filepath.Join(work, "sub", "secret.txt")} {
		if _, err := tb.Send(ctx, tb.channel.String(), "the report", []string{path}); err == nil {
			t.Errorf("Send(%s) uploaded through a link", filepath.Base(path))
		}
	}
	for _, m := range tb.fd.BotMessages(tb.channel) {
		for _, f := range m.Files {
			t.Errorf("uploaded %s: %q", f.Name, f.Data)
		}
	}
}
