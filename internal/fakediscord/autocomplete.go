package fakediscord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"
	"unicode/utf8"

	"github.com/diamondburned/arikawa/v3/discord"
)

// Discord's limits on an autocomplete answer.
const (
	maxChoices     = 25
	maxChoiceName  = 100 // characters
	maxChoiceValue = 100 // characters, for a string option
	// completeWindow is how long Discord waits for an autocomplete
	// answer before it shows the user that loading the options failed.
	completeWindow = 3 * time.Second
)

// ErrNoCompletion is the error of Autocomplete when the bot sent no valid
// answer in Discord's window: no callback, another callback type than 8,
// or choices Discord refuses.
var ErrNoCompletion = errors.New("fakediscord: no autocomplete answer")

// Choice is one suggestion of an autocomplete answer: the Name shown and
// the Value the option takes when it is picked.
type Choice struct {
	Name  string `json:"name"`
	Value any    `json:"value"`
}

// completion is an autocomplete interaction and its answer.
type completion struct {
	answered bool
	choices  []Choice
	// refused is why an answer was refused, for Autocomplete's error.
	refused string
}

// Autocomplete has user type value into the option focused of command in
// ch, like Discord does while a user types: an INTERACTION_CREATE of type
// 4 (APPLICATION_COMMAND_AUTOCOMPLETE) whose options are the ones typed so
// far (others, strings) and the focused one, marked focused. It waits
// Discord's 3 s for the bot's callback of type 8
// (APPLICATION_COMMAND_AUTOCOMPLETE_RESULT) and returns its choices. A
// callback of another type, more than 25 choices, a name or value of 0 or
// over 100 characters, or no callback in time returns ErrNoCompletion (the
// user then sees that loading the options failed).
func (s *Server) Autocomplete(ch discord.ChannelID, user discord.User, command, focused, value string, others map[string]string) ([]Choice, error) {
	opts := []Option{{Name: focused, Type: 3, Value: value}}
	names := make([]string, 0, len(others))
	for k := range others {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		opts = append(opts, Option{Name: k, Type: 3, Value: others[k]})
	}
	s.mu.Lock()
	if s.completions == nil {
		s.completions = map[string]*completion{}
	}
	// The bot's answer needs the lock: the entry is made before it can
	// be taken.
	id := s.interactLocked(4, ch, user, command, opts, focused)
	s.completions[id] = &completion{}
	s.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), completeWindow)
	defer cancel()
	var c completion
	err := s.WaitUntil(ctx, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		c = *s.completions[id]
		return c.answered || c.refused != ""
	})
	switch {
	case c.refused != "":
		return nil, fmt.Errorf("%w: %s", ErrNoCompletion, c.refused)
	case err != nil:
		return nil, fmt.Errorf("%w: not answered within %v", ErrNoCompletion, completeWindow)
	}
	return c.choices, nil
}

// completeLocked takes the callback of an autocomplete interaction (or a
// type 8 callback of another interaction): only type 8, once, with valid
// choices.
func (s *Server) completeLocked(id string, typ int, raw json.RawMessage) (int, any) {
	c, ok := s.completions[id]
	if !ok {
		return http.StatusBadRequest, apiError{Message: "Interaction callback type is only valid for autocomplete interactions", Code: 50035}
	}
	if c.answered {
		return http.StatusBadRequest, apiError{Message: "Interaction has already been acknowledged.", Code: 40060}
	}
	if typ != 8 {
		c.refused = fmt.Sprintf("callback type %d, want 8", typ)
		return http.StatusBadRequest, formError("type", "INTERACTION_CALLBACK_TYPE_INVALID", "Invalid callback type for an autocomplete interaction")
	}
	var data struct {
		Choices []Choice `json:"choices"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &data) != nil || data.Choices == nil {
		c.refused = "no choices list"
		return http.StatusBadRequest, formError("data.choices", "BASE_TYPE_REQUIRED", "This field is required")
	}
	if len(data.Choices) > maxChoices {
		c.refused = fmt.Sprintf("%d choices, at most %d", len(data.Choices), maxChoices)
		return http.StatusBadRequest, formError("data.choices", "BASE_TYPE_BAD_LENGTH", "Must be 25 or fewer in length.")
	}
	for i, ch := range data.Choices {
		field := fmt.Sprintf("data.choices.%d", i)
		if e := checkLength(field+".name", ch.Name, 1, maxChoiceName); e != nil {
			c.refused = fmt.Sprintf("choice %d: name of %d characters", i, utf8.RuneCountInString(ch.Name))
			return http.StatusBadRequest, e
		}
		if v, ok := ch.Value.(string); ok {
			if e := checkLength(field+".value", v, 1, maxChoiceValue); e != nil {
				c.refused = fmt.Sprintf("choice %d: value of %d characters", i, utf8.RuneCountInString(v))
				return http.StatusBadRequest, e
			}
		}
	}
	c.answered, c.choices = true, data.Choices
	s.callbacks[id] = append(s.callbacks[id], typ)
	return http.StatusNoContent, nil
}
