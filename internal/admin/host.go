package admin

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// hostPolicy is which Host headers the server answers. A page at a name
// its author controls can re-resolve that name to 127.0.0.1 (DNS
// rebinding); the browser then treats the admin server as that page's own
// origin, and lets it read /events and press the buttons. What it cannot
// change is the Host header, which names the attacker's name: so the
// server answers only the names of its own address, and those an operator
// lists (ADMIN_HOSTS). A policy is read-only once made.
type hostPolicy struct {
	// port is the port the server listens on.
	port string
	// names are accepted on port, lower case, IPv6 without brackets.
	names map[string]bool
	// anyPort are accepted on any port (ADMIN_HOSTS entries without one).
	anyPort map[string]bool
	// withPort are accepted only as "name:port" (ADMIN_HOSTS entries
	// with one).
	withPort map[string]bool
	// anyIP: the server listens on every address, so any IP literal (and
	// localhost) names it, on any port since a published container port
	// or a NAT may change it. A rebinding attack cannot send an IP
	// literal: the name in the page's address is the attacker's.
	anyIP bool
}

// loopbackNames name the loopback address whatever the listener's family.
var loopbackNames = []string{"localhost", "127.0.0.1", "::1"}

// newHostPolicy makes the policy of a server configured to listen on
// configured (ADMIN_ADDR), listening on listening (its real address, with
// the port picked for port 0), that also answers hosts (ADMIN_HOSTS).
func newHostPolicy(configured string, listening net.Addr, hosts []string) (hostPolicy, error) {
	p := hostPolicy{names: map[string]bool{}, anyPort: map[string]bool{}, withPort: map[string]bool{}}
	ip, port, err := net.SplitHostPort(listening.String())
	if err != nil {
		return p, fmt.Errorf("admin server address %s: %w", listening, err)
	}
	p.port = port
	name, _, _ := net.SplitHostPort(configured)
	name = strings.ToLower(name)
	listenIP := net.ParseIP(ip)
	switch {
	case name == "" || listenIP == nil || listenIP.IsUnspecified():
		p.anyIP = true
	case listenIP.IsLoopback() || name == "localhost":
		for _, n := range loopbackNames {
			p.names[n] = true
		}
	}
	p.names[strings.ToLower(listenIP.String())] = true
	if name != "" && net.ParseIP(name) == nil {
		p.names[name] = true // ADMIN_ADDR gave a name: the operator's
	}
	for _, h := range hosts {
		n, port, err := parseHost(h)
		if err != nil {
			return p, fmt.Errorf("ADMIN_HOSTS: %w", err)
		}
		if port == "" {
			p.anyPort[n] = true
		} else {
			p.withPort[net.JoinHostPort(n, port)] = true
		}
	}
	return p, nil
}

// parseHost checks an ADMIN_HOSTS entry, "host" or "host:port", and returns
// its name (lower case, IPv6 without brackets) and port ("" for any).
func parseHost(s string) (name, port string, err error) {
	name, port = splitHost(s)
	if name == "" || strings.ContainsAny(name, "/@?#% \t") || (strings.Contains(name, ":") && net.ParseIP(name) == nil) {
		return "", "", fmt.Errorf("%q is not a host name or host:port", s)
	}
	if port != "" {
		if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
			return "", "", fmt.Errorf("%q: the port is not a number from 1 to 65535", s)
		}
	} else if strings.HasSuffix(s, ":") {
		return "", "", fmt.Errorf("%q has an empty port", s)
	}
	return name, port, nil
}

// splitHost splits a Host header or an ADMIN_HOSTS entry into its name
// (lower case, IPv6 without brackets) and port ("" when none is given).
// What is neither host nor host:port gives an empty name.
func splitHost(h string) (name, port string) {
	h = strings.ToLower(h)
	if n, p, err := net.SplitHostPort(h); err == nil {
		if strings.Contains(n, ":") && !strings.HasPrefix(h, "[") {
			return "", "" // an IPv6 address names its port only in brackets
		}
		return n, p
	}
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		n := h[1 : len(h)-1]
		if net.ParseIP(n) == nil {
			return "", ""
		}
		return n, ""
	}
	if strings.ContainsAny(h, "[]") {
		return "", ""
	}
	if strings.Contains(h, ":") && net.ParseIP(h) == nil {
		return "", "" // "a:b:c", or a port that is not one
	}
	return h, ""
}

// allows reports whether the server answers a request whose Host header
// is host.
func (p hostPolicy) allows(host string) bool {
	name, port := splitHost(host)
	switch {
	case name == "":
		return false
	case p.anyPort[name], port != "" && p.withPort[net.JoinHostPort(name, port)]:
		return true
	case p.anyIP && (name == "localhost" || net.ParseIP(name) != nil):
		return true
	}
	return port == p.port && p.names[name]
}

// checkHost refuses requests to another name with 421 Misdirected Request,
// except /healthz: it tells nothing, and a container's HEALTHCHECK may
// reach the server under any name.
func (p hostPolicy) checkHost(next http.Handler, s *Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" || p.allows(r.Host) {
			next.ServeHTTP(w, r)
			return
		}
		// Debug: any page on the web can make a browser send these.
		s.log.Debug().Str("remote", clientIP(r)).Msg("admin server: refused a request for another host name")
		h := w.Header()
		h.Set("Content-Type", "text/plain; charset=utf-8")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusMisdirectedRequest)
		io.WriteString(w, "misdirected request: this admin server answers only at its own address; "+
			"to reach it under another name, add that name to ADMIN_HOSTS\n")
	})
}
