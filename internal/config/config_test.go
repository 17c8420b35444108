package config

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/agentgateway/gateway/internal/actions"
)

var seedFlag = flag.Uint64("seed", 0, "seed for the property tests (0: from the clock)")

// cmpConfig compares Configs by their exported fields.
var cmpConfig = cmp.Options{cmpopts.IgnoreUnexported(Config{}), cmpopts.EquateEmpty()}

// load runs Load with exactly environ and a .env file holding dotenv, and
// nothing from the process environment.
func load(t *testing.T, environ map[string]string, dotenv string, req Require) (*Config, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), ".env")
	if err := os.WriteFile(path, []byte(dotenv), 0o600); err != nil {
		t.Fatal(err)
	}
	list := []string{} // not nil: nil means os.Environ()
	for k, v := range environ {
		list = append(list, k+"="+v)
	}
	return Load(LoadOptions{EnvFile: path, Environ: list, Require: req, euid: func() int { return 1000 }})
}

// loadAs is load for a gateway running as the user euid.
func loadAs(t *testing.T, euid int, environ map[string]string, dotenv string) (*Config, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), ".env")
	if err := os.WriteFile(path, []byte(dotenv), 0o600); err != nil {
		t.Fatal(err)
	}
	list := []string{}
	for k, v := range environ {
		list = append(list, k+"="+v)
	}
	return Load(LoadOptions{EnvFile: path, Environ: list, euid: func() int { return euid }})
}

// mustLoad is load for inputs that must be valid.
func mustLoad(t *testing.T, environ map[string]string, dotenv string, req Require) *Config {
	t.Helper()
	cfg, err := load(t, environ, dotenv, req)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return cfg
}

func abs(t testing.TB, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// defaultConfig is what Load returns when nothing is set.
func defaultConfig(t testing.TB) *Config {
	return &Config{
		AllowedTools:         []string{"Read", "Glob", "Grep", "WebSearch", "WebFetch"},
		PermissionMode:       "bypassPermissions",
		QueryTimeout:         120 * time.Second,
		ConfigDir:            abs(t, "config"),
		MaxConcurrent:        5,
		MaxQueueDepth:        100,
		MaxChannelQueue:      10,
		MaxReplyMessages:     10,
		InboxRetention:       168 * time.Hour,
		InboxMaxEvents:       10000,
		CatchUpMaxAge:        6 * time.Hour,
		TurnCard:             TurnCardReceipt,
		Backend:              "claude",
		MaxTurns:             25,
		LogLevel:             "info",
		LogFormat:            "console",
		KeepAlive:            10 * time.Minute,
		HangTimeout:          90 * time.Second,
		Steer:                SteerQueue,
		ApprovalTimeout:      10 * time.Minute,
		ScheduledToolsPolicy: ScheduledToolsDeny,
		MaxAttachmentMB:      25,
		MaxAttachmentsMB:     50,
		HistoryMessages:      20,
		ArchiveDays:          90,
		Actions:              actions.DefaultFlags(),
		ActionsMaxPerTurn:    10,
		ActionsMaxFollowups:  3,
		DeferMax:             1800 * time.Second,
		DeferMaxPending:      5,
		ProviderEnv:          map[string]string{},
		Threads:              ThreadsAuto,
		ThreadArchive:        7 * 24 * time.Hour,
		WorktreeKeepDays:     7,
		NATSReplicas:         1,
		NATSPartitions:       256,
		NATSAckWait:          time.Minute,
		SessionScope:         SessionScopeChannel,
		NotifyAfter:          2 * time.Minute,
		TranscribeModel:      "whisper-1",
		VoiceMaxDuration:     5 * time.Minute,
	}
}

// validationProblems returns the problems of err, which must be a
// *ValidationError.
func validationProblems(t *testing.T, err error) []*VarError {
	t.Helper()
	var verr *ValidationError
	if !errors.As(err, &verr) {
		t.Fatalf("error = %v (%T), want a *ValidationError", err, err)
	}
	var out []*VarError
	for _, p := range verr.Problems {
		var ve *VarError
		if !errors.As(p, &ve) {
			t.Fatalf("problem %v is a %T, want *VarError", p, p)
		}
		out = append(out, ve)
	}
	return out
}

func TestLoadDefaults(t *testing.T) {
	t.Parallel()
	got := mustLoad(t, nil, "", 0)
	if diff := cmp.Diff(defaultConfig(t), got, cmpConfig); diff != "" {
		t.Errorf("Load() mismatch (-want +got):\n%s", diff)
	}
}

func TestLoadEachVar(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  map[string]string
		want func(c *Config)
	}{
		{"discord token", map[string]string{EnvDiscordToken: "tok.en-1"}, func(c *Config) { c.DiscordToken = "tok.en-1" }},
		{"anthropic key", map[string]string{EnvAnthropicAPIKey: "sk-ant-1"}, func(c *Config) {
			c.AnthropicAPIKey = "sk-ant-1"
			c.ProviderEnv = map[string]string{EnvAnthropicAPIKey: "sk-ant-1"}
		}},
		{"allowed tools", map[string]string{EnvAllowedTools: "Read,Write,Edit"}, func(c *Config) { c.AllowedTools = []string{"Read", "Write", "Edit"} }},
		{"permission mode", map[string]string{EnvPermissionMode: "acceptEdits"}, func(c *Config) { c.PermissionMode = "acceptEdits" }},
		{"permission mode any case", map[string]string{EnvPermissionMode: "PLAN"}, func(c *Config) { c.PermissionMode = "plan" }},
		{"query timeout", map[string]string{EnvQueryTimeoutMS: "1500"}, func(c *Config) { c.QueryTimeout = 1500 * time.Millisecond }},
		{"config dir relative", map[string]string{EnvConfigDir: "persona/dir"}, func(c *Config) { c.ConfigDir = abs(t, "persona/dir") }},
		{"config dir absolute", map[string]string{EnvConfigDir: "/srv/agent/"}, func(c *Config) { c.ConfigDir = "/srv/agent" }},
		{"max concurrent", map[string]string{EnvMaxConcurrent: "1"}, func(c *Config) { c.MaxConcurrent = 1 }},
		{"max queue depth", map[string]string{EnvMaxQueueDepth: "7"}, func(c *Config) { c.MaxQueueDepth = 7 }},
		{"output channel", map[string]string{EnvOutputChannelID: "123456789012345678"}, func(c *Config) { c.OutputChannelID = "123456789012345678" }},
		{"backend", map[string]string{EnvBackend: "Codex"}, func(c *Config) { c.Backend = "codex" }},
		{"model", map[string]string{EnvModel: "claude-sonnet-4-5"}, func(c *Config) { c.Model = "claude-sonnet-4-5" }},
		{"max turns", map[string]string{EnvMaxTurns: "3"}, func(c *Config) { c.MaxTurns = 3 }},
		{"cli login true", map[string]string{EnvUseCLILogin: "true"}, func(c *Config) { c.UseCLILogin = true }},
		{"cli login 1", map[string]string{EnvUseCLILogin: "1"}, func(c *Config) { c.UseCLILogin = true }},
		{"cli login YES", map[string]string{EnvUseCLILogin: "YES"}, func(c *Config) { c.UseCLILogin = true }},
		{"cli login off", map[string]string{EnvUseCLILogin: "off"}, func(c *Config) { c.UseCLILogin = false }},
		{"agent binary", map[string]string{EnvAgentBinary: "/opt/claude/bin/claude"}, func(c *Config) { c.AgentBinary = "/opt/claude/bin/claude" }},
		{"acp backend", map[string]string{EnvBackend: "ACP", EnvACPCommand: `"/opt/my agent/agent" --acp`}, func(c *Config) {
			c.Backend, c.ACPCommand = BackendACP, `"/opt/my agent/agent" --acp`
		}},
		{"agent user name", map[string]string{EnvAgentUser: "gateway-agent"}, func(c *Config) { c.AgentUser = "gateway-agent" }},
		{"agent user uid", map[string]string{EnvAgentUser: " 1001 "}, func(c *Config) { c.AgentUser = "1001" }},
		{"user ids", map[string]string{EnvAllowedUserIDs: "1, 22 ,333"}, func(c *Config) { c.AllowedUserIDs = []string{"1", "22", "333"} }},
		{"channel ids", map[string]string{EnvAllowedChannelIDs: "123456789012345678"}, func(c *Config) { c.AllowedChannelIDs = []string{"123456789012345678"} }},
		{"guild ids", map[string]string{EnvAllowedGuildIDs: "18446744073709551615,"}, func(c *Config) { c.AllowedGuildIDs = []string{"18446744073709551615"} }},
		{"api base url", map[string]string{EnvDiscordAPIBaseURL: "http://127.0.0.1:3000/api/v9"}, func(c *Config) { c.DiscordAPIBaseURL = "http://127.0.0.1:3000/api/v9" }},
		{"api base url of a proxy", map[string]string{EnvDiscordAPIBaseURL: "https://proxy.example/discord/api/v9/"}, func(c *Config) { c.DiscordAPIBaseURL = "https://proxy.example/discord/api/v9/" }},
		{"gateway url with a path", map[string]string{EnvDiscordGatewayURL: "wss://proxy.example/gateway"}, func(c *Config) { c.DiscordGatewayURL = "wss://proxy.example/gateway" }},
		{"gateway url", map[string]string{EnvDiscordGatewayURL: "ws://127.0.0.1:3001"}, func(c *Config) { c.DiscordGatewayURL = "ws://127.0.0.1:3001" }},
		{"webhook addr", map[string]string{EnvWebhookAddr: ":8080"}, func(c *Config) { c.WebhookAddr = ":8080" }},
		{"log level", map[string]string{EnvLogLevel: "Debug"}, func(c *Config) { c.LogLevel = "debug" }},
		{"log format", map[string]string{EnvLogFormat: "json"}, func(c *Config) { c.LogFormat = "json" }},
		{"threads off", map[string]string{EnvThreads: "OFF"}, func(c *Config) { c.Threads = ThreadsOff }},
		{"thread archive", map[string]string{EnvThreadArchive: "24h"}, func(c *Config) { c.ThreadArchive = 24 * time.Hour }},
		{"thread archive in days", map[string]string{EnvThreadArchive: "3d"}, func(c *Config) { c.ThreadArchive = 72 * time.Hour }},
		{"worktrees on", map[string]string{EnvWorktrees: "on"}, func(c *Config) { c.Worktrees = true }},
		{"worktree keep days", map[string]string{EnvWorktreeKeepDays: "30"}, func(c *Config) { c.WorktreeKeepDays = 30 }},
		{"value trimmed", map[string]string{EnvMaxTurns: "  9\t"}, func(c *Config) { c.MaxTurns = 9 }},
		{"empty is default", map[string]string{EnvMaxTurns: "", EnvLogLevel: "  "}, func(c *Config) {}},
		{"provider vars", map[string]string{
			"OPENAI_API_KEY": "sk-o", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9", "IS_SANDBOX": "1",
			"CLAUDE_CODE_MAX_RETRIES": "0", "GOOGLE_API_KEY": "g", "DISCORD_OTHER": "x", "HOME": "/root",
			"anthropic_lower": "not upper case",
		}, func(c *Config) {
			c.ProviderEnv = map[string]string{
				"OPENAI_API_KEY": "sk-o", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9", "IS_SANDBOX": "1",
				"CLAUDE_CODE_MAX_RETRIES": "0", "GOOGLE_API_KEY": "g",
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			want := defaultConfig(t)
			tt.want(want)
			got := mustLoad(t, tt.env, "", 0)
			if diff := cmp.Diff(want, got, cmpConfig); diff != "" {
				t.Errorf("Load(%v) mismatch (-want +got):\n%s", tt.env, diff)
			}
		})
	}
}

func TestAllowedToolsSplit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want []string
	}{
		{"Read", []string{"Read"}},
		{"Read,Glob", []string{"Read", "Glob"}},
		{" Read , Glob ,Grep ", []string{"Read", "Glob", "Grep"}},
		{"Read,,Glob,", []string{"Read", "Glob"}},
		{",Read", []string{"Read"}},
		{"Bash(git log:*),mcp__fs__read", []string{"Bash(git log:*)", "mcp__fs__read"}},
		{"Web Search", []string{"Web Search"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			cfg := mustLoad(t, map[string]string{EnvAllowedTools: tt.in}, "", 0)
			if diff := cmp.Diff(tt.want, cfg.AllowedTools); diff != "" {
				t.Errorf("ALLOWED_TOOLS=%q (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestEnvFile(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		env    map[string]string
		dotenv string
		want   func(c *Config)
	}{
		{
			name: "read",
			dotenv: `# settings
DISCORD_BOT_TOKEN=from-file
export ANTHROPIC_API_KEY="sk-file"
ALLOWED_TOOLS = Read, Write  # a comment
QUERY_TIMEOUT_MS='5000'
AGENT_BACKEND=gemini
GEMINI_API_KEY=gem
ANTHROPIC_BASE_URL=http://localhost:8080
`,
			want: func(c *Config) {
				c.DiscordToken = "from-file"
				c.AnthropicAPIKey = "sk-file"
				c.AllowedTools = []string{"Read", "Write"}
				c.QueryTimeout = 5 * time.Second
				c.Backend = "gemini"
				c.ProviderEnv = map[string]string{
					EnvAnthropicAPIKey: "sk-file", EnvGeminiAPIKey: "gem", "ANTHROPIC_BASE_URL": "http://localhost:8080",
				}
			},
		},
		{
			name:   "env overrides file",
			env:    map[string]string{EnvDiscordToken: "from-env", EnvMaxTurns: "2", EnvOpenAIAPIKey: "sk-env"},
			dotenv: "DISCORD_BOT_TOKEN=from-file\nAGENT_MAX_TURNS=1\nAGENT_MODEL=m\nOPENAI_API_KEY=sk-file\n",
			want: func(c *Config) {
				c.DiscordToken = "from-env"
				c.MaxTurns = 2
				c.Model = "m"
				c.ProviderEnv = map[string]string{EnvOpenAIAPIKey: "sk-env"}
			},
		},
		{
			name:   "empty env does not override file",
			env:    map[string]string{EnvDiscordToken: "", EnvOpenAIAPIKey: ""},
			dotenv: "DISCORD_BOT_TOKEN=from-file\nOPENAI_API_KEY=sk-file\n",
			want: func(c *Config) {
				c.DiscordToken = "from-file"
				c.ProviderEnv = map[string]string{EnvOpenAIAPIKey: "sk-file"}
			},
		},
		{
			name:   "empty file entry is default",
			dotenv: "ALLOWED_TOOLS=\nMAX_QUEUE_DEPTH=\"\"\nOPENAI_API_KEY=\n",
			want:   func(c *Config) {},
		},
		{
			name:   "file keys are case-insensitive",
			dotenv: "agent_max_turns=4\nopenai_api_key=sk-lower\n",
			want: func(c *Config) {
				c.MaxTurns = 4
				c.ProviderEnv = map[string]string{EnvOpenAIAPIKey: "sk-lower"}
			},
		},
		{
			name:   "crlf",
			dotenv: "AGENT_MAX_TURNS=4\r\nAGENT_MODEL=x\r\n",
			want:   func(c *Config) { c.MaxTurns = 4; c.Model = "x" },
		},
		{
			name:   "discord vars are not provider vars",
			dotenv: "DISCORD_WEBHOOK_SECRET=s\nWEBHOOK_SECRET=s\n",
			want:   func(c *Config) {},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			want := defaultConfig(t)
			tt.want(want)
			got := mustLoad(t, tt.env, tt.dotenv, 0)
			if diff := cmp.Diff(want, got, cmpConfig); diff != "" {
				t.Errorf("Load mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEnvFileMissing(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "absent.env")
	cfg, err := Load(LoadOptions{EnvFile: path, Environ: []string{}})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load(EnvFile: absent) error = %v, want fs.ErrNotExist", err)
	}
	if cfg != nil {
		t.Errorf("Load(EnvFile: absent) config = %v, want nil", cfg)
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("error %q does not name the file", err)
	}
}

// TestDefaultEnvFile changes the working directory, so it cannot run in
// parallel.
func TestDefaultEnvFile(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)

	cfg, err := Load(LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatalf("Load with no ./.env: %v", err)
	}
	if want := filepath.Join(dir, "config"); cfg.ConfigDir != want {
		t.Errorf("ConfigDir = %q, want %q (relative to the working directory)", cfg.ConfigDir, want)
	}

	if err := os.WriteFile(filepath.Join(dir, ".env"), []byte("AGENT_MAX_TURNS=6\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err = Load(LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatalf("Load with ./.env: %v", err)
	}
	if cfg.MaxTurns != 6 {
		t.Errorf("MaxTurns = %d, want 6 from ./.env", cfg.MaxTurns)
	}
}

func TestEnvFileMalformed(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-token-value"
	tests := []struct {
		name    string
		dotenv  string
		wantMsg string
	}{
		{"no equals", "AGENT_MAX_TURNS=3\n\nDISCORD_BOT_TOKEN " + secret + "\n", "line 3 is not NAME=value"},
		{"bad name", "# c\nDISCORD-BOT-TOKEN=" + secret + "\n", "line 2 is not NAME=value"},
		{"open quote", "DISCORD_BOT_TOKEN=\"" + secret + "\n", "a quoted value is never closed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := load(t, nil, tt.dotenv, 0)
			if err == nil {
				t.Fatal("Load succeeded, want an error")
			}
			if !strings.HasSuffix(err.Error(), ": "+tt.wantMsg) {
				t.Errorf("error = %q, want it to end in %q", err, tt.wantMsg)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error %q shows the secret", err)
			}
		})
	}
}

func TestInvalidValues(t *testing.T) {
	t.Parallel()
	const (
		apiShape     = " (the shape is http(s)://host[:port]/…/api/v9, e.g. https://discord.com/api/v9)"
		gatewayShape = " (the shape is ws(s)://host[:port][/path], e.g. wss://gateway.discord.gg)"
	)
	tests := []struct {
		name, value, want string
	}{
		{EnvQueryTimeoutMS, "abc", `QUERY_TIMEOUT_MS: "abc" is not a number of milliseconds`},
		{EnvQueryTimeoutMS, "2m", `QUERY_TIMEOUT_MS: "2m" is not a number of milliseconds (did you mean 120000?)`},
		{EnvQueryTimeoutMS, "1.5", `QUERY_TIMEOUT_MS: "1.5" is not a number of milliseconds`},
		{EnvQueryTimeoutMS, "0", `QUERY_TIMEOUT_MS must be at least 1, got 0`},
		{EnvQueryTimeoutMS, "-5", `QUERY_TIMEOUT_MS must be at least 1, got -5`},
		{EnvQueryTimeoutMS, "9223372036855", `QUERY_TIMEOUT_MS: "9223372036855" is too large (at most 9223372036854)`},
		{EnvQueryTimeoutMS, "99999999999999999999", `QUERY_TIMEOUT_MS: "99999999999999999999" is too large (at most 9223372036854)`},
		{EnvPermissionMode, "yolo", `PERMISSION_MODE: "yolo" is not one of default, acceptEdits, plan, bypassPermissions`},
		{EnvBackend, "foo", `AGENT_BACKEND: "foo" is not one of claude, codex, gemini, opencode, pi, acp`},
		{EnvMaxQueueDepth, "0", `MAX_QUEUE_DEPTH must be at least 1, got 0`},
		{EnvMaxQueueDepth, "-1", `MAX_QUEUE_DEPTH must be at least 1, got -1`},
		{EnvMaxQueueDepth, "ten", `MAX_QUEUE_DEPTH: "ten" is not a whole number`},
		{EnvMaxConcurrent, "2.5", `MAX_CONCURRENT_QUERIES: "2.5" is not a whole number`},
		{EnvMaxConcurrent, "0", `MAX_CONCURRENT_QUERIES is 0, so nothing would ever run: 0 means "take prompts only" on a gateway whose turns run on workers (NATS_URL); set it to 1 or more`},
		{EnvMaxTurns, "99999999999999999999", `AGENT_MAX_TURNS: "99999999999999999999" is too large`},
		{EnvMaxTurns, "-3", `AGENT_MAX_TURNS must be at least 1, got -3`},
		{EnvUseCLILogin, "maybe", `AGENT_USE_CLI_LOGIN: "maybe" is not true or false`},
		{EnvAgentUser, "root", `AGENT_USER: root would give the agent everything; name an unprivileged user for the agent`},
		{EnvAgentUser, "0", `AGENT_USER: uid 0 is root; name an unprivileged user for the agent`},
		{EnvAgentUser, "a b", `AGENT_USER: "a b" is neither a user name nor a uid`},
		{EnvAgentUser, "-agent", `AGENT_USER: "-agent" is neither a user name nor a uid`},
		{EnvLogLevel, "loud", `LOG_LEVEL: "loud" is not one of trace, debug, info, warn, error`},
		{EnvLogFormat, "xml", `LOG_FORMAT: "xml" is not one of console, json`},
		{EnvAllowedTools, ", ,", `ALLOWED_TOOLS: ", ," names no tools (unset it for the default, Read,Glob,Grep,WebSearch,WebFetch)`},
		{EnvOutputChannelID, "general", `OUTPUT_CHANNEL_ID: "general" is not a Discord ID (` + snowflakeHint + `)`},
		{EnvOutputChannelID, "0", `OUTPUT_CHANNEL_ID: "0" is not a Discord ID (` + snowflakeHint + `)`},
		{EnvAllowedUserIDs, "123,abc", `ALLOWED_USER_IDS: "abc" is not a Discord ID (` + snowflakeHint + `)`},
		{EnvAllowedRoleIDs, "role", `ALLOWED_ROLE_IDS: "role" is not a Discord ID (` + snowflakeHint + `)`},
		{EnvSessionScope, "person", `SESSION_SCOPE: "person" is not one of channel, user`},
		{EnvNotifyAfter, "soon", `NOTIFY_AFTER: "soon" is not a duration (write it like 10m, 1h, or 0 for none)`},
		{EnvTranscribeURL, "whisper.local:9000", `TRANSCRIBE_URL: "whisper.local:9000" is not an http:// or https:// URL`},
		{EnvVoiceMaxSeconds, "0", `VOICE_MAX_SECONDS must be at least 1, got 0`},
		{EnvAllowedChannelIDs, "1x, 123 ,-4", `ALLOWED_CHANNEL_IDS: "1x", "-4" are not Discord IDs (` + snowflakeHint + `)`},
		{EnvAllowedGuildIDs, "18446744073709551616", `ALLOWED_GUILD_IDS: "18446744073709551616" is not a Discord ID (` + snowflakeHint + `)`},
		{EnvDiscordAPIBaseURL, "localhost:3000", `DISCORD_API_BASE_URL: "localhost:3000" is not a http:// or https:// URL` + apiShape},
		{EnvDiscordAPIBaseURL, "ftp://example.com", `DISCORD_API_BASE_URL: "ftp://example.com" is not a http:// or https:// URL` + apiShape},
		{EnvDiscordAPIBaseURL, "http://%zz", `DISCORD_API_BASE_URL: "http://%zz" is not a http:// or https:// URL` + apiShape},
		// The REST client adds routes to the base: without /api/v9 every call is a 404.
		{EnvDiscordAPIBaseURL, "http://127.0.0.1:3000", `DISCORD_API_BASE_URL: "http://127.0.0.1:3000" does not end in /api/v9` + apiShape},
		{EnvDiscordAPIBaseURL, "http://127.0.0.1:3000/api", `DISCORD_API_BASE_URL: "http://127.0.0.1:3000/api" does not end in /api/v9` + apiShape},
		{EnvDiscordAPIBaseURL, "https://discord.com/api/v10", `DISCORD_API_BASE_URL: "https://discord.com/api/v10" does not end in /api/v9` + apiShape},
		{EnvDiscordAPIBaseURL, "ws://127.0.0.1:3000/api/v9", `DISCORD_API_BASE_URL: "ws://127.0.0.1:3000/api/v9" is not a http:// or https:// URL` + apiShape},
		{EnvDiscordGatewayURL, "https://user:pw@gw.example", `DISCORD_GATEWAY_URL: "https://<redacted>@gw.example" is not a ws:// or wss:// URL` + gatewayShape},
		{EnvDiscordGatewayURL, "gateway.discord.gg", `DISCORD_GATEWAY_URL: "gateway.discord.gg" is not a ws:// or wss:// URL` + gatewayShape},
		{EnvWebhookAddr, "8080", `WEBHOOK_ADDR: "8080" is not host:port (e.g. :8080 or 127.0.0.1:8080)`},
		{EnvAdminAddr, ":9090", `ADMIN_ADDR: ":9090" is not a loopback address, so ADMIN_TOKEN must be set (e.g. openssl rand -hex 32)`},
		{EnvWebhookAddr, ":http", `WEBHOOK_ADDR: ":http" is not host:port (e.g. :8080 or 127.0.0.1:8080)`},
		{EnvWebhookAddr, ":70000", `WEBHOOK_ADDR: ":70000" is not host:port (e.g. :8080 or 127.0.0.1:8080)`},
		{EnvModel, strings.Repeat("m", 100), ""}, // free text: valid
	}
	for _, tt := range tests {
		t.Run(tt.name+"="+tt.value, func(t *testing.T) {
			t.Parallel()
			cfg, err := load(t, map[string]string{tt.name: tt.value}, "", 0)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				return
			}
			got := validationProblems(t, err)
			want := []*VarError{{Var: tt.name, Msg: tt.want}}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			// The bad value falls back to its default; the rest is kept.
			if diff := cmp.Diff(defaultConfig(t), cfg, cmpConfig); diff != "" {
				t.Errorf("config beside the error (-want +got):\n%s", diff)
			}
		})
	}
}

func TestQuoteShortensLongValues(t *testing.T) {
	t.Parallel()
	_, err := load(t, map[string]string{EnvLogLevel: strings.Repeat("x", 500)}, "", 0)
	if err == nil {
		t.Fatal("Load succeeded, want an error")
	}
	if len(err.Error()) > 200 {
		t.Errorf("error is %d bytes long, want the value cut short: %q", len(err.Error()), err)
	}
}

// TestEveryProblemAtOnce checks that one Load reports every invalid value.
func TestEveryProblemAtOnce(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		EnvQueryTimeoutMS: "abc",
		EnvPermissionMode: "yolo",
		EnvMaxQueueDepth:  "0",
		EnvLogFormat:      "xml",
		EnvAllowedUserIDs: "me",
	}
	dotenv := "AGENT_BACKEND=foo\nWEBHOOK_ADDR=nope\n"
	_, err := load(t, env, dotenv, RequireDiscord|RequireBackendCredentials)
	want := []string{
		`missing DISCORD_BOT_TOKEN`,
		`QUERY_TIMEOUT_MS: "abc" is not a number of milliseconds`,
		`PERMISSION_MODE: "yolo" is not one of`,
		`MAX_QUEUE_DEPTH must be at least 1, got 0`,
		`AGENT_BACKEND: "foo" is not one of`,
		`ALLOWED_USER_IDS: "me" is not a Discord ID`,
		`WEBHOOK_ADDR: "nope" is not host:port`,
		`LOG_FORMAT: "xml" is not one of console, json`,
	}
	problems := validationProblems(t, err)
	if len(problems) != len(want) {
		t.Errorf("got %d problems, want %d:\n%v", len(problems), len(want), err)
	}
	msg := err.Error()
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("error does not contain %q:\n%s", w, msg)
		}
	}
	// The backend is unknown, so no credential is asked for.
	if strings.Contains(msg, EnvAnthropicAPIKey) {
		t.Errorf("error asks for a credential of an unknown backend:\n%s", msg)
	}
	if !strings.HasPrefix(msg, "invalid configuration (8 problems; ") {
		t.Errorf("error header = %q", strings.SplitN(msg, "\n", 2)[0])
	}
}

func TestRequire(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		req  Require
		env  map[string]string
		want []string // Var of each problem
	}{
		{"doctor needs nothing", 0, nil, nil},
		{"chat needs the backend key", RequireBackendCredentials, nil, []string{EnvAnthropicAPIKey}},
		{"chat with key", RequireBackendCredentials, map[string]string{EnvAnthropicAPIKey: "k"}, nil},
		{"run needs both", RequireDiscord | RequireBackendCredentials, nil, []string{EnvDiscordToken, EnvAnthropicAPIKey}},
		{"run with both", RequireDiscord | RequireBackendCredentials, map[string]string{EnvDiscordToken: "t", EnvAnthropicAPIKey: "k"}, nil},
		{"discord only", RequireDiscord, nil, []string{EnvDiscordToken}},
		{"auth token satisfies claude", RequireBackendCredentials, map[string]string{EnvAnthropicAuthToken: "k"}, nil},
		{"cli login waives", RequireBackendCredentials, map[string]string{EnvUseCLILogin: "true"}, nil},
		{"cli login does not waive discord", RequireDiscord | RequireBackendCredentials, map[string]string{EnvUseCLILogin: "true"}, []string{EnvDiscordToken}},
		{"bad cli login: no credential check", RequireBackendCredentials, map[string]string{EnvUseCLILogin: "maybe"}, []string{EnvUseCLILogin}},
		{"codex", RequireBackendCredentials, map[string]string{EnvBackend: "codex", EnvAnthropicAPIKey: "k"}, []string{EnvOpenAIAPIKey}},
		{"codex with key", RequireBackendCredentials, map[string]string{EnvBackend: "codex", EnvOpenAIAPIKey: "k"}, nil},
		{"gemini", RequireBackendCredentials, map[string]string{EnvBackend: "gemini"}, []string{EnvGeminiAPIKey}},
		{"gemini google key", RequireBackendCredentials, map[string]string{EnvBackend: "gemini", EnvGoogleAPIKey: "k"}, nil},
		{"opencode needs none", RequireBackendCredentials, map[string]string{EnvBackend: "opencode"}, nil},
		{"pi", RequireBackendCredentials, map[string]string{EnvBackend: "pi"}, []string{EnvAnthropicAPIKey}},
		{"pi any key", RequireBackendCredentials, map[string]string{EnvBackend: "pi", EnvGeminiAPIKey: "k"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := load(t, tt.env, "", tt.req)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				return
			}
			var got []string
			for _, p := range validationProblems(t, err) {
				got = append(got, p.Var)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problem variables (-want +got):\n%s\nerror: %v", diff, err)
			}
		})
	}
}

func TestMissingMessages(t *testing.T) {
	t.Parallel()
	tests := []struct {
		backend, want string
	}{
		{"claude", "missing ANTHROPIC_API_KEY: the claude backend needs it (or ANTHROPIC_AUTH_TOKEN, or set AGENT_USE_CLI_LOGIN=true if the CLI is logged in)"},
		{"codex", "missing OPENAI_API_KEY: the codex backend needs it (or set AGENT_USE_CLI_LOGIN=true if the CLI is logged in)"},
		{"gemini", "missing GEMINI_API_KEY: the gemini backend needs it (or GOOGLE_API_KEY, or set AGENT_USE_CLI_LOGIN=true if the CLI is logged in)"},
		{"pi", "missing ANTHROPIC_API_KEY or OPENAI_API_KEY or GEMINI_API_KEY: the pi backend needs one of them (or set AGENT_USE_CLI_LOGIN=true if the CLI is logged in)"},
	}
	for _, tt := range tests {
		t.Run(tt.backend, func(t *testing.T) {
			t.Parallel()
			_, err := load(t, map[string]string{EnvBackend: tt.backend}, "", RequireDiscord|RequireBackendCredentials)
			var got []string
			for _, p := range validationProblems(t, err) {
				got = append(got, p.Msg)
			}
			want := []string{"missing DISCORD_BOT_TOKEN: the Discord bot token (Developer Portal -> Bot -> Reset Token)", tt.want}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("messages (-want +got):\n%s", diff)
			}
		})
	}
}

func TestACPCommandRequired(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"missing", map[string]string{EnvBackend: "acp"},
			[]string{`missing ACP_COMMAND: AGENT_BACKEND=acp runs the agent this command line starts, e.g. ACP_COMMAND="gemini --acp" or ACP_COMMAND="opencode acp"`}},
		{"blank", map[string]string{EnvBackend: "acp", EnvACPCommand: "  "},
			[]string{`missing ACP_COMMAND: AGENT_BACKEND=acp runs the agent this command line starts, e.g. ACP_COMMAND="gemini --acp" or ACP_COMMAND="opencode acp"`}},
		{"set", map[string]string{EnvBackend: "acp", EnvACPCommand: "opencode acp"}, nil},
		{"not needed by another backend", map[string]string{EnvBackend: "gemini"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := load(t, tc.env, "", 0)
			var got []string
			if err != nil {
				for _, p := range validationProblems(t, err) {
					got = append(got, p.Msg)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBackendEnv(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		EnvDiscordToken:            "discord-secret",
		"DISCORD_WEBHOOK_SECRET":   "hook-secret",
		EnvAnthropicAPIKey:         "sk-ant",
		"CLAUDE_CODE_MAX_RETRIES":  "0",
		EnvIsSandbox:               "1",
		EnvOpenAIAPIKey:            "sk-openai-env",
		"GOOGLE_GEMINI_BASE_URL":   "http://127.0.0.1:5",
		"OPENCODE_CONFIG_CONTENT":  "{}",
		"PI_OFFLINE":               "1",
		"PATH":                     "/usr/bin",
		"ANTHROPIC_EMPTY_IN_ENV":   "",
		"SOMETHING_ANTHROPIC_ELSE": "x",
	}
	dotenv := "ANTHROPIC_BASE_URL=http://127.0.0.1:4\nOPENAI_API_KEY=sk-openai-file\nGEMINI_API_KEY=gem\n"
	tests := []struct {
		backend string
		want    []string
	}{
		{"claude", []string{
			"ANTHROPIC_API_KEY=sk-ant", "ANTHROPIC_BASE_URL=http://127.0.0.1:4", "CLAUDE_CODE_MAX_RETRIES=0", "IS_SANDBOX=1",
		}},
		{"codex", []string{"OPENAI_API_KEY=sk-openai-env"}},
		{"gemini", []string{"GEMINI_API_KEY=gem", "GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:5"}},
		{"opencode", []string{
			"ANTHROPIC_API_KEY=sk-ant", "ANTHROPIC_BASE_URL=http://127.0.0.1:4", "GEMINI_API_KEY=gem",
			"GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:5", "OPENAI_API_KEY=sk-openai-env", "OPENCODE_CONFIG_CONTENT={}",
		}},
		{"pi", []string{
			"ANTHROPIC_API_KEY=sk-ant", "ANTHROPIC_BASE_URL=http://127.0.0.1:4", "GEMINI_API_KEY=gem",
			"GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:5", "OPENAI_API_KEY=sk-openai-env", "PI_OFFLINE=1",
		}},
		// Any ACP agent gets every provider variable, and the adapter its
		// command line.
		{"acp", []string{
			"ACP_COMMAND=my-agent --acp",
			"ANTHROPIC_API_KEY=sk-ant", "ANTHROPIC_BASE_URL=http://127.0.0.1:4", "CLAUDE_CODE_MAX_RETRIES=0", "GEMINI_API_KEY=gem",
			"GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:5", "IS_SANDBOX=1", "OPENAI_API_KEY=sk-openai-env", "OPENCODE_CONFIG_CONTENT={}", "PI_OFFLINE=1",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.backend, func(t *testing.T) {
			t.Parallel()
			e := map[string]string{EnvBackend: tt.backend, EnvACPCommand: "my-agent --acp"}
			for k, v := range env {
				e[k] = v
			}
			cfg := mustLoad(t, e, dotenv, 0)
			got := cfg.BackendEnv()
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("BackendEnv() (-want +got):\n%s", diff)
			}
			for _, kv := range got {
				if strings.HasPrefix(kv, "DISCORD_") || strings.Contains(kv, "discord-secret") {
					t.Errorf("BackendEnv() passes %q to the agent", kv)
				}
			}
		})
	}
}

func TestWarnings(t *testing.T) {
	t.Parallel()
	const (
		allowlist   = "PERMISSION_MODE=bypassPermissions and no ALLOWED_USER_IDS"
		root        = "claude refuses PERMISSION_MODE=bypassPermissions when run as root"
		plan        = "PERMISSION_MODE=plan never writes files"
		noWrite     = "PERMISSION_MODE=default and ALLOWED_TOOLS has no Write"
		rootDefault = "PERMISSION_MODE is not set and the gateway runs as root"
	)
	tests := []struct {
		name string
		env  map[string]string
		euid int
		want []string // prefixes, in order
	}{
		{"defaults as a user", nil, 1000, []string{allowlist}},
		// Root without PERMISSION_MODE: acceptEdits instead of a default
		// claude refuses, said once.
		{"defaults as root", nil, 0, []string{rootDefault}},
		{"root in a sandbox", map[string]string{EnvIsSandbox: "1"}, 0, []string{allowlist}},
		// claude 2.1.330 accepts only IS_SANDBOX=1 and refuses as root with "true".
		{"root with IS_SANDBOX=true", map[string]string{EnvIsSandbox: "true"}, 0, []string{rootDefault}},
		{"bypass as root", map[string]string{EnvPermissionMode: "bypassPermissions"}, 0, []string{allowlist, root}},
		{"bypass as root with IS_SANDBOX=true", map[string]string{EnvPermissionMode: "bypassPermissions", EnvIsSandbox: "true"}, 0, []string{allowlist, root}},
		{"root with codex", map[string]string{EnvBackend: "codex"}, 0, []string{allowlist}},
		{"user allowlist", map[string]string{EnvAllowedUserIDs: "1"}, 1000, nil},
		{"channel allowlist", map[string]string{EnvAllowedChannelIDs: "1"}, 1000, nil},
		{"guild allowlist", map[string]string{EnvAllowedGuildIDs: "1"}, 1000, nil},
		{"acceptEdits as root", map[string]string{EnvPermissionMode: "acceptEdits"}, 0, nil},
		{"plan", map[string]string{EnvPermissionMode: "plan"}, 1000, []string{plan}},
		{"default without write", map[string]string{EnvPermissionMode: "default"}, 1000, []string{noWrite}},
		{"default with write", map[string]string{EnvPermissionMode: "default", EnvAllowedTools: "Read,Write,Edit"}, 1000, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := loadAs(t, tt.euid, tt.env, "")
			if err != nil {
				t.Fatal(err)
			}
			got := cfg.Warnings()
			if len(got) != len(tt.want) {
				t.Fatalf("Warnings() = %q, want %d starting %q", got, len(tt.want), tt.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tt.want[i]) {
					t.Errorf("warning %d = %q, want prefix %q", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestRedacted(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		EnvDiscordToken:       "discord-secret",
		EnvAnthropicAPIKey:    "anthropic-secret",
		EnvAllowedUserIDs:     "1,2",
		EnvDiscordAPIBaseURL:  "http://127.0.0.1:3000/api/v9",
		EnvDiscordGatewayURL:  "wss://user:pw-secret@gw.example/x",
		EnvIsSandbox:          "1",
		"ANTHROPIC_BASE_URL":  "http://127.0.0.1:4",
		EnvOpenAIAPIKey:       "openai-secret",
		EnvAnthropicAuthToken: "auth-secret",
		EnvTranscribeURL:      "https://user:pw-secret@whisper.example/v1/audio/transcriptions",
		EnvTranscribeAPIKey:   "transcribe-secret",
	}
	cfg := mustLoad(t, env, "", 0)
	got := cfg.Redacted()
	want := strings.Join([]string{
		"DISCORD_BOT_TOKEN=<redacted>",
		"ANTHROPIC_API_KEY=<redacted>",
		"ALLOWED_TOOLS=Read,Glob,Grep,WebSearch,WebFetch",
		"PERMISSION_MODE=bypassPermissions",
		"QUERY_TIMEOUT_MS=120000",
		"CONFIG_DIR=" + abs(t, "config"),
		"MAX_CONCURRENT_QUERIES=5",
		"MAX_QUEUE_DEPTH=100",
		"MAX_CHANNEL_QUEUE=10",
		"MAX_REPLY_MESSAGES=10",
		"OUTPUT_CHANNEL_ID=",
		"AGENT_BACKEND=claude",
		"AGENT_MODEL=",
		"AGENT_MAX_TURNS=25",
		"AGENT_USE_CLI_LOGIN=false",
		"AGENT_CLI_PATH=",
		"ACP_COMMAND=",
		"AGENT_USER=",
		"ALLOWED_USER_IDS=1,2",
		"ALLOWED_CHANNEL_IDS=",
		"ALLOWED_GUILD_IDS=",
		"APPROVER_IDS=",
		"ALLOWED_ROLE_IDS=",
		"APPROVER_ROLE_IDS=",
		"SESSION_SCOPE=channel",
		"NOTIFY_AFTER=2m0s",
		"INBOX_RETENTION=168h0m0s",
		"INBOX_MAX_EVENTS=10000",
		"CATCH_UP_MAX_AGE=6h0m0s",
		"WORK_DIR=",
		"PROJECTS_ROOT=",
		"THREADS=auto",
		"THREAD_ARCHIVE=168h0m0s",
		"WORKTREES=off",
		"WORKTREE_KEEP_DAYS=7",
		"TURN_CARD=receipt",
		"DAILY_BUDGET_USD=",
		"CHANNEL_DAILY_BUDGET_USD=",
		"DISCORD_API_BASE_URL=http://127.0.0.1:3000/api/v9",
		"DISCORD_GATEWAY_URL=wss://<redacted>@gw.example/x",
		"WEBHOOK_ADDR=",
		"LOG_LEVEL=info",
		"LOG_FORMAT=console",
		"AGENT_KEEP_ALIVE=10m0s",
		"MAX_WARM_PROCESSES=5",
		"MAX_WARM_MEMORY_MB=0",
		"AGENT_HANG_TIMEOUT=1m30s",
		"STEER=queue",
		"APPROVAL_TIMEOUT=10m0s",
		"SCHEDULED_TOOLS_POLICY=deny",
		"MAX_ATTACHMENT_MB=25",
		"MAX_ATTACHMENTS_TOTAL_MB=50",
		"HISTORY_MESSAGES=20",
		"ARCHIVE_DAYS=90",
		"DISCORD_ACTIONS=true",
		"DISCORD_ACTIONS_MAX_PER_TURN=10",
		"DISCORD_ACTIONS_MAX_FOLLOWUPS=3",
		"DISCORD_ACTIONS_DEFER_MAX_SECONDS=1800",
		"DISCORD_ACTIONS_DEFER_MAX_PENDING=5",
		"ADMIN_ADDR=",
		"ADMIN_TOKEN=",
		"ADMIN_HOSTS=",
		"ADMIN_TRUST_PROXY=false",
		"NATS_URL=",
		"NATS_CREDS_FILE=",
		"NATS_TOKEN=",
		"NATS_REPLICAS=1",
		"NATS_PARTITIONS=256",
		"NATS_ACK_WAIT=1m0s",
		"TRANSCRIBE_URL=https://<redacted>@whisper.example/v1/audio/transcriptions",
		"TRANSCRIBE_API_KEY=<redacted>",
		"TRANSCRIBE_MODEL=whisper-1",
		"VOICE_MAX_SECONDS=300",
		"DISCORD_ACTIONS_CHANNELS=true",
		"DISCORD_ACTIONS_MESSAGING=true",
		"DISCORD_ACTIONS_GUILD=true",
		"DISCORD_ACTIONS_MODERATION=false",
		"DISCORD_ACTIONS_POLLS=true",
		"DISCORD_ACTIONS_CRONS=true",
		"DISCORD_ACTIONS_MEMORY=true",
		"DISCORD_ACTIONS_DEFER=true",
		"DISCORD_ACTIONS_BOT_PROFILE=true",
		"DISCORD_ACTIONS_CONFIG=true",
		"ANTHROPIC_AUTH_TOKEN=<redacted>",
		"ANTHROPIC_BASE_URL=http://127.0.0.1:4",
		"IS_SANDBOX=1",
		"OPENAI_API_KEY=<redacted>",
	}, "\n") + "\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Redacted() (-want +got):\n%s", diff)
	}
	for _, k := range keys {
		if !strings.Contains(got, "\n"+k+"=") && !strings.HasPrefix(got, k+"=") {
			t.Errorf("Redacted() does not show %s", k)
		}
	}
}

// TestNoSecretInOutput checks that no secret reaches an error, a warning or
// any printed form of a Config.
func TestNoSecretInOutput(t *testing.T) {
	t.Parallel()
	secrets := map[string]string{
		EnvDiscordToken:           "MTIzNDU2Nzg5MDEyMzQ1Njc4.discord.secret",
		EnvAnthropicAPIKey:        "sk-ant-api03-anthropic-secret",
		EnvAnthropicAuthToken:     "anthropic-auth-secret",
		EnvOpenAIAPIKey:           "sk-proj-openai-secret",
		EnvGeminiAPIKey:           "AIza-gemini-secret",
		"OPENCODE_CONFIG_CONTENT": `{"apiKey":"opencode-secret"}`,
		"ANTHROPIC_BASE_URL":      "http://user:url-password-secret@127.0.0.1:4",
	}
	invalid := map[string]string{
		EnvQueryTimeoutMS:    "abc",
		EnvPermissionMode:    "yolo",
		EnvDiscordGatewayURL: "https://gwuser:gw-password-secret@gw.example",
		EnvBackend:           "pi",
	}
	parts := []string{"discord.secret", "anthropic-secret", "auth-secret", "openai-secret", "gemini-secret",
		"opencode-secret", "url-password-secret", "gw-password-secret", "gwuser"}
	for _, v := range secrets {
		parts = append(parts, v)
	}
	check := func(t *testing.T, what, s string) {
		t.Helper()
		for _, part := range parts {
			if strings.Contains(s, part) {
				t.Errorf("%s shows secret %q:\n%s", what, part, s)
			}
		}
	}
	for _, where := range []string{"env", "file"} {
		t.Run(where, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{}
			var dotenv strings.Builder
			for k, v := range secrets {
				if where == "env" {
					env[k] = v
				} else {
					fmt.Fprintf(&dotenv, "%s='%s'\n", k, v)
				}
			}
			for k, v := range invalid {
				env[k] = v
			}
			cfg, err := load(t, env, dotenv.String(), RequireDiscord|RequireBackendCredentials)
			if err == nil {
				t.Fatal("Load succeeded, want an error")
			}
			check(t, "error", err.Error())
			check(t, "Redacted", cfg.Redacted())
			check(t, "String", cfg.String())
			check(t, "%v", fmt.Sprintf("%v", cfg))
			check(t, "%+v", fmt.Sprintf("%+v", *cfg))
			check(t, "%#v", fmt.Sprintf("%#v", cfg))
			check(t, "%s", fmt.Sprintf("%s", *cfg))
			b, jerr := json.Marshal(cfg)
			if jerr != nil {
				t.Fatal(jerr)
			}
			check(t, "JSON", string(b))
			check(t, "Warnings", strings.Join(cfg.Warnings(), "\n"))

			// The secrets are still there for the code that needs them.
			if cfg.DiscordToken != secrets[EnvDiscordToken] || cfg.ProviderEnv[EnvOpenAIAPIKey] != secrets[EnvOpenAIAPIKey] {
				t.Errorf("secrets not loaded: DiscordToken set %v, OPENAI_API_KEY set %v",
					cfg.DiscordToken != "", cfg.ProviderEnv[EnvOpenAIAPIKey] != "")
			}
		})
	}
}

// seed returns the property tests' seed and logs it, so that a failure can
// be replayed with -seed.
func seed(t *testing.T) uint64 {
	t.Helper()
	s := *seedFlag
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -seed=%d)", s, s)
	return s
}

const tokenChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"

func randString(r *rand.Rand, chars string, min, max int) string {
	n := min + r.IntN(max-min+1)
	b := make([]byte, n)
	for i := range b {
		b[i] = chars[r.IntN(len(chars))]
	}
	return string(b)
}

func randCase(r *rand.Rand, s string) string {
	b := []byte(s)
	for i, c := range b {
		if r.IntN(2) == 0 {
			b[i] = byte(strings.ToUpper(string(c))[0])
		} else {
			b[i] = byte(strings.ToLower(string(c))[0])
		}
	}
	return string(b)
}

func randSnowflake(r *rand.Rand) string {
	return strconv.FormatUint(1e16+r.Uint64N(9e18), 10)
}

func randIDs(r *rand.Rand) (string, []string) {
	ids := make([]string, 1+r.IntN(4))
	for i := range ids {
		ids[i] = randSnowflake(r)
	}
	return strings.Join(ids, ", "), ids
}

func randPick(r *rand.Rand, from []string) string { return from[r.IntN(len(from))] }

// generator makes a random valid value for one variable and applies what
// Load should make of it to a Config.
type generator struct {
	name  string
	value func(r *rand.Rand) (raw string, apply func(t testing.TB, c *Config))
}

var generators = []generator{
	{EnvDiscordToken, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		v := randString(r, tokenChars, 20, 72)
		return v, func(_ testing.TB, c *Config) { c.DiscordToken = v }
	}},
	{EnvAnthropicAPIKey, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		v := "sk-ant-" + randString(r, tokenChars, 10, 90)
		return v, func(_ testing.TB, c *Config) { c.AnthropicAPIKey = v; c.ProviderEnv[EnvAnthropicAPIKey] = v }
	}},
	{EnvAllowedTools, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		pool := []string{"Read", "Write", "Edit", "Bash", "Glob", "Grep", "WebSearch", "WebFetch", "Bash(git log:*)", "mcp__fs__read_file"}
		tools := make([]string, 1+r.IntN(6))
		var parts []string
		for i := range tools {
			tools[i] = randPick(r, pool)
			parts = append(parts, strings.Repeat(" ", r.IntN(2))+tools[i]+strings.Repeat(" ", r.IntN(2)))
			if r.IntN(4) == 0 {
				parts = append(parts, " ")
			}
		}
		return strings.Join(parts, ","), func(_ testing.TB, c *Config) { c.AllowedTools = tools }
	}},
	{EnvPermissionMode, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		v := randPick(r, permissionModes)
		return randCase(r, v), func(_ testing.TB, c *Config) { c.PermissionMode = v }
	}},
	{EnvQueryTimeoutMS, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		n := 1 + r.Int64N(1e10)
		return strconv.FormatInt(n, 10), func(_ testing.TB, c *Config) { c.QueryTimeout = time.Duration(n) * time.Millisecond }
	}},
	{EnvConfigDir, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		v := randString(r, "abcxyz_-", 1, 10) + "/" + randString(r, "abc.", 1, 5)
		if r.IntN(2) == 0 {
			v = "/" + v
		}
		return v, func(t testing.TB, c *Config) { c.ConfigDir = abs(t, v) }
	}},
	{EnvMaxConcurrent, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		n := 1 + r.IntN(1000)
		return strconv.Itoa(n), func(_ testing.TB, c *Config) { c.MaxConcurrent = n }
	}},
	{EnvMaxQueueDepth, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		n := 1 + r.IntN(1e6)
		return strconv.Itoa(n), func(_ testing.TB, c *Config) { c.MaxQueueDepth = n }
	}},
	{EnvOutputChannelID, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		v := randSnowflake(r)
		return v, func(_ testing.TB, c *Config) { c.OutputChannelID = v }
	}},
	{EnvBackend, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		v := randPick(r, backendNames)
		return randCase(r, v), func(_ testing.TB, c *Config) { c.Backend = v }
	}},
	{EnvModel, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		v := randString(r, "abcdefghijklmnopqrstuvwxyz0123456789-.:/", 1, 30)
		return v, func(_ testing.TB, c *Config) { c.Model = v }
	}},
	{EnvMaxTurns, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		n := 1 + r.IntN(500)
		return strconv.Itoa(n), func(_ testing.TB, c *Config) { c.MaxTurns = n }
	}},
	{EnvUseCLILogin, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		v := randPick(r, []string{"true", "false", "1", "0", "yes", "no", "on", "off"})
		b := slices.Contains([]string{"true", "1", "yes", "on"}, v)
		return randCase(r, v), func(_ testing.TB, c *Config) { c.UseCLILogin = b }
	}},
	{EnvAgentBinary, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		v := "/" + randString(r, "abcdefgh/_-.", 1, 30)
		return v, func(_ testing.TB, c *Config) { c.AgentBinary = v }
	}},
	{EnvACPCommand, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		v := "/" + randString(r, "abcdefgh/_-.", 1, 20) + " " + randPick(r, []string{"--acp", "acp", "--mode acp"})
		return v, func(_ testing.TB, c *Config) { c.ACPCommand = v }
	}},
	{EnvAgentUser, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		v := "agent" + randString(r, "abcdefgh0123_-.", 0, 20)
		return v, func(_ testing.TB, c *Config) { c.AgentUser = v }
	}},
	{EnvAllowedUserIDs, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		raw, ids := randIDs(r)
		return raw, func(_ testing.TB, c *Config) { c.AllowedUserIDs = ids }
	}},
	{EnvAllowedChannelIDs, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		raw, ids := randIDs(r)
		return raw, func(_ testing.TB, c *Config) { c.AllowedChannelIDs = ids }
	}},
	{EnvAllowedGuildIDs, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		raw, ids := randIDs(r)
		return raw, func(_ testing.TB, c *Config) { c.AllowedGuildIDs = ids }
	}},
	{EnvApproverIDs, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		raw, ids := randIDs(r)
		return raw, func(_ testing.TB, c *Config) { c.ApproverIDs = ids }
	}},
	{EnvInboxRetention, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		d := time.Duration(1+r.IntN(1000)) * time.Minute
		return d.String(), func(_ testing.TB, c *Config) { c.InboxRetention = d }
	}},
	{EnvInboxMaxEvents, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		n := 1 + r.IntN(100000)
		return strconv.Itoa(n), func(_ testing.TB, c *Config) { c.InboxMaxEvents = n }
	}},
	{EnvCatchUpMaxAge, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		d := time.Duration(1+r.IntN(48)) * time.Hour
		return d.String(), func(_ testing.TB, c *Config) { c.CatchUpMaxAge = d }
	}},
	{EnvWorkDir, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		v := "/" + randString(r, "abcdef", 1, 12)
		return v, func(_ testing.TB, c *Config) { c.WorkDir = v }
	}},
	{EnvProjectsRoot, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		v := "/" + randString(r, "abcdef", 1, 12)
		return v, func(_ testing.TB, c *Config) { c.ProjectsRoot = v }
	}},
	{EnvThreads, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		v := threadModes[r.IntN(len(threadModes))]
		return v, func(_ testing.TB, c *Config) { c.Threads = v }
	}},
	{EnvThreadArchive, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		v := threadArchives[r.IntN(len(threadArchives))]
		return v.String(), func(_ testing.TB, c *Config) { c.ThreadArchive = v }
	}},
	{EnvWorktrees, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		v := r.IntN(2) == 1
		return map[bool]string{true: "on", false: "off"}[v], func(_ testing.TB, c *Config) { c.Worktrees = v }
	}},
	{EnvWorktreeKeepDays, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		v := 1 + r.IntN(60)
		return strconv.Itoa(v), func(_ testing.TB, c *Config) { c.WorktreeKeepDays = v }
	}},
	{EnvKeepAlive, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		v := time.Duration(r.IntN(120)) * time.Minute
		return v.String(), func(_ testing.TB, c *Config) { c.KeepAlive = v }
	}},
	{EnvMaxWarm, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		n := 1 + r.IntN(50)
		return strconv.Itoa(n), func(_ testing.TB, c *Config) { c.MaxWarm = n }
	}},
	{EnvWarmMemoryMB, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		n := r.IntN(100000)
		return strconv.Itoa(n), func(_ testing.TB, c *Config) { c.WarmMemoryMB = n }
	}},
	{EnvHangTimeout, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		v := time.Duration(1+r.IntN(600)) * time.Second
		return v.String(), func(_ testing.TB, c *Config) { c.HangTimeout = v }
	}},
	{EnvSteer, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		v := randPick(r, steerModes)
		return randCase(r, v), func(_ testing.TB, c *Config) { c.Steer = v }
	}},
	{EnvApprovalTimeout, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		v := time.Duration(1+r.IntN(3600)) * time.Second
		return v.String(), func(_ testing.TB, c *Config) { c.ApprovalTimeout = v }
	}},
	{EnvSessionScope, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		v := randPick(r, sessionScopes)
		return randCase(r, v), func(_ testing.TB, c *Config) { c.SessionScope = v }
	}},
	{EnvNotifyAfter, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		v := time.Duration(r.IntN(3600)) * time.Second
		return v.String(), func(_ testing.TB, c *Config) { c.NotifyAfter = v }
	}},
	{EnvTranscribeModel, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		v := randPick(r, []string{"whisper-1", "gpt-4o-mini-transcribe", "Systran/faster-whisper-small"})
		return v, func(_ testing.TB, c *Config) { c.TranscribeModel = v }
	}},
	{EnvVoiceMaxSeconds, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		n := 1 + r.IntN(3600)
		return strconv.Itoa(n), func(_ testing.TB, c *Config) { c.VoiceMaxDuration = time.Duration(n) * time.Second }
	}},
	{EnvScheduledTools, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		v := randPick(r, toolPolicies)
		return randCase(r, v), func(_ testing.TB, c *Config) { c.ScheduledToolsPolicy = v }
	}},
	{EnvMaxAttachmentMB, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		n := r.IntN(500)
		return strconv.Itoa(n), func(_ testing.TB, c *Config) { c.MaxAttachmentMB = n }
	}},
	{EnvMaxAttachmentsMB, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		n := r.IntN(500)
		return strconv.Itoa(n), func(_ testing.TB, c *Config) { c.MaxAttachmentsMB = n }
	}},
	{EnvHistoryMessages, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		n := r.IntN(200)
		return strconv.Itoa(n), func(_ testing.TB, c *Config) { c.HistoryMessages = n }
	}},
	{EnvArchiveDays, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		n := r.IntN(3650)
		return strconv.Itoa(n), func(_ testing.TB, c *Config) { c.ArchiveDays = n }
	}},
	{EnvTurnCard, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		v := randPick(r, turnCards)
		return randCase(r, v), func(_ testing.TB, c *Config) { c.TurnCard = v }
	}},
	{EnvDailyBudget, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		v := float64(1+r.IntN(10000)) / 100
		return strconv.FormatFloat(v, 'f', -1, 64), func(_ testing.TB, c *Config) { c.DailyBudgetUSD = v }
	}},
	{EnvChannelBudget, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		v := float64(1+r.IntN(10000)) / 100
		return strconv.FormatFloat(v, 'f', -1, 64), func(_ testing.TB, c *Config) { c.ChannelBudgetUSD = v }
	}},
	{EnvDiscordAPIBaseURL, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		prefix := ""
		for range r.IntN(3) {
			prefix += "/" + randString(r, "abc", 1, 5)
		}
		v := fmt.Sprintf("%s://%s:%d%s/api/v9%s", randPick(r, []string{"http", "https"}), randString(r, "abcdef.", 1, 12), 1+r.IntN(65535), prefix, randPick(r, []string{"", "/"}))
		return v, func(_ testing.TB, c *Config) { c.DiscordAPIBaseURL = v }
	}},
	{EnvDiscordGatewayURL, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		v := fmt.Sprintf("%s://127.0.0.1:%d", randPick(r, []string{"ws", "wss"}), 1+r.IntN(65535))
		return v, func(_ testing.TB, c *Config) { c.DiscordGatewayURL = v }
	}},
	{EnvWebhookAddr, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		v := randPick(r, []string{"", "127.0.0.1", "localhost", "[::1]"}) + ":" + strconv.Itoa(r.IntN(65536))
		return v, func(_ testing.TB, c *Config) { c.WebhookAddr = v }
	}},
	{EnvLogLevel, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		v := randPick(r, logLevels)
		return randCase(r, v), func(_ testing.TB, c *Config) { c.LogLevel = v }
	}},
	{EnvLogFormat, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
		v := randPick(r, logFormats)
		return randCase(r, v), func(_ testing.TB, c *Config) { c.LogFormat = v }
	}},
}

// providerGenerators make provider variables, which land in ProviderEnv.
// actionGenerators set the Discord actions' switches and limits.
var actionGenerators = func() []generator {
	boolValue := func(r *rand.Rand) (string, bool) {
		v := randPick(r, []string{"true", "false", "1", "0", "yes", "no", "on", "off"})
		return randCase(r, v), slices.Contains([]string{"true", "1", "yes", "on"}, v)
	}
	gs := []generator{
		{EnvActions, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
			raw, b := boolValue(r)
			return raw, func(_ testing.TB, c *Config) { c.Actions.Enabled = b }
		}},
		{EnvActionsMax, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
			n := 1 + r.IntN(50)
			return strconv.Itoa(n), func(_ testing.TB, c *Config) { c.ActionsMaxPerTurn = n }
		}},
		{EnvActionsFollowups, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
			n := r.IntN(10)
			return strconv.Itoa(n), func(_ testing.TB, c *Config) { c.ActionsMaxFollowups = n }
		}},
		{EnvDeferMaxSeconds, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
			n := 1 + r.IntN(86400)
			return strconv.Itoa(n), func(_ testing.TB, c *Config) { c.DeferMax = time.Duration(n) * time.Second }
		}},
		{EnvAdminAddr, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
			port := strconv.Itoa(1 + r.IntN(65535))
			if r.IntN(2) == 0 {
				return port, func(_ testing.TB, c *Config) { c.AdminAddr = "127.0.0.1:" + port }
			}
			return "127.0.0.1:" + port, func(_ testing.TB, c *Config) { c.AdminAddr = "127.0.0.1:" + port }
		}},
		{EnvAdminToken, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
			v := randString(r, tokenChars, MinSecretBytes, 64)
			return v, func(_ testing.TB, c *Config) { c.AdminToken = v }
		}},
		{EnvAdminHosts, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
			hosts := []string{"gw.lan", "admin.example.com:443", "[::1]", "10.0.0.7:8081"}[:1+r.IntN(4)]
			return strings.Join(hosts, ","), func(_ testing.TB, c *Config) { c.AdminHosts = hosts }
		}},
		{EnvAdminTrustProxy, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
			raw, b := boolValue(r)
			return raw, func(_ testing.TB, c *Config) { c.AdminTrustProxy = b }
		}},
		{EnvDeferMaxPending, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
			n := 1 + r.IntN(100)
			return strconv.Itoa(n), func(_ testing.TB, c *Config) { c.DeferMaxPending = n }
		}},
		{EnvNATSURL, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
			urls := []string{"nats://n1:4222", "tls://n2.example.com:4222", "ws://127.0.0.1:8080", "wss://u:p@n4"}[:1+r.IntN(4)]
			return strings.Join(urls, ","), func(_ testing.TB, c *Config) { c.NATSURLs = urls }
		}},
		{EnvNATSReplicas, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
			n := []int{1, 3, 5}[r.IntN(3)]
			return strconv.Itoa(n), func(_ testing.TB, c *Config) { c.NATSReplicas = n }
		}},
		{EnvNATSPartitions, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
			n := 1 + r.IntN(maxPartitions)
			return strconv.Itoa(n), func(_ testing.TB, c *Config) { c.NATSPartitions = n }
		}},
		{EnvNATSAckWait, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
			d := time.Duration(3+r.IntN(600)) * time.Second
			return d.String(), func(_ testing.TB, c *Config) { c.NATSAckWait = d }
		}},
	}
	for _, cat := range actions.Categories {
		gs = append(gs, generator{ActionsEnv(cat), func(r *rand.Rand) (string, func(testing.TB, *Config)) {
			raw, b := boolValue(r)
			return raw, func(_ testing.TB, c *Config) { c.Actions.Categories[cat] = b }
		}})
	}
	return gs
}()

var providerGenerators = func() []generator {
	var gs []generator
	for _, name := range []string{EnvOpenAIAPIKey, EnvGeminiAPIKey, EnvAnthropicAuthToken, "ANTHROPIC_BASE_URL", EnvIsSandbox, "PI_OFFLINE"} {
		gs = append(gs, generator{name, func(r *rand.Rand) (string, func(testing.TB, *Config)) {
			v := randString(r, tokenChars, 1, 40)
			return v, func(_ testing.TB, c *Config) { c.ProviderEnv[name] = v }
		}})
	}
	return gs
}()

// TestPropertyRoundTrip is property 1: for any valid values, placed in the
// environment, in .env or in both, Load returns a Config whose fields match
// them (the environment winning), and the defaults elsewhere.
func TestPropertyRoundTrip(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(seed(t), 1))
	dir := t.TempDir()
	iterations := 500
	if testing.Short() {
		iterations = 50
	}
	for i := range iterations {
		want := defaultConfig(t)
		env := []string{}
		var dotenv strings.Builder
		var desc []string
		for _, g := range slices.Concat(generators, actionGenerators, providerGenerators) {
			raw, apply := g.value(r)
			place := r.IntN(4)
			switch place {
			case 0: // unset
				continue
			case 1: // environment, maybe padded
				env = append(env, g.name+"="+strings.Repeat(" ", r.IntN(2))+raw+strings.Repeat("\t", r.IntN(2)))
			case 2: // .env, maybe quoted
				writeEnvLine(r, &dotenv, g.name, raw)
			case 3: // both: the environment wins
				other, _ := g.value(r)
				writeEnvLine(r, &dotenv, g.name, other)
				env = append(env, g.name+"="+raw)
			}
			desc = append(desc, fmt.Sprintf("%s=%q@%d", g.name, raw, place))
			apply(t, want)
		}
		if want.Backend == BackendACP && want.ACPCommand == "" {
			// AGENT_BACKEND=acp needs the agent's command line.
			want.ACPCommand = "gemini --acp"
			env = append(env, EnvACPCommand+"="+want.ACPCommand)
		}
		if want.AgentUser != "" && want.AdminAddr != "" && want.AdminToken == "" {
			// Beside AGENT_USER the admin server needs a token.
			want.AdminToken = "admin-token-0123456789"
			env = append(env, EnvAdminToken+"="+want.AdminToken)
		}
		path := filepath.Join(dir, fmt.Sprintf("%d.env", i))
		if err := os.WriteFile(path, []byte(dotenv.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := Load(LoadOptions{EnvFile: path, Environ: env, euid: func() int { return 1000 }})
		if err != nil {
			t.Fatalf("iteration %d: Load: %v\ninputs: %s", i, err, strings.Join(desc, " "))
		}
		if diff := cmp.Diff(want, got, cmpConfig); diff != "" {
			t.Fatalf("iteration %d: mismatch (-want +got):\n%s\ninputs: %s\n.env:\n%s", i, diff, strings.Join(desc, " "), dotenv.String())
		}
	}
}

// writeEnvLine writes NAME=value in one of the .env spellings.
func writeEnvLine(r *rand.Rand, b *strings.Builder, name, value string) {
	switch r.IntN(4) {
	case 0:
		fmt.Fprintf(b, "%s=%s\n", name, value)
	case 1:
		fmt.Fprintf(b, "%s=\"%s\"\n", name, value)
	case 2:
		fmt.Fprintf(b, "export %s='%s' # note\n", name, value)
	case 3:
		fmt.Fprintf(b, "# comment\n%s = %s\r\n", name, value)
	}
}

// TestPropertyMissingRequired is property 2: for any subset of the required
// variables left unset, Load fails with one error that names every one of
// them, and succeeds when none is missing.
func TestPropertyMissingRequired(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(seed(t), 2))
	iterations := 500
	if testing.Short() {
		iterations = 50
	}
	for i := range iterations {
		backend := randPick(r, backendNames)
		env := map[string]string{EnvBackend: backend}
		if backend == BackendACP {
			env[EnvACPCommand] = "opencode acp" // required, but not a credential
		}
		var dotenv strings.Builder
		put := func(name, value string) {
			if r.IntN(2) == 0 {
				env[name] = value
			} else {
				fmt.Fprintf(&dotenv, "%s=%s\n", name, value)
			}
		}
		var wantMissing []string // every name the error must mention
		var wantVars []string
		if r.IntN(2) == 0 {
			put(EnvDiscordToken, randString(r, tokenChars, 20, 40))
		} else {
			wantMissing = append(wantMissing, EnvDiscordToken)
			wantVars = append(wantVars, EnvDiscordToken)
		}
		if creds := backendCredentials[backend]; len(creds) > 0 {
			if r.IntN(2) == 0 {
				put(randPick(r, creds), randString(r, tokenChars, 10, 40))
			} else {
				wantMissing = append(wantMissing, creds...)
				wantVars = append(wantVars, creds[0])
			}
		}
		_, err := load(t, env, dotenv.String(), RequireDiscord|RequireBackendCredentials)
		if len(wantVars) == 0 {
			if err != nil {
				t.Fatalf("iteration %d (%s): Load: %v", i, backend, err)
			}
			continue
		}
		var got []string
		for _, p := range validationProblems(t, err) {
			got = append(got, p.Var)
		}
		if diff := cmp.Diff(wantVars, got); diff != "" {
			t.Fatalf("iteration %d (%s): problem variables (-want +got):\n%s\nerror: %v", i, backend, diff, err)
		}
		for _, name := range wantMissing {
			if !strings.Contains(err.Error(), name) {
				t.Fatalf("iteration %d (%s): error does not name %s:\n%v", i, backend, name, err)
			}
		}
	}
}

func FuzzSplitList(f *testing.F) {
	for _, s := range []string{"", ",", "Read", " Read , Glob ,Grep ", "Read,,Glob,", "a,\tb\n,c", "Bash(git log:*),x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		items := splitList(s)
		if items != nil && len(items) == 0 {
			t.Errorf("splitList(%q) = empty non-nil", s)
		}
		if len(items) > strings.Count(s, ",")+1 {
			t.Errorf("splitList(%q) = %q: more items than commas allow", s, items)
		}
		for _, it := range items {
			if it == "" || it != strings.TrimSpace(it) || strings.Contains(it, ",") {
				t.Errorf("splitList(%q) has item %q", s, it)
			}
		}
		if again := splitList(strings.Join(items, ",")); !slices.Equal(again, items) {
			t.Errorf("splitList(join(%q)) = %q, want the same", items, again)
		}
	})
}

// envFileError is every shape a .env parse error may take: none quotes the
// file's content.
var envFileError = regexp.MustCompile(`^read env file [^:]+: (line \d+ is not NAME=value|line \d+ exports a variable the file does not set|a line is not NAME=value|a line exports a variable the file does not set|a quoted value is never closed|it is not a list of NAME=value lines)$`)

func FuzzEnvFile(f *testing.F) {
	for _, s := range []string{
		"", "A=1", "DISCORD_BOT_TOKEN=x\nANTHROPIC_API_KEY='y'\n", "export A=\"b\nc\"", "A", "A=\"open",
		"export B", "A:1", "A=1 # c", "\xef\xbb\xbfA=1", "A.B=1", "QUERY_TIMEOUT_MS=abc\nAGENT_BACKEND=foo",
		"DISCORD_BOT_TOKEN secret", "A='x'y'", "#only a comment\r\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, content string) {
		if strings.Contains(content, "$") {
			// The .env parser expands $NAME from the process environment,
			// which would make the run depend on it.
			t.Skip()
		}
		cfg, err := load(t, nil, content, RequireDiscord)
		var verr *ValidationError
		switch {
		case err == nil || errors.As(err, &verr):
			for name := range cfg.ProviderEnv {
				if strings.HasPrefix(name, "DISCORD_") || !isProviderVar(name) {
					t.Errorf("ProviderEnv has %q", name)
				}
			}
			for _, kv := range cfg.BackendEnv() {
				if strings.HasPrefix(kv, "DISCORD_") {
					t.Errorf("BackendEnv has %q", kv)
				}
			}
			if cfg.DiscordToken != "" && !strings.HasPrefix(cfg.Redacted(), "DISCORD_BOT_TOKEN=<redacted>\n") {
				t.Errorf("Redacted does not mask DISCORD_BOT_TOKEN:\n%s", cfg.Redacted())
			}
		default:
			if cfg != nil {
				t.Errorf("config %v beside a read error", cfg)
			}
			if !envFileError.MatchString(err.Error()) {
				t.Errorf("error %q is not one of the known shapes", err)
			}
		}
	})
}
