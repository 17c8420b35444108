package gateway

import (
	"context"
	"errors"
	"sync"

	"github.com/rs/zerolog"
)

// background runs the gateway's loops that need Discord (the scheduler,
// the schedule files' reloads, the IPC folder, the resumer, the worktree
// and thread sweeps, the idle trim) as components started together once
// Discord is connected and stopped together when the shutdown begins:
// stop cancels them all and returns once each has returned, so none of
// them acts during the drain or after Run returns (DESIGN decision 21).
type background struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	log    zerolog.Logger
}

func newBackground(log zerolog.Logger) *background {
	ctx, cancel := context.WithCancel(context.Background())
	return &background{ctx: ctx, cancel: cancel, log: log}
}

// start runs a component until the group stops. An error it returns is
// logged with its name; the others go on.
func (b *background) start(name string, run func(context.Context) error) {
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		if err := run(b.ctx); err != nil && !errors.Is(err, context.Canceled) {
			b.log.Error().Err(err).Str("component", name).Msg("stopped with an error")
		}
	}()
}

// stop cancels every component and waits for all of them.
func (b *background) stop() {
	b.cancel()
	b.wg.Wait()
}
