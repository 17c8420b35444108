package discord

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/google/go-cmp/cmp"

	"github.com/agentgateway/gateway/internal/fakediscord"
)

// presses records what a button handler was given.
type presses struct {
	mu  sync.Mutex // guards got
	got []Press
}

// handler records each press and answers with answer.
func (p *presses) handler(answer func(Press) PressAnswer) func(context.Context, Press) PressAnswer {
	return func(_ context.Context, press Press) PressAnswer {
		p.mu.Lock()
		p.got = append(p.got, press)
		p.mu.Unlock()
		return answer(press)
	}
}

func (p *presses) all() []Press {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Press(nil), p.got...)
}

var applyDiscard = []Button{
	{ID: "apply:42", Label: "Apply", Style: ButtonSuccess},
	{ID: "discard:42", Label: "Discard", Style: ButtonDanger},
}

// postButtons posts the Apply/Discard prompt in ch and returns its id.
func (tb *testBot) postButtons(ch discord.ChannelID, buttons []Button) discord.MessageID {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	id, err := tb.PostButtons(ctx, ch.String(), "Apply the proposed change?", buttons)
	if err != nil {
		tb.t.Fatal(err)
	}
	sf, err := discord.ParseSnowflake(id)
	if err != nil {
		tb.t.Fatalf("PostButtons returned message id %q: %v", id, err)
	}
	return discord.MessageID(sf)
}

// press has user press a button and waits until the bot has answered.
func (tb *testBot) press(ch discord.ChannelID, msg discord.MessageID, user discord.User, button string, perms discord.Permissions) string {
	tb.t.Helper()
	id := tb.fd.Press(ch, msg, user, button, perms)
	tb.fd.Wait(tb.t, "the answer to a press of "+button, waitLong, func() bool { return len(tb.fd.Callbacks(id)) > 0 })
	return id
}

func (tb *testBot) message(ch discord.ChannelID, id discord.MessageID) fakediscord.Message {
	tb.t.Helper()
	m, ok := tb.fd.Message(ch, id)
	if !ok {
		tb.t.Fatalf("message %s not in channel %s", id, ch)
	}
	return m
}

// answer is the interaction answer of id; it fails the test unless there
// is exactly one.
func (tb *testBot) answer(id string) fakediscord.Message {
	tb.t.Helper()
	var out []fakediscord.Message
	for _, a := range tb.fd.Answers() {
		if a.Interaction == id {
			out = append(out, a)
		}
	}
	if len(out) != 1 {
		tb.t.Fatalf("interaction %s has answers %+v, want one", id, out)
	}
	return out[0]
}

var wantButtons = []fakediscord.Button{{ID: "apply:42", Label: "Apply", Style: 3}, {ID: "discard:42", Label: "Discard", Style: 4}}

func TestPostButtons(t *testing.T) {
	tb := startBot(t, Options{})
	msg := tb.postButtons(tb.channel, applyDiscard)

	m := tb.message(tb.channel, msg)
	if m.Author.ID != tb.fd.Bot.ID || m.Content != "Apply the proposed change?" {
		t.Errorf("posted %q by %s, want the prompt by the bot", m.Content, m.Author.Username)
	}
	if diff := cmp.Diff(wantButtons, m.Buttons()); diff != "" {
		t.Errorf("buttons (-want +got):\n%s", diff)
	}
	if m.Nonce == "" {
		t.Error("posted without a nonce")
	}
	var mentions struct {
		Parse []string `json:"parse"`
	}
	if err := json.Unmarshal(m.AllowedMentions, &mentions); err != nil || mentions.Parse == nil || len(mentions.Parse) != 0 {
		t.Errorf("allowed_mentions %s, want parse []", m.AllowedMentions)
	}
	posts := tb.requests("POST", "/channels/"+tb.channel.String()+"/messages")
	if len(posts) != 1 || !strings.Contains(string(posts[0].Body), `"enforce_nonce":true`) {
		t.Errorf("POST bodies %v, want one with enforce_nonce", posts)
	}

	// Another post has another nonce: it is not taken for a retry.
	other := tb.postButtons(tb.channel, applyDiscard[:1])
	if other == msg || tb.message(tb.channel, other).Nonce == m.Nonce {
		t.Errorf("a second post reused message %s or nonce %q", msg, m.Nonce)
	}
}

func TestPressUpdatesTheMessage(t *testing.T) {
	tb := startBot(t, Options{})
	var p presses
	tb.HandleButtons("apply:", p.handler(func(Press) PressAnswer {
		done := "Applied."
		return PressAnswer{Update: &done}
	}))
	msg := tb.postButtons(tb.channel, applyDiscard)

	id := tb.press(tb.channel, msg, tb.user, "apply:42", discord.PermissionAdministrator)
	want := []Press{{
		ButtonID: "apply:42", UserID: tb.user.ID.String(), ChannelID: tb.channel.String(),
		GuildID: tb.guild.String(), MessageID: msg.String(), ManageGuild: true,
	}}
	if diff := cmp.Diff(want, p.all()); diff != "" {
		t.Errorf("presses (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{7}, tb.fd.Callbacks(id)); diff != "" {
		t.Errorf("callback types (-want +got):\n%s", diff)
	}
	if m := tb.message(tb.channel, msg); m.Content != "Applied." || len(m.Buttons()) != 0 {
		t.Errorf("after the press the message is %q with buttons %v, want Applied. and none", m.Content, m.Buttons())
	}
	for _, a := range tb.fd.Answers() {
		if a.Interaction == id {
			t.Errorf("an update also sent an answer: %+v", a)
		}
	}

	lines := tb.logs.lines("button pressed")
	if len(lines) != 1 {
		t.Fatalf("press log lines %q, want one", lines)
	}
	for _, s := range []string{`"channel":"` + tb.channel.String(), `"user":"` + tb.user.ID.String(), `"button":"apply:"`} {
		if !strings.Contains(lines[0], s) {
			t.Errorf("press log %s lacks %s", lines[0], s)
		}
	}
	for _, s := range []string{"apply:42", "itoken-"} {
		if strings.Contains(tb.logs.String(), s) {
			t.Errorf("the log shows %q: %s", s, tb.logs.String())
		}
	}
}

func TestPressManageGuild(t *testing.T) {
	tb := startBot(t, Options{})
	var p presses
	tb.HandleButtons("apply:", p.handler(func(Press) PressAnswer { return PressAnswer{Notice: "Noted."} }))
	msg := tb.postButtons(tb.channel, applyDiscard)
	dm := tb.fd.AddChannel(fakediscord.Channel{})
	dmMsg := tb.postButtons(dm, applyDiscard)

	tests := []struct {
		name    string
		channel discord.ChannelID
		message discord.MessageID
		perms   discord.Permissions
		want    bool
	}{
		{"none", tb.channel, msg, 0, false},
		{"send messages", tb.channel, msg, discord.PermissionSendMessages | discord.PermissionManageChannels, false},
		{"manage server", tb.channel, msg, discord.PermissionManageGuild, true},
		{"administrator", tb.channel, msg, discord.PermissionAdministrator | discord.PermissionSendMessages, true},
		{"direct message", dm, dmMsg, discord.PermissionAdministrator, false},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tb.press(tc.channel, tc.message, tb.user, "apply:42", tc.perms)
			got := p.all()
			if len(got) != i+1 {
				t.Fatalf("%d presses handled, want %d", len(got), i+1)
			}
			last := got[i]
			if last.ManageGuild != tc.want {
				t.Errorf("ManageGuild = %v with permissions %d, want %v", last.ManageGuild, tc.perms, tc.want)
			}
			if last.ChannelID != tc.channel.String() || last.MessageID != tc.message.String() {
				t.Errorf("press %+v, want channel %s message %s", last, tc.channel, tc.message)
			}
			if wantGuild := tc.channel == tb.channel; (last.GuildID != "") != wantGuild {
				t.Errorf("press guild %q, want one only in the guild channel", last.GuildID)
			}
		})
	}
}

func TestPressNotice(t *testing.T) {
	tb := startBot(t, Options{})
	var p presses
	tb.HandleButtons("apply:", p.handler(func(Press) PressAnswer { return PressAnswer{Notice: "Only a server manager can apply this."} }))
	msg := tb.postButtons(tb.channel, applyDiscard)

	id := tb.press(tb.channel, msg, tb.user, "apply:42", 0)
	if diff := cmp.Diff([]int{4}, tb.fd.Callbacks(id)); diff != "" {
		t.Errorf("callback types (-want +got):\n%s", diff)
	}
	if a := tb.answer(id); !a.Ephemeral || a.Content != "Only a server manager can apply this." {
		t.Errorf("answer %q, ephemeral %v; want the notice, ephemeral", a.Content, a.Ephemeral)
	}
	m := tb.message(tb.channel, msg)
	if m.Edited || m.Content != "Apply the proposed change?" {
		t.Errorf("a notice changed the message to %q", m.Content)
	}
	if diff := cmp.Diff(wantButtons, m.Buttons()); diff != "" {
		t.Errorf("buttons after a notice (-want +got):\n%s", diff)
	}
}

func TestPressRouting(t *testing.T) {
	tb := startBot(t, Options{})
	var short, long presses
	tb.HandleButtons("plan:", short.handler(func(Press) PressAnswer { return PressAnswer{Notice: "short"} }))
	tb.HandleButtons("plan:step:", long.handler(func(Press) PressAnswer { return PressAnswer{Notice: "long"} }))
	msg := tb.postButtons(tb.channel, []Button{
		{ID: "plan:1", Label: "Plan"},
		{ID: "plan:step:1", Label: "Step"},
		{ID: "gone:1", Label: "Gone"},
	})

	if a := tb.answer(tb.press(tb.channel, msg, tb.user, "plan:step:1", 0)); a.Content != "long" {
		t.Errorf("plan:step:1 answered %q, want the longest prefix's handler", a.Content)
	}
	if a := tb.answer(tb.press(tb.channel, msg, tb.user, "plan:1", 0)); a.Content != "short" {
		t.Errorf("plan:1 answered %q, want plan:'s handler", a.Content)
	}
	gone := tb.press(tb.channel, msg, tb.user, "gone:1", 0)
	if a := tb.answer(gone); !a.Ephemeral || a.Content != "This button no longer does anything." {
		t.Errorf("a press nothing handles answered %q, ephemeral %v", a.Content, a.Ephemeral)
	}
	if len(short.all()) != 1 || len(long.all()) != 1 {
		t.Errorf("handlers saw %v and %v, want one press each", short.all(), long.all())
	}

	// A bot's press is ignored: the human's press after it is answered,
	// and the bot's never is.
	botPress := tb.fd.Press(tb.channel, msg, tb.fd.BotUser("otherbot"), "plan:1", discord.PermissionAdministrator)
	tb.press(tb.channel, msg, tb.user, "plan:1", 0)
	if cb := tb.fd.Callbacks(botPress); len(cb) != 0 {
		t.Errorf("a bot's press was answered with %v", cb)
	}
	if n := len(short.all()); n != 2 {
		t.Errorf("plan: handled %d presses, want 2 (the bot's ignored)", n)
	}

	defer func() {
		if recover() == nil {
			t.Error("registering a prefix twice did not panic")
		}
	}()
	tb.HandleButtons("plan:", func(context.Context, Press) PressAnswer { return PressAnswer{} })
}

func TestPressesIgnoreTheAllowlists(t *testing.T) {
	tb := startBot(t, Options{Access: NewAccess([]string{"1"}, []string{"2"}, nil)})
	var p presses
	tb.HandleButtons("apply:", p.handler(func(Press) PressAnswer { return PressAnswer{Notice: "ok"} }))
	msg := tb.postButtons(tb.channel, applyDiscard)
	if a := tb.answer(tb.press(tb.channel, msg, tb.user, "apply:42", 0)); a.Content != "ok" {
		t.Errorf("a user outside the allowlist got %q, want the handler's answer", a.Content)
	}
}

func TestEditMessageRemovesButtons(t *testing.T) {
	tb := startBot(t, Options{})
	msg := tb.postButtons(tb.channel, applyDiscard)
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := tb.EditMessage(ctx, tb.channel.String(), msg.String(), "Expired: nobody answered."); err != nil {
		t.Fatal(err)
	}
	m := tb.message(tb.channel, msg)
	if m.Content != "Expired: nobody answered." || len(m.Buttons()) != 0 || !m.Edited {
		t.Errorf("after EditMessage: %q, buttons %v, edited %v", m.Content, m.Buttons(), m.Edited)
	}
	edits := tb.requests("PATCH", "/channels/"+tb.channel.String()+"/messages/"+msg.String())
	if len(edits) != 1 || !strings.Contains(string(edits[0].Body), `"components":[]`) {
		t.Errorf("PATCH bodies %v, want one with components []", edits)
	}

	if err := tb.EditMessage(ctx, tb.channel.String(), "12x", "text"); err == nil {
		t.Error("EditMessage took an invalid message id")
	}
	if err := tb.EditMessage(ctx, tb.channel.String(), msg.String(), ""); !errors.Is(err, ErrInvalidButtons) {
		t.Errorf("EditMessage with no text: %v, want ErrInvalidButtons", err)
	}
}

func TestPostButtonsRefusesInvalidInput(t *testing.T) {
	tb := startBot(t, Options{})
	ok := Button{ID: "apply:1", Label: "Apply"}
	six := []Button{ok, ok, ok, ok, ok, ok}
	for i := range six {
		six[i].ID = strings.Repeat("x", i+1)
	}
	tests := []struct {
		name    string
		channel string
		text    string
		buttons []Button
		want    string
	}{
		{"no buttons", "", "text", nil, "0 buttons, want 1-5"},
		{"six buttons", "", "text", six, "6 buttons, want 1-5"},
		{"empty label", "", "text", []Button{{ID: "a"}}, "button 1: label of 0 characters"},
		{"long label", "", "text", []Button{ok, {ID: "b", Label: strings.Repeat("é", 81)}}, "button 2: label of 81 characters"},
		{"empty id", "", "text", []Button{{Label: "Apply"}}, "button 1: ID of 0 bytes"},
		{"long id", "", "text", []Button{{ID: strings.Repeat("k", 101), Label: "Apply"}}, "button 1: ID of 101 bytes"},
		{"duplicate id", "", "text", []Button{ok, ok}, `button 2: ID "apply:1" used twice`},
		{"bad style", "", "text", []Button{{ID: "a", Label: "A", Style: 5}}, "button 1: style 5, want 1-4"},
		{"no text", "", "", []Button{ok}, "text of 0 characters"},
		{"long text", "", strings.Repeat("x", 2001), []Button{ok}, "text of 2001 characters"},
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tb.PostButtons(ctx, tb.channel.String(), tc.text, tc.buttons)
			if !errors.Is(err, ErrInvalidButtons) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want ErrInvalidButtons saying %q", err, tc.want)
			}
		})
	}
	if _, err := tb.PostButtons(ctx, "general", "text", []Button{ok}); err == nil || !strings.Contains(err.Error(), `invalid channel id "general"`) {
		t.Errorf("a bad channel id: %v", err)
	}
	if posts := tb.requests("POST", "/channels/"); len(posts) != 0 {
		t.Errorf("invalid input reached Discord: %v", posts)
	}

	// The limits themselves are taken.
	edge := []Button{{ID: strings.Repeat("k", 100), Label: strings.Repeat("é", 80), Style: ButtonSecondary}}
	for i := 1; i < 5; i++ {
		edge = append(edge, Button{ID: strings.Repeat("k", i), Label: "x", Style: ButtonPrimary})
	}
	if _, err := tb.PostButtons(ctx, tb.channel.String(), strings.Repeat("é", 2000), edge); err != nil {
		t.Errorf("a message at every limit was refused: %v", err)
	}
}
