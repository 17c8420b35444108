// Package config loads the gateway's settings from the environment and an
// optional .env file into one typed Config, and validates them.
//
// Precedence, highest first: a non-empty environment variable, a non-empty
// .env entry, the default (defaults.go). An empty value counts as unset, in
// the environment and in .env alike. The bot token, the model credentials
// and the webhook secrets may instead be given as files: NAME_FILE names a
// file holding NAME's value (secretfile.go). Every problem is reported at
// once in a *ValidationError; messages name the variable and never show a
// secret.
//
// Load uses its own viper.Viper for each call and changes no global state, so
// calls may run concurrently. A Config is not changed after Load returns and
// may be read from any number of goroutines.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/viper"

	"github.com/agentgateway/gateway/internal/actions"
)

// DefaultEnvFile is the .env file Load reads when LoadOptions.EnvFile is
// empty, relative to the current directory. It may be absent.
const DefaultEnvFile = ".env"

// Config is the gateway's configuration. Load fills every field.
type Config struct {
	// DiscordToken is the bot token (DISCORD_BOT_TOKEN). Secret.
	DiscordToken string
	// AnthropicAPIKey is ANTHROPIC_API_KEY, the claude backend's key. Secret.
	AnthropicAPIKey string
	// AllowedTools are the tools the agent may use without asking, from the
	// comma-separated ALLOWED_TOOLS.
	AllowedTools []string
	// PermissionMode is one of default, acceptEdits, plan, bypassPermissions.
	PermissionMode string
	// QueryTimeout bounds one agent run (QUERY_TIMEOUT_MS).
	QueryTimeout time.Duration
	// ConfigDir is the absolute path of the persona and state directory.
	ConfigDir string
	// MaxConcurrent is how many lanes may run at once (MAX_CONCURRENT_QUERIES).
	MaxConcurrent int
	// MaxQueueDepth is how many events may wait; more are refused.
	MaxQueueDepth int
	// MaxChannelQueue is how many events one channel (lane) may have
	// waiting, under MaxQueueDepth, so one busy channel cannot lock the
	// others out.
	MaxChannelQueue int
	// MaxReplyMessages caps the Discord messages of one reply; a longer
	// answer is cut there and attached whole as a file.
	MaxReplyMessages int
	// OutputChannelID is where heartbeat and cron output goes; may be empty.
	OutputChannelID string
	// Backend names the agent CLI: claude, codex, gemini, opencode or pi.
	Backend string
	// Model is passed to the CLI; empty means the CLI's default.
	Model string
	// MaxTurns bounds the agent's turns in one run (AGENT_MAX_TURNS).
	MaxTurns int
	// UseCLILogin says the CLI is logged in by itself (e.g. a subscription),
	// so no API key is required (AGENT_USE_CLI_LOGIN).
	UseCLILogin bool
	// AgentBinary overrides the CLI's path (AGENT_CLI_PATH); empty means
	// the backend's usual name on PATH.
	AgentBinary string
	// ACPCommand is the command line of the agent AGENT_BACKEND=acp runs
	// (ACP_COMMAND), split into words without a shell; required with acp.
	ACPCommand string
	// AgentUser is the user every agent CLI runs as (AGENT_USER): a user
	// name or a numeric uid; empty means the gateway's own user. See
	// internal/agentuser for the check that the setup holds.
	AgentUser string
	// AllowedUserIDs, AllowedChannelIDs and AllowedGuildIDs are the access
	// allowlists (Discord snowflakes); empty lists allow everyone.
	AllowedUserIDs    []string
	AllowedChannelIDs []string
	AllowedGuildIDs   []string
	// ApproverIDs are the users who may apply or discard a schedule change
	// the agent made (APPROVER_IDS); empty means the allowlisted users, or,
	// without a user allowlist, members with the Manage Server permission.
	ApproverIDs []string
	// AllowedRoleIDs lets members with any of these roles use the bot
	// (ALLOWED_ROLE_IDS): with AllowedUserIDs, either suffices. DMs carry
	// no roles.
	AllowedRoleIDs []string
	// ApproverRoleIDs are roles whose members may answer approvals and
	// Apply, Lift or Confirm, as ApproverIDs may (APPROVER_ROLE_IDS).
	ApproverRoleIDs []string
	// SessionScope is channel (one session per channel) or user (one per
	// person in a shared channel; the lane stays the channel)
	// (SESSION_SCOPE).
	SessionScope string
	// NotifyAfter is how long a turn must run before its answer mentions
	// its author (NOTIFY_AFTER); 0 never does.
	NotifyAfter time.Duration
	// TranscribeURL is an OpenAI-compatible /v1/audio/transcriptions
	// endpoint for voice messages (TRANSCRIBE_URL); empty turns
	// transcription off. TranscribeAPIKey is its bearer token
	// (TRANSCRIBE_API_KEY), TranscribeModel the model it is asked for
	// (TRANSCRIBE_MODEL), and VoiceMaxDuration the longest voice message
	// transcribed (VOICE_MAX_SECONDS).
	TranscribeURL    string
	TranscribeAPIKey string
	TranscribeModel  string
	VoiceMaxDuration time.Duration
	// InboxRetention and InboxMaxEvents bound the finished events the
	// inbox keeps (INBOX_RETENTION, INBOX_MAX_EVENTS): for de-duplication
	// and doctor; unfinished events are always kept.
	InboxRetention time.Duration
	InboxMaxEvents int
	// CatchUpMaxAge skips prompts missed while disconnected that are older
	// than this (CATCH_UP_MAX_AGE).
	CatchUpMaxAge time.Duration
	// WorkDir is where the agent CLI runs in channels without a project
	// (WORK_DIR); empty means ConfigDir. The persona and memory.md stay in
	// ConfigDir whatever the working directory.
	WorkDir string
	// ProjectsRoot is the directory /project may bind channels inside
	// (PROJECTS_ROOT); empty disables /project.
	ProjectsRoot string
	// Threads is auto when a prompt in a text channel opens a thread of
	// its own (THREADS), off to answer in the channel.
	Threads string
	// ThreadArchive is how long a thread the gateway opens stays open
	// without messages (THREAD_ARCHIVE), one of Discord's durations.
	ThreadArchive time.Duration
	// Worktrees gives each thread in a git project a worktree of its own
	// on a branch gateway/<thread id> (WORKTREES).
	Worktrees bool
	// WorktreeKeepDays is how long a merged worktree is kept after its
	// thread went quiet (WORKTREE_KEEP_DAYS).
	WorktreeKeepDays int
	// TurnCard is what the live turn card becomes when a turn ends:
	// receipt, delete, or off for no card (TURN_CARD).
	TurnCard string
	// DailyBudgetUSD and ChannelBudgetUSD are the daily spending limits of
	// the whole gateway and of each channel (DAILY_BUDGET_USD,
	// CHANNEL_DAILY_BUDGET_USD); 0 means none.
	DailyBudgetUSD   float64
	ChannelBudgetUSD float64
	// DiscordAPIBaseURL and DiscordGatewayURL replace Discord's endpoints
	// (tests point them at a fake); empty means the real Discord.
	DiscordAPIBaseURL string
	DiscordGatewayURL string
	// WebhookAddr is the webhook listener's host:port; empty disables it.
	WebhookAddr string
	// LogLevel is one of trace, debug, info, warn, error.
	LogLevel string
	// LogFormat is console or json.
	LogFormat string
	// KeepAlive is how long an idle claude process is kept warm for its
	// channel's next prompt (AGENT_KEEP_ALIVE); 0 spawns one per turn.
	KeepAlive time.Duration
	// MaxWarm caps the warm processes (MAX_WARM_PROCESSES); 0 means
	// MaxConcurrent (see WarmCap). The least recently used idle one goes
	// first.
	MaxWarm int
	// WarmMemoryMB caps the proportional memory (PSS) of all warm process
	// groups together, read from /proc/<pid>/smaps_rollup, or their RSS
	// where that cannot be read (MAX_WARM_MEMORY_MB); 0 means no cap.
	WarmMemoryMB int
	// HangTimeout is how long a busy warm process may print nothing
	// before it is killed and the turn retried once (AGENT_HANG_TIMEOUT).
	HangTimeout time.Duration
	// Steer is what a prompt to a busy channel does: queue or steer
	// (STEER).
	Steer string
	// ApprovalTimeout is how long a tool approval waits for an answer
	// before it is denied (APPROVAL_TIMEOUT).
	ApprovalTimeout time.Duration
	// ScheduledToolsPolicy answers the approvals of scheduled events:
	// deny or allow (SCHEDULED_TOOLS_POLICY).
	ScheduledToolsPolicy string
	// MaxAttachmentMB and MaxAttachmentsMB bound the files fetched for one
	// prompt: each, and all together (MAX_ATTACHMENT_MB,
	// MAX_ATTACHMENTS_TOTAL_MB); 0 fetches none.
	MaxAttachmentMB  int
	MaxAttachmentsMB int
	// HistoryMessages is how many recent exchanges per channel are kept
	// for a new session's context (HISTORY_MESSAGES); 0 keeps none.
	HistoryMessages int
	// ArchiveDays is how many days the conversation archive keeps
	// (ARCHIVE_DAYS); 0 keeps everything.
	ArchiveDays int
	// Actions are the Discord actions' switches: DISCORD_ACTIONS and one
	// per category (DISCORD_ACTIONS_CHANNELS...).
	Actions actions.Flags
	// ActionsMaxPerTurn bounds the actions of one reply
	// (DISCORD_ACTIONS_MAX_PER_TURN); ActionsMaxFollowups the follow-up
	// turns that bring query results back (DISCORD_ACTIONS_MAX_FOLLOWUPS).
	ActionsMaxPerTurn   int
	ActionsMaxFollowups int
	// DeferMax bounds a defer action's delay
	// (DISCORD_ACTIONS_DEFER_MAX_SECONDS) and DeferMaxPending the deferred
	// prompts waiting at once (DISCORD_ACTIONS_DEFER_MAX_PENDING).
	DeferMax        time.Duration
	DeferMaxPending int
	// AdminAddr is the admin server's host:port (ADMIN_ADDR; a bare port
	// listens on 127.0.0.1); empty turns it off. AdminToken is the secret
	// an operator gives it (ADMIN_TOKEN), at least MinSecretBytes long and
	// required when AdminAddr is not a loopback address or AgentUser is
	// set.
	AdminAddr  string
	AdminToken string
	// AdminHosts are the names the admin server answers to besides its
	// own address (ADMIN_HOSTS): "host" on any port or "host:port", lower
	// case. AdminTrustProxy says a TLS proxy in front sets
	// X-Forwarded-Proto (ADMIN_TRUST_PROXY).
	AdminHosts      []string
	AdminTrustProxy bool
	// NATSURLs are the NATS servers of the inbox on JetStream (NATS_URL,
	// comma-separated; tls:// asks for TLS); none keeps the embedded
	// inbox in CONFIG_DIR. They may carry a user and password, which
	// Redacted hides.
	NATSURLs []string
	// NATSCredsFile is a NATS credentials file (NATS_CREDS_FILE);
	// NATSToken a token (NATS_TOKEN or NATS_TOKEN_FILE). Secret. At most
	// one of them is set.
	NATSCredsFile string
	NATSToken     string
	// NATSReplicas is how many servers keep each stream and bucket
	// (NATS_REPLICAS): 1, 3 or 5.
	NATSReplicas int
	// NATSPartitions is how many partitions the event stream has
	// (NATS_PARTITIONS), fixed when the stream is made.
	NATSPartitions int
	// NATSAckWait is how long a worker may go silent before its event is
	// handed to another (NATS_ACK_WAIT): the failover time after a crash.
	NATSAckWait time.Duration
	// ProviderEnv holds the model providers' variables (ANTHROPIC_*,
	// OPENAI_*, GEMINI_*, GOOGLE_*, CLAUDE_CODE_*, OPENCODE_*, PI_*,
	// IS_SANDBOX) found in the environment or .env, environment first.
	// Values are secrets. BackendEnv picks the selected backend's share.
	ProviderEnv map[string]string

	euid int // effective user id at Load, for Warnings
	// rootDefault says PermissionMode is acceptEdits because PERMISSION_MODE
	// was not set and claude refuses the default as root (RootDefaultNote).
	rootDefault bool
	// sandboxInFile is IS_SANDBOX's value in .env, which the environment
	// may override (RootBypassAdvice names both).
	sandboxInFile string
	// unknown are the .env names that look like settings but are not.
	unknown []Unknown
	// given are the settings set (non-empty) in the environment or .env.
	given map[string]bool
	// lookup reads any variable from the environment or .env (Lookup).
	lookup func(name string) (string, bool)
	// secretFiles maps a secret read from a file to that file (NAME_FILE).
	secretFiles map[string]string
	// sources says where each shown setting's value came from (Source).
	sources map[string]string
}

// WarmCap is how many claude processes may be kept warm at once.
func (c *Config) WarmCap() int {
	if c.MaxWarm > 0 {
		return c.MaxWarm
	}
	return c.MaxConcurrent
}

// AgentWorkDir is where the agent CLI runs in a channel without a project.
func (c *Config) AgentWorkDir() string {
	if c.WorkDir != "" {
		return c.WorkDir
	}
	return c.ConfigDir
}

// Require names the credentials a command cannot do without.
type Require uint

const (
	// RequireDiscord requires DISCORD_BOT_TOKEN (gateway run).
	RequireDiscord Require = 1 << iota
	// RequireBackendCredentials requires the selected backend's model
	// credential unless AGENT_USE_CLI_LOGIN is true (run, chat).
	RequireBackendCredentials
)

// LoadOptions tell Load where to read and what to require.
type LoadOptions struct {
	// EnvFile is the .env file to read. Empty means DefaultEnvFile, which
	// may be absent; a file named here must exist.
	EnvFile string
	// Environ is the environment as KEY=value entries; nil means
	// os.Environ(). Tests pass their own so they need not touch the
	// process environment.
	Environ []string
	// Require says which credentials must be present.
	Require Require

	// euid is the effective user id the gateway runs as; nil means
	// os.Geteuid. Tests pretend to be root, or not.
	euid func() int
}

// Load reads the configuration from opts.Environ and the .env file and
// validates it.
//
// An unreadable or malformed .env file is an error with a nil Config.
// Invalid or missing values give a *ValidationError listing every problem,
// together with a Config in which each bad value has its default, so that
// `gateway doctor` can still show the rest.
func Load(opts LoadOptions) (*Config, error) {
	v := viper.New()
	for _, k := range keys {
		v.SetDefault(k, defaults[k])
	}
	if err := readEnvFile(v, opts.EnvFile); err != nil {
		return nil, err
	}
	inFile := envFileValues(v)
	// Before the environment is layered on, viper's keys are the defaults
	// (all known) and the .env file's names.
	var fileNames []string
	for _, k := range v.AllKeys() {
		if validEnvName(k) {
			fileNames = append(fileNames, k)
		}
	}
	environ := opts.Environ
	if environ == nil {
		environ = os.Environ()
	}
	env := firstValues(environ)
	given := givenIn(v, env)
	setEnviron(v, env)

	// Secrets given as files (NAME_FILE) take NAME's place in every layer
	// consumers read: the typed fields, ProviderEnv and Lookup.
	p := &parser{v: v, bad: make(map[string]bool)}
	lookup := lookupIn(env, v)
	files, fileProblems := readSecretFiles(fileSecretNames(append(slices.Collect(maps.Keys(env)), fileNames...)), lookup, p.bad)
	secretFiles := make(map[string]string, len(files))
	fromFiles := make(map[string]string, len(files))
	for _, f := range files {
		v.Set(f.name, f.value)
		given[f.name] = true
		secretFiles[f.name] = f.path
		fromFiles[f.name] = f.value
	}
	// A secret whose file cannot be used has no value, as a rejected
	// setting has its default, whatever NAME says.
	unusable := maps.Clone(p.bad)
	for name := range unusable {
		v.Set(name, "")
	}
	cfg := p.parse()
	cfg.euid = os.Geteuid()
	if opts.euid != nil {
		cfg.euid = opts.euid()
	}
	cfg.sandboxInFile = inFile[EnvIsSandbox]
	cfg.unknown = UnknownNames(fileNames)
	cfg.given = given
	cfg.secretFiles = secretFiles
	cfg.sources = sources(cfg, env, inFile, p.bad)
	if !given[EnvPermissionMode] && cfg.RootRefusesBypass() {
		// The seed's default would make claude refuse every turn as root:
		// a mode that asks before commands works instead (RootDefaultNote).
		cfg.PermissionMode = PermissionAcceptEdits
		cfg.rootDefault = true
		cfg.sources[EnvPermissionMode] = SourceRootDefault
	}
	cfg.lookup = func(name string) (string, bool) {
		if val, ok := fromFiles[name]; ok {
			return val, true
		}
		if unusable[name] {
			return "", false
		}
		return lookup(name)
	}
	problems := append(fileProblems, required(cfg, opts.Require, p.bad)...)
	problems = append(problems, p.problems...)
	if len(problems) > 0 {
		return cfg, &ValidationError{Problems: problems}
	}
	return cfg, nil
}

// IsSet reports whether the setting name was given a value in the
// environment or the .env file, rather than left to its default.
func (c *Config) IsSet(name string) bool { return c.given[name] }

// givenIn returns the settings with a non-empty value in the environment
// (env) or in the .env file read into v (before the environment is layered
// on).
func givenIn(v *viper.Viper, env map[string]string) map[string]bool {
	m := make(map[string]bool)
	for _, k := range keys {
		if v.InConfig(k) && strings.TrimSpace(v.GetString(k)) != "" {
			m[k] = true
		}
		if strings.TrimSpace(env[k]) != "" {
			m[k] = true
		}
	}
	return m
}

// UnknownSettings returns the names in the .env file that look like
// gateway settings but are not one, each with the closest real name.
func (c *Config) UnknownSettings() []Unknown { return slices.Clone(c.unknown) }

// Lookup returns a variable the operator names in a configuration file,
// such as a webhook's Secret-Env, from the environment or else the .env
// file, or for a WEBHOOK_* variable or a credential from the file its
// NAME_FILE names. Empty values count as unset.
func (c *Config) Lookup(name string) (string, bool) {
	if c.lookup == nil || name == "" {
		return "", false
	}
	return c.lookup(name)
}

// firstValues maps each variable in environ to its value; of a name given
// twice the first entry wins, as with os.Getenv.
func firstValues(environ []string) map[string]string {
	env := make(map[string]string, len(environ))
	for _, kv := range environ {
		if name, val, ok := strings.Cut(kv, "="); ok {
			if _, dup := env[name]; !dup {
				env[name] = val
			}
		}
	}
	return env
}

func lookupIn(env map[string]string, v *viper.Viper) func(string) (string, bool) {
	// A snapshot: viper is not safe for concurrent use, Lookup must be.
	file := make(map[string]string)
	for _, k := range v.AllKeys() {
		file[strings.ToUpper(k)] = v.GetString(k)
	}
	return func(name string) (string, bool) {
		for _, m := range []map[string]string{env, file} {
			if val := m[name]; strings.TrimSpace(val) != "" {
				return val, true
			}
		}
		return "", false
	}
}

// readEnvFile reads the .env file at path (DefaultEnvFile if empty) into
// v's config layer, which the environment overrides.
func readEnvFile(v *viper.Viper, path string) error {
	explicit := path != ""
	if !explicit {
		path = DefaultEnvFile
	}
	b, err := os.ReadFile(path)
	if err != nil {
		if !explicit && errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("read env file: %w", err)
	}
	v.SetConfigType("env")
	if err := v.ReadConfig(bytes.NewReader(b)); err != nil {
		// The parser's message quotes the offending line, which may hold a
		// secret: say where the problem is instead.
		return fmt.Errorf("read env file %s: %s", path, describeEnvFileError(err, b))
	}
	return nil
}

// gotenvLine matches the parser's messages that quote a whole line.
var gotenvLine = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile("(?s)line `(.*)` (doesn't match format|has an unset variable)")
})

// describeEnvFileError turns a .env parse error into a message that points
// at the line without quoting it.
func describeEnvFileError(err error, content []byte) string {
	msg := err.Error()
	if strings.Contains(msg, "missing quotes") {
		return "a quoted value is never closed"
	}
	m := gotenvLine().FindStringSubmatch(msg)
	if m == nil {
		return "it is not a list of NAME=value lines"
	}
	what := "is not NAME=value"
	if m[2] == "has an unset variable" {
		what = "exports a variable the file does not set"
	}
	first, _, _ := strings.Cut(m[1], "\n")
	first = strings.TrimSpace(first)
	for i, l := range splitLines(string(content)) {
		if strings.TrimSpace(l) == first {
			return fmt.Sprintf("line %d %s", i+1, what)
		}
	}
	return "a line " + what
}

// splitLines splits s at CR, LF or CRLF, as the .env parser does.
func splitLines(s string) []string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	return strings.Split(s, "\n")
}

// setEnviron puts the settings and provider variables found in env into
// v's override layer, above .env and the defaults.
//
// Viper's own env layer (BindEnv) reads os.LookupEnv and nothing else, so it
// cannot take an injected environment; the override layer holds the same
// place in the precedence. Like BindEnv without AllowEmptyEnv, an empty
// variable counts as unset.
func setEnviron(v *viper.Viper, env map[string]string) {
	for name, val := range env {
		if strings.TrimSpace(val) == "" || !validEnvName(name) {
			continue
		}
		if slices.Contains(keys, name) || isProviderVar(name) {
			v.Set(name, val)
		}
	}
}
