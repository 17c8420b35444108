package config

import (
	"net"
	"strconv"
	"strings"
)

// MinSecretBytes is the shortest secret the gateway takes from an
// operator: a webhook's and ADMIN_TOKEN. Shorter ones can be guessed.
const MinSecretBytes = 16

// parseAdminToken takes ADMIN_TOKEN when it is long enough. The message
// gives its length, never its value.
func parseAdminToken(name, s string) (string, error) {
	if s != "" && len(s) < MinSecretBytes {
		return "", varErrorf(name, "%s is %d bytes long; it must have at least %d (e.g. openssl rand -hex 32)",
			name, len(s), MinSecretBytes)
	}
	return s, nil
}

// parseHosts parses ADMIN_HOSTS: comma-separated names, each "host" (any
// port) or "host:port", with IPv6 addresses in brackets. Names are lower
// case, as hosts compare.
func parseHosts(name, s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	var hosts, bad []string
	for _, h := range splitList(s) {
		h = strings.ToLower(h)
		if validHost(h) {
			hosts = append(hosts, h)
		} else {
			bad = append(bad, quote(h))
		}
	}
	switch {
	case len(bad) > 0:
		return nil, varErrorf(name, "%s: %s is not a host or host:port (e.g. admin.example.com or gw.lan:8081; no scheme or path)",
			name, strings.Join(bad, ", "))
	case len(hosts) == 0:
		return nil, varErrorf(name, "%s: %s names no hosts (unset it to answer only the admin server's own address)", name, quote(s))
	}
	return hosts, nil
}

// validHost reports whether h is a host name or IP address, with an
// optional port from 1 to 65535; an IPv6 address in brackets.
func validHost(h string) bool {
	host := h
	if n, port, err := net.SplitHostPort(h); err == nil {
		if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
			return false
		}
		host = n
		if strings.Contains(host, ":") && !strings.HasPrefix(h, "[") {
			return false
		}
	} else if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		return net.ParseIP(h[1:len(h)-1]) != nil
	}
	if net.ParseIP(host) != nil {
		return !strings.Contains(host, ":") || strings.HasPrefix(h, "[")
	}
	if host == "" || len(host) > 253 {
		return false
	}
	for _, label := range strings.Split(host, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' && r != '_' {
				return false
			}
		}
	}
	return true
}

// adminNeedsToken says why the admin server cannot run without a token
// when the agent runs as AGENT_USER: a loopback address keeps out other
// machines, not other users of this one, and the agent could then stop
// turns, reset sessions and read every channel's prompts with curl. A
// token ADMIN_TOKEN had that was rejected already has its own problem.
func adminNeedsToken(c *Config, bad map[string]bool) error {
	if c.AdminAddr == "" || c.AdminToken != "" || c.AgentUser == "" || bad[EnvAdminToken] {
		return nil
	}
	return varErrorf(EnvAdminToken,
		"%s must be set when %s is set and %s is: the agent runs on this machine and could use the admin server as you do; "+
			"set %s (e.g. openssl rand -hex 32), or unset %s to turn the admin server off",
		EnvAdminToken, EnvAgentUser, EnvAdminAddr, EnvAdminToken, EnvAdminAddr)
}
