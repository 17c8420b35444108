package discord

import (
	"fmt"
	"unicode/utf8"

	"github.com/diamondburned/arikawa/v3/api"
	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/diamondburned/arikawa/v3/utils/json/option"
)

// Modal is a form a press opens (PressAnswer.Modal): a title and 1-5 text
// fields. ID is its custom_id (at most 100 bytes), a short key like a
// button's. Its submission reaches the handler registered with
// HandleButtons for the longest prefix of ID, with Press.Fields set.
type Modal struct {
	ID, Title string
	Fields    []TextField
}

// TextField is one text input of a modal. ID (1-100 bytes) keys its value
// in Press.Fields; Label (1-45 characters) is shown above it.
type TextField struct {
	ID, Label string
	// Placeholder (at most 100 characters) shows while the field is empty;
	// Value (at most 4000) fills it in beforehand.
	Placeholder, Value string
	// Paragraph makes a multi-line field; otherwise it is one line.
	Paragraph bool
	Required  bool
	// MaxLength bounds the answer (1-4000 characters); 0 is 4000.
	MaxLength int
}

// Discord's limits for a modal.
const (
	maxModalTitle  = 45 // characters
	maxFieldLabel  = 45 // characters
	maxModalFields = 5
	maxFieldText   = 4000 // characters
	maxFieldHint   = 100  // characters: placeholder
)

// response is the MODAL interaction response (callback type 9) opening m,
// checked against Discord's limits.
func (m *Modal) response() (api.InteractionResponse, error) {
	if m.ID == "" || len(m.ID) > maxButtonID {
		return api.InteractionResponse{}, fmt.Errorf("%w: modal ID of %d bytes, want 1-%d", ErrInvalidButtons, len(m.ID), maxButtonID)
	}
	if n := utf8.RuneCountInString(m.Title); n == 0 || n > maxModalTitle {
		return api.InteractionResponse{}, fmt.Errorf("%w: modal title of %d characters, want 1-%d", ErrInvalidButtons, n, maxModalTitle)
	}
	if len(m.Fields) == 0 || len(m.Fields) > maxModalFields {
		return api.InteractionResponse{}, fmt.Errorf("%w: %d modal fields, want 1-%d", ErrInvalidButtons, len(m.Fields), maxModalFields)
	}
	rows := discord.ContainerComponents{}
	ids := map[string]bool{}
	for i, f := range m.Fields {
		in, err := f.component()
		if err == nil && ids[f.ID] {
			err = fmt.Errorf("ID %q used twice", f.ID)
		}
		if err != nil {
			return api.InteractionResponse{}, fmt.Errorf("%w: modal field %d: %w", ErrInvalidButtons, i+1, err)
		}
		ids[f.ID] = true
		rows = append(rows, &discord.ActionRowComponent{in})
	}
	return api.InteractionResponse{Type: api.ModalResponse, Data: &api.InteractionResponseData{
		CustomID:   option.NewNullableString(m.ID),
		Title:      option.NewNullableString(m.Title),
		Components: &rows,
	}}, nil
}

// component is the field as arikawa spells it, checked.
func (f TextField) component() (*discord.TextInputComponent, error) {
	switch {
	case f.ID == "" || len(f.ID) > maxButtonID:
		return nil, fmt.Errorf("ID of %d bytes, want 1-%d", len(f.ID), maxButtonID)
	case utf8.RuneCountInString(f.Label) == 0 || utf8.RuneCountInString(f.Label) > maxFieldLabel:
		return nil, fmt.Errorf("label of %d characters, want 1-%d", utf8.RuneCountInString(f.Label), maxFieldLabel)
	case utf8.RuneCountInString(f.Placeholder) > maxFieldHint:
		return nil, fmt.Errorf("placeholder of %d characters, want at most %d", utf8.RuneCountInString(f.Placeholder), maxFieldHint)
	case f.MaxLength < 0 || f.MaxLength > maxFieldText:
		return nil, fmt.Errorf("max length %d, want 1-%d", f.MaxLength, maxFieldText)
	}
	max := f.MaxLength
	if max == 0 {
		max = maxFieldText
	}
	if n := utf8.RuneCountInString(f.Value); n > max {
		return nil, fmt.Errorf("value of %d characters, want at most %d", n, max)
	}
	in := &discord.TextInputComponent{
		CustomID:    discord.ComponentID(f.ID),
		Style:       discord.TextInputShortStyle,
		Label:       f.Label,
		Required:    f.Required,
		Value:       f.Value,
		Placeholder: f.Placeholder,
	}
	if f.Paragraph {
		in.Style = discord.TextInputParagraphStyle
	}
	if f.MaxLength > 0 {
		in.LengthLimits = [2]int{0, f.MaxLength}
	}
	return in, nil
}

// onModalSubmit takes a submitted modal: it is routed like a press, with
// Press.Fields set to the text of each field by its ID.
func (b *Bot) onModalSubmit(ev *interactionCreate, data *discord.ModalInteraction) {
	fields := map[string]string{}
	for _, c := range data.Components {
		row, ok := c.(*discord.ActionRowComponent)
		if !ok {
			continue
		}
		for _, ic := range *row {
			if in, ok := ic.(*discord.TextInputComponent); ok {
				fields[string(in.CustomID)] = in.Value
			}
		}
	}
	b.routePress(ev, string(data.CustomID), func(p *Press) { p.Fields = fields })
}
