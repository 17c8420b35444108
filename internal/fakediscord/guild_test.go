package fakediscord

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/google/go-cmp/cmp"
)

// callAs makes a REST call as the bot with extra headers and returns the
// status and the raw answer.
func callAs(t *testing.T, s *Server, method, path string, h http.Header, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, s.APIBaseURL()+path, bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h.Clone()
	if req.Header == nil {
		req.Header = http.Header{}
	}
	req.Header.Set("Authorization", "Bot "+s.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

// code is the JSON error code of an error answer.
func code(t *testing.T, raw []byte) int {
	t.Helper()
	var e struct {
		Code int `json:"code"`
	}
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatalf("error answer %q: %v", raw, err)
	}
	return e.Code
}

func TestGuildEndpointsRefuseLikeDiscord(t *testing.T) {
	s := Start(t)
	g, ch := s.AddGuild("g")
	user := s.User("bob")
	s.AddMember(g, user)
	boss := s.User("boss")
	s.AddMember(g, boss)
	s.Protect(g, boss.ID)
	role := s.AddRole(g, "crew")
	msg := s.Post(ch, user, "hello")
	gp, cp, up := "/guilds/"+g.String(), "/channels/"+ch.String(), user.ID.String()
	nobody := s.NewID().String()

	tests := []struct {
		name, method, path, body string
		status, code             int
	}{
		{"channel without a name", "POST", gp + "/channels", `{"type":0}`, 400, 50035},
		{"channel name too long", "POST", gp + "/channels", `{"name":"` + string(bytes.Repeat([]byte("a"), 101)) + `"}`, 400, 50035},
		{"channel under a non-category", "POST", gp + "/channels", `{"name":"x","parent_id":"` + ch.String() + `"}`, 400, 50035},
		{"unknown guild", "GET", "/guilds/" + nobody + "/channels", ``, 404, 10004},
		{"unknown channel", "PATCH", "/channels/" + nobody, `{"name":"x"}`, 404, 10003},
		{"rename to nothing", "PATCH", cp, `{"name":""}`, 400, 50035},
		{"unknown message", "GET", cp + "/messages/" + nobody, ``, 404, 10008},
		{"pin unknown message", "PUT", cp + "/pins/" + nobody, ``, 404, 10008},
		{"thread from unknown message", "POST", cp + "/messages/" + nobody + "/threads", `{"name":"t"}`, 404, 10008},
		{"thread without a name", "POST", cp + "/threads", `{"type":11}`, 400, 50035},
		{"reaction to unknown message", "PUT", cp + "/messages/" + nobody + "/reactions/%F0%9F%91%8D/@me", ``, 404, 10008},
		{"reaction by name", "PUT", cp + "/messages/" + msg.ID.String() + "/reactions/thumbsup/@me", ``, 400, 10014},
		{"unknown member", "GET", gp + "/members/" + nobody, ``, 404, 10007},
		{"role for unknown member", "PUT", gp + "/members/" + nobody + "/roles/" + role.String(), ``, 404, 10007},
		{"unknown role", "PUT", gp + "/members/" + up + "/roles/" + nobody, ``, 404, 10011},
		{"role for a protected member", "PUT", gp + "/members/" + boss.ID.String() + "/roles/" + role.String(), ``, 403, 50013},
		{"kick a protected member", "DELETE", gp + "/members/" + boss.ID.String(), ``, 403, 50013},
		{"timeout beyond 28 days", "PATCH", gp + "/members/" + up, `{"communication_disabled_until":"` + time.Now().Add(30*24*time.Hour).Format(time.RFC3339) + `"}`, 400, 50035},
		{"nickname too long", "PATCH", gp + "/members/@me", `{"nick":"` + string(bytes.Repeat([]byte("n"), 33)) + `"}`, 400, 50035},
		{"poll without answers", "POST", cp + "/messages", `{"poll":{"question":{"text":"Lunch?"},"answers":[],"duration":4}}`, 400, 50035},
		{"poll too long", "POST", cp + "/messages", `{"poll":{"question":{"text":"Lunch?"},"answers":[{"poll_media":{"text":"Pizza"}}],"duration":769}}`, 400, 50035},
		{"external event without location", "POST", gp + "/scheduled-events", `{"name":"Retro","privacy_level":2,"entity_type":3,"scheduled_start_time":"` + time.Now().Add(time.Hour).Format(time.RFC3339) + `","scheduled_end_time":"` + time.Now().Add(2*time.Hour).Format(time.RFC3339) + `"}`, 400, 50035},
		{"external event without end", "POST", gp + "/scheduled-events", `{"name":"Retro","privacy_level":2,"entity_type":3,"entity_metadata":{"location":"Room"},"scheduled_start_time":"` + time.Now().Add(time.Hour).Format(time.RFC3339) + `"}`, 400, 50035},
		{"event in the past", "POST", gp + "/scheduled-events", `{"name":"Retro","privacy_level":2,"entity_type":3,"entity_metadata":{"location":"Room"},"scheduled_start_time":"` + time.Now().Add(-time.Hour).Format(time.RFC3339) + `","scheduled_end_time":"` + time.Now().Add(time.Hour).Format(time.RFC3339) + `"}`, 400, 50035},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, raw := callAs(t, s, tt.method, tt.path, nil, tt.body)
			if status != tt.status || code(t, raw) != tt.code {
				t.Errorf("%s %s = %d %s, want %d with code %d", tt.method, tt.path, status, raw, tt.status, tt.code)
			}
		})
	}
	if got := s.AuditLog(g); len(got) != 0 {
		t.Errorf("refused calls reached the audit log: %+v", got)
	}
	if m, ok := s.Member(g, boss.ID); !ok || len(m.Roles) != 0 {
		t.Errorf("protected member = %+v, %v; want still there, without roles", m, ok)
	}
}

func TestChannelsAndThreads(t *testing.T) {
	s := Start(t)
	g, general := s.AddGuild("g")
	cat := s.AddChannel(Channel{GuildID: g, Type: discord.GuildCategory, Name: "Projects"})
	gp := "/guilds/" + g.String()

	status, raw := callAs(t, s, "POST", gp+"/channels", nil, `{"name":"standup","topic":"notes","parent_id":"`+cat.String()+`"}`)
	if status != 201 {
		t.Fatalf("create channel = %d %s", status, raw)
	}
	var created discord.Channel
	json.Unmarshal(raw, &created)
	info, ok := s.ChannelInfo(created.ID)
	if !ok || info.Name != "standup" || info.Topic != "notes" || info.ParentID != cat || info.GuildID != g {
		t.Errorf("created channel = %+v, %v", info, ok)
	}

	status, raw = callAs(t, s, "PATCH", "/channels/"+created.ID.String(), nil, `{"topic":"standup at 9:30"}`)
	if status != 200 {
		t.Fatalf("edit channel = %d %s", status, raw)
	}
	if info, _ := s.ChannelInfo(created.ID); info.Name != "standup" || info.Topic != "standup at 9:30" {
		t.Errorf("after topic edit: %+v", info)
	}

	// Threads: one from a message, one without; only archived public
	// ones are listed as archived.
	msg := s.Post(general, s.User("ann"), "release notes")
	cp := "/channels/" + general.String()
	status, raw = callAs(t, s, "POST", cp+"/messages/"+msg.ID.String()+"/threads", nil, `{"name":"Release","auto_archive_duration":1440}`)
	if status != 201 {
		t.Fatalf("thread from message = %d %s", status, raw)
	}
	var fromMsg discord.Channel
	json.Unmarshal(raw, &fromMsg)
	if fromMsg.ID != discord.ChannelID(msg.ID) || fromMsg.Type != discord.GuildPublicThread || fromMsg.ParentID != general {
		t.Errorf("thread from message = %+v, want the message's id, public, in general", fromMsg)
	}
	if status, raw = callAs(t, s, "POST", cp+"/messages/"+msg.ID.String()+"/threads", nil, `{"name":"Again"}`); status != 400 || code(t, raw) != 160004 {
		t.Errorf("second thread from one message = %d %s, want 400 code 160004", status, raw)
	}
	_, raw = callAs(t, s, "POST", cp+"/threads", nil, `{"name":"Private by default"}`)
	var private discord.Channel
	json.Unmarshal(raw, &private)
	if private.Type != discord.GuildPrivateThread {
		t.Errorf("thread without a type has type %d, want %d (API v9's default)", private.Type, discord.GuildPrivateThread)
	}
	s.ArchiveThread(fromMsg.ID)
	s.ArchiveThread(private.ID)
	_, raw = callAs(t, s, "GET", cp+"/threads/archived/public", nil, "")
	var archived struct {
		Threads []discord.Channel `json:"threads"`
		More    bool              `json:"has_more"`
	}
	json.Unmarshal(raw, &archived)
	if len(archived.Threads) != 1 || archived.Threads[0].ID != fromMsg.ID || !archived.Threads[0].ThreadMetadata.Archived {
		t.Errorf("archived public threads = %s, want only %s", raw, fromMsg.ID)
	}
	if got := len(s.Threads(general)); got != 2 {
		t.Errorf("Threads(general) has %d, want 2", got)
	}

	// Deleting a channel removes it and its threads from the guild.
	if status, raw = callAs(t, s, "DELETE", cp, nil, ""); status != 200 {
		t.Fatalf("delete channel = %d %s", status, raw)
	}
	var names []string
	for _, c := range s.Channels(g) {
		names = append(names, c.Name)
	}
	if diff := cmp.Diff([]string{"Projects", "standup"}, names); diff != "" {
		t.Errorf("channels after delete (-want +got):\n%s", diff)
	}
	if _, ok := s.ChannelInfo(fromMsg.ID); ok {
		t.Error("the deleted channel's thread is still there")
	}
}

func TestPinsPollsAndMessages(t *testing.T) {
	s := Start(t)
	_, ch := s.AddGuild("g")
	ann := s.User("ann")
	m1, m2 := s.Post(ch, ann, "one"), s.Post(ch, ann, "two")
	cp := "/channels/" + ch.String()

	for _, m := range []discord.MessageID{m1.ID, m2.ID} {
		if status, raw := callAs(t, s, "PUT", cp+"/pins/"+m.String(), nil, ""); status != 204 {
			t.Fatalf("pin = %d %s", status, raw)
		}
	}
	callAs(t, s, "DELETE", cp+"/pins/"+m1.ID.String(), nil, "")
	if diff := cmp.Diff([]discord.MessageID{m2.ID}, s.Pins(ch)); diff != "" {
		t.Errorf("pins (-want +got):\n%s", diff)
	}
	_, raw := callAs(t, s, "GET", cp+"/messages/"+m2.ID.String(), nil, "")
	var got discord.Message
	json.Unmarshal(raw, &got)
	if got.Content != "two" || !got.Pinned {
		t.Errorf("GET message = %s, want two, pinned", raw)
	}

	poll := `{"nonce":"p1","enforce_nonce":true,"allowed_mentions":{"parse":[]},` +
		`"poll":{"question":{"text":"Lunch?"},"answers":[{"poll_media":{"text":"Pizza"}},{"poll_media":{"text":"Sushi"}}],"duration":4,"allow_multiselect":true}}`
	status, first := callAs(t, s, "POST", cp+"/messages", nil, poll)
	if status != 200 {
		t.Fatalf("poll = %d %s", status, first)
	}
	if _, again := callAs(t, s, "POST", cp+"/messages", nil, poll); !bytes.Equal(first, again) {
		t.Errorf("the same nonce posted a second poll: %s then %s", first, again)
	}
	polls := s.Polls(ch)
	want := []Poll{{Question: "Lunch?", Answers: []string{"Pizza", "Sushi"}, Hours: 4, MultiSelect: true, AllowedMentions: json.RawMessage(`{"parse":[]}`)}}
	if len(polls) == 1 {
		want[0].Message = polls[0].Message
	}
	if diff := cmp.Diff(want, polls); diff != "" {
		t.Errorf("polls (-want +got):\n%s", diff)
	}
}

func TestMembersAndModeration(t *testing.T) {
	s := Start(t)
	g, _ := s.AddGuild("g")
	crew := s.AddRole(g, "crew")
	bob, eve, mal := s.User("bob"), s.User("eve"), s.User("mal")
	s.AddMember(g, bob)
	s.AddMember(g, eve)
	gp := "/guilds/" + g.String()
	reason := func(r string) http.Header { return http.Header{"X-Audit-Log-Reason": {r}} }

	_, raw := callAs(t, s, "GET", gp+"/roles", nil, "")
	var roles []discord.Role
	json.Unmarshal(raw, &roles)
	if len(roles) != 2 || roles[0].Name != "@everyone" || roles[0].ID != discord.RoleID(g) || roles[1].ID != crew || roles[1].Position != 1 {
		t.Errorf("roles = %s, want @everyone and crew at 1", raw)
	}

	callAs(t, s, "PUT", gp+"/members/"+bob.ID.String()+"/roles/"+crew.String(), reason("on%20call"), "")
	if diff := cmp.Diff([]discord.RoleID{crew}, s.MemberRoles(g, bob.ID)); diff != "" {
		t.Errorf("bob's roles (-want +got):\n%s", diff)
	}
	until := time.Now().Add(10 * time.Minute).UTC().Truncate(time.Second)
	callAs(t, s, "PATCH", gp+"/members/"+bob.ID.String(), reason("spam"), `{"communication_disabled_until":"`+until.Format(time.RFC3339)+`"}`)
	_, raw = callAs(t, s, "GET", gp+"/members/"+bob.ID.String(), nil, "")
	var m discord.Member
	json.Unmarshal(raw, &m)
	if !m.CommunicationDisabledUntil.Time().Equal(until) || m.User.ID != bob.ID || len(m.RoleIDs) != 1 {
		t.Errorf("GET member = %s, want timed out until %v with one role", raw, until)
	}
	callAs(t, s, "DELETE", gp+"/members/"+eve.ID.String(), reason("bye"), "")
	// A ban needs no membership.
	callAs(t, s, "PUT", gp+"/bans/"+mal.ID.String(), reason("raid"), "")
	if status, raw := callAs(t, s, "PATCH", gp+"/members/@me", nil, `{"nick":"Tova"}`); status != 200 || s.Nick(g) != "Tova" {
		t.Errorf("set nick = %d %s; Nick = %q", status, raw, s.Nick(g))
	}

	want := []AuditEntry{
		{Action: "role_add", User: bob.ID, Role: crew, Reason: "on call"},
		{Action: "timeout", User: bob.ID, Until: until, Reason: "spam"},
		{Action: "kick", User: eve.ID, Reason: "bye"},
		{Action: "ban", User: mal.ID, Reason: "raid"},
	}
	if diff := cmp.Diff(want, s.AuditLog(g)); diff != "" {
		t.Errorf("audit log (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want[2:3], s.Kicked(g)); diff != "" {
		t.Errorf("Kicked (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want[3:], s.Bans(g)); diff != "" {
		t.Errorf("Bans (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want[1:2], s.Timeouts(g)); diff != "" {
		t.Errorf("Timeouts (-want +got):\n%s", diff)
	}
	if _, ok := s.Member(g, eve.ID); ok {
		t.Error("eve is still a member after the kick")
	}
}

func TestScheduledEvents(t *testing.T) {
	s := Start(t)
	g, _ := s.AddGuild("g")
	start := time.Now().Add(24 * time.Hour).UTC().Truncate(time.Second)
	body := `{"name":"Retro","description":"Sprint 4","privacy_level":2,"entity_type":3,` +
		`"entity_metadata":{"location":"Room 2"},"scheduled_start_time":"` + start.Format(time.RFC3339) +
		`","scheduled_end_time":"` + start.Add(time.Hour).Format(time.RFC3339) + `"}`
	status, raw := callAs(t, s, "POST", "/guilds/"+g.String()+"/scheduled-events", nil, body)
	if status != 200 {
		t.Fatalf("create event = %d %s", status, raw)
	}
	_, raw = callAs(t, s, "GET", "/guilds/"+g.String()+"/scheduled-events", nil, "")
	var listed []discord.GuildScheduledEvent
	json.Unmarshal(raw, &listed)
	if len(listed) != 1 || listed[0].EntityMetadata == nil || listed[0].EntityMetadata.Location != "Room 2" || listed[0].CreatorID != s.Bot.ID {
		t.Errorf("listed events = %s", raw)
	}
	evs := s.Events(g)
	want := []Event{{Name: "Retro", Description: "Sprint 4", Location: "Room 2", Start: start, End: start.Add(time.Hour), EntityType: 3, PrivacyLevel: 2}}
	if len(evs) == 1 {
		want[0].ID = evs[0].ID
	}
	if diff := cmp.Diff(want, evs); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestValidEmoji(t *testing.T) {
	tests := map[string]bool{
		"👍":                        true,
		"1️⃣":                      true,
		"party:123456789012345678": true,
		"thumbsup":                 false,
		":+1:":                     false,
		"party:":                   false,
		":123456789012345678":      false,
		"":                         false,
	}
	for e, want := range tests {
		if got := validEmoji(e); got != want {
			t.Errorf("validEmoji(%q) = %v, want %v", e, got, want)
		}
	}
}
