package card

import (
	"context"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// Sender delivers one frame of the card. A rate-limited send returns
// retryAfter > 0 (Discord's 429 retry_after): the pacer waits that long
// and then sends the latest frame. Any other error drops the frame; the
// next Update sends again.
type Sender func(ctx context.Context, frame string) (retryAfter time.Duration, err error)

// Pacer edits the card at most once per interval, latest frame wins: frames
// that arrive while it waits replace each other, so Discord never sees a
// stale frame and a fast stream costs one edit per interval.
type Pacer struct {
	clock    clockwork.Clock
	interval time.Duration
	send     Sender
	ctx      context.Context
	cancel   context.CancelFunc
	done     chan struct{}
	wake     chan struct{}

	mu       sync.Mutex // guards the fields below
	pending  string
	has      bool
	lastSent string
	accepted string
	sends    int
	closed   bool
}

// NewPacer starts a pacer; Close stops it. shown, if not empty, is the
// frame the message was created with just now: it is not sent again, and
// the first edit waits an interval.
func NewPacer(clock clockwork.Clock, interval time.Duration, send Sender, shown string) *Pacer {
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pacer{clock: clock, interval: interval, send: send, ctx: ctx, cancel: cancel,
		done: make(chan struct{}), wake: make(chan struct{}, 1), lastSent: shown, accepted: shown}
	var next time.Time
	if shown != "" {
		next = clock.Now().Add(interval)
	}
	go p.run(next)
	return p
}

// Update sets the frame to send next. It never blocks.
func (p *Pacer) Update(frame string) {
	p.mu.Lock()
	if p.closed || frame == p.lastSent && !p.has {
		p.mu.Unlock()
		return
	}
	p.pending, p.has = frame, true
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Sends counts the frames sent, accepted or not.
func (p *Pacer) Sends() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sends
}

// Close stops the pacer without sending what is pending: it waits, bounded
// by ctx, for a send in flight, and returns the last frame Discord took.
func (p *Pacer) Close(ctx context.Context) (lastAccepted string) {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		p.cancel()
		<-p.done
	}
	p.cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// run sends frames, none before next.
func (p *Pacer) run(next time.Time) {
	defer close(p.done)
	for {
		p.mu.Lock()
		closed, has, frame := p.closed, p.has, p.pending
		p.mu.Unlock()
		if closed {
			return
		}
		if !has {
			select {
			case <-p.wake:
				continue
			case <-p.ctx.Done():
				return
			}
		}
		if wait := next.Sub(p.clock.Now()); wait > 0 {
			if !p.sleep(wait) {
				return // closed while waiting: what is pending is not sent
			}
			p.mu.Lock()
			frame = p.pending
			p.mu.Unlock()
		}
		p.mu.Lock()
		if frame == p.lastSent {
			p.has = false
			p.mu.Unlock()
			continue
		}
		p.sends++
		p.mu.Unlock()
		retryAfter, err := p.send(p.ctx, frame)
		next = p.clock.Now().Add(p.interval)
		p.mu.Lock()
		switch {
		case retryAfter > 0:
			next = p.clock.Now().Add(max(retryAfter, p.interval))
		case err == nil:
			p.accepted = frame
			fallthrough
		default:
			p.lastSent = frame
			if p.pending == frame {
				p.has = false
			}
		}
		p.mu.Unlock()
	}
}

// sleep waits d, and reports false as soon as the pacer is closed.
func (p *Pacer) sleep(d time.Duration) bool {
	t := p.clock.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-t.Chan():
			return true
		case <-p.wake:
			p.mu.Lock()
			closed := p.closed
			p.mu.Unlock()
			if closed {
				return false
			}
		case <-p.ctx.Done():
			return false
		}
	}
}
