package config

import (
	"errors"
	"math"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/viper"

	"github.com/agentgateway/gateway/internal/actions"
)

// parser turns viper's merged strings into typed fields, collecting every
// problem instead of stopping at the first.
type parser struct {
	v        *viper.Viper
	problems []error
	bad      map[string]bool // names whose value was rejected
}

// get returns the trimmed value of name, or its default when it is unset
// or empty.
func (p *parser) get(name string) string {
	if s := strings.TrimSpace(p.v.GetString(name)); s != "" {
		return s
	}
	return defaults[name]
}

// field parses name's value with parse. On failure it records the problem
// and returns the default, parsed the same way.
func field[T any](p *parser, name string, parse func(name, s string) (T, error)) T {
	val, err := parse(name, p.get(name))
	if err != nil {
		p.problems = append(p.problems, err)
		p.bad[name] = true
		val, _ = parse(name, defaults[name])
	}
	return val
}

func (p *parser) parse() *Config {
	c := &Config{
		DiscordToken:         field(p, EnvDiscordToken, parseString),
		AnthropicAPIKey:      field(p, EnvAnthropicAPIKey, parseString),
		AllowedTools:         field(p, EnvAllowedTools, parseTools),
		PermissionMode:       field(p, EnvPermissionMode, parseChoice(permissionModes)),
		QueryTimeout:         field(p, EnvQueryTimeoutMS, parseMillis),
		ConfigDir:            field(p, EnvConfigDir, parseDir),
		MaxConcurrent:        field(p, EnvMaxConcurrent, parseCountOrZero),
		MaxQueueDepth:        field(p, EnvMaxQueueDepth, parseCount),
		MaxChannelQueue:      field(p, EnvMaxChannelQueue, parseCount),
		MaxReplyMessages:     field(p, EnvMaxReplyMessages, parseCount),
		OutputChannelID:      field(p, EnvOutputChannelID, parseID),
		Backend:              field(p, EnvBackend, parseChoice(backendNames)),
		Model:                field(p, EnvModel, parseString),
		MaxTurns:             field(p, EnvMaxTurns, parseCount),
		UseCLILogin:          field(p, EnvUseCLILogin, parseBool),
		AgentBinary:          field(p, EnvAgentBinary, parseString),
		ACPCommand:           field(p, EnvACPCommand, parseString),
		AgentUser:            field(p, EnvAgentUser, parseAgentUser),
		AllowedUserIDs:       field(p, EnvAllowedUserIDs, parseIDs),
		AllowedChannelIDs:    field(p, EnvAllowedChannelIDs, parseIDs),
		AllowedGuildIDs:      field(p, EnvAllowedGuildIDs, parseIDs),
		ApproverIDs:          field(p, EnvApproverIDs, parseIDs),
		AllowedRoleIDs:       field(p, EnvAllowedRoleIDs, parseIDs),
		ApproverRoleIDs:      field(p, EnvApproverRoleIDs, parseIDs),
		SessionScope:         field(p, EnvSessionScope, parseChoice(sessionScopes)),
		NotifyAfter:          field(p, EnvNotifyAfter, parseOptionalDuration),
		TranscribeURL:        field(p, EnvTranscribeURL, parseHTTPURL),
		TranscribeAPIKey:     field(p, EnvTranscribeAPIKey, parseString),
		TranscribeModel:      field(p, EnvTranscribeModel, parseString),
		VoiceMaxDuration:     time.Duration(field(p, EnvVoiceMaxSeconds, parseCount)) * time.Second,
		InboxRetention:       field(p, EnvInboxRetention, parseDuration),
		InboxMaxEvents:       field(p, EnvInboxMaxEvents, parseCount),
		CatchUpMaxAge:        field(p, EnvCatchUpMaxAge, parseDuration),
		WorkDir:              field(p, EnvWorkDir, parseOptionalDir),
		ProjectsRoot:         field(p, EnvProjectsRoot, parseOptionalDir),
		Threads:              field(p, EnvThreads, parseChoice(threadModes)),
		ThreadArchive:        field(p, EnvThreadArchive, parseThreadArchive),
		Worktrees:            field(p, EnvWorktrees, parseBool),
		WorktreeKeepDays:     field(p, EnvWorktreeKeepDays, parseCount),
		TurnCard:             field(p, EnvTurnCard, parseChoice(turnCards)),
		DailyBudgetUSD:       field(p, EnvDailyBudget, parseDollars),
		ChannelBudgetUSD:     field(p, EnvChannelBudget, parseDollars),
		DiscordAPIBaseURL:    field(p, EnvDiscordAPIBaseURL, parseAPIURL),
		DiscordGatewayURL:    field(p, EnvDiscordGatewayURL, parseGatewayURL),
		WebhookAddr:          field(p, EnvWebhookAddr, parseAddr),
		LogLevel:             field(p, EnvLogLevel, parseChoice(logLevels)),
		LogFormat:            field(p, EnvLogFormat, parseChoice(logFormats)),
		KeepAlive:            field(p, EnvKeepAlive, parseOptionalDuration),
		WarmMemoryMB:         field(p, EnvWarmMemoryMB, parseCountOrZero),
		HangTimeout:          field(p, EnvHangTimeout, parseDuration),
		Steer:                field(p, EnvSteer, parseChoice(steerModes)),
		ApprovalTimeout:      field(p, EnvApprovalTimeout, parseDuration),
		ScheduledToolsPolicy: field(p, EnvScheduledTools, parseChoice(toolPolicies)),
		MaxAttachmentMB:      field(p, EnvMaxAttachmentMB, parseCountOrZero),
		MaxAttachmentsMB:     field(p, EnvMaxAttachmentsMB, parseCountOrZero),
		HistoryMessages:      field(p, EnvHistoryMessages, parseCountOrZero),
		ArchiveDays:          field(p, EnvArchiveDays, parseCountOrZero),
		Actions:              actions.Flags{Enabled: field(p, EnvActions, parseBool), Categories: map[actions.Category]bool{}},
		ActionsMaxPerTurn:    field(p, EnvActionsMax, parseCount),
		ActionsMaxFollowups:  field(p, EnvActionsFollowups, parseCountOrZero),
		DeferMax:             time.Duration(field(p, EnvDeferMaxSeconds, parseCount)) * time.Second,
		DeferMaxPending:      field(p, EnvDeferMaxPending, parseCount),
		AdminAddr:            field(p, EnvAdminAddr, parseListenAddr),
		AdminToken:           field(p, EnvAdminToken, parseAdminToken),
		AdminHosts:           field(p, EnvAdminHosts, parseHosts),
		AdminTrustProxy:      field(p, EnvAdminTrustProxy, parseBool),
		NATSURLs:             field(p, EnvNATSURL, parseNATSURLs),
		NATSCredsFile:        field(p, EnvNATSCredsFile, parseCredsFile),
		NATSToken:            field(p, EnvNATSToken, parseString),
		NATSReplicas:         field(p, EnvNATSReplicas, parseReplicas),
		NATSPartitions:       field(p, EnvNATSPartitions, parsePartitions),
		NATSAckWait:          field(p, EnvNATSAckWait, parseDuration),
	}
	for _, cat := range actions.Categories {
		c.Actions.Categories[cat] = field(p, ActionsEnv(cat), parseBool)
	}
	if p.get(EnvMaxWarm) != "" {
		c.MaxWarm = field(p, EnvMaxWarm, parseCount)
	}
	c.ProviderEnv = make(map[string]string)
	for _, k := range p.v.AllKeys() {
		// Viper lower-cases keys; environment names are upper case.
		name := strings.ToUpper(k)
		if !validEnvName(name) || !isProviderVar(name) || isSecretFileVar(name) {
			continue
		}
		if val := strings.TrimSpace(p.v.GetString(k)); val != "" {
			c.ProviderEnv[name] = val
		}
	}
	if c.AdminAddr != "" && c.AdminToken == "" && !loopback(c.AdminAddr) {
		p.problems = append(p.problems, varErrorf(EnvAdminAddr,
			"%s: %s is not a loopback address, so %s must be set (e.g. openssl rand -hex 32)",
			EnvAdminAddr, quote(c.AdminAddr), EnvAdminToken))
		p.bad[EnvAdminAddr] = true
		c.AdminAddr = ""
	}
	p.checkNATS(c)
	if c.Backend == BackendACP && strings.TrimSpace(c.ACPCommand) == "" && !p.bad[EnvACPCommand] {
		p.problems = append(p.problems, varErrorf(EnvACPCommand,
			"missing %s: %s=%s runs the agent this command line starts, e.g. %s=\"gemini --acp\" or %s=\"opencode acp\"",
			EnvACPCommand, EnvBackend, BackendACP, EnvACPCommand, EnvACPCommand))
		p.bad[EnvACPCommand] = true
	}
	if problem := adminNeedsToken(c, p.bad); problem != nil {
		p.problems = append(p.problems, problem)
		p.bad[EnvAdminToken] = true
		c.AdminAddr = ""
	}
	return c
}

// required reports the missing credentials that req asks for. Settings in
// bad were rejected, so what depends on them is not judged.
func required(c *Config, req Require, bad map[string]bool) []error {
	var errs []error
	if req&RequireDiscord != 0 && c.DiscordToken == "" && !bad[EnvDiscordToken] {
		errs = append(errs, varErrorf(EnvDiscordToken,
			"missing %s: the Discord bot token (Developer Portal -> Bot -> Reset Token)", EnvDiscordToken))
	}
	if req&RequireBackendCredentials == 0 || c.UseCLILogin || bad[EnvBackend] || bad[EnvUseCLILogin] {
		return errs
	}
	names := backendCredentials[c.Backend]
	for _, n := range names {
		// A credential whose file could not be read is reported as such.
		if c.ProviderEnv[n] != "" || bad[n] {
			return errs
		}
	}
	const login = "set " + EnvUseCLILogin + "=true if the CLI is logged in"
	switch len(names) {
	case 0:
	case 1:
		errs = append(errs, varErrorf(names[0],
			"missing %s: the %s backend needs it (or %s)", names[0], c.Backend, login))
	case 2:
		errs = append(errs, varErrorf(names[0],
			"missing %s: the %s backend needs it (or %s, or %s)", names[0], c.Backend, names[1], login))
	default:
		errs = append(errs, varErrorf(names[0],
			"missing %s: the %s backend needs one of them (or %s)", strings.Join(names, " or "), c.Backend, login))
	}
	return errs
}

func parseString(_, s string) (string, error) { return s, nil }

// parseHTTPURL accepts an empty value or an absolute http or https URL
// with a host, such as https://api.openai.com/v1/audio/transcriptions.
func parseHTTPURL(name, s string) (string, error) {
	if s == "" {
		return "", nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", varErrorf(name, "%s: %s is not an http:// or https:// URL", name, quote(redactURL(s)))
	}
	return s, nil
}

// parseCount parses a whole number of at least 1.
func parseCount(name, s string) (int, error) {
	n, err := strconv.Atoi(s)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return 0, varErrorf(name, "%s: %s is too large", name, quote(s))
	case err != nil:
		return 0, varErrorf(name, "%s: %s is not a whole number", name, quote(s))
	case n < 1:
		return 0, varErrorf(name, "%s must be at least 1, got %d", name, n)
	}
	return n, nil
}

// parseMillis parses a positive number of milliseconds.
func parseMillis(name, s string) (time.Duration, error) {
	const most = math.MaxInt64 / int64(time.Millisecond)
	n, err := strconv.ParseInt(s, 10, 64)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange):
		if d, derr := time.ParseDuration(s); derr == nil && d > 0 {
			return 0, varErrorf(name, "%s: %s is not a number of milliseconds (did you mean %d?)", name, quote(s), d.Milliseconds())
		}
		return 0, varErrorf(name, "%s: %s is not a number of milliseconds", name, quote(s))
	case err != nil || n > most:
		return 0, varErrorf(name, "%s: %s is too large (at most %d)", name, quote(s), most)
	case n < 1:
		return 0, varErrorf(name, "%s must be at least 1, got %d", name, n)
	}
	return time.Duration(n) * time.Millisecond, nil
}

// parseDuration parses a positive Go duration such as 90m or 168h.
func parseDuration(name, s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return 0, varErrorf(name, "%s: %s is not a duration (write it like 30m, 6h or 168h)", name, quote(s))
	case d <= 0:
		return 0, varErrorf(name, "%s must be longer than zero, got %s", name, quote(s))
	}
	return d, nil
}

// parseOptionalDuration parses a Go duration of zero or more; "0" (no
// unit) is zero.
func parseOptionalDuration(name, s string) (time.Duration, error) {
	if s == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return 0, varErrorf(name, "%s: %s is not a duration (write it like 10m, 1h, or 0 for none)", name, quote(s))
	case d < 0:
		return 0, varErrorf(name, "%s must not be negative, got %s", name, quote(s))
	}
	return d, nil
}

// parseCountOrZero parses a whole number of zero or more.
func parseCountOrZero(name, s string) (int, error) {
	if s == "0" {
		return 0, nil
	}
	return parseCount(name, s)
}

// parseChoice accepts one of choices, in any case, and returns its
// canonical spelling.
func parseChoice(choices []string) func(name, s string) (string, error) {
	return func(name, s string) (string, error) {
		for _, c := range choices {
			if strings.EqualFold(s, c) {
				return c, nil
			}
		}
		return "", varErrorf(name, "%s: %s is not one of %s", name, quote(s), strings.Join(choices, ", "))
	}
}

// threadArchives are the auto-archive durations Discord accepts.
var threadArchives = []time.Duration{time.Hour, 24 * time.Hour, 3 * 24 * time.Hour, 7 * 24 * time.Hour}

// parseThreadArchive accepts a Go duration that is one of Discord's
// auto-archive durations (1h, 24h, 72h, 168h); "1w" and "3d" style
// spellings are taken too.
func parseThreadArchive(name, s string) (time.Duration, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	named := map[string]time.Duration{"1d": 24 * time.Hour, "3d": 72 * time.Hour, "7d": 168 * time.Hour, "1w": 168 * time.Hour}
	d, ok := named[t]
	if !ok {
		var err error
		if d, err = time.ParseDuration(t); err != nil {
			return 0, varErrorf(name, "%s: %s is not a duration; use one of 1h, 24h, 72h, 168h", name, quote(s))
		}
	}
	if !slices.Contains(threadArchives, d) {
		return 0, varErrorf(name, "%s: Discord archives threads after 1h, 24h, 72h or 168h only, not %s", name, quote(s))
	}
	return d, nil
}

func parseBool(name, s string) (bool, error) {
	switch strings.ToLower(s) {
	case "1", "true", "yes", "on":
		return true, nil
	case "0", "false", "no", "off":
		return false, nil
	}
	return false, varErrorf(name, "%s: %s is not true or false", name, quote(s))
}

func parseDir(name, s string) (string, error) {
	abs, err := filepath.Abs(s)
	if err != nil {
		return "", varErrorf(name, "%s: cannot make %s absolute: %v", name, quote(s), err)
	}
	return abs, nil
}

// parseOptionalDir is parseDir for a directory that may be left unset.
func parseOptionalDir(name, s string) (string, error) {
	if s == "" {
		return "", nil
	}
	return parseDir(name, s)
}

// parseDollars parses an amount in US dollars; unset or 0 means none.
func parseDollars(name, s string) (float64, error) {
	if s == "" {
		return 0, nil
	}
	v, err := strconv.ParseFloat(strings.TrimPrefix(s, "$"), 64)
	switch {
	case err != nil || math.IsNaN(v) || math.IsInf(v, 0):
		return 0, varErrorf(name, "%s: %s is not an amount in dollars (e.g. 5 or 2.50)", name, quote(s))
	case v < 0:
		return 0, varErrorf(name, "%s must not be negative, got %s", name, quote(s))
	}
	return v, nil
}

// splitList splits a comma-separated list, trims each item and drops empty
// ones. It returns nil when nothing is left.
func splitList(s string) []string {
	var items []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			items = append(items, item)
		}
	}
	return items
}

func parseTools(name, s string) ([]string, error) {
	tools := splitList(s)
	if tools == nil {
		return nil, varErrorf(name, "%s: %s names no tools (unset it for the default, %s)", name, quote(s), defaults[EnvAllowedTools])
	}
	return tools, nil
}

// isSnowflake reports whether s looks like a Discord ID: a decimal number
// that fits in 64 bits and is not 0.
func isSnowflake(s string) bool {
	if s == "" || len(s) > 20 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return err == nil && n > 0
}

const snowflakeHint = "a Discord ID is a number like 123456789012345678: turn on Developer Mode, right-click, Copy ID"

func parseID(name, s string) (string, error) {
	if s != "" && !isSnowflake(s) {
		return "", varErrorf(name, "%s: %s is not a Discord ID (%s)", name, quote(s), snowflakeHint)
	}
	return s, nil
}

func parseIDs(name, s string) ([]string, error) {
	ids := splitList(s)
	var bad []string
	for _, id := range ids {
		if !isSnowflake(id) {
			bad = append(bad, quote(id))
		}
	}
	switch len(bad) {
	case 0:
		return ids, nil
	case 1:
		return nil, varErrorf(name, "%s: %s is not a Discord ID (%s)", name, bad[0], snowflakeHint)
	default:
		return nil, varErrorf(name, "%s: %s are not Discord IDs (%s)", name, strings.Join(bad, ", "), snowflakeHint)
	}
}

// discordAPIPath is the path Discord's REST routes hang from: the REST
// client adds "/channels/…" to DISCORD_API_BASE_URL, so a base without it
// makes every call a 404.
const discordAPIPath = "/api/v9"

// The shapes of the Discord endpoints, as their errors and the settings
// table show them.
const (
	apiURLShape     = "http(s)://host[:port]/…" + discordAPIPath + ", e.g. https://discord.com" + discordAPIPath
	gatewayURLShape = "ws(s)://host[:port][/path], e.g. wss://gateway.discord.gg"
)

// parseAPIURL accepts DISCORD_API_BASE_URL: http(s) with a host and a
// path ending in /api/v9.
var parseAPIURL = shapedURL(discordAPIPath, apiURLShape, "http", "https")

// parseGatewayURL accepts DISCORD_GATEWAY_URL: ws(s) with a host.
var parseGatewayURL = shapedURL("", gatewayURLShape, "ws", "wss")

// shapedURL accepts a URL with a host and one of schemes, or nothing; with
// pathSuffix, its path (less a final slash) must end in it. A rejected
// value's error ends with shape when there is one. Credentials in the URL
// are never shown.
func shapedURL(pathSuffix, shape string, schemes ...string) func(name, s string) (string, error) {
	return func(name, s string) (string, error) {
		if s == "" {
			return "", nil
		}
		hint := ""
		if shape != "" {
			hint = " (the shape is " + shape + ")"
		}
		u, err := url.Parse(s)
		schemeOK := false
		if err == nil && u.Host != "" {
			for _, sc := range schemes {
				schemeOK = schemeOK || strings.EqualFold(u.Scheme, sc)
			}
		}
		shown := quote(s)
		if err == nil {
			shown = quote(redactURL(s))
		}
		if !schemeOK {
			want := make([]string, len(schemes))
			for i, sc := range schemes {
				want[i] = sc + "://"
			}
			return "", varErrorf(name, "%s: %s is not a %s URL%s", name, shown, strings.Join(want, " or "), hint)
		}
		if pathSuffix != "" && !strings.HasSuffix(strings.TrimSuffix(u.Path, "/"), pathSuffix) {
			return "", varErrorf(name, "%s: %s does not end in %s%s", name, shown, pathSuffix, hint)
		}
		return s, nil
	}
}

// parseAddr accepts host:port with a numeric port, or nothing.
// loopback reports whether a host:port listens on a loopback address only
// (an empty host listens on every address).
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// parseListenAddr is parseAddr that also takes a bare port, meaning
// 127.0.0.1: a listener is local unless an address says otherwise.
func parseListenAddr(name, s string) (string, error) {
	if _, err := strconv.ParseUint(s, 10, 16); err == nil && s != "" {
		s = "127.0.0.1:" + s
	}
	return parseAddr(name, s)
}

func parseAddr(name, s string) (string, error) {
	if s == "" {
		return "", nil
	}
	_, port, err := net.SplitHostPort(s)
	if err == nil {
		if _, perr := strconv.ParseUint(port, 10, 16); perr == nil {
			return s, nil
		}
	}
	return "", varErrorf(name, "%s: %s is not host:port (e.g. :8080 or 127.0.0.1:8080)", name, quote(s))
}
