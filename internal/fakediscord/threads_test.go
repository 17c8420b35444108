package fakediscord

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/diamondburned/arikawa/v3/api"
	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/diamondburned/arikawa/v3/gateway"
	"github.com/diamondburned/arikawa/v3/session"
	"github.com/diamondburned/arikawa/v3/state"
	"github.com/diamondburned/arikawa/v3/state/store/defaultstore"
	"github.com/diamondburned/arikawa/v3/utils/handler"
	"github.com/diamondburned/arikawa/v3/utils/httputil"
	"github.com/diamondburned/arikawa/v3/utils/httputil/httpdriver"
	"github.com/diamondburned/arikawa/v3/utils/json/option"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// botIntents are the intents the gateway's bot identifies with
// (internal/discord.Intents): Guild Members is not among them, so arikawa's
// state fetches the bot's member over REST to compute permissions.
const botIntents = gateway.IntentGuilds | gateway.IntentGuildMessages | gateway.IntentDirectMessages |
	gateway.IntentMessageContent | gateway.IntentGuildMessageReactions | gateway.IntentDirectMessageReactions

// toFake sends arikawa's REST calls for discord.com to the fake.
type toFake struct{ base *url.URL }

func (f toFake) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.URL.Scheme, r.URL.Host, r.Host = f.base.Scheme, f.base.Host, f.base.Host
	return http.DefaultTransport.RoundTrip(r)
}

// client is arikawa's state connected to the fake, built as the bot
// builds it (internal/discord/bot.go), with the events it decoded.
type client struct {
	*state.State
	mu     sync.Mutex
	events []any
}

func (c *client) record(ev any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, ev)
}

// seen returns the decoded events, in order.
func (c *client) seen() []any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.events)
}

// connect opens arikawa's state on s with intents and waits until it holds
// the guilds GUILD_CREATE announced.
func connect(t *testing.T, s *Server, intents gateway.Intents, guilds ...discord.GuildID) *client {
	t.Helper()
	id := gateway.DefaultIdentifier("Bot " + s.Token)
	id.AddIntents(intents)
	id.IdentifyShortLimit, id.IdentifyGlobalLimit = nil, nil
	opts := gateway.DefaultGatewayOpts
	opts.ReconnectDelay = func(int) time.Duration { return 20 * time.Millisecond }
	sess := session.NewWithGateway(gateway.NewCustomWithIdentifier(gateway.AddGatewayParams(s.GatewayURL()), id, &opts), handler.New())
	base, _ := url.Parse(s.HTTP.URL)
	sess.Client.Client.Client = httpdriver.WrapClient(http.Client{Transport: toFake{base}, Timeout: 10 * time.Second})
	c := &client{State: state.NewFromSession(sess, defaultstore.New())}
	c.AddSyncHandler(func(ev *gateway.ThreadCreateEvent) { c.record(ev) })
	c.AddSyncHandler(func(ev *gateway.ThreadUpdateEvent) { c.record(ev) })
	c.AddSyncHandler(func(ev *gateway.ThreadDeleteEvent) { c.record(ev) })
	c.AddSyncHandler(func(ev *gateway.ChannelUpdateEvent) { c.record(ev) })
	c.AddSyncHandler(func(ev *gateway.MessageCreateEvent) { c.record(ev) })
	c.AddSyncHandler(func(ev *gateway.InteractionCreateEvent) { c.record(ev) })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Open(ctx); err != nil {
		t.Fatalf("arikawa could not connect: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	s.Wait(t, "GUILD_CREATE in arikawa's state", 10*time.Second, func() bool {
		for _, g := range guilds {
			if _, err := c.Cabinet.Guild(g); err != nil {
				return false
			}
		}
		return true
	})
	return c
}

// threadEvent is what a test compares of a THREAD_* event arikawa decoded.
type threadEvent struct {
	Event    string
	ID       discord.ChannelID
	Guild    discord.GuildID
	Parent   discord.ChannelID
	Owner    discord.UserID
	Type     discord.ChannelType
	Archived bool
	After    discord.ArchiveDuration
}

func summarize(ch discord.Channel, event string) threadEvent {
	e := threadEvent{Event: event, ID: ch.ID, Guild: ch.GuildID, Parent: ch.ParentID, Owner: ch.OwnerID, Type: ch.Type}
	if ch.ThreadMetadata != nil {
		e.Archived, e.After = ch.ThreadMetadata.Archived, ch.ThreadMetadata.AutoArchiveDuration
	}
	return e
}

func (c *client) threadEvents() []threadEvent {
	var out []threadEvent
	for _, ev := range c.seen() {
		switch ev := ev.(type) {
		case *gateway.ThreadCreateEvent:
			out = append(out, summarize(ev.Channel, "THREAD_CREATE"))
		case *gateway.ThreadUpdateEvent:
			out = append(out, summarize(ev.Channel, "THREAD_UPDATE"))
		case *gateway.ThreadDeleteEvent:
			out = append(out, threadEvent{Event: "THREAD_DELETE", ID: ev.ID, Guild: ev.GuildID, Parent: ev.ParentID, Type: ev.Type})
		}
	}
	return out
}

// dispatched returns the data of the dispatches of one type, in order.
func dispatched(s *Server, typ string) []json.RawMessage {
	var out []json.RawMessage
	for _, f := range s.Frames() {
		if !f.FromBot && f.Op == 0 && f.Type == typ {
			out = append(out, f.Data)
		}
	}
	return out
}

func TestThreadEventsReachArikawa(t *testing.T) {
	s := Start(t)
	g, general := s.AddGuild("g")
	ann := s.User("ann")
	prompt := s.Post(general, ann, "fix the login bug")
	c := connect(t, s, botIntents, g)

	byMsg, err := c.StartThreadWithMessage(general, prompt.ID, api.StartThreadData{Name: "fix the login bug", AutoArchiveDuration: discord.OneHourArchive})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := c.StartThreadWithoutMessage(general, api.StartThreadData{Name: "Planning", AutoArchiveDuration: discord.SevenDaysArchive, Type: discord.GuildPublicThread})
	if err != nil {
		t.Fatal(err)
	}
	theirs := s.StartThreadAsUser(general, ann, "ann's question")
	s.ArchiveThread(byMsg.ID)
	if _, err := c.SendMessage(byMsg.ID, "still on it"); err != nil {
		t.Fatal(err)
	}
	if err := c.ModifyChannel(plain.ID, api.ModifyChannelData{Archived: option.True}); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteChannel(plain.ID, ""); err != nil {
		t.Fatal(err)
	}
	s.DeleteThread(theirs)

	bot := s.Bot.ID
	want := []threadEvent{
		{"THREAD_CREATE", byMsg.ID, g, general, bot, discord.GuildPublicThread, false, 60},
		{"THREAD_CREATE", plain.ID, g, general, bot, discord.GuildPublicThread, false, 10080},
		{"THREAD_CREATE", theirs, g, general, ann.ID, discord.GuildPublicThread, false, 4320},
		{"THREAD_UPDATE", byMsg.ID, g, general, bot, discord.GuildPublicThread, true, 60},
		{"THREAD_UPDATE", byMsg.ID, g, general, bot, discord.GuildPublicThread, false, 60},
		{"THREAD_UPDATE", plain.ID, g, general, bot, discord.GuildPublicThread, true, 10080},
		{"THREAD_DELETE", plain.ID, g, general, 0, discord.GuildPublicThread, false, 0},
		{"THREAD_DELETE", theirs, g, general, 0, discord.GuildPublicThread, false, 0},
	}
	s.Wait(t, "eight thread events in arikawa", 10*time.Second, func() bool { return len(c.threadEvents()) >= len(want) })
	if diff := cmp.Diff(want, c.threadEvents()); diff != "" {
		t.Errorf("thread events arikawa decoded (-want +got):\n%s", diff)
	}

	// What arikawa's ThreadCreateEvent drops, as Discord sends it.
	type created struct {
		NewlyCreated bool   `json:"newly_created"`
		MemberCount  int    `json:"member_count"`
		Stamp        string `json:"archive_timestamp"`
	}
	var got []created
	for _, raw := range dispatched(s, "THREAD_CREATE") {
		var v struct {
			created
			Meta struct {
				Stamp string `json:"archive_timestamp"`
			} `json:"thread_metadata"`
		}
		json.Unmarshal(raw, &v)
		v.created.Stamp = map[bool]string{true: "set", false: "missing"}[v.Meta.Stamp != ""]
		got = append(got, v.created)
	}
	one := created{NewlyCreated: true, MemberCount: 1, Stamp: "set"}
	if diff := cmp.Diff([]created{one, one, one}, got); diff != "" {
		t.Errorf("THREAD_CREATE payloads (-want +got):\n%s", diff)
	}

	// The unarchiving comes before the message that caused it.
	var order []string
	for _, f := range s.Frames() {
		if f.Op == 0 && (f.Type == "THREAD_UPDATE" || f.Type == "MESSAGE_CREATE") {
			var v struct {
				ID        string `json:"id"`
				ChannelID string `json:"channel_id"`
			}
			json.Unmarshal(f.Data, &v)
			if v.ID == byMsg.ID.String() || v.ChannelID == byMsg.ID.String() {
				order = append(order, f.Type)
			}
		}
	}
	if diff := cmp.Diff([]string{"THREAD_UPDATE", "THREAD_UPDATE", "MESSAGE_CREATE"}, order); diff != "" {
		t.Errorf("dispatches about the archived thread (-want +got):\n%s", diff)
	}
	if _, err := c.Cabinet.Channel(plain.ID); err == nil {
		t.Error("arikawa's state still holds the deleted thread")
	}
	if th, err := c.Cabinet.Channel(byMsg.ID); err != nil || th.ThreadMetadata == nil || th.ThreadMetadata.Archived {
		t.Errorf("arikawa's state holds %+v, %v; want the thread, active", th, err)
	}
}

func TestThreadOverREST(t *testing.T) {
	s := Start(t)
	g, general := s.AddGuild("g")
	ann := s.User("ann")
	prompt := s.Post(general, ann, "deploy to staging")
	cp := "/channels/" + general.String()
	status, raw := callAs(t, s, "POST", cp+"/messages/"+prompt.ID.String()+"/threads", nil, `{"name":"deploy to staging","auto_archive_duration":1440}`)
	if status != 201 {
		t.Fatalf("start thread = %d %s", status, raw)
	}
	th := discord.ChannelID(prompt.ID)
	tp := "/channels/" + th.String()

	status, raw = callAs(t, s, "GET", tp, nil, "")
	var got discord.Channel
	if err := json.Unmarshal(raw, &got); status != 200 || err != nil {
		t.Fatalf("GET thread = %d %s", status, raw)
	}
	if got.ThreadMetadata == nil || !got.ThreadMetadata.ArchiveTimestamp.IsValid() {
		t.Fatalf("GET thread = %s, want thread_metadata with an archive_timestamp", raw)
	}
	want := discord.Channel{
		ID: th, GuildID: g, ParentID: general, Type: discord.GuildPublicThread, Name: "deploy to staging",
		OwnerID: s.Bot.ID, MemberCount: 1,
		ThreadMetadata: &discord.ThreadMetadata{AutoArchiveDuration: discord.OneDayArchive, ArchiveTimestamp: got.ThreadMetadata.ArchiveTimestamp},
	}
	// arikawa decodes a missing video_quality_mode as 1 (auto).
	opts := cmp.Options{cmpopts.EquateComparable(discord.Timestamp{}), cmpopts.IgnoreFields(discord.Channel{}, "VideoQualityMode")}
	if diff := cmp.Diff(want, got, opts); diff != "" {
		t.Errorf("GET thread (-want +got):\n%s", diff)
	}

	// Whoever posts joins the thread, as Discord counts member_count.
	s.Post(th, ann, "any news?")
	if info, _ := s.ChannelInfo(th); info.MemberCount != 2 {
		t.Errorf("member_count after ann posted = %d, want 2", info.MemberCount)
	}

	if status, raw = callAs(t, s, "DELETE", tp, nil, ""); status != 200 {
		t.Fatalf("DELETE thread = %d %s", status, raw)
	}
	tests := []struct{ name, method, path, body string }{
		{"get", "GET", tp, ""},
		{"post", "POST", tp + "/messages", `{"content":"hello?"}`},
		{"history", "GET", tp + "/messages", ""},
		{"edit", "PATCH", tp, `{"name":"again"}`},
	}
	for _, tt := range tests {
		t.Run("deleted/"+tt.name, func(t *testing.T) {
			status, raw := callAs(t, s, tt.method, tt.path, nil, tt.body)
			if status != 404 || code(t, raw) != 10003 {
				t.Errorf("%s %s after delete = %d %s, want 404 with code 10003", tt.method, tt.path, status, raw)
			}
		})
	}
	// The message the thread started from stays in the channel.
	if _, ok := s.Message(general, prompt.ID); !ok {
		t.Error("deleting the thread removed the message it started from")
	}
}

func TestPostingInArchivedThreads(t *testing.T) {
	type outcome struct {
		Status, Code int
		Archived     bool
		Messages     int
		Updates      int
	}
	tests := []struct {
		name   string
		locked bool
		// manage gives the bot Manage Threads in the channel.
		manage bool
		byBot  bool
		want   outcome
	}{
		{name: "a user's message unarchives", want: outcome{Archived: false, Messages: 1, Updates: 1}},
		{name: "the bot's message unarchives", byBot: true, want: outcome{Status: 200, Archived: false, Messages: 1, Updates: 1}},
		{name: "locked: the bot is refused", locked: true, byBot: true, want: outcome{Status: 400, Code: 50083, Archived: true}},
		{name: "locked: a bot with Manage Threads unarchives", locked: true, manage: true, byBot: true, want: outcome{Status: 200, Archived: false, Messages: 1, Updates: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Start(t)
			g, general := s.AddGuild("g")
			connect(t, s, botIntents, g) // dispatches need a session
			ann := s.User("ann")
			th := s.StartThreadAsUser(general, ann, "question")
			if tt.locked {
				s.LockThread(th)
			}
			if tt.manage {
				s.AllowBot(general, discord.PermissionManageThreads)
			}
			s.ArchiveThread(th)
			before := len(dispatched(s, "THREAD_UPDATE"))
			var got outcome
			if tt.byBot {
				status, raw := callAs(t, s, "POST", "/channels/"+th.String()+"/messages", nil, `{"content":"on it"}`)
				got.Status = status
				if status != 200 {
					got.Code = code(t, raw)
				}
			} else {
				s.Post(th, ann, "still broken")
			}
			info, _ := s.ChannelInfo(th)
			got.Archived = info.ThreadMetadata.Archived
			got.Messages = len(s.Messages(th))
			got.Updates = len(dispatched(s, "THREAD_UPDATE")) - before
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestLockedThreadRefusesUsersAndEdits(t *testing.T) {
	s := Start(t)
	_, general := s.AddGuild("g")
	ann := s.User("ann")
	th := s.StartThreadAsUser(general, ann, "question")
	s.LockThread(th)

	func() {
		defer func() {
			if recover() == nil {
				t.Error("Post in a locked thread did not panic: users without Manage Threads cannot post there")
			}
		}()
		s.Post(th, ann, "hello?")
	}()

	tp := "/channels/" + th.String()
	tests := []struct {
		name, method, path, body string
		status, code             int
	}{
		{"post in a locked thread", "POST", tp + "/messages", `{"content":"on it"}`, 403, 160005},
		{"unlock without Manage Threads", "PATCH", tp, `{"locked":false}`, 403, 50013},
		{"archive another's thread without Manage Threads", "PATCH", tp, `{"archived":true}`, 403, 50013},
		{"invalid auto_archive_duration", "PATCH", tp, `{"auto_archive_duration":30}`, 400, 50035},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, raw := callAs(t, s, tt.method, tt.path, nil, tt.body)
			if status != tt.status || code(t, raw) != tt.code {
				t.Errorf("%s %s = %d %s, want %d with code %d", tt.method, tt.path, status, raw, tt.status, tt.code)
			}
		})
	}
	s.ArchiveThread(th)
	if status, raw := callAs(t, s, "PATCH", tp, nil, `{"name":"renamed"}`); status != 400 || code(t, raw) != 50083 {
		t.Errorf("rename of an archived thread = %d %s, want 400 with code 50083", status, raw)
	}
	if info, _ := s.ChannelInfo(th); info.Name != "question" || !info.ThreadMetadata.Locked || !info.ThreadMetadata.Archived {
		t.Errorf("after refused calls the thread is %+v, want unchanged, locked and archived", info)
	}
}

func TestDenyBotPermissions(t *testing.T) {
	for _, tt := range []struct {
		name    string
		intents gateway.Intents
	}{
		{"bot's intents (member over REST)", botIntents},
		{"with guild members (member from GUILD_CREATE)", botIntents | gateway.IntentGuildMembers},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := Start(t)
			g, general := s.AddGuild("g")
			early := s.AddChannel(Channel{GuildID: g, Type: discord.GuildText, Name: "early"})
			late := s.AddChannel(Channel{GuildID: g, Type: discord.GuildText, Name: "late"})
			// Denied before the bot connects: only GUILD_CREATE says so.
			s.DenyBot(early, discord.PermissionCreatePublicThreads)
			c := connect(t, s, tt.intents, g)

			perms := func(ch discord.ChannelID) discord.Permissions {
				t.Helper()
				p, err := c.Permissions(ch, s.Bot.ID)
				if err != nil {
					t.Fatalf("arikawa's state.Permissions(%s): %v", ch, err)
				}
				return p
			}
			can := func(ch discord.ChannelID) bool { return perms(ch).Has(discord.PermissionCreatePublicThreads) }
			if !can(general) || can(early) || !can(late) {
				t.Errorf("Create Public Threads in general, early, late = %v %v %v; want true false true", can(general), can(early), can(late))
			}
			if !perms(general).Has(discord.PermissionSendMessages | discord.PermissionSendMessagesInThreads | discord.PermissionViewChannel) {
				t.Errorf("the bot's permissions in general = %d, want at least view, send, send in threads", perms(general))
			}

			// Denied while connected: CHANNEL_UPDATE carries the overwrite.
			s.DenyBot(late, discord.PermissionCreatePublicThreads)
			s.Wait(t, "CHANNEL_UPDATE in arikawa's state", 10*time.Second, func() bool {
				ch, err := c.Cabinet.Channel(late)
				return err == nil && len(ch.Overwrites) == 1
			})
			if can(late) {
				t.Error("arikawa still computes Create Public Threads in late after the CHANNEL_UPDATE")
			}
			if perms(late) != perms(general)&^discord.PermissionCreatePublicThreads {
				t.Errorf("permissions in late = %d, want general's (%d) less Create Public Threads", perms(late), perms(general))
			}

			// The thread endpoints refuse in the denied channels only.
			msg := s.Post(late, s.User("ann"), "a task")
			for _, call := range []struct{ path, body string }{
				{"/channels/" + late.String() + "/messages/" + msg.ID.String() + "/threads", `{"name":"task"}`},
				{"/channels/" + early.String() + "/threads", `{"name":"task","type":11}`},
			} {
				status, raw := callAs(t, s, "POST", call.path, nil, call.body)
				if status != 403 || code(t, raw) != 50013 {
					t.Errorf("POST %s = %d %s, want 403 with code 50013", call.path, status, raw)
				}
			}
			if status, raw := callAs(t, s, "POST", "/channels/"+general.String()+"/threads", nil, `{"name":"task","type":11}`); status != 201 {
				t.Errorf("thread in general = %d %s, want 201", status, raw)
			}
			if n := len(s.Threads(late)) + len(s.Threads(early)); n != 0 {
				t.Errorf("%d threads made where the bot may not", n)
			}

			// A new session's GUILD_CREATE carries both overwrites. (A
			// second client, not a reconnect: arikawa dials once per 5 s.)
			c.Close()
			again := connect(t, s, tt.intents, g)
			creates := dispatched(s, "GUILD_CREATE")
			var guild gateway.GuildCreateEvent
			if err := json.Unmarshal(creates[len(creates)-1], &guild); err != nil {
				t.Fatal(err)
			}
			denied := map[discord.ChannelID][]discord.Overwrite{}
			for _, ch := range guild.Channels {
				if len(ch.Overwrites) > 0 {
					denied[ch.ID] = ch.Overwrites
				}
			}
			ow := []discord.Overwrite{{ID: discord.Snowflake(s.Bot.ID), Type: discord.OverwriteMember, Deny: discord.PermissionCreatePublicThreads}}
			if diff := cmp.Diff(map[discord.ChannelID][]discord.Overwrite{early: ow, late: ow}, denied); diff != "" {
				t.Errorf("overwrites in the new session's GUILD_CREATE (-want +got):\n%s", diff)
			}
			for _, ch := range []discord.ChannelID{early, late} {
				if p, err := again.Permissions(ch, s.Bot.ID); err != nil || p.Has(discord.PermissionCreatePublicThreads) {
					t.Errorf("after reconnecting arikawa computes %d, %v in %s; want no Create Public Threads", p, err, ch)
				}
			}
			if guild.OwnerID == s.Bot.ID {
				t.Error("the bot owns the guild: arikawa would give it every permission")
			}
		})
	}
}

func TestThreadInteractionsAndMessages(t *testing.T) {
	s := Start(t)
	g, general := s.AddGuild("g")
	ann := s.User("ann")
	th := s.StartThreadAsUser(general, ann, "ann's task")
	c := connect(t, s, botIntents, g)

	s.Post(th, ann, "<@"+s.Bot.ID.String()+"> look at this", s.Bot)
	id := s.Interact(th, ann, "claude", map[string]string{"prompt": "and this"})
	s.Wait(t, "a message and an interaction in arikawa", 10*time.Second, func() bool {
		n := 0
		for _, ev := range c.seen() {
			switch ev.(type) {
			case *gateway.MessageCreateEvent, *gateway.InteractionCreateEvent:
				n++
			}
		}
		return n == 2
	})
	type where struct {
		Event   string
		Channel discord.ChannelID
		Guild   discord.GuildID
		Author  discord.UserID
		// Thread is the interaction's channel as Discord describes it.
		Thread *threadEvent
	}
	var got []where
	for _, ev := range c.seen() {
		switch ev := ev.(type) {
		case *gateway.MessageCreateEvent:
			got = append(got, where{"MESSAGE_CREATE", ev.ChannelID, ev.GuildID, ev.Author.ID, nil})
		case *gateway.InteractionCreateEvent:
			w := where{Event: "INTERACTION_CREATE", Channel: ev.ChannelID, Guild: ev.GuildID}
			if ev.Member != nil {
				w.Author = ev.Member.User.ID
			}
			if ev.Channel != nil {
				e := summarize(*ev.Channel, "")
				w.Thread = &e
			}
			got = append(got, w)
		}
	}
	thread := threadEvent{ID: th, Guild: g, Parent: general, Owner: ann.ID, Type: discord.GuildPublicThread, After: 4320}
	want := []where{
		{"MESSAGE_CREATE", th, g, ann.ID, nil},
		{"INTERACTION_CREATE", th, g, ann.ID, &thread},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events in the thread (-want +got):\n%s", diff)
	}

	// The bot answers the command and posts in the thread as in a channel.
	if err := c.RespondInteraction(discord.InteractionID(mustSnowflake(t, id)), "itoken-"+id, api.InteractionResponse{
		Type: api.MessageInteractionWithSource, Data: &api.InteractionResponseData{Content: option.NewNullableString("on it")},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SendMessage(th, "done"); err != nil {
		t.Fatal(err)
	}
	answers := s.Answers()
	if len(answers) != 1 || answers[0].ChannelID != th || answers[0].Content != "on it" {
		t.Errorf("answers = %+v, want one in the thread", answers)
	}
	if bm := s.BotMessages(th); len(bm) != 1 || bm[0].GuildID != g || bm[0].Content != "done" {
		t.Errorf("bot messages in the thread = %+v", bm)
	}

	// A thread others made is owned by them, not the bot.
	if info, _ := s.ChannelInfo(th); info.OwnerID != ann.ID {
		t.Errorf("owner of ann's thread = %s, want %s", info.OwnerID, ann.ID)
	}
	var herr *httputil.HTTPError
	if _, err := c.StartThreadWithMessage(th, 1, api.StartThreadData{Name: "nested"}); !errors.As(err, &herr) || herr.Code != 50024 {
		t.Errorf("thread in a thread: %v, want code 50024", err)
	}
}

func mustSnowflake(t *testing.T, s string) discord.Snowflake {
	t.Helper()
	sf, err := discord.ParseSnowflake(s)
	if err != nil {
		t.Fatal(err)
	}
	return sf
}
