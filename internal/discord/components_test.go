package discord

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/diamondburned/arikawa/v3/api"
	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/google/go-cmp/cmp"

	"github.com/agentgateway/gateway/internal/fakediscord"
)

// colourRows are a select menu of three colours (pick 1-2) and a row with
// an "Other…" button.
var colourRows = []Row{
	{Select: &Select{ID: "colour:1", Placeholder: "Pick colours", Min: 1, Max: 2, Options: []SelectOption{
		{Label: "Red", Value: "r", Description: "warm"}, {Label: "Green", Value: "g"}, {Label: "Blue", Value: "b"},
	}}},
	{Buttons: []Button{{ID: "other:1", Label: "Other…", Style: ButtonSecondary}}},
}

// postRows posts text with rows in ch and returns the message's id.
func (tb *testBot) postRows(ch discord.ChannelID, rows []Row) discord.MessageID {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	id, err := tb.PostRows(ctx, ch.String(), "Which colours?", rows)
	if err != nil {
		tb.t.Fatal(err)
	}
	sf, err := discord.ParseSnowflake(id)
	if err != nil {
		tb.t.Fatalf("PostRows returned message id %q: %v", id, err)
	}
	return discord.MessageID(sf)
}

// answered waits until the bot has answered interaction id.
func (tb *testBot) answered(id string) {
	tb.t.Helper()
	tb.fd.Wait(tb.t, "the answer to interaction "+id, waitLong, func() bool { return len(tb.fd.Callbacks(id)) > 0 })
}

func TestSelectChoiceReachesHandler(t *testing.T) {
	tb := startBot(t, Options{})
	role := tb.fd.AddRole(tb.guild, "reviewers")
	tb.fd.SetRoles(tb.guild, tb.user, role)
	var got presses
	next := "Now pick a size."
	tb.HandleButtons("colour:", got.handler(func(Press) PressAnswer {
		return PressAnswer{Update: &next, Rows: []Row{{Select: &Select{ID: "size:1", Options: []SelectOption{{Label: "Small", Value: "s"}}}}}}
	}))
	msg := tb.postRows(tb.channel, colourRows)

	m := tb.message(tb.channel, msg)
	want := []fakediscord.Select{{ID: "colour:1", Placeholder: "Pick colours", Min: 1, Max: 2, Options: []fakediscord.SelectOption{
		{Label: "Red", Value: "r", Description: "warm"}, {Label: "Green", Value: "g"}, {Label: "Blue", Value: "b"}}}}
	if diff := cmp.Diff(want, m.Selects()); diff != "" {
		t.Errorf("selects (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]fakediscord.Button{{ID: "other:1", Label: "Other…", Style: 2}}, m.Buttons()); diff != "" {
		t.Errorf("buttons (-want +got):\n%s", diff)
	}

	id, err := tb.fd.ChooseOptions(tb.channel, msg, tb.user, "colour:1", "g", "b")
	if err != nil {
		t.Fatal(err)
	}
	tb.answered(id)
	p := got.all()
	if len(p) != 1 {
		t.Fatalf("handler got %d choices, want 1", len(p))
	}
	wantPress := Press{ButtonID: "colour:1", UserID: tb.user.ID.String(), ChannelID: tb.channel.String(), GuildID: tb.guild.String(),
		MessageID: msg.String(), Roles: []string{role.String()}, Values: []string{"g", "b"}}
	if diff := cmp.Diff(wantPress, p[0]); diff != "" {
		t.Errorf("press (-want +got):\n%s", diff)
	}
	m = tb.message(tb.channel, msg)
	if m.Content != next || len(m.Buttons()) != 0 || len(m.Selects()) != 1 || m.Selects()[0].ID != "size:1" {
		t.Errorf("after the answer: %q, buttons %v, selects %v; want the next question with its select only", m.Content, m.Buttons(), m.Selects())
	}
}

func TestModalOpenedAndSubmissionReachesHandler(t *testing.T) {
	tb := startBot(t, Options{})
	form := &Modal{ID: "form:1", Title: "Your answer", Fields: []TextField{
		{ID: "answer", Label: "Answer", Required: true, Placeholder: "Type it"},
		{ID: "why", Label: "Why", Paragraph: true, MaxLength: 200},
	}}
	var opened, submitted presses
	tb.HandleButtons("other:", opened.handler(func(Press) PressAnswer { return PressAnswer{Modal: form} }))
	done := "Answered."
	tb.HandleButtons("form:", submitted.handler(func(p Press) PressAnswer {
		text := done + " " + p.Fields["answer"]
		return PressAnswer{Update: &text}
	}))
	msg := tb.postRows(tb.channel, colourRows)

	press := tb.press(tb.channel, msg, tb.user, "other:1", 0)
	md, ok := tb.fd.ModalOpened(press)
	wantModal := fakediscord.Modal{ID: "form:1", Title: "Your answer", Interaction: press, User: tb.user.ID, Fields: []fakediscord.TextInput{
		{ID: "answer", Label: "Answer", Placeholder: "Type it", Style: 1, Required: true, MaxLength: 4000},
		{ID: "why", Label: "Why", Style: 2, MaxLength: 200},
	}}
	if diff := cmp.Diff(wantModal, md); !ok || diff != "" {
		t.Fatalf("modal opened (-want +got):\n%s", diff)
	}

	sub, err := tb.fd.SubmitModal(tb.user, "form:1", map[string]string{"answer": "Postgres", "why": "simpler"})
	if err != nil {
		t.Fatal(err)
	}
	tb.answered(sub)
	p := submitted.all()
	if len(p) != 1 {
		t.Fatalf("handler got %d submissions, want 1", len(p))
	}
	if diff := cmp.Diff(map[string]string{"answer": "Postgres", "why": "simpler"}, p[0].Fields); diff != "" {
		t.Errorf("fields (-want +got):\n%s", diff)
	}
	if p[0].ButtonID != "form:1" || p[0].MessageID != msg.String() || p[0].Values != nil {
		t.Errorf("submission %+v, want form:1 on message %s", p[0], msg)
	}
	if m := tb.message(tb.channel, msg); m.Content != "Answered. Postgres" || len(m.Selects())+len(m.Buttons()) != 0 {
		t.Errorf("after the submission: %q, selects %v, buttons %v", m.Content, m.Selects(), m.Buttons())
	}
}

func TestInvalidModalAnswersWithNotice(t *testing.T) {
	tb := startBot(t, Options{})
	tb.HandleButtons("other:", func(context.Context, Press) PressAnswer {
		return PressAnswer{Modal: &Modal{ID: "form:1", Title: strings.Repeat("t", 46), Fields: []TextField{{ID: "a", Label: "A"}}}}
	})
	msg := tb.postRows(tb.channel, colourRows)
	press := tb.press(tb.channel, msg, tb.user, "other:1", 0)
	if _, ok := tb.fd.ModalOpened(press); ok {
		t.Error("an invalid modal opened")
	}
	if a := tb.answer(press); !a.Ephemeral || a.Content != unopenedModal {
		t.Errorf("answer %q (ephemeral %v), want the ephemeral notice", a.Content, a.Ephemeral)
	}
}

func TestInvalidRowsRefused(t *testing.T) {
	tb := startBot(t, Options{})
	opts := func(n int) []SelectOption {
		var o []SelectOption
		for i := range n {
			o = append(o, SelectOption{Label: "L", Value: strings.Repeat("v", i+1)})
		}
		return o
	}
	one := Row{Buttons: []Button{{ID: "b", Label: "B"}}}
	bad := []struct {
		name string
		rows []Row
	}{
		{"no rows", nil},
		{"six rows", []Row{{Buttons: []Button{{ID: "1", Label: "1"}}}, {Buttons: []Button{{ID: "2", Label: "2"}}}, {Buttons: []Button{{ID: "3", Label: "3"}}},
			{Buttons: []Button{{ID: "4", Label: "4"}}}, {Buttons: []Button{{ID: "5", Label: "5"}}}, {Buttons: []Button{{ID: "6", Label: "6"}}}}},
		{"a select and buttons in a row", []Row{{Select: &Select{ID: "s", Options: opts(1)}, Buttons: one.Buttons}}},
		{"no options", []Row{{Select: &Select{ID: "s"}}}},
		{"26 options", []Row{{Select: &Select{ID: "s", Options: opts(26)}}}},
		{"a long label", []Row{{Select: &Select{ID: "s", Options: []SelectOption{{Label: strings.Repeat("l", 101), Value: "v"}}}}}},
		{"a duplicate value", []Row{{Select: &Select{ID: "s", Options: []SelectOption{{Label: "a", Value: "v"}, {Label: "b", Value: "v"}}}}}},
		{"max above the options", []Row{{Select: &Select{ID: "s", Min: 1, Max: 3, Options: opts(2)}}}},
		{"an ID used twice", []Row{{Select: &Select{ID: "b", Options: opts(1)}}, one}},
		{"a long ID", []Row{{Select: &Select{ID: strings.Repeat("x", 101), Options: opts(1)}}}},
	}
	ctx := context.Background()
	for _, tc := range bad {
		if _, err := tb.PostRows(ctx, tb.channel.String(), "Pick", tc.rows); !errors.Is(err, ErrInvalidButtons) {
			t.Errorf("%s: %v, want ErrInvalidButtons", tc.name, err)
		}
	}
	if n := len(tb.requests("POST", "/channels/"+tb.channel.String()+"/messages")); n != 0 {
		t.Errorf("%d invalid messages reached Discord", n)
	}
	if _, err := (&Modal{ID: "f", Title: "T"}).response(); !errors.Is(err, ErrInvalidButtons) {
		t.Errorf("a modal without fields: %v, want ErrInvalidButtons", err)
	}
	if _, err := (&Modal{ID: "f", Title: "T", Fields: []TextField{{ID: "a", Label: "A", MaxLength: 4001}}}).response(); !errors.Is(err, ErrInvalidButtons) {
		t.Errorf("a field of max length 4001: %v, want ErrInvalidButtons", err)
	}
}

func TestRolesReachPressAndCommand(t *testing.T) {
	tb := startBot(t, Options{})
	r1, r2 := tb.fd.AddRole(tb.guild, "one"), tb.fd.AddRole(tb.guild, "two")
	tb.fd.SetRoles(tb.guild, tb.user, r1, r2)
	var got presses
	tb.HandleButtons("apply:", got.handler(func(Press) PressAnswer { return PressAnswer{} }))
	commands := make(chan Command, 1)
	tb.HandleCommand(api.CreateCommandData{Name: "whoami", Description: "d"}, func(_ context.Context, c Command) CommandAnswer {
		commands <- c
		return CommandAnswer{Text: "ok"}
	})

	msg := tb.postButtons(tb.channel, applyDiscard)
	tb.press(tb.channel, msg, tb.user, "apply:42", 0)
	want := []string{r1.String(), r2.String()}
	if p := got.all(); len(p) != 1 || !cmp.Equal(want, p[0].Roles) {
		t.Errorf("presses %+v, want one with roles %v", p, want)
	}

	tb.fd.Interact(tb.channel, tb.user, "whoami", nil)
	select {
	case c := <-commands:
		if !cmp.Equal(want, c.Roles) {
			t.Errorf("command roles %v, want %v", c.Roles, want)
		}
	case <-tb.Bot.ctx.Done():
		t.Fatal("the bot stopped")
	case <-contextTimeout(t):
		t.Fatal("the command did not reach its handler")
	}

	// In a DM there is no member, hence no roles.
	dm := tb.fd.AddChannel(fakediscord.Channel{})
	dmMsg := tb.postButtons(dm, applyDiscard)
	tb.press(dm, dmMsg, tb.user, "apply:42", 0)
	if p := got.all(); len(p) != 2 || p[1].Roles != nil {
		t.Errorf("a DM press has roles %v, want none", p[len(p)-1].Roles)
	}
}

// contextTimeout is a channel closed after waitLong.
func contextTimeout(t *testing.T) <-chan struct{} {
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	t.Cleanup(cancel)
	return ctx.Done()
}

func TestCommandModalSubmissionPostsUpdate(t *testing.T) {
	tb := startBot(t, Options{})
	tb.HandleCommand(api.CreateCommandData{Name: "ask", Description: "d"}, func(context.Context, Command) CommandAnswer {
		return CommandAnswer{Modal: &Modal{ID: "ask:1", Title: "Ask", Fields: []TextField{{ID: "q", Label: "Question", Required: true}}}}
	})
	var got presses
	tb.HandleButtons("ask:", got.handler(func(p Press) PressAnswer {
		if p.Fields["q"] == "nothing" {
			return PressAnswer{}
		}
		text := "Asked: " + p.Fields["q"]
		return PressAnswer{Update: &text}
	}))
	cmd := tb.fd.Interact(tb.channel, tb.user, "ask", nil)
	tb.answered(cmd)
	if _, ok := tb.fd.ModalOpened(cmd); !ok {
		t.Fatalf("the command opened no modal; callbacks %v", tb.fd.Callbacks(cmd))
	}
	sub, err := tb.fd.SubmitModal(tb.user, "ask:1", map[string]string{"q": "Why?"})
	if err != nil {
		t.Fatal(err)
	}
	tb.answered(sub)
	// A modal opened by a command has no message to update: the update
	// is posted for everyone.
	if a := tb.answer(sub); a.Content != "Asked: Why?" || a.Ephemeral {
		t.Errorf("answer %q (ephemeral %v), want the update posted", a.Content, a.Ephemeral)
	}
	if p := got.all(); len(p) != 1 || p[0].MessageID != "" {
		t.Errorf("submissions %+v, want one without a message", p)
	}

	// Nothing to show is shown to the submitter as done: a submission
	// without a message cannot be acknowledged silently.
	cmd = tb.fd.Interact(tb.channel, tb.user, "ask", nil)
	tb.answered(cmd)
	sub, err = tb.fd.SubmitModal(tb.user, "ask:1", map[string]string{"q": "nothing"})
	if err != nil {
		t.Fatal(err)
	}
	tb.answered(sub)
	if a := tb.answer(sub); a.Content != "Done." || !a.Ephemeral {
		t.Errorf("answer %q (ephemeral %v), want an ephemeral Done.", a.Content, a.Ephemeral)
	}
}
