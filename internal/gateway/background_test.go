package gateway

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"
)

// stop returns only once every component has returned, and an error one
// returns is logged with its name while the others go on.
func TestBackgroundStopWaitsForEveryComponent(t *testing.T) {
	var logs syncBuffer
	bg := newBackground(zerolog.New(&logs))
	var finished atomic.Int32
	release := make(chan struct{})
	for range 3 {
		bg.start("loop", func(ctx context.Context) error {
			<-ctx.Done()
			<-release // still busy after its context ended
			finished.Add(1)
			return ctx.Err()
		})
	}
	bg.start("broken", func(context.Context) error { return errors.New("the folder is gone") })
	stopped := make(chan struct{})
	go func() {
		bg.stop()
		close(stopped)
	}()
	select {
	case <-stopped:
		t.Fatal("stop returned while components were still running")
	default:
	}
	close(release)
	<-stopped
	if n := finished.Load(); n != 3 {
		t.Errorf("%d components had finished when stop returned, want 3", n)
	}
	if !strings.Contains(logs.String(), `"component":"broken"`) || strings.Contains(logs.String(), `"component":"loop"`) {
		t.Errorf("log = %s; want the broken component's error only (a cancelled one is not an error)", logs.String())
	}
}
