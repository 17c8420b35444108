package discord

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/diamondburned/arikawa/v3/api"
	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/diamondburned/arikawa/v3/gateway"
	"github.com/diamondburned/arikawa/v3/utils/httputil"
	"github.com/diamondburned/arikawa/v3/utils/json/option"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/agent"
	"github.com/agentgateway/gateway/internal/card"
	"github.com/agentgateway/gateway/internal/limit"
	"github.com/agentgateway/gateway/internal/queue"
)

// Stop controls on a card.
const (
	stopEmoji        = "🛑"
	stopButton       = "stop:"
	stopAllButton    = "stopall:"
	notYourTurn      = "Only the person who asked, or a user in ALLOWED_USER_IDS, can stop this."
	stoppedNotice    = "Stopped before it answered."
	maxPreviewMemory = 16 << 10 // bytes of streamed text a card keeps
)

// CardChunk is the DeliveryLog chunk under which a turn's card message is
// recorded, so that a restart can close a card a killed gateway left
// saying "Working" (StaleCardNotice).
const CardChunk = -1

// StaleCardNotice is what a card left by a gateway that did not survive
// its turn becomes at the next start.
const StaleCardNotice = "⏸️ Interrupted: the gateway restarted during this turn; see below for what happens to the prompt."

// turn is one running event's card: the message that shows what the agent
// does, its Stop controls, and the receipt it becomes.
type turn struct {
	b       *Bot
	e       queue.Event
	channel discord.ChannelID
	// prompt is the message the turn answers; zero for a slash command.
	prompt discord.MessageID
	// promptIn is the channel of the prompt message: the channel a
	// thread was opened in, for the thread's opening prompt.
	promptIn discord.ChannelID
	// in is the slash command whose response holds the card.
	in      *interaction
	started time.Time
	// show asks for the card before CardDelay (the first tool call).
	show chan struct{}
	// quit ends the card's goroutine; stopped is closed when it has.
	quit    chan struct{}
	stopped chan struct{}
	// over is closed when the event has finished, processes and all.
	over chan struct{}

	mu       sync.Mutex // guards the fields below
	state    card.State
	workDir  string
	cardID   discord.MessageID
	onAnswer bool // the card is the slash command's response
	pacer    *card.Pacer
	halted   bool
	stopping bool
	// waiting is what the turn waits for while a usage limit lasts (nil
	// when it does not wait); cancelledAt is the reset of the limit it
	// waited for when it was stopped waiting.
	waiting     *limit.Notice
	cancelledAt time.Time
}

// followsTurn reports whether e is a turn the bot follows: a prompt from
// Discord. It gets a card unless TurnCard is "off"; either way it can be
// stopped and its stop confirmed.
func (b *Bot) followsTurn(e queue.Event) bool {
	return e.Source == Source && e.Kind == queue.KindMessage
}

// beginTurn starts e's card: it appears after CardDelay, or at the first
// tool call, whichever comes first.
func (b *Bot) beginTurn(e queue.Event) *turn {
	ch, err := discord.ParseSnowflake(e.ChannelID)
	if err != nil {
		return nil
	}
	t := &turn{
		b: b, e: e, channel: discord.ChannelID(ch), started: b.clock.Now(),
		show: make(chan struct{}, 1), quit: make(chan struct{}), stopped: make(chan struct{}), over: make(chan struct{}),
	}
	if id, err := discord.ParseSnowflake(e.ReplyTo); err == nil {
		t.prompt, t.promptIn = discord.MessageID(id), promptChannel(e)
	}
	b.mu.Lock()
	t.in = b.interactions[e.ReplyTo]
	b.turns[e.ID] = t
	b.mu.Unlock()
	if b.opts.CardWarning != nil {
		t.state.Warning = b.opts.CardWarning(e)
	}
	t.quoteHeard()
	go t.run()
	return t
}

// turnOf returns event id's turn, nil when it has none (any more).
func (b *Bot) turnOf(id uint64) *turn {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.turns[id]
}

func (t *turn) run() {
	defer close(t.stopped)
	if t.b.opts.TurnCard == "off" {
		<-t.quit
		return
	}
	delay := t.b.clock.NewTimer(t.b.opts.CardDelay)
	defer delay.Stop()
	select {
	case <-delay.Chan():
	case <-t.show:
	case <-t.quit:
		return
	}
	if !t.create() {
		return
	}
	tick := t.b.clock.NewTicker(t.b.opts.CardEvery)
	defer tick.Stop()
	for {
		select {
		case <-tick.Chan():
			t.refresh()
		case <-t.quit:
			return
		}
	}
}

// create posts the card: a reply to the prompt, or the slash command's
// response. It reports false when there is no card.
func (t *turn) create() bool {
	t.mu.Lock()
	t.state.Elapsed = t.b.clock.Since(t.started)
	text := card.Render(t.shownLocked())
	buttons := t.buttonsLocked()
	t.mu.Unlock()
	row, _ := buttonRow(text, buttons)
	var id discord.MessageID
	var err error
	if t.in != nil {
		select {
		case <-t.in.acked:
		case <-t.quit:
			return false
		}
		id, err = t.editAnswer(t.b.ctx, text, &row)
		t.mu.Lock()
		t.onAnswer = err == nil
		t.mu.Unlock()
		t.in.cardOwned.Store(err == nil)
	} else {
		body := messageCreate{
			Content: text, Nonce: fmt.Sprintf("%sc%d", t.b.noncePrefix, t.e.ID), EnforceNonce: true,
			AllowedMentions: noPings(false), Components: row,
		}
		if ref, ok := replyRef(t.e); ok {
			body.MessageReference = &messageReference{MessageID: ref}
		}
		var msg discord.Message
		err = t.b.client(t.b.ctx).RequestJSON(&msg, "POST", api.EndpointChannels+t.channel.String()+"/messages", httputil.WithJSONBody(body))
		id = msg.ID
		if err == nil && msg.Content != text {
			// Discord handed back the card an earlier run posted under
			// the same nonce (a rerun after a restart), with what that
			// run left on it: the pacer must know, or a card whose text
			// does not change again (a wait for a usage limit) would keep
			// showing the old run's end.
			text = msg.Content
		}
	}
	if err != nil {
		t.b.log.Warn().Err(withoutToken(err, t.in)).Uint64("event", t.e.ID).Msg("could not post the turn card; the turn goes on without it")
		return false
	}
	if t.in == nil && t.b.opts.Deliveries != nil {
		t.b.opts.Deliveries.Delivered(t.e.ID, CardChunk, id.String())
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cardID = id
	// The first frame went with the card; the pacer waits an interval
	// before the next one.
	t.pacer = card.NewPacer(t.b.clock, t.b.opts.CardEvery, t.send, text)
	return true
}

func withoutToken(err error, in *interaction) error {
	if in == nil {
		return err
	}
	return errors.New(scrub(err, in.token))
}

func stopButtons(event uint64) []Button {
	id := strconv.FormatUint(event, 10)
	return []Button{
		{ID: stopButton + id, Label: "Stop", Style: ButtonDanger},
		{ID: stopAllButton + id, Label: "Stop and drop queued", Style: ButtonSecondary},
	}
}

// send is the pacer's Sender: one edit of the card, its buttons kept while
// the turn can still be stopped.
func (t *turn) send(ctx context.Context, frame string) (time.Duration, error) {
	t.mu.Lock()
	id, onAnswer, stopping := t.cardID, t.onAnswer, t.stopping
	buttons := t.buttonsLocked()
	t.mu.Unlock()
	var row discord.ContainerComponents
	if !stopping {
		row, _ = buttonRow(frame, buttons)
	} else {
		row = discord.ContainerComponents{}
	}
	var err error
	if onAnswer {
		_, err = t.editAnswer(ctx, frame, &row)
	} else {
		_, err = t.b.client(ctx).EditMessageComplex(t.channel, id, api.EditMessageData{
			Content: option.NewNullableString(frame), Components: &row,
			AllowedMentions: &api.AllowedMentions{Parse: []api.AllowedMentionType{}},
		})
	}
	if err != nil {
		var herr *httputil.HTTPError
		if errors.As(err, &herr) && herr.Status == 429 {
			if d, ok := retryAfterBody(herr.Body); ok {
				return d, err
			}
			return t.b.opts.CardEvery, err
		}
		t.b.log.Debug().Err(withoutToken(err, t.in)).Uint64("event", t.e.ID).Msg("turn card edit failed")
	}
	return 0, err
}

// editAnswer edits the slash command's response.
func (t *turn) editAnswer(ctx context.Context, text string, row *discord.ContainerComponents) (discord.MessageID, error) {
	body := struct {
		Content         string                       `json:"content"`
		AllowedMentions *api.AllowedMentions         `json:"allowed_mentions"`
		Components      *discord.ContainerComponents `json:"components,omitempty"`
	}{text, noPings(false), row}
	var msg discord.Message
	err := t.b.client(ctx).RequestJSON(&msg, "PATCH", api.EndpointWebhooks+t.in.app.String()+"/"+t.in.token+"/messages/@original", httputil.WithJSONBody(body))
	return msg.ID, err
}

// refresh renders the card anew (the clock moves even when nothing else
// does) and hands the frame to the pacer.
func (t *turn) refresh() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.pacer == nil || t.halted {
		return
	}
	t.state.Elapsed = t.b.clock.Since(t.started)
	t.pacer.Update(card.Render(t.shownLocked()))
}

// observe applies one live event of the CLI to the card.
func (t *turn) observe(ev backends.Event) {
	t.mu.Lock()
	first := false
	switch ev.Kind {
	case backends.EventInit:
		if ev.Model != "" {
			t.state.Model = ev.Model
		}
	case backends.EventThinking:
		t.state.Thinking, t.state.Retry = true, "" // the model API answered
	case backends.EventText:
		t.state.Thinking, t.state.Retry = false, ""
		t.state.Text += ev.Text
		if n := len(t.state.Text); n > maxPreviewMemory {
			t.state.Text = t.state.Text[n-maxPreviewMemory:]
		}
	case backends.EventToolUse:
		if ev.Tool != nil {
			t.state.Thinking, t.state.Retry = false, ""
			t.state.Tools = append(t.state.Tools, card.Tool{ID: ev.Tool.ID, Name: ev.Tool.Name,
				Summary: card.Summarize(ev.Tool.Name, ev.Tool.Input, t.workDir)})
			first = len(t.state.Tools) == 1
		}
	case backends.EventToolResult:
		if ev.Tool != nil {
			for i := len(t.state.Tools) - 1; i >= 0; i-- {
				if tl := &t.state.Tools[i]; tl.ID == ev.Tool.ID && !tl.Done {
					tl.Done, tl.Failed = true, ev.Tool.IsError
					break
				}
			}
		}
	case backends.EventRetry:
		t.state.Retry = ev.RetryStatus()
	}
	t.mu.Unlock()
	if first {
		select {
		case t.show <- struct{}{}:
		default:
		}
	}
	if ev.Kind != backends.EventText {
		// Streamed text waits for the next tick: rendering every delta
		// of a fast stream would cost more than the edit it feeds.
		t.refresh()
	}
}

// freeze stops the card changing: no frame is rendered or sent after it,
// though the card's post or an edit already on its way to Discord goes on.
// Safe to call more than once.
func (t *turn) freeze() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.halted {
		t.halted = true
		close(t.quit)
	}
}

// beforeAnswer stops the card changing before the turn's answer goes out.
// A slash command's card is its response, which the answer edits: the
// card's post or edit in flight must land first. A card of its own (a
// message in the channel) finishes it beside the answer, which is not
// held for a round trip to Discord; Finished waits for it before the card
// becomes the receipt.
func (t *turn) beforeAnswer() {
	if t.in != nil {
		t.halt()
		return
	}
	t.freeze()
}

// halt stops the card's goroutine and its pacer and waits for them; the
// card keeps its last frame. Safe to call more than once, and at once.
func (t *turn) halt() {
	t.freeze()
	<-t.stopped
	t.mu.Lock()
	p := t.pacer
	t.mu.Unlock()
	if p != nil {
		ctx, cancel := context.WithTimeout(t.b.ctx, 5*time.Second)
		p.Close(ctx)
		cancel()
	}
}

// waitingFor shows on the card that the turn waits for an approval of
// tool ("" when it no longer does).
func (t *turn) waitingFor(tool string) {
	t.mu.Lock()
	if tool == "" {
		t.state.Notice = ""
	} else {
		t.state.Notice = "Waiting for your approval of " + tool + " (below)"
	}
	t.mu.Unlock()
	select {
	case t.show <- struct{}{}:
	default:
	}
	t.refresh()
}

// RunStarted implements agent.RunObserver: the card learns the directory
// and model of the run.
func (b *Bot) RunStarted(e queue.Event, info agent.RunInfo) {
	if t := b.turnOf(e.ID); t != nil {
		t.mu.Lock()
		t.workDir = info.WorkDir
		if t.state.Model == "" {
			t.state.Model = info.Model
		}
		t.state.Sandbox = info.Sandbox
		t.mu.Unlock()
	}
}

// Observe implements agent.Observer.
func (b *Bot) Observe(e queue.Event, ev backends.Event) {
	if t := b.turnOf(e.ID); t != nil {
		t.observe(ev)
	}
}

// Finished implements agent.Finisher: the card becomes its receipt (or
// goes), now that no process of the turn is left.
func (b *Bot) Finished(e queue.Event, out agent.Outcome) {
	t := b.turnOf(e.ID)
	if t == nil {
		return
	}
	t.halt()
	b.mu.Lock()
	delete(b.turns, e.ID)
	b.mu.Unlock()
	defer close(t.over)
	t.mu.Lock()
	id, onAnswer := t.cardID, t.onAnswer
	st := t.state
	cancelledAt := t.cancelledAt
	st.Elapsed = b.clock.Since(t.started)
	t.mu.Unlock()
	if !id.IsValid() {
		return
	}
	r := card.Receipt{Phase: card.Finished, Tools: len(st.Tools), Elapsed: st.Elapsed, CostUSD: out.Result.CostUSD, Estimate: out.Result.CostEstimated}
	var text string
	switch {
	case out.Stopped && !cancelledAt.IsZero():
		text = card.LimitCancelled(cancelledAt, "")
	case out.Stopped:
		r.Phase = card.Stopped
		if out.Result.SessionCostUSD == 0 && out.Result.CostUSD == 0 {
			r.CostUSD = -1 // killed before it could say
		}
		// What the agent had shown stays under the receipt.
		text = card.Render(card.State{Header: r.String(), Text: st.Text, Tools: st.Tools, Phase: card.Stopped})
	case out.Interrupted:
		// A shutdown that did not wait: the prompt stays in the inbox and
		// runs again at the next start, with a card of its own.
		text = "⏸️ Interrupted by a gateway restart after " + card.Duration(st.Elapsed) + "; this prompt runs again when the gateway is back."
	case out.Err != nil:
		r.Phase = card.Failed
		if out.Result.SessionCostUSD == 0 && out.Result.CostUSD == 0 {
			r.CostUSD = -1
		}
		text = r.String()
	default:
		if out.Result.SessionCostUSD == 0 && out.Result.CostUSD == 0 {
			r.CostUSD = -1 // the CLI reports no cost
		}
		r.ContextPercent, _ = backends.ContextPercent(out.Result)
		text = r.String()
	}
	text = card.WithHeard(text, st.Heard)
	if b.opts.TurnCard == "delete" && !out.Stopped {
		b.afterReply(e.ID, func() { t.remove(id, onAnswer) })
		return
	}
	t.final(id, onAnswer, text)
}

// final edits the card a last time, without buttons. It does not depend
// on the connection's context: a card must not be left "working" by a
// shutdown.
func (t *turn) final(id discord.MessageID, onAnswer bool, text string) {
	none := discord.ContainerComponents{}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var err error
	if onAnswer {
		_, err = t.editAnswer(ctx, text, &none)
	} else {
		_, err = t.b.client(ctx).EditMessageComplex(t.channel, id, api.EditMessageData{
			Content: option.NewNullableString(text), Components: &none,
			AllowedMentions: &api.AllowedMentions{Parse: []api.AllowedMentionType{}},
		})
	}
	if err != nil {
		t.b.log.Warn().Err(withoutToken(err, t.in)).Uint64("event", t.e.ID).Msg("could not turn the card into its receipt")
	}
}

// remove deletes the card (TURN_CARD=delete).
func (t *turn) remove(id discord.MessageID, onAnswer bool) {
	ctx, cancel := context.WithTimeout(t.b.ctx, 30*time.Second)
	defer cancel()
	var err error
	if onAnswer {
		err = t.b.client(ctx).FastRequest("DELETE", api.EndpointWebhooks+t.in.app.String()+"/"+t.in.token+"/messages/@original")
	} else {
		err = t.b.client(ctx).DeleteMessage(t.channel, id, "")
	}
	if err != nil {
		t.b.log.Debug().Err(withoutToken(err, t.in)).Uint64("event", t.e.ID).Msg("could not delete the turn card")
	}
}

// afterReply runs f once the event's reply has been delivered, or at once
// when it has none on its way.
func (b *Bot) afterReply(event uint64, f func()) {
	if !b.out.after(event, f) {
		go f()
	}
}

// mayStop reports whether user may stop e: its author, or a user on the
// allowlist when there is one. A scheduled event has no author: whoever
// may use the bot in the channel may stop it.
func (b *Bot) mayStop(user string, e queue.Event) bool {
	return e.UserID == "" || user == e.UserID || b.opts.Access.ListedUser(user)
}

// stopTurn stops t's run, once: the card says "Stopping…" at once, and
// its receipt says "Stopped" when no process of the turn is left. With
// all, the prompts waiting in the channel are dropped too and their
// authors told. It reports false when t was over or stopping already.
func (b *Bot) stopTurn(t *turn, by string, all bool) bool {
	t.mu.Lock()
	if t.halted || t.stopping {
		t.mu.Unlock()
		return false
	}
	t.stopping = true
	t.state.Phase = card.Stopping
	t.mu.Unlock()
	t.refresh()
	b.log.Info().Uint64("event", t.e.ID).Str("channel", t.e.ChannelID).Str("by", by).Bool("drop_waiting", all).Msg("stop requested")
	if all {
		b.dropWaiting(t.channel, by)
		return true
	}
	b.intake.Cancel(t.e.ChannelID, t.e.ID)
	return true
}

// dropWaiting stops the channel's lane, on by's request: the running event
// and every waiting one, whose authors are told.
func (b *Bot) dropWaiting(channel discord.ChannelID, by string) (running bool, prompts int) {
	b.mu.Lock()
	running, dropped := b.intake.Stop(channel.String())
	var marks []*mark
	var pending []*interaction
	var notices []discord.MessageID
	for _, e := range dropped {
		if mk := b.marks[e.ID]; mk != nil {
			marks = append(marks, mk)
			delete(b.marks, e.ID)
			mk.leftLocked()
		}
		if in := b.interactions[e.ReplyTo]; in != nil {
			pending = append(pending, in)
			delete(b.interactions, e.ReplyTo)
		} else if e.Kind == queue.KindMessage {
			notices = append(notices, parseMessage(e.ReplyTo))
		}
		if e.Kind == queue.KindMessage {
			prompts++
		}
	}
	b.mu.Unlock()
	b.log.Info().Str("channel", channel.String()).Str("by", by).Bool("running", running).Int("dropped", len(dropped)).Msg("channel's waiting prompts dropped on request")
	go func() {
		for _, mk := range marks {
			<-mk.placed
			b.unmark(mk)
		}
		for _, in := range pending {
			b.answerNotice(in, droppedNotice)
		}
		for _, m := range notices {
			if m.IsValid() {
				b.notice(channel, m, droppedNotice)
			}
		}
	}()
	return running, prompts
}

// DroppedNotice tells the author of a waiting prompt that it was dropped.
const DroppedNotice = droppedNotice

const droppedNotice = "Not answered: the work in this channel was stopped and the prompts waiting here were dropped. Send it again if you still need it."

// onStopPress handles the card's Stop buttons.
func (b *Bot) onStopPress(_ context.Context, p Press) PressAnswer {
	all := strings.HasPrefix(p.ButtonID, stopAllButton)
	id, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimPrefix(p.ButtonID, stopAllButton), stopButton), 10, 64)
	t := b.turnOf(id)
	if err != nil || t == nil || t.channel.String() != p.ChannelID {
		return PressAnswer{} // a late tap: the turn is over
	}
	if !b.mayStop(p.UserID, t.e) && !t.cancellableBy(p) {
		return PressAnswer{Notice: notYourTurn}
	}
	b.stopTurn(t, p.UserID, all)
	return PressAnswer{}
}

// onReaction stops a turn when its author (or an allowlisted user) reacts
// with 🛑 to the prompt or to the card.
func (b *Bot) onReaction(ev *gateway.MessageReactionAddEvent) {
	if ev.Emoji.ID.IsValid() || ev.UserID == b.me() || (ev.Member != nil && ev.Member.User.Bot) {
		return
	}
	if b.reactionAnswer(ev) {
		return
	}
	if ev.Emoji.Name == sendNowEmoji {
		go b.sendNowReaction(ev.ChannelID, ev.MessageID, ev.UserID.String())
		return
	}
	if ev.Emoji.Name != stopEmoji {
		return
	}
	target := b.turnByMessage(ev.ChannelID, ev.MessageID)
	if target == nil && b.opts.Elsewhere != nil {
		// The turn may run on another process.
		go b.opts.Elsewhere.Reaction(b.ctx, ev.ChannelID.String(), ev.MessageID.String(), ev.UserID.String())
		return
	}
	if target == nil || !b.mayStop(ev.UserID.String(), target.e) {
		return
	}
	go b.stopTurn(target, ev.UserID.String(), false)
}

// turnByMessage is the turn whose prompt or card is message in channel;
// nil when this process runs none.
func (b *Bot) turnByMessage(channel discord.ChannelID, message discord.MessageID) *turn {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, t := range b.turns {
		if t.channel != channel && t.promptIn != channel {
			continue
		}
		t.mu.Lock()
		hit := (t.promptIn == channel && t.prompt == message) || (t.channel == channel && t.cardID.IsValid() && t.cardID == message)
		t.mu.Unlock()
		if hit {
			return t
		}
	}
	return nil
}

// stop is /claude-stop: the channel's running prompt is stopped; with
// all:true the prompts waiting there are dropped too, their authors told.
// The answer waits (a little) until no process of the turn is left, so
// "Stopped" is true when it is said.
func (b *Bot) stop(ev *gateway.InteractionCreateEvent, user discord.UserID, all discord.CommandInteractionOption) {
	dropAll, _ := all.BoolValue()
	running, ok, waiting := b.intake.Lane(ev.ChannelID.String())
	if ok && !b.mayStop(user.String(), running) {
		go b.respond(ev, notYourTurn, true)
		return
	}
	t := (*turn)(nil)
	if ok {
		t = b.turnOf(running.ID)
	}
	go func() {
		if err := b.client(b.ctx).RespondInteraction(ev.ID, ev.Token, api.InteractionResponse{Type: api.DeferredMessageInteractionWithSource}); err != nil {
			b.log.Warn().Str("error", scrub(err, ev.Token)).Msg("could not acknowledge /claude-stop")
		}
		prompts := 0
		stoppedElsewhere := false
		switch {
		case !ok && b.opts.Elsewhere != nil:
			// The lane's turn, if any, runs on another process.
			stoppedElsewhere, prompts = b.opts.Elsewhere.Stop(b.ctx, ev.ChannelID.String(), user.String(), dropAll)
		case dropAll:
			if t != nil {
				b.stopTurn(t, user.String(), true)
				for _, e := range waiting {
					if e.Kind == queue.KindMessage {
						prompts++
					}
				}
			} else {
				_, prompts = b.dropWaiting(ev.ChannelID, user.String())
			}
		case t != nil:
			b.stopTurn(t, user.String(), false)
		case ok:
			b.intake.Cancel(ev.ChannelID.String(), running.ID)
		}
		if t != nil {
			select {
			case <-t.over:
			case <-b.clock.After(30 * time.Second):
			case <-b.ctx.Done():
			}
		}
		queued := 0
		for _, e := range waiting {
			if e.Kind == queue.KindMessage {
				queued++
			}
		}
		text := stopNotice(ok || stoppedElsewhere, prompts, queued, dropAll)
		in := &interaction{app: ev.AppID, token: ev.Token, channel: ev.ChannelID, expires: b.clock.Now().Add(interactionTTL), acked: closedChan}
		if _, err := b.webhookSend(b.ctx, in, true, part{content: text}); err != nil {
			b.log.Warn().Str("error", scrub(err, ev.Token)).Msg("/claude-stop answer not delivered")
		}
	}()
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func stopNotice(running bool, dropped, waiting int, all bool) string {
	var s string
	if running {
		s = "Stopped the prompt that was running; nothing of it is still running."
	} else {
		s = "Nothing was running in this channel."
	}
	switch {
	case all && dropped == 1:
		s += " Dropped 1 waiting prompt."
	case all && dropped > 1:
		s += fmt.Sprintf(" Dropped %d waiting prompts.", dropped)
	case !all && waiting == 1:
		s += " 1 prompt waiting here runs next (`/claude-stop all:true` drops it)."
	case !all && waiting > 1:
		s += fmt.Sprintf(" %d prompts waiting here run next (`/claude-stop all:true` drops them).", waiting)
	}
	return s
}
