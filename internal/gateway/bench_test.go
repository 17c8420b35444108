package gateway

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/queue"
)

type countingReplier struct {
	wg *sync.WaitGroup
}

func (c countingReplier) Reply(context.Context, queue.Event, string) error {
	c.wg.Done()
	return nil
}

// BenchmarkThroughput measures events through queue + runtime with the
// instant fake backend, spread over 100 channels.
func BenchmarkThroughput(b *testing.B) {
	cfg, err := config.Load(config.LoadOptions{Environ: []string{
		config.EnvConfigDir + "=" + b.TempDir(),
		config.EnvMaxQueueDepth + "=1000000",
		config.EnvMaxChannelQueue + "=1000000",
		config.EnvMaxConcurrent + "=8",
		config.EnvPermissionMode + "=acceptEdits",
	}})
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	core, err := NewCore(cfg, CoreOptions{Backend: &backends.Fake{}, Replier: countingReplier{&wg}}, zerolog.Nop())
	if err != nil {
		b.Fatal(err)
	}
	// Steady state: persona files last edited a while ago (files modified
	// within the last second are always re-read).
	old := time.Now().Add(-time.Hour)
	entries, _ := os.ReadDir(cfg.ConfigDir)
	for _, e := range entries {
		os.Chtimes(filepath.Join(cfg.ConfigDir, e.Name()), old, old)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go core.Run(ctx)
	b.ResetTimer()
	wg.Add(b.N)
	for i := range b.N {
		if _, err := core.Queue.Enqueue(queue.Event{Kind: queue.KindMessage, ChannelID: fmt.Sprint(i % 100), Text: "hi"}); err != nil {
			b.Fatal(err)
		}
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.StopTimer()
	core.Runtime.Close() // the archive written behind finishes
}
