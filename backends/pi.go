package backends

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"
)

func init() {
	Register("pi", func(o Options) Backend { return NewPi(o) })
}

// piCLI is what the runner knows of pi. pi prints notices that are not
// JSON on stdout.
var piCLI = cliSpec{name: "pi", envAllow: piEnvAllow, quietGarbage: true}

// piEnvAllow names the variables pi may see beyond baseEnv: its own
// settings (PI_*) and the credentials and endpoints of the providers it
// documents. Cloud credentials for Bedrock (AWS_*) are not passed, as for
// claude: the gateway's environment may hold unrelated ones. NODE_OPTIONS
// is not passed either: it can load code.
var piEnvAllow = []string{
	"PI_*", "ANTHROPIC_*", "OPENAI_*", "AZURE_OPENAI_*", "GEMINI_*", "GOOGLE_*",
	"DEEPSEEK_API_KEY", "GROQ_API_KEY", "CEREBRAS_API_KEY", "XAI_API_KEY",
	"FIREWORKS_API_KEY", "OPENROUTER_API_KEY", "AI_GATEWAY_API_KEY", "ZAI_API_KEY",
	"MISTRAL_API_KEY", "MINIMAX_API_KEY", "MOONSHOT_API_KEY", "OPENCODE_API_KEY",
	"KIMI_API_KEY", "CLOUDFLARE_API_KEY", "CLOUDFLARE_ACCOUNT_ID", "CLOUDFLARE_GATEWAY_ID",
	"XIAOMI_*",
}

// piLineMax bounds a line of pi's stdout: every message_update line
// repeats the whole message so far, and a tool result can be large; a
// line over it is skipped, not fatal.
const piLineMax = streamLineMax

// Pi runs one turn of Mario Zechner's pi coding agent
// (@mariozechner/pi-coding-agent) in print mode with JSON output, parsed by
// PiParser. It is safe for concurrent use: every Run starts its own process
// group.
//
// pi has no permission prompts: every tool it has enabled runs without
// asking. A turn that may ask (Request.Approve) therefore runs on an RPC
// process with the gateway's approval extension (pi_approve.go); in print
// mode PERMISSION_MODE is mapped onto the set of tools pi enables
// (--tools), see piToolArgs. pi has no limit on agent turns, so
// Request.MaxTurns is not applied.
type Pi struct {
	opts Options
	run  runner

	// rpc runs turns on warm `pi --mode rpc` processes (pi_rpc.go).
	rpc *piRPC
}

var _ Backend = (*Pi)(nil)

// NewPi returns the pi adapter. opts.Binary is the CLI (default "pi" on
// PATH), opts.Env the environment it is filtered from, opts.KillGrace the
// time between SIGTERM and SIGKILL (default proc.DefaultGrace) and opts.Log
// gets diagnostics.
func NewPi(opts Options) *Pi {
	p := &Pi{opts: opts}
	p.run = newRunner(piCLI, &p.opts)
	p.rpc = newPiRPC(opts)
	return p
}

// Name implements Backend.
func (p *Pi) Name() string { return "pi" }

// Run implements Backend. It spawns
//
//	pi -p --mode json --offline [--append-system-prompt F]
//	  [--tools a,b | --no-tools] [--session ID] [--model M]
//
// with the prompt on stdin, cwd req.WorkDir and a filtered environment.
// pi exits 0 when the model API fails, so the outcome is read from the
// stream; when pi stops before its agent events (an unknown session, no
// API key) its stderr says why. A ctx deadline kills the process group and
// returns KindTimeout; another cancellation returns KindCanceled.
func (p *Pi) Run(ctx context.Context, req Request, emit func(Event)) (Result, error) {
	if emit == nil {
		emit = func(Event) {}
	}
	if p.rpc.wants(req) {
		return p.rpc.Run(ctx, req, emit)
	}
	started := time.Now()

	bin, err := p.run.binary()
	if err != nil {
		return Result{}, err
	}
	if err := checkWorkDir(req.WorkDir); err != nil {
		return Result{}, err
	}

	promptFile := req.SystemPromptFile
	if promptFile == "" && req.SystemPrompt != "" {
		// The persona can be long: a file, never argv.
		f, remove, err := p.run.tempFile("pi-system-*.md", req.SystemPrompt)
		if err != nil {
			return Result{}, err
		}
		defer remove()
		promptFile = f
	}

	var parser PiParser
	out, err := p.run.runOnce(ctx, runSpec{
		bin:   bin,
		args:  piArgs(req, promptFile),
		dir:   req.WorkDir,
		env:   p.run.env(nil, nil),
		stdin: strings.NewReader(req.Prompt),
	}, parser.Parse, emit)
	if err != nil {
		return Result{}, err
	}

	res, resErr := parser.Result()
	if !errors.Is(resErr, errNoResult) {
		// The stream said how the turn ended; that outranks exit codes and
		// a late kill.
		res.Duration = time.Since(started)
		if e := streamError(resErr, out.Stderr); e != nil {
			emit(Event{Kind: EventResult, SessionID: res.SessionID, Result: &res, Err: e})
			return res, e
		}
		emit(Event{Kind: EventResult, SessionID: res.SessionID, Result: &res})
		return res, nil
	}
	if e := p.run.stopped(ctx, out); e != nil {
		return res, e
	}
	if e := piFailure(out.Stderr, out.Garbage.text()); e != nil {
		e.Stderr = out.Stderr
		return res, e
	}
	return res, p.run.ended(out, "ended without a result", "")
}

// piArgs builds the command line. The prompt is not on it: it goes to
// stdin. --offline stops pi's startup network calls (update checks,
// install telemetry), which a daemon running pi for every message does not
// want; model calls are not affected.
func piArgs(req Request, systemPromptFile string) []string {
	args := []string{"-p", "--mode", "json", "--offline"}
	if systemPromptFile != "" {
		// pi reads the file when the argument names one, and appends it to
		// its own system prompt (which describes its tools). pi builds the
		// system prompt afresh on every run, resumed sessions included.
		args = append(args, "--append-system-prompt", systemPromptFile)
	}
	args = append(args, piToolArgs(req.PermissionMode, req.AllowedTools)...)
	if req.SessionID != "" {
		args = append(args, "--session", req.SessionID)
	}
	if req.Model != "" {
		// "provider/id" selects the provider too.
		args = append(args, "--model", req.Model)
	}
	return args
}

// piReadOnlyTools are pi's built-in tools that cannot change anything.
var piReadOnlyTools = []string{"read", "grep", "find", "ls"}

// piToolNames maps claude's tool names, which ALLOWED_TOOLS uses, to pi's.
var piToolNames = map[string]string{
	"Read": "read", "Write": "write", "Edit": "edit", "MultiEdit": "edit",
	"Bash": "bash", "Grep": "grep", "Glob": "find", "LS": "ls",
}

// piToolArgs maps PERMISSION_MODE and ALLOWED_TOOLS onto the tools pi
// enables, since pi runs every enabled tool without asking:
//
//   - bypassPermissions: no flag, pi's own default set (read, bash, edit,
//     write, and any extension tools).
//   - acceptEdits: the read-only tools, edit and write, and ALLOWED_TOOLS.
//   - default (and ""): the read-only tools and ALLOWED_TOOLS.
//   - plan: the read-only tools only.
//
// ALLOWED_TOOLS names are mapped from claude's (Read, Write, Bash, Glob...)
// to pi's; other names pass through unchanged (pi ignores names it does
// not know). A claude pattern with arguments such as Bash(git:*) cannot be
// expressed in pi and is left out, which denies the tool.
func piToolArgs(mode string, allowed []string) []string {
	var tools []string
	add := func(names ...string) {
		for _, n := range names {
			if n != "" && !slices.Contains(tools, n) {
				tools = append(tools, n)
			}
		}
	}
	switch mode {
	case "bypassPermissions":
		return nil
	case "plan":
		add(piReadOnlyTools...)
	case "acceptEdits":
		add(piReadOnlyTools...)
		add("edit", "write")
		add(piMapTools(allowed)...)
	default:
		add(piReadOnlyTools...)
		add(piMapTools(allowed)...)
	}
	if len(tools) == 0 {
		return []string{"--no-tools"}
	}
	return []string{"--tools", strings.Join(tools, ",")}
}

// piMapTools maps ALLOWED_TOOLS names to pi's.
func piMapTools(allowed []string) []string {
	out := make([]string, 0, len(allowed))
	for _, name := range allowed {
		name = strings.TrimSpace(name)
		if name == "" || strings.ContainsAny(name, "(),") {
			continue
		}
		if pi, ok := piToolNames[name]; ok {
			name = pi
		}
		out = append(out, name)
	}
	return out
}
