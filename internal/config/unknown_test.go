package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestUnknownNames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		names []string
		want  []Unknown
	}{
		{"known names", []string{"DISCORD_BOT_TOKEN", "log_level", "ANTHROPIC_API_KEY", "IS_SANDBOX"}, nil},
		{"token under another project's name", []string{"DISCORD_TOKEN"}, []Unknown{{"DISCORD_TOKEN", "DISCORD_BOT_TOKEN"}}},
		{"typo", []string{"LOG_LEVL"}, []Unknown{{"LOG_LEVL", "LOG_LEVEL"}}},
		{"lower case typo", []string{"permision_mode"}, []Unknown{{"PERMISION_MODE", "PERMISSION_MODE"}}},
		{"provider key typo", []string{"ANTHROPIC_API_KY"}, []Unknown{{"ANTHROPIC_API_KY", "ANTHROPIC_API_KEY"}}},
		{"sandbox typo", []string{"IS_SANBOX"}, []Unknown{{"IS_SANBOX", "IS_SANDBOX"}}},
		{"webhook address typo", []string{"WEBHOOK_ADR"}, []Unknown{{"WEBHOOK_ADR", "WEBHOOK_ADDR"}}},
		{"gateway prefix, nothing close", []string{"AGENT_FAVOURITE_COLOUR_OF_THE_WEEK"}, []Unknown{{"AGENT_FAVOURITE_COLOUR_OF_THE_WEEK", ""}}},
		{"gateway prefix, something close enough", []string{"MAX_CONCURRENT"}, []Unknown{{"MAX_CONCURRENT", "MAX_CONCURRENT_QUERIES"}}},
		{"provider variables pass", []string{"ANTHROPIC_BASE_URL", "CLAUDE_CODE_MAX_RETRIES", "OPENAI_BASE_URL"}, nil},
		{"webhook secrets pass", []string{"WEBHOOK_DEPLOY_SECRET", "DEPLOY_SECRET"}, nil},
		{"unrelated names pass", []string{"PATH", "MY_APP_PORT", "DATABASE_URL", "NODE_ENV"}, nil},
		{"reported once", []string{"LOG_LEVL", "log_levl"}, []Unknown{{"LOG_LEVL", "LOG_LEVEL"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, UnknownNames(tt.names)); diff != "" {
				t.Errorf("UnknownNames(%q) (-want +got):\n%s", tt.names, diff)
			}
		})
	}
}

func TestUnknownMessageNamesTheFix(t *testing.T) {
	t.Parallel()
	got := Unknown{Name: "DISCORD_TOKEN", Suggestion: "DISCORD_BOT_TOKEN"}.String()
	for _, want := range []string{"DISCORD_TOKEN", "not a gateway setting", "did you mean DISCORD_BOT_TOKEN?"} {
		if !strings.Contains(got, want) {
			t.Errorf("message %q lacks %q", got, want)
		}
	}
}

// Load reports the .env names, and only those: the process environment is
// full of unrelated variables.
func TestLoadReportsUnknownSettingsInEnvFile(t *testing.T) {
	t.Parallel()
	cfg, err := load(t, map[string]string{"DISCORD_BOT_TKN": "x"}, "DISCORD_TOKEN=abc\nLOG_LEVL=debug\nLOG_LEVEL=warn\nANTHROPIC_BASE_URL=http://127.0.0.1:9\n", 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []Unknown{{"DISCORD_TOKEN", "DISCORD_BOT_TOKEN"}, {"LOG_LEVL", "LOG_LEVEL"}}
	if diff := cmp.Diff(want, cfg.UnknownSettings(), cmpUnknownOrder); diff != "" {
		t.Errorf("UnknownSettings() (-want +got):\n%s", diff)
	}
}

var cmpUnknownOrder = cmp.Transformer("sorted", func(in []Unknown) map[string]string {
	m := map[string]string{}
	for _, u := range in {
		m[u.Name] = u.Suggestion
	}
	return m
})

func TestEditDistance(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"A", "", 1}, {"", "AB", 2}, {"LOG_LEVL", "LOG_LEVEL", 1},
		{"DISCORD_TOKEN", "DISCORD_BOT_TOKEN", 4}, {"KITTEN", "SITTING", 3},
	} {
		if got := editDistance(tt.a, tt.b); got != tt.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

// FuzzUnknownNames checks that a known name is never reported, a
// suggestion is always a known name, and a reported name is upper case.
func FuzzUnknownNames(f *testing.F) {
	for _, s := range []string{"DISCORD_TOKEN", "LOG_LEVL", "log_level", "", "AGENT_", "IS_SANBOX", "PATH", "ÄGENT_X"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		a, b := editDistance(name, "LOG_LEVEL"), editDistance("LOG_LEVEL", name)
		if a != b {
			t.Fatalf("editDistance not symmetric: %d, %d", a, b)
		}
		for _, u := range UnknownNames([]string{name}) {
			if u.Name != strings.ToUpper(strings.TrimSpace(name)) {
				t.Errorf("reported %q for %q", u.Name, name)
			}
			for _, k := range knownNames {
				if u.Name == k {
					t.Errorf("known name %q reported", k)
				}
			}
			if u.Suggestion != "" && !containsString(knownNames, u.Suggestion) {
				t.Errorf("suggestion %q is not a known name", u.Suggestion)
			}
		}
	})
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestIsSet(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		environ map[string]string
		dotenv  string
		want    bool
	}{
		{"unset", nil, "", false},
		{"default value in the environment", map[string]string{EnvLogLevel: "info"}, "", true},
		{"in .env", nil, "LOG_LEVEL=debug\n", true},
		{"empty counts as unset", map[string]string{EnvLogLevel: " "}, "LOG_LEVEL=\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := load(t, tt.environ, tt.dotenv, 0)
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.IsSet(EnvLogLevel); got != tt.want {
				t.Errorf("IsSet(LOG_LEVEL) = %v, want %v", got, tt.want)
			}
		})
	}
}
