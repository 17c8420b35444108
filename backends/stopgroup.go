package backends

import (
	"time"

	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/proc"
)

// endStoppedTools ends, for an adapter whose soft stop has ended the turn,
// the tool commands the kept CLI leader started since the turn began and
// still runs (proc.EndTurnTools), logging what it had to end.
func endStoppedTools(log zerolog.Logger, leader int, since time.Time, grace time.Duration) {
	if n := proc.EndTurnTools(leader, since, grace); n > 0 {
		log.Info().Int("processes", n).Msg("the stopped turn's tool commands still ran after the CLI answered the stop; ended them")
	}
}
