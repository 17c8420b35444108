package backends

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/proc"
)

func init() {
	Register("acp", func(o Options) Backend { return NewACP(o) })
}

// ACPCommandEnv names the variable holding an ACP agent's command line when
// Options.Command is empty (AGENT_BACKEND=acp).
const ACPCommandEnv = "ACP_COMMAND"

// ACP runs turns of an agent that speaks the Agent Client Protocol
// (JSON-RPC over the agent's stdin and stdout): gemini --acp, opencode acp,
// or any command ACP_COMMAND names (DESIGN decision 26).
//
// A process is kept per conversation (Request.Key) for WarmOptions.KeepAlive
// after its turn, with its session open; a turn whose session the process
// does not have open loads it with session/load when the agent can, and
// reports a stale session otherwise (the runtime then starts a new session
// with the recent conversation). A stopped turn sends session/cancel and
// keeps the process when the agent answers within the interrupt wait.
// Permission requests go to Request.Approve.
type ACP struct {
	name   string
	opts   Options
	run    runner // starts the agent: its binary's errors, env and group
	launch acpLauncher
	pool   *warmPool[*acpProc]
}

var _ Backend = (*ACP)(nil)

// acpLaunch is how an agent's process starts for a request.
type acpLaunch struct {
	Path string
	Args []string
	Env  []string
	// Settings identifies what the process is started with, without
	// temporary paths: a kept process takes only turns with the same.
	Settings string
	// Persona, when not empty, is sent ahead of the prompt in a new
	// session's first turn, for agents with no system prompt setting.
	Persona string
	// Cleanup removes what the launch wrote, once the process has ended.
	Cleanup func()
	// SystemFile is the file the agent reads the system prompt from
	// (gemini's GEMINI_SYSTEM_MD, opencode's instructions), "" for none.
	// A kept process's file takes this one's content when the process is
	// reused, so the persona (memory.md included) stays current for an
	// agent that reads it again: opencode on every model call, gemini
	// when a session starts. Settings leave the persona out, as claude's
	// do: a new memory does not cost the conversation its process.
	SystemFile string
}

// acpLauncher prepares the process for req.
type acpLauncher func(ctx context.Context, req Request) (acpLaunch, error)

// acpEnvAllow names the variables an arbitrary ACP agent may see beyond
// baseEnv: the credentials and switches of every provider the other
// adapters pass on, and ACP_* for the agent's own settings.
var acpEnvAllow = slices.Concat([]string{"ACP_*", "NO_COLOR"},
	claudeEnvAllow, codexEnvAllow, geminiEnvAllow, opencodeEnvAllow, piEnvAllow)

// acpCLI is what the runner knows of an agent ACP_COMMAND names: there is
// no package to install, so a missing binary points at the command line.
var acpCLI = cliSpec{name: "acp", envAllow: acpEnvAllow, missing: func(bin string) string {
	return fmt.Sprintf("acp agent %q not found: install it or fix its command in %s", bin, ACPCommandEnv)
}}

// NewACP returns the generic ACP adapter: opts.Command is the agent's
// command line, or else ACP_COMMAND in opts.Env, split like a shell would
// split words but without one. The agent sees the provider variables (acpEnvAllow),
// and the persona reaches it as the first
// block of a new session's first prompt.
func NewACP(opts Options) *ACP {
	a := newACP(acpCLI, opts, nil)
	argv := a.opts.Command
	var splitErr error
	if len(argv) == 0 {
		argv, splitErr = SplitCommand(envValue(a.opts.Env, ACPCommandEnv))
	}
	a.launch = func(_ context.Context, req Request) (acpLaunch, error) {
		if splitErr != nil {
			return acpLaunch{}, &Error{Kind: KindInvalid, Message: "ACP_COMMAND: " + splitErr.Error(), Err: splitErr}
		}
		if len(argv) == 0 {
			return acpLaunch{}, &Error{Kind: KindInvalid, Message: "AGENT_BACKEND=acp needs ACP_COMMAND, the agent's command line (e.g. \"gemini --acp\")"}
		}
		persona, err := geminiPersona(req)
		if err != nil {
			return acpLaunch{}, err
		}
		env := a.run.env(nil, []string{ACPCommandEnv})
		return acpLaunch{
			Path: argv[0], Args: argv[1:], Env: env, Persona: persona,
			Settings: acpSettings(req.WorkDir, argv, env),
		}, nil
	}
	return a
}

// newACP returns the ACP adapter of cli, whose processes launch prepares.
// opts.Env becomes what the agent's user should see (see newRunner).
func newACP(cli cliSpec, opts Options, launch acpLauncher) *ACP {
	a := &ACP{name: cli.name, opts: opts, launch: launch}
	a.run = newRunner(cli, &a.opts)
	a.pool = newWarmPool[*acpProc](cli.name, a.opts.Warm, a.opts.Log)
	return a
}

// Name implements Backend.
func (a *ACP) Name() string { return a.name }

// Warm describes the kept processes.
func (a *ACP) Warm() WarmStats { return a.pool.stats() }

// Close stops every kept process.
func (a *ACP) Close() error {
	a.pool.close()
	return nil
}

func (a *ACP) clock() clockwork.Clock {
	if a.opts.Warm.Clock != nil {
		return a.opts.Warm.Clock
	}
	return clockwork.NewRealClock()
}

func (a *ACP) interruptWait() time.Duration {
	if a.opts.Warm.InterruptWait > 0 {
		return a.opts.Warm.InterruptWait
	}
	return DefaultInterruptWait
}

// Run implements Backend.
func (a *ACP) Run(ctx context.Context, req Request, emit func(Event)) (Result, error) {
	if emit == nil {
		emit = func(Event) {}
	}
	if err := checkWorkDir(req.WorkDir); err != nil {
		return Result{}, err
	}
	l, err := a.launch(ctx, req)
	if err != nil {
		return Result{}, err
	}
	l.Settings = acpSettings(l.Settings, req.WorkDir)
	warm := true
	p := a.pool.take(req.Key, l.Settings, req.SessionID)
	if p != nil {
		p.refreshSystem(l)
	} else {
		warm = false
		if p, err = a.start(ctx, req, l); err != nil {
			return Result{}, err
		}
		a.pool.add(p)
	}
	started := time.Now()
	res, reusable, err := a.turn(ctx, p, req, l.Persona, emit)
	if reusable && KindOf(err) == KindCanceled {
		endStoppedTools(p.log, p.p.Pid(), started, a.opts.KillGrace) // stopped softly: the agent is kept
	}
	a.pool.release(p, reusable)
	res.Warm = warm
	res.Duration = time.Since(started)
	return res, err
}

// acpProc is one running agent and its connection.
type acpProc struct {
	key, settings string
	p             *proc.Process
	kill          context.CancelFunc
	conn          *acp.ClientSideConnection
	client        *acpClient
	caps          acp.AgentCapabilities
	cleanup       func()
	log           zerolog.Logger
	closeOnce     sync.Once

	// session is the session the process has open and model the model
	// the agent said it uses (gemini does, in session/new); only the turn
	// that holds the process writes them.
	session, model string
	// models is what the agent offered for the open session.
	models *acp.SessionModelState
	// systemFile is the file the agent reads its system prompt from.
	systemFile string
}

// refreshSystem gives a reused process the system prompt of l, whose own
// files go: the new file takes the place of the process's (a rename, so the
// agent never reads half a file).
func (p *acpProc) refreshSystem(l acpLaunch) {
	if l.SystemFile != "" && p.systemFile != "" {
		if err := os.Rename(l.SystemFile, p.systemFile); err != nil {
			p.log.Warn().Err(err).Msg("could not update the agent's system prompt file; it keeps the one it started with")
		}
	}
	if l.Cleanup != nil {
		l.Cleanup()
	}
}

func (p *acpProc) warmKey() string      { return p.key }
func (p *acpProc) warmSettings() string { return p.settings }
func (p *acpProc) warmSession() string  { return p.session }
func (p *acpProc) warmPgid() int        { return p.p.Pid() }
func (p *acpProc) warmExited() bool     { return p.exited() }
func (p *acpProc) warmClose(why string) { p.close(why) }
func (p *acpProc) warmWait()            { _, _ = p.p.Wait() }

// start spawns the agent and initializes the connection. The process
// outlives the turn's ctx: it is kept for the conversation.
func (a *ACP) start(ctx context.Context, req Request, l acpLaunch) (*acpProc, error) {
	p, kill, err := a.run.startKept(runSpec{bin: l.Path, args: l.Args, dir: req.WorkDir, env: l.Env}, l.Cleanup)
	if err != nil {
		return nil, err
	}
	client := &acpClient{}
	ap := &acpProc{
		key: req.Key, settings: l.Settings, p: p, kill: kill, client: client, cleanup: l.Cleanup, systemFile: l.SystemFile,
		conn: acp.NewClientSideConnection(client, p.Stdin(), p.Stdout()),
		log:  a.run.log().With().Int("pid", p.Pid()).Logger(),
	}
	ap.conn.SetLogger(slog.New(slog.DiscardHandler))
	go func() { // the connection ends when stdout does; the process must go too
		<-ap.conn.Done()
		ap.close("the agent closed its output")
	}()
	init, err := acpCall(ctx, ap, func(c context.Context) (acp.InitializeResponse, error) {
		return ap.conn.Initialize(c, acp.InitializeRequest{
			ProtocolVersion:    acp.ProtocolVersionNumber,
			ClientCapabilities: acp.ClientCapabilities{},
			ClientInfo:         &acp.Implementation{Name: "agentgateway", Version: "1"},
		})
	})
	if err != nil {
		ap.close("initialize failed")
		return nil, a.failure(ctx, ap, "initialize", err)
	}
	ap.caps = init.AgentCapabilities
	return ap, nil
}

// close stops the process and removes its files; it is safe to call more
// than once and from any goroutine.
func (p *acpProc) close(why string) {
	p.closeOnce.Do(func() {
		p.log.Debug().Str("why", why).Msg("stopping ACP agent")
		p.kill()
		go func() {
			_, _ = p.p.Wait()
			if p.cleanup != nil {
				p.cleanup()
			}
		}()
	})
}

func (p *acpProc) exited() bool {
	select {
	case <-p.p.Done():
		return true
	case <-p.conn.Done():
		return true
	default:
		return false
	}
}

// acpCall runs one request to the agent, giving up when ctx ends or the
// agent goes away.
func acpCall[T any](ctx context.Context, p *acpProc, call func(context.Context) (T, error)) (T, error) {
	type answer struct {
		v   T
		err error
	}
	done := make(chan answer, 1)
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	go func() {
		v, err := call(cctx)
		done <- answer{v, err}
	}()
	select {
	case a := <-done:
		return a.v, a.err
	case <-ctx.Done():
		var zero T
		return zero, context.Cause(ctx)
	case <-p.conn.Done():
		var zero T
		return zero, errors.New("the agent exited")
	}
}

// failure turns an error talking to the agent into an *Error: the end of
// ctx first, then a process that went away, then the agent's own error.
func (a *ACP) failure(ctx context.Context, p *acpProc, what string, err error) *Error {
	if ce := a.contextError(ctx, err); ce != nil {
		return ce
	}
	tail := p.p.StderrTail()
	if p.exited() {
		msg := fmt.Sprintf("%s agent exited during %s", a.name, what)
		if last := lastLine(tail, 300); last != "" {
			msg += "; stderr: " + last
		}
		return &Error{Kind: KindCrashed, Message: msg, Stderr: tail, Err: err}
	}
	var re *acp.RequestError
	if errors.As(err, &re) {
		if e := classifyACPError(re); e != nil {
			e.Stderr = tail
			return e
		}
	}
	return &Error{Kind: KindExecution, Message: fmt.Sprintf("%s agent: %s: %v", a.name, what, err), Stderr: tail, Err: err}
}

func (a *ACP) contextError(ctx context.Context, cause error) *Error {
	if ctx.Err() == nil {
		return nil
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &Error{Kind: KindTimeout, Message: a.name + " did not finish in time and was stopped", Err: cause}
	}
	return &Error{Kind: KindCanceled, Message: a.name + " was stopped", Err: cause}
}

// classifyACPError reads the agent's JSON-RPC error: an auth error
// (ACP's -32000) or the model API's status when the agent names one.
func classifyACPError(re *acp.RequestError) *Error {
	msg := re.Message
	if re.Data != nil {
		msg += ": " + acpRawJSON(re.Data)
	}
	switch {
	case re.Code == -32000:
		return &Error{Kind: KindAuth, Message: msg, Err: re}
	case strings.Contains(msg, "429") || strings.Contains(strings.ToLower(msg), "quota") || strings.Contains(strings.ToLower(msg), "rate limit"):
		return &Error{Kind: KindRateLimit, Message: msg, Err: re}
	case strings.Contains(msg, "401") || strings.Contains(msg, "403") || strings.Contains(strings.ToLower(msg), "api key"):
		return &Error{Kind: KindAuth, Message: msg, Err: re}
	}
	return &Error{Kind: KindAPI, Message: msg, Err: re}
}

// openSession makes req's session the open one: kept as it is, loaded, or
// new. A session the agent cannot load is stale.
func (a *ACP) openSession(ctx context.Context, p *acpProc, req Request) (fresh bool, err error) {
	switch {
	case req.SessionID != "" && req.SessionID == p.session:
		a.chooseModel(ctx, p, p.models, req.Model) // /model may have changed it
		return false, nil
	case req.SessionID != "":
		if !p.caps.LoadSession {
			return false, &Error{Kind: KindStaleSession, Message: a.name + " agent cannot load sessions (no loadSession capability)"}
		}
		p.client.route(req.SessionID, nil) // the replayed history is not this turn's
		resp, err := acpCall(ctx, p, func(c context.Context) (acp.LoadSessionResponse, error) {
			return p.conn.LoadSession(c, acp.LoadSessionRequest{SessionId: acp.SessionId(req.SessionID), Cwd: req.WorkDir, McpServers: []acp.McpServer{}})
		})
		if err != nil {
			if ce := a.contextError(ctx, err); ce != nil || p.exited() {
				return false, a.failure(ctx, p, "session/load", err)
			}
			p.session = ""
			return false, &Error{Kind: KindStaleSession, Message: fmt.Sprintf("%s agent could not load session %s: %v", a.name, req.SessionID, err), Err: err}
		}
		p.session = req.SessionID
		a.chooseModel(ctx, p, resp.Models, req.Model)
		return false, nil
	}
	resp, err := acpCall(ctx, p, func(c context.Context) (acp.NewSessionResponse, error) {
		return p.conn.NewSession(c, acp.NewSessionRequest{Cwd: req.WorkDir, McpServers: []acp.McpServer{}})
	})
	if err != nil {
		return false, a.failure(ctx, p, "session/new", err)
	}
	p.session = string(resp.SessionId)
	a.chooseModel(ctx, p, resp.Models, req.Model)
	return true, nil
}

// chooseModel notes the session's model and switches it to want
// (AGENT_MODEL) with session/set_model when the agent offers that model and
// uses another. An agent that lists no models keeps its own (gemini and
// opencode get the model on their command line or in their config).
func (a *ACP) chooseModel(ctx context.Context, p *acpProc, models *acp.SessionModelState, want string) {
	if models == nil {
		return
	}
	if p.models != models {
		p.models, p.model = models, string(models.CurrentModelId)
	}
	if want == "" || want == p.model {
		return
	}
	if !slices.ContainsFunc(models.AvailableModels, func(m acp.ModelInfo) bool { return string(m.ModelId) == want }) {
		p.log.Warn().Str("model", want).Str("current", p.model).Msg("the agent does not offer this model; it keeps its own")
		return
	}
	_, err := acpCall(ctx, p, func(c context.Context) (acp.UnstableSetSessionModelResponse, error) {
		return p.conn.UnstableSetSessionModel(c, acp.UnstableSetSessionModelRequest{SessionId: acp.SessionId(p.session), ModelId: acp.UnstableModelId(want)})
	})
	if err != nil {
		p.log.Warn().Err(err).Str("model", want).Msg("could not switch the agent's model; it keeps its own")
		return
	}
	p.model = want
}

// promptBlocks is the prompt as content blocks: the persona on a new
// session (for agents without a setting for it), the text, then the
// images when the agent takes them.
func promptBlocks(req Request, persona string, fresh bool, caps acp.PromptCapabilities) []acp.ContentBlock {
	var blocks []acp.ContentBlock
	if persona != "" && fresh {
		blocks = append(blocks, acp.TextBlock("<system>\n"+persona+"\n</system>"))
	}
	blocks = append(blocks, acp.TextBlock(req.Prompt))
	if caps.Image {
		for _, im := range req.Images {
			if len(im.Data) == 0 {
				continue
			}
			blocks = append(blocks, acp.ImageBlock(base64.StdEncoding.EncodeToString(im.Data), im.MediaType))
		}
	}
	return blocks
}

// turn runs one prompt on p. reusable says whether p may serve another.
func (a *ACP) turn(ctx context.Context, p *acpProc, req Request, persona string, emit func(Event)) (Result, bool, error) {
	fresh, err := a.openSession(ctx, p, req)
	if err != nil {
		return Result{}, !p.exited() && ctx.Err() == nil, err
	}
	t := newACPTurn(p.session, req.Approve)
	p.client.route(p.session, t)
	defer p.client.route(p.session, nil)
	t.mapper.model = cmp.Or(p.model, req.Model)
	emit(Event{Kind: EventInit, SessionID: p.session, Model: t.mapper.model})

	done := make(chan acpAnswer, 1)
	go func() {
		resp, err := p.conn.Prompt(context.WithoutCancel(ctx), acp.PromptRequest{
			SessionId: acp.SessionId(p.session),
			Prompt:    promptBlocks(req, persona, fresh, p.caps.PromptCapabilities),
		})
		done <- acpAnswer{resp, err}
	}()
	w := &acpWait{a: a, p: p, t: t, ctx: ctx, emit: emit, clock: a.clock()}
	return w.wait(done)
}

// acpAnswer is the agent's answer to session/prompt.
type acpAnswer struct {
	resp acp.PromptResponse
	err  error
}

// acpWait follows a running prompt until it is answered, stopped, hangs or
// its agent goes.
type acpWait struct {
	a     *ACP
	p     *acpProc
	t     *acpTurn
	ctx   context.Context
	emit  func(Event)
	clock clockwork.Clock

	// lastActivity is when the agent last sent an update, for
	// HangTimeout.
	lastActivity time.Time
	// cancelWait fires InterruptWait after session/cancel was sent.
	cancelWait <-chan time.Time
	// hangTimer fires HangTimeout after the last update; nil without one.
	hangTimer clockwork.Timer
}

func (w *acpWait) wait(done <-chan acpAnswer) (Result, bool, error) {
	stopped := w.ctx.Done()
	var hang <-chan time.Time
	w.lastActivity = w.clock.Now()
	if d := w.a.opts.Warm.HangTimeout; d > 0 {
		w.hangTimer = w.clock.NewTimer(d)
		defer w.hangTimer.Stop()
		hang = w.hangTimer.Chan()
	}
	for {
		select {
		case u := <-w.t.updates:
			w.t.emit(u, w.emit)
			w.lastActivity = w.clock.Now()
		case ans := <-done:
			w.t.drain(w.emit)
			return w.a.finish(w.ctx, w.p, w.t, ans.resp, ans.err)
		case <-w.t.interrupt:
			w.t.interrupted = true
			w.cancel()
		case <-stopped:
			stopped = nil
			w.t.endApprovals()
			w.cancel()
		case <-w.cancelWait:
			return w.deaf()
		case <-hang:
			if e := w.hung(); e != nil {
				return w.t.mapper.Result(acp.PromptResponse{}), false, e
			}
		case <-w.p.conn.Done():
			return w.gone()
		}
	}
}

// cancel sends session/cancel; the agent has InterruptWait to answer the
// prompt before its process is killed.
func (w *acpWait) cancel() {
	if err := w.p.conn.Cancel(context.WithoutCancel(w.ctx), acp.CancelNotification{SessionId: acp.SessionId(w.p.session)}); err != nil {
		w.p.log.Debug().Err(err).Msg("session/cancel failed")
	}
	if w.cancelWait == nil {
		w.cancelWait = w.clock.After(w.a.interruptWait())
	}
}

// deaf ends a turn whose agent did not answer session/cancel in time: its
// process is killed.
func (w *acpWait) deaf() (Result, bool, error) {
	w.p.close("did not answer session/cancel in time")
	res := w.t.mapper.Result(acp.PromptResponse{})
	cause := errors.New("the agent did not answer session/cancel")
	if ce := w.a.contextError(w.ctx, cause); ce != nil {
		return res, false, ce
	}
	return res, false, &Error{Kind: KindCanceled, Message: w.a.name + " agent did not stop after a denial", Err: cause}
}

// hung kills the agent and says why when it has been silent for
// HangTimeout while no approval was open and no tool call ran; nil when it
// has not. A timer that fired for an older silence is set again for the
// rest of the current one.
func (w *acpWait) hung() *Error {
	limit := w.a.opts.Warm.HangTimeout
	silent := w.clock.Since(w.lastActivity)
	if silent < limit {
		w.hangTimer.Reset(limit - silent)
		return nil
	}
	if w.t.pending() > 0 || w.t.mapper.running() > 0 {
		w.hangTimer.Reset(limit)
		return nil
	}
	w.p.close("hung")
	return &Error{
		Kind: KindCrashed, Message: fmt.Sprintf("%s agent sent nothing for %s and was stopped", w.a.name, limit),
		Stderr: w.p.p.StderrTail(), ModelOutput: w.t.output,
	}
}

// gone ends a turn whose agent exited or closed its output.
func (w *acpWait) gone() (Result, bool, error) {
	w.t.drain(w.emit)
	res := w.t.mapper.Result(acp.PromptResponse{})
	if ce := w.a.contextError(w.ctx, nil); ce != nil {
		return res, false, ce
	}
	e := w.a.failure(w.ctx, w.p, "the turn", errors.New("the agent exited"))
	e.ModelOutput = w.t.output
	return res, false, e
}

// finish turns the prompt's answer into the turn's outcome.
func (a *ACP) finish(ctx context.Context, p *acpProc, t *acpTurn, resp acp.PromptResponse, err error) (Result, bool, error) {
	res := t.mapper.Result(resp)
	if err != nil {
		e := a.failure(ctx, p, "session/prompt", err)
		e.ModelOutput = t.output
		return res, !p.exited(), e
	}
	if resp.StopReason == acp.StopReasonCancelled && t.interrupted && ctx.Err() == nil {
		// A denial ended the turn (Verdict.Interrupt): what the agent said
		// so far is the answer.
		return res, true, nil
	}
	if resp.StopReason == acp.StopReasonCancelled || ctx.Err() != nil {
		if ce := a.contextError(ctx, nil); ce != nil {
			ce.ModelOutput = t.output
			return res, true, ce
		}
		return res, true, &Error{Kind: KindCanceled, Message: a.name + " agent cancelled the turn"}
	}
	switch resp.StopReason {
	case acp.StopReasonMaxTurnRequests:
		return res, true, &Error{Kind: KindMaxTurns, Message: a.name + " agent reached its turn limit"}
	case acp.StopReasonRefusal:
		return res, true, &Error{Kind: KindAPI, Message: a.name + " agent refused the prompt"}
	}
	return res, true, nil
}

// acpBinary is the agent's program: the configured one, or its usual
// name looked up on PATH when the process starts.
func acpBinary(configured, name string) string {
	if configured != "" {
		return configured
	}
	return name
}

// acpSettings is a short fingerprint of the parts.
func acpSettings(parts ...any) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%q\x00", fmt.Sprint(p))
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
