package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/card"
	"github.com/agentgateway/gateway/internal/cluster"
	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/discord"
	"github.com/agentgateway/gateway/internal/inbox"
	"github.com/agentgateway/gateway/internal/jsinbox"
	"github.com/agentgateway/gateway/internal/queue"
)

// Subjects of the requests between the processes of one gateway: the
// process holding the Discord connection passes on what concerns a turn
// another process runs, and only the process running it answers.
const (
	ctlPress = "gateway.ctl.press"
	ctlStop  = "gateway.ctl.stop"
	ctlReact = "gateway.ctl.react"
)

// scheduleLease names the lease whose holder fires heartbeats and cron
// jobs.
const scheduleLease = "scheduler"

// clusterParts are the node's heartbeat entry and, on gateway run, the
// lease of the schedule.
type clusterParts struct {
	registry *cluster.Registry
	lease    *cluster.Lease
}

// start opens the node's heartbeat entry, listing the turns it runs, and
// on gateway run the lease of the schedule.
func (c *node) start(ctx context.Context, cfg *config.Config, shared *sharedState, opts Options, core *Core) (clusterParts, error) {
	role := cluster.RoleRun
	if opts.Worker {
		role = cluster.RoleWorker
	}
	var p clusterParts
	var err error
	p.registry, err = cluster.OpenRegistry(ctx, shared.js, cluster.RegistryOptions{
		Replicas: cfg.NATSReplicas,
		Self:     cluster.Worker{Role: role, Version: opts.Version, Slots: cfg.MaxConcurrent},
		Turns: func() []cluster.Turn {
			var out []cluster.Turn
			for _, e := range core.Queue.Current() {
				out = append(out, cluster.Turn{Lane: e.Lane, Event: e.ID, Since: e.Time})
			}
			return out
		},
		Log: c.log,
	})
	if err != nil {
		return p, fmt.Errorf("the gateway's processes on NATS: %w", err)
	}
	c.name = p.registry.Name()
	c.log = c.log.With().Str("node", c.name).Logger()
	if !opts.Worker {
		p.lease, err = cluster.OpenLease(ctx, shared.js, cluster.LeaseOptions{Replicas: cfg.NATSReplicas, Holder: c.name, Log: c.log})
		if err != nil {
			return p, fmt.Errorf("the schedule's lease on NATS: %w", err)
		}
	}
	return p, nil
}

// finished reports whether an event the schedule enqueued has finished
// on whichever process ran it.
func (c *node) finished(id uint64) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	en, err := c.in.Lookup(ctx, id)
	if errors.Is(err, jsinbox.ErrUnknown) {
		return true // no longer kept: long finished
	}
	return err == nil && en.State.Finished()
}

// stopWait bounds the wait for the process running a lane's turn to say
// it stopped it.
const stopWait = 3 * time.Second

// tagDropped is the nonce tag of the notice to a prompt a stop dropped.
const tagDropped = "x"

// node is this process's part in a gateway spread over several
// processes (NATS_URL): it takes the events the stream hands it (the
// dispatcher) and runs them in its own queue, and it passes presses and
// stops to the process running the turn, or answers them for its own
// turns. The same code serves `gateway run` and `gateway worker`.
type node struct {
	in  *natsInbox
	log zerolog.Logger
	// name is this process's name among the gateway's processes (its
	// heartbeat entry), once started.
	name string

	// Bound once the core and the bot exist, before Run.
	bot  *discord.Bot
	core *Core
	res  *resumer
	disp *jsinbox.Dispatcher
}

var _ discord.Elsewhere = (*node)(nil)

type stopRequest struct {
	Lane string `json:"lane"`
	User string `json:"user"`
	All  bool   `json:"all"`
}

type reactionNote struct {
	Channel string `json:"channel"`
	Message string `json:"message"`
	User    string `json:"user"`
}

// Press implements discord.Elsewhere.
func (c *node) Press(ctx context.Context, p discord.Press) (discord.PressAnswer, bool) {
	data, err := json.Marshal(p)
	if err != nil {
		return discord.PressAnswer{}, false
	}
	msg, err := c.in.nc.RequestWithContext(ctx, ctlPress, data)
	if err != nil {
		return discord.PressAnswer{}, false // nobody runs that turn any more
	}
	var a discord.PressAnswer
	if err := json.Unmarshal(msg.Data, &a); err != nil {
		c.log.Warn().Err(err).Msg("a press's answer from another process could not be read")
		return discord.PressAnswer{}, false
	}
	return a, true
}

// Stop implements discord.Elsewhere: with all, the lane's events held in
// the stream are marked first, so that whichever process is handed one
// drops it.
func (c *node) Stop(ctx context.Context, lane, user string, all bool) (running bool, dropped int) {
	ctx, cancel := context.WithTimeout(ctx, stopWait)
	defer cancel()
	held := 0
	if all {
		var err error
		if held, err = c.in.MarkStop(ctx, lane); err != nil {
			c.log.Error().Err(err).Str("lane", lane).Msg("could not mark the lane's waiting events as dropped")
		}
	}
	data, _ := json.Marshal(stopRequest{Lane: lane, User: user, All: all})
	if _, err := c.in.nc.RequestWithContext(ctx, ctlStop, data); err == nil {
		running = true
	}
	if all {
		dropped = held
		if running || held > 0 {
			dropped = max(held-1, 0) // the head of the lane was running or about to
		}
	}
	return running, dropped
}

// Started implements discord.Elsewhere: the event's record says it
// started, or it is gone (finished long ago).
func (c *node) Started(ctx context.Context, id uint64) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	en, err := c.in.Lookup(ctx, id)
	if errors.Is(err, jsinbox.ErrUnknown) {
		return true
	}
	return err == nil && en.State != inbox.Accepted
}

// Reaction implements discord.Elsewhere.
func (c *node) Reaction(_ context.Context, channel, message, user string) {
	data, _ := json.Marshal(reactionNote{Channel: channel, Message: message, User: user})
	if err := c.in.nc.Publish(ctlReact, data); err != nil {
		c.log.Debug().Err(err).Msg("could not pass a 🛑 on")
	}
}

// serve answers, until ctx ends, what other processes pass on about the
// turns this one runs.
func (c *node) serve(ctx context.Context) error {
	nc := c.in.nc
	var subs []*nats.Subscription
	defer func() {
		for _, s := range subs {
			_ = s.Unsubscribe()
		}
	}()
	sub, err := nc.Subscribe(ctlPress, func(m *nats.Msg) {
		var p discord.Press
		if json.Unmarshal(m.Data, &p) != nil {
			return
		}
		go func() {
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			if a, ok := c.bot.PressHere(pctx, p); ok {
				data, _ := json.Marshal(a)
				_ = m.Respond(data)
			}
		}()
	})
	if err != nil {
		return fmt.Errorf("subscribe to passed-on presses: %w", err)
	}
	subs = append(subs, sub)
	sub, err = nc.Subscribe(ctlStop, func(m *nats.Msg) {
		var r stopRequest
		if json.Unmarshal(m.Data, &r) != nil {
			return
		}
		if c.bot.StopHere(r.Lane, r.User, r.All) {
			_ = m.Respond([]byte("{}"))
		}
	})
	if err != nil {
		return fmt.Errorf("subscribe to passed-on stops: %w", err)
	}
	subs = append(subs, sub)
	sub, err = nc.Subscribe(ctlReact, func(m *nats.Msg) {
		var r reactionNote
		if json.Unmarshal(m.Data, &r) == nil {
			c.bot.ReactionHere(r.Channel, r.Message, r.User)
		}
	})
	if err != nil {
		return fmt.Errorf("subscribe to passed-on reactions: %w", err)
	}
	subs = append(subs, sub)
	<-ctx.Done()
	return nil
}

// dispatch takes events from the stream into this process's queue until
// ctx ends; what it still holds then goes back to the stream at once.
func (c *node) dispatch(ctx context.Context) error {
	return c.disp.Run(ctx, c.take)
}

// take decides what becomes of an event the stream handed this process,
// with the rules a start applies to what a killed gateway left (the
// record shows what earlier deliveries did): run it, deliver its recorded
// reply, offer a Retry for a turn cut off after a tool started, or report
// it dead after three attempts. An event a stop marked is dropped.
func (c *node) take(d jsinbox.Delivery) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		e := d.Event
		en, err := c.in.Lookup(ctx, e.ID)
		switch {
		case errors.Is(err, jsinbox.ErrUnknown):
			en = inbox.Entry{Event: e, State: inbox.Accepted}
		case err != nil:
			c.log.Warn().Err(err).Uint64("event", e.ID).Msg("could not read the event's record; it is handed out again shortly")
			c.disp.Retry(e.ID, 5*time.Second)
			return
		}
		if en.State.Finished() {
			// Finished, only the ack was lost.
			if err := c.in.Finish(e.ID, en.State); err != nil {
				c.log.Warn().Err(err).Uint64("event", e.ID).Msg("could not ack a finished event")
			}
			return
		}
		if mark, err := c.in.StopMark(ctx, e.Lane); err == nil && e.ID <= mark {
			c.drop(ctx, e)
			return
		}
		if c.in.LastDelivery(d) && en.Attempts < maxAttempts {
			en.Attempts = maxAttempts // the last delivery: report it rather than leave it untold
		}
		plan := planResume([]inbox.Entry{en})
		rerun := plan.rerun
		plan.rerun = nil
		// The card and approvals an earlier holder left are closed first.
		c.res.run(ctx, plan)
		switch {
		case len(rerun) == 1:
			if d.Deliveries > 1 {
				c.log.Info().Uint64("event", e.ID).Uint64("delivery", d.Deliveries).Msg("running an event another process did not finish")
			}
			c.core.Queue.Restore(rerun[0])
		case len(plan.deliver) == 0 && c.disp.Holds(e.ID):
			// Its notice was not posted (Discord did not take it): the
			// stream hands the event out again later.
			c.disp.Retry(e.ID, 30*time.Second)
		}
	}()
}

// drop finishes an event a stop marked, telling its author.
func (c *node) drop(ctx context.Context, e queue.Event) {
	if e.Kind == queue.KindMessage {
		if err := c.bot.Notify(ctx, e, tagDropped, discord.DroppedNotice, false); err != nil {
			c.log.Warn().Err(err).Uint64("event", e.ID).Msg("could not tell a dropped prompt's author")
		}
	}
	if err := c.in.Finish(e.ID, inbox.Dropped); err != nil {
		c.log.Warn().Err(err).Uint64("event", e.ID).Msg("could not record a dropped event")
	}
}

// left is told that an event left this process's queue: its slot is
// free; one the queue dropped as it stopped goes back to the stream for
// another process.
func (c *node) left(e queue.Event, fate queue.Fate) {
	if fate == queue.Dropped {
		c.disp.Retry(e.ID, 0)
		return
	}
	c.disp.Release(e.ID)
}

// nodeStatus answers /status on a gateway spread over several processes:
// which process runs the channel's turn, how many wait in the stream, and
// which processes there are.
type nodeStatus struct {
	in       *natsInbox
	registry *cluster.Registry
	now      func() time.Time
}

func (s *nodeStatus) status(lane string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var b strings.Builder
	procs, err := s.registry.List(ctx)
	if err != nil {
		return "Running: unknown (the gateway's processes cannot be read from NATS right now)\n"
	}
	held, herr := s.in.LaneDepth(ctx, lane)
	running := ""
	var since time.Time
	for _, p := range procs {
		for _, t := range p.Turns {
			if t.Lane == lane {
				running, since = p.Name, t.Since
			}
		}
	}
	switch {
	case running != "":
		fmt.Fprintf(&b, "Running: a turn for %s on `%s`", card.Duration(s.now().Sub(since)), running)
		held--
	default:
		b.WriteString("Running: nothing")
	}
	if herr == nil {
		fmt.Fprintf(&b, " · waiting: %d", max(held, 0))
	}
	b.WriteString("\n")
	var parts []string
	for _, p := range procs {
		if p.Role == cluster.RoleRun && p.Slots == 0 {
			parts = append(parts, fmt.Sprintf("`%s` (takes prompts)", p.Name))
			continue
		}
		parts = append(parts, fmt.Sprintf("`%s` (%s, %d of %d busy)", p.Name, p.Role, len(p.Turns), p.Slots))
	}
	fmt.Fprintf(&b, "Processes: %s\n", strings.Join(parts, ", "))
	return b.String()
}
