package backends

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/proc"
)

// piRPC runs pi turns on `pi --mode rpc` processes kept warm per
// conversation (DESIGN decisions 16 and 26): the prompt goes to a running
// process as a command, its agent events feed the turn card, a stop sends
// pi's abort command (the process and its session stay; the process group
// is killed only when pi does not answer), and the process waits for the
// conversation's next prompt for AGENT_KEEP_ALIVE under the caps of
// warmPool.
//
// pi's RPC mode has no permission prompts of its own: a turn that may ask
// (Request.Approve) loads the gateway's approval extension, whose dialogs
// become Request.Approve calls (pi_approve.go). Other extensions' dialogs
// (extension_ui_request) cannot be shown; each is dismissed, which an
// extension reads as "no".
type piRPC struct {
	opts Options
	run  runner
	pool *warmPool[*piRPCProc]

	// extMu guards ext, the approval extension's file, written once for
	// every process: pi compiles an extension into a cache file named by
	// its path, so one path keeps that cache from growing with each start.
	extMu sync.Mutex
	ext   string
}

// extension returns the approval extension's file, written when it is
// not there yet (or was removed meanwhile, by a temp cleaner).
func (r *piRPC) extension() (string, error) {
	r.extMu.Lock()
	defer r.extMu.Unlock()
	if r.ext != "" {
		if b, err := os.ReadFile(r.ext); err == nil && string(b) == piApproveJS {
			return r.ext, nil
		}
		os.Remove(r.ext)
	}
	path, _, err := r.run.tempFile("pi-gateway-approve-*.js", piApproveJS)
	if err != nil {
		return "", err
	}
	r.ext = path
	return path, nil
}

// close stops every process and removes the extension's file.
func (r *piRPC) close() {
	r.pool.close()
	r.extMu.Lock()
	defer r.extMu.Unlock()
	if r.ext != "" {
		os.Remove(r.ext)
		r.ext = ""
	}
}

func newPiRPC(opts Options) *piRPC {
	r := &piRPC{opts: opts, pool: newWarmPool[*piRPCProc]("pi", opts.Warm, opts.Log)}
	r.run = newRunner(piCLI, &r.opts)
	return r
}

// wants reports whether req runs on an RPC process: warm processes are on
// (Interactive, AGENT_KEEP_ALIVE) and the turn belongs to a conversation.
// A turn that may ask for approvals runs on one too, kept or not: only
// there can pi's tool calls wait for a Discord button.
func (r *piRPC) wants(req Request) bool {
	return r.opts.Warm.Interactive && (piAsks(req) || (r.opts.Warm.KeepAlive > 0 && req.Key != ""))
}

// Errors of RPC turns, for logs and the retry.
var (
	// errPiRPCGone is a process that ended before the turn did.
	errPiRPCGone = errors.New("pi process ended before the turn's end")
	// errPiRPCHung is a busy process that printed nothing for HangTimeout.
	errPiRPCHung = errors.New("pi process stopped producing output")
)

// piRPCStartWait bounds how long a new process may take to answer its
// first command (pi loads its extensions and models first).
const piRPCStartWait = 60 * time.Second

// piRPCProc is one `pi --mode rpc` process: one turn at a time, written to
// its stdin; its stdout is read by one goroutine into lines. The turn
// fields are used by one goroutine at a time (the pool hands a process to
// one turn).
type piRPCProc struct {
	key      string // the conversation it is kept for; "" for none
	settings string // what must match for reuse
	session  string // the session pi holds (get_state's sessionId)
	model    string // "provider/id" pi reported
	file     string // its own copy of the system prompt file, removed at close
	p        *proc.Process
	kill     context.CancelFunc
	stdin    io.WriteCloser
	linePipe // stdout: lines, exited, skipped, scanErr
	seq      atomic.Uint64
	log      zerolog.Logger
	closed   sync.Once
	writeMu  sync.Mutex // serialises writes to stdin
	turns    int

	steerMu sync.Mutex // guards steerable and steers
	// steerable is set while the running turn can take a steered message
	// (piRPCTurn.Steerable, and no stop under way).
	steerable bool
	// steers are the Steer calls waiting for pi's answer to their steer
	// command, by command id; closed unanswered when the turn ends.
	steers map[string]chan piRPCLine
}

// steerAnswered hands pi's answer to a steer command to its Steer call,
// and reports whether l was one.
func (pp *piRPCProc) steerAnswered(l piRPCLine) bool {
	pp.steerMu.Lock()
	defer pp.steerMu.Unlock()
	ch, ok := pp.steers[l.ID]
	if ok {
		ch <- l
		delete(pp.steers, l.ID)
	}
	return ok
}

// endSteering refuses further steered messages and releases the Steer
// calls still waiting (they fail); it returns how many there were.
func (pp *piRPCProc) endSteering() int {
	pp.steerMu.Lock()
	defer pp.steerMu.Unlock()
	pp.steerable = false
	n := len(pp.steers)
	for id, ch := range pp.steers {
		close(ch)
		delete(pp.steers, id)
	}
	return n
}

// setSteerable says whether Steer may write into the running turn.
func (pp *piRPCProc) setSteerable(on bool) {
	pp.steerMu.Lock()
	pp.steerable = on
	pp.steerMu.Unlock()
}

func (pp *piRPCProc) warmKey() string      { return pp.key }
func (pp *piRPCProc) warmSettings() string { return pp.settings }
func (pp *piRPCProc) warmSession() string  { return pp.session }
func (pp *piRPCProc) warmPgid() int        { return pp.p.Pid() }
func (pp *piRPCProc) warmExited() bool     { return pp.exited.Load() }
func (pp *piRPCProc) warmWait()            { _, _ = pp.p.Wait() }

// warmClose stops the process and its group, once, and removes its file.
func (pp *piRPCProc) warmClose(why string) {
	pp.closed.Do(func() {
		pp.log.Debug().Str("why", why).Int("turns", pp.turns).Msg("pi process stopped")
		_ = pp.stdin.Close()
		pp.kill()
		go func() {
			_, _ = pp.p.Wait()
			if pp.file != "" {
				os.Remove(pp.file)
			}
		}()
	})
}

// piRPCArgs is pi's command line for an RPC process. The session and the
// model are fixed for the process's life. A turn that may ask for
// approvals (piAsks) gets every built-in tool and the approval extension
// (extensionFile, left out when ""), told which tools ask first.
func piRPCArgs(req Request, systemPromptFile, extensionFile string) []string {
	args := []string{"--mode", "rpc", "--offline"}
	if systemPromptFile != "" {
		args = append(args, "--append-system-prompt", systemPromptFile)
	}
	if piAsks(req) {
		tools := slices.Clone(piAllTools)
		for _, t := range piMapTools(req.AllowedTools) {
			if !slices.Contains(tools, t) {
				tools = append(tools, t)
			}
		}
		args = append(args, "--tools", strings.Join(tools, ","))
		if extensionFile != "" {
			args = append(args, "-e", extensionFile)
		}
		if ask := piAskTools(req); len(ask) > 0 {
			args = append(args, "--gateway-ask", strings.Join(ask, ","))
		}
	} else {
		args = append(args, piToolArgs(req.PermissionMode, req.AllowedTools)...)
	}
	if req.SessionID != "" {
		args = append(args, "--session", req.SessionID)
	}
	if req.Model != "" {
		args = append(args, "--model", req.Model)
	}
	return args
}

// piRPCSettings is what a kept process must have been started with to
// take req: everything on its command line but the session and the
// system prompt (as for claude, a persona edited meanwhile reaches the
// next new process), with whether its turns ask for approvals.
func piRPCSettings(bin string, req Request) string {
	r := req
	r.SessionID, r.Prompt, r.SystemPrompt, r.SystemPromptFile = "", "", "", ""
	return bin + "\x00" + r.WorkDir + "\x00" + strings.Join(piRPCArgs(r, "", ""), "\x00")
}

// Run runs req on the conversation's kept process or a new one, retrying
// once on a fresh process (resuming the session) when the first dies or
// hangs before the turn's end.
func (r *piRPC) Run(ctx context.Context, req Request, emit func(Event)) (Result, error) {
	bin, err := r.run.binary()
	if err != nil {
		return Result{}, err
	}
	pp, err := r.acquire(ctx, bin, req)
	if err != nil {
		return Result{}, err
	}
	warm := pp.turns > 0
	started := r.clock().Now()
	toolsSince := time.Now() // the wall clock /proc's start times are on
	out := r.turn(ctx, pp, req, emit)
	if out.reusable && KindOf(out.err) == KindCanceled {
		endStoppedTools(pp.log, pp.p.Pid(), toolsSince, r.opts.KillGrace) // stopped softly: pi is kept
	}
	if out.retry && ctx.Err() == nil {
		warm = false
		r.pool.discard(pp, "died or hung during a turn")
		if pp.session != "" {
			req.SessionID = pp.session
		}
		r.opts.Log.Warn().Str("backend", "pi").Err(out.err).Str("session", req.SessionID).
			Int64("after_ms", r.clock().Since(started).Milliseconds()).Msg("pi process failed during a turn; retrying once on a fresh process")
		emit(Event{Kind: EventRetry, Attempt: 1, MaxAttempts: 1,
			Err: &Error{Kind: KindCrashed, Message: "the agent's process stopped responding; retrying on a fresh one"}})
		if pp, err = r.spawn(ctx, bin, req); err != nil {
			return out.res, err
		}
		r.pool.add(pp)
		out = r.turn(ctx, pp, req, emit)
	}
	r.pool.release(pp, out.reusable)
	out.res.Warm = warm
	out.res.Duration = r.clock().Since(started)
	if out.err != nil {
		return out.res, out.err
	}
	return out.res, nil
}

// acquire returns the conversation's kept process when it fits req (its
// settings and session), else a new one, in the pool.
func (r *piRPC) acquire(ctx context.Context, bin string, req Request) (*piRPCProc, error) {
	if pp := r.pool.take(req.Key, piRPCSettings(bin, req), req.SessionID); pp != nil {
		return pp, nil
	}
	pp, err := r.spawn(ctx, bin, req)
	if err != nil {
		return nil, err
	}
	r.pool.add(pp)
	return pp, nil
}

// spawn starts `pi --mode rpc` for req and waits for its state: the
// session it holds. The process is not in the pool yet. pi stops before
// answering when --session names no session it has, or no model or key is
// set up: that failure is read from its stderr.
func (r *piRPC) spawn(ctx context.Context, bin string, req Request) (*piRPCProc, error) {
	if err := checkWorkDir(req.WorkDir); err != nil {
		return nil, err
	}
	file, remove, err := r.run.keptSystemFile("pi-system-*.md", req)
	if err != nil {
		return nil, err
	}
	ext := ""
	if piAsks(req) {
		var err error
		if ext, err = r.extension(); err != nil {
			remove()
			return nil, err
		}
	}
	p, kill, err := r.run.startKept(runSpec{bin: bin, args: piRPCArgs(req, file, ext), dir: req.WorkDir,
		env: r.run.env(nil, nil)}, remove)
	if err != nil {
		return nil, err
	}
	pp := &piRPCProc{
		key: req.Key, settings: piRPCSettings(bin, req), session: req.SessionID, model: req.Model,
		file: file, p: p, kill: kill, stdin: p.Stdin(),
		log: r.opts.Log.With().Str("backend", "pi").Int("pid", p.Pid()).Logger(),
	}
	pp.read()
	if err := r.handshake(ctx, pp); err != nil {
		pp.warmClose("did not start")
		return nil, err
	}
	pp.log.Debug().Str("session", pp.session).Msg("pi rpc process started")
	return pp, nil
}

// handshake asks a new process for its state and records its session.
func (r *piRPC) handshake(ctx context.Context, pp *piRPCProc) error {
	id, err := pp.send("get_state")
	if err != nil {
		return r.startFailure(ctx, pp)
	}
	timeout := r.clock().After(piRPCStartWait)
	for {
		select {
		case line, ok := <-pp.lines:
			if !ok {
				return r.startFailure(ctx, pp)
			}
			l, err := parsePiRPC(line)
			if err != nil || l.Kind != piRPCResponse || l.ID != id {
				continue
			}
			if !l.Success {
				return &Error{Kind: KindCrashed, Message: "pi refused get_state: " + l.Error}
			}
			st := parsePiRPCState(l.Data)
			if st.SessionID != "" {
				pp.session = st.SessionID
			}
			if st.Model != "" {
				pp.model = st.Model
			}
			return nil
		case <-ctx.Done():
			return contextError(ctx, context.Cause(ctx))
		case <-timeout:
			return &Error{Kind: KindTimeout, Message: fmt.Sprintf("pi did not answer within %v of starting", piRPCStartWait)}
		}
	}
}

// startFailure explains a process that ended before answering.
func (r *piRPC) startFailure(ctx context.Context, pp *piRPCProc) error {
	exit, waitErr := pp.p.Wait()
	stderr := strings.TrimSpace(pp.p.StderrTail())
	if e := contextError(ctx, context.Cause(ctx)); e != nil {
		return e
	}
	if e := piFailure(stderr, ""); e != nil {
		e.Stderr = stderr
		return e
	}
	msg := fmt.Sprintf("pi ended before it answered (%v)", exit)
	if last := lastLine(stderr, 300); last != "" {
		msg += "; stderr: " + last
	}
	return &Error{Kind: KindCrashed, Message: msg, Stderr: stderr, Err: waitErr}
}

// read starts copying stdout into lines until it ends. Lines are split on
// \n only, as pi's protocol asks (a JSON string may hold U+2028).
func (pp *piRPCProc) read() {
	pp.readLines(pp.p.Stdout(), 64<<10, piRPCLineMax, nil)
}

// piRPCLineMax bounds a line of pi's stdout: every message_update repeats
// the message so far; a longer line is skipped, not fatal.
const piRPCLineMax = 16 << 20

// write sends one line to stdin.
func (pp *piRPCProc) write(line []byte) error {
	return writeLine(&pp.writeMu, pp.stdin, line, "pi")
}

// nextID returns a fresh command id.
func (pp *piRPCProc) nextID(typ string) string {
	return fmt.Sprintf("gw-%s-%d", typ, pp.seq.Add(1))
}

// send writes a command without arguments and returns its id.
func (pp *piRPCProc) send(typ string) (string, error) {
	id := pp.nextID(typ)
	return id, pp.write(piRPCCommand(id, typ))
}

// drain drops lines printed between turns (a late response, a retry's
// events after a stop).
func (pp *piRPCProc) drain() { drainLines(pp.lines, pp.log, "pi") }

// piRPCOutcome is how one turn on a process ended.
type piRPCOutcome struct {
	res Result
	err error
	// reusable is set when the process finished the turn and may take the
	// next one.
	reusable bool
	// retry is set when the process died or hung before the turn's end.
	retry bool
}

// piRPCRun is the state of one turn on a process, kept by its loop.
type piRPCRun struct {
	pp   *piRPCProc
	emit func(Event)
	turn *piRPCTurn

	promptID, stateID, statsID, abortID string
	contextTokens, contextWindow        int64
	tools                               int // tool calls started and not finished
	modelOutput                         bool
	garbage                             garbageLog

	// approve is the turn's Request.Approve; pending holds the approvals
	// being asked, by dialog id, and verdicts brings their answers to the
	// turn's loop. stoppedByDenial is set when a denial also stopped the
	// turn.
	approve         ApproveFunc
	pending         map[string]context.CancelCauseFunc
	verdicts        chan piRPCVerdict
	stoppedByDenial bool
}

// piRPCVerdict is Request.Approve's answer to one approval dialog.
type piRPCVerdict struct {
	id string
	v  Verdict
}

// ask shows the approval a dialog asks for: Request.Approve runs on its
// own goroutine, and its verdict reaches the turn's loop unless the turn
// has withdrawn the question meanwhile.
func (t *piRPCRun) ask(ctx context.Context, id string, a Approval) {
	actx, cancel := context.WithCancelCause(ctx)
	t.pending[id] = cancel
	go func() {
		v := t.approve(actx, a)
		select {
		case t.verdicts <- piRPCVerdict{id: id, v: v}:
		case <-actx.Done():
		}
	}()
}

// withdraw ends the approvals still asked (the turn is over).
func (t *piRPCRun) withdraw() {
	for id, cancel := range t.pending {
		cancel(ErrApprovalWithdrawn)
		delete(t.pending, id)
	}
}

// turn runs one prompt on pp: writes it, emits its events, settles its
// end, and handles a stop (ctx ends: abort, then kill), a hang and the
// process dying.
func (r *piRPC) turn(ctx context.Context, pp *piRPCProc, req Request, emit func(Event)) piRPCOutcome {
	clock := r.clock()
	pp.turns++
	pp.drain()
	if pp.exited.Load() {
		return piRPCOutcome{err: errPiRPCGone, retry: true}
	}
	t := &piRPCRun{pp: pp, emit: emit, turn: newPiRPCTurn(),
		approve: req.Approve, pending: map[string]context.CancelCauseFunc{}, verdicts: make(chan piRPCVerdict)}
	defer t.withdraw()
	for _, ev := range t.turn.Start(pp.session) {
		emit(ev)
	}
	t.promptID = pp.nextID("prompt")
	if err := pp.write(piRPCPrompt(t.promptID, req.Prompt, req.Images)); err != nil {
		pp.log.Debug().Err(err).Msg("could not write the prompt")
		return piRPCOutcome{err: errPiRPCGone, retry: true}
	}

	defer func() { _ = pp.endSteering() }()

	hang := &piRPCHang{clock: clock, after: r.opts.Warm.HangTimeout}
	hang.arm()
	defer hang.pause()

	done := ctx.Done()
	var abortC <-chan time.Time
	abort := func() {
		pp.setSteerable(false)
		t.abortID = pp.nextID("abort")
		if err := pp.write(piRPCCommand(t.abortID, "abort")); err != nil {
			pp.log.Debug().Err(err).Msg("could not send the abort")
		}
		wait := r.opts.Warm.InterruptWait
		if wait <= 0 {
			wait = DefaultInterruptWait
		}
		abortC = clock.After(wait)
	}
	for {
		select {
		case line, ok := <-pp.lines:
			if !ok {
				return t.ended(ctx)
			}
			if out, over := t.line(ctx, line); over {
				return out
			}
			if t.tools > 0 {
				// A tool runs (a build, a test suite): silence is expected.
				hang.pause()
			} else {
				hang.arm()
			}
		case <-done:
			done = nil
			if t.abortID == "" {
				abort()
			}
		case d := <-t.verdicts:
			if _, ok := t.pending[d.id]; !ok {
				continue // withdrawn meanwhile
			}
			delete(t.pending, d.id)
			if err := pp.write(piRPCDialogAnswer(d.id, piApproveAnswer(d.v))); err != nil {
				pp.log.Debug().Err(err).Msg("could not answer the approval dialog")
			}
			if !d.v.Allow && d.v.Interrupt && t.abortID == "" {
				// Denied and stopped: pi blocks the call, then aborts
				// the run; the process and its session stay.
				t.stoppedByDenial = true
				abort()
			}
		case <-abortC:
			pp.log.Info().Msg("pi did not answer the abort in time; killing its process group")
			pp.warmClose("abort not answered")
			res, _ := t.turn.Result()
			return piRPCOutcome{res: res, err: t.stopError(ctx)}
		case <-hang.c:
			pp.log.Warn().Int64("silent_for_ms", hang.after.Milliseconds()).Msg("pi printed nothing while busy; killing it")
			pp.warmClose("hung")
			res, _ := t.turn.Result()
			return piRPCOutcome{res: res, retry: true, err: &Error{Kind: KindTimeout, Err: errPiRPCHung, ModelOutput: t.modelOutput,
				Message: fmt.Sprintf("pi printed nothing for %v while working (AGENT_HANG_TIMEOUT) and was stopped", hang.after)}}
		}
	}
}

// piRPCHang fires when a busy process has printed nothing for after
// (AGENT_HANG_TIMEOUT); zero never fires. c is nil while paused.
type piRPCHang struct {
	clock clockwork.Clock
	after time.Duration
	timer clockwork.Timer
	c     <-chan time.Time
}

// arm starts the wait afresh.
func (h *piRPCHang) arm() {
	if h.after <= 0 {
		return
	}
	if h.timer == nil {
		h.timer = h.clock.NewTimer(h.after)
	} else {
		h.timer.Reset(h.after)
	}
	h.c = h.timer.Chan()
}

// pause stops the wait until the next arm.
func (h *piRPCHang) pause() {
	if h.timer != nil {
		h.timer.Stop()
	}
	h.c = nil
}

// line handles one stdout line; over is set when the turn has ended.
func (t *piRPCRun) line(ctx context.Context, line []byte) (out piRPCOutcome, over bool) {
	l, err := parsePiRPC(line)
	if err != nil {
		t.garbage.add(line)
		return out, false
	}
	switch l.Kind {
	case piRPCResponse:
		return t.response(ctx, l)
	case piRPCDialog:
		if a, ok := parsePiApproval(l.Title); ok && l.Method == "select" && t.approve != nil {
			if ctx.Err() != nil {
				// Stopped: the abort under way blocks the call; nobody is
				// asked about it.
				if err := t.pp.write(piRPCDialogCancel(l.ID)); err != nil {
					t.pp.log.Debug().Err(err).Msg("could not dismiss the dialog")
				}
				return out, false
			}
			t.ask(ctx, l.ID, a)
			return out, false
		}
		t.pp.log.Info().Str("method", l.Method).Str("title", l.Title).
			Msg("a pi extension asked the user something; the gateway cannot show it and dismissed it")
		if err := t.pp.write(piRPCDialogCancel(l.ID)); err != nil {
			t.pp.log.Debug().Err(err).Msg("could not dismiss the dialog")
		}
	case piRPCEvent:
		events, err := t.turn.Event(l, line)
		if err != nil {
			t.garbage.add(line)
			return out, false
		}
		for _, ev := range events {
			if isModelOutput(ev) {
				t.modelOutput = true
			}
			switch ev.Kind {
			case EventToolUse:
				t.tools++
			case EventToolResult:
				t.tools = max(t.tools-1, 0)
			}
			t.emit(ev)
		}
		t.pp.setSteerable(t.turn.Steerable() && t.abortID == "")
		if t.turn.AgentEnded() && t.stateID == "" {
			t.settle()
		}
	}
	return out, false
}

// settle asks pi, after an agent_end, whether anything follows (a retry,
// a compaction), and for the context it fills.
func (t *piRPCRun) settle() {
	var err error
	if t.statsID, err = t.pp.send("get_session_stats"); err == nil {
		t.stateID, err = t.pp.send("get_state")
	}
	if err != nil {
		t.pp.log.Debug().Err(err).Msg("could not ask pi for its state")
	}
}

// response handles the answer to a command.
func (t *piRPCRun) response(ctx context.Context, l piRPCLine) (piRPCOutcome, bool) {
	switch l.ID {
	case t.promptID:
		if l.Success {
			return piRPCOutcome{}, false
		}
		// pi refused the prompt before running it (no model, no key).
		e := classifyPiText(l.Error)
		if e.Kind == "" {
			e.Kind = KindExecution
		}
		res, _ := t.turn.Result()
		return piRPCOutcome{res: res, err: e, reusable: e.Kind != KindAuth}, true
	case t.statsID:
		t.contextTokens, t.contextWindow = piRPCContext(l.Data)
	case t.stateID:
		t.stateID = ""
		st := parsePiRPCState(l.Data)
		if !t.turn.Settled(st) {
			// A retry or a compaction runs: its agent_end or
			// compaction_end asks again.
			return piRPCOutcome{}, false
		}
		if st.SessionID != "" {
			t.pp.session = st.SessionID
		}
		refused := t.pp.endSteering()
		out := t.finished(ctx)
		if queued := max(t.turn.Queued(), st.PendingMsgs); queued > 0 {
			t.leftover(&out, queued, refused > 0)
		}
		return out, true
	case t.abortID:
		// pi answers abort once the agent is idle; the agent_end before
		// it settles the turn.
	default:
		t.pp.steerAnswered(l)
	}
	return piRPCOutcome{}, false
}

// leftover handles steered messages pi still holds when the run ended (one
// steered in the moment between pi's last look at its queue and the run's
// end, or the run failed or was stopped first). pi would inject them at
// the start of the process's next prompt. After a failed or stopped turn,
// or when a Steer call was told the turn had ended, the gateway runs such
// a message as a prompt of its own, so the process is not kept, or the
// model would get it twice; otherwise the gateway counts it answered, so
// the process is kept and pi answers it with the next prompt.
func (t *piRPCRun) leftover(out *piRPCOutcome, queued int, refused bool) {
	if out.err != nil || refused {
		out.reusable = false
		t.pp.log.Info().Int("queued", queued).Msg("pi still held steered messages when the turn failed or was stopped; its process is not kept")
		return
	}
	t.pp.log.Warn().Int("queued", queued).Msg("pi still held steered messages when the turn ended; pi takes them with the conversation's next prompt")
}

// finished reports a turn that pi has finished with.
func (t *piRPCRun) finished(ctx context.Context) piRPCOutcome {
	res, resErr := t.turn.Result()
	if res.SessionID == "" {
		res.SessionID = t.pp.session
	}
	res.Model = t.pp.model
	res.ContextTokens, res.ContextWindow = t.contextTokens, t.contextWindow
	if ctx.Err() != nil {
		// Stopped softly: the process and its session stay.
		return piRPCOutcome{res: res, err: t.stopError(ctx), reusable: true}
	}
	if t.stoppedByDenial {
		e := &Error{Kind: KindCanceled, Message: "the user denied a tool call and stopped the turn", ModelOutput: t.modelOutput || t.turn.Answered()}
		return piRPCOutcome{res: res, err: e, reusable: true}
	}
	var e *Error
	if errors.As(resErr, &e) {
		withTail := *e
		withTail.ModelOutput = t.modelOutput
		t.emit(Event{Kind: EventResult, SessionID: res.SessionID, Result: &res, Err: &withTail})
		return piRPCOutcome{res: res, err: &withTail, reusable: e.Kind != KindStaleSession && e.Kind != KindAuth}
	}
	t.emit(Event{Kind: EventResult, SessionID: res.SessionID, Result: &res})
	return piRPCOutcome{res: res, reusable: true}
}

// stopError is the error of a turn stopped because ctx ended.
func (t *piRPCRun) stopError(ctx context.Context) error {
	e := contextError(ctx, context.Cause(ctx))
	if e == nil {
		e = &Error{Kind: KindCanceled, Message: "pi was stopped"}
	}
	e.ModelOutput = t.modelOutput || t.turn.Answered()
	return e
}

// ended reports a turn whose process ended before the turn did.
func (t *piRPCRun) ended(ctx context.Context) piRPCOutcome {
	exit, waitErr := t.pp.p.Wait()
	stderr := strings.TrimSpace(t.pp.p.StderrTail())
	res, _ := t.turn.Result()
	if ctx.Err() != nil {
		return piRPCOutcome{res: res, err: t.stopError(ctx)}
	}
	if e := piFailure(stderr, t.garbage.text()); e != nil {
		e.Stderr = stderr
		return piRPCOutcome{res: res, err: e}
	}
	msg := fmt.Sprintf("pi ended during the turn (%v)", exit)
	if last := lastLine(stderr, 300); last != "" {
		msg += "; stderr: " + last
	}
	if g := t.garbage.text(); g != "" {
		msg += "; last non-JSON output: " + g
	}
	if t.pp.skipped > 0 {
		msg += fmt.Sprintf("; skipped %d output lines over %d bytes", t.pp.skipped, piRPCLineMax)
	}
	cause := errors.Join(errPiRPCGone, waitErr)
	if t.pp.scanErr != nil {
		cause = errors.Join(cause, fmt.Errorf("read pi output: %w", t.pp.scanErr))
	}
	e := &Error{Kind: KindCrashed, Message: msg, Stderr: stderr, Err: cause, ModelOutput: t.modelOutput}
	return piRPCOutcome{res: res, err: e, retry: true}
}

func (r *piRPC) clock() clockwork.Clock {
	if r.opts.Warm.Clock != nil {
		return r.opts.Warm.Clock
	}
	return clockwork.NewRealClock()
}

// Steer writes text into the running turn of key's pi process with pi's
// steer command: pi takes it after the model's current step, before its
// next call, and answers it in the same run; the turn's reply then holds
// both answers. It fails with ErrCannotSteer when no turn runs for key on
// a warm process, or pi has given its last answer already (it would not
// look at the message before the run ends).
func (p *Pi) Steer(key, text string) error {
	if p.rpc == nil {
		return ErrCannotSteer
	}
	pp, ok := p.rpc.pool.busy(key)
	if !ok {
		return ErrCannotSteer
	}
	pp.steerMu.Lock()
	if !pp.steerable {
		pp.steerMu.Unlock()
		return ErrCannotSteer
	}
	id := pp.nextID("steer")
	answer := make(chan piRPCLine, 1)
	if pp.steers == nil {
		pp.steers = map[string]chan piRPCLine{}
	}
	pp.steers[id] = answer
	err := pp.write(piRPCSteer(id, text))
	if err != nil {
		delete(pp.steers, id)
	}
	pp.steerMu.Unlock()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCannotSteer, err)
	}
	// pi answers once the message is in its queue; the turn's loop,
	// which reads pi's output, hands the answer over.
	l, ok := <-answer
	if !ok {
		return fmt.Errorf("%w: the turn ended", ErrCannotSteer)
	}
	if !l.Success {
		return fmt.Errorf("%w: %s", ErrCannotSteer, l.Error)
	}
	pp.log.Debug().Int("bytes", len(text)).Msg("message written into the running turn")
	return nil
}

// Close stops every warm pi process. Turns running now finish on theirs,
// which are then not kept.
func (p *Pi) Close() error {
	if p.rpc != nil {
		p.rpc.close()
	}
	return nil
}

// Warm reports the pi processes kept warm now.
func (p *Pi) Warm() WarmStats {
	if p.rpc == nil {
		return WarmStats{}
	}
	return p.rpc.pool.stats()
}
