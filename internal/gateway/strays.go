package gateway

import (
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/agent"
	"github.com/agentgateway/gateway/internal/queue"
)

// strays stops, with AGENT_USER, every process of the agent's user that
// runs outside the gateway's live process groups (proc.KillStrays): at
// start, and each time a CLI run ends, before the gateway reads what the
// turn left (outbox, actions, schedule edits). Otherwise a process that
// cleared its environment and left its turn's group (env -i setsid) would
// keep acting as the agent between turns. Without AGENT_USER the agent
// shares the gateway's user, whose processes are the gateway's own and its
// other children: nothing is swept by user then.
type strays struct {
	uid uint32
	// kill is proc.KillStrays.
	kill func(uid uint32) (int, error)
	log  zerolog.Logger
}

// sweep runs one sweep and logs, once, what it stopped.
func (s *strays) sweep(when string) {
	n, err := s.kill(s.uid)
	switch {
	case err != nil:
		s.log.Warn().Err(err).Int("processes", n).Str("when", when).Msg("could not stop every process the agent user left running outside a turn; stopped the others")
	case n > 0:
		s.log.Warn().Int("processes", n).Str("when", when).Msg("stopped processes the agent user left running outside a turn")
	}
}

// TurnStarted sweeps when the run ends. It comes first among the
// watchers, so the others see a turn that has nothing left running.
func (s *strays) TurnStarted(queue.Event) (func(string), func()) {
	return func(string) {}, func() { s.sweep("after a turn") }
}

// withStrays puts s before w (which may be nil) as the turn watcher.
func withStrays(s *strays, w agent.TurnWatcher) agent.TurnWatcher {
	if w == nil {
		return s
	}
	return turnWatchers{s, w}
}
