package backends

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pelletier/go-toml/v2"
)

func init() {
	Register("codex", func(o Options) Backend { return NewCodex(o) })
}

// codexCLI is what the runner knows of codex.
var codexCLI = cliSpec{name: "codex", envAllow: codexEnvAllow}

// codexEnvAllow names the variables codex may see beyond baseEnv: its
// credentials and endpoint (OPENAI_*) and its own settings (CODEX_*, such
// as CODEX_HOME). codex hands its shell tool a copy of its environment
// without variables whose names contain KEY, SECRET or TOKEN.
var codexEnvAllow = []string{"OPENAI_*", "CODEX_*"}

// Settings of the model provider the adapter defines for codex when it is
// given OPENAI_API_KEY and the user's config.toml selects no provider of
// its own. codex 0.169.0 ignores OPENAI_BASE_URL and reads no key from
// the environment for its built-in "openai" provider (which it does not
// let config override), so the key reaches it through a provider of the
// gateway's own whose env_key names the variable.
const (
	CodexProviderID       = "gateway-openai"
	codexProviderName     = "OpenAI (agent gateway)"
	codexAPIKeyEnv        = "OPENAI_API_KEY"
	codexBaseURLEnv       = "OPENAI_BASE_URL"
	codexDefaultBaseURL   = "https://api.openai.com/v1"
	codexBuiltinOpenAI    = "openai"
	codexPersonaPrefix    = "gateway-persona-"
	codexProfileExtension = ".config.toml"
)

// Scanner limits for codex's stdout, the runner's: one JSON line per
// event; a command's aggregated output can be large.
const (
	codexLineStart = streamLineStart
	codexLineMax   = streamLineMax
)

// Codex runs one turn of OpenAI's codex CLI with `codex exec --json`
// (`codex exec … resume <thread> -` for a session), parsed by CodexParser.
// It is safe for concurrent use: every Run starts its own process group.
//
// The persona goes to codex as developer_instructions, which codex sends
// as a developer message after its own base instructions, keeping the
// CLI's tool instructions. So that a long persona never has to fit on
// argv, it is written to a temporary profile file in CODEX_HOME
// (gateway-persona-<random>.config.toml, selected with -p and removed
// after the run). codex 0.169.0 keeps the developer instructions a thread
// started with on resume; the runtime carries persona changes in the
// prompt of a resumed turn.
//
// With warm processes on (Options.Warm: Interactive and a KeepAlive), a
// turn runs on a kept `codex app-server` instead, which streams text, asks
// for approvals, takes an interrupt and steered messages (codex_app.go).
type Codex struct {
	opts Options
	run  runner
	// app keeps warm `codex app-server` processes (codex_app.go), made
	// once by appPool.
	app     *warmPool[*codexAppProc]
	appOnce sync.Once
}

var _ Backend = (*Codex)(nil)

// NewCodex returns the codex adapter. opts.Binary is the CLI (default
// "codex" on PATH), opts.Env the environment it is filtered from,
// opts.KillGrace the time between SIGTERM and SIGKILL (default
// proc.DefaultGrace) and opts.Log gets diagnostics.
func NewCodex(opts Options) *Codex {
	c := &Codex{opts: opts}
	c.run = newRunner(codexCLI, &c.opts)
	return c
}

// Name implements Backend.
func (c *Codex) Name() string { return "codex" }

// Run implements Backend. It spawns
//
//	codex exec --json --skip-git-repo-check -c approval_policy="never"
//	  [-c sandbox_mode=…] [-c model_provider=USER'S | -c model_provider=gateway-openai -c model_providers.…]
//	  [-p gateway-persona-…] [-m MODEL] [resume THREAD] -
//
// with the prompt on stdin, cwd req.WorkDir and a filtered environment. A
// ctx deadline kills the process group and returns KindTimeout; another
// cancellation returns KindCanceled. A session id that codex cannot have
// issued (not a UUID) is reported as KindStaleSession without starting
// codex: given a name instead of an id, codex would silently start afresh.
func (c *Codex) Run(ctx context.Context, req Request, emit func(Event)) (Result, error) {
	if emit == nil {
		emit = func(Event) {}
	}
	if c.usesAppServer() {
		return c.runApp(ctx, req, emit)
	}
	log := c.run.log()
	started := time.Now()

	if req.SessionID != "" && !codexThreadID().MatchString(req.SessionID) {
		return Result{}, &Error{Kind: KindStaleSession, Message: fmt.Sprintf("%q is not a codex thread id", req.SessionID)}
	}
	bin, err := c.binary()
	if err != nil {
		return Result{}, err
	}
	if err := checkWorkDir(req.WorkDir); err != nil {
		return Result{}, err
	}

	env := c.run.env(nil, nil)
	userProvider, err := readCodexUserProvider(codexHome(env))
	if err != nil {
		// codex reports a broken config.toml itself when it starts.
		log.Warn().Err(err).Msg("cannot read the model provider from codex's config.toml")
	}
	if userProvider.EnvKey != "" {
		// The key variable the user's provider names (AZURE_OPENAI_API_KEY,
		// say) must reach codex too; the gateway's secrets still cannot.
		env = c.run.env([]string{userProvider.EnvKey}, nil)
	}
	persona := req.SystemPrompt
	if persona == "" && req.SystemPromptFile != "" {
		b, err := os.ReadFile(req.SystemPromptFile)
		if err != nil {
			return Result{}, &Error{Kind: KindExecution, Message: "read system prompt file", Err: err}
		}
		persona = string(b)
	}
	var profile string
	if persona != "" {
		if home := codexHome(env); home != "" {
			name, remove, err := c.writeProfile(home, persona)
			if err != nil {
				// A read-only home: the persona goes on argv, which holds
				// up to 128 KiB per argument.
				log.Warn().Err(err).Str("codex_home", home).Msg("cannot write the persona profile; passing the persona on the command line")
			} else {
				defer remove()
				profile = name
			}
		}
	}

	var parser CodexParser
	out, err := c.run.runOnce(ctx, runSpec{
		bin:   bin,
		args:  codexArgs(req, env, profile, persona, userProvider.ID),
		dir:   req.WorkDir,
		env:   env,
		stdin: strings.NewReader(req.Prompt),
	}, parser.Parse, emit)
	if err != nil {
		return Result{}, err
	}
	for _, w := range parser.Warnings() {
		log.Warn().Str("warning", w).Msg("codex reported a problem")
	}

	res, resErr := parser.Result()
	if res.Duration == 0 {
		res.Duration = time.Since(started)
	}
	if parser.Finished() {
		// The stream said how the turn ended; that outranks exit codes and
		// a late kill.
		res.PermissionDenials = append(res.PermissionDenials, codexStderrDenials(out.Stderr)...)
		if e := streamError(resErr, out.Stderr); e != nil {
			return res, e
		}
		return res, nil
	}
	if e := c.run.stopped(ctx, out); e != nil {
		return res, e
	}
	if e := CodexStderrError(out.Stderr); e != nil {
		e.Stderr = out.Stderr
		return res, e
	}
	if e := streamError(resErr, out.Stderr); e != nil {
		return res, e
	}
	return res, c.run.ended(out, "ended without finishing the turn", "")
}

// codexThreadID matches the thread ids codex issues (UUIDs).
var codexThreadID = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
})

// codexProviderArgs choose codex's model provider: the user's own
// (model_provider in their config) when it is not the built-in openai,
// else, with OPENAI_API_KEY set, the gateway's provider with that key and
// OPENAI_BASE_URL (codex ignores OPENAI_BASE_URL on its own).
func codexProviderArgs(env []string, userProvider string) []string {
	var args []string
	ownProvider := userProvider != "" && userProvider != codexBuiltinOpenAI
	if ownProvider {
		args = append(args, "-c", "model_provider="+codexTOMLString(userProvider))
	}
	if key := codexEnvValue(env, codexAPIKeyEnv); key != "" && !ownProvider {
		base := codexEnvValue(env, codexBaseURLEnv)
		if base == "" {
			base = codexDefaultBaseURL
		}
		pre := "model_providers." + CodexProviderID + "."
		args = append(args,
			"-c", "model_provider="+codexTOMLString(CodexProviderID),
			"-c", pre+"name="+codexTOMLString(codexProviderName),
			"-c", pre+"base_url="+codexTOMLString(base),
			"-c", pre+"env_key="+codexTOMLString(codexAPIKeyEnv),
			"-c", pre+"wire_api="+codexTOMLString("responses"),
		)
	}
	return args
}

// codexArgs builds the command line. The prompt is not on it: "-" makes
// codex read it from stdin. env is the CLI's environment; profile names
// the persona profile in CODEX_HOME, or is empty, in which case a
// non-empty persona goes on argv as a last resort (no CODEX_HOME or HOME).
// userProvider is the model provider the user's config.toml selects (see
// codexUserProvider): the gateway defines its own provider for
// OPENAI_API_KEY only when the user selected none or codex's built-in
// "openai", so a proxy, Azure or a local model the user configured keeps
// serving the turns. The user's choice is repeated with -c because the
// persona profile (-p) takes the place of the user's active profile.
func codexArgs(req Request, env []string, profile, persona, userProvider string) []string {
	args := []string{"exec", "--json", "--skip-git-repo-check",
		// exec cannot ask anyone: never wait for an approval.
		"-c", `approval_policy="never"`}
	if sandbox := CodexSandbox(req.PermissionMode, req.AllowedTools); sandbox != "" {
		args = append(args, "-c", "sandbox_mode="+codexTOMLString(sandbox))
	}
	args = append(args, codexProviderArgs(env, userProvider)...)
	switch {
	case profile != "":
		args = append(args, "-p", profile)
	case persona != "":
		args = append(args, "-c", "developer_instructions="+codexTOMLString(persona))
	}
	if req.Model != "" {
		args = append(args, "-m", req.Model)
	}
	for _, dir := range req.AddDirs {
		// Writable beside the work dir in workspace-write (memory.md).
		args = append(args, "--add-dir", dir)
	}
	if req.SessionID != "" {
		args = append(args, "resume", req.SessionID)
	}
	return append(args, "-")
}

// Sandbox names the sandbox tier req runs in, for the turn card: codex
// cannot ask for approvals in exec mode, so its tier is what the user
// should know.
func (c *Codex) Sandbox(req Request) string {
	return CodexSandbox(req.PermissionMode, req.AllowedTools)
}

// CodexSandbox maps PERMISSION_MODE to codex's sandbox_mode:
// bypassPermissions to danger-full-access (no sandbox), acceptEdits to
// workspace-write (files under the work dir, commands without network),
// plan to read-only, and default to read-only unless allowed lists a
// file-writing tool (Write, Edit, MultiEdit or apply_patch), as claude
// writes in default mode only when Write is allowed. An empty mode leaves
// codex's own setting ("").
func CodexSandbox(mode string, allowed []string) string {
	switch mode {
	case "bypassPermissions":
		return "danger-full-access"
	case "acceptEdits":
		return "workspace-write"
	case "plan":
		return "read-only"
	case "default":
		for _, t := range allowed {
			if slices.Contains([]string{"Write", "Edit", "MultiEdit", "apply_patch"}, t) {
				return "workspace-write"
			}
		}
		return "read-only"
	}
	return ""
}

// codexHome is where codex keeps its config: $CODEX_HOME, or ~/.codex.
func codexHome(env []string) string {
	if h := codexEnvValue(env, "CODEX_HOME"); h != "" {
		return h
	}
	if h := codexEnvValue(env, "HOME"); h != "" {
		return filepath.Join(h, ".codex")
	}
	return ""
}

// codexProvider is the model provider a user's codex config.toml selects.
type codexProvider struct {
	// ID is the provider's id (model_provider), "" when none is selected.
	ID string
	// EnvKey is the variable holding its API key (env_key of
	// [model_providers.ID]), "" when not set there.
	EnvKey string
}

// readCodexUserProvider returns the model provider selected by
// home/config.toml (see codexUserProvider); the zero codexProvider when
// there is no such file or it selects none.
func readCodexUserProvider(home string) (codexProvider, error) {
	if home == "" {
		return codexProvider{}, nil
	}
	path := filepath.Join(home, "config.toml")
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return codexProvider{}, nil
	}
	if err != nil {
		return codexProvider{}, fmt.Errorf("read codex config: %w", err)
	}
	provider, err := codexUserProvider(b)
	if err != nil {
		return codexProvider{}, fmt.Errorf("parse %s: %w", path, err)
	}
	return provider, nil
}

// codexUserProvider returns the model provider a codex config.toml
// selects: model_provider of the profile named by the top-level profile
// key ([profiles.NAME]), else the top-level model_provider; the zero
// codexProvider when neither is set. It is pure: bytes in, the provider
// out.
func codexUserProvider(config []byte) (codexProvider, error) {
	// A generic map, not a struct: go-toml v2.2.4 panics decoding a table
	// under a key the struct types as a string ("[profile.x]").
	var c map[string]any
	if err := toml.Unmarshal(config, &c); err != nil {
		return codexProvider{}, err
	}
	id, err := codexSelectedProvider(c)
	if err != nil || id == "" {
		return codexProvider{}, err
	}
	providers, _ := c["model_providers"].(map[string]any)
	provider, _ := providers[id].(map[string]any)
	envKey, err := tomlStringKey(provider, "env_key")
	if err != nil {
		return codexProvider{}, fmt.Errorf("model_providers.%s: %w", id, err)
	}
	return codexProvider{ID: id, EnvKey: envKey}, nil
}

// codexSelectedProvider is the provider id config c selects, or "".
func codexSelectedProvider(c map[string]any) (string, error) {
	top, err := tomlStringKey(c, "model_provider")
	if err != nil {
		return "", err
	}
	active, err := tomlStringKey(c, "profile")
	if err != nil {
		return "", err
	}
	if active == "" {
		return top, nil
	}
	profiles, _ := c["profiles"].(map[string]any)
	profile, _ := profiles[active].(map[string]any)
	fromProfile, err := tomlStringKey(profile, "model_provider")
	if err != nil {
		return "", fmt.Errorf("profiles.%s: %w", active, err)
	}
	if fromProfile != "" {
		return fromProfile, nil
	}
	return top, nil
}

// tomlStringKey is the string at key in t, "" if absent, and an error if
// the value is not a string.
func tomlStringKey(t map[string]any, key string) (string, error) {
	v, ok := t[key]
	if !ok {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%s is a %T, want a string", key, v)
	}
	return s, nil
}

// writeCodexProfile writes the persona as developer_instructions into a
// new profile file in home and returns the profile's name and a function
// that removes the file.
// writeProfile is writeCodexProfile for the user codex runs as: with
// RunAs, the agent user's codex home must exist already (one the gateway
// created would be the gateway's, and codex could not write its sessions
// there), and the profile is shared with the agent's group.
func (c *Codex) writeProfile(home, persona string) (string, func(), error) {
	if c.opts.RunAs == nil {
		return writeCodexProfile(home, persona)
	}
	if _, err := os.Stat(home); err != nil {
		return "", nil, err
	}
	name, remove, err := writeCodexProfile(home, persona)
	if err != nil {
		return "", nil, err
	}
	if err := c.opts.share(filepath.Join(home, name+codexProfileExtension)); err != nil {
		remove()
		return "", nil, err
	}
	return name, remove, nil
}

func writeCodexProfile(home, persona string) (string, func(), error) {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return "", nil, err
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", nil, err
	}
	name := codexPersonaPrefix + hex.EncodeToString(b[:])
	path := filepath.Join(home, name+codexProfileExtension)
	content := "# Written by the agent gateway for one codex run; removed afterwards.\n" +
		"developer_instructions = " + codexTOMLString(persona) + "\n"
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", nil, err
	}
	remove := func() { os.Remove(path) }
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		remove()
		return "", nil, err
	}
	if err := f.Close(); err != nil {
		remove()
		return "", nil, err
	}
	return name, remove, nil
}

// codexTOMLString quotes s as a TOML basic string. Invalid UTF-8 becomes
// U+FFFD; control characters are escaped, as TOML requires.
func codexTOMLString(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if r < 0x20 || r == 0x7f {
				fmt.Fprintf(&b, `\u%04X`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// codexStderrDenials lists the tools codex refused for permission reasons
// that it reported only on stderr (a patch in a read-only sandbox).
func codexStderrDenials(stderr string) []string {
	var out []string
	for _, line := range strings.Split(stderr, "\n") {
		if strings.Contains(line, "patch rejected:") {
			out = append(out, "apply_patch")
		}
	}
	return out
}

// codexEnvValue is the value of name in env ("" when unset); later entries win.
func codexEnvValue(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == name {
			v = val
		}
	}
	return v
}

// binary resolves the CLI to run.
func (c *Codex) binary() (string, error) { return c.run.binary() }

// codexNotFound is the error of a codex binary that is not there.
func codexNotFound(bin string, err error) *Error { return runner{cli: codexCLI}.notFound(bin, err) }

// codexContextError turns the end of ctx into KindTimeout or KindCanceled,
// or returns nil if ctx has not ended.
func codexContextError(ctx context.Context, cause error) *Error {
	return cliContextError("codex", ctx, cause)
}
