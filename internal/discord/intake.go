package discord

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/diamondburned/arikawa/v3/api"
	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/diamondburned/arikawa/v3/gateway"
	"github.com/diamondburned/arikawa/v3/utils/json/option"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/queue"
	"github.com/agentgateway/gateway/internal/threads"
)

// Source is the queue.Event Source of Discord events.
const Source = "discord"

// Reactions and notices shown to users.
const (
	waitingEmoji = "⏳"
	// steeredEmoji marks a prompt written into the running turn.
	steeredEmoji = "📨"
	// refusedEmoji marks a prompt the full queue turned away when the
	// channel was told so less than busyNoticeEvery ago.
	refusedEmoji   = "🚫"
	emptyPrompt    = "Mention me with a question, or use /claude."
	notAllowed     = "You are not allowed to use this bot here."
	shuttingDown   = "The gateway is shutting down and did not take this message. Please send it again in a minute."
	notStored      = "The gateway could not store this message (its disk may be full, or its event store out of reach), so it was not taken. The operator can see why in the gateway's log; please send it again later."
	resetNotice    = "Started a new conversation: the next prompt in this channel begins a fresh session."
	resetNothing   = "There was no conversation to reset in this channel; the next prompt begins a fresh session."
	resetFailed    = "Could not reset the conversation: the session file could not be written. Check the gateway's log."
	interactionTTL = 14 * time.Minute
	// busyNoticeEvery is how often at most a channel is told the queue is
	// full: a flood of prompts must not become a flood of notices.
	busyNoticeEvery = 30 * time.Second
)

// Slash command names.
const (
	commandPrompt = "claude"
	commandReset  = "claude-reset"
	commandStop   = "claude-stop"
)

// busyNotice tells why the queue refused a prompt: the channel's own limit
// or the whole queue's.
func busyNotice(full *queue.FullError) string {
	n, are := fmt.Sprintf("%d prompts", full.Depth), "are"
	if full.Depth == 1 {
		n, are = "1 prompt", "is"
	}
	if full.Lane {
		return fmt.Sprintf("This channel already has %s waiting. Please send this again once they have been answered.", n)
	}
	return fmt.Sprintf("I'm busy: %s %s already waiting. Please try again in a minute.", n, are)
}

// busyNoticeDueLocked reports whether a channel may be told now that the
// queue is full, and if so records it. b.mu must be held.
func (b *Bot) busyNoticeDueLocked(channel discord.ChannelID) bool {
	now := b.clock.Now()
	if last, ok := b.busyNoticed[channel]; ok && now.Sub(last) < busyNoticeEvery {
		return false
	}
	for ch, last := range b.busyNoticed {
		if now.Sub(last) >= busyNoticeEvery {
			delete(b.busyNoticed, ch)
		}
	}
	b.busyNoticed[channel] = now
	return true
}

// accepts reports whether a message is a prompt for the bot: not from a bot
// (itself included) or a webhook, a user's ordinary message, and either in
// a direct message, in a thread the gateway opened (ownThread), or
// mentioning the bot (property 5).
func accepts(m discord.Message, botID discord.UserID, ownThread bool) bool {
	if m.Author.Bot || m.WebhookID.IsValid() || m.Author.ID == botID {
		return false
	}
	if m.Type != discord.DefaultMessage && m.Type != discord.InlinedReplyMessage {
		return false
	}
	if !m.GuildID.IsValid() || ownThread {
		return true
	}
	if Mentions(m.Content, botID.String()) {
		return true
	}
	return slices.ContainsFunc(m.Mentions, func(u discord.GuildUser) bool { return u.ID == botID })
}

func (b *Bot) onMessage(ev *gateway.MessageCreateEvent) {
	b.mu.Lock()
	if held, catching := b.held[ev.ChannelID]; catching {
		// Its channel is being caught up: it is taken after the missed
		// ones, to keep the channel's order.
		b.held[ev.ChannelID] = append(held, heldMessage{ev.Message, ev.Member})
		b.mu.Unlock()
		return
	}
	b.mu.Unlock()
	b.handleMessage(ev.Message, ev.Member)
}

// heldMessage is a live message that waits for its channel's catch-up.
type heldMessage struct {
	m      discord.Message
	member *discord.Member
}

// holdChannelsLocked marks channels as being caught up (live messages in
// them wait) and returns those it marked: a channel another catch-up is
// still fetching is left to it. mu must be held.
func (b *Bot) holdChannelsLocked(chs []discord.ChannelID) []discord.ChannelID {
	var marked []discord.ChannelID
	for _, ch := range chs {
		if _, busy := b.held[ch]; !busy {
			b.held[ch] = nil
			marked = append(marked, ch)
		}
	}
	return marked
}

// release takes the live messages held for ch, in order, and ends its
// catch-up.
func (b *Bot) release(ch discord.ChannelID) {
	for {
		b.mu.Lock()
		msgs := b.held[ch]
		if len(msgs) == 0 {
			delete(b.held, ch)
			b.mu.Unlock()
			return
		}
		b.held[ch] = nil
		b.mu.Unlock()
		for _, h := range msgs {
			b.handleMessage(h.m, h.member)
		}
	}
}

// handleMessage is the intake of one message, live or fetched after a
// reconnect. Each message is taken at most once: ids grow within a channel,
// so anything at or below the newest id seen there is a duplicate.
func (b *Bot) handleMessage(m discord.Message, member *discord.Member) {
	b.mu.Lock()
	if m.ID <= b.lastSeen[m.ChannelID].message {
		b.mu.Unlock()
		return
	}
	b.lastSeen[m.ChannelID] = seen{message: m.ID, guild: m.GuildID}
	b.dirty = true
	b.mu.Unlock()

	botID := b.me()
	if !accepts(m, botID, m.GuildID.IsValid() && b.ownThread(m.ChannelID)) {
		return
	}
	log := b.log.With().Str("channel", m.ChannelID.String()).Str("message", m.ID.String()).Logger()
	if !b.allowed(m.Author.ID, m.ChannelID, m.GuildID, memberRoles(member)...) {
		log.Info().Str("user", m.Author.ID.String()).Msg("prompt refused by the allowlists")
		return
	}
	if b.voiceMessage(m, member, log) {
		return
	}
	prompt := Prompt(m.Content, botID.String(), b.names(m))
	files := queueAttachments(m.Attachments)
	if prompt == "" && len(files) == 0 {
		go b.notice(m.ChannelID, m.ID, emptyPrompt)
		return
	}
	b.submitMessage(messageEvent(m, member, withAttachments(prompt, files), files), m, log)
}

// messageEvent is the event of a prompt message m whose prompt is text.
func messageEvent(m discord.Message, member *discord.Member, text string, files []queue.Attachment) queue.Event {
	e := queue.Event{
		Kind:        queue.KindMessage,
		Source:      Source,
		ChannelID:   m.ChannelID.String(),
		Text:        text,
		UserID:      m.Author.ID.String(),
		Author:      displayName(m.Author, member),
		ReplyTo:     m.ID.String(),
		Key:         MessageKey(m.ID.String()),
		Attachments: files,
	}
	if m.GuildID.IsValid() {
		e.GuildID = m.GuildID.String()
	}
	return e
}

// submitMessage opens e's thread when its channel answers in threads,
// scopes its session and hands it to the intake, telling m's author what
// became of it.
func (b *Bot) submitMessage(e queue.Event, m discord.Message, log zerolog.Logger) {
	thread := false
	if opens, missing := b.opensThread(m.ChannelID, m.GuildID); opens {
		thread = b.threadOfMessage(&e, m, log)
	} else if missing != "" {
		b.missingThreadPermission(m.ChannelID, m.ID, missing)
	}
	b.scopeSession(&e)
	if b.stopping.Load() {
		b.keep(e, log)
		return
	}

	undo := b.markPrompt(&e)
	b.mu.Lock()
	defer b.mu.Unlock()
	if sub, ok := b.intake.(Submitter); ok {
		p, err := sub.Submit(e)
		if err != nil {
			undo()
			b.refusedLocked(m, err, log)
			return
		}
		// The next message is taken while this one's record reaches the
		// disk, with those of the messages around it.
		go func() {
			rcpt, err := p.Wait()
			b.mu.Lock()
			defer b.mu.Unlock()
			if err != nil {
				undo()
				b.refusedLocked(m, err, log)
				return
			}
			b.acceptedLocked(m, rcpt, thread, true, log)
		}()
		return
	}
	rcpt, err := b.intake.Enqueue(e)
	if err != nil {
		undo()
		b.refusedLocked(m, err, log)
		return
	}
	b.acceptedLocked(m, rcpt, thread, false, log)
}

// refusedLocked tells the author of m why the intake refused it, unless it
// was accepted by an earlier run. mu must be held.
func (b *Bot) refusedLocked(m discord.Message, err error, log zerolog.Logger) {
	if errors.Is(err, queue.ErrDuplicate) {
		// Accepted by an earlier run (fetched again by the catch-up): it
		// is answered from the inbox.
		log.Debug().Msg("prompt accepted before; not taken again")
		return
	}
	var full *queue.FullError
	notify := !errors.As(err, &full) || b.busyNoticeDueLocked(m.ChannelID)
	go b.refuse(m.ChannelID, m.ID, err, notify)
}

// acceptedLocked shows that m was accepted: its thread, and ⏳ while it
// waits. late is set when the prompt was accepted after the intake went
// on (Submitter): its turn may have started, or been dropped, meanwhile,
// and then gets no ⏳. mu must be held.
func (b *Bot) acceptedLocked(m discord.Message, rcpt queue.Receipt, thread, late bool, log zerolog.Logger) {
	if late && rcpt.Waiting && !b.stillWaiting(rcpt.Event) {
		rcpt.Waiting = false
	}
	log.Info().Uint64("event", rcpt.Event.ID).Bool("waiting", rcpt.Waiting).Bool("thread", thread).Msg("prompt accepted")
	if thread {
		// The thread shows at once, also while the prompt waits its turn;
		// PrepareThread waits for this attempt or makes its own.
		go func() {
			if err := b.openThread(b.ctx, rcpt.Event); err != nil {
				log.Warn().Err(err).Msg("could not open the prompt's thread yet")
			}
		}()
	}
	if rcpt.Waiting && b.opts.Steer != nil && b.opts.Steer(rcpt.Event) {
		go func() {
			if err := b.client(b.ctx).React(m.ChannelID, m.ID, steeredEmoji); err != nil {
				log.Debug().Err(err).Msg("could not mark the prompt as written into the running turn")
			}
		}()
		return
	}
	if rcpt.Waiting && b.opts.Elsewhere != nil {
		// The turn starts on whichever process takes it, which removes
		// the ⏳ then: no mark is kept here. A turn that started (or
		// ended) before the ⏳ landed has it removed here.
		go func() {
			if err := b.client(b.ctx).React(m.ChannelID, m.ID, waitingEmoji); err != nil {
				log.Warn().Err(err).Msg("could not mark the prompt as waiting")
				return
			}
			if b.opts.Elsewhere.Started(b.ctx, rcpt.Event.ID) {
				b.unmarkWaiting(rcpt.Event)
			}
		}()
		return
	}
	if rcpt.Waiting {
		mk := &mark{channel: m.ChannelID, message: m.ID, placed: make(chan struct{}), gone: make(chan struct{}), offered: make(chan struct{})}
		b.marks[rcpt.Event.ID] = mk
		go func() {
			defer close(mk.placed)
			if err := b.client(b.ctx).React(mk.channel, mk.message, waitingEmoji); err != nil {
				log.Warn().Err(err).Msg("could not mark the prompt as waiting")
			}
		}()
		if b.canSendNow() {
			mk.offer = b.clock.AfterFunc(SendNowDelay, func() { b.offerSendNow(mk) })
		} else {
			close(mk.offered)
		}
	}
}

// keep takes a prompt that arrives while the gateway stops: stored for the
// next start when the intake can (Keeper), else refused with a notice.
func (b *Bot) keep(e queue.Event, log zerolog.Logger) {
	k, ok := b.intake.(Keeper)
	if !ok {
		go b.notice(promptChannel(e), parseMessage(e.ReplyTo), shuttingDown)
		return
	}
	undo := b.markPrompt(&e)
	kept, err := k.Keep(e)
	if err != nil {
		undo()
	}
	switch {
	case errors.Is(err, queue.ErrDuplicate):
		return
	case err != nil:
		log.Error().Err(err).Msg("prompt not kept for the next start")
		go b.notice(promptChannel(e), parseMessage(e.ReplyTo), shuttingDown)
		return
	}
	log.Info().Uint64("event", kept.ID).Msg("prompt kept for the next start: the gateway is stopping")
	go func() {
		if err := b.Notify(b.ctx, kept, RestartingTag, RestartingNotice, false); err != nil {
			log.Debug().Err(err).Msg("could not tell a kept prompt about the restart")
		}
	}()
}

func parseChannel(id string) discord.ChannelID {
	s, _ := discord.ParseSnowflake(id)
	return discord.ChannelID(s)
}

func parseMessage(id string) discord.MessageID {
	s, _ := discord.ParseSnowflake(id)
	return discord.MessageID(s)
}

// MessageKey is the de-duplication key (queue.Event.Key) of the prompt in
// a Discord message.
func MessageKey(message string) string { return "discord:message:" + message }

// refuse answers a prompt the queue did not take. A full queue is told in
// words when notify is set, else with refusedEmoji only.
func (b *Bot) refuse(channel discord.ChannelID, message discord.MessageID, err error, notify bool) {
	var full *queue.FullError
	switch {
	case errors.As(err, &full):
		b.log.Warn().Str("channel", channel.String()).Str("message", message.String()).
			Int("depth", full.Depth).Bool("channel_limit", full.Lane).Bool("notice", notify).
			Msg("prompt refused: the queue is full")
		if notify {
			b.notice(channel, message, busyNotice(full))
			return
		}
		if err := b.client(b.ctx).React(channel, message, refusedEmoji); err != nil {
			b.log.Debug().Err(err).Str("channel", channel.String()).Msg("could not mark the prompt as refused")
		}
	case errors.Is(err, queue.ErrClosed):
		b.notice(channel, message, shuttingDown)
	default:
		// The journal refused it (a full disk): nothing was stored, so the
		// user must know to send it again.
		b.log.Error().Err(err).Str("channel", channel.String()).Msg("prompt not queued")
		b.notice(channel, message, notStored)
	}
}

// notice sends a short gateway message in reply to a prompt.
func (b *Bot) notice(channel discord.ChannelID, message discord.MessageID, text string) {
	if _, err := b.post(b.ctx, channel, message, part{content: text}, b.noticeNonce(message)); err != nil {
		b.log.Warn().Err(err).Str("channel", channel.String()).Int("length", len(text)).Msg("notice not delivered")
	}
}

// allowed applies the allowlists, looking up a thread's parent channel.
// roles are the user's roles in the guild (none in a direct message).
func (b *Bot) allowed(user discord.UserID, channel discord.ChannelID, guild discord.GuildID, roles ...string) bool {
	if !b.opts.Access.Restricted() {
		return true
	}
	var parent string
	if guild.IsValid() {
		if p, ok := b.threadParent(channel); ok {
			parent = p.String()
		}
	}
	g := ""
	if guild.IsValid() {
		g = guild.String()
	}
	return b.opts.Access.Allows(user.String(), channel.String(), parent, g, roles...)
}

func isThread(t discord.ChannelType) bool {
	return t == discord.GuildPublicThread || t == discord.GuildPrivateThread || t == discord.GuildAnnouncementThread
}

// names resolves the mentions in a message from the message itself and
// the cache of guild roles and channels.
func (b *Bot) names(m discord.Message) Names {
	n := Names{Users: map[string]string{}, Roles: map[string]string{}, Channels: map[string]string{}}
	for _, u := range m.Mentions {
		n.Users[u.ID.String()] = displayName(u.User, u.Member)
	}
	if !m.GuildID.IsValid() {
		return n
	}
	for _, id := range m.MentionRoleIDs {
		if r, err := b.state.Cabinet.Role(m.GuildID, id); err == nil {
			n.Roles[id.String()] = r.Name
		}
	}
	for _, sub := range mentionPattern().FindAllStringSubmatch(m.Content, -1) {
		if sub[1] != "#" {
			continue
		}
		if id, err := discord.ParseSnowflake(sub[2]); err == nil {
			if ch, err := b.state.Cabinet.Channel(discord.ChannelID(id)); err == nil {
				n.Channels[sub[2]] = ch.Name
			}
		}
	}
	return n
}

// catchUp runs after a reconnect that could not resume: it fetches, in
// every channel the bot has seen a message in, what was posted since, and
// takes the prompts among them. It starts a goroutine, so slash commands
// are answered meanwhile; live messages in a channel being caught up wait
// and are taken after the fetched ones, in order.
func (b *Bot) catchUp() {
	b.mu.Lock()
	since := make(map[discord.ChannelID]seen, len(b.lastSeen))
	for _, ch := range b.holdChannelsLocked(slices.Collect(maps.Keys(b.lastSeen))) {
		since[ch] = b.lastSeen[ch]
	}
	b.mu.Unlock()
	go b.fetchMissed(since)
}

func (b *Bot) fetchMissed(since map[discord.ChannelID]seen) {
	ctx, cancel := context.WithTimeout(b.ctx, b.opts.CatchUpTimeout)
	defer cancel()
	c := b.client(ctx)
	total, skipped := 0, 0
	for ch, after := range since {
		msgs, err := b.missed(c, ch, after.message)
		if err != nil {
			b.log.Warn().Err(err).Str("channel", ch.String()).Msg("could not fetch the messages missed while disconnected")
			b.release(ch)
			continue
		}
		// Both fetches return newest first.
		slices.Reverse(msgs)
		for _, m := range msgs {
			// History carries no guild id; without it a guild message
			// would pass for a direct message.
			m.ChannelID, m.GuildID = ch, after.guild
			if age := time.Since(m.ID.Time()); age > b.opts.MaxCatchUpAge {
				b.mu.Lock()
				b.lastSeen[ch] = seen{message: m.ID, guild: after.guild}
				b.mu.Unlock()
				skipped++
				continue
			}
			b.handleMessage(m, nil)
		}
		b.release(ch)
		total += len(msgs)
	}
	b.log.Info().Int("channels", len(since)).Int("messages", total).Int("too_old", skipped).Msg("caught up on messages sent while disconnected")
	b.caughtUp(total)
}

// onGuildCreate catches up, after a restart or a new session, on the
// channels of a guild where the bot has never seen a message: one created,
// or first written in, while the gateway was down. Messages since
// WatchingSince (at most MaxCatchUpAge old) are taken; the others were
// posted before the gateway was there to answer.
func (b *Bot) onGuildCreate(g *gateway.GuildCreateEvent) {
	if b.opts.WatchingSince.IsZero() {
		return
	}
	b.mu.Lock()
	again := b.readies > 1 || b.restored
	var unseen []discord.ChannelID
	for _, c := range append(slices.Clone(g.Channels), g.Threads...) {
		if _, known := b.lastSeen[c.ID]; !known && textual(c.Type) {
			unseen = append(unseen, c.ID)
		}
	}
	if !again {
		b.mu.Unlock()
		return
	}
	unseen = b.holdChannelsLocked(unseen)
	b.mu.Unlock()
	if len(unseen) == 0 {
		return
	}
	go b.fetchUnseen(g.ID, unseen)
}

func (b *Bot) fetchUnseen(guild discord.GuildID, unseen []discord.ChannelID) {
	since := b.opts.WatchingSince
	if oldest := b.clock.Now().Add(-b.opts.MaxCatchUpAge); since.Before(oldest) {
		since = oldest
	}
	after := discord.MessageID(discord.NewSnowflake(since))
	ctx, cancel := context.WithTimeout(b.ctx, b.opts.CatchUpTimeout)
	defer cancel()
	total := 0
	for _, ch := range unseen {
		msgs, err := b.missed(b.client(ctx), ch, after)
		if err != nil {
			b.log.Debug().Err(err).Str("channel", ch.String()).Msg("could not fetch the messages of a channel new to the bot")
			b.release(ch)
			continue
		}
		slices.Reverse(msgs)
		for _, m := range msgs {
			m.ChannelID, m.GuildID = ch, guild
			b.handleMessage(m, nil)
		}
		b.release(ch)
		total += len(msgs)
	}
	if total > 0 {
		b.log.Info().Int("channels", len(unseen)).Int("messages", total).Msg("caught up on channels first written in while disconnected")
	}
	b.caughtUp(total)
}

// textual reports whether messages can be posted in a channel of type t.
func textual(t discord.ChannelType) bool {
	switch t {
	case discord.GuildText, discord.GuildAnnouncement, discord.GuildPublicThread, discord.GuildPrivateThread, discord.GuildAnnouncementThread:
		return true
	}
	return false
}

// catchUpLimit bounds the messages the catch-up fetches in one channel.
const catchUpLimit = 500

// missed fetches the messages of ch posted after the one it knows. One
// page usually holds them all; when it is full, more than a page was
// missed, and the newest catchUpLimit are taken instead: a long outage
// answers what was asked last rather than what was asked first.
func (b *Bot) missed(c *api.Client, ch discord.ChannelID, after discord.MessageID) ([]discord.Message, error) {
	const page = 100
	msgs, err := c.MessagesAfter(ch, after, page)
	if err != nil || len(msgs) < page {
		return msgs, err
	}
	newest, err := c.MessagesBefore(ch, 0, catchUpLimit)
	if err != nil {
		return nil, err
	}
	keep := newest[:0]
	for _, m := range newest {
		if m.ID > after {
			keep = append(keep, m)
		}
	}
	if len(keep) == catchUpLimit {
		b.log.Warn().Str("channel", ch.String()).Int("taken", catchUpLimit).
			Msg("more messages were missed than the catch-up takes: the newest are answered, the older ones are not")
	}
	return keep, nil
}

// registerCommands installs /claude and /claude-reset for the application.
func (b *Bot) registerCommands(app discord.AppID) {
	cmds := []api.CreateCommandData{
		{
			Name:        commandPrompt,
			Description: "Ask the agent",
			Options: discord.CommandOptions{
				&discord.StringOption{OptionName: "prompt", Description: "What to ask", Required: true},
				&discord.AttachmentOption{OptionName: "file", Description: "A file for the agent to look at (a screenshot, a log)"},
			},
		},
		{
			Name:        commandReset,
			Description: "Forget this channel's conversation; the next prompt starts a new session",
		},
		{
			Name:        commandStop,
			Description: "Stop the prompt the agent is working on in this channel",
			Options: discord.CommandOptions{
				&discord.BooleanOption{OptionName: "all", Description: "Also drop the prompts waiting in this channel"},
			},
		},
	}
	cmds = append(cmds, b.commandDefs()...)
	if _, err := b.client(b.ctx).BulkOverwriteCommands(app, cmds); err != nil {
		b.log.Error().Err(err).Msg("could not register the slash commands; mentions still work")
		return
	}
	names := make([]string, len(cmds))
	for i, c := range cmds {
		names[i] = "/" + c.Name
	}
	b.log.Info().Strs("commands", names).Msg("slash commands registered")
}

func (b *Bot) onInteraction(iev *interactionCreate) {
	ev := &iev.InteractionCreateEvent
	if press, ok := ev.Data.(*discord.ButtonInteraction); ok {
		b.onPress(iev, press)
		return
	}
	if sel, ok := ev.Data.(*discord.StringSelectInteraction); ok {
		b.onSelect(iev, sel)
		return
	}
	if form, ok := ev.Data.(*discord.ModalInteraction); ok {
		b.onModalSubmit(iev, form)
		return
	}
	if ac, ok := ev.Data.(*discord.AutocompleteInteraction); ok {
		b.onAutocomplete(iev, ac)
		return
	}
	cmd, ok := ev.Data.(*discord.CommandInteraction)
	if !ok {
		return
	}
	user := ev.Sender()
	if user == nil || user.Bot {
		return
	}
	log := b.log.With().Str("channel", ev.ChannelID.String()).Str("command", cmd.Name).Logger()
	if !b.allowed(user.ID, ev.ChannelID, ev.GuildID, memberRoles(ev.Member)...) {
		log.Info().Str("user", user.ID.String()).Msg("slash command refused by the allowlists")
		go b.respond(ev, notAllowed, true)
		return
	}
	switch cmd.Name {
	case commandReset:
		go b.reset(ev)
	case commandStop:
		b.stop(ev, user.ID, cmd.Options.Find("all"))
	case commandPrompt:
		b.slashPrompt(ev, cmd, user.ID)
	default:
		if !b.runCommand(iev, cmd, user.ID, log) {
			log.Warn().Msg("unknown slash command")
		}
	}
}

func (b *Bot) reset(ev *gateway.InteractionCreateEvent) {
	key, done, nothing := ev.ChannelID.String(), resetNotice, resetNothing
	if u := ev.Sender(); u != nil && ev.GuildID.IsValid() {
		// With sessions per user, each resets their own.
		if own := b.SessionKeyOf(key, ev.GuildID.String(), u.ID.String()); own != key {
			key, done, nothing = own, resetOwnNotice, resetOwnNothing
		}
	}
	removed, err := b.sessions.Delete(key)
	switch {
	case err != nil:
		b.log.Error().Err(err).Str("channel", ev.ChannelID.String()).Msg("session reset failed")
		b.respond(ev, resetFailed, true)
	case removed:
		b.log.Info().Str("channel", ev.ChannelID.String()).Bool("own", key != ev.ChannelID.String()).Msg("session reset")
		b.respond(ev, done, false)
	default:
		b.respond(ev, nothing, false)
	}
}

// slashPrompt takes a /claude command: the prompt is exactly the option's
// value (property 4). The event is queued first, to keep the channel's
// order, and deferred at once, within Discord's 3 s window; the reply
// waits for the deferral before it edits the response.
func (b *Bot) slashPrompt(ev *gateway.InteractionCreateEvent, cmd *discord.CommandInteraction, user discord.UserID) {
	prompt := slashPromptText(cmd)
	files := slashAttachments(cmd)
	if prompt == "" && len(files) == 0 {
		go b.respond(ev, emptyPrompt, true)
		return
	}
	if b.stopping.Load() {
		go b.respond(ev, shuttingDown, true)
		return
	}
	in := &interaction{
		app: ev.AppID, token: ev.Token, channel: ev.ChannelID,
		expires: b.clock.Now().Add(interactionTTL), acked: make(chan struct{}),
	}
	key := "interaction:" + ev.ID.String()
	e := queue.Event{
		Kind:        queue.KindMessage,
		Source:      Source,
		ChannelID:   ev.ChannelID.String(),
		Text:        withAttachments(prompt, files),
		UserID:      user.String(),
		ReplyTo:     key,
		Key:         "discord:" + key,
		Attachments: files,
	}
	if u := ev.Sender(); u != nil {
		e.Author = displayName(*u, ev.Member)
	}
	if ev.GuildID.IsValid() {
		e.GuildID = ev.GuildID.String()
	}
	b.scopeSession(&e)
	if b.opts.Elsewhere != nil {
		// Whichever process runs the turn answers the command.
		e.Interaction = &queue.Interaction{App: ev.AppID.String(), Token: ev.Token, Expires: in.expires}
	}
	opens, missing := b.opensThread(ev.ChannelID, ev.GuildID)
	if opens {
		// Its own lane: the thread, its lane-to-be, has no id before the
		// command's message exists (PrepareThread opens it).
		e.ThreadName, e.Lane = threads.Name(prompt), key
	} else if missing != "" {
		b.missingThreadPermission(ev.ChannelID, 0, missing)
	}
	undo := b.markPrompt(&e)
	b.mu.Lock()
	rcpt, err := b.intake.Enqueue(e)
	if err == nil && b.opts.Elsewhere == nil {
		b.interactions[key] = in
	}
	b.mu.Unlock()
	if err != nil {
		undo()
		// The refusal is ephemeral, seen only by whoever ran the command,
		// so it is always sent: a slash command must be answered.
		var full *queue.FullError
		text := shuttingDown
		if errors.As(err, &full) {
			text = busyNotice(full)
			b.log.Warn().Str("channel", ev.ChannelID.String()).Int("depth", full.Depth).Bool("channel_limit", full.Lane).
				Msg("slash prompt refused: the queue is full")
		} else if !errors.Is(err, queue.ErrClosed) {
			b.log.Error().Err(err).Str("channel", ev.ChannelID.String()).Msg("slash prompt not queued")
		}
		go b.respond(ev, text, true)
		return
	}
	b.log.Info().Str("channel", ev.ChannelID.String()).Uint64("event", rcpt.Event.ID).Bool("waiting", rcpt.Waiting).Msg("slash prompt accepted")
	go func() {
		defer close(in.acked)
		if opens {
			if err := b.respondThreadPrompt(ev, e.Author, e.Text); err != nil {
				b.log.Warn().Err(err).Str("channel", ev.ChannelID.String()).Msg("could not acknowledge the slash command")
			}
			return
		}
		err := b.client(b.ctx).RespondInteraction(ev.ID, ev.Token, api.InteractionResponse{
			Type: api.DeferredMessageInteractionWithSource,
		})
		if err != nil {
			b.log.Warn().Err(err).Str("channel", ev.ChannelID.String()).Msg("could not acknowledge the slash command")
		}
	}()
}

// slashPromptText is the prompt of a /claude command: exactly the value of
// its prompt option (property 4).
func slashPromptText(cmd *discord.CommandInteraction) string {
	return cmd.Options.Find("prompt").String()
}

// slashAttachments is the file of a /claude command's file option, as
// Discord resolved it.
func slashAttachments(cmd *discord.CommandInteraction) []queue.Attachment {
	id, err := cmd.Options.Find("file").SnowflakeValue()
	if err != nil || !id.IsValid() {
		return nil
	}
	a, ok := cmd.Resolved.Attachments[discord.AttachmentID(id)]
	if !ok {
		return nil
	}
	return queueAttachments([]discord.Attachment{a})
}

// queueAttachments describes a message's attachments for its event.
func queueAttachments(list []discord.Attachment) []queue.Attachment {
	var out []queue.Attachment
	for _, a := range list {
		out = append(out, queue.Attachment{Name: a.Filename, URL: string(a.URL), ContentType: a.ContentType, Size: int64(a.Size)})
	}
	return out
}

// withAttachments is the prompt of a message with files: a message with
// only files asks the agent to look at them.
func withAttachments(prompt string, files []queue.Attachment) string {
	switch {
	case prompt != "" || len(files) == 0:
		return prompt
	case len(files) == 1:
		return "See the attached file."
	default:
		return "See the attached files."
	}
}

// respond answers an interaction at once with a short message.
func (b *Bot) respond(ev *gateway.InteractionCreateEvent, text string, ephemeral bool) {
	data := &api.InteractionResponseData{
		Content:         option.NewNullableString(text),
		AllowedMentions: &api.AllowedMentions{Parse: []api.AllowedMentionType{}},
	}
	if ephemeral {
		data.Flags = discord.EphemeralMessage
	}
	err := b.client(b.ctx).RespondInteraction(ev.ID, ev.Token, api.InteractionResponse{
		Type: api.MessageInteractionWithSource,
		Data: data,
	})
	if err != nil {
		b.log.Warn().Err(err).Str("channel", ev.ChannelID.String()).Int("length", len(text)).Msg("interaction response not delivered")
	}
}
