package discord

import (
	"context"
	"fmt"
	"unicode/utf8"

	"github.com/diamondburned/arikawa/v3/api"
	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/diamondburned/arikawa/v3/utils/json/option"
	"github.com/rs/zerolog"
)

// Row is one action row under a message: either a select menu (which
// takes the whole row) or 1-5 buttons. A message has at most 5 rows.
type Row struct {
	Select  *Select
	Buttons []Button
}

// Select is a string select menu. ID is its custom_id (at most 100
// bytes), a short key like a button's. A choice reaches the handler
// registered with HandleButtons for the longest prefix of ID, with
// Press.Values set.
type Select struct {
	ID          string
	Placeholder string
	Options     []SelectOption
	// Min and Max bound how many options a user picks (0-25 and 1-25);
	// both zero means exactly one.
	Min, Max int
}

// SelectOption is one choice of a select menu. Value (1-100 characters)
// is what Press.Values carries back; Label (1-100) is what users see,
// Description (at most 100) a line under it.
type SelectOption struct {
	Label, Value, Description string
}

// Discord's limits for rows and select menus.
const (
	maxRows          = 5
	maxSelectOptions = 25
	maxOptionText    = 100 // characters: label, value, description
	maxPlaceholder   = 150 // characters
)

// rowComponents is the message components of rows, checked against
// Discord's limits along with the text they go under.
func rowComponents(text string, rows []Row) (discord.ContainerComponents, error) {
	if err := checkText(text); err != nil {
		return nil, err
	}
	return rowsOnly(rows)
}

// rowsOnly is rowComponents without the text; no rows is no components.
func rowsOnly(rows []Row) (discord.ContainerComponents, error) {
	if len(rows) > maxRows {
		return nil, fmt.Errorf("%w: %d rows, want at most %d", ErrInvalidButtons, len(rows), maxRows)
	}
	out := discord.ContainerComponents{}
	ids := map[string]bool{}
	for i, r := range rows {
		row, err := r.component(ids)
		if err != nil {
			return nil, fmt.Errorf("row %d: %w", i+1, err)
		}
		out = append(out, row)
	}
	return out, nil
}

// component is the row as an action row; ids are the custom_ids used so
// far in the message, which must be unique.
func (r Row) component(ids map[string]bool) (*discord.ActionRowComponent, error) {
	switch {
	case r.Select != nil && len(r.Buttons) > 0:
		return nil, fmt.Errorf("%w: a select menu takes a whole row", ErrInvalidButtons)
	case r.Select != nil:
		sel, err := r.Select.component()
		if err != nil {
			return nil, err
		}
		if ids[r.Select.ID] {
			return nil, fmt.Errorf("%w: ID %q used twice", ErrInvalidButtons, r.Select.ID)
		}
		ids[r.Select.ID] = true
		return &discord.ActionRowComponent{sel}, nil
	}
	cc, err := buttonRow("-", r.Buttons)
	if err != nil {
		return nil, err
	}
	row := cc[0].(*discord.ActionRowComponent)
	for _, b := range r.Buttons {
		if ids[b.ID] {
			return nil, fmt.Errorf("%w: ID %q used twice", ErrInvalidButtons, b.ID)
		}
		ids[b.ID] = true
	}
	return row, nil
}

// component is the select as arikawa spells it, checked.
func (s *Select) component() (*discord.StringSelectComponent, error) {
	if s.ID == "" || len(s.ID) > maxButtonID {
		return nil, fmt.Errorf("%w: select ID of %d bytes, want 1-%d", ErrInvalidButtons, len(s.ID), maxButtonID)
	}
	if n := utf8.RuneCountInString(s.Placeholder); n > maxPlaceholder {
		return nil, fmt.Errorf("%w: placeholder of %d characters, want at most %d", ErrInvalidButtons, n, maxPlaceholder)
	}
	if len(s.Options) == 0 || len(s.Options) > maxSelectOptions {
		return nil, fmt.Errorf("%w: %d options, want 1-%d", ErrInvalidButtons, len(s.Options), maxSelectOptions)
	}
	limits := [2]int{s.Min, s.Max}
	if limits != [2]int{} && (s.Min < 0 || s.Max < 1 || s.Min > s.Max || s.Max > len(s.Options)) {
		return nil, fmt.Errorf("%w: pick %d-%d of %d options", ErrInvalidButtons, s.Min, s.Max, len(s.Options))
	}
	sel := &discord.StringSelectComponent{CustomID: discord.ComponentID(s.ID), Placeholder: s.Placeholder, ValueLimits: limits}
	values := map[string]bool{}
	for i, o := range s.Options {
		if err := o.check(); err != nil {
			return nil, fmt.Errorf("%w: option %d: %w", ErrInvalidButtons, i+1, err)
		}
		if values[o.Value] {
			return nil, fmt.Errorf("%w: option %d: value %q used twice", ErrInvalidButtons, i+1, o.Value)
		}
		values[o.Value] = true
		sel.Options = append(sel.Options, discord.SelectOption{Label: o.Label, Value: o.Value, Description: o.Description})
	}
	return sel, nil
}

// check checks an option against Discord's limits.
func (o SelectOption) check() error {
	for _, f := range []struct {
		name string
		s    string
		min  int
	}{{"label", o.Label, 1}, {"value", o.Value, 1}, {"description", o.Description, 0}} {
		if n := utf8.RuneCountInString(f.s); n < f.min || n > maxOptionText {
			return fmt.Errorf("%s of %d characters, want %d-%d", f.name, n, f.min, maxOptionText)
		}
	}
	return nil
}

// PostRows posts text with rows of select menus and buttons (1-5 rows) in
// channel and returns the new message's id, like PostButtons: nothing in
// it pings, its nonce is enforced so retries post it at most once, and
// invalid input returns ErrInvalidButtons and reaches nobody.
func (b *Bot) PostRows(ctx context.Context, channel, text string, rows []Row) (messageID string, err error) {
	ch, err := parseID("channel", channel)
	if err != nil {
		return "", err
	}
	if len(rows) == 0 {
		return "", fmt.Errorf("%w: no rows", ErrInvalidButtons)
	}
	cc, err := rowComponents(text, rows)
	if err != nil {
		return "", err
	}
	body := buttonMessage{
		SendMessageData: api.SendMessageData{
			Content:         text,
			Nonce:           fmt.Sprintf("%sb%d", b.noncePrefix, b.buttons.seq.Add(1)),
			Components:      cc,
			AllowedMentions: noPings(false),
		},
		EnforceNonce: true,
	}
	id, err := b.postMessage(ctx, ch, body)
	if err != nil {
		return "", fmt.Errorf("post rows in channel %s: %w", channel, err)
	}
	return id.String(), nil
}

// EditRows replaces the content of one of the bot's messages and its rows;
// no rows removes them all. Nothing in the new text pings.
func (b *Bot) EditRows(ctx context.Context, channel, message, text string, rows []Row) error {
	ch, err := parseID("channel", channel)
	if err != nil {
		return err
	}
	msg, err := parseID("message", message)
	if err != nil {
		return err
	}
	cc, err := rowComponents(text, rows)
	if err != nil {
		return err
	}
	_, err = b.client(ctx).EditMessageComplex(discord.ChannelID(ch), discord.MessageID(msg), api.EditMessageData{
		Content:         option.NewNullableString(text),
		Components:      &cc,
		AllowedMentions: &api.AllowedMentions{Parse: []api.AllowedMentionType{}},
	})
	if err != nil {
		return fmt.Errorf("edit message %s in channel %s: %w", message, channel, refused(err))
	}
	return nil
}

// onSelect takes a choice in one of the bot's select menus: it is routed
// like a press, with Press.Values set.
func (b *Bot) onSelect(ev *interactionCreate, data *discord.StringSelectInteraction) {
	values := data.Values
	if values == nil {
		values = []string{}
	}
	b.routePress(ev, string(data.CustomID), func(p *Press) { p.Values = values })
}

// updateResponse is the UPDATE_MESSAGE response of a's Update: the new
// content, and a's rows (none when it has none). Invalid rows are left out
// with an error log: the content still reaches the user.
func updateResponse(a PressAnswer, log zerolog.Logger) api.InteractionResponse {
	cc, err := rowsOnly(a.Rows)
	if err != nil {
		log.Error().Err(err).Msg("press answer with invalid rows; sent without them")
		cc = discord.ContainerComponents{}
	}
	return api.InteractionResponse{Type: api.UpdateMessage, Data: &api.InteractionResponseData{
		Content:         option.NewNullableString(*a.Update),
		Components:      &cc,
		AllowedMentions: &api.AllowedMentions{Parse: []api.AllowedMentionType{}},
	}}
}
