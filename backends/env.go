package backends

import "strings"

// baseEnv names the variables every CLI may see: what a process needs to
// find binaries, write temp files and format text. Everything else must be
// allowed by the adapter explicitly, so gateway secrets such as
// DISCORD_BOT_TOKEN never reach the agent.
var baseEnv = []string{
	"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TZ", "TMPDIR",
	"LANG", "LC_*", "XDG_*", "NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "SSL_CERT_DIR",
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
}

// neverEnv is refused even when an allow pattern matches it.
var neverEnv = []string{"DISCORD_*", "WEBHOOK_*"}

// FilterEnv returns the entries of env whose names match baseEnv or one of
// allow (a trailing * matches a prefix), minus deny and the gateway's own
// secrets. Later entries win over earlier ones with the same name.
func FilterEnv(env []string, allow []string, deny []string) []string {
	out := make([]string, 0, len(env))
	index := map[string]int{}
	for _, kv := range env {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			continue
		}
		if !matchAny(name, baseEnv) && !matchAny(name, allow) {
			continue
		}
		if matchAny(name, neverEnv) || matchAny(name, deny) {
			continue
		}
		if i, seen := index[name]; seen {
			out[i] = kv
			continue
		}
		index[name] = len(out)
		out = append(out, kv)
	}
	return out
}

func matchAny(name string, patterns []string) bool {
	for _, p := range patterns {
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			if strings.HasPrefix(name, prefix) {
				return true
			}
		} else if name == p {
			return true
		}
	}
	return false
}
