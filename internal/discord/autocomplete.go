package discord

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/diamondburned/arikawa/v3/api"
	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/rs/zerolog"
)

// Choice is one suggestion while a user types an option: Name is what the
// user sees, Value what the option takes when it is picked.
type Choice struct {
	Name, Value string
}

// AutocompleteRequest is a user typing in an option declared with
// Autocomplete: true.
type AutocompleteRequest struct {
	Command   string
	UserID    string
	ChannelID string
	// GuildID is empty in a DM.
	GuildID string
	// Focused is the name of the option being typed, Value what is typed
	// in it so far.
	Focused, Value string
	// Options are the command's other options as typed so far, as text.
	Options map[string]string
}

// Discord's limits on an autocomplete answer.
const (
	maxChoices     = 25
	maxChoiceName  = 100 // characters
	maxChoiceValue = 100 // characters
)

// HandleAutocomplete registers h to suggest values while a user types in
// an option of command declared with Autocomplete: true; call it before
// Open. h runs in its own goroutine with a context that ends 2.5 s after
// the keystroke: Discord shows nothing after 3 s, and the bot then answers
// with no choices. Of h's choices at most 25 are sent, names cut to 100
// characters, and choices with an empty value, a value over 100
// characters or a value already offered are left out. Users the
// allowlists refuse get no choices and h is not asked.
func (b *Bot) HandleAutocomplete(command string, h func(context.Context, AutocompleteRequest) []Choice) {
	if h == nil {
		panic("discord: nil autocomplete handler for /" + command)
	}
	b.commands.mu.Lock()
	defer b.commands.mu.Unlock()
	if b.commands.complete == nil {
		b.commands.complete = map[string]func(context.Context, AutocompleteRequest) []Choice{}
	}
	b.commands.complete[command] = h
}

// onAutocomplete answers a keystroke in an autocompleted option. It runs on
// the event loop and does not block it.
func (b *Bot) onAutocomplete(ev *interactionCreate, data *discord.AutocompleteInteraction) {
	user := ev.Sender()
	if user == nil || user.Bot {
		return
	}
	log := b.log.With().Str("channel", ev.ChannelID.String()).Str("command", data.Name).Logger()
	b.commands.mu.Lock()
	h := b.commands.complete[data.Name]
	b.commands.mu.Unlock()
	if !b.allowed(user.ID, ev.ChannelID, ev.GuildID, memberRoles(ev.Member)...) {
		log.Debug().Str("user", user.ID.String()).Msg("autocomplete refused by the allowlists")
		h = nil
	}
	req := AutocompleteRequest{
		Command: data.Name, UserID: user.ID.String(), ChannelID: ev.ChannelID.String(),
		Options: map[string]string{},
	}
	if ev.GuildID.IsValid() {
		req.GuildID = ev.GuildID.String()
	}
	flattenOptions(data.Options, &req, 0)
	go func() {
		var choices []Choice
		if h != nil {
			choices = b.complete(h, req, log)
		}
		b.answerAutocomplete(ev, checkChoices(choices), log)
	}()
}

// flattenOptions takes the focused option and the others from opts and the
// options of its sub-commands (Discord nests them at most two deep).
func flattenOptions(opts discord.AutocompleteOptions, req *AutocompleteRequest, depth int) {
	for _, o := range opts {
		switch {
		case o.Type == discord.SubcommandOptionType || o.Type == discord.SubcommandGroupOptionType:
			if depth < 2 {
				flattenOptions(o.Options, req, depth+1)
			}
		case o.Focused:
			req.Focused, req.Value = o.Name, o.String()
		default:
			req.Options[o.Name] = o.String()
		}
	}
}

// complete runs h within Discord's window; a handler that is late or
// panics gives no choices (a panic is logged, never raised: the payload
// is the user's).
func (b *Bot) complete(h func(context.Context, AutocompleteRequest) []Choice, req AutocompleteRequest, log zerolog.Logger) []Choice {
	ctx, cancel := context.WithTimeout(b.ctx, pressWindow)
	defer cancel()
	done := make(chan []Choice, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				log.Error().Str("panic", fmt.Sprint(r)).Msg("autocomplete handler failed; answered with no choices")
				done <- nil
			}
		}()
		done <- h(ctx, req)
	}()
	select {
	case c := <-done:
		return c
	case <-ctx.Done():
		log.Warn().Int64("window_ms", pressWindow.Milliseconds()).Msg("autocomplete handler too slow; answered with no choices")
		return nil
	}
}

// checkChoices keeps what Discord takes of choices: at most 25, names of
// 1-100 characters (longer ones cut with an ellipsis, empty ones named by
// their value), values of 1-100 characters, each value once.
func checkChoices(choices []Choice) []Choice {
	out := make([]Choice, 0, min(len(choices), maxChoices))
	seen := map[string]bool{}
	for _, c := range choices {
		if len(out) == maxChoices {
			break
		}
		c.Value = strings.ToValidUTF8(c.Value, "")
		if c.Value == "" || utf8.RuneCountInString(c.Value) > maxChoiceValue || seen[c.Value] {
			continue
		}
		seen[c.Value] = true
		c.Name = strings.TrimSpace(strings.Join(strings.Fields(strings.ToValidUTF8(c.Name, "")), " "))
		if c.Name == "" {
			c.Name = c.Value
		}
		if r := []rune(c.Name); len(r) > maxChoiceName {
			c.Name = string(r[:maxChoiceName-1]) + "…"
		}
		out = append(out, c)
	}
	return out
}

// answerAutocomplete sends choices as the interaction's response (type 8).
func (b *Bot) answerAutocomplete(ev *interactionCreate, choices []Choice, log zerolog.Logger) {
	sc := make(api.AutocompleteStringChoices, 0, len(choices))
	for _, c := range choices {
		sc = append(sc, discord.StringChoice{Name: c.Name, Value: c.Value})
	}
	resp := api.InteractionResponse{Type: api.AutocompleteResult, Data: &api.InteractionResponseData{Choices: sc}}
	start := time.Now()
	if err := b.client(b.ctx).RespondInteraction(ev.ID, ev.Token, resp); err != nil {
		log.Debug().Str("error", scrub(err, ev.Token)).Int64("took_ms", time.Since(start).Milliseconds()).Msg("autocomplete not answered")
	}
}
