package agent

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/queue"
)

// transcriptLog records what the runtime asks of its Transcripts, and
// whether the CLI had run yet when it asked.
type transcriptLog struct {
	mu    sync.Mutex // guards calls
	calls []string
	fake  *backends.Fake
}

func (l *transcriptLog) record(op, backend, home, workDir, id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, fmt.Sprintf("%s %s %s %s %s after %d runs", op, backend, home, workDir, id, len(l.fake.Requests())))
}

func (l *transcriptLog) Restore(_ context.Context, backend, home, workDir, id string) (bool, error) {
	l.record("restore", backend, home, workDir, id)
	return true, nil
}

func (l *transcriptLog) Save(_ context.Context, backend, home, workDir, id string) error {
	l.record("save", backend, home, workDir, id)
	return nil
}

// With Transcripts set, a turn that resumes a session restores its files
// before the CLI starts, and every turn that has a session saves them
// after; a turn that starts a session restores nothing.
func TestTranscriptsFollowTheTurns(t *testing.T) {
	tr := &transcriptLog{}
	f := newFixture(t, Options{Transcripts: tr, AgentHome: "/home/agent", WorkDir: "/srv/app"}, nil)
	tr.fake = f.fake
	f.fake.Respond = sessionsOfTheirOwn()
	for _, text := range []string{"first", "second"} {
		if out := f.rt.Process(context.Background(), message("c", text)); out.Err != nil {
			t.Fatal(out.Err)
		}
	}
	// A scheduled event keeps no session: nothing to carry.
	e := message("c", "heartbeat")
	e.Kind = queue.KindHeartbeat
	f.rt.Process(context.Background(), e)
	want := []string{
		"save fake /home/agent /srv/app s1 after 1 runs",
		"restore fake /home/agent /srv/app s1 after 1 runs",
		"save fake /home/agent /srv/app s1 after 2 runs",
	}
	if diff := cmp.Diff(want, tr.calls); diff != "" {
		t.Errorf("transcript calls (-want +got):\n%s", diff)
	}
}
