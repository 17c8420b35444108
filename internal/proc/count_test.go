package proc

import (
	"context"
	"testing"
	"time"
)

// Not parallel: Running counts every process this package started, and
// the parallel tests start theirs only after the sequential ones ran.
func TestRunningCountsStartedUntilWaited(t *testing.T) {
	before := Running()
	p := startSh(t, context.Background(), `read -r line`, func(s *Spec) { s.StdinPipe = true })
	if got := Running(); got != before+1 {
		t.Fatalf("Running() = %d with one process started, want %d", got, before+1)
	}
	p.Stdin().Close()
	if _, err := waitExit(t, p, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := Running(); got != before {
		t.Fatalf("Running() = %d after Wait, want %d", got, before)
	}
}
