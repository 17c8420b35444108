package config

import (
	"strconv"

	"github.com/agentgateway/gateway/internal/actions"
)

// defaults holds the value of every setting that is not given, as the text
// an operator would write. Every key in keys has an entry; "" means unset.
var defaults = map[string]string{
	EnvDiscordToken:    "",
	EnvAnthropicAPIKey: "",
	// ALLOWED_TOOLS follows R8.2, not the seed design's list with Write and
	// Edit. The agent must still be able to write memory.md: with
	// PERMISSION_MODE=bypassPermissions (the default) or acceptEdits, claude
	// writes files whatever this list says, since the list only pre-approves
	// tools. With PERMISSION_MODE=default the agent can write only if Write
	// (and Edit) are listed here, and plan never writes; Warnings says so.
	EnvAllowedTools:      "Read,Glob,Grep,WebSearch,WebFetch",
	EnvPermissionMode:    "bypassPermissions",
	EnvQueryTimeoutMS:    "120000",
	EnvConfigDir:         "./config",
	EnvMaxConcurrent:     "5",
	EnvMaxQueueDepth:     "100",
	EnvMaxChannelQueue:   "10",
	EnvMaxReplyMessages:  "10",
	EnvOutputChannelID:   "",
	EnvBackend:           BackendClaude,
	EnvModel:             "",
	EnvMaxTurns:          "25",
	EnvUseCLILogin:       "false",
	EnvAgentBinary:       "",
	EnvACPCommand:        "",
	EnvAgentUser:         "",
	EnvAllowedUserIDs:    "",
	EnvAllowedChannelIDs: "",
	EnvAllowedGuildIDs:   "",
	EnvApproverIDs:       "",
	EnvAllowedRoleIDs:    "",
	EnvApproverRoleIDs:   "",
	EnvSessionScope:      SessionScopeChannel,
	EnvNotifyAfter:       "2m",
	EnvTranscribeURL:     "",
	EnvTranscribeAPIKey:  "",
	EnvTranscribeModel:   "whisper-1",
	EnvVoiceMaxSeconds:   "300",
	EnvInboxRetention:    "168h",
	EnvInboxMaxEvents:    "10000",
	EnvCatchUpMaxAge:     "6h",
	EnvWorkDir:           "",
	EnvProjectsRoot:      "",
	EnvThreads:           ThreadsAuto,
	EnvThreadArchive:     "168h",
	EnvWorktrees:         "off",
	EnvWorktreeKeepDays:  "7",
	EnvTurnCard:          TurnCardReceipt,
	EnvDailyBudget:       "",
	EnvChannelBudget:     "",
	EnvDiscordAPIBaseURL: "",
	EnvDiscordGatewayURL: "",
	EnvWebhookAddr:       "",
	EnvLogLevel:          "info",
	EnvLogFormat:         "console",
	EnvKeepAlive:         "10m",
	// Empty: as many as MAX_CONCURRENT_QUERIES.
	EnvMaxWarm:         "",
	EnvWarmMemoryMB:    "0",
	EnvHangTimeout:     "90s",
	EnvSteer:           SteerQueue,
	EnvApprovalTimeout: "10m",
	EnvScheduledTools:  ScheduledToolsDeny,
	EnvMaxAttachmentMB: "25",
	// Two files at the per-file limit.
	EnvMaxAttachmentsMB: "50",
	EnvHistoryMessages:  "20",
	EnvArchiveDays:      "90",
	EnvActions:          "true",
	EnvActionsMax:       "10",
	EnvActionsFollowups: "3",
	EnvDeferMaxSeconds:  "1800",
	EnvDeferMaxPending:  "5",
	EnvAdminAddr:        "",
	EnvAdminToken:       "",
	EnvAdminHosts:       "",
	EnvAdminTrustProxy:  "false",
	EnvNATSURL:          "",
	EnvNATSCredsFile:    "",
	EnvNATSToken:        "",
	EnvNATSReplicas:     "1",
	// jsinbox's default: few lanes of a busy server share a partition.
	EnvNATSPartitions: "256",
	EnvNATSAckWait:    "60s",
}

func init() {
	for _, c := range actions.Categories {
		defaults[ActionsEnv(c)] = strconv.FormatBool(actions.DefaultOn(c))
	}
}

// Accepted values of the settings that take one of a few words. The first
// spelling is canonical; input is matched without regard to case.
var (
	permissionModes = []string{"default", "acceptEdits", "plan", "bypassPermissions"}
	logLevels       = []string{"trace", "debug", "info", "warn", "error"}
	logFormats      = []string{"console", "json"}
	turnCards       = []string{TurnCardReceipt, TurnCardDelete, TurnCardOff}
	steerModes      = []string{SteerQueue, SteerInject}
	toolPolicies    = []string{ScheduledToolsDeny, ScheduledToolsAllow}
	threadModes     = []string{ThreadsAuto, ThreadsOff}
	sessionScopes   = []string{SessionScopeChannel, SessionScopeUser}
)

// Whose conversation a prompt continues (SESSION_SCOPE).
const (
	// SessionScopeChannel gives a channel (or thread) one session that
	// everyone in it shares.
	SessionScopeChannel = "channel"
	// SessionScopeUser gives each person their own session in a shared
	// channel; turns still run one at a time in the channel's order.
	SessionScopeUser = "user"
)

// Where a prompt in a text channel is answered (THREADS).
const (
	// ThreadsAuto opens a thread on the prompt's message and answers
	// there: one task, one thread, one session.
	ThreadsAuto = "auto"
	// ThreadsOff answers in the channel itself.
	ThreadsOff = "off"
)

// What a prompt sent to a channel whose turn is running does (STEER).
const (
	// SteerQueue waits for the running turn; its waiting mark offers a
	// "Send now" button that interrupts the turn and runs it next.
	SteerQueue = "queue"
	// SteerInject writes it into the running turn of a warm claude
	// process, which reads it at its next step.
	SteerInject = "steer"
)

// What a scheduled event's tool that needs approval gets
// (SCHEDULED_TOOLS_POLICY): nobody is there to ask.
const (
	ScheduledToolsDeny  = "deny"
	ScheduledToolsAllow = "allow"
)

// What becomes of the turn card when a turn ends (TURN_CARD).
const (
	// TurnCardReceipt leaves a one-line receipt: tools, duration, cost.
	TurnCardReceipt = "receipt"
	// TurnCardDelete deletes the card once the answer is posted.
	TurnCardDelete = "delete"
	// TurnCardOff shows no card at all: typing only, as before.
	TurnCardOff = "off"
)

// Default returns the default of the setting name as an operator would
// write it ("" when it has none).
func Default(name string) string { return defaults[name] }
