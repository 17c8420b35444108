package backends

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

func init() {
	Register("gemini", func(o Options) Backend { return NewGemini(o) })
}

// geminiCLI is what the runner knows of gemini. gemini prints notices
// that are not JSON on stdout.
var geminiCLI = cliSpec{name: "gemini", envAllow: geminiEnvAllow, quietGarbage: true}

// geminiEnvAllow names the variables gemini may see beyond baseEnv: its
// credentials, endpoint and switches (GEMINI_*, GOOGLE_* for Vertex AI and
// Google Cloud auth). NODE_OPTIONS is not passed: it can load code.
var geminiEnvAllow = []string{"GEMINI_*", "GOOGLE_*", "NO_COLOR"}

// geminiEnvDeny are variables the adapter sets itself or that would make
// the CLI write files the gateway did not ask for.
var geminiEnvDeny = []string{"GEMINI_SYSTEM_MD", "GEMINI_WRITE_SYSTEM_MD"}

// geminiExportTimeout bounds the run that exports gemini's built-in system
// prompt (about 2 s).
const geminiExportTimeout = 60 * time.Second

// geminiPermissionModes maps PERMISSION_MODE to gemini's --approval-mode.
// gemini has no sandbox-style write switch: in "default" mode a headless
// run offers only read-only tools (plus those in --allowed-tools), auto_edit
// adds the edit tools (write_file, replace), yolo allows everything and plan
// is read-only.
var geminiPermissionModes = map[string]string{
	"default":           "default",
	"acceptEdits":       "auto_edit",
	"plan":              "plan",
	"bypassPermissions": "yolo",
}

// geminiToolNames maps claude's tool names, which ALLOWED_TOOLS uses, to
// gemini's. Other names are passed on as they are.
var geminiToolNames = map[string]string{
	"Read":      "read_file",
	"Write":     "write_file",
	"Edit":      "replace",
	"MultiEdit": "replace",
	"Bash":      "run_shell_command",
	"Glob":      "glob",
	"Grep":      "grep_search",
	"LS":        "list_directory",
	"WebFetch":  "web_fetch",
	"WebSearch": "google_web_search",
}

// Gemini runs one turn of Google's gemini CLI in headless mode
// (`-p "" -o stream-json`, the prompt on stdin), parsed by GeminiParser.
//
// gemini has no flag to append to its system prompt; GEMINI_SYSTEM_MD
// replaces it whole, and context files (GEMINI.md) reach the model only in
// the session's first user message. So the adapter exports gemini's own
// built-in prompt once (GEMINI_WRITE_SYSTEM_MD, in a throw-away run that
// stops before it reaches a model, see exportPrompt) and passes that prompt
// plus the persona as GEMINI_SYSTEM_MD on every turn. gemini reads that file
// afresh on every start, resumed sessions included, so the persona stays
// current and the CLI keeps its tool instructions.
//
// The export costs one extra CLI start (about 2 s) the first time a work
// dir, model, approval mode and tool list are seen; the result is cached for
// the adapter's lifetime (a failed export is not cached: that run falls back
// to a short stand-in that names the tools). An operator's own
// GEMINI_SYSTEM_MD is honoured: it is what the export returns.
//
// A Gemini is safe for concurrent use: every Run starts its own process
// group; the exported prompts are cached under a mutex, which is held during
// an export.
type Gemini struct {
	opts Options
	run  runner

	mu   sync.Mutex        // guards base; held during an export
	base map[string]string // exported built-in prompts by geminiBaseKey

	// acp runs the turns that need a kept process or approvals (gemini --acp).
	acp *ACP
}

var _ Backend = (*Gemini)(nil)

// NewGemini returns the gemini adapter. opts.Binary is the CLI (default
// "gemini" on PATH), opts.Env the environment it is filtered from,
// opts.KillGrace the time between SIGTERM and SIGKILL and opts.Log gets
// diagnostics.
func NewGemini(opts Options) *Gemini {
	g := &Gemini{opts: opts, base: map[string]string{}}
	g.run = newRunner(geminiCLI, &g.opts)
	g.acp = acpGemini(g)
	return g
}

// Close stops the kept ACP processes.
func (g *Gemini) Close() error { return g.acp.Close() }

// Warm describes the kept ACP processes.
func (g *Gemini) Warm() WarmStats { return g.acp.Warm() }

// Name implements Backend.
func (g *Gemini) Name() string { return "gemini" }

// Run implements Backend. It spawns
//
//	gemini -p "" -o stream-json --skip-trust [-m M] [--approval-mode A]
//	  [--allowed-tools a,b] [--resume ID]
//
// with the prompt on stdin, GEMINI_SYSTEM_MD pointing at the built-in
// prompt plus the persona, cwd req.WorkDir and a filtered environment.
// MaxTurns is not passed: gemini has no flag for it. A ctx deadline kills
// the process group and returns KindTimeout; another cancellation returns
// KindCanceled.
func (g *Gemini) Run(ctx context.Context, req Request, emit func(Event)) (Result, error) {
	if useACP(g.opts.Warm, req) {
		return g.acp.Run(ctx, req, emit)
	}
	if emit == nil {
		emit = func(Event) {}
	}
	log := g.run.log()

	bin, err := g.binary()
	if err != nil {
		return Result{}, err
	}
	if err := checkWorkDir(req.WorkDir); err != nil {
		return Result{}, err
	}
	args, err := geminiArgs(req)
	if err != nil {
		return Result{}, err
	}
	persona, err := geminiPersona(req)
	if err != nil {
		return Result{}, err
	}

	// No persona: gemini's own prompt, or the operator's GEMINI_SYSTEM_MD.
	env := g.run.env(nil, []string{"GEMINI_WRITE_SYSTEM_MD"})
	if persona != "" {
		base, err := g.basePrompt(ctx, bin, req.WorkDir, args, log)
		if err != nil {
			if ctxErr := g.run.contextError(ctx, nil); ctxErr != nil {
				return Result{}, ctxErr
			}
			log.Warn().Err(err).Msg("could not export gemini's built-in system prompt; using a short replacement")
			base = geminiFallbackPrompt
		}
		f, remove, err := g.run.tempFile("gemini-system-*.md", base+geminiPersonaHeader+persona)
		if err != nil {
			return Result{}, err
		}
		defer remove()
		env = append(g.run.env(nil, geminiEnvDeny), "GEMINI_SYSTEM_MD="+f)
	}

	var parser GeminiParser
	out, err := g.run.runOnce(ctx, runSpec{
		bin:   bin,
		args:  args,
		dir:   req.WorkDir,
		env:   env,
		stdin: strings.NewReader(req.Prompt),
	}, parser.Parse, emit)
	if err != nil {
		return Result{}, err
	}

	res, resErr := parser.Result()
	if !errors.Is(resErr, errNoResult) {
		// The stream said how the turn ended; that outranks the exit code
		// (gemini exits with the HTTP status mod 256) and a late kill.
		if e := streamError(resErr, out.Stderr); e != nil {
			return res, e
		}
		return res, nil
	}
	if e := g.run.stopped(ctx, out); e != nil {
		return res, e
	}
	if e := ClassifyGeminiStderr(out.Stderr); e != nil {
		e.Stderr = out.Stderr
		return res, e
	}
	return res, g.run.ended(out, "ended without a result", "")
}

// geminiArgs builds the command line. The prompt is not on it: `-p ""`
// makes the run headless and gemini reads the prompt from stdin (it joins
// stdin and the -p text; the empty -p adds nothing).
func geminiArgs(req Request) ([]string, error) {
	args := []string{"-p", "", "-o", "stream-json", "--skip-trust"}
	if req.Model != "" {
		args = append(args, "-m", req.Model)
	}
	if req.PermissionMode != "" {
		mode, ok := geminiPermissionModes[req.PermissionMode]
		if !ok {
			return nil, &Error{Kind: KindInvalid, Message: fmt.Sprintf("gemini: unknown permission mode %q (want default, acceptEdits, plan or bypassPermissions)", req.PermissionMode)}
		}
		args = append(args, "--approval-mode", mode)
	}
	if tools := geminiTools(req.AllowedTools); len(tools) > 0 {
		args = append(args, "--allowed-tools", strings.Join(tools, ","))
	}
	for _, dir := range req.AddDirs {
		// Part of the workspace beside the work dir (memory.md).
		args = append(args, "--include-directories", dir)
	}
	if req.SessionID != "" {
		args = append(args, "--resume", req.SessionID)
	}
	return args, nil
}

// geminiTools maps tool names to gemini's, dropping duplicates and empty
// names.
func geminiTools(names []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, n := range names {
		n = strings.TrimSpace(n)
		if mapped, ok := geminiToolNames[n]; ok {
			n = mapped
		}
		if n == "" || seen[n] {
			continue
		}
		seen[n] = true
		out = append(out, n)
	}
	return out
}

// geminiPersona is the persona text: SystemPrompt, or the file's content.
func geminiPersona(req Request) (string, error) {
	if req.SystemPrompt != "" || req.SystemPromptFile == "" {
		return req.SystemPrompt, nil
	}
	b, err := os.ReadFile(req.SystemPromptFile)
	if err != nil {
		return "", &Error{Kind: KindExecution, Message: "read system prompt file", Err: err}
	}
	return string(b), nil
}

// geminiPersonaHeader separates gemini's built-in prompt from the persona.
const geminiPersonaHeader = "\n\n# Persona and operating rules\n\n" +
	"The rest of this prompt comes from the gateway you run in. Where it differs from the general guidance above " +
	"(for example on where to keep memories), follow it.\n\n"

// geminiFallbackPrompt stands in for gemini's built-in prompt when it could
// not be exported. gemini fills in the ${…} variables.
const geminiFallbackPrompt = "You are an agent running in the Gemini CLI, working in the user's workspace. " +
	"Use your tools to read and change files instead of guessing; the tools available to you are: ${AvailableTools}. " +
	"Prefer ${read_file_ToolName} before changing a file, and use absolute paths."

// basePrompt returns gemini's built-in system prompt for this binary, work
// dir and flags, exporting it on first use.
func (g *Gemini) basePrompt(ctx context.Context, bin, dir string, args []string, log zerolog.Logger) (string, error) {
	key := geminiBaseKey(bin, dir, args)
	g.mu.Lock()
	defer g.mu.Unlock()
	if s, ok := g.base[key]; ok {
		return s, nil
	}
	start := time.Now()
	s, err := g.exportPrompt(ctx, bin, dir, args)
	if err != nil {
		return "", err
	}
	log.Debug().Int64("took_ms", time.Since(start).Milliseconds()).Int("bytes", len(s)).Msg("exported gemini's built-in system prompt")
	g.base[key] = s
	return s, nil
}

// geminiBaseKey keys an exported prompt: it depends on the binary, the work
// dir (git or not, project paths), the model and the approval mode and
// tools. --resume does not change it.
func geminiBaseKey(bin, dir string, args []string) string {
	var parts []string
	for i := 0; i < len(args); i++ {
		if args[i] == "--resume" {
			i++
			continue
		}
		parts = append(parts, args[i])
	}
	return bin + "\x00" + dir + "\x00" + strings.Join(parts, "\x00")
}

// geminiExportSettings are the settings of the export run's private home:
// API-key auth (the key is a dummy), no retries, no telemetry.
const geminiExportSettings = `{"security":{"auth":{"selectedType":"gemini-api-key"}},"general":{"maxAttempts":1},` +
	`"privacy":{"usageStatisticsEnabled":false},"telemetry":{"enabled":false}}`

// exportPrompt runs gemini once with GEMINI_WRITE_SYSTEM_MD to get its
// built-in system prompt. The run has a private GEMINI_CLI_HOME (so it
// records no session in the user's) and a dummy key, and its API base URL
// is a closed local port, so nothing leaves the machine. gemini writes the
// prompt while it starts up, before it prints the user message; the run is
// stopped there. Paths under the private home in the prompt are rewritten to
// the real one.
func (g *Gemini) exportPrompt(ctx context.Context, bin, dir string, args []string) (string, error) {
	tmp, err := os.MkdirTemp("", "gemini-export-*")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if err := os.MkdirAll(filepath.Join(tmp, ".gemini"), 0o700); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(tmp, ".gemini", "settings.json"), []byte(geminiExportSettings), 0o600); err != nil {
		return "", err
	}
	// gemini, running as the agent user, writes its prompt and state here.
	for _, p := range []string{tmp, filepath.Join(tmp, ".gemini"), filepath.Join(tmp, ".gemini", "settings.json")} {
		if err := g.opts.share(p); err != nil {
			return "", err
		}
	}
	out := filepath.Join(tmp, "system.md")
	env := g.run.env(nil, []string{"GOOGLE_*", "GEMINI_API_KEY", "GEMINI_CLI_HOME", "GEMINI_WRITE_SYSTEM_MD", "GEMINI_CLI_SYSTEM_SETTINGS_PATH"})
	env = append(env,
		"GEMINI_CLI_HOME="+tmp,
		"GEMINI_API_KEY=gateway-prompt-export-not-a-key",
		"GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:1",
		"GEMINI_CLI_SYSTEM_SETTINGS_PATH="+filepath.Join(tmp, "no-system-settings.json"),
		"GEMINI_WRITE_SYSTEM_MD="+out,
	)
	var exportArgs []string
	for i := 0; i < len(args); i++ {
		if args[i] == "--resume" {
			i++
			continue
		}
		exportArgs = append(exportArgs, args[i])
	}

	ctx, cancel := context.WithTimeout(ctx, geminiExportTimeout)
	defer cancel()
	p, err := g.run.start(ctx, runSpec{bin: bin, args: exportArgs, dir: dir, env: env, stdin: strings.NewReader(".")})
	if err != nil {
		return "", fmt.Errorf("start gemini to export its system prompt: %w", err)
	}
	sc := bufio.NewScanner(p.Stdout())
	sc.Buffer(make([]byte, 0, streamLineStart), streamLineMax)
	for sc.Scan() {
		var l geminiLine
		if unmarshalLenient(sc.Bytes(), &l) == nil && l.Type == "message" && l.Role == "user" {
			break // the prompt is written by now
		}
	}
	cancel()
	_, _ = io.Copy(io.Discard, p.Stdout())
	_, _ = p.Wait()
	b, err := os.ReadFile(out)
	if err != nil || len(strings.TrimSpace(string(b))) == 0 {
		if err == nil {
			err = errors.New("empty file")
		}
		return "", fmt.Errorf("export gemini's system prompt: %w; stderr: %s", err, lastLine(p.StderrTail(), 300))
	}
	home := envValue(g.opts.Env, "GEMINI_CLI_HOME")
	if home == "" {
		home = envValue(g.opts.Env, "HOME")
	}
	s := strings.TrimSpace(string(b))
	if home != "" {
		s = strings.ReplaceAll(s, tmp, home)
	}
	return s, nil
}

// envValue is the value of the last name=… entry of env, or "".
func envValue(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == name {
			v = val
		}
	}
	return v
}

// binary resolves the CLI to run.
func (g *Gemini) binary() (string, error) { return g.run.binary() }

// geminiContextError turns the end of ctx into KindTimeout or
// KindCanceled, or returns nil if ctx has not ended.
func geminiContextError(ctx context.Context, cause error) *Error {
	return cliContextError("gemini", ctx, cause)
}

// writeGeminiSystem writes the system prompt file GEMINI_SYSTEM_MD names;
// the caller shares it with the agent user and removes it.
func writeGeminiSystem(text string) (string, error) { return writeTempFile("gemini-system-*.md", text) }
