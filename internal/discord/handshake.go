package discord

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/diamondburned/arikawa/v3/utils/ws"
	"github.com/gorilla/websocket"
)

// HandshakeError is the first connection to the gateway URL answered with
// an HTTP status that no retry changes (a 404 from a URL that is not a
// gateway, a 400, a redirect): the URL is wrong.
type HandshakeError struct {
	Status int
	// Custom is set when the URL is the operator's (DISCORD_GATEWAY_URL),
	// not Discord's own.
	Custom bool
}

func (e *HandshakeError) Error() string {
	where := "Discord's gateway (" + DefaultGatewayURL + ")"
	fix := "this is Discord's side or a proxy in between; try again later"
	if e.Custom {
		where = "the gateway at DISCORD_GATEWAY_URL"
		fix = "check DISCORD_GATEWAY_URL: a ws:// or wss:// URL of a Discord gateway (wss://gateway.discord.gg, or the proxy's gateway address), not its REST API"
	}
	return fmt.Sprintf("%s answered HTTP %d %s instead of opening a websocket: %s",
		where, e.Status, http.StatusText(e.Status), fix)
}

// permanentHandshake reports whether a handshake answered with status
// fails again whatever the wait: not a timeout (408), a rate limit (429) or
// a server error (5xx), which may pass.
func permanentHandshake(status int) bool {
	return status != http.StatusSwitchingProtocols && status != http.StatusRequestTimeout &&
		status != http.StatusTooManyRequests && status < 500
}

// handshakeConn is arikawa's websocket connection with a look at why a
// handshake failed. arikawa redials a gateway URL that answers with an
// HTTP error every few seconds for as long as it is let, reporting only
// "bad handshake"; while Bot.Open waits for the first connection, a status
// no retry changes ends the wait instead (watch).
type handshakeConn struct {
	ws.Connection
	custom bool
	dialer websocket.Dialer

	mu      sync.Mutex // guards refused
	refused func(error)
}

func newHandshakeConn(conn ws.Connection, custom bool) *handshakeConn {
	return &handshakeConn{Connection: conn, custom: custom,
		dialer: websocket.Dialer{Proxy: http.ProxyFromEnvironment, HandshakeTimeout: 10 * time.Second}}
}

// watch makes a bad handshake with a permanent status call refused (nil:
// stop watching).
func (c *handshakeConn) watch(refused func(error)) {
	c.mu.Lock()
	c.refused = refused
	c.mu.Unlock()
}

// Dial dials as arikawa does. After a bad handshake, while watched, it
// dials once more itself to read the HTTP status arikawa drops.
func (c *handshakeConn) Dial(ctx context.Context, addr string) (<-chan ws.Op, error) {
	ops, err := c.Connection.Dial(ctx, addr)
	if err == nil || !errors.Is(err, websocket.ErrBadHandshake) {
		return ops, err
	}
	c.mu.Lock()
	refused := c.refused
	c.mu.Unlock()
	if refused == nil {
		return ops, err
	}
	conn, resp, perr := c.dialer.DialContext(ctx, addr, nil)
	if perr == nil {
		conn.Close() // it works now: arikawa's next try will get through
		return ops, err
	}
	if resp != nil {
		resp.Body.Close()
		if permanentHandshake(resp.StatusCode) {
			refused(&HandshakeError{Status: resp.StatusCode, Custom: c.custom})
		}
	}
	return ops, err
}
