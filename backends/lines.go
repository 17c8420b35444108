package backends

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"
)

// writeLine writes one whole line to a kept process's stdin, under mu so
// that lines written from several goroutines (a turn, a stop, a steered
// prompt) never interleave. cli names the process in the error.
func writeLine(mu *sync.Mutex, stdin io.Writer, line []byte, cli string) error {
	mu.Lock()
	defer mu.Unlock()
	if _, err := stdin.Write(line); err != nil {
		return fmt.Errorf("write to %s: %w", cli, err)
	}
	return nil
}

// drainLines drops what a kept process printed between turns (a late
// response, a retry's events after a stop), logging each line's size.
func drainLines(lines <-chan []byte, log zerolog.Logger, cli string) {
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				return
			}
			log.Debug().Int("bytes", len(l)).Msg(cli + " printed a line between turns")
		default:
			return
		}
	}
}

// linePipe is a kept process's stdout as a channel of lines, filled by the
// one goroutine readLines starts. skipped and scanErr are written before
// lines is closed: read them once a receive has seen it closed.
type linePipe struct {
	lines   chan []byte // stdout lines; closed at EOF
	exited  atomic.Bool // stdout has ended: the process is gone or going
	skipped int         // overlong lines, written before lines is closed
	scanErr error       // read error, written before lines is closed
}

// linePipeBacklog is how many lines wait for the turn before the reader
// blocks (and the process with it, on a full pipe).
const linePipeBacklog = 64

// readLines makes lines and copies r into it, a line at a time split on
// '\n' (see lineSplitter: a line over max bytes is skipped and counted),
// from a new goroutine until r ends. After a read error the rest of r is
// discarded, so the process never blocks on a pipe nobody reads. ended,
// when not nil, runs once the reading stopped, before the rest is
// discarded and lines is closed.
func (lp *linePipe) readLines(r io.Reader, bufStart, max int, ended func()) {
	lp.lines = make(chan []byte, linePipeBacklog)
	go func() {
		split := &lineSplitter{max: max}
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 0, bufStart), max)
		sc.Split(split.split)
		for sc.Scan() {
			lp.lines <- bytes.Clone(sc.Bytes())
		}
		lp.skipped, lp.scanErr = split.skipped, sc.Err()
		if ended != nil {
			ended()
		}
		if lp.scanErr != nil {
			_, _ = io.Copy(io.Discard, r)
		}
		lp.exited.Store(true)
		close(lp.lines)
	}()
}
