package fakeapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// Exchange is what every fake records of one request, whatever its API.
// Each fake's request type embeds it. Its Header, Body and JSON are shared
// with the fake's log: read them, don't change them.
type Exchange struct {
	Seq    int // arrival order, from 0, over all kinds
	Method string
	Path   string
	Query  string // raw query, e.g. "beta=true"
	Header http.Header
	Body   []byte
	// JSON is the decoded body; nil when the body is not a JSON object.
	JSON map[string]any
	Kind Kind
	// Turn is the index of the script turn that answered a Main request,
	// or -1 (not Main, or the script was exhausted).
	Turn int
	// Exhausted is true for a Main request that came after the script ran
	// out and got ScriptExhaustedText.
	Exhausted bool
}

// readExchange reads r into an Exchange of kind Other (the fake classifies
// it afterwards).
func readExchange(r *http.Request) Exchange {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	e := Exchange{
		Method: r.Method,
		Path:   r.URL.Path,
		Query:  r.URL.RawQuery,
		Header: r.Header.Clone(),
		Body:   body,
		Kind:   Other,
		Turn:   -1,
	}
	if json.Unmarshal(body, &e.JSON) != nil {
		e.JSON = nil
	}
	return e
}

// recorder is what every fake API shares: the script of turns, the log of
// requests, waiting on them, and stalls that end when the fake closes. R is
// the fake's request type; exchange finds its Exchange.
type recorder[R any] struct {
	exchange      func(*R) *Exchange
	defaultIsMain func(R) bool

	closed    chan struct{} // closed by shut: stalled handlers return
	closeOnce sync.Once

	mu       sync.Mutex // guards the fields below, and the fakes' id counters
	isMainFn func(R) bool
	script   []Turn // all turns ever added; next is the one to use
	next     int
	requests []R
	inflight int           // handlers running
	changed  chan struct{} // closed and replaced when requests or inflight change
}

func newRecorder[R any](turns []Turn, isMain func(R) bool, exchange func(*R) *Exchange) *recorder[R] {
	return &recorder[R]{
		exchange:      exchange,
		defaultIsMain: isMain,
		closed:        make(chan struct{}),
		script:        append([]Turn(nil), turns...),
		changed:       make(chan struct{}),
	}
}

// shut makes stalled requests return; the fake then closes its server.
func (l *recorder[R]) shut() {
	l.closeOnce.Do(func() { close(l.closed) })
}

// Add appends turns to the script.
func (l *recorder[R]) Add(turns ...Turn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.script = append(l.script, turns...)
}

// SetIsMain replaces the rule that tells Main requests from Helper ones
// (the fake's default rule; nil restores it), for a CLI whose side
// requests the default gets wrong. It applies to requests that arrive
// afterwards.
func (l *recorder[R]) SetIsMain(isMain func(R) bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.isMainFn = isMain
}

func (l *recorder[R]) isMain(r R) bool {
	l.mu.Lock()
	f := l.isMainFn
	l.mu.Unlock()
	if f == nil {
		f = l.defaultIsMain
	}
	return f(r)
}

// Remaining is the number of script turns not yet used.
func (l *recorder[R]) Remaining() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.script) - l.next
}

// Requests is every request so far, in arrival order.
func (l *recorder[R]) Requests() []R {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]R(nil), l.requests...)
}

// MainRequests is the Main requests so far, in arrival order.
func (l *recorder[R]) MainRequests() []R { return l.onlyMain(l.Requests()) }

func (l *recorder[R]) onlyMain(reqs []R) []R {
	var out []R
	for i := range reqs {
		if l.exchange(&reqs[i]).Kind == Main {
			out = append(out, reqs[i])
		}
	}
	return out
}

// Exhausted is the number of Main requests that came after the script ran
// out. A test whose script should have covered the conversation checks it
// is 0.
func (l *recorder[R]) Exhausted() int {
	n := 0
	reqs := l.MainRequests()
	for i := range reqs {
		if l.exchange(&reqs[i]).Exhausted {
			n++
		}
	}
	return n
}

// WaitFor waits until done holds for the requests so far, and returns them.
// done is called with the fake's lock held: it must not call the fake. When
// ctx ends first it returns the requests and ctx's error.
func (l *recorder[R]) WaitFor(ctx context.Context, done func([]R) bool) ([]R, error) {
	for {
		l.mu.Lock()
		ok := done(l.requests)
		reqs, changed := append([]R(nil), l.requests...), l.changed
		l.mu.Unlock()
		if ok {
			return reqs, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return reqs, fmt.Errorf("fakeapi: wait: %w", ctx.Err())
		}
	}
}

// WaitMain waits until at least n Main requests have arrived and returns
// the Main requests. A request counts when it arrives, before it is
// answered, so a stalled one counts too.
func (l *recorder[R]) WaitMain(ctx context.Context, n int) ([]R, error) {
	reqs, err := l.WaitFor(ctx, func(reqs []R) bool {
		return len(l.onlyMain(reqs)) >= n
	})
	main := l.onlyMain(reqs)
	if err != nil {
		return main, fmt.Errorf("got %d of %d main requests: %w", len(main), n, err)
	}
	return main, nil
}

// WaitIdle waits until no request is being handled, e.g. until a stalled
// request has seen its client go away.
func (l *recorder[R]) WaitIdle(ctx context.Context) error {
	for {
		l.mu.Lock()
		n, changed := l.inflight, l.changed
		l.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("fakeapi: %d requests still running: %w", n, ctx.Err())
		}
	}
}

// record logs req, gives it its Seq and, for a Main request, takes the next
// turn of the script. Every record is followed by a done when the handler
// returns.
func (l *recorder[R]) record(req *R) Turn {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.exchange(req)
	e.Seq = len(l.requests)
	var turn Turn
	if e.Kind == Main {
		if l.next < len(l.script) {
			e.Turn = l.next
			turn = l.script[l.next]
			l.next++
		} else {
			e.Exhausted = true
			turn = Text(ScriptExhaustedText)
		}
	}
	l.requests = append(l.requests, *req)
	l.inflight++
	l.notifyLocked()
	return turn
}

// done marks a handler finished.
func (l *recorder[R]) done() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inflight--
	l.notifyLocked()
}

func (l *recorder[R]) notifyLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// stall blocks until the client goes away or the fake is closed.
func (l *recorder[R]) stall(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-l.closed:
	}
}
