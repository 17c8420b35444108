package discord

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/textproto"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/diamondburned/arikawa/v3/api"
	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/diamondburned/arikawa/v3/utils/httputil"
	"github.com/diamondburned/arikawa/v3/utils/json"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/agent"
	"github.com/agentgateway/gateway/internal/files"
	"github.com/agentgateway/gateway/internal/queue"
	"github.com/agentgateway/gateway/internal/reply"
)

// noPings allows no mention to ping: not @everyone, not roles, not users
// named in the agent's text (DESIGN 8). Only the user a reply answers is
// notified, which is the gateway's intent, not the agent's.
func noPings(repliedUser bool) *api.AllowedMentions {
	return &api.AllowedMentions{Parse: []api.AllowedMentionType{}, RepliedUser: &repliedUser}
}

// messageCreate is the body of POST /channels/{id}/messages. arikawa's
// SendMessageData has no enforce_nonce: with it Discord answers a repeated
// nonce with the message it already created, so a send retried after an
// ambiguous failure (a 5xx, a dropped connection) posts at most once.
type messageCreate struct {
	Content          string               `json:"content"`
	Nonce            string               `json:"nonce"`
	EnforceNonce     bool                 `json:"enforce_nonce"`
	AllowedMentions  *api.AllowedMentions `json:"allowed_mentions"`
	MessageReference *messageReference    `json:"message_reference,omitempty"`
	Attachments      []attachmentRef      `json:"attachments,omitempty"`
	// Components are buttons (Notify's Retry); nil for replies.
	Components discord.ContainerComponents `json:"components,omitempty"`
}

// webhookMessage is the body of an interaction's response edit and
// follow-ups. Webhooks take no nonce.
type webhookMessage struct {
	Content         string               `json:"content"`
	AllowedMentions *api.AllowedMentions `json:"allowed_mentions"`
	Attachments     []attachmentRef      `json:"attachments,omitempty"`
}

// attachmentRef names the file uploaded as files[ID] in payload_json.
type attachmentRef struct {
	ID       int    `json:"id"`
	Filename string `json:"filename"`
}

type messageReference struct {
	MessageID discord.MessageID `json:"message_id"`
	// FailIfNotExists false lets the reply through when the prompt was
	// deleted meanwhile.
	FailIfNotExists bool `json:"fail_if_not_exists"`
}

// client is the REST client bound to ctx.
func (b *Bot) client(ctx context.Context) *api.Client {
	return b.state.Client.WithContext(ctx)
}

// Started is told that an event begins to run: it removes the prompt's
// waiting mark and keeps the typing indicator alive until the returned
// function is called or the reply is handed over. Slash commands show Discord's
// own "thinking" state instead.
func (b *Bot) Started(ctx context.Context, e queue.Event) (finished func()) {
	b.adoptInteraction(e)
	b.mu.Lock()
	mk := b.marks[e.ID]
	delete(b.marks, e.ID)
	if mk != nil {
		mk.leftLocked()
	}
	b.mu.Unlock()
	if mk != nil {
		go func() {
			<-mk.placed
			b.unmark(mk)
		}()
	}
	// The intake is another process: remove its ⏳ now and again when
	// the turn ends, in case its reaction landed after the first removal.
	elsewhere := mk == nil && b.opts.Elsewhere != nil
	if elsewhere {
		go b.unmarkWaiting(e)
	}
	var t *turn
	if b.followsTurn(e) {
		t = b.beginTurn(e)
	}
	if strings.HasPrefix(e.ReplyTo, "interaction:") {
		// A slash command that ends without a reply (stopped on request)
		// must still leave Discord's "thinking" state, unless its card
		// took the response.
		return func() {
			if t != nil {
				b.Finished(e, agent.Outcome{Stopped: true})
			}
			if in := b.takeInteraction(e.ReplyTo); in != nil && !in.cardOwned.Load() {
				go b.answerNotice(in, stoppedNotice)
			}
		}
	}
	channel, err := discord.ParseSnowflake(e.ChannelID)
	if err != nil || e.Kind != queue.KindMessage || e.Source != Source {
		return func() {}
	}
	tctx, cancel := context.WithCancel(b.ctx)
	b.mu.Lock()
	b.typing[e.ID] = cancel
	b.mu.Unlock()
	go b.keepTyping(tctx, discord.ChannelID(channel))
	return func() {
		b.stopTyping(e.ID)
		if elsewhere {
			go b.unmarkWaiting(e)
		}
		if t != nil {
			// Finished normally came first; this only cleans up.
			b.Finished(e, agent.Outcome{Stopped: true})
		}
	}
}

func (b *Bot) stopTyping(event uint64) {
	b.mu.Lock()
	cancel := b.typing[event]
	delete(b.typing, event)
	b.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// keepTyping renews the typing indicator, which Discord shows for about
// ten seconds, until ctx ends.
func (b *Bot) keepTyping(ctx context.Context, channel discord.ChannelID) {
	t := time.NewTicker(b.opts.TypingInterval)
	defer t.Stop()
	for {
		if err := b.client(ctx).Typing(channel); err != nil && ctx.Err() == nil {
			b.log.Debug().Err(err).Str("channel", channel.String()).Msg("typing indicator failed")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ErrBacklog is returned by Reply when too many replies are waiting for
// Discord already (a long outage): the new one is not kept.
var ErrBacklog = errors.New("too many replies waiting for Discord; this one is not kept")

// Bounds of the replies waiting for Discord. One reply is always taken
// when none is waiting, however large.
const (
	maxPendingReplies = 500
	maxPendingBytes   = 128 << 20
)

// Reply hands an event's answer over for delivery and returns at once; it
// fails only for a bad channel id or a full backlog (ErrBacklog). The
// answer is split at Discord's limit with code blocks kept well-formed and
// capped at MaxReplyMessages (the rest attached as answer.md); the first
// message replies to the prompt, and nothing pings. A slash command's
// answer replaces its "thinking" response, with follow-ups for the rest.
//
// The channel's delivery goroutine posts replies in the order they were
// handed over and retries them while Discord fails in a way that may pass
// (5xx, network, 429 after its Retry-After) for DeliveryWindow, logging the
// reply as pending; then, or at once for any other refusal, it is dropped
// and logged with its length.
func (b *Bot) Reply(ctx context.Context, e queue.Event, text string) error {
	return b.ReplyWithFiles(ctx, e, text, nil)
}

// ReplyWithFiles is Reply with files from the agent's outbox attached to
// its last message (agent.FileReplier). The files are recorded with the
// reply, so a restart that finishes the delivery attaches them too.
func (b *Bot) ReplyWithFiles(_ context.Context, e queue.Event, text string, attached []files.Outgoing) error {
	b.stopTyping(e.ID)
	if t := b.turnOf(e.ID); t != nil {
		// The card stops changing before the answer goes out: a slash
		// command's response must not be edited by both.
		t.beforeAnswer()
	}
	channel, err := discord.ParseSnowflake(e.ChannelID)
	if err != nil {
		return fmt.Errorf("reply to event %d: invalid channel id %q", e.ID, e.ChannelID)
	}
	mention := b.doneMention(e)
	if mention.IsValid() {
		// Recorded with the mention: a restart that finishes the reply
		// splits it the same way (though its resent part pings nobody).
		text = mentioning(mention, text)
	}
	parts := withFiles(planReply(text, b.opts.MaxReplyMessages, b.opts.UploadLimit), attached)
	if len(parts) == 0 {
		return nil
	}
	var record func() error
	if log := b.opts.Deliveries; log != nil {
		paths := make([]string, len(attached))
		for i, f := range attached {
			paths[i] = f.Path
		}
		log.Handed(e.ID)
		record = func() error { return log.Replied(e.ID, text, paths) }
	}
	err = b.handRecorded(e, discord.ChannelID(channel), text, parts, record, mention)
	if err != nil && record != nil {
		// Not kept (a long Discord outage): recorded now, so that a
		// restart delivers it.
		b.recordReply(e.ID, record)
	}
	return err
}

// recordReply runs a reply's record (DeliveryLog.Replied) and reports
// whether the reply may be posted: not when another process took its
// event over.
func (b *Bot) recordReply(event uint64, record func() error) bool {
	err := record()
	switch {
	case errors.Is(err, ErrTakenOver):
		b.log.Warn().Uint64("event", event).Msg("reply not posted: another process took the event over and answers it")
		return false
	case err != nil:
		b.log.Error().Err(err).Uint64("event", event).Msg("could not record the reply before delivering it; a restart now may post it again")
	}
	return true
}

// Resume delivers a reply a previous run recorded (DeliveryLog.Replied)
// and did not finish: the messages of text from the first one not recorded
// as delivered on, with the nonces the previous run used, so a message
// Discord took just before a crash is not posted twice. A slash command's
// reply goes to its channel (the interaction's token did not survive).
func (b *Bot) Resume(e queue.Event, text string, paths []string, delivered map[int]string) error {
	channel, err := discord.ParseSnowflake(e.ChannelID)
	if err != nil {
		return fmt.Errorf("resume reply to event %d: invalid channel id %q", e.ID, e.ChannelID)
	}
	var attached []files.Outgoing
	for _, path := range paths {
		f, err := files.Taken(path)
		if err != nil {
			b.log.Warn().Uint64("event", e.ID).Err(files.WithoutPath(err)).Msg("a file of the reply is gone; the reply goes without it")
			continue
		}
		attached = append(attached, f)
	}
	parts := withFiles(planReply(text, b.opts.MaxReplyMessages, b.opts.UploadLimit), attached)
	next := 0
	for next < len(parts) {
		if _, ok := delivered[next]; !ok {
			break
		}
		next++
	}
	if next == len(parts) {
		if b.opts.Deliveries != nil {
			b.opts.Deliveries.Settled(e.ID, true)
		}
		return nil
	}
	b.log.Info().Uint64("event", e.ID).Int("messages_left", len(parts)-next).Msg("delivering a reply the previous run did not finish")
	return b.hand(e, discord.ChannelID(channel), text, parts, next)
}

// hand gives a reply to its channel's delivery goroutine, from part next.
func (b *Bot) hand(e queue.Event, channel discord.ChannelID, text string, parts []part, next int) error {
	return b.handDelivery(e, &delivery{event: e.ID, channel: channel, parts: parts, next: next, length: len(text)})
}

// handRecorded hands a new reply to the outbox, which runs record before
// posting it; its first message pings mention when that is nonzero.
func (b *Bot) handRecorded(e queue.Event, channel discord.ChannelID, text string, parts []part, record func() error, mention discord.UserID) error {
	return b.handDelivery(e, &delivery{event: e.ID, channel: channel, parts: parts, length: len(text), record: record, mention: mention})
}

func (b *Bot) handDelivery(e queue.Event, d *delivery) error {
	for _, p := range d.parts {
		d.size += p.size()
	}
	if d.in = b.takeInteraction(e.ReplyTo); d.in != nil {
		d.token = d.in.token
	} else if ref, ok := replyRef(e); ok {
		d.ref = ref
	}
	record, ok := b.out.add(d, b.deliverChannel)
	if record != nil && !b.recordReply(d.event, record) {
		d.takenOver.Store(true)
	}
	if ok && record == nil {
		// The channel's goroutine records the reply (an fsync) and posts
		// it: let it run before this one goes on, so that its record
		// joins the inbox's next sync ahead of what the turn writes next
		// (the session binding, the exchange log). Left to the scheduler,
		// it waits for this goroutine to block, which on a busy machine
		// put about 0.3-0.5 ms between the answer and its record.
		runtime.Gosched()
	}
	if !ok {
		if d.in != nil {
			go b.answerNotice(d.in, backlogNotice)
		}
		return fmt.Errorf("reply to event %d (%d bytes): %w", e.ID, d.length, ErrBacklog)
	}
	return nil
}

// backlogNotice answers a slash command whose reply could not be kept.
const backlogNotice = "The answer is ready, but Discord has been refusing messages for a while and too many answers are waiting already; it could not be kept."

// delivery is one reply on its way to Discord.
type delivery struct {
	event   uint64
	channel discord.ChannelID
	// ref is the prompt the first message answers; zero for none.
	ref discord.MessageID
	// mention is the author the first message pings (doneMention); zero
	// for none.
	mention discord.UserID
	// in is the slash command the reply answers; nil once the reply goes
	// to the channel instead.
	in *interaction
	// token is the interaction's token, kept out of logs.
	token string
	parts []part
	// next is the first part not delivered yet.
	next int
	// record, if set, records the reply before its first message is
	// posted (DeliveryLog.Replied); it is cleared once run.
	record func() error
	// takenOver is set when the record found the event answered by
	// another process: nothing is posted.
	takenOver atomic.Bool
	// length is the answer's length in bytes; size what parts hold.
	length, size int
}

// outbox holds the replies waiting for Discord, in one FIFO per channel,
// each served by one goroutine (deliverChannel) while it is not empty.
// Bounded by maxPendingReplies and maxPendingBytes: add refuses beyond.
type outbox struct {
	// hurry is closed by Flush: pending replies are retried at the first
	// backoff rather than the grown one. Set once, never replaced.
	hurry chan struct{}

	mu    sync.Mutex // guards the fields below
	lanes map[discord.ChannelID][]*delivery
	// pending and bytes count the replies in lanes, the head included.
	pending, bytes int
	// idle is closed while nothing is pending.
	idle    chan struct{}
	hurried bool
	// afters run once the reply of their event is delivered or dropped.
	afters map[uint64][]func()
}

func newOutbox() outbox {
	idle := make(chan struct{})
	close(idle)
	return outbox{hurry: make(chan struct{}), lanes: map[discord.ChannelID][]*delivery{}, idle: idle}
}

// add queues d behind its channel's replies, starting the channel's
// delivery goroutine if there is none. It reports false when full.
func (o *outbox) add(d *delivery, serve func(*delivery)) (queuedRecord func() error, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.pending > 0 && (o.pending >= maxPendingReplies || o.bytes+d.size > maxPendingBytes) {
		return nil, false
	}
	if o.pending == 0 {
		o.idle = make(chan struct{})
	}
	o.pending++
	o.bytes += d.size
	q := o.lanes[d.channel]
	if len(q) > 0 {
		// It waits behind another reply, maybe for long (Discord
		// failing): its record is the caller's to run now, so that a
		// restart meanwhile finds it.
		queuedRecord, d.record = d.record, nil
	}
	o.lanes[d.channel] = append(q, d)
	if len(q) == 0 {
		go serve(d)
	}
	return queuedRecord, true
}

// done removes the channel's head d and returns the next reply, or nil
// when the channel has none left (its goroutine then ends).
func (o *outbox) done(d *delivery) *delivery {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pending--
	o.bytes -= d.size
	if o.pending == 0 {
		close(o.idle)
	}
	q := o.lanes[d.channel][1:]
	if len(q) == 0 {
		delete(o.lanes, d.channel)
		return nil
	}
	o.lanes[d.channel] = q
	return q[0]
}

// after runs f once event's reply has left the outbox; false when no
// reply of event is in it.
func (o *outbox) after(event uint64, f func()) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, q := range o.lanes {
		for _, d := range q {
			if d.event == event {
				if o.afters == nil {
					o.afters = map[uint64][]func(){}
				}
				o.afters[event] = append(o.afters[event], f)
				return true
			}
		}
	}
	return false
}

// takeAfters removes and returns event's hooks.
func (o *outbox) takeAfters(event uint64) []func() {
	o.mu.Lock()
	defer o.mu.Unlock()
	fs := o.afters[event]
	delete(o.afters, event)
	return fs
}

// wait blocks until nothing is pending or ctx ends.
func (o *outbox) wait(ctx context.Context) error {
	for {
		o.mu.Lock()
		idle, n := o.idle, o.pending
		o.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-idle:
		case <-ctx.Done():
			return fmt.Errorf("%d replies not delivered yet: %w", n, ctx.Err())
		}
	}
}

// Pending is how many replies are waiting for Discord.
func (b *Bot) Pending() int {
	b.out.mu.Lock()
	defer b.out.mu.Unlock()
	return b.out.pending
}

// Flush waits, bounded by ctx, until every reply handed over has been
// delivered or dropped. It is for shutdown: from then on replies still
// failing are retried at the first backoff (DeliveryBackoff), not the grown
// one, so the short time left is used. Replies still pending when ctx ends
// are dropped by Close.
func (b *Bot) Flush(ctx context.Context) error {
	b.out.mu.Lock()
	if !b.out.hurried {
		b.out.hurried = true
		close(b.out.hurry)
	}
	b.out.mu.Unlock()
	return b.out.wait(ctx)
}

// deliverChannel delivers d and the replies queued behind it in its
// channel, one at a time, in order.
func (b *Bot) deliverChannel(d *delivery) {
	for d != nil {
		b.deliver(d)
		for _, f := range b.out.takeAfters(d.event) {
			f()
		}
		d = b.out.done(d)
	}
}

// deliver posts one reply, retrying while Discord fails in a way that may
// pass, for at most DeliveryWindow. The parts already posted are not posted
// again; each part's nonce makes a retry after an ambiguous failure safe.
func (b *Bot) deliver(d *delivery) {
	if record := d.record; record != nil {
		d.record = nil
		if !b.recordReply(d.event, record) {
			return
		}
	}
	if d.takenOver.Load() {
		return
	}
	log := b.log.With().Str("channel", d.channel.String()).Uint64("event", d.event).Int("length", d.length).Logger()
	start := b.clock.Now()
	deadline := start.Add(b.opts.DeliveryWindow)
	for attempt := 1; ; attempt++ {
		if b.ctx.Err() != nil {
			log.Error().Int("attempts", attempt-1).Int("messages_left", len(d.parts)-d.next).
				Msg("reply dropped: the gateway stopped before Discord took it")
			return
		}
		err := b.attempt(b.ctx, d, log)
		if err == nil {
			if attempt > 1 {
				log.Info().Int("attempts", attempt).Int64("after_ms", b.clock.Since(start).Milliseconds()).Msg("pending reply delivered")
			}
			b.settled(d, true)
			return
		}
		if b.ctx.Err() != nil {
			continue
		}
		wait, ok := b.retryDelay(err, attempt)
		if !ok {
			log.Error().Str("error", scrub(err, d.token)).Int("messages_left", len(d.parts)-d.next).
				Msg("reply not delivered: Discord refused it")
			b.settled(d, false)
			return
		}
		now := b.clock.Now()
		if !now.Before(deadline) {
			log.Error().Str("error", scrub(err, d.token)).Int("attempts", attempt).Int("messages_left", len(d.parts)-d.next).
				Int64("window_ms", b.opts.DeliveryWindow.Milliseconds()).Msg("reply dropped: Discord did not take it in time")
			b.settled(d, false)
			return
		}
		wait = min(wait, deadline.Sub(now))
		log.Warn().Str("error", scrub(err, d.token)).Int("attempt", attempt).Int64("retry_in_ms", wait.Milliseconds()).
			Time("next_retry", now.Add(wait)).Bool("pending", true).
			Msg("reply not delivered yet: Discord unavailable, retrying")
		b.waitRetry(wait, !rateLimited(err), log)
	}
}

func (b *Bot) settled(d *delivery, delivered bool) {
	if b.opts.Deliveries != nil {
		b.opts.Deliveries.Settled(d.event, delivered)
	}
}

// posted records that part n of d is on Discord as message id.
func (b *Bot) posted(d *delivery, n int, id discord.MessageID) {
	if b.opts.Deliveries != nil {
		b.opts.Deliveries.Delivered(d.event, n, id.String())
	}
}

// waitRetry waits d, or the first backoff once Flush has begun when
// hurryable (a 429's Retry-After is always honoured), or until Close.
func (b *Bot) waitRetry(d time.Duration, hurryable bool, log zerolog.Logger) {
	t := b.clock.NewTimer(d)
	defer t.Stop()
	end := b.clock.Now().Add(d)
	var hurry <-chan struct{}
	if hurryable {
		hurry = b.out.hurry
	}
	for {
		select {
		case <-t.Chan():
			return
		case <-hurry:
			hurry = nil
			if end.Sub(b.clock.Now()) > b.opts.DeliveryBackoff {
				t.Reset(b.opts.DeliveryBackoff)
				log.Debug().Int64("retry_in_ms", b.opts.DeliveryBackoff.Milliseconds()).Msg("shutting down: retrying the pending reply sooner")
			}
		case <-b.ctx.Done():
			return
		}
	}
}

// retryDelay is how long to wait before the next attempt after err, and
// false when err will not pass by waiting.
func (b *Bot) retryDelay(err error, attempt int) (time.Duration, bool) {
	var herr *httputil.HTTPError
	if errors.As(err, &herr) {
		switch {
		case herr.Status == 429:
			if d, ok := retryAfterBody(herr.Body); ok {
				return d, true
			}
			return b.backoff(attempt), true
		case herr.Status >= 500:
			return b.backoff(attempt), true
		}
		return 0, false
	}
	var rerr httputil.RequestError
	if errors.As(err, &rerr) {
		return b.backoff(attempt), true
	}
	return 0, false
}

// backoff is the wait after the attempt-th failure: DeliveryBackoff,
// doubled each time, at most DeliveryMaxBackoff.
func (b *Bot) backoff(attempt int) time.Duration {
	d := b.opts.DeliveryBackoff
	for i := 1; i < attempt && d < b.opts.DeliveryMaxBackoff; i++ {
		d *= 2
	}
	return min(d, b.opts.DeliveryMaxBackoff)
}

func rateLimited(err error) bool {
	var herr *httputil.HTTPError
	return errors.As(err, &herr) && herr.Status == 429
}

// attempt posts the parts of d not delivered yet: through the slash
// command's webhook while that works, else in the channel.
func (b *Bot) attempt(ctx context.Context, d *delivery, log zerolog.Logger) error {
	if d.in != nil {
		if err := b.answer(ctx, d, log); err != nil {
			return err
		}
	}
	for d.next < len(d.parts) {
		var ref discord.MessageID
		var mention discord.UserID
		if d.next == 0 {
			ref, mention = d.ref, d.mention
		}
		id, err := b.postMentioning(ctx, d.channel, ref, d.parts[d.next], b.nonce(d.event, d.next), mention)
		if err != nil {
			return fmt.Errorf("message %d of %d: %w", d.next+1, len(d.parts), err)
		}
		b.posted(d, d.next, id)
		d.next++
	}
	return nil
}

// answer edits a slash command's deferred response with the first part and
// posts the others as follow-ups. An error is returned only when it may
// pass; on any other refusal, or once the interaction expired, d.in is
// cleared and the rest goes to the channel.
func (b *Bot) answer(ctx context.Context, d *delivery, log zerolog.Logger) error {
	in := d.in
	select {
	case <-in.acked:
	case <-ctx.Done():
		return ctx.Err()
	}
	for d.next < len(d.parts) {
		if !b.clock.Now().Before(in.expires) {
			log.Info().Msg("the slash command can no longer be answered; posting the answer in the channel")
			d.in = nil
			return nil
		}
		var mention discord.UserID
		if d.next == 0 {
			mention = d.mention
		}
		id, err := b.webhookSendMentioning(ctx, in, d.next == 0 && !in.cardOwned.Load(), d.parts[d.next], mention)
		if err != nil {
			if _, ok := b.retryDelay(err, 1); ok {
				return fmt.Errorf("slash command answer %d of %d: %w", d.next+1, len(d.parts), err)
			}
			log.Warn().Str("error", scrub(err, in.token)).Msg("slash command answer refused; posting in the channel")
			d.in = nil
			return nil
		}
		b.posted(d, d.next, id)
		d.next++
	}
	return nil
}

// answerNotice replaces a slash command's "thinking" state with a short
// notice, once.
func (b *Bot) answerNotice(in *interaction, text string) {
	select {
	case <-in.acked:
	case <-b.ctx.Done():
		return
	}
	if !b.clock.Now().Before(in.expires) {
		return
	}
	if _, err := b.webhookSend(b.ctx, in, true, part{content: text}); err != nil {
		b.log.Warn().Str("error", scrub(err, in.token)).Str("channel", in.channel.String()).
			Int("length", len(text)).Msg("slash command notice not delivered")
	}
}

func (b *Bot) takeInteraction(key string) *interaction {
	if !strings.HasPrefix(key, "interaction:") {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	in := b.interactions[key]
	delete(b.interactions, key)
	return in
}

// post sends one message in a channel with an enforced nonce and no pings,
// its file (if any) uploaded with it, and returns the message's id.
func (b *Bot) post(ctx context.Context, channel discord.ChannelID, ref discord.MessageID, p part, nonce string) (discord.MessageID, error) {
	return b.postMentioning(ctx, channel, ref, p, nonce, 0)
}

// postMentioning is post that pings mention too, when nonzero (a done
// notification).
func (b *Bot) postMentioning(ctx context.Context, channel discord.ChannelID, ref discord.MessageID, p part, nonce string, mention discord.UserID) (discord.MessageID, error) {
	p = b.loaded(p)
	body := messageCreate{
		Content:         p.content,
		Nonce:           nonce,
		EnforceNonce:    true,
		AllowedMentions: replyMentions(ref.IsValid(), mention),
		Attachments:     attachments(p.files),
	}
	if ref.IsValid() {
		body.MessageReference = &messageReference{MessageID: ref}
	}
	opts, err := withBody(body, p.files)
	if err != nil {
		return 0, err
	}
	var msg discord.Message
	err = b.client(ctx).RequestJSON(&msg, "POST", api.EndpointChannels+channel.String()+"/messages", opts...)
	return msg.ID, err
}

// webhookSend edits an interaction's original response (original) or
// posts a follow-up, with no pings, and returns the message's id.
func (b *Bot) webhookSend(ctx context.Context, in *interaction, original bool, p part) (discord.MessageID, error) {
	return b.webhookSendMentioning(ctx, in, original, p, 0)
}

// webhookSendMentioning is webhookSend that pings mention too, when
// nonzero (a done notification).
func (b *Bot) webhookSendMentioning(ctx context.Context, in *interaction, original bool, p part, mention discord.UserID) (discord.MessageID, error) {
	p = b.loaded(p)
	body := webhookMessage{Content: p.content, AllowedMentions: replyMentions(false, mention), Attachments: attachments(p.files)}
	opts, err := withBody(body, p.files)
	if err != nil {
		return 0, err
	}
	method, url := "POST", api.EndpointWebhooks+in.app.String()+"/"+in.token
	if original {
		method, url = "PATCH", url+"/messages/@original"
	}
	var msg discord.Message
	err = b.client(ctx).RequestJSON(&msg, method, url, opts...)
	return msg.ID, err
}

func attachments(fs []file) []attachmentRef {
	refs := make([]attachmentRef, len(fs))
	for i, f := range fs {
		refs[i] = attachmentRef{ID: i, Filename: f.name}
	}
	return refs
}

// withBody encodes a message: JSON, or with files multipart/form-data
// with payload_json and files[n], as Discord takes uploads. A file of the
// agent's outbox is read now, checked again (files.Read).
func withBody(payload any, fs []file) ([]httputil.RequestOption, error) {
	if len(fs) == 0 {
		return []httputil.RequestOption{httputil.WithJSONBody(payload)}, nil
	}
	pj, err := json.Marshal(payload)
	if err != nil {
		return nil, fmt.Errorf("encode message: %w", err)
	}
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="payload_json"`)
	h.Set("Content-Type", "application/json")
	w, err := mw.CreatePart(h)
	if err == nil {
		_, err = w.Write(pj)
	}
	for i, f := range fs {
		if err != nil {
			break
		}
		h = textproto.MIMEHeader{}
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="files[%d]"; filename=%q`, i, f.name))
		h.Set("Content-Type", f.contentType())
		if w, err = mw.CreatePart(h); err == nil {
			_, err = w.Write(f.data)
		}
	}
	if err == nil {
		err = mw.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("encode upload: %w", err)
	}
	return []httputil.RequestOption{
		httputil.WithContentType(mw.FormDataContentType()),
		httputil.WithBody(io.NopCloser(&buf)),
	}, nil
}

// loaded reads the outbox files of a message just before it is posted,
// checking each again (opts.Files, as the agent could read it, never
// through a link): one the agent changed, removed or turned into a link
// since is left out, and the message says so.
func (b *Bot) loaded(p part) part {
	guard, log := b.opts.Files, b.log
	if guard == nil {
		guard = &files.Guard{}
	}
	var kept []file
	var lost []string
	for _, f := range p.files {
		if f.out != nil && f.data == nil {
			data, err := guard.Read(f.out.Path, f.out.Root, f.out.Size)
			if err != nil {
				log.Warn().Str("file", f.name).Err(files.WithoutPath(err)).Msg("outbox file left out of the reply")
				lost = append(lost, f.name)
				continue
			}
			f.data = data
		}
		kept = append(kept, f)
	}
	p.files = kept
	if note := "_(Could not attach " + strings.Join(lost, ", ") + ": changed or removed before it was sent.)_"; len(lost) > 0 &&
		utf8.RuneCountInString(p.content)+utf8.RuneCountInString(note) < reply.DiscordLimit {
		p.content = strings.TrimSpace(p.content + "\n" + note)
	}
	return p
}

// scrub removes an interaction token (it appears in webhook URLs) from an
// error before it is logged.
func scrub(err error, token string) string {
	if token == "" {
		return err.Error()
	}
	return strings.ReplaceAll(err.Error(), token, "<token>")
}
