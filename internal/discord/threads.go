package discord

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/diamondburned/arikawa/v3/api"
	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/diamondburned/arikawa/v3/gateway"
	"github.com/diamondburned/arikawa/v3/utils/json/option"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/queue"
	"github.com/agentgateway/gateway/internal/threads"
)

// ThreadOptions turn on a thread per task (THREADS=auto, DESIGN decision
// 24): a prompt in a text channel opens a public thread on its message, and
// the thread is a lane and a session of its own.
type ThreadOptions struct {
	// Store lists the threads the gateway opened; in them every message
	// from an allowed user is a prompt. Nil turns threads off.
	Store *threads.Store
	// Archive is the auto-archive duration of the threads opened; zero
	// means a week.
	Archive time.Duration
	// Opened, if set, is called once for each thread the gateway opens,
	// before its first turn: the thread inherits its channel's settings.
	Opened func(thread, parent string)
}

// Notices about threads.
const (
	// threadsMissing says, once per channel, why prompts there are
	// answered in the channel.
	threadsMissing = "I answer here rather than in a thread of its own because I lack the **%s** permission in this channel. A server admin can grant it to me; the operator can set `THREADS=off` to answer in channels on purpose."
	// threadFailed says why an answer that should have had its thread
	// came in the channel.
	threadFailed = "I could not open a thread for this prompt (%s), so I answer here."
	// slashThreadIntro opens the thread of a /claude prompt when the
	// command's own message could not carry it.
	slashThreadIntro = "**%s** asked:\n%s"
	// maxQuote bounds how much of a /claude prompt its message shows.
	maxQuote = 300
)

// threadsOn reports whether the bot opens threads for prompts.
func (b *Bot) threadsOn() bool { return b.opts.Threads.Store != nil }

// ownThread reports whether ch is a thread the gateway opened for a task:
// every message from an allowed user in it is a prompt. Other threads the
// bot owns (one the agent made with an action) are not: people talk there
// among themselves, and mention the bot when they want it.
func (b *Bot) ownThread(ch discord.ChannelID) bool {
	return b.threadsOn() && b.opts.Threads.Store.Owns(ch.String())
}

// threadParent is the channel a thread was opened in, if ch is a thread.
func (b *Bot) threadParent(ch discord.ChannelID) (discord.ChannelID, bool) {
	if c, err := b.state.Cabinet.Channel(ch); err == nil && isThread(c.Type) && c.ParentID.IsValid() {
		return c.ParentID, true
	}
	if b.threadsOn() {
		if t, ok := b.opts.Threads.Store.Get(ch.String()); ok {
			if id, err := discord.ParseSnowflake(t.Parent); err == nil {
				return discord.ChannelID(id), true
			}
		}
	}
	return 0, false
}

// threadPermissions are what opening a thread and answering in it need.
var threadPermissions = []struct {
	perm discord.Permissions
	name string
}{
	{discord.PermissionCreatePublicThreads, "Create Public Threads"},
	{discord.PermissionSendMessagesInThreads, "Send Messages in Threads"},
}

// opensThread reports whether a prompt posted in ch opens a thread: threads
// are on, ch is a server's text channel (not a thread, an announcement
// channel or a forum), and the bot may open and write threads there. When
// a permission is missing, the channel is told once, and missing names it.
func (b *Bot) opensThread(ch discord.ChannelID, guild discord.GuildID) (ok bool, missing string) {
	if !b.threadsOn() || !guild.IsValid() {
		return false, ""
	}
	c, err := b.state.Cabinet.Channel(ch)
	if err != nil || c.Type != discord.GuildText {
		return false, ""
	}
	perms, known := b.cachedPermissions(*c)
	if !known {
		// Not known: try, and fall back to the channel if Discord refuses
		// (PrepareThread).
		return true, ""
	}
	for _, p := range threadPermissions {
		if !perms.Has(p.perm) && !perms.Has(discord.PermissionAdministrator) {
			return false, p.name
		}
	}
	return true, ""
}

// cachedPermissions are the bot's permissions in c from what the gateway
// sent (the guild, its roles, the bot's member and c's overwrites); known
// is false when some of it is not cached. Unlike state.Permissions it
// never asks Discord: intake must not wait on a request.
func (b *Bot) cachedPermissions(c discord.Channel) (perms discord.Permissions, known bool) {
	g, err := b.state.Cabinet.Guild(c.GuildID)
	if err != nil {
		return 0, false
	}
	roles, err := b.state.Cabinet.Roles(c.GuildID)
	if err != nil {
		return 0, false
	}
	m, err := b.state.Cabinet.Member(c.GuildID, b.me())
	if err != nil {
		return 0, false
	}
	return discord.CalcOverrides(*g, c, *m, roles), true
}

// missingThreadPermission tells a channel, once per run of the gateway,
// that its prompts are answered there because a permission is missing.
func (b *Bot) missingThreadPermission(ch discord.ChannelID, msg discord.MessageID, perm string) {
	b.mu.Lock()
	told := b.threadsTold[ch]
	b.threadsTold[ch] = true
	b.mu.Unlock()
	if told {
		return
	}
	b.log.Warn().Str("channel", ch.String()).Str("permission", perm).Msg("prompts in this channel are answered in the channel: the bot may not open threads there")
	go b.notice(ch, msg, fmt.Sprintf(threadsMissing, perm))
}

// threadOfMessage makes e, the prompt in message m, a prompt that opens a
// thread on m: the thread has m's id, so the event's channel (its lane and
// session) is the thread from the start, and a restart that takes m again
// finds the same thread.
func (b *Bot) threadOfMessage(e *queue.Event, m discord.Message, log zerolog.Logger) bool {
	t := threads.Thread{
		ID: m.ID.String(), Parent: m.ChannelID.String(), Guild: m.GuildID.String(),
		Author: m.Author.ID.String(), Name: threads.Name(m.Content), Created: b.clock.Now().UTC(),
	}
	if err := b.addThread(t); err != nil {
		log.Error().Err(err).Msg("could not record the prompt's thread; answering in the channel")
		return false
	}
	e.ChannelID, e.ReplyIn, e.ThreadName = t.ID, t.Parent, t.Name
	return true
}

// addThread records a thread the gateway opens and gives it its channel's
// settings, once.
func (b *Bot) addThread(t threads.Thread) error {
	added, err := b.opts.Threads.Store.Add(t)
	if err != nil {
		return err
	}
	if added && b.opts.Threads.Opened != nil {
		b.opts.Threads.Opened(t.ID, t.Parent)
	}
	return nil
}

// opening is a thread being opened; done closes when err is set.
type opening struct {
	done chan struct{}
	err  error
}

// openThread opens e's thread on its prompt's message, once: callers for
// the same thread wait for the first one. A thread that exists already
// (opened before a restart) is fine.
func (b *Bot) openThread(ctx context.Context, e queue.Event) error {
	b.mu.Lock()
	op, running := b.opening[e.ChannelID]
	if !running {
		op = &opening{done: make(chan struct{})}
		b.opening[e.ChannelID] = op
	}
	b.mu.Unlock()
	if !running {
		op.err = b.startThread(ctx, e)
		if op.err == nil {
			b.addAsker(ctx, e.ChannelID, e.UserID)
		}
		close(op.done)
	}
	select {
	case <-op.done:
		return op.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// codeThreadExists is Discord's answer to a second thread on a message.
const codeThreadExists = 160004

func (b *Bot) startThread(ctx context.Context, e queue.Event) error {
	parent, msg := parseChannel(e.ReplyIn), parseMessage(e.ReplyTo)
	if !parent.IsValid() || !msg.IsValid() {
		return fmt.Errorf("thread %s: no message to open it on", e.ChannelID)
	}
	data := api.StartThreadData{Name: e.ThreadName, AutoArchiveDuration: b.archiveDuration()}
	_, err := b.retrying(ctx, func() (discord.MessageID, error) {
		th, err := b.client(ctx).StartThreadWithMessage(parent, msg, data)
		if err != nil {
			return 0, err
		}
		return discord.MessageID(th.ID), nil
	})
	var herr *RefusedError
	if errors.As(refused(err), &herr) && herr.Code == codeThreadExists {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open thread %s in channel %s: %w", e.ChannelID, e.ReplyIn, refused(err))
	}
	b.log.Info().Str("channel", e.ReplyIn).Str("thread", e.ChannelID).Msg("thread opened for a prompt")
	return nil
}

// addAsker makes the prompt's author a member of its thread: the thread
// shows in their list and its answers reach them as Discord's thread
// settings say, without a ping. A thread opened on a message has only the
// bot as member otherwise.
func (b *Bot) addAsker(ctx context.Context, thread, user string) {
	th, u := parseChannel(thread), discord.UserID(parseMessage(user))
	if !th.IsValid() || !u.IsValid() {
		return
	}
	if err := b.client(ctx).AddThreadMember(th, u); err != nil {
		b.log.Debug().Err(err).Str("thread", thread).Msg("could not add the asker to the thread")
	}
}

// archiveDuration is THREAD_ARCHIVE in Discord's minutes.
func (b *Bot) archiveDuration() discord.ArchiveDuration {
	d := b.opts.Threads.Archive
	if d <= 0 {
		d = 7 * 24 * time.Hour
	}
	return discord.ArchiveDuration(d / time.Minute)
}

// PrepareThread readies the thread a prompt is answered in, before its
// turn posts anything: the thread of a mention is opened (if the intake's
// attempt has not yet), that of a /claude command is opened on the
// command's message. When Discord refuses, the prompt is answered in its
// channel, with a line saying why. It returns the event as the turn must
// see it; other events come back as they are.
func (b *Bot) PrepareThread(ctx context.Context, e queue.Event) queue.Event {
	if e.ThreadName == "" {
		if b.threadsOn() && e.Source == Source && !e.Scheduled() {
			if err := b.opts.Threads.Store.Touch(e.ChannelID, b.clock.Now().UTC()); err != nil {
				b.log.Warn().Err(err).Str("thread", e.ChannelID).Msg("could not record when the thread was last used")
			}
		}
		return e
	}
	if strings.HasPrefix(e.ReplyTo, "interaction:") {
		return b.prepareSlashThread(ctx, e)
	}
	err := b.openThread(ctx, e)
	b.mu.Lock()
	delete(b.opening, e.ChannelID)
	b.mu.Unlock()
	if err == nil {
		if err := b.opts.Threads.Store.Touch(e.ChannelID, b.clock.Now().UTC()); err != nil {
			b.log.Warn().Err(err).Str("thread", e.ChannelID).Msg("could not record when the thread was last used")
		}
		e.ThreadName = ""
		return e
	}
	b.log.Warn().Err(err).Str("channel", e.ReplyIn).Uint64("event", e.ID).Msg("no thread for the prompt: answering in the channel")
	if rmErr := b.opts.Threads.Store.Remove(e.ChannelID); rmErr != nil {
		b.log.Warn().Err(rmErr).Msg("could not forget the thread that was not opened")
	}
	e.ChannelID, e.ReplyIn, e.ThreadName = e.ReplyIn, "", ""
	b.tellThreadFailed(ctx, e, err)
	return e
}

// tellThreadFailed says in e's channel why its answer is not in a thread.
func (b *Bot) tellThreadFailed(ctx context.Context, e queue.Event, err error) {
	var herr *RefusedError
	if errors.As(err, &herr) && (herr.Code == 50013 || herr.Code == 50001) {
		if ch := parseChannel(e.ChannelID); ch.IsValid() {
			b.missingThreadPermission(ch, parseMessage(e.ReplyTo), threadPermissions[0].name)
		}
		return
	}
	reason := "Discord did not answer"
	if herr != nil {
		reason = "Discord refused"
	}
	if nerr := b.Notify(ctx, e, "t", fmt.Sprintf(threadFailed, reason), false); nerr != nil {
		b.log.Debug().Err(nerr).Msg("could not say why the answer is not in a thread")
	}
}

// prepareSlashThread opens the thread of a /claude prompt on the message
// that answered the command (it shows the prompt), or, when that message
// is out of reach (the command's token expired over a restart), as a
// thread of its own that begins with the prompt.
func (b *Bot) prepareSlashThread(ctx context.Context, e queue.Event) queue.Event {
	parent := parseChannel(e.ChannelID)
	b.adoptInteraction(e)
	in := b.takeInteraction(e.ReplyTo)
	var starter discord.MessageID
	if in != nil {
		select {
		case <-in.acked:
		case <-ctx.Done():
		}
		if m, err := b.client(ctx).InteractionResponse(in.app, in.token); err == nil {
			starter = m.ID
		} else {
			b.log.Debug().Err(err).Msg("the /claude command's message is out of reach; opening a thread without it")
		}
	}
	th, err := b.startSlashThread(ctx, parent, starter, e.ThreadName)
	if err == nil && starter.IsValid() && th == nil {
		// The command's message was deleted before its thread opened.
		starter = 0
		th, err = b.startSlashThread(ctx, parent, 0, e.ThreadName)
	}
	if err != nil || th == nil {
		if err == nil {
			err = errNoAnswer
		}
		b.log.Warn().Err(refused(err)).Str("channel", e.ChannelID).Uint64("event", e.ID).Msg("no thread for the /claude prompt: answering in the channel")
		e.ReplyTo, e.ThreadName = "", ""
		b.tellThreadFailed(ctx, e, refused(err))
		return e
	}
	t := threads.Thread{ID: th.ID.String(), Parent: e.ChannelID, Guild: e.GuildID, Author: e.UserID, Name: e.ThreadName, Created: b.clock.Now().UTC(), LastUsed: b.clock.Now().UTC()}
	if err := b.addThread(t); err != nil {
		b.log.Error().Err(err).Msg("could not record the /claude prompt's thread")
	}
	b.log.Info().Str("channel", e.ChannelID).Str("thread", t.ID).Msg("thread opened for a /claude prompt")
	b.addAsker(ctx, t.ID, e.UserID)
	e.ChannelID, e.ReplyTo, e.ReplyIn, e.ThreadName = t.ID, "", "", ""
	if !starter.IsValid() {
		body := messageCreate{Content: fmt.Sprintf(slashThreadIntro, e.Author, quote(e.Text)), AllowedMentions: noPings(false),
			Nonce: fmt.Sprintf("%sq%d", b.noncePrefix, e.ID), EnforceNonce: true}
		if id, err := b.postMessage(ctx, discord.Snowflake(th.ID), body); err == nil {
			e.ReplyTo = id.String()
		}
	}
	return e
}

// startSlashThread opens a public thread in parent, on starter when it is
// set. A starter Discord no longer has gives a nil thread and no error.
func (b *Bot) startSlashThread(ctx context.Context, parent discord.ChannelID, starter discord.MessageID, name string) (*discord.Channel, error) {
	data := api.StartThreadData{Name: name, AutoArchiveDuration: b.archiveDuration()}
	if !starter.IsValid() {
		// API v9 makes a private thread when no type is given.
		data.Type = discord.GuildPublicThread
	}
	var th *discord.Channel
	_, err := b.retrying(ctx, func() (discord.MessageID, error) {
		var err error
		if starter.IsValid() {
			th, err = b.client(ctx).StartThreadWithMessage(parent, starter, data)
		} else {
			th, err = b.client(ctx).StartThreadWithoutMessage(parent, data)
		}
		return 0, err
	})
	var gone *RefusedError
	if starter.IsValid() && errors.As(refused(err), &gone) && gone.Status == http.StatusNotFound {
		return nil, nil
	}
	if err == nil && th == nil {
		err = errNoAnswer
	}
	return th, err
}

// quote is the start of a prompt as a /claude command's message shows it.
func quote(text string) string {
	r := []rune(strings.TrimSpace(text))
	if len(r) > maxQuote {
		r = append(r[:maxQuote-1], '…')
	}
	return "> " + strings.ReplaceAll(string(r), "\n", "\n> ")
}

// respondThreadPrompt answers a /claude command that opens a thread with a
// message showing the prompt; the thread opens on that message.
func (b *Bot) respondThreadPrompt(ev *gateway.InteractionCreateEvent, author, prompt string) error {
	data := &api.InteractionResponseData{
		Content:         option.NewNullableString(fmt.Sprintf(slashThreadIntro, author, quote(prompt))),
		AllowedMentions: &api.AllowedMentions{Parse: []api.AllowedMentionType{}},
	}
	return b.client(b.ctx).RespondInteraction(ev.ID, ev.Token, api.InteractionResponse{Type: api.MessageInteractionWithSource, Data: data})
}

// onThreadDelete records that a thread the gateway opened is gone: its
// worktree may be cleaned up.
func (b *Bot) onThreadDelete(ev *gateway.ThreadDeleteEvent) {
	if !b.threadsOn() || !b.opts.Threads.Store.Owns(ev.ID.String()) {
		return
	}
	if err := b.opts.Threads.Store.MarkGone(ev.ID.String()); err != nil {
		b.log.Warn().Err(err).Str("thread", ev.ID.String()).Msg("could not record that a thread was deleted")
	}
	b.log.Info().Str("thread", ev.ID.String()).Msg("a thread the gateway opened was deleted")
}

// replyRef is the prompt message a post about e may reply to: none when
// the prompt lives in another channel (a thread's opening prompt), since
// Discord replies only within a channel.
func replyRef(e queue.Event) (discord.MessageID, bool) {
	if e.ReplyIn != "" && e.ReplyIn != e.ChannelID {
		return 0, false
	}
	id := parseMessage(e.ReplyTo)
	return id, id.IsValid()
}

// noticePlace is where a notice about e goes, and the message it answers:
// e's channel, unless e is a prompt whose thread is not open yet (a
// restart or a shutdown came first), whose notices go to its message.
func noticePlace(e queue.Event) (discord.ChannelID, discord.MessageID) {
	if e.ThreadName != "" && e.ReplyIn != "" {
		return parseChannel(e.ReplyIn), parseMessage(e.ReplyTo)
	}
	ref, _ := replyRef(e)
	return parseChannel(e.ChannelID), ref
}

// promptChannel is the channel e's prompt message was posted in.
func promptChannel(e queue.Event) discord.ChannelID {
	if e.ReplyIn != "" {
		return parseChannel(e.ReplyIn)
	}
	return parseChannel(e.ChannelID)
}
