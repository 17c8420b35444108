package discord

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/diamondburned/arikawa/v3/api"
	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/diamondburned/arikawa/v3/gateway"
	"github.com/diamondburned/arikawa/v3/utils/httputil"
	"github.com/diamondburned/arikawa/v3/utils/json"
	"github.com/diamondburned/arikawa/v3/utils/json/option"
	"github.com/diamondburned/arikawa/v3/utils/ws"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/reply"
)

// ButtonStyle is a button's colour: Discord's styles 1-4.
type ButtonStyle int

// Button styles. The zero style is ButtonPrimary.
const (
	ButtonPrimary   ButtonStyle = 1 // blurple
	ButtonSecondary ButtonStyle = 2 // grey
	ButtonSuccess   ButtonStyle = 3 // green
	ButtonDanger    ButtonStyle = 4 // red
)

// Button is one button under a message. ID is its custom_id (at most 100
// bytes): a short key into the caller's own state, such as "apply:42",
// never the data itself.
type Button struct {
	ID, Label string
	Style     ButtonStyle
}

// Press is a click on one of the bot's buttons.
type Press struct {
	// ButtonID is the button's custom_id.
	ButtonID string
	UserID   string
	// ChannelID and MessageID are where the pressed button is.
	ChannelID string
	// GuildID is empty in a DM.
	GuildID   string
	MessageID string
	// ManageGuild is true when the presser has Manage Server or
	// Administrator permission in the channel (the interaction's
	// member.permissions); always false in a DM.
	ManageGuild bool
	// Roles are the ids of the presser's roles in the guild (the
	// interaction's member.roles); nil for none and in a DM.
	Roles []string
	// Values are the options chosen in a select menu; nil for a button
	// or a modal.
	Values []string
	// Fields are a submitted modal's values by text field ID; nil for a
	// button or a select menu. For a submission ButtonID is the modal's
	// ID, and MessageID is the message whose press opened it.
	Fields map[string]string
}

// PressAnswer is what a press shows. At most one of Modal, Update and
// Notice is used, in that order: Modal opens a form (interaction callback
// type 9, MODAL; not as the answer to a modal's submission, where it
// counts as an invalid answer); Update non-nil replaces the message's
// content (1-2000 characters) for everyone and its rows with Rows, none
// when Rows is empty (callback type 7, UPDATE_MESSAGE; for a modal opened
// by a slash command, which has no message, Update is posted as a new
// message); otherwise Notice is sent as an ephemeral reply that only the
// presser sees (callback type 4 with flags 64). The zero PressAnswer
// acknowledges the press and changes nothing (callback type 6); for the
// submission of a modal opened by a slash command it shows "Done." to the
// submitter.
type PressAnswer struct {
	Modal  *Modal
	Update *string
	// Rows are the message's rows after Update.
	Rows   []Row
	Notice string
}

// ErrInvalidButtons is returned by PostButtons and EditMessage for a
// message Discord would refuse: no text or too much, a bad button count,
// label, ID or style.
var ErrInvalidButtons = errors.New("invalid message with buttons")

// Discord's limits for a message with one row of buttons.
const (
	maxButtons     = 5
	maxButtonLabel = 80  // characters
	maxButtonID    = 100 // bytes
)

// pressWindow bounds a press handler, so that the answer is sent within the
// 3 s Discord allows before it shows the press as failed.
const pressWindow = 2500 * time.Millisecond

// unhandledPress answers a press on a button nothing handles (any more).
const unhandledPress = "This button no longer does anything."

// unopenedModal answers a press whose handler asked for an invalid modal.
const unopenedModal = "This form could not be opened. Please tell the bot's operator."

// buttonAttempts bounds the tries of PostButtons when Discord fails in a
// way that may pass; the nonce makes a retry post at most once.
const buttonAttempts = 3

// buttons routes presses to handlers by custom_id prefix.
type buttons struct {
	// seq numbers PostButtons' messages for their nonces.
	seq atomic.Uint64

	mu sync.Mutex // guards handlers
	// handlers are the press handlers by prefix.
	handlers map[string]func(context.Context, Press) PressAnswer
}

// add registers h for prefix; a prefix registered twice panics.
func (bs *buttons) add(prefix string, h func(context.Context, Press) PressAnswer) {
	if h == nil {
		panic("discord: nil button handler for prefix " + strconv.Quote(prefix))
	}
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if _, dup := bs.handlers[prefix]; dup {
		panic("discord: button prefix " + strconv.Quote(prefix) + " registered twice")
	}
	if bs.handlers == nil {
		bs.handlers = make(map[string]func(context.Context, Press) PressAnswer)
	}
	bs.handlers[prefix] = h
}

// route finds the handler of the longest prefix of id; h is nil for none.
func (bs *buttons) route(id string) (prefix string, h func(context.Context, Press) PressAnswer) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	for p, ph := range bs.handlers {
		if strings.HasPrefix(id, p) && (h == nil || len(p) > len(prefix)) {
			prefix, h = p, ph
		}
	}
	return prefix, h
}

// HandleButtons routes presses of buttons whose ID starts with prefix to
// h; when prefixes overlap the longest wins. Register before Open: a press
// that finds no handler is told the button no longer does anything. A
// prefix registered twice panics.
//
// h runs in its own goroutine, one per press, with a context that ends
// 2.5 s after the press: Discord drops an answer later than 3 s. h decides
// who may press: the allowlists do not apply to presses. Presses by bots
// never reach it.
func (b *Bot) HandleButtons(prefix string, h func(context.Context, Press) PressAnswer) {
	b.buttons.add(prefix, h)
}

// buttonRow is the message components of one row of buttons, checked
// against Discord's limits along with the text they go under.
func buttonRow(text string, buttons []Button) (discord.ContainerComponents, error) {
	if err := checkText(text); err != nil {
		return nil, err
	}
	if len(buttons) == 0 || len(buttons) > maxButtons {
		return nil, fmt.Errorf("%w: %d buttons, want 1-%d", ErrInvalidButtons, len(buttons), maxButtons)
	}
	row := make(discord.ActionRowComponent, 0, len(buttons))
	ids := make(map[string]bool, len(buttons))
	for i, bt := range buttons {
		n := utf8.RuneCountInString(bt.Label)
		switch {
		case n == 0 || n > maxButtonLabel:
			return nil, fmt.Errorf("%w: button %d: label of %d characters, want 1-%d", ErrInvalidButtons, i+1, n, maxButtonLabel)
		case bt.ID == "" || len(bt.ID) > maxButtonID:
			return nil, fmt.Errorf("%w: button %d: ID of %d bytes, want 1-%d", ErrInvalidButtons, i+1, len(bt.ID), maxButtonID)
		case ids[bt.ID]:
			return nil, fmt.Errorf("%w: button %d: ID %q used twice", ErrInvalidButtons, i+1, bt.ID)
		}
		ids[bt.ID] = true
		style, err := bt.Style.component()
		if err != nil {
			return nil, fmt.Errorf("%w: button %d: %w", ErrInvalidButtons, i+1, err)
		}
		row = append(row, &discord.ButtonComponent{Style: style, CustomID: discord.ComponentID(bt.ID), Label: bt.Label})
	}
	return discord.ContainerComponents{&row}, nil
}

// checkText checks a message's content against Discord's limit.
func checkText(text string) error {
	if n := utf8.RuneCountInString(text); n == 0 || n > reply.DiscordLimit {
		return fmt.Errorf("%w: text of %d characters, want 1-%d", ErrInvalidButtons, n, reply.DiscordLimit)
	}
	return nil
}

// component is the style as arikawa spells it; zero is ButtonPrimary.
func (s ButtonStyle) component() (discord.ButtonComponentStyle, error) {
	switch s {
	case 0, ButtonPrimary:
		return discord.PrimaryButtonStyle(), nil
	case ButtonSecondary:
		return discord.SecondaryButtonStyle(), nil
	case ButtonSuccess:
		return discord.SuccessButtonStyle(), nil
	case ButtonDanger:
		return discord.DangerButtonStyle(), nil
	}
	return nil, fmt.Errorf("style %d, want 1-4", int(s))
}

// buttonMessage is the body of POST /channels/{id}/messages with buttons:
// arikawa's SendMessageData has no enforce_nonce (see messageCreate).
type buttonMessage struct {
	api.SendMessageData
	EnforceNonce bool `json:"enforce_nonce"`
}

// PostButtons posts text with one row of buttons (1-5) in channel and
// returns the new message's id. Nothing in it pings. Its nonce is enforced,
// so the retries after a 5xx or a network failure (at most 3 tries) post
// it at most once. Invalid input returns ErrInvalidButtons and reaches
// nobody.
func (b *Bot) PostButtons(ctx context.Context, channel, text string, buttons []Button) (messageID string, err error) {
	if len(buttons) == 0 {
		return "", fmt.Errorf("%w: 0 buttons, want 1-%d", ErrInvalidButtons, maxButtons)
	}
	return b.PostRows(ctx, channel, text, []Row{{Buttons: buttons}})
}

// postMessage posts body (a message with an enforced nonce) in ch, trying
// again (at most buttonAttempts tries) when Discord fails in a way that
// may pass: the nonce makes a retry post it at most once.
func (b *Bot) postMessage(ctx context.Context, ch discord.Snowflake, body any) (discord.MessageID, error) {
	return b.retrying(ctx, func() (discord.MessageID, error) {
		var msg discord.Message
		err := b.client(ctx).RequestJSON(&msg, "POST", api.EndpointChannels+ch.String()+"/messages", httputil.WithJSONBody(body))
		return msg.ID, err
	})
}

// retrying posts with post, trying again (at most buttonAttempts tries)
// when Discord fails in a way that may pass; the caller's enforced nonce
// makes a retry post at most once.
func (b *Bot) retrying(ctx context.Context, post func() (discord.MessageID, error)) (discord.MessageID, error) {
	for attempt := 1; ; attempt++ {
		id, err := post()
		if err == nil {
			return id, nil
		}
		wait, ok := b.retryDelay(err, attempt)
		if !ok || attempt == buttonAttempts || ctx.Err() != nil {
			return 0, err
		}
		t := b.clock.NewTimer(wait)
		select {
		case <-t.Chan():
		case <-ctx.Done():
			t.Stop()
			return 0, fmt.Errorf("%w (then %w)", err, ctx.Err())
		}
	}
}

// EditMessage replaces the content of one of the bot's messages and removes
// its buttons. Nothing in the new text pings.
func (b *Bot) EditMessage(ctx context.Context, channel, message, text string) error {
	ch, err := parseID("channel", channel)
	if err != nil {
		return err
	}
	msg, err := parseID("message", message)
	if err != nil {
		return err
	}
	if err := checkText(text); err != nil {
		return err
	}
	none := discord.ContainerComponents{}
	_, err = b.client(ctx).EditMessageComplex(discord.ChannelID(ch), discord.MessageID(msg), api.EditMessageData{
		Content:         option.NewNullableString(text),
		Components:      &none,
		AllowedMentions: &api.AllowedMentions{Parse: []api.AllowedMentionType{}},
	})
	if err != nil {
		return fmt.Errorf("edit message %s in channel %s: %w", message, channel, refused(err))
	}
	return nil
}

// parseID parses a Discord id given as a string.
func parseID(what, id string) (discord.Snowflake, error) {
	s, err := discord.ParseSnowflake(id)
	if err != nil || !s.IsValid() {
		return 0, fmt.Errorf("invalid %s id %q", what, id)
	}
	return s, nil
}

// onPress takes a press on a button: the handler of the longest matching
// prefix runs in its own goroutine (it may do file I/O) and its answer is
// sent back at once. It runs on the event loop and does not block it.
func (b *Bot) onPress(ev *interactionCreate, data *discord.ButtonInteraction) {
	b.routePress(ev, string(data.CustomID), func(*Press) {})
}

// routePress routes a press, a select menu's choice or a modal's
// submission with custom_id id to the handler of the longest matching
// prefix; fill adds what the kind of interaction carries.
func (b *Bot) routePress(ev *interactionCreate, id string, fill func(*Press)) {
	user := ev.Sender()
	if user == nil || user.Bot {
		return
	}
	prefix, h := b.buttons.route(id)
	if h == nil {
		prefix = buttonKind(id)
	}
	log := b.log.With().Str("channel", ev.ChannelID.String()).Str("user", user.ID.String()).Str("button", prefix).Logger()
	log.Info().Bool("handled", h != nil).Msg("button pressed")
	p := Press{
		ButtonID:  id,
		UserID:    user.ID.String(),
		ChannelID: ev.ChannelID.String(),
		// A DM has no member, hence no permissions.
		ManageGuild: ev.Member != nil &&
			(ev.permissions.Has(discord.PermissionManageGuild) || ev.permissions.Has(discord.PermissionAdministrator)),
	}
	if ev.GuildID.IsValid() {
		p.GuildID = ev.GuildID.String()
	}
	if ev.Message != nil {
		p.MessageID = ev.Message.ID.String()
	}
	if ev.Member != nil {
		p.Roles = roleIDs(ev.Member.RoleIDs)
	}
	fill(&p)
	go func() {
		answer := PressAnswer{Notice: unhandledPress}
		if b.opts.Elsewhere != nil && turnButton(id) && !b.holdsPress(p) {
			// The turn may run on another process: it answers.
			ctx, cancel := context.WithTimeout(b.ctx, pressWindow)
			a, ok := b.opts.Elsewhere.Press(ctx, p)
			cancel()
			if ok {
				b.answerPress(ev, a, log)
				return
			}
		}
		if h != nil {
			start := time.Now()
			ctx, cancel := context.WithTimeout(b.ctx, pressWindow)
			answer = h(ctx, p)
			cancel()
			if took := time.Since(start); took > pressWindow {
				log.Warn().Int64("took_ms", took.Milliseconds()).Msg("button handler too slow: Discord may no longer take the answer")
			}
		}
		b.answerPress(ev, answer, log)
	}()
}

// roleIDs are role ids as strings; nil for none.
func roleIDs(ids []discord.RoleID) []string {
	if len(ids) == 0 {
		return nil
	}
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.String()
	}
	return out
}

// buttonKind is what a log line may show of a custom_id nothing handles:
// its part before the first colon, at most 32 bytes; the rest may be data.
func buttonKind(id string) string {
	kind, _, _ := strings.Cut(id, ":")
	if len(kind) > 32 {
		kind = kind[:32]
	}
	return kind
}

// answerPress sends a handler's answer as the press's interaction response.
func (b *Bot) answerPress(ev *interactionCreate, a PressAnswer, log zerolog.Logger) {
	quiet := &api.AllowedMentions{Parse: []api.AllowedMentionType{}}
	resp := api.InteractionResponse{Type: api.DeferredMessageUpdate}
	submitted := ev.Data.InteractionType() == discord.ModalInteractionType
	if a.Modal != nil {
		var err error
		if submitted {
			err = fmt.Errorf("%w: a modal cannot answer a modal", ErrInvalidButtons)
		} else {
			resp, err = a.Modal.response()
		}
		if err != nil {
			log.Error().Err(err).Msg("press answer with an invalid modal")
			a = PressAnswer{Notice: unopenedModal}
		}
	}
	noMessage := submitted && ev.Message == nil
	if noMessage && a.Modal == nil && a.Update == nil && a.Notice == "" {
		// Only a component's interaction may be acknowledged silently.
		a.Notice = "Done."
	}
	switch {
	case a.Modal != nil:
	case a.Update != nil:
		resp = updateResponse(a, log)
		if noMessage {
			// A modal opened by a slash command has no message to
			// update: the update is posted instead.
			resp.Type = api.MessageInteractionWithSource
		}
	case a.Notice != "":
		resp = api.InteractionResponse{Type: api.MessageInteractionWithSource, Data: &api.InteractionResponseData{
			Content:         option.NewNullableString(a.Notice),
			AllowedMentions: quiet,
			Flags:           discord.EphemeralMessage,
		}}
	}
	if err := b.client(b.ctx).RespondInteraction(ev.ID, ev.Token, resp); err != nil {
		log.Warn().Str("error", scrub(err, ev.Token)).Int("callback", int(resp.Type)).Msg("button press not answered")
	}
}

// interactionCreate is INTERACTION_CREATE as the bot decodes it: arikawa's
// event, and the member's permissions in the channel, which arikawa
// v3.6.0's Member drops.
type interactionCreate struct {
	gateway.InteractionCreateEvent
	// permissions are member.permissions; zero in a DM.
	permissions discord.Permissions
}

// Op implements ws.Event: a dispatch.
func (*interactionCreate) Op() ws.OpCode { return 0 }

// EventType implements ws.Event.
func (*interactionCreate) EventType() ws.EventType { return "INTERACTION_CREATE" }

// UnmarshalJSON decodes the event with arikawa, then member.permissions
// (a decimal string). Unreadable permissions count as none.
func (e *interactionCreate) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, &e.InteractionCreateEvent); err != nil {
		return err
	}
	var extra struct {
		Member *struct {
			Permissions string `json:"permissions"`
		} `json:"member"`
	}
	if json.Unmarshal(b, &extra) == nil && extra.Member != nil {
		p, _ := strconv.ParseUint(extra.Member.Permissions, 10, 64)
		e.permissions = discord.Permissions(p)
	}
	return nil
}

// unmarshalers are arikawa's gateway events, with INTERACTION_CREATE
// decoded as interactionCreate.
func unmarshalers() ws.OpUnmarshalers {
	m := ws.NewOpUnmarshalers()
	gateway.OpUnmarshalers.Each(func(_ ws.OpCode, _ ws.EventType, fn ws.OpFunc) bool {
		m.Add(fn)
		return false
	})
	m.Add(func() ws.Event { return new(interactionCreate) })
	return m
}
