package backends

import (
	"fmt"
	"io"
	"sync"

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
