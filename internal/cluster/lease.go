package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/jsinbox"
)

// LeaseOptions configure a Lease. Every process sharing the bucket must
// agree on Replicas and TTL: the bucket is checked against them.
type LeaseOptions struct {
	// Replicas is how many servers keep the bucket (NATS_REPLICAS); 1 when
	// zero.
	Replicas int
	// TTL is how long a lease outlives its holder's last renewal: the
	// longest a dead holder keeps others waiting (DefaultLeaseTTL when
	// zero).
	TTL time.Duration
	// Renew is how often the holder renews, and how often a waiting process
	// tries to take a lease that lapsed (TTL/3 when zero; at most TTL/3).
	Renew time.Duration
	// Holder names this process in the leases it holds (DefaultName when
	// empty).
	Holder string
	// Clock drives renewals and waiting (the real clock when nil). The
	// bucket's TTL runs on the server's clock.
	Clock clockwork.Clock
	Log   zerolog.Logger
}

// Lease runs functions that must run on one process at a time, each under
// a named key of the bucket BucketLeases.
//
// The holder renews its key every Renew with a revision-checked Update and
// stops its function once it has gone TTL − Renew without a renewal: the
// key lapses only TTL after the last renewal landed, so the function has
// stopped before anyone else can take the key. This holds as long as the
// function returns promptly when its context ends, and as long as the
// holder's clock and the server's run at the same rate.
type Lease struct {
	kv         jetstream.KeyValue
	ttl, renew time.Duration
	holder     string
	clock      clockwork.Clock
	log        zerolog.Logger
}

// holding is a lease key's value. The token tells this take of the lease
// from any other, by this process or another one.
type holding struct {
	Holder string    `json:"holder"`
	Token  string    `json:"token"`
	Since  time.Time `json:"since"`
}

// OpenLease creates the leases' bucket, or checks the one there against o.
func OpenLease(ctx context.Context, js jetstream.JetStream, o LeaseOptions) (*Lease, error) {
	if o.TTL == 0 {
		o.TTL = DefaultLeaseTTL
	}
	if o.Renew == 0 {
		o.Renew = o.TTL / 3
	}
	if o.Renew <= 0 || 3*o.Renew > o.TTL {
		return nil, fmt.Errorf("lease renewal every %s with a TTL of %s: renew at least three times per TTL", o.Renew, o.TTL)
	}
	if o.Holder == "" {
		o.Holder = DefaultName()
	}
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
	}
	kv, err := jsinbox.EnsureBucket(ctx, js, LeaseBucket(o.TTL, o.Replicas))
	if err != nil {
		return nil, err
	}
	return &Lease{kv: kv, ttl: o.TTL, renew: o.Renew, holder: o.Holder, clock: o.Clock, log: o.Log}, nil
}

// Run takes the lease name, runs fn while it holds it, and takes it again
// whenever it is free, until ctx ends. While another process holds it, Run
// waits: it takes the lease at once when the holder gives it back, and
// within one Renew of its lapsing when the holder died.
//
// fn's context ends when ctx does or when the lease cannot be renewed; fn
// must then return promptly, and Run waits for it before it gives the
// lease back or tries to take it again. A fn that returns by itself ends
// Run with fn's error, after giving the lease back. Run returns nil when
// ctx ends.
func (l *Lease) Run(ctx context.Context, name string, fn func(ctx context.Context) error) error {
	if err := checkName(name); err != nil {
		return fmt.Errorf("lease: %w", err)
	}
	log := l.log.With().Str("lease", name).Logger()
	for {
		h, err := l.take(ctx, name, log)
		if err != nil {
			return nil // only ctx ends the wait
		}
		if stop, err := l.hold(ctx, name, h, fn, log); stop {
			return err
		}
	}
}

// held is a lease this process holds.
type held struct {
	value []byte
	rev   uint64
	// at is when the write of rev was sent: the key lapses no earlier than
	// TTL after it.
	at time.Time
}

// deadline is when the holder must have stopped unless it renews first.
func (l *Lease) deadline(h held) time.Time { return h.at.Add(l.ttl - l.renew) }

// take waits until it holds the lease; its only error is ctx's.
func (l *Lease) take(ctx context.Context, name string, log zerolog.Logger) (held, error) {
	value, err := json.Marshal(holding{Holder: l.holder, Token: randomHex(8), Since: l.clock.Now().UTC()})
	if err != nil {
		return held{}, fmt.Errorf("lease value: %w", err)
	}
	// Watch before the first try, so a release after it is never missed.
	// The watch lives as long as its context, which also bounds the
	// request that sets it up: one lost as a server dies is never answered.
	wctx, unwatch := context.WithCancel(ctx)
	defer unwatch()
	timeout := time.AfterFunc(l.renew, unwatch)
	var released <-chan jetstream.KeyValueEntry
	w, err := l.kv.Watch(wctx, name, jetstream.UpdatesOnly())
	if timeout.Stop() && err == nil {
		defer func() { _ = w.Stop() }()
		released = w.Updates()
	} else {
		log.Debug().Err(err).Msg("cannot watch the lease; trying to take it every renewal period")
	}
	warned := false
	for {
		at := l.clock.Now()
		c, cancel := context.WithTimeout(ctx, l.renew)
		rev, err := l.kv.Create(c, name, value)
		cancel()
		switch {
		case err == nil:
			log.Info().Str("holder", l.holder).Msg("took the lease")
			return held{value: value, rev: rev, at: at}, nil
		case ctx.Err() != nil:
			return held{}, ctx.Err()
		case errors.Is(err, jetstream.ErrKeyExists):
			warned = false
		case !warned:
			// Once per outage: NATS being away is logged by the connection.
			log.Warn().Err(err).Msg("cannot take the lease; trying again")
			warned = true
		}
		if released, err = l.wait(ctx, released); err != nil {
			return held{}, err
		}
	}
}

// wait returns when the lease may be free: it was deleted or purged (a
// clean stop), or one Renew went by (it may have lapsed). It returns the
// watch's channel, nil once that has closed.
func (l *Lease) wait(ctx context.Context, released <-chan jetstream.KeyValueEntry) (<-chan jetstream.KeyValueEntry, error) {
	retry := l.clock.NewTimer(l.renew)
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return released, ctx.Err()
		case <-retry.Chan():
			return released, nil
		case e, ok := <-released:
			if !ok {
				released = nil
				continue
			}
			if e != nil && e.Operation() != jetstream.KeyValuePut {
				return released, nil
			}
		}
	}
}

// errTaken means the lease key no longer holds this process's value.
var errTaken = errors.New("the lease was taken by another process")

// hold runs fn while it renews h. stop says Run should return err; else
// the lease was lost and Run waits to take it again.
func (l *Lease) hold(ctx context.Context, name string, h held, fn func(context.Context) error, log zerolog.Logger) (stop bool, err error) {
	fnCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- fn(fnCtx) }()
	// end stops fn and waits for it, so nothing of it runs once the lease
	// can be taken elsewhere.
	end := func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			log.Warn().Err(err).Msg("the lease's work ended with an error as it stopped")
		}
	}

	next := l.clock.NewTimer(l.renew)
	defer next.Stop()
	expire := l.clock.NewTimer(l.clock.Until(l.deadline(h)))
	defer expire.Stop()
	for {
		select {
		case err := <-done:
			l.release(ctx, name, h.rev, log)
			if ctx.Err() != nil {
				return true, nil // fn saw ctx end before this loop did
			}
			return true, err
		case <-ctx.Done():
			end()
			l.release(ctx, name, h.rev, log)
			return true, nil
		case <-expire.Chan():
			log.Warn().Int64("ttl_ms", l.ttl.Milliseconds()).Msg("could not renew the lease in time; stopped its work so that no two processes run it at once")
			end()
			// Still ours if NATS was only slow: give it back so the next
			// holder need not wait for it to lapse.
			l.release(ctx, name, h.rev, log)
			return false, nil
		case <-next.Chan():
			at := l.clock.Now()
			rev, fresh, err := l.renewOnce(ctx, name, h)
			switch {
			case err == nil:
				h.rev = rev
				if fresh {
					h.at = at
					expire.Reset(l.clock.Until(l.deadline(h)))
				}
				next.Reset(l.renew)
			case errors.Is(err, errTaken):
				log.Warn().Msg("the lease was taken by another process; stopped its work here")
				end()
				return false, nil
			default:
				// Try again soon: the deadline is only two periods away.
				if ctx.Err() == nil {
					log.Debug().Err(err).Msg("could not renew the lease; trying again")
				}
				next.Reset(l.renew / 5)
			}
		}
	}
}

// renewOnce renews h. fresh says the write was this one, sent now; else
// an earlier renewal landed although its answer was lost, and the deadline
// stays as it was.
func (l *Lease) renewOnce(ctx context.Context, name string, h held) (rev uint64, fresh bool, err error) {
	// Half a period leaves time to try again, and never past the deadline:
	// the expire timer cannot fire during the call.
	timeout := min(l.renew/2, l.clock.Until(l.deadline(h)))
	if timeout <= 0 {
		return 0, false, context.DeadlineExceeded
	}
	c, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rev, err = l.kv.Update(c, name, h.value, h.rev)
	if err == nil {
		return rev, true, nil
	}
	if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return 0, false, fmt.Errorf("renew lease %s: %w", name, err)
	}
	e, gerr := l.kv.Get(c, name)
	switch {
	case gerr == nil && e.Operation() == jetstream.KeyValuePut && bytes.Equal(e.Value(), h.value):
		return e.Revision(), false, nil
	case gerr == nil, errors.Is(gerr, jetstream.ErrKeyNotFound), errors.Is(gerr, jetstream.ErrKeyDeleted):
		return 0, false, errTaken
	}
	return 0, false, fmt.Errorf("renew lease %s: %w", name, gerr)
}

// release deletes the key if it is still at rev, so another process may
// take the lease at once; if it cannot, the key lapses on its own.
func (l *Lease) release(ctx context.Context, name string, rev uint64, log zerolog.Logger) {
	c, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.renew)
	defer cancel()
	err := l.kv.Delete(c, name, jetstream.LastRevision(rev))
	switch {
	case err == nil:
		log.Info().Msg("gave the lease back")
	case errors.Is(err, jetstream.ErrKeyRevisionMismatch):
	default:
		log.Debug().Err(err).Msg("could not give the lease back; it lapses on its own")
	}
}
