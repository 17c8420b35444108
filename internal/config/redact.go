package config

import (
	"encoding/json"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentgateway/gateway/internal/actions"
)

// masked stands in for a secret that is set.
const masked = "<redacted>"

// setting is one line of the redacted view.
type setting struct{ name, value string }

// settings lists every setting as NAME and a printable value, secrets
// masked: the typed settings in the order of keys, then the provider
// variables by name, then the NAME_FILE of each secret read from a file.
func (c Config) settings() []setting {
	s := []setting{
		{EnvDiscordToken, mask(c.DiscordToken)},
		{EnvAnthropicAPIKey, mask(c.AnthropicAPIKey)},
		{EnvAllowedTools, strings.Join(c.AllowedTools, ",")},
		{EnvPermissionMode, c.PermissionMode},
		{EnvQueryTimeoutMS, strconv.FormatInt(c.QueryTimeout.Milliseconds(), 10)},
		{EnvConfigDir, c.ConfigDir},
		{EnvMaxConcurrent, strconv.Itoa(c.MaxConcurrent)},
		{EnvMaxQueueDepth, strconv.Itoa(c.MaxQueueDepth)},
		{EnvMaxChannelQueue, strconv.Itoa(c.MaxChannelQueue)},
		{EnvMaxReplyMessages, strconv.Itoa(c.MaxReplyMessages)},
		{EnvOutputChannelID, c.OutputChannelID},
		{EnvBackend, c.Backend},
		{EnvModel, c.Model},
		{EnvMaxTurns, strconv.Itoa(c.MaxTurns)},
		{EnvUseCLILogin, strconv.FormatBool(c.UseCLILogin)},
		{EnvAgentBinary, c.AgentBinary},
		{EnvACPCommand, c.ACPCommand},
		{EnvAgentUser, c.AgentUser},
		{EnvAllowedUserIDs, strings.Join(c.AllowedUserIDs, ",")},
		{EnvAllowedChannelIDs, strings.Join(c.AllowedChannelIDs, ",")},
		{EnvAllowedGuildIDs, strings.Join(c.AllowedGuildIDs, ",")},
		{EnvApproverIDs, strings.Join(c.ApproverIDs, ",")},
		{EnvAllowedRoleIDs, strings.Join(c.AllowedRoleIDs, ",")},
		{EnvApproverRoleIDs, strings.Join(c.ApproverRoleIDs, ",")},
		{EnvSessionScope, c.SessionScope},
		{EnvNotifyAfter, c.NotifyAfter.String()},
		{EnvInboxRetention, c.InboxRetention.String()},
		{EnvInboxMaxEvents, strconv.Itoa(c.InboxMaxEvents)},
		{EnvCatchUpMaxAge, c.CatchUpMaxAge.String()},
		{EnvWorkDir, c.WorkDir},
		{EnvProjectsRoot, c.ProjectsRoot},
		{EnvThreads, c.Threads},
		{EnvThreadArchive, c.ThreadArchive.String()},
		{EnvWorktrees, map[bool]string{true: "on", false: "off"}[c.Worktrees]},
		{EnvWorktreeKeepDays, strconv.Itoa(c.WorktreeKeepDays)},
		{EnvTurnCard, c.TurnCard},
		{EnvDailyBudget, dollars(c.DailyBudgetUSD)},
		{EnvChannelBudget, dollars(c.ChannelBudgetUSD)},
		{EnvDiscordAPIBaseURL, redactURL(c.DiscordAPIBaseURL)},
		{EnvDiscordGatewayURL, redactURL(c.DiscordGatewayURL)},
		{EnvWebhookAddr, c.WebhookAddr},
		{EnvLogLevel, c.LogLevel},
		{EnvLogFormat, c.LogFormat},
		{EnvKeepAlive, c.KeepAlive.String()},
		{EnvMaxWarm, strconv.Itoa(c.WarmCap())},
		{EnvWarmMemoryMB, strconv.Itoa(c.WarmMemoryMB)},
		{EnvHangTimeout, c.HangTimeout.String()},
		{EnvSteer, c.Steer},
		{EnvApprovalTimeout, c.ApprovalTimeout.String()},
		{EnvScheduledTools, c.ScheduledToolsPolicy},
		{EnvMaxAttachmentMB, strconv.Itoa(c.MaxAttachmentMB)},
		{EnvMaxAttachmentsMB, strconv.Itoa(c.MaxAttachmentsMB)},
		{EnvHistoryMessages, strconv.Itoa(c.HistoryMessages)},
		{EnvArchiveDays, strconv.Itoa(c.ArchiveDays)},
		{EnvActions, strconv.FormatBool(c.Actions.Enabled)},
		{EnvActionsMax, strconv.Itoa(c.ActionsMaxPerTurn)},
		{EnvActionsFollowups, strconv.Itoa(c.ActionsMaxFollowups)},
		{EnvDeferMaxSeconds, strconv.Itoa(int(c.DeferMax / time.Second))},
		{EnvDeferMaxPending, strconv.Itoa(c.DeferMaxPending)},
		{EnvAdminAddr, c.AdminAddr},
		{EnvAdminToken, mask(c.AdminToken)},
		{EnvAdminHosts, strings.Join(c.AdminHosts, ",")},
		{EnvAdminTrustProxy, strconv.FormatBool(c.AdminTrustProxy)},
		{EnvNATSURL, redactURLs(c.NATSURLs)},
		{EnvNATSCredsFile, c.NATSCredsFile},
		{EnvNATSToken, mask(c.NATSToken)},
		{EnvNATSReplicas, strconv.Itoa(c.NATSReplicas)},
		{EnvNATSPartitions, strconv.Itoa(c.NATSPartitions)},
		{EnvNATSAckWait, c.NATSAckWait.String()},
		{EnvTranscribeURL, redactURL(c.TranscribeURL)},
		{EnvTranscribeAPIKey, mask(c.TranscribeAPIKey)},
		{EnvTranscribeModel, c.TranscribeModel},
		{EnvVoiceMaxSeconds, strconv.Itoa(int(c.VoiceMaxDuration / time.Second))},
	}
	for _, cat := range actions.Categories {
		s = append(s, setting{ActionsEnv(cat), strconv.FormatBool(c.Actions.Categories[cat])})
	}
	var names []string
	for name := range c.ProviderEnv {
		if name != EnvAnthropicAPIKey {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		val := c.ProviderEnv[name]
		switch {
		case name == EnvIsSandbox:
		case strings.HasSuffix(name, "_URL"):
			val = redactURL(val)
		default:
			// Keys, tokens, and config blobs that may hold either.
			val = mask(val)
		}
		s = append(s, setting{name, val})
	}
	// Where secrets given as files came from (paths are not secret).
	files := slices.Sorted(maps.Keys(c.secretFiles))
	for _, name := range files {
		s = append(s, setting{name + FileSuffix, c.secretFiles[name]})
	}
	return s
}

// Redacted returns the configuration as NAME=value lines, one per setting,
// with every secret masked; `gateway doctor` prints it.
func (c Config) Redacted() string {
	var b strings.Builder
	for _, s := range c.settings() {
		b.WriteString(s.name)
		b.WriteByte('=')
		b.WriteString(s.value)
		b.WriteByte('\n')
	}
	return b.String()
}

// String returns Redacted, so that printing a Config shows no secret.
func (c Config) String() string { return c.Redacted() }

// GoString returns Redacted, so that %#v shows no secret either.
func (c Config) GoString() string { return c.Redacted() }

// MarshalJSON encodes the redacted settings as an object from NAME to
// value, so that a Config logged as JSON shows no secret.
func (c Config) MarshalJSON() ([]byte, error) {
	m := make(map[string]string)
	for _, s := range c.settings() {
		m[s.name] = s.value
	}
	return json.Marshal(m)
}

func mask(s string) string {
	if s == "" {
		return ""
	}
	return masked
}

// redactURL hides a password in a URL; what cannot be parsed is masked.
func redactURL(s string) string {
	if s == "" {
		return ""
	}
	u, err := url.Parse(s)
	if err != nil {
		return masked
	}
	if u.User == nil {
		return s
	}
	// url.Redacted keeps the user name, which may be a token too.
	u.User = nil
	rest, ok := strings.CutPrefix(u.String(), u.Scheme+"://")
	if !ok {
		return masked
	}
	return u.Scheme + "://" + masked + "@" + rest
}

// redactURLs shows a list of URLs comma-separated, each redacted.
func redactURLs(urls []string) string {
	shown := make([]string, len(urls))
	for i, u := range urls {
		shown[i] = redactURL(u)
	}
	return strings.Join(shown, ",")
}

// dollars prints a budget; "" when there is none.
func dollars(v float64) string {
	if v == 0 {
		return ""
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}
