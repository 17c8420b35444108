package gateway

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/agent"
	"github.com/agentgateway/gateway/internal/discord"
	"github.com/agentgateway/gateway/internal/inbox"
	"github.com/agentgateway/gateway/internal/jsinbox"
	"github.com/agentgateway/gateway/internal/queue"
)

// durable ties the inbox to the rest of the gateway (DESIGN decision 14):
// it is the queue's journal, the runtime's watcher of turn starts and
// tools, and the Discord outbox's record of replies and their delivery.
// Every event moves through the inbox's states: accepted when the queue
// takes it, running when its turn starts, answered or failed once its reply
// was delivered (or there was none to post), dropped when /claude-stop
// dropped it. What is not finished when the gateway dies is taken up at the
// next start (resume).
type durable struct {
	in  Inbox
	log zerolog.Logger

	mu sync.Mutex // guards replied
	// replied are the events whose reply was handed to the outbox: they
	// finish when it is delivered (Settled), not when their turn ends.
	replied map[uint64]bool
}

func newDurable(in Inbox, log zerolog.Logger) *durable {
	return &durable{in: in, log: log, replied: map[uint64]bool{}}
}

var (
	_ queue.Assigner      = (*durable)(nil)
	_ discord.SeenStore   = (*durable)(nil)
	_ discord.DeliveryLog = (*durable)(nil)
	_ agent.TurnWatcher   = (*durable)(nil)
)

// Append implements queue.Journal: the event is on disk before the queue
// accepts it, and so before anything acknowledges it (⏳, typing, 202). A
// Discord prompt carries the channel's newest message in the same record.
func (d *durable) Append(e queue.Event) error {
	err := d.in.Add(e, seenBy(e)...)
	if errors.Is(err, inbox.ErrDuplicate) {
		return fmt.Errorf("%w: %w", queue.ErrDuplicate, err)
	}
	return err
}

// assigner is an inbox that numbers events itself (the stream's sequence
// on JetStream).
type assigner interface {
	Assign(e queue.Event, seen ...inbox.Seen) (queue.Event, error)
}

// AppendAssign implements queue.Assigner: an inbox that numbers events
// itself gives the id, which the queue then uses; the embedded inbox keeps
// the queue's.
func (d *durable) AppendAssign(e queue.Event) (queue.Event, error) {
	a, ok := d.in.(assigner)
	if !ok {
		return e, d.Append(e)
	}
	e, err := a.Assign(e, seenBy(e)...)
	if errors.Is(err, inbox.ErrDuplicate) && !errors.Is(err, queue.ErrDuplicate) {
		err = fmt.Errorf("%w: %w", queue.ErrDuplicate, err)
	}
	return e, err
}

// stager is an inbox that records an event in two steps (the embedded
// one): staged in order, committed with the others of its batch.
type stager interface {
	Stage(e queue.Event, seen ...inbox.Seen) (commit func() error, err error)
}

// journal is what the queue records events in: with an inbox that
// stages, a queue.Stager, so that concurrent prompts share the inbox's
// fsync instead of taking one each under the queue's append lock.
func (d *durable) journal() queue.Journal {
	if _, ok := d.in.(stager); ok {
		return stagingDurable{d}
	}
	return d
}

// stagingDurable is the journal of an inbox that stages.
type stagingDurable struct{ *durable }

var _ queue.Stager = stagingDurable{}

// Stage implements queue.Stager.
func (s stagingDurable) Stage(e queue.Event) (func() error, error) {
	commit, err := s.in.(stager).Stage(e, seenBy(e)...)
	if err != nil {
		if errors.Is(err, inbox.ErrDuplicate) {
			err = fmt.Errorf("%w: %w", queue.ErrDuplicate, err)
		}
		return nil, err
	}
	return commit, nil
}

// seenBy is the newest message a Discord prompt's event proves seen.
func seenBy(e queue.Event) []inbox.Seen {
	if e.Source != discord.Source || e.Kind != queue.KindMessage {
		return nil
	}
	if _, err := strconv.ParseUint(e.ReplyTo, 10, 64); err != nil {
		return nil // a slash command: its interaction is not a message
	}
	return []inbox.Seen{{Channel: e.ChannelID, Message: e.ReplyTo, Guild: e.GuildID}}
}

// started records that an event's turn begins (one more attempt).
func (d *durable) started(e queue.Event) {
	if err := d.in.Started(e.ID); err != nil {
		d.log.Error().Err(err).Uint64("event", e.ID).Msg("could not record that the event started")
	}
}

// done finishes an event whose turn ended, unless its reply is on its way
// (Settled finishes those) or a shutdown interrupted it (the next start
// takes it up).
func (d *durable) done(e queue.Event, out agent.Outcome) {
	d.mu.Lock()
	replied := d.replied[e.ID]
	d.mu.Unlock()
	if replied || out.Interrupted {
		return
	}
	state := inbox.Answered
	if out.Err != nil {
		state = inbox.Failed
	}
	d.finish(e.ID, state)
}

// left records an event dropped by /claude-stop. One dropped because the
// gateway stopped stays accepted: the next start runs it.
func (d *durable) left(e queue.Event, fate queue.Fate) {
	if fate == queue.Stopped {
		d.finish(e.ID, inbox.Dropped)
	}
}

func (d *durable) finish(id uint64, s inbox.State) {
	d.mu.Lock()
	delete(d.replied, id)
	d.mu.Unlock()
	if err := d.in.Finish(id, s); err != nil {
		d.log.Error().Err(err).Uint64("event", id).Str("state", s.String()).Msg("could not record how the event ended")
	}
}

// LastSeen implements discord.SeenStore.
func (d *durable) LastSeen() []discord.SeenMessage {
	var out []discord.SeenMessage
	for _, s := range d.in.LastSeen() {
		out = append(out, discord.SeenMessage{Channel: s.Channel, Message: s.Message, Guild: s.Guild})
	}
	return out
}

// SaveSeen implements discord.SeenStore.
func (d *durable) SaveSeen(batch []discord.SeenMessage) error {
	seen := make([]inbox.Seen, 0, len(batch))
	for _, s := range batch {
		seen = append(seen, inbox.Seen{Channel: s.Channel, Message: s.Message, Guild: s.Guild})
	}
	return d.in.See(seen...)
}

// Handed implements discord.DeliveryLog.
func (d *durable) Handed(event uint64) {
	d.mu.Lock()
	d.replied[event] = true
	d.mu.Unlock()
}

// Replied implements discord.DeliveryLog.
func (d *durable) Replied(event uint64, text string, files []string) error {
	d.Handed(event)
	err := d.in.Replied(event, text, files...)
	if errors.Is(err, jsinbox.ErrFenced) {
		return fmt.Errorf("%w: %w", discord.ErrTakenOver, err)
	}
	return err
}

// Delivered implements discord.DeliveryLog.
func (d *durable) Delivered(event uint64, chunk int, messageID string) {
	if err := d.in.Delivered(event, chunk, messageID); err != nil {
		d.log.Error().Err(err).Uint64("event", event).Int("message", chunk).
			Msg("could not record a delivered message; a restart now may post it again")
	}
}

// Settled implements discord.DeliveryLog.
func (d *durable) Settled(event uint64, delivered bool) {
	state := inbox.Answered
	if !delivered {
		state = inbox.Failed
	}
	d.finish(event, state)
}

// TurnStarted implements agent.TurnWatcher: the first tool a turn starts
// is recorded, so that a restart does not run it again blindly (resume).
func (d *durable) TurnStarted(e queue.Event) (toolUsed func(string), ended func()) {
	var once sync.Once
	return func(string) {
		once.Do(func() {
			if err := d.in.ToolStarted(e.ID); err != nil {
				d.log.Error().Err(err).Uint64("event", e.ID).Msg("could not record that the turn started a tool")
			}
		})
	}, func() {}
}

// turnWatchers tells several watchers about every turn.
type turnWatchers []agent.TurnWatcher

func (ws turnWatchers) TurnStarted(e queue.Event) (func(string), func()) {
	tools := make([]func(string), len(ws))
	ends := make([]func(), len(ws))
	for i, w := range ws {
		tools[i], ends[i] = w.TurnStarted(e)
	}
	return func(name string) {
			for _, f := range tools {
				f(name)
			}
		}, func() {
			for _, f := range ends {
				f()
			}
		}
}

// maxAttempts is how many times an event may start a turn that the
// gateway does not survive before it is a dead letter.
const maxAttempts = 3

// Notices about events taken up at start.
const (
	noticeInterrupted = "The gateway restarted while this was being worked on, after the agent had started using tools, so it was not run again on its own (it may have changed files already). Press Retry to run it again from the start."
	noticeDeadLetter  = "This was started %d times and the gateway stopped during each run, so it is not tried again. Try a smaller request, or ask the operator to look at the gateway's log."
)

// resumePlan sorts what a previous run left unfinished.
type resumePlan struct {
	// cards are the turn cards the previous run left, by event: each
	// still says "Working".
	cards []staleCard
	// approvals are the tool approvals the previous run left open.
	approvals []staleCard
	// rerun are run again from the start, in id order, ahead of new events.
	rerun []queue.Event
	// deliver had their reply recorded: only its delivery is left.
	deliver []inbox.Entry
	// interrupted had started a tool: their users are offered a Retry.
	interrupted []queue.Event
	// dead started maxAttempts turns the gateway did not survive.
	dead []inbox.Entry
}

// planResume decides what becomes of each unfinished entry.
func planResume(entries []inbox.Entry) resumePlan {
	var p resumePlan
	for _, en := range entries {
		if id := en.Delivered[discord.CardChunk]; id != "" {
			p.cards = append(p.cards, staleCard{channel: en.Event.ChannelID, message: id})
		}
		for chunk, id := range en.Delivered {
			if discord.ApprovalChunk(chunk) && id != "" {
				// Left open: denied, never allowed (the tool did not run);
				// a question or plan is closed as not answered.
				p.approvals = append(p.approvals, staleCard{channel: en.Event.ChannelID, message: id, notice: discord.StaleNotice(chunk)})
			}
		}
		switch {
		case en.State == inbox.Running && en.Reply != "":
			p.deliver = append(p.deliver, en)
		case en.Attempts >= maxAttempts:
			p.dead = append(p.dead, en)
		case en.State == inbox.Running && en.ToolStarted:
			p.interrupted = append(p.interrupted, en.Event)
		default:
			p.rerun = append(p.rerun, en.Event)
		}
	}
	return p
}

// staleCard is a turn card, approval, question or plan message a killed
// gateway left; notice is what an approval's becomes.
type staleCard struct{ channel, message, notice string }

// notifier posts a notice answering an event and edits the bot's messages
// (the Discord bot).
type notifier interface {
	Notify(ctx context.Context, e queue.Event, tag, text string, retry bool) error
	EditMessage(ctx context.Context, channel, message, text string) error
}

// Nonce tags of the notices (discord.Bot.Notify).
const (
	tagInterrupted = "i"
	tagDeadLetter  = "d"
)

// resumer finishes what a previous run left once Discord is connected:
// replies to deliver, interrupted turns to offer a Retry for, dead letters
// to report. Each user hears once: the notice is recorded (the event
// finishes) after Discord took it.
type resumer struct {
	d       *durable
	notify  notifier
	deliver func(e queue.Event, text string, files []string, delivered map[int]string) error
	log     zerolog.Logger
}

func (r *resumer) run(ctx context.Context, p resumePlan) {
	for _, c := range p.cards {
		// Best effort: a card that cannot be edited (deleted) stays as it is.
		if err := r.notify.EditMessage(ctx, c.channel, c.message, discord.StaleCardNotice); err != nil {
			r.log.Debug().Err(err).Str("channel", c.channel).Msg("could not close a turn card the previous run left")
		}
	}
	for _, a := range p.approvals {
		if err := r.notify.EditMessage(ctx, a.channel, a.message, a.notice); err != nil {
			r.log.Debug().Err(err).Str("channel", a.channel).Msg("could not close a tool approval the previous run left open")
		}
	}
	for _, en := range p.deliver {
		if err := r.deliver(en.Event, en.Reply, en.Files, en.Delivered); err != nil {
			r.log.Error().Err(err).Uint64("event", en.Event.ID).Msg("could not resume the delivery of a reply")
		}
	}
	for _, e := range p.interrupted {
		r.tell(ctx, e, tagInterrupted, noticeInterrupted, true)
	}
	for _, en := range p.dead {
		r.log.Warn().Uint64("event", en.Event.ID).Int("attempts", en.Attempts).Str("kind", string(en.Event.Kind)).
			Msg("dead letter: the gateway stopped during every run of this event; not tried again")
		r.tell(ctx, en.Event, tagDeadLetter, fmt.Sprintf(noticeDeadLetter, en.Attempts), false)
	}
}

// tell posts a notice and finishes the event as failed once it is posted;
// an event whose notice Discord did not take stays for the next start.
func (r *resumer) tell(ctx context.Context, e queue.Event, tag, text string, retry bool) {
	if e.Kind != queue.KindMessage {
		// No prompt to answer: say which event it was.
		text = fmt.Sprintf("The %s `%s`: %s", e.Kind, e.Name, lowerFirst(text))
	}
	if err := r.notify.Notify(ctx, e, tag, text, retry); err != nil {
		r.log.Warn().Err(err).Uint64("event", e.ID).Msg("could not post the notice about an event the previous run left; trying again at the next start")
		return
	}
	r.d.finish(e.ID, inbox.Failed)
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}
