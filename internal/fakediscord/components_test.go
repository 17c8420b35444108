package fakediscord

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/google/go-cmp/cmp"
)

// selectRowsJSON is a select menu of three options (pick 1-2) and a row
// with one button.
const selectRowsJSON = `[{"type":1,"components":[{"type":3,"custom_id":"q:1","placeholder":"Pick",` +
	`"min_values":1,"max_values":2,"options":[` +
	`{"label":"Red","value":"r","description":"warm"},{"label":"Green","value":"g"},{"label":"Blue","value":"b"}]}]},` +
	`{"type":1,"components":[{"type":2,"style":2,"label":"Other…","custom_id":"other:1"}]}]`

func postComponents(t *testing.T, s *Server, ch discord.ChannelID, components string) (int, map[string]any) {
	t.Helper()
	return call(t, s, "POST", "/channels/"+ch.String()+"/messages", "application/json",
		[]byte(`{"content":"Which colour?","components":`+components+`}`))
}

func callback(t *testing.T, s *Server, id, body string) (int, map[string]any) {
	t.Helper()
	return call(t, s, "POST", "/interactions/"+id+"/itoken-"+id+"/callback", "application/json", []byte(body))
}

func TestSelectMenuStoredAndChosen(t *testing.T) {
	s := Start(t)
	g, ch := s.AddGuild("g")
	gw := dialGateway(t, s)
	alice := s.User("alice")
	role := s.AddRole(g, "reviewers")
	s.SetRoles(g, alice, role)

	status, out := postComponents(t, s, ch, selectRowsJSON)
	if status != 200 {
		t.Fatalf("POST with a select menu: %d %v", status, out)
	}
	msg := messageID(t, out)
	gw.next("MESSAGE_CREATE")
	m, _ := s.Message(ch, msg)
	want := []Select{{ID: "q:1", Placeholder: "Pick", Min: 1, Max: 2, Options: []SelectOption{
		{Label: "Red", Value: "r", Description: "warm"}, {Label: "Green", Value: "g"}, {Label: "Blue", Value: "b"}}}}
	if diff := cmp.Diff(want, m.Selects()); diff != "" {
		t.Errorf("selects (-want +got):\n%s", diff)
	}
	if len(m.Buttons()) != 1 {
		t.Errorf("buttons %v, want the Other… button", m.Buttons())
	}

	for _, bad := range [][]string{nil, {"r", "g", "b"}, {"x"}, {"r", "r"}} {
		if _, err := s.ChooseOptions(ch, msg, alice, "q:1", bad...); !errors.Is(err, ErrRefused) {
			t.Errorf("ChooseOptions %q: %v, want ErrRefused", bad, err)
		}
	}
	if _, err := s.ChooseOptions(ch, msg, alice, "q:2", "r"); !errors.Is(err, ErrRefused) {
		t.Errorf("ChooseOptions of a missing select: %v, want ErrRefused", err)
	}

	id, err := s.ChooseOptions(ch, msg, alice, "q:1", "g", "b")
	if err != nil {
		t.Fatal(err)
	}
	raw := gw.next("INTERACTION_CREATE")
	var ev discord.InteractionEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	sel, ok := ev.Data.(*discord.StringSelectInteraction)
	if !ok || sel.CustomID != "q:1" || !cmp.Equal(sel.Values, []string{"g", "b"}) {
		t.Fatalf("interaction data %#v, want q:1 with g and b", ev.Data)
	}
	if ev.ID.String() != id || ev.Message == nil || ev.Message.ID != msg || ev.Member == nil ||
		!cmp.Equal(ev.Member.RoleIDs, []discord.RoleID{role}) {
		t.Errorf("interaction %+v: want %s on %s by a member with role %s", ev, id, msg, role)
	}

	// The choice is a component interaction: UPDATE_MESSAGE edits the
	// message, and the select goes with components [].
	if status, out := callback(t, s, id, `{"type":7,"data":{"content":"Green and blue.","components":[]}}`); status != http.StatusNoContent {
		t.Fatalf("UPDATE_MESSAGE: %d %v", status, out)
	}
	if m, _ := s.Message(ch, msg); m.Content != "Green and blue." || len(m.Selects()) != 0 {
		t.Errorf("after the update: %q with selects %v", m.Content, m.Selects())
	}
}

func TestSelectMenusRefused(t *testing.T) {
	s := Start(t)
	_, ch := s.AddGuild("g")
	opt := func(v string) string { return `{"label":"L","value":"` + v + `"}` }
	opts := func(n int) string {
		var o []string
		for i := range n {
			o = append(o, opt(strings.Repeat("v", i+1)))
		}
		return strings.Join(o, ",")
	}
	sel := func(extra, options string) string {
		return `{"type":3,"custom_id":"s"` + extra + `,"options":[` + options + `]}`
	}
	row := func(cs ...string) string { return `{"type":1,"components":[` + strings.Join(cs, ",") + `]}` }
	button := `{"type":2,"style":1,"label":"x","custom_id":"b"}`
	refused := []struct{ name, components string }{
		{"no options", `[` + row(sel("", "")) + `]`},
		{"26 options", `[` + row(sel("", opts(26))) + `]`},
		{"a long label", `[` + row(sel("", `{"label":"`+strings.Repeat("x", 101)+`","value":"v"}`)) + `]`},
		{"a long value", `[` + row(sel("", opt(strings.Repeat("x", 101)))) + `]`},
		{"a duplicate value", `[` + row(sel("", opt("a")+","+opt("a"))) + `]`},
		{"a long custom_id", `[` + row(`{"type":3,"custom_id":"`+strings.Repeat("x", 101)+`","options":[`+opt("a")+`]}`) + `]`},
		{"max above the options", `[` + row(sel(`,"min_values":1,"max_values":3`, opts(2))) + `]`},
		{"min above max", `[` + row(sel(`,"min_values":2,"max_values":1`, opts(2))) + `]`},
		{"a button beside it", `[` + row(sel("", opts(2)), button) + `]`},
		{"six rows", `[` + strings.Repeat(row(button)+",", 5) + row(sel("", opts(1))) + `]`},
		{"a text input in a message", `[` + row(`{"type":4,"custom_id":"t","style":1,"label":"x"}`) + `]`},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			status, out := postComponents(t, s, ch, tc.components)
			if status != 400 || out["code"] != float64(50035) {
				t.Errorf("got %d %v, want 400 with code 50035", status, out)
			}
		})
	}
	if status, out := postComponents(t, s, ch, `[`+row(sel(`,"min_values":0,"max_values":25`, opts(25)))+`]`); status != 200 {
		t.Errorf("a select of 25 options, pick 0-25: %d %v", status, out)
	}
}

// modalJSON opens a modal with a required short input and an optional
// paragraph of at most 10 characters.
const modalJSON = `{"type":9,"data":{"custom_id":"form:1","title":"Your answer","components":[` +
	`{"type":1,"components":[{"type":4,"custom_id":"answer","style":1,"label":"Answer","required":true}]},` +
	`{"type":1,"components":[{"type":4,"custom_id":"why","style":2,"label":"Why","required":false,"min_length":0,"max_length":10}]}]}}`

func TestModalOpenedAndSubmitted(t *testing.T) {
	s := Start(t)
	g, ch := s.AddGuild("g")
	gw := dialGateway(t, s)
	alice, bob := s.User("alice"), s.User("bob")
	role := s.AddRole(g, "planners")
	s.SetRoles(g, alice, role)

	_, out := postComponents(t, s, ch, selectRowsJSON)
	msg := messageID(t, out)
	press := s.Press(ch, msg, alice, "other:1", 0)
	gw.next("INTERACTION_CREATE")
	if status, out := callback(t, s, press, modalJSON); status != http.StatusNoContent {
		t.Fatalf("MODAL: %d %v", status, out)
	}
	md, ok := s.ModalOpened(press)
	want := Modal{ID: "form:1", Title: "Your answer", Interaction: press, User: alice.ID, Fields: []TextInput{
		{ID: "answer", Label: "Answer", Style: 1, Required: true, MaxLength: 4000},
		{ID: "why", Label: "Why", Style: 2, MaxLength: 10},
	}}
	if diff := cmp.Diff(want, md); !ok || diff != "" {
		t.Errorf("modal opened (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{9}, s.Callbacks(press)); diff != "" {
		t.Errorf("callbacks (-want +got):\n%s", diff)
	}

	refusals := []struct {
		name   string
		user   string
		id     string
		values map[string]string
	}{
		{"another user", "bob", "form:1", map[string]string{"answer": "x"}},
		{"another modal", "alice", "form:2", map[string]string{"answer": "x"}},
		{"a required input empty", "alice", "form:1", map[string]string{"why": "x"}},
		{"a value too long", "alice", "form:1", map[string]string{"answer": "x", "why": strings.Repeat("y", 11)}},
		{"an unknown input", "alice", "form:1", map[string]string{"answer": "x", "who": "y"}},
	}
	for _, tc := range refusals {
		user := alice
		if tc.user == "bob" {
			user = bob
		}
		if _, err := s.SubmitModal(user, tc.id, tc.values); !errors.Is(err, ErrRefused) {
			t.Errorf("%s: %v, want ErrRefused", tc.name, err)
		}
	}

	sub, err := s.SubmitModal(alice, "form:1", map[string]string{"answer": "Use Postgres", "why": "simpler"})
	if err != nil {
		t.Fatal(err)
	}
	raw := gw.next("INTERACTION_CREATE")
	var ev discord.InteractionEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	form, ok := ev.Data.(*discord.ModalInteraction)
	if !ok || form.CustomID != "form:1" || ev.ID.String() != sub || ev.Message == nil || ev.Message.ID != msg {
		t.Fatalf("submission %+v with data %#v, want form:1 on message %s", ev, ev.Data, msg)
	}
	got := map[string]string{}
	for _, c := range form.Components {
		for _, ic := range *c.(*discord.ActionRowComponent) {
			in := ic.(*discord.TextInputComponent)
			got[string(in.CustomID)] = in.Value
		}
	}
	if diff := cmp.Diff(map[string]string{"answer": "Use Postgres", "why": "simpler"}, got); diff != "" {
		t.Errorf("submitted values (-want +got):\n%s", diff)
	}
	if ev.Member == nil || !cmp.Equal(ev.Member.RoleIDs, []discord.RoleID{role}) {
		t.Errorf("submission member %+v, want role %s", ev.Member, role)
	}
	if len(s.OpenModals(alice.ID)) != 0 {
		t.Errorf("the modal is still open after its submission")
	}
	if _, err := s.SubmitModal(alice, "form:1", map[string]string{"answer": "again"}); !errors.Is(err, ErrRefused) {
		t.Errorf("a second submission: %v, want ErrRefused", err)
	}

	// A modal cannot answer a submission; an update of the message can.
	if status, _ := callback(t, s, sub, modalJSON); status != 400 {
		t.Errorf("MODAL answering a submission: %d, want 400", status)
	}
	if status, out := callback(t, s, sub, `{"type":7,"data":{"content":"Answered: Use Postgres","components":[]}}`); status != http.StatusNoContent {
		t.Fatalf("UPDATE_MESSAGE answering the submission: %d %v", status, out)
	}
	if m, _ := s.Message(ch, msg); m.Content != "Answered: Use Postgres" || len(m.Selects()) != 0 {
		t.Errorf("after the update: %q, selects %v", m.Content, m.Selects())
	}
}

func TestModalsRefused(t *testing.T) {
	s := Start(t)
	_, ch := s.AddGuild("g")
	alice := s.User("alice")
	input := `{"type":4,"custom_id":"a","style":1,"label":"A"}`
	modal := func(title, rows string) string {
		return `{"type":9,"data":{"custom_id":"f","title":"` + title + `","components":[` + rows + `]}}`
	}
	row := func(c string) string { return `{"type":1,"components":[` + c + `]}` }
	refused := []struct{ name, body string }{
		{"no title", modal("", row(input))},
		{"a long title", modal(strings.Repeat("t", 46), row(input))},
		{"no rows", modal("T", "")},
		{"six rows", modal("T", strings.Repeat(row(input)+",", 5)+row(input))},
		{"a button", modal("T", row(`{"type":2,"style":1,"label":"x","custom_id":"b"}`))},
		{"a long label", modal("T", row(`{"type":4,"custom_id":"a","style":1,"label":"`+strings.Repeat("l", 46)+`"}`))},
		{"a bad style", modal("T", row(`{"type":4,"custom_id":"a","style":3,"label":"A"}`))},
		{"max_length over 4000", modal("T", row(`{"type":4,"custom_id":"a","style":1,"label":"A","max_length":4001}`))},
		{"a duplicate id", modal("T", row(input)+","+row(input))},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			_, out := postComponents(t, s, ch, `[`+row(`{"type":2,"style":1,"label":"x","custom_id":"open"}`)+`]`)
			press := s.Press(ch, messageID(t, out), alice, "open", 0)
			if status, out := callback(t, s, press, tc.body); status != 400 || out["code"] != float64(50035) {
				t.Errorf("got %d %v, want 400 with code 50035", status, out)
			}
			if _, ok := s.ModalOpened(press); ok {
				t.Error("a refused modal opened")
			}
		})
	}
}

func TestRolesInEvents(t *testing.T) {
	s := Start(t)
	g, ch := s.AddGuild("g")
	dm := s.AddChannel(Channel{})
	gw := dialGateway(t, s)
	alice := s.User("alice")
	r1, r2 := s.AddRole(g, "one"), s.AddRole(g, "two")
	s.SetRoles(g, alice, r1, r2)

	s.Post(ch, alice, "hello")
	var mc struct {
		discord.Message
		Member *discord.Member `json:"member"`
	}
	if err := json.Unmarshal(gw.next("MESSAGE_CREATE"), &mc); err != nil {
		t.Fatal(err)
	}
	if mc.Member == nil || !cmp.Equal(mc.Member.RoleIDs, []discord.RoleID{r1, r2}) {
		t.Errorf("MESSAGE_CREATE member %+v, want roles %s %s", mc.Member, r1, r2)
	}
	s.Post(dm, alice, "hello")
	mc.Member = nil
	json.Unmarshal(gw.next("MESSAGE_CREATE"), &mc)
	if mc.Member != nil {
		t.Errorf("a DM's MESSAGE_CREATE has a member %+v", mc.Member)
	}

	s.Interact(ch, alice, "claude", map[string]string{"prompt": "hi"})
	var ev discord.InteractionEvent
	json.Unmarshal(gw.next("INTERACTION_CREATE"), &ev)
	if ev.Member == nil || !cmp.Equal(ev.Member.RoleIDs, []discord.RoleID{r1, r2}) {
		t.Errorf("INTERACTION_CREATE member %+v, want roles %s %s", ev.Member, r1, r2)
	}
	s.SetRoles(g, alice)
	if roles := s.MemberRoles(g, alice.ID); len(roles) != 0 {
		t.Errorf("roles after SetRoles with none: %v", roles)
	}
}
