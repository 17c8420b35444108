package config

import (
	"fmt"
	"slices"
	"strings"
)

// BackendEnv returns the provider variables the selected backend's CLI
// needs, as sorted KEY=value entries to append to its environment: its
// credentials and settings such as ANTHROPIC_BASE_URL or IS_SANDBOX.
//
// Values set only in .env are not in os.Environ, so the CLI gets them only
// this way. The entries carry the resolved values (the environment wins over
// .env), so appending them never lets .env override the environment. No
// DISCORD_* variable is ever included.
func (c *Config) BackendEnv() []string {
	want := backendEnv[c.Backend]
	var env []string
	for name, val := range c.ProviderEnv {
		if matchesAny(name, want) {
			env = append(env, name+"="+val)
		}
	}
	if c.Backend == BackendACP && c.ACPCommand != "" {
		// The acp adapter reads its agent's command line from here and
		// keeps it out of the agent's own environment.
		env = append(env, EnvACPCommand+"="+c.ACPCommand)
	}
	slices.Sort(env)
	return env
}

// matchesAny reports whether name is one of patterns, where a pattern ending
// in "_" is a prefix.
func matchesAny(name string, patterns []string) bool {
	for _, p := range patterns {
		if name == p || (strings.HasSuffix(p, "_") && strings.HasPrefix(name, p)) {
			return true
		}
	}
	return false
}

// Warnings returns settings that are valid but probably not what the
// operator wants, worded as advice. `gateway run` logs them at startup and
// `gateway doctor` prints them.
func (c *Config) Warnings() []string {
	var w []string
	bypass := c.PermissionMode == "bypassPermissions"
	if bypass && len(c.AllowedUserIDs)+len(c.AllowedChannelIDs)+len(c.AllowedGuildIDs) == 0 {
		// DESIGN decision 9.
		w = append(w, OpenAccessWarning)
	}
	if c.RootRefusesBypass() {
		w = append(w, c.RootBypassAdvice())
	}
	if note := c.RootDefaultNote(); note != "" {
		w = append(w, note)
	}
	switch c.PermissionMode {
	case "plan":
		w = append(w, "PERMISSION_MODE=plan never writes files: the agent cannot update memory.md")
	case "default":
		if !slices.Contains(c.AllowedTools, "Write") {
			w = append(w, "PERMISSION_MODE=default and ALLOWED_TOOLS has no Write: the agent cannot "+
				"update memory.md; add Write,Edit to ALLOWED_TOOLS or use PERMISSION_MODE=acceptEdits")
		}
	}
	return w
}

// ApprovalsAdvice recommends a permission mode that asks in Discord over
// bypassPermissions.
const ApprovalsAdvice = "PERMISSION_MODE=bypassPermissions runs every command without asking; with claude, PERMISSION_MODE=acceptEdits " +
	"(or default) asks in Discord before risky tool calls, with Allow/Deny buttons for the prompt's author or an approver (APPROVER_IDS, APPROVER_ROLE_IDS)"

// SameUserBypassWarning says what bypassPermissions reaches when the agent
// runs as the gateway's own user.
const SameUserBypassWarning = "PERMISSION_MODE=bypassPermissions and no AGENT_USER: the agent runs as the gateway's own user, " +
	"so one Bash call can read .env (the bot token) and rewrite agents.md (the gateway's schedule); " +
	"set AGENT_USER (see README, Running the agent as another user)"

// PermissionAcceptEdits is the permission mode in which claude edits files
// without asking and asks before other tools (commands).
const PermissionAcceptEdits = "acceptEdits"

// RootBypassRefusal begins RootBypassAdvice: what claude does as root with
// bypassPermissions.
const RootBypassRefusal = "claude refuses PERMISSION_MODE=bypassPermissions when run as root " +
	"(it exits with \"--dangerously-skip-permissions cannot be used with root/sudo privileges\"), so every turn would fail"

// RootBypassAdvice explains why claude will refuse every turn as root with
// bypassPermissions, and how to fix it. When IS_SANDBOX has a value claude
// does not take, it says which and where it came from: advice to set
// IS_SANDBOX=1 is no help to an operator who did, in .env, while the
// environment says otherwise.
func (c *Config) RootBypassAdvice() string {
	s := RootBypassRefusal
	if why := c.sandboxNote(); why != "" {
		s += "; " + why
	}
	fix := "set IS_SANDBOX=1 (exactly 1) if this is a sandbox or container"
	if c.sandboxShadowsFile() {
		fix = "unset IS_SANDBOX in the environment (or set it to 1 there) if this is a sandbox or container"
	}
	return s + ": " + fix + ", or set PERMISSION_MODE=acceptEdits, or run as another user"
}

// RootDefaultNote says that PERMISSION_MODE is acceptEdits because it was
// not set and claude refuses the default as root; "" otherwise. run and
// chat log it once at start, doctor shows it.
func (c *Config) RootDefaultNote() string {
	if !c.rootDefault {
		return ""
	}
	s := "PERMISSION_MODE is not set and the gateway runs as root, where claude refuses the default bypassPermissions"
	if why := c.sandboxNote(); why != "" {
		s += " (" + why + ")"
	}
	return s + ", so the agent runs with PERMISSION_MODE=acceptEdits: it edits files, and asks before anything else " +
		"(Allow/Deny buttons in Discord, a question in the terminal with gateway chat); set PERMISSION_MODE to choose another mode"
}

// RootDefaultBrief is RootDefaultNote in one short line, for run and chat
// to log at every start (doctor shows the whole note); "" when the mode
// was not chosen for root.
func (c *Config) RootDefaultBrief() string {
	if !c.rootDefault {
		return ""
	}
	return "running as root with PERMISSION_MODE unset: the agent uses acceptEdits and asks before commands (gateway doctor says why; set PERMISSION_MODE to choose)"
}

// sandboxNote describes an IS_SANDBOX claude will not take as "yes, this
// is a sandbox", with where the value came from; "" when it is unset or 1.
func (c *Config) sandboxNote() string {
	v := strings.TrimSpace(c.ProviderEnv[EnvIsSandbox])
	if v == "" || v == "1" {
		return ""
	}
	from := "the .env file"
	if c.Source(EnvIsSandbox) == SourceEnvironment {
		from = "the environment"
		if c.sandboxShadowsFile() {
			from += ", which wins over IS_SANDBOX=" + c.sandboxInFile + " in .env"
		}
	}
	return fmt.Sprintf("IS_SANDBOX is %q (from %s) and claude accepts only 1", v, from)
}

// sandboxShadowsFile reports whether the environment's IS_SANDBOX hides a
// different value in .env.
func (c *Config) sandboxShadowsFile() bool {
	return c.Source(EnvIsSandbox) == SourceEnvironment && c.sandboxInFile != "" &&
		c.sandboxInFile != strings.TrimSpace(c.ProviderEnv[EnvIsSandbox])
}

// RootRefusesBypass reports whether the claude CLI will refuse to run:
// claude 2.1.330 exits at once when started as root (uid 0) with
// --permission-mode bypassPermissions, unless IS_SANDBOX is exactly "1"
// (it ignores "true" or "yes"). With AGENT_USER the CLI does not run as
// root, whatever the gateway does.
func (c *Config) RootRefusesBypass() bool {
	return c.PermissionMode == "bypassPermissions" && c.Backend == BackendClaude &&
		c.euid == 0 && c.AgentUser == "" && strings.TrimSpace(c.ProviderEnv[EnvIsSandbox]) != "1"
}

// OpenAccessWarning is the warning for bypassPermissions without any
// allowlist (DESIGN decision 9). It concerns Discord only: `chat` has no
// other users.
const OpenAccessWarning = "PERMISSION_MODE=bypassPermissions and no " + EnvAllowedUserIDs + ", " +
	EnvAllowedChannelIDs + " or " + EnvAllowedGuildIDs + ": anyone who can message the bot " +
	"can make the agent run any command on this machine; set an allowlist"
