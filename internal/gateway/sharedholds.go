package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/files"
	"github.com/agentgateway/gateway/internal/hold"
)

// ctlHold is the subject on which a worker hands a schedule change its
// agent made to a `gateway run` node, the schedule's home: one of them
// (a queue group) takes it into its own hold gate and answers.
const (
	ctlHold      = "gateway.ctl.hold"
	ctlHoldGroup = "holds"
)

// holdAnswer is the run node's answer to a handed-on change; Error is
// empty when it was taken.
type holdAnswer struct {
	Error string `json:"error,omitempty"`
}

// holdForwarder is a worker's hold.Options.Forward: it hands the change to
// a run node, retrying while none answers, and tells the turn's channel
// once when it gives up.
type holdForwarder struct {
	nc *nats.Conn
	// tell posts a plain message in a channel.
	tell func(ctx context.Context, channel, text string) error
	log  zerolog.Logger
	// giveUp bounds the retries of an agent's change; the wait between
	// tries grows from first to at most 10 s.
	giveUp, first time.Duration
}

// forward implements hold.Options.Forward.
func (f holdForwarder) forward(ctx context.Context, p hold.Proposal) error {
	data, err := json.Marshal(p)
	if err != nil {
		return err
	}
	if p.Cron {
		// The cron action waits: its deadline is the gate's.
		return f.send(ctx, data, time.Second)
	}
	giveUp, first := f.giveUp, f.first
	if giveUp <= 0 {
		giveUp = 2 * time.Minute
	}
	if first <= 0 {
		first = time.Second
	}
	tctx, cancel := context.WithTimeout(ctx, giveUp)
	defer cancel()
	err = f.send(tctx, data, first)
	if err == nil {
		f.log.Info().Str("file", p.File).Msg("schedule change handed to the run node, which asks the approvers")
		return nil
	}
	f.log.Error().Err(err).Str("file", p.File).Msg("no run node took the schedule change; it is dropped")
	if p.Channel != "" && f.tell != nil {
		msg := fmt.Sprintf("The change to `%s` made in this turn could not be proposed for approval: the gateway's run node did not answer (%s). The file is as it was; ask again once the gateway is whole.", p.File, plainError(err))
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if terr := f.tell(cctx, p.Channel, msg); terr != nil {
			f.log.Warn().Err(terr).Msg("could not say that the schedule change was dropped")
		}
	}
	return err
}

// send requests until a run node answers or ctx ends; the answer's error
// is returned as it is (the change was judged and refused).
func (f holdForwarder) send(ctx context.Context, data []byte, wait time.Duration) error {
	for {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		msg, err := f.nc.RequestWithContext(rctx, ctlHold, data)
		cancel()
		if err == nil {
			var a holdAnswer
			if err := json.Unmarshal(msg.Data, &a); err != nil {
				return fmt.Errorf("the run node's answer could not be read: %w", err)
			}
			if a.Error != "" {
				return errors.New(a.Error)
			}
			return nil
		}
		f.log.Debug().Err(err).Msg("handing a schedule change to the run node")
		select {
		case <-ctx.Done():
			return fmt.Errorf("no run node answered: %w", err)
		case <-time.After(wait):
		}
		wait = min(2*wait, 10*time.Second)
	}
}

// plainError is the last words of an error, for a message in Discord.
func plainError(err error) string {
	switch {
	case errors.Is(err, nats.ErrNoResponders), errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return "no run node is connected to NATS"
	default:
		return "NATS is out of reach"
	}
}

// serveHolds takes, until ctx ends, the schedule changes workers hand on
// into gate (a run node's), answering each.
func serveHolds(ctx context.Context, nc *nats.Conn, gate *hold.Gate, log zerolog.Logger) error {
	sub, err := nc.QueueSubscribe(ctlHold, ctlHoldGroup, func(m *nats.Msg) {
		var p hold.Proposal
		if err := json.Unmarshal(m.Data, &p); err != nil {
			log.Warn().Err(err).Msg("a schedule change from a worker could not be read")
			return
		}
		go func() {
			pctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			var a holdAnswer
			if err := gate.Propose(pctx, p); err != nil {
				a.Error = files.WithoutPath(err).Error()
				log.Warn().Err(err).Str("file", p.File).Msg("a schedule change from a worker was refused")
			} else {
				log.Info().Str("file", p.File).Str("channel", p.Channel).Bool("cron", p.Cron).Msg("schedule change taken from a worker")
			}
			data, _ := json.Marshal(a)
			_ = m.Respond(data)
		}()
	})
	if err != nil {
		return fmt.Errorf("subscribe to the workers' schedule changes: %w", err)
	}
	<-ctx.Done()
	_ = sub.Unsubscribe()
	return nil
}

// lead is what the holder of the schedule's lease runs on NATS: the
// schedule and the deferred prompts every process keeps in the bucket,
// until ctx ends (the lease lost) or one of them fails.
func (g *assembly) lead(ctx context.Context) error {
	if g.deferKV == nil {
		return g.sched.Lead(ctx)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	deferErr := make(chan error, 1)
	go func() {
		err := g.deferKV.Run(ctx, fireDeferred(g.core.Queue.Enqueue))
		cancel() // a loop that failed gives up the lease with the schedule
		deferErr <- err
	}()
	err := g.sched.Lead(ctx)
	cancel()
	return errors.Join(err, <-deferErr)
}
