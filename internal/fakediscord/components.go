package fakediscord

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/diamondburned/arikawa/v3/discord"
)

// This file serves string select menus (component type 3) and modals
// (interaction callback type 9, submitted as interaction type 5), and
// what Discord sends of a member in events: its roles (SetRoles) and, in
// interactions, its permissions in the channel.

// Select is a string select menu under a message.
type Select struct {
	ID          string
	Placeholder string
	// Min and Max are min_values and max_values, 1 and 1 when not sent.
	Min, Max int
	Options  []SelectOption
	Disabled bool
}

// SelectOption is one choice of a select menu.
type SelectOption struct {
	Label, Value, Description string
}

// Modal is a form the bot opened in answer to an interaction.
type Modal struct {
	ID, Title string
	Fields    []TextInput
	// Interaction is the id of the interaction it answered; User is who
	// sees it.
	Interaction string
	User        discord.UserID
}

// TextInput is one text field of a modal.
type TextInput struct {
	ID, Label, Placeholder, Value string
	// Style is 1 (one line) or 2 (paragraph).
	Style    int
	Required bool
	// MinLength and MaxLength bound the answer: 0 and 4000 when not sent.
	MinLength, MaxLength int
}

// Discord's limits on select menus and modals.
const (
	maxSelectOptions = 25
	maxOptionText    = 100 // characters: label, value, description
	maxPlaceholder   = 150 // characters
	maxModalTitle    = 45
	maxInputLabel    = 45
	maxInputText     = 4000
	maxInputHint     = 100
)

// ErrRefused is what ChooseOptions and SubmitModal return for what a
// user's Discord client would not let them do.
var ErrRefused = errors.New("fakediscord: refused")

// componentState is who started each interaction from where, the open
// modals and the modal submissions (guarded by Server.mu, made on first
// use by compLocked).
type componentState struct {
	origins map[string]origin
	// modals are the modals opened, by the interaction they answered.
	modals map[string]*Modal
	// open are each user's modals not yet submitted, oldest first.
	open map[discord.UserID][]*Modal
	// submissions are the ids of modal submissions.
	submissions map[string]bool
}

// origin is where and by whom an interaction was started.
type origin struct {
	channel discord.ChannelID
	// message is the message of a component's interaction; zero for a
	// slash command.
	message discord.MessageID
	user    discord.User
	perms   discord.Permissions
}

func (s *Server) compLocked() *componentState {
	if s.comp == nil {
		s.comp = &componentState{
			origins:     map[string]origin{},
			modals:      map[string]*Modal{},
			open:        map[discord.UserID][]*Modal{},
			submissions: map[string]bool{},
		}
	}
	return s.comp
}

// Selects returns the message's select menus, row by row.
func (m Message) Selects() []Select {
	var out []Select
	for _, c := range m.Components {
		row, ok := c.(*discord.ActionRowComponent)
		if !ok {
			continue
		}
		for _, ic := range *row {
			if sel, ok := ic.(*discord.StringSelectComponent); ok {
				out = append(out, selectOf(sel))
			}
		}
	}
	return out
}

func selectOf(sel *discord.StringSelectComponent) Select {
	out := Select{ID: string(sel.CustomID), Placeholder: sel.Placeholder, Disabled: sel.Disabled, Min: 1, Max: 1}
	if sel.ValueLimits != [2]int{} {
		out.Min, out.Max = sel.ValueLimits[0], sel.ValueLimits[1]
	}
	for _, o := range sel.Options {
		out.Options = append(out.Options, SelectOption{Label: o.Label, Value: o.Value, Description: o.Description})
	}
	return out
}

// rawRows is what arikawa drops when it decodes components: a select's
// min_values and max_values.
type rawRows struct {
	Components []struct {
		Components []struct {
			Type      int    `json:"type"`
			CustomID  string `json:"custom_id"`
			MinValues *int   `json:"min_values"`
			MaxValues *int   `json:"max_values"`
		} `json:"components"`
	} `json:"components"`
}

// fillLimits sets the ValueLimits of the selects in cc from the raw JSON
// they were decoded from, Discord's defaults (1) for what is absent.
func fillLimits(cc discord.ContainerComponents, raw []byte) {
	var rr rawRows
	if json.Unmarshal(raw, &rr) != nil {
		return
	}
	for i, c := range cc {
		row, ok := c.(*discord.ActionRowComponent)
		if !ok || i >= len(rr.Components) {
			continue
		}
		for j, ic := range *row {
			sel, ok := ic.(*discord.StringSelectComponent)
			if !ok || j >= len(rr.Components[i].Components) {
				continue
			}
			rc := rr.Components[i].Components[j]
			if rc.MinValues == nil && rc.MaxValues == nil {
				continue
			}
			sel.ValueLimits = [2]int{1, 1}
			if rc.MinValues != nil {
				sel.ValueLimits[0] = *rc.MinValues
			}
			if rc.MaxValues != nil {
				sel.ValueLimits[1] = *rc.MaxValues
			}
		}
	}
}

// checkRowComponent checks a row's component that is not a button; n is
// how many components the row holds. It returns what is wrong, "" for
// nothing.
func checkRowComponent(ic discord.InteractiveComponent, n int) string {
	switch c := ic.(type) {
	case *discord.StringSelectComponent:
		if n != 1 {
			return "a select menu must be alone in its row"
		}
		return checkSelect(selectOf(c))
	case *discord.TextInputComponent:
		return "text inputs are only valid in modals"
	}
	return ""
}

// checkSelect checks a select menu against Discord's limits.
func checkSelect(sel Select) string {
	switch {
	case sel.ID == "" || utf8.RuneCountInString(sel.ID) > maxCustomID:
		return "custom_id must be 1-100 characters"
	case utf8.RuneCountInString(sel.Placeholder) > maxPlaceholder:
		return "placeholder must be at most 150 characters"
	case len(sel.Options) == 0 || len(sel.Options) > maxSelectOptions:
		return "options must hold 1-25 options"
	case sel.Min < 0 || sel.Min > maxSelectOptions || sel.Max < 1 || sel.Max > maxSelectOptions:
		return "min_values must be 0-25 and max_values 1-25"
	case sel.Min > sel.Max:
		return "min_values must be at most max_values"
	case sel.Max > len(sel.Options):
		return "max_values must be at most the number of options"
	}
	values := map[string]bool{}
	for _, o := range sel.Options {
		switch {
		case utf8.RuneCountInString(o.Label) == 0 || utf8.RuneCountInString(o.Label) > maxOptionText:
			return "an option's label must be 1-100 characters"
		case utf8.RuneCountInString(o.Value) == 0 || utf8.RuneCountInString(o.Value) > maxOptionText:
			return "an option's value must be 1-100 characters"
		case utf8.RuneCountInString(o.Description) > maxOptionText:
			return "an option's description must be at most 100 characters"
		case values[o.Value]:
			return "option value " + strconv.Quote(o.Value) + " is used twice"
		}
		values[o.Value] = true
	}
	return ""
}

// SetRoles gives a guild's member exactly roles, making user a member
// first if they are not one. Their roles appear in member.roles of the
// MESSAGE_CREATE and INTERACTION_CREATE events they cause.
func (s *Server) SetRoles(g discord.GuildID, user discord.User, roles ...discord.RoleID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.memberLocked(g, user)
	m.Roles = slices.Clone(roles)
	s.notifyLocked()
}

// memberLocked is user's member in g, made (joined now, no roles) if they
// are not one.
func (s *Server) memberLocked(g discord.GuildID, user discord.User) *Member {
	gs := s.gstateLocked()
	if gs.members[g] == nil {
		gs.members[g] = map[discord.UserID]*Member{}
	}
	m := gs.members[g][user.ID]
	if m == nil {
		m = &Member{User: user, Joined: time.Now().UTC().Truncate(time.Second)}
		gs.members[g][user.ID] = m
	}
	return m
}

// memberJSONLocked is the member object of an event user causes in g:
// their roles, and with perms their permissions in the channel (a decimal
// string, as interactions carry it). withUser adds the user, which
// MESSAGE_CREATE leaves out (the author is the message's).
func (s *Server) memberJSONLocked(g discord.GuildID, user discord.User, perms *discord.Permissions, withUser bool) map[string]any {
	roles := []string{}
	joined := time.Now()
	if m := s.gstateLocked().members[g][user.ID]; m != nil {
		for _, r := range m.Roles {
			roles = append(roles, r.String())
		}
		joined = m.Joined
	}
	out := map[string]any{"roles": roles, "joined_at": joined.Format(time.RFC3339), "deaf": false, "mute": false}
	if withUser {
		out["user"] = user
	}
	if perms != nil {
		out["permissions"] = strconv.FormatUint(uint64(*perms), 10)
	}
	return out
}

// memberPermsLocked is what user may do in c, computed from @everyone,
// their roles and the channel's overwrites.
func (s *Server) memberPermsLocked(c *channel, user discord.User) discord.Permissions {
	base := c
	if isThread(c.Type) {
		if p, ok := s.channels[c.ParentID]; ok {
			base = p
		}
	}
	m := Member{User: user}
	if gm := s.gstateLocked().members[c.GuildID][user.ID]; gm != nil {
		m = *gm
	}
	g := discord.Guild{ID: c.GuildID, OwnerID: s.Owner.ID}
	ch := discord.Channel{ID: base.ID, GuildID: c.GuildID, Overwrites: s.extraLocked(base.ID).overwrites}
	return discord.CalcOverrides(g, ch, m.out(), s.rolesLocked(c.GuildID))
}

// componentMessageLocked finds the message a component is on: one of the
// channel's or an interaction's response in it.
func (s *Server) componentMessageLocked(c *channel, id discord.MessageID) *Message {
	if m := c.message(id); m != nil {
		return m
	}
	if m := s.answerLocked(id); m != nil && m.ChannelID == c.ID {
		return m
	}
	return nil
}

// ChooseOptions has user pick values in the select menu with customID
// under a message, like Discord does: an INTERACTION_CREATE of type 3
// (MESSAGE_COMPONENT) with data.component_type 3 and data.values, the
// message, and in a guild the member with roles and permissions. It
// returns the interaction id, or ErrRefused when the message has no such
// select, it is disabled, a value is not one of its options or is picked
// twice, or the number picked is outside min_values-max_values.
func (s *Server) ChooseOptions(ch discord.ChannelID, message discord.MessageID, user discord.User, customID string, values ...string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.mustChannel(ch)
	m := s.componentMessageLocked(c, message)
	if m == nil {
		return "", fmt.Errorf("%w: no message %s in channel %s", ErrRefused, message, ch)
	}
	i := slices.IndexFunc(m.Selects(), func(sel Select) bool { return sel.ID == customID })
	if i < 0 {
		return "", fmt.Errorf("%w: message %s has no select menu %q", ErrRefused, message, customID)
	}
	if err := checkChoice(m.Selects()[i], values); err != nil {
		return "", err
	}
	if values == nil {
		values = []string{}
	}
	data := map[string]any{"custom_id": customID, "component_type": 3, "values": values}
	return s.componentInteractionLocked(c, m, user, s.memberPermsLocked(c, user), data), nil
}

// checkChoice checks values picked in sel as Discord's client allows.
func checkChoice(sel Select, values []string) error {
	if sel.Disabled {
		return fmt.Errorf("%w: select menu %q is disabled", ErrRefused, sel.ID)
	}
	if len(values) < sel.Min || len(values) > sel.Max {
		return fmt.Errorf("%w: %d values picked, select menu %q takes %d-%d", ErrRefused, len(values), sel.ID, sel.Min, sel.Max)
	}
	seen := map[string]bool{}
	for _, v := range values {
		if seen[v] || !slices.ContainsFunc(sel.Options, func(o SelectOption) bool { return o.Value == v }) {
			return fmt.Errorf("%w: value %q is not an option of %q or is picked twice", ErrRefused, v, sel.ID)
		}
		seen[v] = true
	}
	return nil
}

// componentInteractionLocked dispatches an INTERACTION_CREATE of type 3
// (MESSAGE_COMPONENT) by user on m with data, and returns its id.
func (s *Server) componentInteractionLocked(c *channel, m *Message, user discord.User, perms discord.Permissions, data map[string]any) string {
	id := s.id().String()
	s.pressed[id] = pressedMessage{channel: c.ID, message: m.ID}
	s.compLocked().origins[id] = origin{channel: c.ID, message: m.ID, user: user, perms: perms}
	ev := s.interactionLocked(id, 3, c, user, perms)
	ev["data"] = data
	ev["message"] = m.Message
	s.dispatchLocked("INTERACTION_CREATE", ev)
	return id
}

// interactionLocked is the common part of an interaction of type typ by
// user in c: in a guild the member (roles and permissions) and the
// channel, in a DM the user.
func (s *Server) interactionLocked(id string, typ int, c *channel, user discord.User, perms discord.Permissions) map[string]any {
	ev := map[string]any{
		"id":             id,
		"application_id": s.App.String(),
		"type":           typ,
		"token":          "itoken-" + id,
		"version":        1,
		"channel_id":     c.ID.String(),
	}
	if c.GuildID.IsValid() {
		ev["guild_id"] = c.GuildID.String()
		ev["member"] = s.memberJSONLocked(c.GuildID, user, &perms, true)
		s.whereLocked(c, ev)
	} else {
		ev["user"] = user
	}
	return ev
}

// modalBody is the data of a MODAL interaction response as the bot sends
// it.
type modalBody struct {
	CustomID   string `json:"custom_id"`
	Title      string `json:"title"`
	Components []struct {
		Type       int `json:"type"`
		Components []struct {
			Type        int    `json:"type"`
			CustomID    string `json:"custom_id"`
			Style       int    `json:"style"`
			Label       string `json:"label"`
			MinLength   *int   `json:"min_length"`
			MaxLength   *int   `json:"max_length"`
			Required    *bool  `json:"required"`
			Value       string `json:"value"`
			Placeholder string `json:"placeholder"`
		} `json:"components"`
	} `json:"components"`
}

// openModalLocked answers a MODAL interaction response (callback type 9)
// to interaction id: Discord refuses it for a modal's submission and for a
// modal it would not show; otherwise the modal opens for the user who
// started the interaction.
func (s *Server) openModalLocked(id string, raw json.RawMessage) (int, any) {
	cs := s.compLocked()
	from, ok := cs.origins[id]
	if !ok || cs.submissions[id] {
		return http.StatusBadRequest, apiError{Message: "Interaction callback type is not valid for this interaction", Code: 50035}
	}
	var in modalBody
	if len(raw) == 0 || json.Unmarshal(raw, &in) != nil {
		return http.StatusBadRequest, apiError{Message: "400: Bad Request", Code: 50109}
	}
	md, what := modalOf(in)
	if what != "" {
		return http.StatusBadRequest, apiError{Message: "Invalid Form Body: data: " + what, Code: 50035}
	}
	md.Interaction, md.User = id, from.user.ID
	cs.modals[id] = md
	cs.open[from.user.ID] = append(cs.open[from.user.ID], md)
	s.callbacks[id] = append(s.callbacks[id], 9)
	return http.StatusNoContent, nil
}

// modalOf reads a modal the bot sent and checks it against Discord's
// limits; what says what is wrong, "" for nothing.
func modalOf(in modalBody) (md *Modal, what string) {
	switch {
	case in.CustomID == "" || utf8.RuneCountInString(in.CustomID) > maxCustomID:
		return nil, "custom_id must be 1-100 characters"
	case utf8.RuneCountInString(in.Title) == 0 || utf8.RuneCountInString(in.Title) > maxModalTitle:
		return nil, "title must be 1-45 characters"
	case len(in.Components) == 0 || len(in.Components) > maxRows:
		return nil, "components must hold 1-5 rows"
	}
	md = &Modal{ID: in.CustomID, Title: in.Title}
	ids := map[string]bool{}
	for _, row := range in.Components {
		if row.Type != 1 || len(row.Components) != 1 || row.Components[0].Type != 4 {
			return nil, "each row of a modal must hold one text input"
		}
		c := row.Components[0]
		ti := TextInput{ID: c.CustomID, Label: c.Label, Placeholder: c.Placeholder, Value: c.Value, Style: c.Style, Required: true, MaxLength: maxInputText}
		if c.Required != nil {
			ti.Required = *c.Required
		}
		if c.MinLength != nil {
			ti.MinLength = *c.MinLength
		}
		if c.MaxLength != nil {
			ti.MaxLength = *c.MaxLength
		}
		if what := checkTextInput(ti); what != "" {
			return nil, what
		}
		if ids[ti.ID] {
			return nil, "custom_id " + strconv.Quote(ti.ID) + " is used twice"
		}
		ids[ti.ID] = true
		md.Fields = append(md.Fields, ti)
	}
	return md, ""
}

// checkTextInput checks a modal's text input against Discord's limits.
func checkTextInput(ti TextInput) string {
	switch {
	case ti.ID == "" || utf8.RuneCountInString(ti.ID) > maxCustomID:
		return "a text input's custom_id must be 1-100 characters"
	case utf8.RuneCountInString(ti.Label) == 0 || utf8.RuneCountInString(ti.Label) > maxInputLabel:
		return "a text input's label must be 1-45 characters"
	case ti.Style != 1 && ti.Style != 2:
		return "a text input's style must be 1 or 2"
	case ti.MinLength < 0 || ti.MinLength > maxInputText || ti.MaxLength < 1 || ti.MaxLength > maxInputText || ti.MinLength > ti.MaxLength:
		return "a text input's min_length must be 0-4000 and max_length 1-4000, not below it"
	case utf8.RuneCountInString(ti.Placeholder) > maxInputHint:
		return "a text input's placeholder must be at most 100 characters"
	case utf8.RuneCountInString(ti.Value) > ti.MaxLength:
		return "a text input's value must fit its max_length"
	}
	return ""
}

// ModalOpened returns the modal the bot opened in answer to an
// interaction; false when it opened none.
func (s *Server) ModalOpened(interaction string) (Modal, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	md := s.compLocked().modals[interaction]
	if md == nil {
		return Modal{}, false
	}
	c := *md
	c.Fields = slices.Clone(md.Fields)
	return c, true
}

// OpenModals returns the modals open for user, oldest first.
func (s *Server) OpenModals(user discord.UserID) []Modal {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Modal
	for _, md := range s.compLocked().open[user] {
		c := *md
		c.Fields = slices.Clone(md.Fields)
		out = append(out, c)
	}
	return out
}

// SubmitModal has user submit the open modal with customID (the newest,
// if several) with values by text input id, like Discord does: an
// INTERACTION_CREATE of type 5 (MODAL_SUBMIT) with data.custom_id and
// every input's value in data.components, and the message whose component
// opened the modal, if one did. The modal closes. It returns the
// interaction id, or ErrRefused when user has no such modal open, a value
// names no input of it, a required input is empty or a value's length is
// outside the input's bounds.
func (s *Server) SubmitModal(user discord.User, customID string, values map[string]string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cs := s.compLocked()
	open := cs.open[user.ID]
	i := len(open) - 1
	for i >= 0 && open[i].ID != customID {
		i--
	}
	if i < 0 {
		return "", fmt.Errorf("%w: user %s has no modal %q open", ErrRefused, user.ID, customID)
	}
	md := open[i]
	rows, err := submittedRows(md, values)
	if err != nil {
		return "", err
	}
	cs.open[user.ID] = slices.Delete(open, i, i+1)
	from := cs.origins[md.Interaction]
	c := s.mustChannel(from.channel)
	id := s.id().String()
	cs.origins[id] = from
	cs.submissions[id] = true
	if s.interactionChannel == nil {
		s.interactionChannel = map[string]discord.ChannelID{}
	}
	s.interactionChannel[id] = c.ID
	ev := s.interactionLocked(id, 5, c, user, from.perms)
	ev["data"] = map[string]any{"custom_id": customID, "components": rows}
	if from.message.IsValid() {
		if m := s.componentMessageLocked(c, from.message); m != nil {
			s.pressed[id] = pressedMessage{channel: c.ID, message: m.ID}
			ev["message"] = m.Message
		}
	}
	s.dispatchLocked("INTERACTION_CREATE", ev)
	s.notifyLocked()
	return id, nil
}

// submittedRows are a modal's inputs with values as a submission carries
// them, checked as Discord's client checks them before it sends.
func submittedRows(md *Modal, values map[string]string) ([]map[string]any, error) {
	for k := range values {
		if !slices.ContainsFunc(md.Fields, func(ti TextInput) bool { return ti.ID == k }) {
			return nil, fmt.Errorf("%w: modal %q has no input %q", ErrRefused, md.ID, k)
		}
	}
	var rows []map[string]any
	for _, ti := range md.Fields {
		v, ok := values[ti.ID]
		if !ok {
			v = ti.Value
		}
		n := utf8.RuneCountInString(v)
		switch {
		case n == 0 && ti.Required:
			return nil, fmt.Errorf("%w: input %q of modal %q is required", ErrRefused, ti.ID, md.ID)
		case n > 0 && (n < ti.MinLength || n > ti.MaxLength):
			return nil, fmt.Errorf("%w: input %q takes %d-%d characters, got %d", ErrRefused, ti.ID, ti.MinLength, ti.MaxLength, n)
		}
		rows = append(rows, map[string]any{"type": 1, "components": []map[string]any{{"type": 4, "custom_id": ti.ID, "value": v}}})
	}
	return rows, nil
}

// messageCreateLocked is the MESSAGE_CREATE of m: in a guild with the
// author's member (roles, no user: the author is the message's).
func (s *Server) messageCreateLocked(m *Message) any {
	if !m.GuildID.IsValid() {
		return m.Message
	}
	return struct {
		discord.Message
		Member map[string]any `json:"member"`
	}{m.Message, s.memberJSONLocked(m.GuildID, m.Author, nil, false)}
}
