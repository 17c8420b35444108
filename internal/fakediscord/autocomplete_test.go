package fakediscord

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/google/go-cmp/cmp"
)

func TestAutocomplete(t *testing.T) {
	choices := func(n int, name string) string {
		var cs []string
		for i := range n {
			cs = append(cs, fmt.Sprintf(`{"name":%q,"value":"v%d"}`, name, i))
		}
		return `{"type":8,"data":{"choices":[` + strings.Join(cs, ",") + `]}}`
	}
	for _, tc := range []struct {
		name     string
		callback string // "" sends none
		want     []Choice
		status   int
		wantErr  bool
	}{
		{name: "choices", callback: `{"type":8,"data":{"choices":[{"name":"app (main)","value":"app"},{"name":"web","value":"web"}]}}`,
			want: []Choice{{Name: "app (main)", Value: "app"}, {Name: "web", Value: "web"}}, status: http.StatusNoContent},
		{name: "no choices", callback: `{"type":8,"data":{"choices":[]}}`, want: []Choice{}, status: http.StatusNoContent},
		{name: "a message instead", callback: `{"type":4,"data":{"content":"hi"}}`, status: http.StatusBadRequest, wantErr: true},
		{name: "26 choices", callback: choices(26, "x"), status: http.StatusBadRequest, wantErr: true},
		{name: "name too long", callback: choices(1, strings.Repeat("é", 101)), status: http.StatusBadRequest, wantErr: true},
		{name: "empty name", callback: choices(1, ""), status: http.StatusBadRequest, wantErr: true},
		{name: "value too long", callback: `{"type":8,"data":{"choices":[{"name":"n","value":"` + strings.Repeat("v", 101) + `"}]}}`, status: http.StatusBadRequest, wantErr: true},
		{name: "no data", callback: `{"type":8}`, status: http.StatusBadRequest, wantErr: true},
		{name: "no answer", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Start(t)
			g, ch := s.AddGuild("g")
			gw := dialGateway(t, s)
			alice := s.User("alice")
			type result struct {
				choices []Choice
				err     error
			}
			done := make(chan result, 1)
			go func() {
				c, err := s.Autocomplete(ch, alice, "resume", "session", "ab", map[string]string{"mode": "x"})
				done <- result{c, err}
			}()
			raw := gw.next("INTERACTION_CREATE")
			var ev discord.InteractionEvent
			if err := json.Unmarshal(raw, &ev); err != nil {
				t.Fatal(err)
			}
			ac, ok := ev.Data.(*discord.AutocompleteInteraction)
			if !ok {
				t.Fatalf("interaction data %#v, want an autocomplete", ev.Data)
			}
			if ac.Name != "resume" || ac.Options.Focused().Name != "session" || ac.Options.Focused().String() != "ab" ||
				ac.Options.Find("mode").String() != "x" || ac.Options.Find("mode").Focused {
				t.Errorf("autocomplete %+v: want /resume typing ab in session, mode x", ac)
			}
			if ev.ChannelID != ch || ev.GuildID != g || ev.Member == nil || ev.Member.User.ID != alice.ID {
				t.Errorf("interaction %+v: want alice in channel %s", ev, ch)
			}
			if tc.callback != "" {
				id := ev.ID.String()
				status, out := call(t, s, "POST", "/interactions/"+id+"/itoken-"+id+"/callback", "application/json", []byte(tc.callback))
				if status != tc.status {
					t.Errorf("callback: %d %v, want %d", status, out, tc.status)
				}
			}
			r := <-done
			if tc.wantErr {
				if !errors.Is(r.err, ErrNoCompletion) {
					t.Errorf("Autocomplete = %v, %v; want ErrNoCompletion", r.choices, r.err)
				}
				return
			}
			if r.err != nil {
				t.Fatal(r.err)
			}
			if diff := cmp.Diff(tc.want, r.choices); diff != "" {
				t.Errorf("choices (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAutocompleteResultOnlyAnswersAutocomplete(t *testing.T) {
	s := Start(t)
	_, ch := s.AddGuild("g")
	gw := dialGateway(t, s)
	id := s.Interact(ch, s.User("alice"), "status", nil)
	gw.next("INTERACTION_CREATE")
	status, _ := call(t, s, "POST", "/interactions/"+id+"/itoken-"+id+"/callback", "application/json", []byte(`{"type":8,"data":{"choices":[]}}`))
	if status != http.StatusBadRequest {
		t.Errorf("type 8 for a slash command: %d, want 400", status)
	}
	if got := s.Callbacks(id); len(got) != 0 {
		t.Errorf("callbacks %v, want none", got)
	}
}
