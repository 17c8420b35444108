package discord

import (
	"errors"
	"sync/atomic"

	"github.com/diamondburned/arikawa/v3/gateway"
	"github.com/diamondburned/arikawa/v3/utils/ws"
)

// connection is what the bot knows of its gateway connection.
type connection struct {
	// up is set at READY and RESUMED and cleared when the connection
	// drops, until the next of those.
	up atomic.Bool
}

// Connected reports whether the bot is connected to Discord's gateway
// now: it has had READY or RESUMED since the connection last dropped,
// and it is not closed. Prompts sent while it is not connected reach it
// later (a resumed session replays them, the catch-up fetches them).
func (b *Bot) Connected() bool {
	return b.conn.up.Load() && b.ctx.Err() == nil
}

// watchConnection keeps Connected current. arikawa reports a drop in
// several ways: the connection closed (CloseEvent, also for a dead TCP
// connection), Discord asked for a reconnect or invalidated the session,
// or a dial failed while it reconnects (a ConnectionError). It clears the
// state before its own reconnect in each case.
func (b *Bot) watchConnection() {
	b.state.AddSyncHandler(func(*gateway.ReadyEvent) { b.connectionUp(false) })
	b.state.AddSyncHandler(func(*gateway.ResumedEvent) { b.connectionUp(true) })
	b.state.AddSyncHandler(func(*ws.CloseEvent) { b.connectionDown() })
	b.state.AddSyncHandler(func(*gateway.ReconnectEvent) { b.connectionDown() })
	b.state.AddSyncHandler(func(*gateway.InvalidSessionEvent) { b.connectionDown() })
	b.state.AddSyncHandler(func(ev *ws.BackgroundErrorEvent) {
		var dial ws.ConnectionError
		if errors.As(ev.Err, &dial) {
			b.connectionDown()
		}
	})
}

func (b *Bot) connectionUp(resumed bool) {
	if !b.conn.up.Swap(true) && b.opts.Monitor != nil {
		b.opts.Monitor.Connection(true, resumed)
	}
}

func (b *Bot) connectionDown() {
	if b.conn.up.Swap(false) && b.opts.Monitor != nil {
		b.opts.Monitor.Connection(false, false)
	}
}

// caughtUp tells the Monitor what a catch-up fetched.
func (b *Bot) caughtUp(messages int) {
	if b.opts.Monitor != nil {
		b.opts.Monitor.CaughtUp(messages)
	}
}
