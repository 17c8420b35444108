package backends

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/proc"
)

// WarmOptions configures claude's interactive processes: claude started
// with stream-json input, kept for its conversation's next turn,
// interrupted with its control protocol and asked for tool approvals over
// the same pipe (DESIGN decision 16).
type WarmOptions struct {
	// Interactive runs claude with stream-json input whenever a turn can
	// use it: to ask for approvals (Request.Approve) or to keep the
	// process (Request.Key with KeepAlive). Off, every turn is one
	// print-mode process with the prompt on stdin and Approve is unused.
	Interactive bool
	// KeepAlive is how long an idle process is kept for its conversation's
	// next turn; zero keeps none (each turn gets its own process, which
	// can still be interrupted softly and ask for approvals).
	KeepAlive time.Duration
	// MaxProcesses caps the processes kept; the least recently used idle
	// one is stopped to make room. Zero means 1.
	MaxProcesses int
	// MemoryCap caps the proportional memory (PSS) of all kept process
	// groups together, in bytes: pages the processes share, claude's
	// binary mostly, count once in the sum rather than once per process
	// as in RSS. Idle processes are stopped, least recently used first,
	// while the sum is over it; busy ones never are. Zero means no cap.
	MemoryCap int64
	// HangTimeout is how long a busy process may print nothing (while no
	// approval is pending and no tool runs) before it is killed and the
	// turn retried once on a fresh process. Zero means no limit.
	HangTimeout time.Duration
	// InterruptWait is how long a stopped turn waits for claude to answer
	// its interrupt with a result before the process group is killed.
	// Zero means DefaultInterruptWait.
	InterruptWait time.Duration
	// Clock drives idle timeouts, hang detection and the interrupt wait;
	// nil is the real clock.
	Clock clockwork.Clock
}

// DefaultInterruptWait is how long a soft stop waits for claude's result.
const DefaultInterruptWait = 5 * time.Second

// Errors of interactive turns, for logs and the retry.
var (
	// errProcessGone is a process that ended (or was found dead) before
	// the turn's result.
	errProcessGone = errors.New("claude process ended before the turn's result")
	// errProcessHung is a busy process that printed nothing for
	// HangTimeout.
	errProcessHung = errors.New("claude process stopped producing output")
)

// claudeProc is one claude process with stream-json input: one turn at a
// time, written to its stdin; its stdout is read by one goroutine into
// lines. The turn fields are used by one goroutine at a time (the pool
// hands a process to one turn).
type claudeProc struct {
	key      string // the conversation it is kept for; "" for none
	settings string // what must match for reuse (flags but the model)
	model    string // the model it uses now
	session  string // the session it holds; "" before its first init
	file     string // its own copy of the system prompt file, removed at close
	p        *proc.Process
	kill     context.CancelFunc
	stdin    io.WriteCloser
	linePipe // stdout: lines, exited, skipped, scanErr
	reqSeq   atomic.Uint64
	log      zerolog.Logger
	closed   sync.Once
	turns    int
	spawned  time.Time
	writeMu  sync.Mutex // serialises writes to stdin

	// modeSwitched is set once an answer switched its permission mode (an
	// allowed ExitPlanMode leaves plan mode; an approved plan goes on in
	// acceptEdits): it no longer matches settings, so it is not kept for
	// another turn. Written by the turn's goroutine only.
	modeSwitched bool

	steerMu sync.Mutex // guards accepting and steered
	// accepting is set while a turn runs and may take steered messages.
	accepting bool
	// steered are the messages written into the running turn that claude
	// has not yet echoed (taken in).
	steered []string
}

// interactiveArgs is claude's command line for a stream-json process.
func interactiveArgs(req Request, systemPromptFile string, approvals bool) []string {
	args := claudeArgs(req, systemPromptFile)
	// claudeArgs starts with -p --output-format stream-json --verbose
	// --include-partial-messages; the input format joins them.
	// --replay-user-messages echoes each user message as claude takes it
	// into the conversation: how a steered message is known to have been
	// injected into the running turn rather than queued for after it.
	args = append([]string{"-p", "--input-format", "stream-json", "--replay-user-messages"}, args[1:]...)
	if approvals {
		args = append(args, "--permission-prompt-tool", "stdio")
	}
	return args
}

// settingsKey is what a process must have been started with to take req:
// everything on its command line but the model, which a control request
// can change.
func settingsKey(bin string, req Request, approvals bool) string {
	r := req
	r.Model, r.SessionID, r.Prompt, r.SystemPrompt, r.SystemPromptFile = "", "", "", "", ""
	return bin + "\x00" + r.WorkDir + "\x00" + strings.Join(claudeArgs(r, ""), "\x00") + "\x00" + strconv.FormatBool(approvals)
}

// spawn starts an interactive claude for req. The process is not in the
// pool yet.
func (c *Claude) spawn(bin string, req Request, approvals bool) (*claudeProc, error) {
	if err := checkWorkDir(req.WorkDir); err != nil {
		return nil, err
	}
	file, remove, err := c.run.keptSystemFile("claude-system-*.md", req)
	if err != nil {
		return nil, err
	}
	p, kill, err := c.run.startKept(runSpec{bin: bin, args: interactiveArgs(req, file, approvals), dir: req.WorkDir,
		env: c.run.env(nil, nil)}, remove)
	if err != nil {
		return nil, err
	}
	cp := &claudeProc{
		key: req.Key, settings: settingsKey(bin, req, approvals), model: req.Model, session: req.SessionID,
		file: file, p: p, kill: kill, stdin: p.Stdin(),
		log:     c.opts.Log.With().Str("backend", "claude").Int("pid", p.Pid()).Logger(),
		spawned: c.clock().Now(),
	}
	cp.read()
	cp.log.Debug().Bool("approvals", approvals).Msg("claude process started")
	return cp, nil
}

// systemText is the system prompt of req: its text, or its file's.
func systemText(req Request) string {
	if req.SystemPrompt != "" {
		return req.SystemPrompt
	}
	if req.SystemPromptFile != "" {
		if b, err := os.ReadFile(req.SystemPromptFile); err == nil {
			return string(b)
		}
	}
	return ""
}

// read starts copying stdout into lines until it ends.
func (cp *claudeProc) read() {
	cp.readLines(cp.p.Stdout(), claudeLineStart, claudeLineMax, nil)
}

// write sends one line to stdin.
func (cp *claudeProc) write(line []byte) error {
	return writeLine(&cp.writeMu, cp.stdin, line, "claude")
}

// request sends a control request and returns its id.
func (cp *claudeProc) request(subtype string, fields map[string]any) (string, error) {
	id := fmt.Sprintf("gw-%s-%d", subtype, cp.reqSeq.Add(1))
	return id, cp.write(controlRequestLine(id, subtype, fields))
}

// close stops the process and its group, once, and removes its files.
func (cp *claudeProc) close(why string) {
	cp.closed.Do(func() {
		cp.log.Debug().Str("why", why).Int("turns", cp.turns).Msg("claude process stopped")
		_ = cp.stdin.Close()
		cp.kill()
		go func() {
			_, _ = cp.p.Wait()
			if cp.file != "" {
				os.Remove(cp.file)
			}
		}()
	})
}

// drain drops stdout lines printed between turns (none are expected).
func (cp *claudeProc) drain() { drainLines(cp.lines, cp.log, "claude") }

// turnResult is how one interactive turn ended.
type turnResult struct {
	res Result
	err error
	// reusable is set when the process finished the turn and may take the
	// next one.
	reusable bool
	// retry is set when the process died or hung before the result: the
	// turn may be run again on a fresh process.
	retry bool
}

// approvalDone carries a verdict back to the turn loop.
type approvalDone struct {
	c controlLine
	v Verdict
}

// turn runs one user turn on cp: it writes the prompt, answers control
// requests, emits events until the result, and handles a stop (ctx ends:
// interrupt, then kill), a hang and the process dying.
func (c *Claude) turn(ctx context.Context, cp *claudeProc, req Request, emit func(Event)) turnResult {
	clock := c.clock()
	toolsSince := time.Now() // the wall clock /proc's start times are on
	cp.turns++
	cp.drain()
	if cp.exited.Load() {
		return turnResult{err: errProcessGone, retry: true}
	}
	if err := cp.write(userMessageWithImages(req.Prompt, req.Images, cp.log)); err != nil {
		cp.log.Debug().Err(err).Msg("could not write the prompt")
		return turnResult{err: errProcessGone, retry: true}
	}
	cp.steerMu.Lock()
	cp.accepting, cp.steered = true, nil
	cp.steerMu.Unlock()
	defer func() {
		cp.steerMu.Lock()
		cp.accepting = false
		cp.steerMu.Unlock()
	}()

	var parser ClaudeParser
	// earlier holds the results of the turns claude ran for steered
	// messages it queued instead of injecting (one result each).
	var earlier []Result
	var garbage garbageLog
	modelOutput := false
	tools := 0                                      // tool calls started and not yet finished
	pending := map[string]context.CancelCauseFunc{} // approvals waiting for a verdict
	verdicts := make(chan approvalDone)
	defer func() {
		for _, cancel := range pending {
			cancel(context.Canceled)
		}
	}()

	hang := c.opts.Warm.HangTimeout
	var hangTimer clockwork.Timer
	var hangC <-chan time.Time
	armHang := func() {
		if hang <= 0 {
			return
		}
		if hangTimer == nil {
			hangTimer = clock.NewTimer(hang)
		} else {
			hangTimer.Reset(hang)
		}
		hangC = hangTimer.Chan()
	}
	pauseHang := func() {
		if hangTimer != nil {
			hangTimer.Stop()
		}
		hangC = nil
	}
	armHang()
	defer pauseHang()

	done := ctx.Done()
	var interruptC <-chan time.Time
	interrupted := false
	stoppedByDenial := false // answered "deny and stop"
	var plans planFiles      // the plan file the turn writes, for ExitPlanMode
	ownEchoed := false       // claude echoed the turn's own prompt
	var fatal *Error
	interrupt := func(why string) {
		if interrupted {
			return
		}
		interrupted = true
		if _, err := cp.request("interrupt", nil); err != nil {
			cp.log.Debug().Err(err).Msg("could not send the interrupt")
		}
		cp.log.Debug().Str("why", why).Msg("interrupt sent")
		wait := c.opts.Warm.InterruptWait
		if wait <= 0 {
			wait = DefaultInterruptWait
		}
		interruptC = clock.After(wait)
	}

	for {
		select {
		case line, ok := <-cp.lines:
			if !ok {
				return c.ended(ctx, cp, &parser, &garbage, modelOutput, fatal)
			}
			if len(pending) == 0 && tools == 0 {
				armHang()
			}
			cl, err := parseControl(line)
			if err != nil {
				cp.log.Warn().Err(err).Msg("unreadable control message from claude")
				continue
			}
			switch cl.Kind {
			case controlRequest:
				if cl.Subtype != "can_use_tool" || req.Approve == nil {
					cp.log.Warn().Str("subtype", cl.Subtype).Msg("claude sent a control request the gateway does not handle; refused")
					_ = cp.write(unsupportedAnswer(cl.RequestID, cl.Subtype))
					continue
				}
				plans.fill(cl.Approval)
				actx, cancel := context.WithCancelCause(ctx)
				pending[cl.RequestID] = cancel
				pauseHang()
				go func(cl controlLine) {
					v := req.Approve(actx, *cl.Approval)
					select {
					case verdicts <- approvalDone{cl, v}:
					case <-actx.Done():
					}
				}(cl)
			case controlCancel:
				if cancel, ok := pending[cl.RequestID]; ok {
					cancel(ErrApprovalWithdrawn)
					delete(pending, cl.RequestID)
				}
			case controlResponse:
				if cl.Subtype == "error" {
					cp.log.Debug().Str("request", cl.RequestID).Str("error", cl.Error).Msg("claude refused a control request")
				}
			default:
				if text, ok := replayedText(line); ok {
					if text == req.Prompt && !ownEchoed {
						ownEchoed = true // the turn's own prompt, not a steered one
					} else {
						cp.taken(text)
					}
					continue
				}
				events, err := parser.Parse(line)
				if err != nil {
					garbage.add(line)
					continue
				}
				for _, ev := range events {
					plans.observe(ev)
					if isModelOutput(ev) {
						modelOutput = true
					}
					switch ev.Kind {
					case EventToolUse:
						tools++
					case EventToolResult:
						tools = max(tools-1, 0)
					}
					emit(ev)
				}
				if id := parser.SessionID(); id != "" {
					cp.session = id
				}
				if tools > 0 {
					// A tool runs (a build, a test suite): silence is
					// expected until its result; QUERY_TIMEOUT_MS bounds it.
					pauseHang()
				}
				if f := parser.Fatal(); f != nil && fatal == nil && ctx.Err() == nil {
					// A refused key, an unreachable API: claude would retry for
					// minutes. Stop the turn; the process is not kept.
					fatal = f
					interrupt("the model API cannot be reached or refused the key")
				}
				if res, err := parser.Result(); !errors.Is(err, errNoResult) {
					if cp.moreToCome() {
						// A steered message was queued: claude answers it as a
						// turn of its own, which is still this event's.
						earlier = append(earlier, res)
						parser = ClaudeParser{}
						if interrupted {
							interrupted = false
							interrupt("stopped")
						}
						continue
					}
					out := c.finished(ctx, cp, &parser, modelOutput, fatal, interrupted || stoppedByDenial)
					if out.reusable && KindOf(out.err) == KindCanceled {
						endStoppedTools(cp.log, cp.p.Pid(), toolsSince, c.opts.KillGrace) // stopped softly: claude is kept
					}
					out.res = mergeResults(earlier, out.res)
					return out
				}
			}
		case d := <-verdicts:
			if _, ok := pending[d.c.RequestID]; !ok {
				continue // withdrawn meanwhile: not answered
			}
			delete(pending, d.c.RequestID)
			stoppedByDenial = stoppedByDenial || (!d.v.Allow && d.v.Interrupt)
			cp.modeSwitched = cp.modeSwitched || (d.v.Allow && (d.v.Mode != "" || d.c.Approval.Tool == ToolExitPlanMode))
			if err := cp.write(approvalAnswer(d.c, d.v)); err != nil {
				cp.log.Debug().Err(err).Msg("could not answer claude's approval request")
			}
			if len(pending) == 0 && tools == 0 {
				armHang()
			}
		case <-done:
			done = nil
			interrupt("stopped")
		case <-interruptC:
			cp.log.Info().Msg("claude did not answer the interrupt in time; killing its process group")
			cp.close("interrupt not answered")
			res, _ := parser.Result()
			if fatal != nil {
				return turnResult{res: res, err: c.withStderr(fatal, cp, modelOutput || parser.Answered())}
			}
			return turnResult{res: res, err: c.stopError(ctx, &parser, cp, modelOutput)}
		case <-hangC:
			cp.log.Warn().Int64("silent_for_ms", hang.Milliseconds()).Msg("claude printed nothing while busy; killing it")
			cp.close("hung")
			res, _ := parser.Result()
			return turnResult{res: res, retry: true, err: &Error{Kind: KindTimeout, Err: errProcessHung, ModelOutput: modelOutput,
				Message: fmt.Sprintf("claude printed nothing for %v while working (AGENT_HANG_TIMEOUT) and was stopped", hang)}}
		}
	}
}

// finished reports a turn whose result line arrived.
func (c *Claude) finished(ctx context.Context, cp *claudeProc, parser *ClaudeParser, modelOutput bool, fatal *Error, interrupted bool) turnResult {
	res, resErr := parser.Result()
	if res.SessionID != "" {
		cp.session = res.SessionID
	}
	if fatal != nil {
		return turnResult{res: res, err: c.withStderr(fatal, cp, modelOutput || parser.Answered())}
	}
	if ctx.Err() != nil && interrupted {
		// Stopped softly: the process and its session stay.
		return turnResult{res: res, err: c.stopError(ctx, parser, cp, modelOutput), reusable: true}
	}
	if interrupted {
		// Stopped by a "deny and stop" answer: the process stays too.
		return turnResult{res: res, err: &Error{Kind: KindCanceled, Message: "the user denied a tool call and stopped the turn"}, reusable: true}
	}
	var e *Error
	if errors.As(resErr, &e) {
		withTail := *e
		// A stale session ends the process; other failures (max turns, a
		// model API error) leave it able to take the next turn.
		return turnResult{res: res, err: &withTail, reusable: e.Kind != KindStaleSession}
	}
	return turnResult{res: res, reusable: true}
}

// stopError is the error of a turn stopped because ctx ended.
func (c *Claude) stopError(ctx context.Context, parser *ClaudeParser, cp *claudeProc, modelOutput bool) error {
	ctxErr := contextError(ctx, context.Cause(ctx))
	if ctxErr == nil {
		ctxErr = &Error{Kind: KindCanceled, Message: "claude was stopped"}
	}
	if retrying := parser.Retrying(); retrying != nil && ctxErr.Kind == KindTimeout {
		retrying.Message = "claude did not finish in time: " + retrying.Message
		retrying.Err = ctxErr.Err
		ctxErr = retrying
	}
	ctxErr.ModelOutput = modelOutput || parser.Answered()
	return ctxErr
}

// withStderr copies e with cp's stderr tail, for logs.
func (c *Claude) withStderr(e *Error, cp *claudeProc, modelOutput bool) error {
	withTail := *e
	withTail.Stderr = strings.TrimSpace(cp.p.StderrTail())
	withTail.ModelOutput = modelOutput
	return &withTail
}

// ended reports a turn whose process ended before its result.
func (c *Claude) ended(ctx context.Context, cp *claudeProc, parser *ClaudeParser, garbage *garbageLog, modelOutput bool, fatal *Error) turnResult {
	exit, waitErr := cp.p.Wait()
	stderr := strings.TrimSpace(cp.p.StderrTail())
	res, _ := parser.Result()
	if fatal != nil {
		return turnResult{res: res, err: c.withStderr(fatal, cp, modelOutput)}
	}
	if ctx.Err() != nil {
		return turnResult{res: res, err: c.stopError(ctx, parser, cp, modelOutput)}
	}
	e := endedWithoutResult(exit, waitErr, cp.scanErr, stderr, garbage, cp.skipped)
	if e.Kind == KindPermission {
		return turnResult{res: res, err: e} // another process would be refused too
	}
	e.Err, e.ModelOutput = errors.Join(errProcessGone, e.Err), modelOutput
	return turnResult{res: res, err: e, retry: true}
}

// ErrCannotSteer is returned by Steer when no turn of the conversation is
// running on a process that can take a message.
var ErrCannotSteer = errors.New("no running turn can take the message")

// Steer writes text into the running turn of key's process, which reads it
// at its next step (with a tool result) or, when the turn was about to end,
// answers it right after as part of the same turn. The turn's result then
// covers both.
func (c *Claude) Steer(key, text string) error {
	cp, busy := c.pool.busy(key)
	if !busy {
		return ErrCannotSteer
	}
	cp.steerMu.Lock()
	defer cp.steerMu.Unlock()
	if !cp.accepting {
		return ErrCannotSteer
	}
	if err := cp.write(userMessage(text)); err != nil {
		return err
	}
	cp.steered = append(cp.steered, text)
	cp.log.Debug().Int("bytes", len(text)).Msg("message written into the running turn")
	return nil
}

// taken records that claude echoed a user message: a steered one is then
// in the conversation.
func (cp *claudeProc) taken(text string) {
	cp.steerMu.Lock()
	defer cp.steerMu.Unlock()
	if i := slices.Index(cp.steered, text); i >= 0 {
		cp.steered = slices.Delete(cp.steered, i, i+1)
	}
}

// moreToCome reports, at a result, whether claude still owes a turn for a
// steered message it queued; if not, the turn takes no more messages.
func (cp *claudeProc) moreToCome() bool {
	cp.steerMu.Lock()
	defer cp.steerMu.Unlock()
	if len(cp.steered) > 0 {
		return true
	}
	cp.accepting = false
	return false
}

// mergeResults folds the results of queued steered turns into the last.
func mergeResults(earlier []Result, last Result) Result {
	if len(earlier) == 0 {
		return last
	}
	var texts []string
	for _, r := range earlier {
		if strings.TrimSpace(r.Text) != "" {
			texts = append(texts, r.Text)
		}
		last.Usage.InputTokens += r.Usage.InputTokens
		last.Usage.OutputTokens += r.Usage.OutputTokens
		last.Usage.CacheReadTokens += r.Usage.CacheReadTokens
		last.Usage.CacheCreationTokens += r.Usage.CacheCreationTokens
		last.Turns += r.Turns
		last.Duration += r.Duration
		last.PermissionDenials = append(r.PermissionDenials, last.PermissionDenials...)
	}
	if strings.TrimSpace(last.Text) != "" {
		texts = append(texts, last.Text)
	}
	last.Text = strings.Join(texts, "\n\n")
	return last
}

// replayedText returns the text of a user message claude echoed
// (--replay-user-messages), and whether line is one.
func replayedText(line []byte) (string, bool) {
	if !bytes.Contains(line, []byte(`"isReplay"`)) {
		return "", false
	}
	var l struct {
		Type     string `json:"type"`
		IsReplay bool   `json:"isReplay"`
		Message  struct {
			Content json.RawMessage `json:"content"`
		} `json:"message"`
	}
	if json.Unmarshal(line, &l) != nil || l.Type != "user" || !l.IsReplay {
		return "", false
	}
	var text string
	if json.Unmarshal(l.Message.Content, &text) == nil {
		return text, true
	}
	// A prompt with images is a list of blocks; its text block is the
	// prompt.
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(l.Message.Content, &blocks) == nil {
		for _, b := range blocks {
			if b.Type == "text" {
				return b.Text, true
			}
		}
	}
	return "", true
}

// setModel switches cp's model with claude's set_model control request,
// waiting for its answer. It reports false when the process did not take
// it (it is then replaced).
func (c *Claude) setModel(cp *claudeProc, model string) bool {
	var fields map[string]any
	if model != "" {
		fields = map[string]any{"model": model}
	}
	id, err := cp.request("set_model", fields)
	if err != nil {
		return false
	}
	timeout := c.clock().After(10 * time.Second)
	for {
		select {
		case line, ok := <-cp.lines:
			if !ok {
				return false
			}
			cl, err := parseControl(line)
			if err != nil || cl.Kind != controlResponse || cl.RequestID != id {
				continue
			}
			if cl.Subtype != "success" {
				cp.log.Info().Str("error", cl.Error).Str("model", model).Msg("claude refused the model change; starting a new process")
				return false
			}
			cp.model = model
			return true
		case <-timeout:
			return false
		}
	}
}

func (c *Claude) clock() clockwork.Clock {
	if c.opts.Warm.Clock != nil {
		return c.opts.Warm.Clock
	}
	return clockwork.NewRealClock()
}
