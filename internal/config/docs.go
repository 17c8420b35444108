package config

import (
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/agentgateway/gateway/internal/actions"
)

// doc documents one row of the settings reference: one setting, or a few
// that share a meaning. The README's Configuration table, .env.example and
// the .env `gateway init` writes are all made from docs, so that they list
// the same settings in the same words.
type doc struct {
	// Names are the variables the row is about, as the table's first
	// column shows them. A name with <...> in it stands for many
	// (WEBHOOK_<NAME>_FILE) and gets no line in a .env file.
	Names []string
	// Also are variables the meaning covers without the first column
	// naming them (the action categories' switches, the other backends'
	// keys). Each gets its own line in a .env file.
	Also []string
	// Default is the default as an operator reads it, in Markdown: a value
	// (`120000`) or what happens without one (CLI default, none).
	Default string
	// Meaning says what the setting does, in Markdown.
	Meaning string
}

// docs is the settings reference, in the order the README's table and a
// .env file list it: the credentials first, then the agent, its limits,
// Discord and the operator's settings.
var docs = []doc{
	{
		Names:   []string{EnvDiscordToken},
		Default: "(required for `run`)",
		Meaning: "the bot's token. Never passed to the agent CLI",
	},
	{
		Names:   []string{EnvDiscordToken + FileSuffix},
		Default: "unset",
		Meaning: "a file holding the bot's token instead (see Secrets as files below)",
	},
	{
		Names:   []string{EnvAnthropicAPIKey + FileSuffix, EnvAnthropicAuthToken + FileSuffix, EnvOpenAIAPIKey + FileSuffix, EnvGeminiAPIKey + FileSuffix, EnvGoogleAPIKey + FileSuffix, WebhookSecretPrefix + "<NAME>" + FileSuffix},
		Default: "unset",
		Meaning: "a file holding that model key or webhook secret instead",
	},
	{
		Names:   []string{EnvAnthropicAPIKey},
		Also:    []string{EnvAnthropicAuthToken, EnvOpenAIAPIKey, EnvGeminiAPIKey, EnvGoogleAPIKey},
		Default: "(required for claude)",
		Meaning: "the model key; `ANTHROPIC_AUTH_TOKEN` also satisfies it. codex needs `OPENAI_API_KEY`, gemini `GEMINI_API_KEY` (or `GOOGLE_API_KEY`), pi one of `ANTHROPIC_API_KEY`, `OPENAI_API_KEY`, `GEMINI_API_KEY`; opencode keeps its keys in its own config",
	},
	{
		Names:   []string{EnvUseCLILogin},
		Default: "`false`",
		Meaning: "`true` when the CLI is logged in by itself (e.g. a subscription), so no key is required",
	},
	{
		Names:   []string{EnvBackend},
		Default: "`claude`",
		Meaning: "which agent CLI runs: `claude`, `codex`, `gemini`, `opencode`, `pi`, or `acp` for any agent that speaks the Agent Client Protocol (see [Backends](#backends))",
	},
	{
		Names:   []string{EnvModel},
		Default: "CLI default",
		Meaning: "model passed to the CLI (`--model`)",
	},
	{
		Names:   []string{EnvMaxTurns},
		Default: "`25`",
		Meaning: "agent turns per event (`--max-turns`)",
	},
	{
		Names:   []string{EnvAgentBinary},
		Default: "on `PATH`",
		Meaning: "path of the CLI binary",
	},
	{
		Names:   []string{EnvACPCommand},
		Default: "unset",
		Meaning: "with `AGENT_BACKEND=acp` (then required): the command line that starts the ACP agent, e.g. `gemini --acp`, `opencode acp`; split into words like a shell would (quotes, backslashes) but run without one. The agent gets every provider variable",
	},
	{
		Names:   []string{EnvAgentUser},
		Default: "unset",
		Meaning: "a user name or uid every agent CLI runs as, so the agent cannot read the bot token or the gateway's state nor change its schedule; `run` and `chat` refuse to start until the files allow exactly that (see [Running the agent as another user](#running-the-agent-as-another-user))",
	},
	{
		Names:   []string{EnvAllowedTools},
		Default: "`Read,Glob,Grep,WebSearch,WebFetch`",
		Meaning: "tools pre-approved for the agent (`--allowedTools`)",
	},
	{
		Names:   []string{EnvPermissionMode},
		Default: "`bypassPermissions`; as root with claude, `acceptEdits`",
		Meaning: "`default`, `acceptEdits`, `plan` or `bypassPermissions` (`--permission-mode`). claude refuses `bypassPermissions` as root unless `IS_SANDBOX=1`, so there the default is `acceptEdits`, which asks before commands (buttons in Discord, a question in `gateway chat`)",
	},
	{
		Names:   []string{EnvIsSandbox},
		Default: "unset",
		Meaning: "`1` tells claude that root is confined (a container), the only way it accepts `bypassPermissions` as root; passed to claude only (see Permissions below)",
	},
	{
		Names:   []string{EnvQueryTimeoutMS},
		Default: "`120000`",
		Meaning: "one event's time limit; the CLI's whole process group is killed after it",
	},
	{
		Names:   []string{EnvConfigDir},
		Default: "`./config`",
		Meaning: "the gateway's state (sessions, the inbox, the cost ledger, the archive…, every file listed with what it holds, who may read it and what a backup needs in [docs/files.md](files.md)) and the persona files, `skills/`, `heartbeat.md` and `boot.md`; also the CLI's working directory unless `WORK_DIR` or a project says otherwise. Every state file is written atomically or fsync'd",
	},
	{
		Names:   []string{EnvWorkDir},
		Default: "`CONFIG_DIR`",
		Meaning: "where the agent CLI works in channels without a project",
	},
	{
		Names:   []string{EnvProjectsRoot},
		Default: "unset (`/project` off)",
		Meaning: "the directory `/project` may bind channels inside",
	},
	{
		Names:   []string{EnvThreads},
		Default: "`auto`",
		Meaning: "`auto`: a mention or `/claude` in a text channel opens a thread for the task and answers there (a session of its own); `off` answers in the channel",
	},
	{
		Names:   []string{EnvThreadArchive},
		Default: "`168h`",
		Meaning: "how long a thread the gateway opened stays open without messages: `1h`, `24h`, `72h` or `168h` (Discord's choices)",
	},
	{
		Names:   []string{EnvWorktrees},
		Default: "`off`",
		Meaning: "`on`: each thread in a git project works in a worktree of its own on a branch `gateway/<thread id>`; `/diff`, `/merge` and `/discard` act on it",
	},
	{
		Names:   []string{EnvWorktreeKeepDays},
		Default: "`7`",
		Meaning: "days a merged worktree is kept after its thread went quiet; unmerged ones are kept and listed by `doctor`",
	},
	{
		Names:   []string{EnvKeepAlive},
		Default: "`10m`",
		Meaning: "how long an idle claude process is kept warm for its channel's next prompt (a Go duration); `0` spawns one process per turn (approvals and soft stops still work)",
	},
	{
		Names:   []string{EnvMaxWarm},
		Default: "`MAX_CONCURRENT_QUERIES`",
		Meaning: "most claude processes kept warm at once; the least recently used idle one is stopped to make room",
	},
	{
		Names:   []string{EnvWarmMemoryMB},
		Default: "`0` (no cap)",
		Meaning: "cap on the proportional memory (PSS, from `/proc/<pid>/smaps_rollup`) of all warm claude process groups together; idle processes are stopped, least recently used first, while the sum is over it, and a process in the middle of a turn never is. PSS divides the 77 MB of claude's binary among the processes sharing it, so the sum is the memory they hold together; where smaps_rollup cannot be read (a kernel before 4.14, or claude running as another user) those processes count by RSS, which counts the shared pages in each, and the log says so once",
	},
	{
		Names:   []string{EnvHangTimeout},
		Default: "`90s`",
		Meaning: "a busy warm process that prints nothing this long (claude streams while the model works and reports each API retry, at most ~40 s apart; not counting time waiting for an approval or while a tool runs, which `QUERY_TIMEOUT_MS` bounds) is killed and the turn retried once on a fresh process with `--resume`",
	},
	{
		Names:   []string{EnvSteer},
		Default: "`queue`",
		Meaning: "a prompt sent while its channel's turn runs: `queue` waits its turn (⏳, with ⏩ to send it now: stop the running turn and run it next); `steer` writes it into the running claude turn (📨), which reads it at its next step",
	},
	{
		Names:   []string{EnvApprovalTimeout},
		Default: "`10m`",
		Meaning: "how long a tool approval waits for an answer before it is denied (the model is told the user may be away)",
	},
	{
		Names:   []string{EnvScheduledTools},
		Default: "`deny`",
		Meaning: "tool approvals of heartbeats, cron jobs, hooks and webhooks, where nobody can be asked: `deny` or `allow`; each decision is logged",
	},
	{
		Names:   []string{EnvTurnCard},
		Default: "`receipt`",
		Meaning: "what the live card becomes when a turn ends: `receipt`, `delete`, or `off` for no card",
	},
	{
		Names:   []string{EnvDailyBudget},
		Default: "none",
		Meaning: "the whole gateway's daily spend limit, in dollars; at 100 % prompts and scheduled events wait for the next day or an approver's Lift",
	},
	{
		Names:   []string{EnvChannelBudget},
		Default: "none",
		Meaning: "each channel's daily spend limit, in dollars",
	},
	{
		Names:   []string{EnvMaxAttachmentMB},
		Default: "`25`",
		Meaning: "largest file attached to a prompt that is fetched for the agent; `0` fetches none (see [Files, skills and the archive](#files-skills-and-the-archive))",
	},
	{
		Names:   []string{EnvMaxAttachmentsMB},
		Default: "`50`",
		Meaning: "most bytes fetched for the files of one message together; `0` fetches none",
	},
	{
		Names:   []string{EnvHistoryMessages},
		Default: "`20`",
		Meaning: "recent exchanges kept per channel, given to a new session of that channel (after `/claude-reset`, or a session that could not be resumed); `0` keeps none",
	},
	{
		Names:   []string{EnvActions},
		Also:    actionKeys,
		Default: "`true`",
		Meaning: actionsMeaning(),
	},
	{
		Names:   []string{EnvActionsMax},
		Default: "`10`",
		Meaning: "actions run per reply; the rest fail with a note",
	},
	{
		Names:   []string{EnvActionsFollowups},
		Default: "`3`",
		Meaning: "follow-up turns that give the agent its query actions' results; `0` runs none",
	},
	{
		Names:   []string{EnvDeferMaxSeconds, EnvDeferMaxPending},
		Default: "`1800`, `5`",
		Meaning: "how far ahead a `defer` action may run a prompt, and how many may wait",
	},
	{
		Names:   []string{EnvArchiveDays},
		Default: "`90`",
		Meaning: "days the conversation archive (`CONFIG_DIR/conversations/`) keeps; `0` keeps everything",
	},
	{
		Names:   []string{EnvMaxConcurrent},
		Default: "`5`",
		Meaning: "channels that may run at once (1 = fully sequential). With `NATS_URL`, per process; `0` makes `gateway run` take prompts only and leave every turn to `gateway worker`s",
	},
	{
		Names:   []string{EnvMaxQueueDepth},
		Default: "`100`",
		Meaning: "events that may wait; beyond it new ones are refused as busy",
	},
	{
		Names:   []string{EnvMaxChannelQueue},
		Default: "`10`",
		Meaning: "events one channel (or the system lane) may have waiting, under `MAX_QUEUE_DEPTH`, so one busy channel cannot lock the others out",
	},
	{
		Names:   []string{EnvMaxReplyMessages},
		Default: "`10`",
		Meaning: "Discord messages one answer may take; a longer one is cut and attached whole as `answer.md`",
	},
	{
		Names:   []string{EnvOutputChannelID},
		Default: "none",
		Meaning: "channel for heartbeat, cron, startup and shutdown hook output",
	},
	{
		Names:   []string{EnvAllowedUserIDs, EnvAllowedChannelIDs, EnvAllowedGuildIDs},
		Default: "none",
		Meaning: "comma-separated allowlists (empty = no restriction on that axis)",
	},
	{
		Names:   []string{EnvInboxRetention},
		Default: "`168h`",
		Meaning: "how long finished events stay in the inbox (for de-duplication and `doctor`); unfinished ones always stay",
	},
	{
		Names:   []string{EnvInboxMaxEvents},
		Default: "`10000`",
		Meaning: "at most this many finished events stay in the inbox",
	},
	{
		Names:   []string{EnvCatchUpMaxAge},
		Default: "`6h`",
		Meaning: "prompts missed while disconnected that are older than this are not answered",
	},
	{
		Names:   []string{EnvApproverIDs},
		Default: "none",
		Meaning: "users who may Apply or Discard a schedule change the agent made (see Changes the agent makes); empty = the users in `ALLOWED_USER_IDS`, or without that list, members with the Manage Server permission",
	},
	{
		Names:   []string{EnvAllowedRoleIDs},
		Default: "none",
		Meaning: "members with any of these roles may use the bot, as the users in `ALLOWED_USER_IDS` may (either suffices). DMs carry no roles",
	},
	{
		Names:   []string{EnvApproverRoleIDs},
		Default: "none",
		Meaning: "members with any of these roles may answer tool approvals and questions, and Apply, Lift or Confirm, as `APPROVER_IDS` may",
	},
	{
		Names:   []string{EnvSessionScope},
		Default: "`channel`",
		Meaning: "`channel`: one session per channel or thread, shared by everyone in it; `user`: each person has their own session in a shared channel (turns still run one at a time, in order)",
	},
	{
		Names:   []string{EnvNotifyAfter},
		Default: "`2m`",
		Meaning: "a turn that ran longer than this mentions its author in the answer, so their phone buzzes (nobody else is pinged); `0` never does",
	},
	{
		Names:   []string{EnvTranscribeURL},
		Default: "off",
		Meaning: "an OpenAI-compatible `/v1/audio/transcriptions` endpoint (OpenAI's, or a local Whisper server's): voice messages are transcribed and the transcript becomes the prompt. Unset, a voice message gets a reply saying how to turn this on",
	},
	{
		Names:   []string{EnvTranscribeAPIKey, EnvTranscribeAPIKey + FileSuffix},
		Default: "unset",
		Meaning: "the transcription endpoint's key (sent as a bearer token; never passed to the agent)",
	},
	{
		Names:   []string{EnvTranscribeModel},
		Default: "`whisper-1`",
		Meaning: "the model the transcription endpoint is asked for",
	},
	{
		Names:   []string{EnvVoiceMaxSeconds},
		Default: "`300`",
		Meaning: "longer voice messages are not transcribed (the user is told); their size is bounded by `MAX_ATTACHMENT_MB` and the endpoint's 25 MB",
	},
	{
		Names:   []string{EnvDiscordAPIBaseURL, EnvDiscordGatewayURL},
		Default: "real Discord",
		Meaning: "REST and gateway endpoints (proxies, tests): `" + apiURLShape[:strings.Index(apiURLShape, ",")] + "` and `" + gatewayURLShape[:strings.Index(gatewayURLShape, ",")] + "`, as Discord's own `https://discord.com/api/v9` and `wss://gateway.discord.gg`",
	},
	{
		Names:   []string{EnvWebhookAddr},
		Default: "off",
		Meaning: "webhook listener address; a bare port listens on 127.0.0.1",
	},
	{
		Names:   []string{EnvAdminAddr},
		Default: "off",
		Meaning: "the admin server's address (health, metrics, dashboard; see [Operating it](#operating-it)); a bare port listens on 127.0.0.1, and any address that is not a loopback one requires `ADMIN_TOKEN`",
	},
	{
		Names:   []string{EnvAdminToken},
		Default: "unset",
		Meaning: "the admin server's secret, sent as a bearer token or once through its login form; at least 16 bytes, and required when `ADMIN_ADDR` is not a loopback address or `AGENT_USER` is set (e.g. `openssl rand -hex 32`)",
	},
	{
		Names:   []string{EnvAdminHosts},
		Default: "none",
		Meaning: "more names the admin server answers to, comma-separated `host` (any port) or `host:port`, e.g. the name a reverse proxy passes on; it answers its own address (and `localhost` on loopback) anyway, and any other `Host` gets 421, which keeps out pages that re-resolve their name to it (DNS rebinding)",
	},
	{
		Names:   []string{EnvAdminTrustProxy},
		Default: "`false`",
		Meaning: "`true` when a TLS proxy in front of the admin server sets `X-Forwarded-Proto`: `https` there makes the login cookie `Secure`",
	},
	{
		Names:   []string{EnvNATSURL},
		Default: "unset (the embedded inbox)",
		Meaning: "keeps every event and what became of it in NATS JetStream instead of `inbox.log` in `CONFIG_DIR` (see `docs/scale-out.md`): comma-separated `nats://`, `tls://` (TLS), `ws://` or `wss://` URLs of one server or a cluster; the stream and buckets are created when missing, and a start with settings that differ from theirs stops with the difference. Lets `gateway worker`s on other machines run the turns (\"Several machines\")",
	},
	{
		Names:   []string{EnvNATSCredsFile},
		Default: "unset",
		Meaning: "a NATS credentials file (`.creds`: a user JWT and its key) to connect with",
	},
	{
		Names:   []string{EnvNATSToken, EnvNATSToken + FileSuffix},
		Default: "unset",
		Meaning: "a NATS token to connect with, or a file holding it; not with `NATS_CREDS_FILE`",
	},
	{
		Names:   []string{EnvNATSReplicas},
		Default: "`1`",
		Meaning: "how many NATS servers keep the stream and buckets: `1`, or `3` (`5`) on a cluster; must match what exists",
	},
	{
		Names:   []string{EnvNATSPartitions},
		Default: "`256`",
		Meaning: "partitions of the event stream, fixed when it is made (changing it means letting every event finish and deleting the stream)",
	},
	{
		Names:   []string{EnvNATSAckWait},
		Default: "`60s`",
		Meaning: "how long a process running a turn may stay silent (it reports progress every third of it) before its event is handed to another worker: the failover time after a crash. Fixed when the stream is made, like `NATS_PARTITIONS`",
	},
	{
		Names:   []string{EnvLogLevel},
		Default: "`info` (`chat`: `warn`)",
		Meaning: "`trace`, `debug`, `info`, `warn`, `error`. `chat` shares the terminal with the conversation, so it logs warnings and errors only unless `LOG_LEVEL` is set or `-v` is given",
	},
	{
		Names:   []string{EnvLogFormat},
		Default: "`console`",
		Meaning: "`console` or `json` (logs go to stderr)",
	},
}

// actionsMeaning describes DISCORD_ACTIONS and names each category's switch
// with its default, from the catalog, so that a new category cannot be
// left out.
func actionsMeaning() string {
	var on, off []string
	for _, c := range actions.Categories {
		name := "`_" + strings.TrimPrefix(ActionsEnv(c), EnvActions+"_") + "`"
		if actions.DefaultOn(c) {
			on = append(on, name)
		} else {
			off = append(off, name)
		}
	}
	if len(on) > 0 {
		// The first switch is spelled out; the rest share its prefix.
		on[0] = "`" + EnvActions + on[0][1:]
	} else if len(off) > 0 {
		off[0] = "`" + EnvActions + off[0][1:]
	}
	var groups []string
	if len(on) > 0 {
		groups = append(groups, strings.Join(on, ", ")+" (default `true`)")
	}
	if len(off) > 0 {
		groups = append(groups, strings.Join(off, ", ")+" (default `false`)")
	}
	return "the agent's Discord actions (see [Discord actions](#discord-actions)); " +
		strings.Join(groups, " and ") + " switch each category"
}

// envHeader opens every .env file CommentedEnv writes.
const envHeader = `# Settings of the gateway, each commented out with its default: uncomment a
# line to change it. Real environment variables win over this file, and an
# empty value counts as unset. The settings table in docs/configuration.md
# says the same. Keep this file private (chmod 600): it holds the bot token.
`

// CommentedEnv returns a .env file that lists every setting in the
// reference, each under its description and commented out with its
// default; secrets have no value. The names in set are written as active
// lines with the given value instead, in single quotes when the value
// needs them (it must hold no single quote or line break). `gateway init`
// writes it, and .env.example is CommentedEnv(nil).
func CommentedEnv(set map[string]string) string {
	var b strings.Builder
	b.WriteString(envHeader)
	for _, d := range docs {
		b.WriteByte('\n')
		text := sentence(plainText(d.Meaning))
		if note := defaultNote(d); note != "" {
			text += " " + note
		}
		for _, l := range wrap(text, 76) {
			b.WriteString("# " + l + "\n")
		}
		for _, name := range append(slices.Clone(d.Names), d.Also...) {
			if strings.Contains(name, "<") {
				continue
			}
			if val, ok := set[name]; ok {
				b.WriteString(name + "=" + envQuote(val) + "\n")
				continue
			}
			val := defaults[name]
			if isSecret(name) {
				val = ""
			}
			b.WriteString("#" + name + "=" + val + "\n")
		}
	}
	return b.String()
}

// defaultNote says what the default is when the commented lines do not
// show it: "Default: CLI default.", "Required for run.". It is empty when
// the lines carry the default value itself, or there is none.
func defaultNote(d doc) string {
	var shown []string
	for _, n := range d.Names {
		shown = append(shown, "`"+defaults[n]+"`")
	}
	switch {
	case d.Default == strings.Join(shown, ", "), d.Default == "unset", d.Default == "none":
		return ""
	case strings.HasPrefix(d.Default, "(") && strings.HasSuffix(d.Default, ")"):
		// Prose, not a value: "(required for `run`)".
		s := sentence(plainText(d.Default[1 : len(d.Default)-1]))
		return strings.ToUpper(s[:1]) + s[1:]
	}
	return "Default: " + sentence(plainText(d.Default))
}

// isSecret reports whether name holds a secret, which a .env file
// template never gives a value.
func isSecret(name string) bool {
	return slices.Contains(secretNames, name) || name == EnvAdminToken
}

var (
	mdLink   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`) })
	mdMarkup = strings.NewReplacer("`", "", "**", "")
)

// plainText turns the Markdown of a meaning into text for a comment: a
// link becomes its text, code and bold marks go, and what the settings
// table has "below" is further down docs/configuration.md.
func plainText(md string) string {
	s := mdMarkup.Replace(mdLink().ReplaceAllString(md, "$1"))
	return strings.ReplaceAll(s, " below)", " in docs/configuration.md)")
}

// sentence ends s with a full stop. It does not capitalize: a meaning
// may start with a value (`default`, `1`), which must keep its case.
func sentence(s string) string {
	if s != "" && !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}

// wrap breaks text into lines of at most width bytes at spaces (a longer
// word stays whole).
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(text) {
		switch {
		case line == "":
			line = w
		case len(line)+1+len(w) <= width:
			line += " " + w
		default:
			lines = append(lines, line)
			line = w
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// envQuote writes a value so that the .env parser reads it back as is:
// bare when it is plain, else in single quotes, which take every byte
// literally.
func envQuote(val string) string {
	if val != "" && !strings.ContainsAny(val, " \t#'\"\\$`") {
		return val
	}
	return "'" + val + "'"
}
