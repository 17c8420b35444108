package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const (
	fileToken  = "MTAxMjM0NTY3ODkwMTIzNDU2.GAbCdE.file-token-value"
	fileAPIKey = "sk-ant-from-a-file"
	fileHook   = "0123456789abcdef-webhook-secret"
)

// secretAt writes content to a file named name in a new directory and
// returns its path.
func secretAt(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o400); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSecretFiles: every consumer of a secret sees the value of the file
// NAME_FILE names, from the environment or .env, with the trailing newline
// dropped.
func TestSecretFiles(t *testing.T) {
	token := secretAt(t, "discord-token", fileToken+"\n")
	key := secretAt(t, "anthropic", fileAPIKey+"\r\n")
	hook := secretAt(t, "deploy", fileHook+"  \n")
	openai := secretAt(t, "openai", "sk-openai")

	cfg := mustLoad(t, map[string]string{
		"DISCORD_BOT_TOKEN_FILE":     token,
		"ANTHROPIC_API_KEY_FILE":     key,
		"WEBHOOK_DEPLOY_SECRET_FILE": hook,
	}, "OPENAI_API_KEY_FILE="+openai+"\n", RequireDiscord|RequireBackendCredentials)

	if cfg.DiscordToken != fileToken {
		t.Errorf("DiscordToken = %q, want the file's", cfg.DiscordToken)
	}
	if cfg.AnthropicAPIKey != fileAPIKey {
		t.Errorf("AnthropicAPIKey = %q, want the file's", cfg.AnthropicAPIKey)
	}
	if got, ok := cfg.Lookup("WEBHOOK_DEPLOY_SECRET"); !ok || got != fileHook {
		t.Errorf("Lookup(WEBHOOK_DEPLOY_SECRET) = %q, %v; want the file's", got, ok)
	}
	for _, name := range []string{EnvDiscordToken, EnvAnthropicAPIKey} {
		if !cfg.IsSet(name) {
			t.Errorf("IsSet(%s) = false, want true", name)
		}
	}
	if ok, which := cfg.HasCredential(BackendClaude); !ok || which != EnvAnthropicAPIKey {
		t.Errorf("HasCredential(claude) = %v, %q", ok, which)
	}
	// The CLI gets its key, not the path; never the Discord token.
	want := []string{"ANTHROPIC_API_KEY=" + fileAPIKey}
	if diff := cmp.Diff(want, cfg.BackendEnv()); diff != "" {
		t.Errorf("claude's BackendEnv (-want +got):\n%s", diff)
	}
	wantProvider := map[string]string{EnvAnthropicAPIKey: fileAPIKey, EnvOpenAIAPIKey: "sk-openai"}
	if diff := cmp.Diff(wantProvider, cfg.ProviderEnv); diff != "" {
		t.Errorf("ProviderEnv (-want +got):\n%s", diff)
	}
	wantFiles := map[string]string{
		EnvDiscordToken: token, EnvAnthropicAPIKey: key, EnvOpenAIAPIKey: openai, "WEBHOOK_DEPLOY_SECRET": hook,
	}
	if diff := cmp.Diff(wantFiles, cfg.SecretFiles()); diff != "" {
		t.Errorf("SecretFiles (-want +got):\n%s", diff)
	}
	red := cfg.Redacted()
	for _, secret := range []string{fileToken, fileAPIKey, "sk-openai"} {
		if strings.Contains(red, secret) {
			t.Errorf("Redacted shows a secret read from a file:\n%s", red)
		}
	}
	if !strings.Contains(red, "DISCORD_BOT_TOKEN_FILE="+token+"\n") {
		t.Errorf("Redacted does not say where the token came from:\n%s", red)
	}
}

// TestSecretFileSameValueTwice: NAME and NAME_FILE may both be set when
// they agree (a token in .env and the same one as a credential).
func TestSecretFileSameValueTwice(t *testing.T) {
	token := secretAt(t, "token", fileToken+"\n")
	cfg := mustLoad(t, map[string]string{"DISCORD_BOT_TOKEN_FILE": token}, "DISCORD_BOT_TOKEN="+fileToken+"\n", RequireDiscord)
	if cfg.DiscordToken != fileToken {
		t.Errorf("DiscordToken = %q", cfg.DiscordToken)
	}
}

// TestSecretFileProblems: a file that cannot be used, or that disagrees
// with NAME, is a problem listed with the others, naming the variable and
// never what any file or variable holds; and the secret is not reported
// missing besides.
func TestSecretFileProblems(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "absent")
	empty := secretAt(t, "empty", "\n")
	twoLines := secretAt(t, "env", "DISCORD_BOT_TOKEN="+fileToken+"\nOTHER=x\n")
	big := secretAt(t, "big", strings.Repeat("x", maxSecretFile+1))
	token := secretAt(t, "token", fileToken)

	tests := []struct {
		name    string
		environ map[string]string
		dotenv  string
		req     Require  // with RequireDiscord when zero
		want    []string // each problem's message
		vars    []string // each problem's Var
	}{
		{
			name:    "missing file",
			environ: map[string]string{"DISCORD_BOT_TOKEN_FILE": missing},
			want:    []string{"DISCORD_BOT_TOKEN_FILE: cannot read " + missing + ": no such file or directory"},
			vars:    []string{"DISCORD_BOT_TOKEN_FILE"},
		},
		{
			name:    "a directory",
			environ: map[string]string{"ANTHROPIC_API_KEY_FILE": dir},
			want:    []string{"ANTHROPIC_API_KEY_FILE: " + dir + " is not a regular file"},
			vars:    []string{"ANTHROPIC_API_KEY_FILE"},
			req:     RequireBackendCredentials,
		},
		{
			name:   "empty file, from .env",
			dotenv: "DISCORD_BOT_TOKEN_FILE=" + empty + "\n",
			want:   []string{"DISCORD_BOT_TOKEN_FILE: " + empty + " is empty"},
			vars:   []string{"DISCORD_BOT_TOKEN_FILE"},
		},
		{
			name:    "the .env file by mistake",
			environ: map[string]string{"DISCORD_BOT_TOKEN_FILE": twoLines},
			want:    []string{"DISCORD_BOT_TOKEN_FILE: " + twoLines + " holds more than one line: it must hold the secret alone"},
			vars:    []string{"DISCORD_BOT_TOKEN_FILE"},
		},
		{
			name:    "too large",
			environ: map[string]string{"DISCORD_BOT_TOKEN_FILE": big},
			want:    []string{"DISCORD_BOT_TOKEN_FILE: " + big + " is larger than 64 KiB: it must hold the secret alone"},
			vars:    []string{"DISCORD_BOT_TOKEN_FILE"},
		},
		{
			name:    "both set, different",
			environ: map[string]string{"DISCORD_BOT_TOKEN_FILE": token},
			dotenv:  "DISCORD_BOT_TOKEN=an-older-token-in-dotenv\n",
			want:    []string{"DISCORD_BOT_TOKEN and DISCORD_BOT_TOKEN_FILE (" + token + ") are both set, to different values: unset one"},
			vars:    []string{"DISCORD_BOT_TOKEN"},
		},
		{
			name: "webhook secret and a model key at once",
			environ: map[string]string{
				"WEBHOOK_DEPLOY_SECRET_FILE": missing,
				"WEBHOOK_DEPLOY_SECRET":      "a-direct-webhook-secret",
				"ANTHROPIC_API_KEY":          "sk-ant-in-the-environment",
				"ANTHROPIC_API_KEY_FILE":     token,
				"DISCORD_BOT_TOKEN":          fileToken,
			},
			want: []string{
				"ANTHROPIC_API_KEY and ANTHROPIC_API_KEY_FILE (" + token + ") are both set, to different values: unset one",
				"WEBHOOK_DEPLOY_SECRET_FILE: cannot read " + missing + ": no such file or directory",
			},
			vars: []string{"ANTHROPIC_API_KEY", "WEBHOOK_DEPLOY_SECRET_FILE"},
			req:  RequireDiscord | RequireBackendCredentials,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := tt.req
			if req == 0 {
				req = RequireDiscord
			}
			cfg, err := load(t, tt.environ, tt.dotenv, req)
			var verr *ValidationError
			if !errors.As(err, &verr) {
				t.Fatalf("Load: %v, want a *ValidationError", err)
			}
			var got, vars []string
			for _, p := range verr.Problems {
				got = append(got, p.Error())
				var v *VarError
				if errors.As(p, &v) {
					vars = append(vars, v.Var)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.vars, vars); diff != "" {
				t.Errorf("problem variables (-want +got):\n%s", diff)
			}
			for _, secret := range []string{fileToken, "an-older-token-in-dotenv", "sk-ant-in-the-environment", "a-direct-webhook-secret", "OTHER=x"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("the error shows a secret: %v", err)
				}
			}
			if cfg == nil {
				t.Fatal("no Config with the problems")
			}
			// A secret in question has no value, whatever NAME says.
			if cfg.DiscordToken != "" && tt.environ["DISCORD_BOT_TOKEN"] == "" {
				t.Errorf("DiscordToken is set despite the problem")
			}
			if got := cfg.ProviderEnv[EnvAnthropicAPIKey]; got != "" {
				t.Errorf("ProviderEnv[ANTHROPIC_API_KEY] = %q despite the problem", got)
			}
			if got, ok := cfg.Lookup("WEBHOOK_DEPLOY_SECRET"); ok {
				t.Errorf("Lookup(WEBHOOK_DEPLOY_SECRET) = %q despite the problem", got)
			}
		})
	}
}

// TestSecretFileNamesAreSettings: NAME_FILE in .env is not flagged as an
// unknown setting, while a misspelt one is.
func TestSecretFileNamesAreSettings(t *testing.T) {
	token := secretAt(t, "token", fileToken)
	key := secretAt(t, "key", fileAPIKey)
	cfg := mustLoad(t, nil, strings.Join([]string{
		"DISCORD_BOT_TOKEN_FILE=" + token,
		"ANTHROPIC_API_KEY_FILE=" + key,
		"OPENAI_API_KEY_FILE=" + key,
		"GEMINI_API_KEY_FILE=" + key,
		"GOOGLE_API_KEY_FILE=" + key,
		"ANTHROPIC_AUTH_TOKEN_FILE=" + key,
		"WEBHOOK_DEPLOY_SECRET_FILE=" + key,
		"DISCORD_BOT_TOKEN_FIEL=" + token,
	}, "\n"), 0)
	want := []Unknown{{Name: "DISCORD_BOT_TOKEN_FIEL", Suggestion: "DISCORD_BOT_TOKEN_FILE"}}
	if diff := cmp.Diff(want, cfg.UnknownSettings()); diff != "" {
		t.Errorf("UnknownSettings (-want +got):\n%s", diff)
	}
}

// TestSecretFileOnlyForSecrets: _FILE is read for secrets only; other
// settings and variables that merely end in _FILE (SSL_CERT_FILE) are left
// alone, and WEBHOOK_ADDR is not a secret.
func TestSecretFileOnlyForSecrets(t *testing.T) {
	path := secretAt(t, "value", "opus\n")
	cfg := mustLoad(t, map[string]string{
		"AGENT_MODEL_FILE":  path,
		"WEBHOOK_ADDR_FILE": path,
		"SSL_CERT_FILE":     path,
	}, "", 0)
	if cfg.Model != "" || cfg.WebhookAddr != "" {
		t.Errorf("Model %q, WebhookAddr %q: read from a _FILE that is not a secret's", cfg.Model, cfg.WebhookAddr)
	}
	if got, ok := cfg.Lookup("SSL_CERT"); ok {
		t.Errorf("Lookup(SSL_CERT) = %q, want unset", got)
	}
}
