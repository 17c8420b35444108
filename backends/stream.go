package backends

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/proc"
)

// checkWorkDir reports a work dir that is missing or not a directory, before
// any CLI is started in it.
func checkWorkDir(dir string) error {
	if dir == "" {
		return nil
	}
	st, err := os.Stat(dir)
	if err == nil && !st.IsDir() {
		err = errors.New("not a directory")
	}
	if err != nil {
		return &Error{Kind: KindExecution, Message: fmt.Sprintf("work dir %s", dir), Err: err}
	}
	return nil
}

// streamOutput is what readStream saw of one CLI run.
type streamOutput struct {
	Exit    proc.Exit
	WaitErr error
	ScanErr error
	// Stderr is the trimmed tail of the CLI's stderr.
	Stderr string
	// Garbage holds the stdout lines parse rejected.
	Garbage garbageLog
	// Skipped counts stdout lines over the size limit, dropped.
	Skipped int
	// ModelOutput is set once parse returned text or a tool call: the
	// model answered something before the run ended.
	ModelOutput bool
}

// readStream feeds p's stdout to parse one line at a time (lines start with
// a buffer of start bytes and may grow to max), emits the events parse
// returns, then waits for p. After a read error the pipe is drained, so the
// CLI can finish (or be killed) instead of blocking on a full pipe.
func readStream(p *proc.Process, start, max int, parse func([]byte) ([]Event, error), emit func(Event), log zerolog.Logger) streamOutput {
	var out streamOutput
	split := &lineSplitter{max: max}
	sc := bufio.NewScanner(p.Stdout())
	sc.Buffer(make([]byte, 0, start), max)
	sc.Split(split.split)
	for sc.Scan() {
		events, err := parse(sc.Bytes())
		if err != nil {
			out.Garbage.add(sc.Bytes())
			log.Debug().Int("bytes", len(sc.Bytes())).Int("skipped", out.Garbage.n).Msg("skipped a stdout line that is not a JSON event")
			continue
		}
		for _, ev := range events {
			if isModelOutput(ev) {
				out.ModelOutput = true
			}
			emit(ev)
		}
	}
	if out.ScanErr = sc.Err(); out.ScanErr != nil {
		_, _ = io.Copy(io.Discard, p.Stdout())
	}
	out.Exit, out.WaitErr = p.Wait()
	out.Stderr = strings.TrimSpace(p.StderrTail())
	out.Skipped = split.skipped
	return out
}

// isModelOutput reports whether ev shows the model answering: text or a
// tool call, as opposed to the CLI's own bookkeeping.
func isModelOutput(ev Event) bool {
	switch ev.Kind {
	case EventText, EventToolUse, EventToolResult:
		return true
	}
	return false
}
