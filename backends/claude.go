package backends

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"syscall"

	"github.com/agentgateway/gateway/internal/proc"
)

func init() {
	Register("claude", func(o Options) Backend { return NewClaude(o) })
}

// claudeCLI is what the runner knows of claude.
var claudeCLI = cliSpec{name: "claude", envAllow: claudeEnvAllow}

// claudeEnvAllow names the variables claude may see beyond baseEnv: its
// credentials and endpoint (ANTHROPIC_*), its own switches (CLAUDE_*,
// DISABLE_*, IS_SANDBOX) and tuning knobs. Cloud-provider credentials
// (AWS_*, GOOGLE_*) are not passed: the gateway's environment may hold
// unrelated ones. NODE_OPTIONS is not passed either: it can load code.
var claudeEnvAllow = []string{
	"ANTHROPIC_*", "CLAUDE_*", "DISABLE_*", "IS_SANDBOX",
	"API_TIMEOUT_MS", "MAX_THINKING_TOKENS", "MAX_MCP_OUTPUT_TOKENS",
	"MCP_TIMEOUT", "MCP_TOOL_TIMEOUT",
	"BASH_DEFAULT_TIMEOUT_MS", "BASH_MAX_TIMEOUT_MS", "BASH_MAX_OUTPUT_LENGTH",
	"USE_BUILTIN_RIPGREP",
}

// Scanner limits for claude's stdout, the runner's: one JSON line per
// event; a tool result can be large, and a line over the maximum is
// skipped.
const (
	claudeLineStart = streamLineStart
	claudeLineMax   = streamLineMax
)

// Claude runs one turn of Anthropic's claude CLI (Claude Code) in print mode
// with stream-json output, parsed by ClaudeParser. It is safe for
// concurrent use: every Run starts its own process group.
type Claude struct {
	opts Options
	run  runner
	pool *warmPool[*claudeProc]
}

var _ Backend = (*Claude)(nil)

// NewClaude returns the claude adapter. opts.Binary is the CLI (default
// "claude" on PATH), opts.Env the environment it is filtered from,
// opts.KillGrace the time between SIGTERM and SIGKILL (default
// proc.DefaultGrace) and opts.Log gets diagnostics.
func NewClaude(opts Options) *Claude {
	c := &Claude{opts: opts}
	c.run = newRunner(claudeCLI, &c.opts)
	c.pool = newWarmPool[*claudeProc]("claude", opts.Warm, opts.Log)
	return c
}

// Name implements Backend.
func (c *Claude) Name() string { return "claude" }

// Run implements Backend. It spawns
//
//	claude -p --output-format stream-json --verbose --include-partial-messages
//	  [--append-system-prompt-file F] [--allowedTools a,b] [--permission-mode M]
//	  [--max-turns N] [--resume ID] [--model M]
//
// with the prompt on stdin, cwd req.WorkDir and a filtered environment. A
// ctx deadline kills the process group and returns KindTimeout, or the
// model API failure claude was still retrying (KindUnreachable, a status
// kind); another cancellation returns KindCanceled. A refused key or an
// unreachable model API (see ClaudeParser.Fatal) stops claude at once.
//
// A turn that may ask for approvals (req.Approve) or whose process may be
// kept (req.Key, with Options.Warm.KeepAlive) runs on an interactive
// process instead: see runInteractive.
func (c *Claude) Run(ctx context.Context, req Request, emit func(Event)) (Result, error) {
	if emit == nil {
		emit = func(Event) {}
	}
	if c.interactive(req) {
		return c.runInteractive(ctx, req, emit)
	}
	bin, err := c.binary()
	if err != nil {
		return Result{}, err
	}
	if err := checkWorkDir(req.WorkDir); err != nil {
		return Result{}, err
	}

	promptFile := req.SystemPromptFile
	if promptFile == "" && req.SystemPrompt != "" {
		// The persona can be long: a file, never argv.
		f, remove, err := c.run.tempFile("claude-system-*.md", req.SystemPrompt)
		if err != nil {
			return Result{}, err
		}
		defer remove()
		promptFile = f
	}

	// runCtx also ends when the stream shows the turn cannot succeed (a
	// refused key, an unreachable model API): claude itself would retry
	// for minutes.
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var parser ClaudeParser
	parse := func(line []byte) ([]Event, error) {
		events, err := parser.Parse(line)
		if parser.Fatal() != nil {
			stop()
		}
		return events, err
	}
	out, err := c.run.runOnce(runCtx, runSpec{
		bin:   bin,
		args:  claudeArgs(req, promptFile),
		dir:   req.WorkDir,
		env:   c.run.env(nil, nil),
		stdin: strings.NewReader(req.Prompt),
		// On SIGINT claude stops the turn and prints its result, with the
		// session's cost so far (testdata/claude/interrupted.jsonl); on
		// SIGTERM it prints nothing.
		interrupt: syscall.SIGINT,
	}, parse, emit)
	if err != nil {
		return Result{}, err
	}

	res, resErr := parser.Result()
	if fatal := parser.Fatal(); fatal != nil && ctx.Err() == nil {
		// Stopped for it: the aborted result claude prints on the way out
		// (it is interrupted) says nothing the fatal error does not.
		c.opts.Log.Debug().Str("backend", "claude").Str("kind", string(fatal.Kind)).Msg("stopped claude: its retries could not succeed")
		withTail := *fatal
		withTail.Stderr = out.Stderr
		withTail.ModelOutput = out.ModelOutput || parser.Answered()
		return res, &withTail
	}
	ctxErr := contextError(ctx, out.WaitErr)
	if ctxErr != nil && resErr != nil {
		// Interrupted (stopped, timed out): what stopped the turn is the
		// context, whatever claude's aborted result says; the result
		// keeps the cost.
		if retrying := parser.Retrying(); retrying != nil && ctxErr.Kind == KindTimeout {
			// Time ran out while claude was still retrying the model API:
			// say what failed, not that the task was too long.
			retrying.Message = "claude did not finish in time: " + retrying.Message
			retrying.Err = ctxErr.Err
			ctxErr = retrying
		}
		ctxErr.ModelOutput = out.ModelOutput || parser.Answered()
		ctxErr.Stderr = out.Stderr
		return res, ctxErr
	}
	if !errors.Is(resErr, errNoResult) {
		// The stream said how the turn ended; that outranks exit codes, a
		// late kill and anything after the result line.
		if e := streamError(resErr, out.Stderr); e != nil {
			return res, e
		}
		return res, nil
	}

	return res, endedWithoutResult(out.Exit, out.WaitErr, out.ScanErr, out.Stderr, &out.Garbage, out.Skipped)
}

// endedWithoutResult explains a claude that exited before its result
// line: root refusing bypassPermissions, or a crash with what it left on
// stderr and stdout.
func endedWithoutResult(exit proc.Exit, waitErr, scanErr error, stderr string, garbage *garbageLog, skipped int) *Error {
	if strings.Contains(stderr, claudeRootRefusal) || strings.Contains(garbage.text(), claudeRootRefusal) {
		return &Error{Kind: KindPermission, Message: rootRefusalMessage, Stderr: stderr}
	}
	out := streamOutput{Exit: exit, WaitErr: waitErr, ScanErr: scanErr, Stderr: stderr, Garbage: *garbage, Skipped: skipped}
	return runner{cli: claudeCLI}.ended(out, "ended without a result", "")
}

// claudeArgs builds the command line. The prompt is not on it: it goes to
// stdin.
func claudeArgs(req Request, systemPromptFile string) []string {
	args := []string{"-p", "--output-format", "stream-json", "--verbose", "--include-partial-messages"}
	if systemPromptFile != "" {
		args = append(args, "--append-system-prompt-file", systemPromptFile)
	}
	if len(req.AllowedTools) > 0 {
		// --allowedTools is variadic ("comma or space-separated"); one
		// comma-joined argument cannot swallow the flags after it.
		args = append(args, "--allowedTools", strings.Join(req.AllowedTools, ","))
	}
	if req.PermissionMode != "" {
		args = append(args, "--permission-mode", req.PermissionMode)
	}
	if req.MaxTurns > 0 {
		args = append(args, "--max-turns", strconv.Itoa(req.MaxTurns))
	}
	if req.SessionID != "" {
		args = append(args, "--resume", req.SessionID)
	}
	if req.Model != "" {
		args = append(args, "--model", req.Model)
	}
	for _, dir := range req.AddDirs {
		args = append(args, "--add-dir", dir)
	}
	if req.Isolated {
		args = append(args, "--strict-mcp-config", "--setting-sources", "project,local")
	}
	return args
}

// Isolates reports that claude can run without the user's MCP servers and
// settings (Request.Isolated).
func (c *Claude) Isolates() bool { return true }

// binary resolves the CLI to run.
func (c *Claude) binary() (string, error) { return c.run.binary() }

// notFound is the error of a claude binary that is not there.
func notFound(bin string, err error) *Error { return runner{cli: claudeCLI}.notFound(bin, err) }

// contextError turns the end of ctx into KindTimeout or KindCanceled, or
// returns nil if ctx has not ended. cause is what stopped the process.
func contextError(ctx context.Context, cause error) *Error {
	return cliContextError("claude", ctx, cause)
}

// writeTemp writes claude's system prompt into a temporary file; the
// caller shares it with the agent user and removes it.
func writeTemp(text string) (string, error) { return writeTempFile("claude-system-*.md", text) }
