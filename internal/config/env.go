package config

import (
	"strings"

	"github.com/agentgateway/gateway/internal/actions"
)

// Names of the environment variables (and .env keys) the gateway reads.
const (
	EnvDiscordToken      = "DISCORD_BOT_TOKEN"
	EnvAnthropicAPIKey   = "ANTHROPIC_API_KEY"
	EnvAllowedTools      = "ALLOWED_TOOLS"
	EnvPermissionMode    = "PERMISSION_MODE"
	EnvQueryTimeoutMS    = "QUERY_TIMEOUT_MS"
	EnvConfigDir         = "CONFIG_DIR"
	EnvMaxConcurrent     = "MAX_CONCURRENT_QUERIES"
	EnvMaxQueueDepth     = "MAX_QUEUE_DEPTH"
	EnvMaxChannelQueue   = "MAX_CHANNEL_QUEUE"
	EnvMaxReplyMessages  = "MAX_REPLY_MESSAGES"
	EnvOutputChannelID   = "OUTPUT_CHANNEL_ID"
	EnvBackend           = "AGENT_BACKEND"
	EnvModel             = "AGENT_MODEL"
	EnvMaxTurns          = "AGENT_MAX_TURNS"
	EnvUseCLILogin       = "AGENT_USE_CLI_LOGIN"
	EnvAgentBinary       = "AGENT_CLI_PATH"
	EnvACPCommand        = "ACP_COMMAND"
	EnvAgentUser         = "AGENT_USER"
	EnvAllowedUserIDs    = "ALLOWED_USER_IDS"
	EnvAllowedChannelIDs = "ALLOWED_CHANNEL_IDS"
	EnvAllowedGuildIDs   = "ALLOWED_GUILD_IDS"
	EnvApproverIDs       = "APPROVER_IDS"
	EnvInboxRetention    = "INBOX_RETENTION"
	EnvInboxMaxEvents    = "INBOX_MAX_EVENTS"
	EnvCatchUpMaxAge     = "CATCH_UP_MAX_AGE"
	EnvWorkDir           = "WORK_DIR"
	EnvProjectsRoot      = "PROJECTS_ROOT"
	EnvThreads           = "THREADS"
	EnvThreadArchive     = "THREAD_ARCHIVE"
	EnvWorktrees         = "WORKTREES"
	EnvWorktreeKeepDays  = "WORKTREE_KEEP_DAYS"
	EnvTurnCard          = "TURN_CARD"
	EnvDailyBudget       = "DAILY_BUDGET_USD"
	EnvChannelBudget     = "CHANNEL_DAILY_BUDGET_USD"
	EnvDiscordAPIBaseURL = "DISCORD_API_BASE_URL"
	EnvDiscordGatewayURL = "DISCORD_GATEWAY_URL"
	EnvWebhookAddr       = "WEBHOOK_ADDR"
	EnvLogLevel          = "LOG_LEVEL"
	EnvLogFormat         = "LOG_FORMAT"
	EnvKeepAlive         = "AGENT_KEEP_ALIVE"
	EnvMaxWarm           = "MAX_WARM_PROCESSES"
	EnvWarmMemoryMB      = "MAX_WARM_MEMORY_MB"
	EnvHangTimeout       = "AGENT_HANG_TIMEOUT"
	EnvSteer             = "STEER"
	EnvApprovalTimeout   = "APPROVAL_TIMEOUT"
	EnvScheduledTools    = "SCHEDULED_TOOLS_POLICY"
	EnvMaxAttachmentMB   = "MAX_ATTACHMENT_MB"
	EnvMaxAttachmentsMB  = "MAX_ATTACHMENTS_TOTAL_MB"
	EnvHistoryMessages   = "HISTORY_MESSAGES"
	EnvArchiveDays       = "ARCHIVE_DAYS"
	EnvActions           = "DISCORD_ACTIONS"
	EnvActionsMax        = "DISCORD_ACTIONS_MAX_PER_TURN"
	EnvActionsFollowups  = "DISCORD_ACTIONS_MAX_FOLLOWUPS"
	EnvDeferMaxSeconds   = "DISCORD_ACTIONS_DEFER_MAX_SECONDS"
	EnvDeferMaxPending   = "DISCORD_ACTIONS_DEFER_MAX_PENDING"
	EnvAdminAddr         = "ADMIN_ADDR"
	EnvAdminToken        = "ADMIN_TOKEN"
	EnvAdminHosts        = "ADMIN_HOSTS"
	EnvAdminTrustProxy   = "ADMIN_TRUST_PROXY"
	EnvNATSURL           = "NATS_URL"
	EnvNATSCredsFile     = "NATS_CREDS_FILE"
	EnvNATSToken         = "NATS_TOKEN"
	EnvNATSReplicas      = "NATS_REPLICAS"
	EnvNATSPartitions    = "NATS_PARTITIONS"
	EnvNATSAckWait       = "NATS_ACK_WAIT"
	EnvNotifyAfter       = "NOTIFY_AFTER"
	EnvAllowedRoleIDs    = "ALLOWED_ROLE_IDS"
	EnvApproverRoleIDs   = "APPROVER_ROLE_IDS"
	EnvSessionScope      = "SESSION_SCOPE"
	EnvTranscribeURL     = "TRANSCRIBE_URL"
	EnvTranscribeAPIKey  = "TRANSCRIBE_API_KEY"
	EnvTranscribeModel   = "TRANSCRIBE_MODEL"
	EnvVoiceMaxSeconds   = "VOICE_MAX_SECONDS"
)

// ActionsEnv is the name of a Discord action category's switch:
// DISCORD_ACTIONS_CHANNELS, DISCORD_ACTIONS_BOT_PROFILE...
func ActionsEnv(c actions.Category) string {
	return EnvActions + "_" + strings.ToUpper(string(c))
}

// actionKeys are the switches of the action categories, in catalog order.
var actionKeys = func() []string {
	var ks []string
	for _, c := range actions.Categories {
		ks = append(ks, ActionsEnv(c))
	}
	return ks
}()

// Names of the model providers' credential variables. The gateway does not
// read them into typed fields (except ANTHROPIC_API_KEY, above); it checks
// that the selected backend has one and hands them to the CLI (BackendEnv).
const (
	EnvAnthropicAuthToken = "ANTHROPIC_AUTH_TOKEN"
	EnvOpenAIAPIKey       = "OPENAI_API_KEY"
	EnvGeminiAPIKey       = "GEMINI_API_KEY"
	EnvGoogleAPIKey       = "GOOGLE_API_KEY"
	// EnvIsSandbox tells claude that running as root is fine because it is
	// in a sandbox; without it, bypassPermissions refuses to run as root.
	EnvIsSandbox = "IS_SANDBOX"
)

// keys lists every typed setting, in the order Redacted shows them and
// problems are reported.
var keys = append([]string{
	EnvDiscordToken,
	EnvAnthropicAPIKey,
	EnvAllowedTools,
	EnvPermissionMode,
	EnvQueryTimeoutMS,
	EnvConfigDir,
	EnvMaxConcurrent,
	EnvMaxQueueDepth,
	EnvMaxChannelQueue,
	EnvMaxReplyMessages,
	EnvOutputChannelID,
	EnvBackend,
	EnvModel,
	EnvMaxTurns,
	EnvUseCLILogin,
	EnvAgentBinary,
	EnvACPCommand,
	EnvAgentUser,
	EnvAllowedUserIDs,
	EnvAllowedChannelIDs,
	EnvAllowedGuildIDs,
	EnvApproverIDs,
	EnvAllowedRoleIDs,
	EnvApproverRoleIDs,
	EnvSessionScope,
	EnvNotifyAfter,
	EnvInboxRetention,
	EnvInboxMaxEvents,
	EnvCatchUpMaxAge,
	EnvWorkDir,
	EnvProjectsRoot,
	EnvThreads,
	EnvThreadArchive,
	EnvWorktrees,
	EnvWorktreeKeepDays,
	EnvTurnCard,
	EnvDailyBudget,
	EnvChannelBudget,
	EnvDiscordAPIBaseURL,
	EnvDiscordGatewayURL,
	EnvWebhookAddr,
	EnvLogLevel,
	EnvLogFormat,
	EnvKeepAlive,
	EnvMaxWarm,
	EnvWarmMemoryMB,
	EnvHangTimeout,
	EnvSteer,
	EnvApprovalTimeout,
	EnvScheduledTools,
	EnvMaxAttachmentMB,
	EnvMaxAttachmentsMB,
	EnvHistoryMessages,
	EnvArchiveDays,
	EnvActions,
	EnvActionsMax,
	EnvActionsFollowups,
	EnvDeferMaxSeconds,
	EnvDeferMaxPending,
	EnvAdminAddr,
	EnvAdminToken,
	EnvAdminHosts,
	EnvAdminTrustProxy,
	EnvNATSURL,
	EnvNATSCredsFile,
	EnvNATSToken,
	EnvNATSReplicas,
	EnvNATSPartitions,
	EnvNATSAckWait,
	EnvTranscribeURL,
	EnvTranscribeAPIKey,
	EnvTranscribeModel,
	EnvVoiceMaxSeconds,
}, actionKeys...)

// providerPrefixes select the variables (from the environment and .env)
// that belong to model providers and their CLIs. DISCORD_* never matches:
// the agent must not see the bot token (DESIGN decision 7).
var providerPrefixes = []string{
	"ANTHROPIC_",
	"CLAUDE_CODE_",
	"OPENAI_",
	"GEMINI_",
	"GOOGLE_",
	"OPENCODE_",
	"PI_",
	// Other providers pi and opencode can use.
	"OPENROUTER_",
	"GROQ_",
	"MISTRAL_",
	"XAI_",
	"DEEPSEEK_",
	"CEREBRAS_",
}

// isProviderVar reports whether name is passed to agent CLIs.
func isProviderVar(name string) bool {
	if name == EnvIsSandbox {
		return true
	}
	for _, p := range providerPrefixes {
		if len(name) > len(p) && name[:len(p)] == p {
			return true
		}
	}
	return false
}

// validEnvName reports whether name has the shape of an environment variable
// name. Viper treats "." as a key path separator, so anything else is left
// alone.
func validEnvName(name string) bool {
	if name == "" || (name[0] >= '0' && name[0] <= '9') {
		return false
	}
	for _, c := range name {
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_':
		default:
			return false
		}
	}
	return true
}

// Backend names, as AGENT_BACKEND spells them.
const (
	BackendClaude   = "claude"
	BackendCodex    = "codex"
	BackendGemini   = "gemini"
	BackendOpencode = "opencode"
	BackendPi       = "pi"
	// BackendACP runs any agent that speaks the Agent Client Protocol,
	// started as ACP_COMMAND says.
	BackendACP = "acp"
)

// backendNames lists the backends AGENT_BACKEND accepts, in the order error
// messages name them.
var backendNames = []string{BackendClaude, BackendCodex, BackendGemini, BackendOpencode, BackendPi, BackendACP}

// backendCredentials says which variables satisfy each backend's need for a
// model credential (DESIGN decision 12): any one of them will do. A backend
// with none needs no credential from the gateway. AGENT_USE_CLI_LOGIN=true
// waives the need for every backend.
var backendCredentials = map[string][]string{
	BackendClaude: {EnvAnthropicAPIKey, EnvAnthropicAuthToken},
	BackendCodex:  {EnvOpenAIAPIKey},
	BackendGemini: {EnvGeminiAPIKey, EnvGoogleAPIKey},
	// opencode keeps its providers and keys in its own config
	// (~/.config/opencode/opencode.json or OPENCODE_CONFIG_CONTENT), so the
	// gateway cannot tell whether it has one; `opencode auth login` is common.
	BackendOpencode: nil,
	// pi talks to several providers; a key for any one of them is enough.
	BackendPi: {EnvAnthropicAPIKey, EnvOpenAIAPIKey, EnvGeminiAPIKey},
	// An arbitrary ACP agent keeps its credentials where it likes.
	BackendACP: nil,
}

// backendEnv says which provider variables each backend's CLI is given
// (BackendEnv): a name ending in "_" is a prefix, any other an exact name.
var backendEnv = map[string][]string{
	BackendClaude:   {"ANTHROPIC_", "CLAUDE_CODE_", EnvIsSandbox},
	BackendCodex:    {"OPENAI_"},
	BackendGemini:   {"GEMINI_", "GOOGLE_"},
	BackendOpencode: {"ANTHROPIC_", "OPENAI_", "GEMINI_", "GOOGLE_", "OPENCODE_", "OPENROUTER_", "GROQ_", "MISTRAL_", "XAI_", "DEEPSEEK_", "CEREBRAS_"},
	BackendPi:       {"ANTHROPIC_", "OPENAI_", "GEMINI_", "GOOGLE_", "PI_", "OPENROUTER_", "GROQ_", "MISTRAL_", "XAI_", "DEEPSEEK_", "CEREBRAS_"},
	// An arbitrary ACP agent may use any provider: it gets them all.
	BackendACP: append([]string{EnvIsSandbox}, providerPrefixes...),
}

// Credentials returns the variables of which the named backend needs one
// (nil when the gateway cannot tell, as for opencode).
func Credentials(backend string) []string {
	return append([]string(nil), backendCredentials[backend]...)
}

// HasCredential reports whether one of the backend's credential variables
// is set (or AGENT_USE_CLI_LOGIN waives them, or it needs none), and which
// one.
func (c *Config) HasCredential(backend string) (bool, string) {
	names := backendCredentials[backend]
	if len(names) == 0 || c.UseCLILogin {
		return true, ""
	}
	for _, n := range names {
		if c.ProviderEnv[n] != "" {
			return true, n
		}
	}
	return false, ""
}
