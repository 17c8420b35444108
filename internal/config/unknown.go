package config

import (
	"fmt"
	"slices"
	"strings"
)

// gatewayPrefixes start the names of the gateway's own settings. A .env
// name with one of them that is not a setting is almost surely a typo or a
// name from another project (DISCORD_TOKEN for DISCORD_BOT_TOKEN).
var gatewayPrefixes = []string{
	"DISCORD_", "AGENT_", "ALLOWED_", "MAX_", "LOG_", "QUERY_", "PERMISSION_", "CONFIG_", "OUTPUT_",
}

// knownNames are the names a .env name is compared with: every setting,
// the provider variables the gateway itself looks at, and NAME_FILE for
// each secret that may be given as a file.
var knownNames = func() []string {
	names := append(slices.Clone(keys),
		EnvAnthropicAuthToken, EnvOpenAIAPIKey, EnvGeminiAPIKey, EnvGoogleAPIKey, EnvIsSandbox)
	for _, s := range secretNames {
		names = append(names, s+FileSuffix)
	}
	return names
}()

// Unknown is a .env name that looks like a gateway setting but is not one.
type Unknown struct {
	// Name is the name as written (upper case).
	Name string
	// Suggestion is the closest known name, or "" when none is close.
	Suggestion string
}

func (u Unknown) String() string {
	if u.Suggestion == "" {
		return fmt.Sprintf("%s is set in .env but is not a gateway setting, so it has no effect (docs/configuration.md lists the settings)", u.Name)
	}
	return fmt.Sprintf("%s is set in .env but is not a gateway setting, so it has no effect: did you mean %s?", u.Name, u.Suggestion)
}

// UnknownNames returns the names that look like a gateway setting but are
// not one, with the closest known name, in the order given. A name looks
// like a setting when it is within a small edit distance of a known name,
// or starts with one of the gateway's prefixes (DISCORD_, AGENT_, ...).
// Known names, provider variables (ANTHROPIC_BASE_URL, ...) not close to a
// known name and unrelated names (PATH, MY_APP_PORT) are left alone, since
// a .env file is often shared with other tools. Case is ignored.
func UnknownNames(names []string) []Unknown {
	var out []Unknown
	seen := map[string]bool{}
	for _, name := range names {
		name = strings.ToUpper(strings.TrimSpace(name))
		if name == "" || seen[name] || slices.Contains(knownNames, name) {
			continue
		}
		seen[name] = true
		best, dist := closest(name, knownNames)
		prefixed := slices.ContainsFunc(gatewayPrefixes, func(p string) bool { return strings.HasPrefix(name, p) })
		switch {
		case dist <= typoDistance(name):
			out = append(out, Unknown{Name: name, Suggestion: best})
		case prefixed && !isProviderVar(name):
			u := Unknown{Name: name}
			if dist <= (max(len(name), len(best))+1)/2 {
				u.Suggestion = best
			}
			out = append(out, u)
		}
	}
	return out
}

// typoDistance is how many edits make a name a likely typo of another: one
// for short names, two from eight characters on.
func typoDistance(name string) int {
	if len(name) < 8 {
		return 1
	}
	return 2
}

// closest returns the candidate with the smallest edit distance to name
// (the first of equals) and that distance.
func closest(name string, candidates []string) (string, int) {
	best, dist := "", -1
	for _, c := range candidates {
		if d := editDistance(name, c); dist < 0 || d < dist {
			best, dist = c, d
		}
	}
	return best, dist
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
