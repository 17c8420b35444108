package backends

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"unicode"
	"unicode/utf8"
)

func init() {
	Register("opencode", func(o Options) Backend { return NewOpencode(o) })
}

// opencodeCLI is what the runner knows of opencode.
var opencodeCLI = cliSpec{name: "opencode", envAllow: opencodeEnvAllow}

// opencodeEnvAllow names the variables opencode may see beyond baseEnv: its
// own settings (OPENCODE_*) and the keys of the providers it is most often
// configured with, the same families the gateway's config hands to it.
// NODE_OPTIONS and npm settings are not passed.
var opencodeEnvAllow = []string{"OPENCODE_*", "ANTHROPIC_*", "OPENAI_*", "GEMINI_*", "GOOGLE_*"}

// The environment variables opencode reads that the adapter sets.
const (
	// opencodeConfigContentEnv holds config JSON merged over the config
	// files; the adapter adds the persona file to its "instructions".
	opencodeConfigContentEnv = "OPENCODE_CONFIG_CONTENT"
	// opencodePermissionEnv holds permission rules merged over every
	// other config; the adapter maps PERMISSION_MODE onto it.
	opencodePermissionEnv = "OPENCODE_PERMISSION"
	// opencodeAutoupdateEnv stops opencode from updating itself mid-run
	// (unless the operator set it otherwise).
	opencodeAutoupdateEnv = "OPENCODE_DISABLE_AUTOUPDATE"
)

// Opencode runs one turn of the opencode CLI (`opencode run --format json`),
// parsed by OpencodeParser. It is safe for concurrent use: every Run starts
// its own process group.
//
// The persona goes in as an instructions file (opencode appends it to its
// own system prompt and reads it again on every call, resumed sessions
// included); permissions go in as OPENCODE_PERMISSION rules; the prompt is
// on stdin.
type Opencode struct {
	opts Options
	run  runner
	// acp runs the turns that need a kept process or approvals (opencode acp).
	acp *ACP
}

var _ Backend = (*Opencode)(nil)

// NewOpencode returns the opencode adapter. opts.Binary is the CLI (default
// "opencode" on PATH), opts.Env the environment it is filtered from,
// opts.KillGrace the time between SIGTERM and SIGKILL (default
// proc.DefaultGrace) and opts.Log gets diagnostics.
func NewOpencode(opts Options) *Opencode {
	o := &Opencode{opts: opts}
	o.run = newRunner(opencodeCLI, &o.opts)
	o.acp = acpOpencode(o)
	return o
}

// Close stops the kept ACP processes.
func (o *Opencode) Close() error { return o.acp.Close() }

// Warm describes the kept ACP processes.
func (o *Opencode) Warm() WarmStats { return o.acp.Warm() }

// Name implements Backend.
func (o *Opencode) Name() string { return "opencode" }

// Run implements Backend. It spawns
//
//	opencode run --format json --pure (--title T | --session ID) [--model M]
//	  [--agent plan] [--auto]
//
// with the prompt on stdin, cwd req.WorkDir and a filtered environment in
// which OPENCODE_CONFIG_CONTENT carries the persona file (instructions) and
// max turns (agent steps), and OPENCODE_PERMISSION the permission mode. A
// ctx deadline kills the process group and returns KindTimeout; another
// cancellation returns KindCanceled.
func (o *Opencode) Run(ctx context.Context, req Request, emit func(Event)) (Result, error) {
	if useACP(o.opts.Warm, req) {
		return o.acp.Run(ctx, req, emit)
	}
	if emit == nil {
		emit = func(Event) {}
	}
	bin, err := o.run.binary()
	if err != nil {
		return Result{}, err
	}
	if err := checkWorkDir(req.WorkDir); err != nil {
		return Result{}, err
	}

	promptFile := req.SystemPromptFile
	if promptFile == "" && req.SystemPrompt != "" {
		f, remove, err := o.run.tempFile("opencode-system-*.md", req.SystemPrompt)
		if err != nil {
			return Result{}, err
		}
		defer remove()
		promptFile = f
	}

	env, err := opencodeEnv(o.run.env(nil, nil), req, promptFile)
	if err != nil {
		return Result{}, err
	}
	var parser OpencodeParser
	out, err := o.run.runOnce(ctx, runSpec{
		bin:   bin,
		args:  opencodeArgs(req),
		dir:   req.WorkDir,
		env:   env,
		stdin: strings.NewReader(req.Prompt),
	}, parser.Parse, emit)
	if err != nil {
		return Result{}, err
	}

	// opencode prints no final line, so a stream cut short by the kill can
	// look finished: when the context ended first, that decides.
	if out.WaitErr != nil {
		if e := o.run.stopped(ctx, out); e != nil {
			return Result{SessionID: parser.SessionID()}, e
		}
	}
	for _, ev := range parser.Finish() {
		emit(ev)
	}
	res, resErr := parser.Result()
	if !errors.Is(resErr, errNoResult) {
		if e := streamError(resErr, out.Stderr); e != nil {
			return res, e
		}
		return res, nil
	}
	if e := classifyOpencodeStderr(out.Stderr, req.SessionID != ""); e != nil {
		e.Stderr = out.Stderr
		return res, e
	}
	return res, o.run.ended(out, "ended without a result", opencodeErrorLine(out.Stderr))
}

// opencodeArgs builds the command line. The prompt is not on it: it goes
// to stdin. --title on a new session keeps opencode from asking the model
// for a title (a side request); a resumed session asks for none and keeps
// its title. --pure keeps external plugins out of a headless run.
func opencodeArgs(req Request) []string {
	args := []string{"run", "--format", "json", "--pure"}
	if req.SessionID != "" {
		args = append(args, "--session", req.SessionID)
	} else {
		args = append(args, "--title", opencodeTitle(req.Prompt))
	}
	if req.Model != "" {
		args = append(args, "--model", req.Model)
	}
	perm := opencodePermissions(req.PermissionMode, req.AllowedTools)
	if perm.agent != "" {
		args = append(args, "--agent", perm.agent)
	}
	if perm.auto {
		args = append(args, "--auto")
	}
	return args
}

// opencodeTitle is the session title: the prompt's first line, cut to 60
// characters. It is on argv, so it must stay short.
func opencodeTitle(prompt string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(prompt), "\n")
	line = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, strings.TrimSpace(line))
	const max = 60
	if utf8.RuneCountInString(line) > max {
		line = string([]rune(line)[:max]) + "…"
	}
	if line == "" || strings.HasPrefix(line, "-") {
		line = "gateway " + line
	}
	return strings.TrimSpace(line)
}

// opencodePerm is how a permission mode maps onto opencode.
type opencodePerm struct {
	// rules go into OPENCODE_PERMISSION (and the agent's own permission).
	rules map[string]any
	// agent is the primary agent to run, or "" for opencode's default.
	agent string
	// auto passes --auto: approve what is not explicitly denied.
	auto bool
}

// opencodePermissions maps PERMISSION_MODE and ALLOWED_TOOLS onto
// opencode. `opencode run` rejects every "ask" by itself, so "ask" means
// "denied unless allowed".
//
//	default            edit, bash, webfetch: ask (so: denied)
//	acceptEdits        edit: allow; bash, webfetch: ask
//	plan               the plan agent; edit, bash: deny
//	bypassPermissions  --auto: every ask approved; explicit denies stay
//
// An allowed tool ("Write", "Edit", "Bash", "Bash(git *)", "WebFetch",
// "Read", …) becomes an allow rule for opencode's permission of that name
// (Write and Edit are opencode's "edit"); plan mode keeps edit and bash
// denied.
func opencodePermissions(mode string, allowed []string) opencodePerm {
	var p opencodePerm
	switch mode {
	case "bypassPermissions":
		return opencodePerm{auto: true}
	case "plan":
		p = opencodePerm{agent: "plan", rules: map[string]any{"edit": "deny", "bash": "deny", "webfetch": "ask"}}
	case "acceptEdits":
		p = opencodePerm{rules: map[string]any{"edit": "allow", "bash": "ask", "webfetch": "ask"}}
	default:
		p = opencodePerm{rules: map[string]any{"edit": "ask", "bash": "ask", "webfetch": "ask"}}
	}
	for _, tool := range allowed {
		name, pattern := opencodeToolPermission(tool)
		if name == "" || (p.agent == "plan" && (name == "edit" || name == "bash")) {
			continue
		}
		if pattern == "" {
			p.rules[name] = "allow"
			continue
		}
		rules, ok := p.rules[name].(map[string]any)
		if !ok {
			rules = map[string]any{}
			if s, isString := p.rules[name].(string); isString {
				rules["*"] = s
			}
			p.rules[name] = rules
		}
		rules[pattern] = "allow"
	}
	return p
}

// opencodeToolPermission maps a claude-style tool name, with an optional
// pattern in parentheses, to opencode's permission name and pattern.
func opencodeToolPermission(tool string) (name, pattern string) {
	tool = strings.TrimSpace(tool)
	if open := strings.IndexByte(tool, '('); open > 0 && strings.HasSuffix(tool, ")") {
		pattern = strings.TrimSpace(tool[open+1 : len(tool)-1])
		tool = tool[:open]
	}
	switch strings.ToLower(tool) {
	case "":
		return "", ""
	case "write", "edit", "multiedit", "notebookedit", "patch":
		return "edit", pattern
	default:
		return strings.ToLower(tool), pattern
	}
}

// opencodeEnv adds the adapter's settings to the filtered environment:
// the persona file and max turns merged into OPENCODE_CONFIG_CONTENT, the
// permission rules merged over OPENCODE_PERMISSION, and autoupdate off
// unless the operator chose otherwise.
func opencodeEnv(env []string, req Request, promptFile string) ([]string, error) {
	get := func(name string) (string, int) {
		for i, kv := range env {
			if k, v, _ := strings.Cut(kv, "="); k == name {
				return v, i
			}
		}
		return "", -1
	}
	set := func(name, value string) {
		if _, i := get(name); i >= 0 {
			env[i] = name + "=" + value
			return
		}
		env = append(env, name+"="+value)
	}
	perm := opencodePermissions(req.PermissionMode, req.AllowedTools)

	userConfig, _ := get(opencodeConfigContentEnv)
	config, err := opencodeJSONObject(userConfig, opencodeConfigContentEnv)
	if err != nil {
		return nil, err
	}
	changed := false
	if promptFile != "" {
		instructions, _ := config["instructions"].([]any)
		config["instructions"] = append(instructions, promptFile)
		changed = true
	}
	agentName := perm.agent
	if agentName == "" {
		agentName = "build"
	}
	if req.MaxTurns > 0 || (perm.agent != "" && perm.rules != nil) {
		agents, _ := config["agent"].(map[string]any)
		if agents == nil {
			agents = map[string]any{}
		}
		agent, _ := agents[agentName].(map[string]any)
		if agent == nil {
			agent = map[string]any{}
		}
		if req.MaxTurns > 0 {
			agent["steps"] = req.MaxTurns
		}
		if perm.agent != "" && perm.rules != nil {
			// A built-in agent's own rules come after the global ones.
			agentRules, _ := agent["permission"].(map[string]any)
			agent["permission"] = opencodeMerge(agentRules, perm.rules)
		}
		agents[agentName] = agent
		config["agent"] = agents
		changed = true
	}
	if changed {
		b, err := json.Marshal(config)
		if err != nil {
			return nil, &Error{Kind: KindExecution, Message: "encode " + opencodeConfigContentEnv, Err: err}
		}
		set(opencodeConfigContentEnv, string(b))
	}

	if perm.rules != nil {
		userRules, _ := get(opencodePermissionEnv)
		rules, err := opencodeJSONObject(userRules, opencodePermissionEnv)
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(opencodeMerge(rules, perm.rules))
		if err != nil {
			return nil, &Error{Kind: KindExecution, Message: "encode " + opencodePermissionEnv, Err: err}
		}
		set(opencodePermissionEnv, string(b))
	}
	if _, i := get(opencodeAutoupdateEnv); i < 0 {
		set(opencodeAutoupdateEnv, "1")
	}
	return env, nil
}

// opencodeJSONObject decodes an operator's JSON setting; empty is {}.
func opencodeJSONObject(value, name string) (map[string]any, error) {
	obj := map[string]any{}
	if strings.TrimSpace(value) == "" {
		return obj, nil
	}
	d := json.NewDecoder(bytes.NewReader([]byte(value)))
	d.UseNumber()
	if err := d.Decode(&obj); err != nil || obj == nil {
		if err == nil {
			err = errors.New("null")
		}
		return nil, &Error{Kind: KindExecution, Message: name + " must be a JSON object for the gateway to add its settings to it", Err: err}
	}
	return obj, nil
}

// opencodeMerge returns base with over's keys set on it (over wins).
func opencodeMerge(base, over map[string]any) map[string]any {
	out := make(map[string]any, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}

// binary resolves the CLI to run.
func (o *Opencode) binary() (string, error) { return o.run.binary() }

// opencodeWriteTemp writes the persona into a temporary file; the caller
// shares it with the agent user and removes it.
func opencodeWriteTemp(text string) (string, error) {
	return writeTempFile("opencode-system-*.md", text)
}
