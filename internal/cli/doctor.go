package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/actions"
	"github.com/agentgateway/gateway/internal/card"
	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/cost"
	"github.com/agentgateway/gateway/internal/discord"
	"github.com/agentgateway/gateway/internal/gateway"
	"github.com/agentgateway/gateway/internal/persona"
	"github.com/agentgateway/gateway/internal/project"
	"github.com/agentgateway/gateway/internal/schedule"
	"github.com/agentgateway/gateway/internal/webhook"
)

type doctorOptions struct {
	io      streams
	envFile string
	json    bool
	// all checks every backend's CLI, not only the selected one.
	all bool
	// live runs one real agent turn; online asks Discord about the token.
	live, online bool
	// access decides what this user may do with CONFIG_DIR; nil is
	// unix.Access.
	access accessFunc
}

func newDoctorCmd(io streams) *cobra.Command {
	opts := doctorOptions{io: io}
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check the configuration, CONFIG_DIR and the agent CLI",
		Long: `doctor reports every configuration problem at once, which persona files
CONFIG_DIR holds, which skills CONFIG_DIR/skills holds (and every malformed
one), what heartbeat.md and agents.md schedule (and every problem in them,
with its line), whether the selected agent CLI is installed, which
version it is and whether the conformance suite covers that version, whether
its credentials are set, whether the Discord token looks like one, and
security warnings. It ends with what each command needs ("chat: ready",
"run: needs DISCORD_BOT_TOKEN") and exits non-zero when something is broken.
A Discord token that is not set yet is not broken: chat works without it.

--live runs one short agent turn (it costs a little); --online asks Discord
whose token it is; --all checks every backend's CLI.

Exit codes:
  0  nothing is broken (warnings may remain)
  1  something is broken: each problem is a FAIL line (an invalid setting
     too: doctor lists it instead of stopping)
  2  usage: an argument or an unknown flag`,
		Example: `  $ gateway doctor
  $ gateway doctor --online --live
  $ gateway doctor --all --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.envFile, _ = cmd.Flags().GetString("env-file")
			return runDoctor(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.json, "json", false, "print the report as JSON")
	cmd.Flags().BoolVar(&opts.all, "all", false, "check every backend's CLI, not only AGENT_BACKEND's")
	cmd.Flags().BoolVar(&opts.live, "live", false, "run one short agent turn through the selected backend")
	cmd.Flags().BoolVar(&opts.online, "online", false, "ask Discord's REST API whose token DISCORD_BOT_TOKEN is")
	return cmd
}

// check is one line of the doctor's report.
type check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
	// Warning marks a finding that does not stop the gateway.
	Warning bool `json:"warning,omitempty"`

	// need, when set, is what a command lacks because of this finding
	// (a variable, a CLI); runOnly limits that to `gateway run`.
	need    string
	runOnly bool
}

// readiness says whether a command can start, and if not what it needs.
type readiness struct {
	Command string   `json:"command"`
	Ready   bool     `json:"ready"`
	Needs   []string `json:"needs,omitempty"`
}

// commandReadiness sums the checks up per command: chat needs valid
// settings, the agent CLI and its credentials; run needs the same and the
// Discord token. Every failure counts: one that names no need makes its
// commands need it fixed, so a [FAIL] line never sits above "ready".
func commandReadiness(checks []check) []readiness {
	chat := readiness{Command: "chat"}
	run := readiness{Command: "run"}
	add := func(r *readiness, need string) {
		if !slices.Contains(r.Needs, need) {
			r.Needs = append(r.Needs, need)
		}
	}
	for _, c := range checks {
		need := c.need
		if need == "" && !c.OK && !c.Warning {
			need = "the " + c.Name + " problem above fixed"
		}
		if need == "" {
			continue
		}
		if !c.runOnly {
			add(&chat, need)
		}
		add(&run, need)
	}
	chat.Ready, run.Ready = len(chat.Needs) == 0, len(run.Needs) == 0
	return []readiness{chat, run}
}

func (r readiness) String() string {
	if r.Ready {
		return r.Command + ": ready"
	}
	return r.Command + ": needs " + strings.Join(r.Needs, ", ")
}

var errDoctorProblems = errors.New("doctor found problems")

func runDoctor(ctx context.Context, opts doctorOptions) error {
	var checks []check
	// Load as chat does: every bad value and the backend's credentials.
	// The Discord token is `run`'s alone and is checked below.
	cfg, err := loadConfig(opts.envFile, forChat)
	if err != nil {
		var verr *config.ValidationError
		if errors.As(err, &verr) {
			for _, p := range verr.Problems {
				c := check{Name: "config", Detail: p.Error(), need: "valid settings"}
				var v *config.VarError
				if errors.As(p, &v) {
					c.need = "a valid " + v.Var
					if strings.HasPrefix(v.Msg, "missing ") {
						c.need = v.Var
					}
				}
				checks = append(checks, c)
			}
		} else {
			checks = append(checks, check{Name: "config", Detail: err.Error(), need: "a readable .env"})
		}
		// Keep going with what did parse, so the rest is still checked.
		cfg, _ = loadConfig(opts.envFile, forDoctor)
	} else {
		checks = append(checks, check{Name: "config", OK: true, Detail: "all settings valid"})
	}
	if cfg != nil {
		for _, u := range cfg.UnknownSettings() {
			checks = append(checks, check{Name: "config", Warning: true, Detail: u.String()})
		}
		dirChecks, dirUsable := configDirChecks(cfg.ConfigDir, opts.access)
		checks = append(checks, dirChecks...)
		if dirUsable {
			// What lives in CONFIG_DIR; a folder that cannot be used has
			// said so once above, rather than once per file here.
			checks = append(checks, skillChecks(cfg.ConfigDir)...)
		}
		checks = append(checks, actionsCheck(cfg))
		checks = append(checks, fileModeChecks(cfg, opts.envFile)...)
		if dirUsable {
			checks = append(checks, scheduleChecks(cfg, time.Now())...)
			checks = append(checks, holdChecks(cfg)...)
			checks = append(checks, inboxChecks(ctx, cfg)...)
			checks = append(checks, workChecks(cfg, time.Now())...)
		}
		if dirUsable {
			checks = append(checks, worktreeChecks(ctx, cfg)...)
		}
		checks = append(checks, agentUserChecks(cfg, opts.envFile)...)
		checks = append(checks, discordChecks(ctx, cfg, opts.online)...)
		names := []string{cfg.Backend}
		if opts.all {
			names = backends.Names()
		}
		for _, name := range names {
			checks = append(checks, backendChecks(ctx, cfg, name, name == cfg.Backend, opts.live)...)
		}
		checks = append(checks, capabilityCheck(cfg))
		if cfg.RootRefusesBypass() {
			checks = append(checks, check{Name: "agent-cli", Detail: cfg.RootBypassAdvice(),
				need: "IS_SANDBOX=1 or PERMISSION_MODE=acceptEdits (root)"})
		}
		if note := cfg.RootDefaultNote(); note != "" {
			// What the gateway chose, not a problem.
			checks = append(checks, check{Name: "permission", OK: true, Detail: note})
		}
		if opts.live {
			checks = append(checks, liveCheck(ctx, cfg))
		}
		for _, w := range cfg.Warnings() {
			if w != cfg.RootBypassAdvice() && w != cfg.RootDefaultNote() {
				checks = append(checks, check{Name: "security", Detail: w, Warning: true})
			}
		}
		if cfg.PermissionMode == "bypassPermissions" && cfg.AgentUser == "" {
			checks = append(checks, check{Name: "security", Detail: config.SameUserBypassWarning, Warning: true})
		}
		if cfg.PermissionMode == "bypassPermissions" && cfg.Backend == config.BackendClaude {
			checks = append(checks, check{Name: "security", Detail: config.ApprovalsAdvice, Warning: true})
		}
	}

	failed := false
	for _, c := range checks {
		failed = failed || (!c.OK && !c.Warning)
	}
	ready := commandReadiness(checks)
	if opts.json {
		enc := json.NewEncoder(opts.io.out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(map[string]any{"ok": !failed, "checks": checks, "commands": ready}); err != nil {
			return err
		}
	} else {
		for _, c := range checks {
			mark := "ok  "
			switch {
			case c.Warning:
				mark = "warn"
			case !c.OK:
				mark = "FAIL"
			}
			fmt.Fprintf(opts.io.out, "[%s] %-10s %s\n", mark, c.Name, c.Detail)
		}
		fmt.Fprintln(opts.io.out)
		for _, r := range ready {
			fmt.Fprintln(opts.io.out, r)
		}
	}
	if failed {
		return errDoctorProblems
	}
	return nil
}

// workChecks reports where the agent works (WORK_DIR, PROJECTS_ROOT) and
// what it cost today against the budgets.
func workChecks(cfg *config.Config, now time.Time) []check {
	var out []check
	if cfg.WorkDir != "" {
		if err := project.Check(cfg.WorkDir); err != nil {
			out = append(out, check{Name: "work-dir", Detail: fmt.Sprintf("WORK_DIR %s: %v", cfg.WorkDir, err), need: "an existing WORK_DIR"})
		} else {
			out = append(out, check{Name: "work-dir", OK: true, Detail: "the agent works in " + cfg.WorkDir + " unless a channel has a project"})
		}
	}
	if cfg.ProjectsRoot != "" {
		if err := project.Check(cfg.ProjectsRoot); err != nil {
			out = append(out, check{Name: "projects", Warning: true, Detail: fmt.Sprintf("%v: /project cannot bind channels until it exists", err)})
		} else {
			out = append(out, check{Name: "projects", OK: true, Detail: "/project binds channels to directories inside " + cfg.ProjectsRoot})
		}
	}
	ledger, err := cost.Open(filepath.Join(cfg.ConfigDir, cost.FileName), nil)
	if err != nil {
		return append(out, check{Name: "cost", Warning: true, Detail: err.Error()})
	}
	defer ledger.Close()
	gw, _ := ledger.Spent(now, "")
	detail := fmt.Sprintf("spent today: %s", card.Dollars(gw))
	if cfg.DailyBudgetUSD > 0 || cfg.ChannelBudgetUSD > 0 {
		v := ledger.Check(cost.Budget{DailyUSD: cfg.DailyBudgetUSD}, now, "")
		detail += fmt.Sprintf(" (gateway budget %s, channel budget %s)", budgetText(cfg.DailyBudgetUSD), budgetText(cfg.ChannelBudgetUSD))
		if v.Level == cost.LevelOver {
			return append(out, check{Name: "cost", Warning: true, Detail: detail + ": " + v.Text()})
		}
	}
	if n := ledger.Skipped(); n > 0 {
		out = append(out, check{Name: "cost", Warning: true, Detail: fmt.Sprintf("%d unreadable lines in %s were skipped", n, cost.FileName)})
	}
	return append(out, check{Name: "cost", OK: true, Detail: detail})
}

func budgetText(v float64) string {
	if v <= 0 {
		return "none"
	}
	return card.Dollars(v)
}

func configDirChecks(dir string, access accessFunc) (checks []check, usable bool) {
	exists, err := configDirState(dir, access)
	switch {
	case err != nil:
		return []check{{Name: "config-dir", Detail: err.Error(), need: "a usable CONFIG_DIR"}}, false
	case !exists:
		return []check{{Name: "config-dir", Detail: fmt.Sprintf("%s does not exist yet: `gateway run` or `gateway chat` creates it with default persona files", dir), Warning: true}}, true
	}
	var present, missing []string
	for _, s := range persona.Sections {
		if _, err := os.Stat(filepath.Join(dir, s.File)); err == nil {
			present = append(present, s.File)
		} else {
			missing = append(missing, s.File)
		}
	}
	out := []check{{Name: "config-dir", OK: true, Detail: fmt.Sprintf("%s has %s", dir, strings.Join(present, ", "))}}
	if len(missing) > 0 {
		out = append(out, check{Name: "persona", Warning: true, Detail: "missing " + strings.Join(missing, ", ") + " (created with defaults at start)"})
	}
	return out, true
}

// skillChecks lists the skills in CONFIG_DIR/skills and warns about each
// problem: a malformed skill is left out of the prompt, the gateway runs on.
func skillChecks(dir string) []check {
	skills, errs := persona.LoadSkills(dir)
	var out []check
	if len(skills) == 0 {
		out = append(out, check{Name: "skills", OK: true, Detail: "no skills (CONFIG_DIR/skills/<name>/SKILL.md)"})
	} else {
		names := make([]string, len(skills))
		for i, s := range skills {
			names[i] = s.Name
		}
		noun := "skills"
		if len(skills) == 1 {
			noun = "skill"
		}
		out = append(out, check{Name: "skills", OK: true, Detail: fmt.Sprintf("%d %s: %s", len(skills), noun, strings.Join(names, ", "))})
	}
	for _, err := range errs {
		out = append(out, check{Name: "skills", Warning: true, Detail: err.Error()})
	}
	return out
}

// actionsCheck says which Discord action categories the agent may use.
func actionsCheck(cfg *config.Config) check {
	if !cfg.Actions.Enabled {
		return check{Name: "discord-actions", OK: true, Detail: "off (" + config.EnvActions + "=false)"}
	}
	var on, off []string
	for _, c := range actions.Categories {
		if cfg.Actions.Categories[c] {
			on = append(on, string(c))
		} else {
			off = append(off, string(c))
		}
	}
	detail := "on: " + strings.Join(on, ", ")
	if len(off) > 0 {
		detail += "; off: " + strings.Join(off, ", ")
	}
	return check{Name: "discord-actions", OK: true, Detail: detail + fmt.Sprintf("; at most %d per reply", cfg.ActionsMaxPerTurn)}
}

// backendChecks finds a backend's CLI, asks it for its version, compares
// that with the version the conformance suite covers, and looks for its
// credentials. Findings about a backend other than the selected one are
// warnings: they do not stop this configuration.
func backendChecks(ctx context.Context, cfg *config.Config, name string, selected, live bool) []check {
	name = strings.ToLower(name)
	label := "agent-cli"
	if !selected {
		label = "cli:" + name
	}
	soft := func(c check) check {
		if !selected && !c.OK {
			c.Warning = true
		}
		return c
	}
	bin, explicit := name, ""
	if selected && cfg.AgentBinary != "" {
		bin, explicit = cfg.AgentBinary, cfg.AgentBinary
	}
	// need marks what the selected backend's failure keeps chat and run from.
	need := func(c check, what string) check {
		if selected && !c.OK && !c.Warning {
			c.need = what
		}
		return c
	}
	var out []check
	path, err := backends.LocateCLI(name, explicit)
	if err != nil {
		return append(out, need(soft(check{Name: label, Detail: cliNotFound(name, explicit)}), "the "+name+" CLI"))
	}
	version, err := probeVersion(ctx, cfg, path)
	if err != nil {
		return append(out, need(soft(check{Name: label, Detail: fmt.Sprintf("%s --version failed: %v", bin, err)}), "a working "+name+" CLI"))
	}
	out = append(out, check{Name: label, OK: true, Detail: fmt.Sprintf("%s %s (%s)", name, version, path)})
	if tested, ok := backends.Tested[name]; ok {
		if v := semver().FindString(version); v != tested {
			out = append(out, check{Name: label, Warning: true, Detail: fmt.Sprintf("%s %s is not the version the conformance suite covers (%s): CLIs change flags and output between versions; run `make conformance` with it before relying on it", name, v, tested)})
		}
	}
	if ok, which := cfg.HasCredential(name); ok {
		detail := "no key needed from the gateway"
		switch {
		case which != "" && live:
			detail = which + " is set"
		case which != "":
			// Set is all doctor knows without a model call.
			detail = which + " is set, not tried (gateway doctor --live runs one short turn with it)"
		case cfg.UseCLILogin:
			detail = "AGENT_USE_CLI_LOGIN=true: the CLI's own login is used"
		case name == config.BackendOpencode:
			detail = "opencode keeps its keys in its own config (opencode auth login)"
		}
		out = append(out, check{Name: "credentials", OK: true, Detail: name + ": " + detail})
	} else {
		creds := config.Credentials(name)
		out = append(out, need(soft(check{Name: "credentials", Detail: fmt.Sprintf("%s needs %s (or AGENT_USE_CLI_LOGIN=true if the CLI is logged in)", name, strings.Join(creds, " or "))}), creds[0]))
	}
	return out
}

// cliNotFound says where the gateway looked for a backend's CLI and how to
// install it, for a person at the terminal.
func cliNotFound(name, explicit string) string {
	if explicit != "" {
		return fmt.Sprintf("%s not found at AGENT_CLI_PATH=%s: correct AGENT_CLI_PATH, or unset it to use the CLI on PATH or in the gateway's .tools/", name, explicit)
	}
	where := "on PATH"
	if backends.Package(name) != "" {
		where = "in " + filepath.Join(backends.ProjectRoot(), backends.ToolsDir, name) + " or on PATH"
	}
	return fmt.Sprintf("%s not found %s: %s", name, where, backends.NotFoundAdvice(name))
}

// capabilityCheck says what the selected backend supports (its declared
// backends.Capabilities), and whether AGENT_KEEP_ALIVE turns its warm
// mode on.
func capabilityCheck(cfg *config.Config) check {
	c := check{Name: "features", OK: true}
	b, err := backends.New(cfg.Backend, backends.Options{})
	if err != nil {
		c.Detail = err.Error()
		return c
	}
	if closer, ok := b.(interface{ Close() error }); ok {
		defer closer.Close()
	}
	caps, ok := backends.CapabilitiesOf(b)
	if !ok {
		c.Detail = cfg.Backend + " declares no capabilities"
		return c
	}
	c.Detail = cfg.Backend + ": " + caps.Summary()
	switch {
	case caps.Warm != "" && cfg.KeepAlive > 0:
		c.Detail += fmt.Sprintf("; warm processes are on (AGENT_KEEP_ALIVE=%s)", cfg.KeepAlive)
	case caps.Warm != "":
		c.Detail += "; warm processes are off (AGENT_KEEP_ALIVE=0): soft stop, steering and images need them"
	}
	return c
}

// probeVersion runs `cli --version` with the environment every agent CLI
// gets (backends.FilterEnv: the base allowlist, never DISCORD_* or
// WEBHOOK_*). A version probe needs no credentials, so none are added.
// With AGENT_USER it runs as that user, like every CLI the gateway starts.
func probeVersion(ctx context.Context, cfg *config.Config, path string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "--version")
	cmd.Env = backends.FilterEnv(os.Environ(), nil, nil)
	if runAs, err := gateway.RunAs(cfg); err != nil {
		return "", err
	} else if c := runAs.SysCredential(); c != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c}
	}
	cmd.WaitDelay = time.Second
	raw, err := cmd.Output()
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(raw)), nil
}

// semver finds a CLI's version number in its --version output.
var semver = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\d+\.\d+\.\d+`) })

// discordChecks checks the token's shape and, online, asks Discord whose it
// is.
func discordChecks(ctx context.Context, cfg *config.Config, online bool) []check {
	if cfg.DiscordToken == "" {
		if _, named := cfg.Lookup(config.EnvDiscordToken + config.FileSuffix); named {
			return nil // the config check says why the token file gave no token
		}
		return []check{{Name: "discord", Warning: true, need: config.EnvDiscordToken, runOnly: true,
			Detail: "DISCORD_BOT_TOKEN is not set: `gateway run` needs it, `gateway chat` does not (see Discord setup in the README)"}}
	}
	id, err := discord.TokenShape(cfg.DiscordToken)
	if err != nil {
		return []check{{Name: "discord", Detail: "DISCORD_BOT_TOKEN " + err.Error(), need: "a valid " + config.EnvDiscordToken, runOnly: true}}
	}
	out := []check{{Name: "discord", OK: true, Detail: fmt.Sprintf("DISCORD_BOT_TOKEN looks like a bot token (bot user id %d)", id)}}
	if online {
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		name, err := discord.CheckToken(ctx, discord.Options{Token: cfg.DiscordToken, APIBaseURL: cfg.DiscordAPIBaseURL})
		if err != nil {
			out = append(out, check{Name: "discord", Detail: err.Error(), need: onlineNeed(err, cfg), runOnly: true})
		} else {
			out = append(out, check{Name: "discord", OK: true, Detail: "Discord says the token belongs to the bot " + name})
		}
	}
	return out
}

// onlineNeed is what `gateway run` needs when Discord did not confirm the
// token: a token it accepts, or, when it could not be asked, the API.
func onlineNeed(err error, cfg *config.Config) string {
	if errors.Is(err, discord.ErrTokenRejected) {
		return "a " + config.EnvDiscordToken + " Discord accepts"
	}
	if cfg.DiscordAPIBaseURL != "" {
		return "a Discord API that answers at " + config.EnvDiscordAPIBaseURL
	}
	return "Discord's API reachable from this machine"
}

// liveCheck runs one short turn through the selected backend, in a
// scratch directory, with no tools that write.
func liveCheck(ctx context.Context, cfg *config.Config) check {
	backend, err := gateway.NewBackend(cfg, zerolog.Nop())
	if err != nil {
		return check{Name: "live", Detail: err.Error()}
	}
	dir, err := os.MkdirTemp("", "gateway-doctor-")
	if err != nil {
		return check{Name: "live", Detail: err.Error()}
	}
	defer os.RemoveAll(dir)
	if runAs, _ := gateway.RunAs(cfg); runAs != nil {
		// The agent user's scratch directory (NewBackend already failed if the lookup did).
		if err := os.Chown(dir, int(runAs.Credential.UID), int(runAs.Credential.GID)); err != nil {
			return check{Name: "live", Detail: err.Error()}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.QueryTimeout)
	defer cancel()
	start := time.Now()
	res, err := backend.Run(ctx, backends.Request{
		Prompt:         "Reply with the single word: pong",
		WorkDir:        dir,
		Model:          cfg.Model,
		PermissionMode: "plan",
		MaxTurns:       1,
	}, nil)
	if err != nil {
		return check{Name: "live", Detail: fmt.Sprintf("one turn through %s failed: %v", cfg.Backend, err), need: "a working agent turn (see live)"}
	}
	reply := strings.TrimSpace(res.Text)
	if len(reply) > 60 {
		reply = reply[:60] + "…"
	}
	return check{Name: "live", OK: true, Detail: fmt.Sprintf("%s answered %q in %s, cost $%.4f", cfg.Backend, reply, time.Since(start).Round(time.Millisecond), res.CostUSD)}
}

// scheduleChecks lists what heartbeat.md and agents.md schedule (cron jobs
// with their next run), their hooks and webhooks, and every parse problem
// with its file and line. A problem fails the check: the item it names
// does not run.
func scheduleChecks(cfg *config.Config, now time.Time) []check {
	dir := cfg.ConfigDir
	var out []check
	// A schedule problem stops nothing: run and chat start, and what the
	// line defines is left out (the README's "an invalid job is skipped
	// and the rest run"), so each is a warning, not a need.
	problem := func(ps []schedule.Problem) {
		for _, p := range ps {
			out = append(out, check{Name: "schedule", Warning: true, Detail: p.String() + " (left out; the rest of the schedule runs)"})
		}
	}
	output := func(channel string) string {
		switch {
		case channel != "":
			return "posts to channel " + channel
		case cfg.OutputChannelID != "":
			return "posts to OUTPUT_CHANNEL_ID " + cfg.OutputChannelID
		}
		return "logs only (no Channel, no OUTPUT_CHANNEL_ID)"
	}

	checks, ps, err := schedule.ReadHeartbeats(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		out = append(out, check{Name: "heartbeat", OK: true, Detail: "no heartbeat.md: no heartbeats"})
	case err != nil:
		out = append(out, check{Name: "heartbeat", Warning: true, Detail: err.Error() + " (no heartbeats run until it can be read)"})
	case len(checks) == 0 && len(ps) == 0:
		out = append(out, check{Name: "heartbeat", OK: true, Detail: "heartbeat.md defines no checks"})
	}
	for _, h := range checks {
		d := fmt.Sprintf("%s every %s, %s", h.Name, h.Interval, output(h.Channel))
		if h.Model != "" {
			d += ", model " + h.Model
		}
		out = append(out, check{Name: "heartbeat", OK: true, Detail: d})
	}
	problem(ps)

	agents, ps, err := schedule.ReadAgents(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		out = append(out, check{Name: "cron", Warning: true, Detail: err.Error() + " (no cron jobs, hooks or webhooks run until it can be read)"})
	}
	if err == nil && len(ps) == 0 && len(agents.CronJobs)+len(agents.Hooks)+len(agents.Webhooks) == 0 {
		out = append(out, check{Name: "schedule", OK: true, Detail: "agents.md defines no cron jobs, hooks or webhooks"})
	}
	for _, c := range agents.CronJobs {
		d := fmt.Sprintf("%s %q, %s", c.Name, c.Cron, output(c.Channel))
		if c.Paused {
			d += ", paused"
		} else if next, err := c.NextAfter(now, time.Local); err == nil {
			d += ", next " + next.Format("2006-01-02 15:04 MST")
		}
		out = append(out, check{Name: "cron", OK: true, Detail: d})
	}
	for _, h := range schedule.HookNames {
		if _, ok := agents.Hooks[h]; ok {
			out = append(out, check{Name: "hook", OK: true, Detail: string(h)})
		}
	}
	for _, w := range agents.Webhooks {
		c := check{Name: "webhook", OK: true, Detail: fmt.Sprintf("POST /hooks/%s, secret from %s, %s", w.Name, w.SecretEnv, output(w.Channel))}
		secret, ok := cfg.Lookup(w.SecretEnv)
		if why := webhook.SecretProblem(w.SecretEnv, secret, ok); why != "" {
			c.OK, c.Detail = false, c.Detail+": disabled, every request is refused: "+why
		}
		if cfg.WebhookAddr == "" {
			c.Warning, c.Detail = true, c.Detail+" (WEBHOOK_ADDR is empty: the listener is off)"
		}
		out = append(out, c)
	}
	problem(ps)
	return out
}
