// Package limit holds back the prompts of one login while the model API
// refuses it for a usage or rate limit, and lets them run once the limit
// resets.
//
// One Gate stands for one login: the backend and credentials a gateway
// process runs its agent CLI with. A prompt whose run the model API
// refused with a reset time closes the gate until then, waits, and runs
// again; every other prompt of the login waits at the gate before it runs
// instead of failing one by one. The waiting is in memory: a prompt that
// waits stays unfinished in the inbox, so after a restart it runs again,
// meets the limit again and waits again.
//
// A Gate is safe for concurrent use.
package limit

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/agentgateway/gateway/backends"
)

// Limit is a usage or rate limit the model API reported for the login.
type Limit struct {
	// ResetAt is when requests are accepted again.
	ResetAt time.Time
	// Window names the limit when the CLI did ("five_hour",
	// "seven_day", ...); empty otherwise.
	Window string
}

// Of returns the limit that failed a run, and false when err is no limit
// or the CLI did not say when it resets (then there is nothing to wait
// for, and the failure stands).
func Of(err error) (Limit, bool) {
	at, ok := backends.ResetOf(err)
	if !ok {
		return Limit{}, false
	}
	var e *backends.Error
	errors.As(err, &e)
	return Limit{ResetAt: at, Window: e.LimitWindow}, true
}

// Notice is what a waiting prompt is told about its wait.
type Notice struct {
	Limit Limit
	// Own is set when this prompt's own run met the limit; otherwise it
	// waits behind a limit another prompt of the login met.
	Own bool

	clock clockwork.Clock // the gate's
}

// Left is how long the wait has left by the gate's clock.
func (n *Notice) Left() time.Duration {
	if n.clock == nil {
		return time.Until(n.Limit.ResetAt)
	}
	return n.Limit.ResetAt.Sub(n.clock.Now())
}

// Gate holds the prompts of one login while a limit lasts. The zero Gate
// is not usable; make one with New. A nil *Gate never holds anything back.
type Gate struct {
	clock clockwork.Clock

	mu      sync.Mutex // guards limit and waiting
	limit   Limit      // the latest limit met; over once its ResetAt has passed
	waiting int        // prompts in Wait now

	closed    chan struct{} // closed by Close
	closeOnce sync.Once
}

// ErrClosed is what Wait and Do return once the gate is closed for a
// shutdown: the waiting prompts stop waiting and stay for the next start.
var ErrClosed = errors.New("the gateway is stopping")

// New returns an open gate that tells the time by clock.
func New(clock clockwork.Clock) *Gate {
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	return &Gate{clock: clock, closed: make(chan struct{})}
}

// Close ends every wait at once with ErrClosed, and every later one: the
// gateway is stopping, and a prompt waiting for a reset hours away must
// not hold its drain. Safe to call more than once, and on a nil gate.
func (g *Gate) Close() {
	if g == nil {
		return
	}
	g.closeOnce.Do(func() { close(g.closed) })
}

// Hit closes the gate until l.ResetAt. A reset earlier than the one in
// force changes nothing: requests stay refused until the later one.
func (g *Gate) Hit(l Limit) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if l.ResetAt.After(g.limit.ResetAt) {
		g.limit = l
	}
}

// Current returns the limit in force, and false when the login's
// requests may go.
func (g *Gate) Current() (Limit, bool) {
	if g == nil {
		return Limit{}, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.clock.Now().Before(g.limit.ResetAt) {
		return Limit{}, false
	}
	return g.limit, true
}

// Left is how long the limit in force has left; 0 when there is none.
func (g *Gate) Left() time.Duration {
	l, ok := g.Current()
	if !ok {
		return 0
	}
	return l.ResetAt.Sub(g.clock.Now())
}

// Waiting is how many prompts wait at the gate now.
func (g *Gate) Waiting() int {
	if g == nil {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waiting
}

// Wait blocks until no limit is in force, or ctx ends (then it returns
// ctx's cause). A limit met again while it waits is waited for too.
func (g *Gate) Wait(ctx context.Context) error {
	g.mu.Lock()
	g.waiting++
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.waiting--
		g.mu.Unlock()
	}()
	for {
		l, closed := g.Current()
		if !closed {
			return nil
		}
		timer := g.clock.NewTimer(l.ResetAt.Sub(g.clock.Now()))
		select {
		case <-timer.Chan():
		case <-ctx.Done():
			timer.Stop()
			return context.Cause(ctx)
		case <-g.closed:
			timer.Stop()
			return ErrClosed
		}
	}
}

// Do runs a prompt's turn once the gate is open. When the turn reports a
// limit with a reset still ahead, the gate closes until then and the turn
// runs again after the reset, as often as it takes. tell, if not nil, is
// told before each wait what the prompt waits for, and nil when the wait
// is over. Do returns ctx's cause when ctx ended during a wait, and
// ErrClosed when the gate was closed during one (the turn's latest
// outcome stands), nil otherwise.
func (g *Gate) Do(ctx context.Context, tell func(*Notice), turn func() (Limit, bool)) error {
	if tell == nil {
		tell = func(*Notice) {}
	}
	own := false
	for {
		if g != nil {
			if l, closed := g.Current(); closed {
				tell(&Notice{Limit: l, Own: own, clock: g.clock})
				err := g.Wait(ctx)
				tell(nil)
				if err != nil {
					return err
				}
			}
		}
		l, limited := turn()
		if g == nil || !limited || !l.ResetAt.After(g.clock.Now()) {
			return nil
		}
		g.Hit(l)
		own = true
	}
}

// NoResetNote is what a failed prompt's reply adds when the model API
// refused it for a rate limit without saying when it resets: the prompt
// is not kept, so the user knows to send it again.
const NoResetNote = "_(The model API did not say when the limit resets, so this prompt was not kept to run later: send it again in a while.)_"

// WithoutReset reports whether err is a rate limit that came without a
// reset time.
func WithoutReset(err error) bool {
	_, timed := backends.ResetOf(err)
	return err != nil && backends.KindOf(err) == backends.KindRateLimit && !timed
}
