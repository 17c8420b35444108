package backends

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/proc"
)

// codex on `codex app-server`: one process per conversation, kept warm
// between turns (AGENT_KEEP_ALIVE, MAX_WARM_PROCESSES), speaking JSON-RPC
// over stdio (codex_app_parse.go). A thread is started, or resumed from
// the stored session id after a restart; each prompt is a turn/start; the
// CLI asks for command and patch approvals with requests the gateway
// answers through Request.Approve; Stop is a turn/interrupt, and a kill
// only when codex does not answer it. `codex exec` stays for print-mode
// runs (gateway chat) and AGENT_KEEP_ALIVE=0.

// Errors of app-server turns, for logs and the retry.
var (
	errAppGone = errors.New("codex app-server ended before the turn's end")
	errAppHung = errors.New("codex app-server stopped producing output")
)

// codexAppStartTimeout bounds initialize and thread/start or
// thread/resume: codex answers them from its own files.
const codexAppStartTimeout = 30 * time.Second

// usesAppServer reports whether turns run on `codex app-server`.
func (c *Codex) usesAppServer() bool {
	return c.opts.Warm.Interactive && c.opts.Warm.KeepAlive > 0
}

// codexAppProc is one app-server process. One turn at a time uses it (the
// warm pool hands it to one turn); its stdout is read by one goroutine
// into lines.
type codexAppProc struct {
	key      string
	settings string
	thread   string // the thread it holds; "" before the first
	p        *proc.Process
	kill     context.CancelFunc
	stdin    io.WriteCloser
	linePipe // stdout: lines, exited, skipped, scanErr
	seq      atomic.Int64
	writeMu  sync.Mutex // serialises writes to stdin
	closed   sync.Once
	turns    int
	log      zerolog.Logger

	steerMu sync.Mutex // guards active and waiters
	// active is the running turn's id while it can take steered input.
	active string
	// waiters get the answers to turn/steer requests, by request id.
	waiters map[string]chan appLine
}

func (cp *codexAppProc) warmKey() string      { return cp.key }
func (cp *codexAppProc) warmSettings() string { return cp.settings }
func (cp *codexAppProc) warmSession() string  { return cp.thread }
func (cp *codexAppProc) warmPgid() int        { return cp.p.Pid() }
func (cp *codexAppProc) warmExited() bool     { return cp.exited.Load() }
func (cp *codexAppProc) warmClose(why string) { cp.close(why) }
func (cp *codexAppProc) warmWait()            { _, _ = cp.p.Wait() }

// appPool is the pool of warm app-servers, made on first use.
func (c *Codex) appPool() *warmPool[*codexAppProc] {
	c.appOnce.Do(func() { c.app = newWarmPool[*codexAppProc]("codex", c.opts.Warm, c.opts.Log) })
	return c.app
}

// Close stops every warm app-server. Turns running now finish on theirs,
// which are then not kept.
func (c *Codex) Close() error {
	c.appPool().close()
	return nil
}

// Warm reports the app-server processes kept now.
func (c *Codex) Warm() WarmStats { return c.appPool().stats() }

func (c *Codex) clock() clockwork.Clock {
	if c.opts.Warm.Clock != nil {
		return c.opts.Warm.Clock
	}
	return clockwork.NewRealClock()
}

// codexApprovalPolicy is the thread's approval policy: "never" when
// nobody can answer, "on-request" in acceptEdits (edits in the workspace
// and sandboxed commands go ahead; codex asks to leave the sandbox), and
// "untrusted" otherwise (codex asks before every command it does not know
// to be safe and every patch).
func codexApprovalPolicy(req Request) string {
	switch {
	case req.Approve == nil:
		return "never"
	case req.PermissionMode == "acceptEdits":
		return "on-request"
	}
	return "untrusted"
}

// codexAppArgs is the app-server's command line: the model provider as
// codexArgs sets it for exec, and the extra writable directories.
func codexAppArgs(req Request, env []string, userProvider string) []string {
	args := []string{"app-server"}
	args = append(args, codexProviderArgs(env, userProvider)...)
	if len(req.AddDirs) > 0 {
		quoted := make([]string, len(req.AddDirs))
		for i, d := range req.AddDirs {
			quoted[i] = codexTOMLString(d)
		}
		args = append(args, "-c", "sandbox_workspace_write.writable_roots=["+strings.Join(quoted, ",")+"]")
	}
	return args
}

// runApp runs req on a kept app-server or a new one, retrying once on a
// fresh process (resuming the thread) when the first dies or hangs
// before the turn's end.
func (c *Codex) runApp(ctx context.Context, req Request, emit func(Event)) (Result, error) {
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
	env, userProvider := c.appEnv()
	args := codexAppArgs(req, env, userProvider)
	settings := bin + "\x00" + req.WorkDir + "\x00" + strings.Join(args, "\x00") + "\x00" +
		CodexSandbox(req.PermissionMode, req.AllowedTools) + "\x00" + codexApprovalPolicy(req)

	pool := c.appPool()
	cp := pool.take(req.Key, settings, req.SessionID)
	if cp == nil {
		if cp, err = c.spawnApp(ctx, bin, args, env, req); err != nil {
			return Result{}, err
		}
		cp.key, cp.settings = req.Key, settings
		pool.add(cp)
	}
	warm := cp.turns > 0
	out := c.appTurn(ctx, cp, req, emit)
	if out.retry && ctx.Err() == nil {
		warm = false
		pool.discard(cp, "died or hung during a turn")
		if cp.thread != "" {
			req.SessionID = cp.thread
		}
		c.opts.Log.Warn().Str("backend", "codex").Err(out.err).Str("session", req.SessionID).
			Msg("codex app-server failed during a turn; retrying once on a fresh process")
		emit(Event{Kind: EventRetry, Attempt: 1, MaxAttempts: 1,
			Err: &Error{Kind: KindCrashed, Message: "the agent's process stopped responding; retrying on a fresh one"}})
		if cp, err = c.spawnApp(ctx, bin, args, env, req); err != nil {
			return out.res, err
		}
		cp.key, cp.settings = req.Key, settings
		pool.add(cp)
		out = c.appTurn(ctx, cp, req, emit)
	}
	pool.release(cp, out.reusable)
	out.res.Warm = warm
	return out.res, out.err
}

// appEnv is codex's environment and the model provider the user's
// config.toml selects, as Run computes them for exec.
func (c *Codex) appEnv() ([]string, string) {
	env := c.run.env(nil, nil)
	userProvider, err := readCodexUserProvider(codexHome(env))
	if err != nil {
		log := c.run.log()
		log.Warn().Err(err).Msg("cannot read the model provider from codex's config.toml")
	}
	if userProvider.EnvKey != "" {
		env = c.run.env([]string{userProvider.EnvKey}, nil)
	}
	return env, userProvider.ID
}

// spawnApp starts an app-server and initializes it. The process is not in
// the pool yet; it holds no thread.
func (c *Codex) spawnApp(ctx context.Context, bin string, args, env []string, req Request) (*codexAppProc, error) {
	p, kill, err := c.run.startKept(runSpec{bin: bin, args: args, dir: req.WorkDir, env: env}, nil)
	if err != nil {
		return nil, err
	}
	cp := &codexAppProc{p: p, kill: kill, stdin: p.Stdin(),
		log: c.opts.Log.With().Str("backend", "codex").Int("pid", p.Pid()).Logger()}
	cp.read()
	_, err = cp.call(ctx, c.clock(), "initialize", map[string]any{
		"clientInfo":   map[string]any{"name": "agent-gateway", "title": "Agent gateway", "version": "1"},
		"capabilities": map[string]any{"experimentalApi": false, "requestAttestation": false},
	})
	if err == nil {
		err = cp.write(appNotificationLine("initialized"))
	}
	if err != nil {
		cp.close("initialize failed")
		return nil, c.appStartError(ctx, cp, "initialize", err)
	}
	cp.log.Debug().Msg("codex app-server started")
	return cp, nil
}

// appStartError is the error of a process that failed before its turn.
func (c *Codex) appStartError(ctx context.Context, cp *codexAppProc, what string, err error) error {
	if ctxErr := codexContextError(ctx, context.Cause(ctx)); ctxErr != nil {
		return ctxErr
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if errors.Is(err, errAppGone) {
		_, _ = cp.p.Wait() // its stderr is complete
	}
	stderr := strings.TrimSpace(cp.p.StderrTail())
	if se := CodexStderrError(stderr); se != nil {
		se.Stderr = stderr
		return se
	}
	msg := "codex app-server failed to " + what
	if last := lastLine(stderr, 300); last != "" {
		msg += "; stderr: " + last
	}
	return &Error{Kind: KindCrashed, Message: msg, Stderr: stderr, Err: err}
}

// read starts copying stdout into lines until it ends.
// An overlong line (a huge command output) is skipped, not fatal; what was
// skipped and a read error are logged.
func (cp *codexAppProc) read() {
	cp.readLines(cp.p.Stdout(), codexLineStart, codexLineMax, func() {
		if cp.skipped > 0 {
			cp.log.Warn().Int("skipped", cp.skipped).Int("max_bytes", codexLineMax).Msg("skipped codex app-server output lines over the size limit")
		}
		if cp.scanErr != nil {
			cp.log.Warn().Err(cp.scanErr).Msg("stopped reading codex app-server output")
		}
	})
}

func (cp *codexAppProc) write(line []byte) error {
	return writeLine(&cp.writeMu, cp.stdin, line, "codex app-server")
}

// request writes a request and returns its id.
func (cp *codexAppProc) request(method string, params any) (string, error) {
	id := cp.seq.Add(1)
	return fmt.Sprint(id), cp.write(appRequestLine(id, method, params))
}

// call sends a request outside a turn and waits for its answer; other
// lines meanwhile are dropped (none but notices are expected).
func (cp *codexAppProc) call(ctx context.Context, clock clockwork.Clock, method string, params any) (json.RawMessage, error) {
	id, err := cp.request(method, params)
	if err != nil {
		return nil, err
	}
	timeout := clock.After(codexAppStartTimeout)
	for {
		select {
		case line, ok := <-cp.lines:
			if !ok {
				return nil, errAppGone
			}
			l, err := parseAppLine(line)
			if err != nil {
				continue
			}
			if l.Kind == appRequest {
				_ = cp.write(appErrorLine(l.ID, "the gateway has no turn running"))
				continue
			}
			if l.Kind != appResponse || string(l.ID) != id {
				continue
			}
			if l.Error != "" {
				return nil, &appCallError{method: method, message: l.Error}
			}
			return l.Result, nil
		case <-timeout:
			return nil, fmt.Errorf("%s: no answer in %v: %w", method, codexAppStartTimeout, errAppHung)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// appCallError is the app-server's error answer to a request.
type appCallError struct{ method, message string }

func (e *appCallError) Error() string { return e.method + ": " + e.message }

// close stops the process and its group, once.
func (cp *codexAppProc) close(why string) {
	cp.closed.Do(func() {
		cp.log.Debug().Str("why", why).Int("turns", cp.turns).Msg("codex app-server stopped")
		_ = cp.stdin.Close()
		cp.kill()
		go func() { _, _ = cp.p.Wait() }()
	})
}

// drain drops lines printed between turns (notices).
func (cp *codexAppProc) drain() {
	for {
		select {
		case line, ok := <-cp.lines:
			if !ok {
				return
			}
			if l, err := parseAppLine(line); err == nil && l.Kind == appRequest {
				_ = cp.write(appErrorLine(l.ID, "the gateway has no turn running"))
			}
		default:
			return
		}
	}
}

// openThread makes cp hold req's thread: a new one for a new session, the
// stored one resumed otherwise (after a restart, or when the
// conversation changed).
func (c *Codex) openThread(ctx context.Context, cp *codexAppProc, req Request) (model string, err error) {
	if req.SessionID != "" && req.SessionID == cp.thread {
		return "", nil
	}
	params := map[string]any{
		"cwd":            req.WorkDir,
		"approvalPolicy": codexApprovalPolicy(req),
	}
	if sandbox := CodexSandbox(req.PermissionMode, req.AllowedTools); sandbox != "" {
		params["sandbox"] = sandbox
	}
	if req.Model != "" {
		params["model"] = req.Model
	}
	if persona := systemText(req); persona != "" {
		params["developerInstructions"] = persona
	}
	method := "thread/start"
	if req.SessionID != "" {
		method = "thread/resume"
		params["threadId"] = req.SessionID
		params["excludeTurns"] = true
	}
	result, err := cp.call(ctx, c.clock(), method, params)
	var callErr *appCallError
	if errors.As(err, &callErr) && method == "thread/resume" && staleThread(callErr.message) {
		return "", &Error{Kind: KindStaleSession, Message: callErr.message}
	}
	if err != nil {
		return "", c.appStartError(ctx, cp, method, err)
	}
	thread, model, err := appThreadID(result)
	if err != nil {
		return "", &Error{Kind: KindCrashed, Message: "codex app-server: " + method, Err: err}
	}
	cp.thread = thread
	return model, nil
}

// appTurnResult is how one app-server turn ended.
type appTurnResult struct {
	res      Result
	err      error
	reusable bool // the process may take the next turn
	retry    bool // it died or hung before the turn's end
}

// appVerdict carries a verdict back to the turn loop.
type appVerdict struct {
	id        json.RawMessage
	amendment json.RawMessage
	v         Verdict
}

// appTurn runs one turn on cp: it opens the thread, starts the turn,
// answers approvals, emits events until turn/completed, and handles a stop
// (ctx ends: turn/interrupt, then kill), a hang and the process dying.
func (c *Codex) appTurn(ctx context.Context, cp *codexAppProc, req Request, emit func(Event)) appTurnResult {
	clock := c.clock()
	started := clock.Now()
	toolsSince := time.Now() // the wall clock /proc's start times are on
	cp.drain()
	if cp.exited.Load() {
		return appTurnResult{err: errAppGone, retry: true}
	}
	model, err := c.openThread(ctx, cp, req)
	if err != nil {
		// A process that died or hung is replaced once; a refusal (an
		// unknown thread, a bad config) would be refused again.
		var e *Error
		retry := !errors.As(err, &e) || e.Kind == KindCrashed
		return appTurnResult{err: err, retry: retry}
	}
	cp.turns++
	t := &codexAppTurn{thread: cp.thread, model: firstSession(model, req.Model)}
	emit(Event{Kind: EventInit, SessionID: cp.thread, Model: t.model})

	params := map[string]any{"threadId": cp.thread, "input": appTextInput(req.Prompt, req.Images)}
	if req.Model != "" {
		params["model"] = req.Model
	}
	startID, err := cp.request("turn/start", params)
	if err != nil {
		return appTurnResult{err: errAppGone, retry: true}
	}

	defer cp.accept("")                             // no more steered input once the turn has ended
	pending := map[string]context.CancelCauseFunc{} // approvals waiting, by request id
	verdicts := make(chan appVerdict)
	defer func() {
		for _, cancel := range pending {
			cancel(context.Canceled)
		}
	}()
	hang := c.opts.Warm.HangTimeout
	var hangTimer clockwork.Timer
	var hangC <-chan time.Time
	tools := 0
	armHang := func() {
		if hang <= 0 || len(pending) > 0 || tools > 0 {
			hangC = nil
			return
		}
		if hangTimer == nil {
			hangTimer = clock.NewTimer(hang)
		} else {
			hangTimer.Reset(hang)
		}
		hangC = hangTimer.Chan()
	}
	armHang()
	defer func() {
		if hangTimer != nil {
			hangTimer.Stop()
		}
	}()

	done := ctx.Done()
	var interruptC <-chan time.Time
	interrupted := false
	stoppedByDenial := false
	interrupt := func() {
		if interrupted {
			return
		}
		interrupted = true
		if t.turn != "" {
			if _, err := cp.request("turn/interrupt", map[string]any{"threadId": cp.thread, "turnId": t.turn}); err != nil {
				cp.log.Debug().Err(err).Msg("could not send the interrupt")
			}
		}
		wait := c.opts.Warm.InterruptWait
		if wait <= 0 {
			wait = DefaultInterruptWait
		}
		interruptC = clock.After(wait)
	}
	finish := func() appTurnResult {
		res := t.result()
		res.Duration = clock.Since(started)
		switch {
		case t.status == "interrupted" && ctx.Err() != nil:
			endStoppedTools(cp.log, cp.p.Pid(), toolsSince, c.opts.KillGrace)
			e := codexContextError(ctx, context.Cause(ctx))
			e.ModelOutput = t.modelOutput
			return appTurnResult{res: res, err: e, reusable: true}
		case t.status == "interrupted" && stoppedByDenial:
			endStoppedTools(cp.log, cp.p.Pid(), toolsSince, c.opts.KillGrace)
			return appTurnResult{res: res, err: &Error{Kind: KindCanceled, Message: "the user denied a tool call and stopped the turn"}, reusable: true}
		case t.status == "interrupted":
			return appTurnResult{res: res, err: &Error{Kind: KindCanceled, Message: "codex interrupted the turn"}, reusable: true}
		case t.failure != nil:
			e := *t.failure
			e.Stderr = strings.TrimSpace(cp.p.StderrTail())
			return appTurnResult{res: res, err: &e, reusable: true}
		}
		return appTurnResult{res: res, reusable: true}
	}

	for {
		select {
		case line, ok := <-cp.lines:
			if !ok {
				return c.appEnded(ctx, cp, t, started)
			}
			l, err := parseAppLine(line)
			if err != nil {
				cp.log.Debug().Err(err).Msg("unreadable line from codex app-server")
				continue
			}
			switch l.Kind {
			case appResponse:
				if string(l.ID) != startID {
					cp.answered(l)
				}
				if string(l.ID) == startID {
					if l.Error != "" {
						e := classifyCodexMessage(l.Error)
						return appTurnResult{res: t.result(), err: e, reusable: true}
					}
					if id := appTurnID(l.Result); id != "" && t.turn == "" {
						t.turn = id
					}
					cp.accept(t.turn)
					if interrupted && interruptC != nil {
						// Stopped before codex named the turn: interrupt it now.
						interrupted = false
						interrupt()
					}
				}
			case appRequest:
				a, ok := t.approval(l)
				if !ok || req.Approve == nil {
					cp.log.Warn().Str("method", l.Method).Msg("codex app-server sent a request the gateway does not handle; refused")
					if ok {
						_ = cp.write(appResultLine(l.ID, map[string]any{"decision": "decline"}))
					} else {
						_ = cp.write(appErrorLine(l.ID, "not supported by the agent gateway"))
					}
					continue
				}
				actx, cancel := context.WithCancelCause(ctx)
				pending[string(l.ID)] = cancel
				armHang()
				go func(id json.RawMessage, a appApprovalRequest) {
					v := req.Approve(actx, a.Approval)
					select {
					case verdicts <- appVerdict{id: id, amendment: a.Amendment, v: v}:
					case <-actx.Done():
					}
				}(l.ID, a)
			case appNotification:
				if l.Method == "serverRequest/resolved" {
					var p struct {
						RequestID json.RawMessage `json:"requestId"`
					}
					if json.Unmarshal(l.Params, &p) == nil {
						if cancel, ok := pending[string(p.RequestID)]; ok {
							cancel(ErrApprovalWithdrawn)
							delete(pending, string(p.RequestID))
						}
					}
				}
				for _, ev := range t.observe(l) {
					switch ev.Kind {
					case EventToolUse:
						tools++
					case EventToolResult:
						tools = max(tools-1, 0)
					case EventResult:
						continue // the Result is returned, as exec's adapter does
					}
					emit(ev)
				}
				if t.done {
					return finish()
				}
				armHang()
			}
		case d := <-verdicts:
			if _, ok := pending[string(d.id)]; !ok {
				continue // withdrawn meanwhile
			}
			delete(pending, string(d.id))
			stoppedByDenial = stoppedByDenial || (!d.v.Allow && d.v.Interrupt)
			if err := cp.write(appResultLine(d.id, map[string]any{"decision": appDecision(d.v, d.amendment)})); err != nil {
				cp.log.Debug().Err(err).Msg("could not answer codex's approval request")
			}
			armHang()
		case <-done:
			done = nil
			interrupt()
		case <-interruptC:
			cp.log.Info().Msg("codex did not answer the interrupt in time; killing its process group")
			cp.close("interrupt not answered")
			res := t.result()
			res.Duration = clock.Since(started)
			e := codexContextError(ctx, context.Cause(ctx))
			if e == nil {
				e = &Error{Kind: KindCanceled, Message: "codex was stopped"}
			}
			e.ModelOutput = t.modelOutput
			return appTurnResult{res: res, err: e}
		case <-hangC:
			cp.log.Warn().Int64("silent_for_ms", hang.Milliseconds()).Msg("codex app-server printed nothing while busy; killing it")
			cp.close("hung")
			return appTurnResult{res: t.result(), retry: true, err: &Error{Kind: KindTimeout, Err: errAppHung, ModelOutput: t.modelOutput,
				Message: fmt.Sprintf("codex printed nothing for %v while working (AGENT_HANG_TIMEOUT) and was stopped", hang)}}
		}
	}
}

// appEnded reports a turn whose process ended before turn/completed.
func (c *Codex) appEnded(ctx context.Context, cp *codexAppProc, t *codexAppTurn, started time.Time) appTurnResult {
	exit, waitErr := cp.p.Wait()
	res := t.result()
	res.Duration = c.clock().Since(started)
	if e := codexContextError(ctx, waitErr); e != nil {
		e.ModelOutput = t.modelOutput
		return appTurnResult{res: res, err: e}
	}
	stderr := strings.TrimSpace(cp.p.StderrTail())
	if e := CodexStderrError(stderr); e != nil {
		e.Stderr = stderr
		return appTurnResult{res: res, err: e}
	}
	msg := fmt.Sprintf("codex app-server ended during the turn (%v)", exit)
	if last := lastLine(stderr, 300); last != "" {
		msg += "; stderr: " + last
	}
	return appTurnResult{res: res, retry: true,
		err: &Error{Kind: KindCrashed, Message: msg, Stderr: stderr, ModelOutput: t.modelOutput, Err: errors.Join(errAppGone, waitErr)}}
}

// codexSteerWait bounds how long Steer waits for codex to take a message.
const codexSteerWait = 5 * time.Second

// Steer writes text into the running turn of key's app-server
// (turn/steer): codex adds it to the turn at its next step, and the turn's
// answer covers it. It fails with ErrCannotSteer when no turn runs for key
// or codex refused the message (the turn was ending).
func (c *Codex) Steer(key, text string) error {
	cp, ok := c.appPool().busy(key)
	if !ok {
		return ErrCannotSteer
	}
	cp.steerMu.Lock()
	if cp.active == "" {
		cp.steerMu.Unlock()
		return ErrCannotSteer
	}
	answer := make(chan appLine, 1)
	id, err := cp.request("turn/steer", map[string]any{"threadId": cp.thread, "expectedTurnId": cp.active,
		"input": appTextInput(text, nil)})
	if err == nil {
		if cp.waiters == nil {
			cp.waiters = map[string]chan appLine{}
		}
		cp.waiters[id] = answer
	}
	cp.steerMu.Unlock()
	if err != nil {
		return err
	}
	select {
	case l, ok := <-answer:
		if !ok {
			return fmt.Errorf("%w: the turn ended", ErrCannotSteer)
		}
		if l.Error != "" {
			return fmt.Errorf("%w: %s", ErrCannotSteer, l.Error)
		}
		cp.log.Debug().Int("bytes", len(text)).Msg("message written into the running turn")
		return nil
	case <-c.clock().After(codexSteerWait):
		cp.steerMu.Lock()
		delete(cp.waiters, id)
		cp.steerMu.Unlock()
		return fmt.Errorf("%w: codex did not answer", ErrCannotSteer)
	}
}

// accept sets the turn that takes steered input; "" takes none, and the
// messages still waiting for codex's answer were not taken.
func (cp *codexAppProc) accept(turn string) {
	cp.steerMu.Lock()
	defer cp.steerMu.Unlock()
	cp.active = turn
	if turn == "" {
		for id, ch := range cp.waiters {
			close(ch)
			delete(cp.waiters, id)
		}
	}
}

// answered hands a response to the Steer waiting for it.
func (cp *codexAppProc) answered(l appLine) {
	cp.steerMu.Lock()
	defer cp.steerMu.Unlock()
	if ch, ok := cp.waiters[string(l.ID)]; ok {
		ch <- l
		delete(cp.waiters, string(l.ID))
	}
}
