package backends

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/proc"
)

// Scanner limits for a CLI's stdout: one JSON line per event; a tool
// result can be large, and a line over the maximum is skipped (counted),
// not fatal.
const (
	streamLineStart = 64 << 10
	streamLineMax   = 16 << 20
)

// cliSpec is what the runner must know of one agent CLI: its name for
// errors and logs, and which variables it may see. How to install it
// follows from the name (InstallCommand).
type cliSpec struct {
	// name is the registry name and the CLI's usual binary ("claude").
	name string
	// missing, when set, is the not-found text for bin instead of the
	// install hint: an agent the user names by its command line
	// (ACP_COMMAND) is no package to install.
	missing func(bin string) string
	// envAllow names the variables the CLI may see beyond baseEnv (see
	// FilterEnv).
	envAllow []string
	// quietGarbage logs non-JSON stdout lines at debug level: the CLI
	// prints some as a matter of course (gemini's and pi's start-up
	// notices).
	quietGarbage bool
}

// runner starts the processes of one adapter's CLI the same way for every
// adapter: the binary from Options.Binary or PATH, the environment filtered
// by the CLI's allowlist (and given the agent user's HOME with AGENT_USER),
// each process in its own group as Options.RunAs with the Owner mark (see
// proc), the group killed when the turn's context ends, stdout read a line
// at a time with a bounded stderr tail, and failures mapped to *Error
// with the CLI's name. An adapter keeps only what its CLI does
// differently: its flags, its parser and the meaning of its stream and
// stderr.
//
// A runner holds a pointer to its adapter's Options and is safe for
// concurrent use as long as they are not changed during a run.
type runner struct {
	cli  cliSpec
	opts *Options
}

// newRunner returns the runner of cli for an adapter whose options are
// *opts. It sets opts.Env to what the CLI's user should see (see
// Options.userEnv), once.
func newRunner(cli cliSpec, opts *Options) runner {
	opts.Env = opts.userEnv(opts.Env)
	return runner{cli: cli, opts: opts}
}

// log is the adapter's logger, with the backend's name.
func (r runner) log() zerolog.Logger {
	return r.opts.Log.With().Str("backend", r.cli.name).Logger()
}

// binary resolves the CLI to run: Options.Binary, or else the pinned
// install next to the gateway, or the CLI's name on PATH (LocateCLI). A
// missing binary is KindNotFound with how to install it.
func (r runner) binary() (string, error) {
	path, err := LocateCLI(r.cli.name, r.opts.Binary)
	if err != nil {
		bin := r.opts.Binary
		if bin == "" {
			bin = r.cli.name
		}
		return "", r.notFound(bin, err)
	}
	return path, nil
}

// notFound is the error of a binary that is not there: the CLI's own
// text, or how to install it. The install command names .tools/
// relatively, since the error reaches logs: run it where bin/ is.
func (r runner) notFound(bin string, err error) *Error {
	msg := fmt.Sprintf("%s CLI %q not found: %s", r.cli.name, bin, installHint(r.cli.name, ""))
	if r.cli.missing != nil {
		msg = r.cli.missing(bin)
	}
	return &Error{Kind: KindNotFound, Message: msg, Err: err}
}

// env is the CLI's environment: Options.Env filtered by baseEnv, the
// CLI's allowlist and extra, minus deny and the gateway's secrets.
func (r runner) env(extra, deny []string) []string {
	allow := r.cli.envAllow
	if len(extra) > 0 {
		allow = append(append([]string(nil), allow...), extra...)
	}
	return FilterEnv(r.opts.Env, allow, deny)
}

// tempFile writes text into a new temporary file named by pattern (see
// os.CreateTemp) that the CLI's user can read (Options.share), for a
// persona or settings the CLI reads from a file rather than argv. remove
// deletes it.
func (r runner) tempFile(pattern, text string) (path string, remove func(), err error) {
	path, err = writeTempFile(pattern, text)
	if err == nil {
		if err = r.opts.share(path); err != nil {
			os.Remove(path)
		}
	}
	if err != nil {
		return "", nil, &Error{Kind: KindExecution, Message: "write system prompt file", Err: err}
	}
	return path, func() { os.Remove(path) }, nil
}

// writeTempFile writes text into a new temporary file named by pattern
// (see os.CreateTemp), readable by the gateway's user only.
func writeTempFile(pattern, text string) (string, error) {
	f, err := os.CreateTemp("", pattern)
	if err != nil {
		return "", err
	}
	_, err = f.WriteString(text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// runSpec is one process of the CLI: what differs between runs.
type runSpec struct {
	bin  string // from binary
	args []string
	dir  string
	env  []string // from env, plus what the adapter sets
	// stdin, if not nil, is written to the CLI's stdin, which is then
	// closed (the prompt: never argv). Nil with stdinPipe unset is
	// /dev/null.
	stdin io.Reader
	// stdinPipe keeps stdin open for a long-running process the adapter
	// writes to (proc.Process.Stdin).
	stdinPipe bool
	// interrupt is the signal the group gets first when ctx ends (claude
	// prints its result on SIGINT); zero means SIGTERM.
	interrupt syscall.Signal
}

// start starts the CLI as spec says, in its own process group, as
// Options.RunAs, with Options.KillGrace between SIGTERM and SIGKILL when
// ctx ends. A ctx that ended first is KindTimeout or KindCanceled, a
// missing binary KindNotFound, another failure KindCrashed.
func (r runner) start(ctx context.Context, spec runSpec) (*proc.Process, error) {
	p, err := proc.Start(ctx, proc.Spec{
		Path:       spec.bin,
		Args:       spec.args,
		Dir:        spec.dir,
		Env:        spec.env,
		Stdin:      spec.stdin,
		StdinPipe:  spec.stdinPipe,
		Grace:      r.opts.KillGrace,
		Interrupt:  spec.interrupt,
		Credential: r.opts.credential(),
		Owner:      r.opts.Owner,
	})
	if err == nil {
		return p, nil
	}
	if ctxErr := r.contextError(ctx, context.Cause(ctx)); ctxErr != nil {
		return nil, ctxErr
	}
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, exec.ErrNotFound) {
		return nil, r.notFound(spec.bin, err)
	}
	return nil, &Error{Kind: KindCrashed, Message: "start " + r.cli.name, Err: err}
}

// startKept starts a process that serves more than one turn, with a pipe
// to its stdin. It outlives the context of the turn that started it: kill
// stops it (the pool, a hang, an unanswered interrupt). When it cannot
// start, undo (if not nil) removes what was written for it.
func (r runner) startKept(spec runSpec, undo func()) (p *proc.Process, kill context.CancelFunc, err error) {
	ctx, kill := context.WithCancel(context.Background())
	spec.stdinPipe = true
	if p, err = r.start(ctx, spec); err != nil {
		kill()
		if undo != nil {
			undo()
		}
		return nil, nil, err
	}
	return p, kill, nil
}

// keptSystemFile copies req's system prompt into a file of a kept
// process's own, named by pattern: the turn's file goes with the turn, the
// process stays for the next. Without a system prompt it is "" and remove
// does nothing.
func (r runner) keptSystemFile(pattern string, req Request) (path string, remove func(), err error) {
	text := systemText(req)
	if text == "" {
		return "", func() {}, nil
	}
	return r.tempFile(pattern, text)
}

// runOnce starts one process for a turn, feeds its stdout to parse a line
// at a time, emits the events, waits for it and logs what was skipped. The
// error is start's; what the run itself ended with is the adapter's to
// read from the output and its parser.
func (r runner) runOnce(ctx context.Context, spec runSpec, parse func([]byte) ([]Event, error), emit func(Event)) (streamOutput, error) {
	p, err := r.start(ctx, spec)
	if err != nil {
		return streamOutput{}, err
	}
	log := r.log().With().Int("pid", p.Pid()).Logger()
	out := readStream(p, streamLineStart, streamLineMax, parse, emit, log)
	if out.Garbage.n > 0 {
		ev := log.Warn()
		if r.cli.quietGarbage {
			ev = log.Debug()
		}
		ev.Int("skipped", out.Garbage.n).Msgf("%s printed lines that are not JSON events", r.cli.name)
	}
	if out.Skipped > 0 {
		log.Warn().Int("skipped", out.Skipped).Int("max_bytes", streamLineMax).Msgf("skipped %s output lines over the size limit", r.cli.name)
	}
	return out, nil
}

// contextError turns the end of ctx into KindTimeout or KindCanceled, or
// returns nil if ctx has not ended. cause is what stopped the process.
func (r runner) contextError(ctx context.Context, cause error) *Error {
	return cliContextError(r.cli.name, ctx, cause)
}

func cliContextError(name string, ctx context.Context, cause error) *Error {
	if ctx.Err() == nil {
		return nil
	}
	if cause == nil {
		cause = context.Cause(ctx)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &Error{Kind: KindTimeout, Message: name + " did not finish in time and was stopped", Err: cause}
	}
	return &Error{Kind: KindCanceled, Message: name + " was stopped", Err: cause}
}

// stopped is the error of a run whose context ended before the stream said
// how the turn ended, or nil when ctx has not ended: what stopped the turn
// is the context, with what the model had answered and stderr's tail.
func (r runner) stopped(ctx context.Context, out streamOutput) *Error {
	e := r.contextError(ctx, out.WaitErr)
	if e != nil {
		e.ModelOutput = out.ModelOutput
		e.Stderr = out.Stderr
	}
	return e
}

// streamError is resErr, the failure the stream reported, as a copy
// carrying stderr's tail (the one in the result event is already out
// there); nil when resErr is not an *Error.
func streamError(resErr error, stderr string) *Error {
	var e *Error
	if !errors.As(resErr, &e) {
		return nil
	}
	withTail := *e
	withTail.Stderr = stderr
	return &withTail
}

// ended explains a CLI that exited without the stream saying how the
// turn ended: "<cli> <how> (<exit>)", the wait error, note (the adapter's
// reading of stderr) or else stderr's last line, the last non-JSON
// output, the lines skipped and the read error.
func (r runner) ended(out streamOutput, how, note string) *Error {
	msg := fmt.Sprintf("%s %s (%v)", r.cli.name, how, out.Exit)
	if out.WaitErr != nil {
		msg += ": " + out.WaitErr.Error()
	}
	if note != "" {
		msg += "; " + note
	} else if last := lastLine(out.Stderr, 300); last != "" {
		msg += "; stderr: " + last
	}
	if g := out.Garbage.text(); g != "" {
		msg += "; last non-JSON output: " + g
	}
	if out.Skipped > 0 {
		msg += fmt.Sprintf("; skipped %d output lines over %d bytes", out.Skipped, streamLineMax)
	}
	scanErr := out.ScanErr
	if scanErr != nil {
		scanErr = fmt.Errorf("read %s output: %w", r.cli.name, scanErr)
	}
	return &Error{Kind: KindCrashed, Message: msg, Stderr: out.Stderr, Err: scanErr}
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

// garbageLog counts skipped stdout lines and keeps the start of the last
// few, for the error message when a CLI dies without a result.
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
