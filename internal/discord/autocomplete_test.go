package discord

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/google/go-cmp/cmp"

	"github.com/agentgateway/gateway/internal/fakediscord"
)

func TestAutocompleteAnswersWithTheHandlersChoices(t *testing.T) {
	tb := startBot(t, Options{})
	var (
		mu  sync.Mutex
		got []AutocompleteRequest
	)
	tb.HandleAutocomplete("project", func(_ context.Context, r AutocompleteRequest) []Choice {
		mu.Lock()
		got = append(got, r)
		mu.Unlock()
		return []Choice{{Name: "app", Value: "app"}, {Name: "  web\nsite ", Value: "web"}}
	})
	choices, err := tb.fd.Autocomplete(tb.channel, tb.user, "project", "path", "a", map[string]string{"mode": "keep"})
	if err != nil {
		t.Fatal(err)
	}
	want := []fakediscord.Choice{{Name: "app", Value: "app"}, {Name: "web site", Value: "web"}}
	if diff := cmp.Diff(want, choices); diff != "" {
		t.Errorf("choices (-want +got):\n%s", diff)
	}
	mu.Lock()
	defer mu.Unlock()
	wantReq := []AutocompleteRequest{{
		Command: "project", UserID: tb.user.ID.String(), ChannelID: tb.channel.String(), GuildID: tb.guild.String(),
		Focused: "path", Value: "a", Options: map[string]string{"mode": "keep"},
	}}
	if diff := cmp.Diff(wantReq, got); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}
}

func TestAutocompleteOddAnswersAndPayloads(t *testing.T) {
	many := make([]Choice, 40)
	for i := range many {
		many[i] = Choice{Name: fmt.Sprint("n", i), Value: fmt.Sprint("v", i)}
	}
	long := strings.Repeat("é", 150)
	for _, tc := range []struct {
		name    string
		command string
		h       func(context.Context, AutocompleteRequest) []Choice
		want    int // choices the user sees
		check   func(t *testing.T, c []fakediscord.Choice)
	}{
		{name: "more than 25", command: "x", h: func(context.Context, AutocompleteRequest) []Choice { return many }, want: 25},
		{name: "long names cut, long or empty values left out", command: "x",
			h: func(context.Context, AutocompleteRequest) []Choice {
				return []Choice{{Name: long, Value: "ok"}, {Name: "v", Value: long}, {Name: "e", Value: ""}, {Name: "dup", Value: "ok"}, {Name: "", Value: "named"}}
			}, want: 2,
			check: func(t *testing.T, c []fakediscord.Choice) {
				if n := len([]rune(c[0].Name)); n != 100 || c[1].Name != "named" {
					t.Errorf("choices %+v: want the long name cut to 100, the empty one named by its value", c)
				}
			}},
		{name: "none", command: "x", h: func(context.Context, AutocompleteRequest) []Choice { return nil }},
		{name: "panic", command: "x", h: func(context.Context, AutocompleteRequest) []Choice { panic("boom") }},
		{name: "too slow", command: "x", h: func(ctx context.Context, _ AutocompleteRequest) []Choice {
			<-ctx.Done()
			<-make(chan struct{}) // never returns: the bot must answer anyway
			return many
		}},
		{name: "nobody handles it", command: "unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := startBot(t, Options{})
			if tc.h != nil {
				tb.HandleAutocomplete(tc.command, tc.h)
			}
			c, err := tb.fd.Autocomplete(tb.channel, tb.user, tc.command, "q", "", nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(c) != tc.want {
				t.Errorf("%d choices %+v, want %d", len(c), c, tc.want)
			}
			if tc.check != nil && len(c) == tc.want {
				tc.check(t, c)
			}
		})
	}
}

func TestAutocompleteFollowsTheAllowlists(t *testing.T) {
	tb := startBot(t, Options{Access: NewAccess([]string{"1"}, nil, nil)})
	asked := false
	var mu sync.Mutex
	tb.HandleAutocomplete("project", func(context.Context, AutocompleteRequest) []Choice {
		mu.Lock()
		asked = true
		mu.Unlock()
		return []Choice{{Name: "secret-project", Value: "secret-project"}}
	})
	c, err := tb.fd.Autocomplete(tb.channel, tb.user, "project", "path", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(c) != 0 || asked {
		t.Errorf("a user outside the allowlist got %+v (handler asked: %v), want nothing", c, asked)
	}
}

func TestAutocompleteIgnoresBots(t *testing.T) {
	tb := startBot(t, Options{})
	tb.HandleAutocomplete("project", func(context.Context, AutocompleteRequest) []Choice {
		return []Choice{{Name: "a", Value: "a"}}
	})
	if _, err := tb.fd.Autocomplete(tb.channel, tb.fd.BotUser("other"), "project", "path", "", nil); !errors.Is(err, fakediscord.ErrNoCompletion) {
		t.Errorf("a bot's autocomplete was answered: %v", err)
	}
}

// A member let in by ALLOWED_ROLE_IDS gets the choices a listed user gets.
func TestAutocompleteCountsAllowedRoles(t *testing.T) {
	const role = discord.RoleID(770000000000000078)
	tb := startBot(t, Options{Access: NewAccess([]string{"1"}, nil, nil).WithRoles([]string{role.String()})})
	tb.fd.SetRoles(tb.guild, tb.user, role)
	tb.HandleAutocomplete("project", func(context.Context, AutocompleteRequest) []Choice {
		return []Choice{{Name: "web", Value: "web"}}
	})
	c, err := tb.fd.Autocomplete(tb.channel, tb.user, "project", "path", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(c) != 1 {
		t.Errorf("a member with an allowed role got %+v, want the handler's choice", c)
	}
}
