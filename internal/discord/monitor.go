package discord

import (
	"strings"
)

// Monitor is told about the bot's traffic with Discord (the admin
// server's metrics). Implementations must be quick and safe for
// concurrent use.
type Monitor interface {
	// Request is told the answer to every REST request sent, each retry
	// included: its method, its route with ids and tokens replaced
	// ("/channels/{id}/messages") and its status, 0 when none came.
	Request(method, route string, status int)
	// Connection is told each change of the gateway connection: up after
	// a READY (resumed false) or a RESUMED (resumed true), down when it
	// dropped.
	Connection(up, resumed bool)
	// CaughtUp is told how many messages a catch-up fetched after a
	// reconnect or a restart.
	CaughtUp(messages int)
}

// OtherRoute is the route of a request that is not for Discord's API.
const OtherRoute = "other"

// route is a REST path with what varies replaced, so that requests can be
// counted by endpoint: ids become {id}, reaction emojis {emoji}, webhook
// and interaction tokens {token}, anything else that is not a plain word
// {x}. path is relative to the API's base ("/channels/1/messages").
func route(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i, p := range parts {
		prev, prev2 := "", ""
		if i > 0 {
			prev = parts[i-1]
		}
		if i > 1 {
			prev2 = parts[i-2]
		}
		switch {
		case p == "":
		case prev == "reactions":
			parts[i] = "{emoji}"
		case prev == "{id}" && (prev2 == "interactions" || prev2 == "webhooks"):
			parts[i] = "{token}"
		case strings.Trim(p, "0123456789") == "":
			parts[i] = "{id}"
		case len(p) > 32 || strings.Trim(p, "abcdefghijklmnopqrstuvwxyz-_@") != "":
			parts[i] = "{x}"
		}
	}
	return "/" + strings.Join(parts, "/")
}

// routeOf is route for a request's path, OtherRoute outside the API.
func (t *transport) routeOf(path string) string {
	rest, ok := strings.CutPrefix(path, t.from.Path)
	if !ok || (rest != "" && rest[0] != '/') {
		return OtherRoute
	}
	return route(rest)
}
