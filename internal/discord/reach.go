package discord

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/diamondburned/arikawa/v3/gateway"
	"github.com/diamondburned/arikawa/v3/utils/ws"
)

// UnreachableError is a connection to Discord (its gateway or its REST
// API) that failed below HTTP: the host could not be resolved, refused or
// reset the connection, did not answer in time, or failed TLS. It says so
// in words an operator can act on; Err is the network error itself.
type UnreachableError struct {
	// API is set for Discord's REST API, clear for its gateway.
	API bool
	// Host is the host (and port, if the URL has one) dialled: never a
	// path or credentials.
	Host string
	// Setting names the variable the address came from when it is the
	// operator's (DISCORD_GATEWAY_URL); empty for Discord's own.
	Setting string
	// Attempts and Waited are how often and how long the gateway was
	// dialled before giving up; zero for a single request.
	Attempts int
	Waited   time.Duration
	Err      error
}

func (e *UnreachableError) Error() string {
	what, check, _ := unreachableCause(e.Err)
	role := "gateway"
	if e.API {
		role = "API"
	}
	subject := "Discord's " + role + " host " + e.Host
	if e.Setting != "" {
		subject = "the " + role + " host " + e.Host + " (" + e.Setting + ")"
		check = e.Setting + ", " + check
	}
	msg := subject + " " + what + ": check " + check
	if e.Attempts > 0 {
		msg += fmt.Sprintf(" (%d attempts in %s)", e.Attempts, roundedDuration(e.Waited))
	}
	return msg
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// unreachableCause classifies a network error: what happened to the host
// ("cannot be resolved (DNS: no such host)") and what to check ("DNS and
// the network"). ok is false for an error that is not a network failure
// (an HTTP answer, a canceled context).
func unreachableCause(err error) (what, check string, ok bool) {
	const network = "the network, and a firewall or proxy in between"
	var dns *net.DNSError
	var certs *tls.CertificateVerificationError
	var authority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var record tls.RecordHeaderError
	var alert tls.AlertError
	var ne net.Error
	switch {
	case errors.As(err, &dns):
		detail := dns.Err
		switch {
		case dns.IsNotFound:
			detail = "no such host"
		case dns.IsTimeout:
			detail = "no answer from the name server"
		}
		return "cannot be resolved (DNS: " + detail + ")", "DNS and the network", true
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused the connection", network, true
	case errors.Is(err, syscall.ECONNRESET):
		return "reset the connection", network, true
	case errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.EHOSTDOWN):
		return "cannot be reached (no route to it)", network, true
	case errors.As(err, &certs), errors.As(err, &authority), errors.As(err, &hostname), errors.As(err, &invalid),
		errors.As(err, &record), errors.As(err, &alert):
		return "failed the TLS handshake (" + tlsDetail(err) + ")",
			"the system's CA certificates and clock, or a proxy that intercepts TLS", true
	case errors.Is(err, context.Canceled):
		return "", "", false
	case errors.As(err, &ne) && ne.Timeout():
		return "did not answer in time", network, true
	}
	return "", "", false
}

// tlsDetail is the most specific message of a TLS failure.
func tlsDetail(err error) string {
	var certs *tls.CertificateVerificationError
	if errors.As(err, &certs) {
		return certs.Err.Error()
	}
	var record tls.RecordHeaderError
	if errors.As(err, &record) {
		return record.Msg
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return op.Err.Error()
	}
	return err.Error()
}

// roundedDuration is d to the second ("60s"), or to the millisecond below
// one.
func roundedDuration(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return strconv.Itoa(int(d.Round(time.Second)/time.Second)) + "s"
}

// restUnreachable is err as an UnreachableError when a REST request to
// Discord (at apiBaseURL if set) failed below HTTP; nil otherwise.
func restUnreachable(err error, apiBaseURL string) *UnreachableError {
	if _, _, ok := unreachableCause(err); !ok {
		return nil
	}
	u := &UnreachableError{API: true, Host: "discord.com", Err: err}
	if apiBaseURL != "" {
		// The request's URL is Discord's: the transport rewrites it below
		// the client.
		u.Setting = "DISCORD_API_BASE_URL"
		if parsed, perr := url.Parse(apiBaseURL); perr == nil && parsed.Host != "" {
			u.Host = parsed.Host
		}
		return u
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		if parsed, perr := url.Parse(uerr.URL); perr == nil && parsed.Host != "" {
			u.Host = parsed.Host
		}
	}
	return u
}

// dials follows the gateway's failed dials, from the first after the
// connection was last up to the next READY or RESUMED, so that an outage
// is reported once, with its cause, rather than at every retry.
type dials struct {
	// host and setting are the gateway's, as in UnreachableError.
	host, setting string

	mu sync.Mutex // guards the fields below
	// failed counts the dials failed since the connection was last up;
	// last is the error of the latest.
	failed int
	last   error
	// opening is set while Open waits for the first connection, for at
	// most limit (zero: as long as its context lets it), since start.
	opening bool
	limit   time.Duration
	start   time.Time
	// gaveUp is set when Open gave up: nothing is reported any more.
	gaveUp bool
}

func newDials(gatewayURL string, custom bool) *dials {
	d := &dials{host: gatewayURL}
	if u, err := url.Parse(gatewayURL); err == nil && u.Host != "" {
		d.host = u.Host
	}
	if custom {
		d.setting = "DISCORD_GATEWAY_URL"
	}
	return d
}

// open starts the wait for the first connection, bounded by ctx.
func (d *dials) open(ctx context.Context) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failed, d.last, d.opening, d.gaveUp, d.limit = 0, nil, true, false, 0
	d.start = time.Now()
	if deadline, ok := ctx.Deadline(); ok {
		d.limit = time.Until(deadline)
	}
}

// up clears the count: the connection is up.
func (d *dials) up() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failed, d.last, d.opening = 0, nil, false
}

// fail records a failed dial and returns how many failed in a row.
func (d *dials) fail(err error) (n int, opening bool, limit time.Duration, gaveUp bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.gaveUp {
		return 0, false, 0, true
	}
	d.failed++
	d.last = err
	return d.failed, d.opening, d.limit, false
}

// giveUp ends the wait for the first connection and returns why it
// failed: the last failed dial as an UnreachableError when it was a
// network failure, that dial's own error otherwise, nil when no dial
// failed.
func (d *dials) giveUp() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.gaveUp, d.opening = true, false
	if d.last == nil {
		return nil
	}
	waited := time.Since(d.start)
	if _, _, ok := unreachableCause(d.last); !ok {
		return fmt.Errorf("no connection in %d attempts in %s: %w", d.failed, roundedDuration(waited), d.last)
	}
	return &UnreachableError{Host: d.host, Setting: d.setting, Attempts: d.failed, Waited: waited, Err: d.last}
}

// watchDials reports the gateway's trouble: a failed dial once per outage,
// with its cause, and nothing of the bot's own close. Sync handlers: they
// have all run when arikawa's event loop has stopped, so nothing is
// logged once Open gave up.
func (b *Bot) watchDials() {
	b.state.AddSyncHandler(func(*gateway.ReadyEvent) { b.dials.up() })
	b.state.AddSyncHandler(func(*gateway.ResumedEvent) { b.dials.up() })
	b.state.AddSyncHandler(func(ev *ws.BackgroundErrorEvent) {
		var dial ws.ConnectionError
		switch {
		case errors.Is(ev.Err, context.Canceled) || errors.Is(ev.Err, ws.ErrWebsocketClosed) || b.ctx.Err() != nil:
			// The loop stopping: Open gave up, or Close.
			b.log.Debug().Err(ev.Err).Msg("Discord connection closed")
		case errors.As(ev.Err, &dial):
			b.dialFailed(dial.Err)
		default:
			b.log.Warn().Err(ev.Err).Msg("Discord connection trouble; reconnecting")
		}
	})
}

// dialFailed reports a failed dial: the first of an outage as a warning
// that says why, the others at debug level.
func (b *Bot) dialFailed(err error) {
	n, opening, limit, gaveUp := b.dials.fail(err)
	if gaveUp {
		return
	}
	if n > 1 {
		b.log.Debug().Err(err).Int("attempts", n).Msg("Discord still cannot be reached; retrying")
		return
	}
	cause := err.Error()
	if what, _, ok := unreachableCause(err); ok {
		cause = b.dials.host + " " + what
	}
	next := "; reconnecting until it can"
	switch {
	case opening && limit > 0:
		next = "; retrying for up to " + roundedDuration(limit)
	case opening:
		next = "; retrying until it can"
	}
	b.log.Warn().Err(err).Msg("cannot reach Discord: " + cause + next)
}
