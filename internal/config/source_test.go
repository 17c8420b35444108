package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSource(t *testing.T) {
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("file-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	environ := map[string]string{
		EnvModel:                     "env-model",
		EnvMaxTurns:                  "7",    // also in .env: the environment wins
		EnvLogLevel:                  "  ",   // empty counts as unset: .env's value
		EnvQueryTimeoutMS:            "soon", // invalid: the default
		EnvDiscordToken + FileSuffix: token,
		"ANTHROPIC_BASE_URL":         "https://proxy.example",
	}
	dotenv := "AGENT_MAX_TURNS=9\nLOG_LEVEL=debug\nHISTORY_MESSAGES=3\nMAX_QUEUE_DEPTH=\nANTHROPIC_API_KEY=sk-dotenv\n"
	cfg, err := load(t, environ, dotenv, 0)
	if err == nil {
		t.Fatal("Load accepted QUERY_TIMEOUT_MS=soon")
	}
	for name, want := range map[string]string{
		EnvModel:                     SourceEnvironment,
		EnvMaxTurns:                  SourceEnvironment,
		EnvLogLevel:                  SourceEnvFile,
		EnvHistoryMessages:           SourceEnvFile,
		EnvMaxQueueDepth:             SourceDefault,
		EnvBackend:                   SourceDefault,
		EnvQueryTimeoutMS:            "default (invalid in environment)",
		EnvDiscordToken:              SourceFile,
		EnvDiscordToken + FileSuffix: SourceEnvironment,
		EnvAnthropicAPIKey:           SourceEnvFile,
		"ANTHROPIC_BASE_URL":         SourceEnvironment,
		ActionsEnv("moderation"):     SourceDefault,
	} {
		if got := cfg.Source(name); got != want {
			t.Errorf("Source(%s) = %q, want %q", name, got, want)
		}
	}
}

func TestSourceOfAnUnusableSecretFile(t *testing.T) {
	cfg, err := load(t, nil, "DISCORD_BOT_TOKEN_FILE=/nonexistent/token\n", 0)
	if err == nil {
		t.Fatal("Load accepted a token file that does not exist")
	}
	if got, want := cfg.Source(EnvDiscordToken), "default (invalid in DISCORD_BOT_TOKEN_FILE)"; got != want {
		t.Errorf("Source = %q, want %q", got, want)
	}
}

// Settings is Redacted with sources: the same names, values and order,
// no secret.
func TestSettingsMatchRedacted(t *testing.T) {
	cfg := mustLoad(t, map[string]string{EnvDiscordToken: "secret-token", EnvAdminToken: "secret-admin-token-0123"},
		"ANTHROPIC_API_KEY=secret-key\nOPENAI_API_KEY=secret-openai\n", 0)
	var lines []string
	for _, s := range cfg.Settings() {
		if s.Source == "" {
			t.Errorf("%s has no source", s.Name)
		}
		if strings.Contains(s.Value, "secret") {
			t.Errorf("%s shows a secret: %q", s.Name, s.Value)
		}
		lines = append(lines, s.Name+"="+s.Value+"\n")
	}
	if diff := cmp.Diff(cfg.Redacted(), strings.Join(lines, "")); diff != "" {
		t.Errorf("Settings differ from Redacted (-Redacted +Settings):\n%s", diff)
	}
}
