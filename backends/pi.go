package backends

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/agentgateway/gateway/internal/proc"
)

func init() {
	Register("pi", func(o Options) Backend { return NewPi(o) })
}

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

// Scanner limits for pi's stdout: one JSON line per event. Every
// message_update line repeats the whole message so far, and a tool result
// can be large; a line over the maximum is skipped, not fatal.
const (
	piLineStart = 64 << 10
	piLineMax   = 16 << 20
)

// Pi runs one turn of Mario Zechner's pi coding agent
// (@mariozechner/pi-coding-agent) in print mode with JSON output, parsed by
// PiParser. It is safe for concurrent use: every Run starts its own process
// group.
//
// pi has no permission prompts: every tool it has enabled runs without
// asking. PERMISSION_MODE is therefore mapped onto the set of tools pi
// enables (--tools), see piToolArgs. pi has no limit on agent turns, so
// Request.MaxTurns is not applied.
type Pi struct {
	opts Options
}

var _ Backend = (*Pi)(nil)

// NewPi returns the pi adapter. opts.Binary is the CLI (default "pi" on
// PATH), opts.Env the environment it is filtered from, opts.KillGrace the
// time between SIGTERM and SIGKILL (default proc.DefaultGrace) and opts.Log
// gets diagnostics.
func NewPi(opts Options) *Pi {
	opts.Env = opts.userEnv(opts.Env)
	return &Pi{opts: opts}
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
	log := p.opts.Log.With().Str("backend", "pi").Logger()
	started := time.Now()

	bin, err := p.binary()
	if err != nil {
		return Result{}, err
	}
	if err := checkWorkDir(req.WorkDir); err != nil {
		return Result{}, err
	}

	promptFile := req.SystemPromptFile
	if promptFile == "" && req.SystemPrompt != "" {
		// The persona can be long: a file, never argv.
		f, err := writeTemp(req.SystemPrompt)
		if err != nil {
			return Result{}, &Error{Kind: KindExecution, Message: "write system prompt file", Err: err}
		}
		defer os.Remove(f)
		promptFile = f
	}

	pr, err := proc.Start(ctx, proc.Spec{
		Path:       bin,
		Args:       piArgs(req, promptFile),
		Dir:        req.WorkDir,
		Env:        FilterEnv(p.opts.Env, piEnvAllow, nil),
		Stdin:      strings.NewReader(req.Prompt),
		Grace:      p.opts.KillGrace,
		Credential: p.opts.credential(),
		Owner:      p.opts.Owner,
	})
	if err != nil {
		if ctxErr := piContextError(ctx, context.Cause(ctx)); ctxErr != nil {
			return Result{}, ctxErr
		}
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, exec.ErrNotFound) {
			return Result{}, piNotFound(bin, err)
		}
		return Result{}, &Error{Kind: KindCrashed, Message: "start pi", Err: err}
	}
	log = log.With().Int("pid", pr.Pid()).Logger()

	var parser PiParser
	out := readStream(pr, piLineStart, piLineMax, parser.Parse, emit, log)
	exit, waitErr, scanErr, stderr, garbage := out.Exit, out.WaitErr, out.ScanErr, out.Stderr, out.Garbage
	if garbage.n > 0 {
		log.Debug().Int("skipped", garbage.n).Msg("pi printed lines that are not JSON events")
	}
	if out.Skipped > 0 {
		log.Warn().Int("skipped", out.Skipped).Int("max_bytes", piLineMax).Msg("skipped pi output lines over the size limit")
	}

	res, resErr := parser.Result()
	if !errors.Is(resErr, errNoResult) {
		// The stream said how the turn ended; that outranks exit codes and
		// a late kill.
		res.Duration = time.Since(started)
		var e *Error
		if errors.As(resErr, &e) {
			withTail := *e
			withTail.Stderr = stderr
			emit(Event{Kind: EventResult, SessionID: res.SessionID, Result: &res, Err: &withTail})
			return res, &withTail
		}
		emit(Event{Kind: EventResult, SessionID: res.SessionID, Result: &res})
		return res, nil
	}

	if ctxErr := piContextError(ctx, waitErr); ctxErr != nil {
		ctxErr.ModelOutput = out.ModelOutput
		ctxErr.Stderr = stderr
		return res, ctxErr
	}
	if e := piFailure(stderr, garbage.text()); e != nil {
		e.Stderr = stderr
		return res, e
	}
	msg := fmt.Sprintf("pi ended without a result (%v)", exit)
	if waitErr != nil {
		msg += ": " + waitErr.Error()
	}
	if last := lastLine(stderr, 300); last != "" {
		msg += "; stderr: " + last
	}
	if g := garbage.text(); g != "" {
		msg += "; last non-JSON output: " + g
	}
	if out.Skipped > 0 {
		msg += fmt.Sprintf("; skipped %d output lines over %d bytes", out.Skipped, piLineMax)
	}
	if scanErr != nil {
		scanErr = fmt.Errorf("read pi output: %w", scanErr)
	}
	return res, &Error{Kind: KindCrashed, Message: msg, Stderr: stderr, Err: scanErr}
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

// binary resolves the CLI to run.
func (p *Pi) binary() (string, error) {
	bin := p.opts.Binary
	if bin == "" {
		bin = "pi"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return "", piNotFound(bin, err)
	}
	return path, nil
}

func piNotFound(bin string, err error) *Error {
	return &Error{
		Kind:    KindNotFound,
		Message: fmt.Sprintf("pi CLI %q not found: install with npm i -g @mariozechner/pi-coding-agent or set AGENT_CLI_PATH", bin),
		Err:     err,
	}
}

// piContextError turns the end of ctx into KindTimeout or KindCanceled, or
// returns nil if ctx has not ended. cause is what stopped the process.
func piContextError(ctx context.Context, cause error) *Error {
	if ctx.Err() == nil {
		return nil
	}
	if cause == nil {
		cause = context.Cause(ctx)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &Error{Kind: KindTimeout, Message: "pi did not finish in time and was stopped", Err: cause}
	}
	return &Error{Kind: KindCanceled, Message: "pi was stopped", Err: cause}
}
