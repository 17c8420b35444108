package config

import (
	"strconv"
)

// maxUserNameLen is the longest user name useradd accepts.
const maxUserNameLen = 32

// parseAgentUser checks the shape of AGENT_USER: a user name as useradd
// accepts it (letters, digits, '_', '.', '-', not starting with '-', an
// optional trailing '$') or a numeric uid. It does not look the user up:
// whether the user exists, and whether the gateway may switch to it, is
// checked at start by internal/agentuser, where the fix can be named. Root
// is refused: running the agent as root gives it everything the separate
// user is meant to keep from it.
func parseAgentUser(name, s string) (string, error) {
	if s == "" {
		return "", nil
	}
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		if n == 0 {
			return "", varErrorf(name, "%s: uid 0 is root; name an unprivileged user for the agent", name)
		}
		if n == 1<<32-1 {
			return "", varErrorf(name, "%s: %s is not a valid uid", name, quote(s))
		}
		return s, nil
	}
	if s == "root" {
		return "", varErrorf(name, "%s: root would give the agent everything; name an unprivileged user for the agent", name)
	}
	if !validUserName(s) {
		return "", varErrorf(name, "%s: %s is neither a user name nor a uid", name, quote(s))
	}
	return s, nil
}

// validUserName reports whether s has the shape of a user name.
func validUserName(s string) bool {
	if s == "" || len(s) > maxUserNameLen || s[0] == '-' {
		return false
	}
	body := s
	if body[len(body)-1] == '$' {
		body = body[:len(body)-1]
	}
	if body == "" {
		return false
	}
	allDigits := true
	for _, c := range body {
		switch {
		case c >= '0' && c <= '9':
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_', c == '.', c == '-':
			allDigits = false
		default:
			return false
		}
	}
	return !allDigits
}
