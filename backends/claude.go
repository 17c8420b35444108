package backends

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"github.com/agentgateway/gateway/internal/proc"
)

func init() {
	Register("claude", func(o Options) Backend { return NewClaude(o) })
}

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

// Scanner limits for claude's stdout: one JSON line per event; a tool result
// can be large, and a line over the maximum ends the read with an error.
const (
	claudeLineStart = 64 << 10
	claudeLineMax   = 16 << 20
)

// Claude runs one turn of Anthropic's claude CLI (Claude Code) in print mode
// with stream-json output, parsed by ClaudeParser. It is safe for
// concurrent use: every Run starts its own process group.
type Claude struct {
	opts Options
	pool *warmPool[*claudeProc]
}

var _ Backend = (*Claude)(nil)

// NewClaude returns the claude adapter. opts.Binary is the CLI (default
// "claude" on PATH), opts.Env the environment it is filtered from,
// opts.KillGrace the time between SIGTERM and SIGKILL (default
// proc.DefaultGrace) and opts.Log gets diagnostics.
func NewClaude(opts Options) *Claude {
	opts.Env = opts.userEnv(opts.Env)
	c := &Claude{opts: opts}
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
	log := c.opts.Log.With().Str("backend", "claude").Logger()

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
		f, err := writeTemp(req.SystemPrompt)
		if err != nil {
			return Result{}, &Error{Kind: KindExecution, Message: "write system prompt file", Err: err}
		}
		defer os.Remove(f)
		if err := c.opts.share(f); err != nil {
			return Result{}, &Error{Kind: KindExecution, Message: "write system prompt file", Err: err}
		}
		promptFile = f
	}

	// runCtx also ends when the stream shows the turn cannot succeed (a
	// refused key, an unreachable model API): claude itself would retry
	// for minutes.
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	p, err := proc.Start(runCtx, proc.Spec{
		Path:  bin,
		Args:  claudeArgs(req, promptFile),
		Dir:   req.WorkDir,
		Env:   FilterEnv(c.opts.Env, claudeEnvAllow, nil),
		Stdin: strings.NewReader(req.Prompt),
		Grace: c.opts.KillGrace,
		// On SIGINT claude stops the turn and prints its result, with the
		// session's cost so far (testdata/claude/interrupted.jsonl); on
		// SIGTERM it prints nothing.
		Interrupt:  syscall.SIGINT,
		Credential: c.opts.credential(),
		Owner:      c.opts.Owner,
	})
	if err != nil {
		if ctxErr := contextError(ctx, context.Cause(ctx)); ctxErr != nil {
			return Result{}, ctxErr
		}
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, exec.ErrNotFound) {
			return Result{}, notFound(bin, err)
		}
		return Result{}, &Error{Kind: KindCrashed, Message: "start claude", Err: err}
	}
	log = log.With().Int("pid", p.Pid()).Logger()

	var parser ClaudeParser
	parse := func(line []byte) ([]Event, error) {
		events, err := parser.Parse(line)
		if parser.Fatal() != nil {
			stop()
		}
		return events, err
	}
	out := readStream(p, claudeLineStart, claudeLineMax, parse, emit, log)
	exit, waitErr, scanErr, stderr, garbage := out.Exit, out.WaitErr, out.ScanErr, out.Stderr, out.Garbage
	if garbage.n > 0 {
		log.Warn().Int("skipped", garbage.n).Msg("claude printed lines that are not JSON events")
	}
	if out.Skipped > 0 {
		log.Warn().Int("skipped", out.Skipped).Int("max_bytes", claudeLineMax).Msg("skipped claude output lines over the size limit")
	}

	res, resErr := parser.Result()
	if fatal := parser.Fatal(); fatal != nil && ctx.Err() == nil {
		// Stopped for it: the aborted result claude prints on the way out
		// (it is interrupted) says nothing the fatal error does not.
		log.Debug().Str("kind", string(fatal.Kind)).Msg("stopped claude: its retries could not succeed")
		withTail := *fatal
		withTail.Stderr = stderr
		withTail.ModelOutput = out.ModelOutput || parser.Answered()
		return res, &withTail
	}
	ctxErr := contextError(ctx, waitErr)
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
		ctxErr.Stderr = stderr
		return res, ctxErr
	}
	if !errors.Is(resErr, errNoResult) {
		// The stream said how the turn ended; that outranks exit codes, a
		// late kill and anything after the result line.
		var e *Error
		if errors.As(resErr, &e) {
			// A copy: the one in the result event is already out there.
			withTail := *e
			withTail.Stderr = stderr
			return res, &withTail
		}
		return res, nil
	}

	return res, endedWithoutResult(exit, waitErr, scanErr, stderr, &garbage, out.Skipped)
}

// endedWithoutResult explains a claude that exited before its result
// line: root refusing bypassPermissions, or a crash with what it left on
// stderr and stdout.
func endedWithoutResult(exit proc.Exit, waitErr, scanErr error, stderr string, garbage *garbageLog, skipped int) *Error {
	if strings.Contains(stderr, claudeRootRefusal) || strings.Contains(garbage.text(), claudeRootRefusal) {
		return &Error{Kind: KindPermission, Message: rootRefusalMessage, Stderr: stderr}
	}
	msg := fmt.Sprintf("claude ended without a result (%v)", exit)
	if waitErr != nil {
		msg += ": " + waitErr.Error()
	}
	if last := lastLine(stderr, 300); last != "" {
		msg += "; stderr: " + last
	}
	if g := garbage.text(); g != "" {
		msg += "; last non-JSON output: " + g
	}
	if skipped > 0 {
		msg += fmt.Sprintf("; skipped %d output lines over %d bytes", skipped, claudeLineMax)
	}
	if scanErr != nil {
		scanErr = fmt.Errorf("read claude output: %w", scanErr)
	}
	return &Error{Kind: KindCrashed, Message: msg, Stderr: stderr, Err: scanErr}
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
func (c *Claude) binary() (string, error) {
	bin := c.opts.Binary
	if bin == "" {
		bin = "claude"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return "", notFound(bin, err)
	}
	return path, nil
}

func notFound(bin string, err error) *Error {
	return &Error{
		Kind:    KindNotFound,
		Message: fmt.Sprintf("claude CLI %q not found: install with npm i -g @anthropic-ai/claude-code or set AGENT_CLI_PATH", bin),
		Err:     err,
	}
}

// contextError turns the end of ctx into KindTimeout or KindCanceled, or
// returns nil if ctx has not ended. cause is what stopped the process.
func contextError(ctx context.Context, cause error) *Error {
	if ctx.Err() == nil {
		return nil
	}
	if cause == nil {
		cause = context.Cause(ctx)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &Error{Kind: KindTimeout, Message: "claude did not finish in time and was stopped", Err: cause}
	}
	return &Error{Kind: KindCanceled, Message: "claude was stopped", Err: cause}
}

// lastLine returns the last non-empty line of s, cut to max bytes.
func lastLine(s string, max int) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[i+1:])
	}
	if len(s) > max {
		s = strings.ToValidUTF8(s[:max], "") + "…"
	}
	return s
}

func writeTemp(text string) (string, error) {
	f, err := os.CreateTemp("", "claude-system-*.md")
	if err != nil {
		return "", err
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		os.Remove(f.Name())
		return "", err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// garbageLog counts skipped stdout lines and keeps the start of the last
// few, for the error message when claude dies without a result.
type garbageLog struct {
	n    int
	last []string
}

func (g *garbageLog) add(line []byte) {
	g.n++
	const keepLines, keepBytes = 3, 256
	if len(line) > keepBytes {
		line = line[:keepBytes]
	}
	if len(g.last) == keepLines {
		g.last = g.last[1:]
	}
	g.last = append(g.last, strings.ToValidUTF8(string(line), "?"))
}

func (g *garbageLog) text() string { return strings.Join(g.last, " | ") }

// lineSplitter is a bufio.SplitFunc for lines that skips a line longer than
// max (counting it) instead of ending the scan with bufio.ErrTooLong, so one
// huge tool result cannot cost the result line after it. The Scanner's
// buffer must be able to grow to max.
type lineSplitter struct {
	max      int
	skipping bool // inside an overlong line: discard up to its newline
	skipped  int  // overlong lines skipped
}

func (s *lineSplitter) split(data []byte, atEOF bool) (int, []byte, error) {
	i := bytes.IndexByte(data, '\n')
	if s.skipping {
		if i < 0 {
			return len(data), nil, nil
		}
		s.skipping = false
		return i + 1, nil, nil
	}
	switch {
	case i >= 0:
		return i + 1, bytes.TrimSuffix(data[:i], []byte{'\r'}), nil
	case atEOF && len(data) > 0:
		return len(data), data, nil
	case len(data) >= s.max:
		s.skipping = true
		s.skipped++
		return len(data), nil, nil
	}
	return 0, nil, nil
}
