package discord

import (
	"context"
	"sync"
	"time"

	"github.com/diamondburned/arikawa/v3/api"
	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/diamondburned/arikawa/v3/gateway"
	"github.com/diamondburned/arikawa/v3/utils/json/option"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/files"
)

// Command is a slash command a handler registered with HandleCommand.
type Command struct {
	Name      string
	UserID    string
	ChannelID string
	// GuildID is empty in a DM.
	GuildID string
	// Options are the command's options by name: string, int64 or bool.
	Options map[string]any
	// ManageGuild is whether the user may manage the server.
	ManageGuild bool
	// Roles are the ids of the user's roles in the guild (the
	// interaction's member.roles); nil for none and in a DM.
	Roles []string
}

// String returns a string option, "" when absent.
func (c Command) String(name string) string {
	s, _ := c.Options[name].(string)
	return s
}

// Bool returns a boolean option, false when absent.
func (c Command) Bool(name string) bool {
	v, _ := c.Options[name].(bool)
	return v
}

// Has reports whether the option was given.
func (c Command) Has(name string) bool {
	_, ok := c.Options[name]
	return ok
}

// CommandAnswer is what a command shows: Text (1-2000 characters, no
// pings), private to the user when Ephemeral, with Buttons under it, and
// Files (their bytes read and checked by the caller) in a follow-up right
// after it, so they come in the command's own answer, in order. Rows
// (select menus and buttons) go under Text after Buttons' row. Modal, when
// set, opens a form instead and nothing else is sent; its submission
// reaches the HandleButtons handler of its ID's prefix.
type CommandAnswer struct {
	Text      string
	Ephemeral bool
	Buttons   []Button
	Rows      []Row
	Files     []files.Outgoing
	Modal     *Modal
}

// commandHandler is a registered command.
type commandHandler struct {
	def api.CreateCommandData
	h   func(context.Context, Command) CommandAnswer
}

// commands are the handlers registered with HandleCommand.
type commands struct {
	mu sync.Mutex
	m  map[string]commandHandler
	// order keeps registration order for the bulk overwrite.
	order []string
	// complete are the autocomplete handlers by command (autocomplete.go).
	complete map[string]func(context.Context, AutocompleteRequest) []Choice
}

// HandleCommand registers a slash command; call it before Open. The
// handler runs in its own goroutine within Discord's answer window (2.5 s):
// longer work must answer first and continue elsewhere.
func (b *Bot) HandleCommand(def api.CreateCommandData, h func(context.Context, Command) CommandAnswer) {
	b.commands.mu.Lock()
	defer b.commands.mu.Unlock()
	if b.commands.m == nil {
		b.commands.m = map[string]commandHandler{}
	}
	if _, dup := b.commands.m[def.Name]; !dup {
		b.commands.order = append(b.commands.order, def.Name)
	}
	b.commands.m[def.Name] = commandHandler{def: def, h: h}
}

// commandDefs lists the definitions of the registered commands.
func (b *Bot) commandDefs() []api.CreateCommandData {
	b.commands.mu.Lock()
	defer b.commands.mu.Unlock()
	defs := make([]api.CreateCommandData, 0, len(b.commands.order))
	for _, name := range b.commands.order {
		defs = append(defs, b.commands.m[name].def)
	}
	return defs
}

// runCommand answers a registered command; it reports false for a command
// nobody registered.
func (b *Bot) runCommand(ev *interactionCreate, cmd *discord.CommandInteraction, user discord.UserID, log zerolog.Logger) bool {
	b.commands.mu.Lock()
	ch, ok := b.commands.m[cmd.Name]
	b.commands.mu.Unlock()
	if !ok {
		return false
	}
	c := Command{
		Name:      cmd.Name,
		UserID:    user.String(),
		ChannelID: ev.ChannelID.String(),
		Options:   map[string]any{},
		ManageGuild: ev.Member != nil &&
			(ev.permissions.Has(discord.PermissionManageGuild) || ev.permissions.Has(discord.PermissionAdministrator)),
	}
	if ev.GuildID.IsValid() {
		c.GuildID = ev.GuildID.String()
	}
	if ev.Member != nil {
		c.Roles = roleIDs(ev.Member.RoleIDs)
	}
	for _, o := range cmd.Options {
		var v any
		switch o.Type {
		case discord.BooleanOptionType:
			b, err := o.BoolValue()
			if err != nil {
				continue
			}
			v = b
		case discord.IntegerOptionType:
			n, err := o.IntValue()
			if err != nil {
				continue
			}
			v = n
		default:
			v = o.String()
		}
		c.Options[o.Name] = v
	}
	go func() {
		start := time.Now()
		ctx, cancel := context.WithTimeout(b.ctx, pressWindow)
		a := ch.h(ctx, c)
		cancel()
		if took := time.Since(start); took > pressWindow {
			log.Warn().Int64("took_ms", took.Milliseconds()).Msg("command handler too slow: Discord may no longer take the answer")
		}
		b.answerCommand(&ev.InteractionCreateEvent, a, log)
	}()
	return true
}

func (b *Bot) answerCommand(ev *gateway.InteractionCreateEvent, a CommandAnswer, log zerolog.Logger) {
	if a.Modal != nil {
		resp, err := a.Modal.response()
		if err == nil {
			if err := b.client(b.ctx).RespondInteraction(ev.ID, ev.Token, resp); err != nil {
				log.Warn().Str("error", scrub(err, ev.Token)).Msg("command's modal not opened")
			}
			return
		}
		log.Error().Err(err).Msg("command answer with an invalid modal")
		a = CommandAnswer{Text: unopenedModal, Ephemeral: true}
	}
	text := a.Text
	if text == "" {
		text = "Done."
	}
	data := &api.InteractionResponseData{
		Content:         option.NewNullableString(text),
		AllowedMentions: &api.AllowedMentions{Parse: []api.AllowedMentionType{}},
	}
	if a.Ephemeral {
		data.Flags = discord.EphemeralMessage
	}
	if len(a.Buttons) > 0 || len(a.Rows) > 0 {
		rows := a.Rows
		if len(a.Buttons) > 0 {
			rows = append([]Row{{Buttons: a.Buttons}}, a.Rows...)
		}
		cc, err := rowComponents(text, rows)
		if err != nil {
			log.Error().Err(err).Msg("command answer with invalid buttons; sent without them")
		} else {
			data.Components = &cc
		}
	}
	err := b.client(b.ctx).RespondInteraction(ev.ID, ev.Token, api.InteractionResponse{Type: api.MessageInteractionWithSource, Data: data})
	if err != nil {
		log.Warn().Str("error", scrub(err, ev.Token)).Int("length", len(text)).Msg("command answer not delivered")
		return
	}
	if len(a.Files) == 0 {
		return
	}
	in := &interaction{app: ev.AppID, token: ev.Token, channel: ev.ChannelID}
	for _, p := range withFiles(nil, a.Files) {
		if _, err := b.webhookSend(b.ctx, in, false, p); err != nil {
			log.Warn().Str("error", scrub(err, ev.Token)).Int("files", len(p.files)).Msg("the files of a command's answer were not delivered")
			return
		}
	}
}
