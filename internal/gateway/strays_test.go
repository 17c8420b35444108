package gateway

import (
	"errors"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/agent"
	"github.com/agentgateway/gateway/internal/queue"
)

// orderWatcher records when its run ends.
type orderWatcher struct{ log *[]string }

func (w orderWatcher) TurnStarted(queue.Event) (func(string), func()) {
	return func(string) {}, func() { *w.log = append(*w.log, "other watcher") }
}

// TestStraysSweepWhenEveryRunEnds: with AGENT_USER, the agent user's
// strays are swept when a CLI run ends, not when it starts, and before the
// other watchers are told (the schedule hold reads what the turn left).
func TestStraysSweepWhenEveryRunEnds(t *testing.T) {
	for _, tt := range []struct {
		name  string
		other bool
		err   error
		want  []string
	}{
		{"alone", false, nil, []string{"sweep 1234"}},
		{"before the other watchers", true, nil, []string{"sweep 1234", "other watcher"}},
		{"a sweep that failed", true, errors.New("operation not permitted"), []string{"sweep 1234", "other watcher"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			s := &strays{uid: 1234, log: zerolog.New(zerolog.NewTestWriter(t)), kill: func(uid uint32) (int, error) {
				got = append(got, "sweep "+strconv.FormatUint(uint64(uid), 10))
				return 2, tt.err
			}}
			var other agent.TurnWatcher
			if tt.other {
				other = orderWatcher{&got}
			}
			toolUsed, ended := withStrays(s, other).TurnStarted(queue.Event{ID: 1})
			toolUsed("Bash")
			if len(got) != 0 {
				t.Fatalf("swept before the run ended: %v", got)
			}
			ended()
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("when the run ended (-want +got):\n%s", diff)
			}
		})
	}
}
