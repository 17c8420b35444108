// Package proc starts child processes so that nothing they spawn outlives
// them (Linux).
//
// Every process runs in its own process group. When the context given to
// Start ends, the whole group gets SIGTERM, and the leader gets SIGKILL if it
// is still alive after the grace period. Once the leader has exited, the group
// gets SIGKILL anyway, so grandchildren left behind (a shell's background job,
// a tool a CLI started) die with it. Descendants that left the group (setsid)
// are found by a variable Start puts in the environment, which they inherit,
// and get SIGKILL too (see sweep). One goroutine per process owns Wait, so
// there are no zombies, and a signal death is reported as 128+signal like a
// shell does. With BecomeSubreaper, orphans come to the gateway instead of
// init, and proc reaps them.
//
// Stdin is fed from an io.Reader (prompt text belongs there, not on argv),
// stdout is handed to the caller as an io.Reader, and the last few KiB of
// stderr are kept for error messages. A Process is safe for concurrent use,
// except that Stdout must be read by one goroutine at a time.
package proc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	// DefaultGrace is the time between SIGTERM and SIGKILL when Spec.Grace
	// is not set.
	DefaultGrace = 5 * time.Second
	// DefaultTailBytes is how much of stderr is kept when Spec.TailBytes is
	// not set.
	DefaultTailBytes = 8 << 10
)

// ErrOutputHeld is returned by the Stdout reader when the process has exited,
// the grace period has passed, everything written has been read, and the
// pipe is still held open by a process that escaped the group (setsid).
// Reading stops there instead of blocking forever.
var ErrOutputHeld = errors.New("output pipe still held open after the process exited")

// Spec describes a process to start.
type Spec struct {
	// Path is the program to run; a name without a slash is looked up on
	// the PATH of the calling process.
	Path string
	// Args are the arguments, without the program name.
	Args []string
	// Dir is the working directory; empty means the caller's.
	Dir string
	// Env is the complete environment, to which Start adds one variable
	// marking the process and its descendants (GATEWAY_PROC_<id>=1). Nil
	// means an empty environment but for that, not the caller's: pass
	// os.Environ() explicitly to inherit.
	Env []string
	// Stdin, if not nil, is copied to the process's standard input, which is
	// then closed. Nil means /dev/null. The reader must not be used by the
	// caller until Wait returns.
	Stdin io.Reader
	// StdinPipe, instead of Stdin, keeps standard input open for the
	// caller to write to through Process.Stdin, for a CLI that takes
	// several messages over its lifetime. Writes fail once the process has
	// exited and the grace period has passed.
	StdinPipe bool
	// Grace is the time between SIGTERM and SIGKILL on cancellation, and how
	// long pipes may stay open after the process exited. Zero means
	// DefaultGrace.
	Grace time.Duration
	// TailBytes bounds the stderr tail. Zero means DefaultTailBytes.
	TailBytes int
	// Credential, if not nil, is the user and groups the process runs as.
	// Switching needs root or CAP_SETUID and CAP_SETGID; stopping the
	// group then needs root or CAP_KILL, and finding descendants that left
	// it by their mark needs root or CAP_SYS_PTRACE (their environ is not
	// the caller's to read). Nil means the caller's own.
	Credential *Credential
	// Interrupt, if set, is the signal the group gets first when ctx
	// ends, for a CLI that stops cleanly on it (claude reports what the
	// turn cost on SIGINT, not on SIGTERM). SIGTERM follows after
	// InterruptGrace if the leader is still alive (zero: 1 s), then SIGKILL
	// after Grace.
	Interrupt      syscall.Signal
	InterruptGrace time.Duration
	// Owner, if set, marks the process and every descendant as the
	// gateway's (GATEWAY_OWNER_<Owner>=1), so that KillLeftovers finds them
	// after the gateway itself was killed. Letters and digits only.
	Owner string
}

// Credential is a user id with its primary and supplementary groups.
type Credential struct {
	UID uint32
	GID uint32
	// Groups are the supplementary groups; empty means none (the caller's
	// supplementary groups are dropped, not kept).
	Groups []uint32
}

// Exit is how a process ended.
type Exit struct {
	// Code is the exit status, or 128+signal when a signal killed the
	// process, or -1 if it is unknown.
	Code int
	// Signal is the signal that killed the process, or 0 if it exited.
	Signal syscall.Signal
}

// String reads like "exit status 3" or "killed by signal 9 (killed)".
func (e Exit) String() string {
	if e.Signal != 0 {
		return fmt.Sprintf("killed by signal %d (%v)", int(e.Signal), e.Signal)
	}
	return "exit status " + strconv.Itoa(e.Code)
}

// Process is a started child process.
type Process struct {
	cmd    *exec.Cmd
	mark   string // the environment entry marking the process's descendants
	ctx    context.Context
	grace  time.Duration
	stdout *pipeReader
	stderr *pipeReader
	stdinW *os.File // nil without Spec.Stdin or Spec.StdinPipe
	// copiesStdin is set when stdinW is fed from Spec.Stdin.
	copiesStdin bool
	tail        *tail

	stderrDone chan struct{} // closed when stderr is fully read
	stdinDone  chan struct{} // closed when the stdin copy has ended
	done       chan struct{} // closed when exit and err are set

	// canceled is set when the context ended and the group was signalled.
	canceled atomic.Bool
	// leaderGone is closed once the leader has been reaped.
	leaderGone chan struct{}

	// exit and err are written once by the wait goroutine before done is
	// closed and only read after it.
	exit Exit
	err  error
}

// Start starts the process described by s. Cancelling ctx stops the whole
// process group: s.Interrupt if set, SIGTERM (after s.InterruptGrace when
// interrupted first), then SIGKILL after s.Grace. The caller must call
// Wait (or wait for Done) and should read Stdout to the end.
func Start(ctx context.Context, s Spec) (*Process, error) {
	if s.Path == "" {
		return nil, errors.New("start process: empty path")
	}
	grace := s.Grace
	if grace <= 0 {
		grace = DefaultGrace
	}
	tailBytes := s.TailBytes
	if tailBytes <= 0 {
		tailBytes = DefaultTailBytes
	}

	cmd := exec.CommandContext(ctx, s.Path, s.Args...)
	if cmd.Err != nil {
		return nil, fmt.Errorf("start %s: %w", s.Path, cmd.Err)
	}
	cmd.Dir = s.Dir
	mark := newMark()
	cmd.Env = append(s.Env[:len(s.Env):len(s.Env)], mark)
	if s.Owner != "" {
		if !validOwner(s.Owner) {
			return nil, fmt.Errorf("start %s: owner %q is not letters and digits", s.Path, s.Owner)
		}
		cmd.Env = append(cmd.Env, ownerMark(s.Owner))
	}
	// Pdeathsig: the leader is killed when the gateway dies, whatever
	// killed it. The kernel ties it to the thread that forked, not the
	// process; Go ends a thread only when a goroutine locked to it returns
	// without unlocking, which nothing here does around Start.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if c := s.Credential; c != nil {
		cmd.SysProcAttr.Credential = &syscall.Credential{
			Uid:    c.UID,
			Gid:    c.GID,
			Groups: append([]uint32{}, c.Groups...),
		}
	}

	// Our own pipes, not exec's copying goroutines: Wait then returns as soon
	// as the leader is gone, and we decide how long pipes may stay open.
	var parentEnds, childEnds []*os.File
	closeAll := func(fs []*os.File) {
		for _, f := range fs {
			f.Close()
		}
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("stdout pipe: %w", err)
	}
	parentEnds, childEnds = append(parentEnds, outR), append(childEnds, outW)
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(parentEnds)
		closeAll(childEnds)
		return nil, fmt.Errorf("stderr pipe: %w", err)
	}
	parentEnds, childEnds = append(parentEnds, errR), append(childEnds, errW)
	var inW *os.File
	if s.Stdin != nil || s.StdinPipe {
		var inR *os.File
		inR, inW, err = os.Pipe()
		if err != nil {
			closeAll(parentEnds)
			closeAll(childEnds)
			return nil, fmt.Errorf("stdin pipe: %w", err)
		}
		parentEnds, childEnds = append(parentEnds, inW), append(childEnds, inR)
		cmd.Stdin = inR
	}
	cmd.Stdout = outW
	cmd.Stderr = errW

	p := &Process{
		cmd:         cmd,
		mark:        mark,
		ctx:         ctx,
		grace:       grace,
		stdout:      &pipeReader{f: outR},
		stderr:      &pipeReader{f: errR},
		stdinW:      inW,
		copiesStdin: s.Stdin != nil,
		tail:        &tail{max: tailBytes},
		stderrDone:  make(chan struct{}),
		stdinDone:   make(chan struct{}),
		done:        make(chan struct{}),
		leaderGone:  make(chan struct{}),
	}
	interruptGrace := time.Duration(0)
	if s.Interrupt != 0 {
		interruptGrace = s.InterruptGrace
		if interruptGrace <= 0 {
			interruptGrace = time.Second
		}
	}
	cmd.Cancel = func() error {
		// cmd.Process is set before exec starts the goroutine calling this.
		pid := cmd.Process.Pid
		if s.Interrupt == 0 {
			err := signalGroup(pid, syscall.SIGTERM)
			if err == nil {
				p.canceled.Store(true)
			}
			return err
		}
		err := signalGroup(pid, s.Interrupt)
		if err == nil {
			p.canceled.Store(true)
			go func() {
				t := time.NewTimer(interruptGrace)
				defer t.Stop()
				select {
				case <-p.leaderGone:
				case <-t.C:
					_ = signalGroup(pid, syscall.SIGTERM)
				}
			}()
		}
		return err
	}
	// After the grace, exec SIGKILLs the leader; wait then kills the group.
	cmd.WaitDelay = interruptGrace + grace

	if err := startLeader(cmd); err != nil {
		closeAll(parentEnds)
		closeAll(childEnds)
		return nil, fmt.Errorf("start %s: %w", s.Path, err)
	}
	closeAll(childEnds)

	go p.copyStderr()
	if inW != nil && s.Stdin != nil {
		go p.copyStdin(s.Stdin)
	} else {
		close(p.stdinDone)
	}
	go p.wait()
	return p, nil
}

// Pid is the process id of the leader, which is also the process group id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Stdin is the process's standard input when it was started with
// Spec.StdinPipe, nil otherwise. Closing it sends end-of-file.
func (p *Process) Stdin() io.WriteCloser {
	if p.stdinW == nil || p.copiesStdin {
		return nil
	}
	return p.stdinW
}

// Stdout is the process's standard output. It reaches io.EOF once every
// process holding the pipe has exited, or fails with ErrOutputHeld (after
// everything written has been read) when something outside the group keeps
// it open beyond the grace period. It closes itself at EOF or on error.
func (p *Process) Stdout() io.Reader { return p.stdout }

// StderrTail returns the last bytes written to stderr (at most
// Spec.TailBytes). It is complete once Wait has returned.
func (p *Process) StderrTail() string { return p.tail.String() }

// Done is closed when the process has exited, its group and the processes
// carrying its mark have been killed, and stderr has been collected.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait waits for the process to exit and returns how it ended. The error is
// nil when the process ended by itself, whatever its exit code. When the
// context ended first, it is context.Cause of that context, so callers can
// tell a deadline (context.DeadlineExceeded) from a cancellation. Wait may be
// called any number of times from any goroutine.
func (p *Process) Wait() (Exit, error) {
	<-p.done
	return p.exit, p.err
}

// wait is the one goroutine that waits for the process.
func (p *Process) wait() {
	werr := p.cmd.Wait()
	pid := p.cmd.Process.Pid
	close(p.leaderGone)
	leaderReaped(pid)
	// The leader is gone: kill whatever it left behind, in its group or
	// carrying its mark.
	deadline := time.Now().Add(p.grace)
	sweep(pid, p.mark, deadline)

	// Processes that escaped both may still hold the pipes; give them the
	// grace period, then stop blocking on them. The deadlines only make
	// reads fail once nothing is left to read (see pipeReader).
	_ = p.stdout.f.SetReadDeadline(deadline)
	_ = p.stderr.f.SetReadDeadline(deadline)
	if p.stdinW != nil {
		_ = p.stdinW.SetWriteDeadline(deadline)
	}
	<-p.stderrDone
	<-p.stdinDone

	p.exit = exitOf(p.cmd.ProcessState)
	var exitErr *exec.ExitError
	switch {
	case p.canceled.Load():
		p.err = context.Cause(p.ctx)
	case werr == nil, errors.As(werr, &exitErr), errors.Is(werr, exec.ErrWaitDelay):
		p.err = nil
	default:
		p.err = fmt.Errorf("wait for process %d: %w", pid, werr)
	}
	close(p.done)
}

func (p *Process) copyStderr() {
	defer close(p.stderrDone)
	buf := make([]byte, 32<<10)
	for {
		n, err := p.stderr.Read(buf)
		p.tail.Write(buf[:n])
		if err != nil {
			return
		}
	}
}

func (p *Process) copyStdin(src io.Reader) {
	defer close(p.stdinDone)
	// A child that exits without reading makes this fail with EPIPE; one
	// that keeps stdin open without reading hits the write deadline set
	// after exit. Neither is worth reporting: the exit status says more.
	_, _ = io.Copy(p.stdinW, src)
	p.stdinW.Close()
}

// signalGroup sends sig to the process group pgid. A group that no longer
// exists is reported as os.ErrProcessDone.
func signalGroup(pgid int, sig syscall.Signal) error {
	if pgid <= 0 {
		return fmt.Errorf("signal group: bad pgid %d", pgid)
	}
	err := syscall.Kill(-pgid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	if err != nil {
		return fmt.Errorf("signal group %d: %w", pgid, err)
	}
	return nil
}

func exitOf(state *os.ProcessState) Exit {
	if state == nil {
		return Exit{Code: -1}
	}
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return Exit{Code: 128 + int(ws.Signal()), Signal: ws.Signal()}
	}
	return Exit{Code: state.ExitCode()}
}

// pipeReader reads the parent's end of a pipe. After the read deadline set
// when the process exited has passed, it keeps returning whatever is still
// buffered in the pipe using non-blocking reads, and only then gives up with
// ErrOutputHeld; so a slow reader loses nothing the process wrote.
type pipeReader struct {
	f       *os.File
	expired bool  // the deadline passed: only non-blocking reads from now on
	err     error // sticky terminal error; the file is closed
}

func (r *pipeReader) Read(b []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if len(b) == 0 {
		return 0, nil
	}
	var n int
	var err error
	if !r.expired {
		n, err = r.f.Read(b)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			r.expired = true
			// Raw reads go through the poller, which refuses them while
			// the deadline is in the past.
			if err = r.f.SetReadDeadline(time.Time{}); err == nil {
				n, err = r.readNow(b)
			}
		}
	} else {
		n, err = r.readNow(b)
	}
	if err != nil {
		r.err = err
		r.f.Close()
	}
	return n, err
}

// readNow reads what the pipe holds without blocking.
func (r *pipeReader) readNow(b []byte) (int, error) {
	rc, err := r.f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var rerr error
	err = rc.Read(func(fd uintptr) bool {
		for {
			n, rerr = syscall.Read(int(fd), b)
			if rerr != syscall.EINTR {
				return true
			}
		}
	})
	switch {
	case err != nil:
		return 0, err
	case errors.Is(rerr, syscall.EAGAIN):
		return 0, ErrOutputHeld
	case rerr != nil:
		return 0, rerr
	case n <= 0:
		return 0, io.EOF
	}
	return n, nil
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex // guards buf
	max int
	buf []byte
}

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(b)
	if len(b) > t.max {
		b = b[len(b)-t.max:]
	}
	if over := len(t.buf) + len(b) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, b...)
	return n, nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
