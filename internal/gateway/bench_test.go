package gateway

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
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
// instant fake backend, spread over 100 channels, as cmd/bench measures it
// (the fake keeps no record of the requests).
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
	core, err := NewCore(cfg, CoreOptions{Backend: &backends.Fake{Forget: true}, Replier: countingReplier{&wg}}, zerolog.Nop())
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
	cpuBefore := cpuTime(b)
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
	// The CPU time of the whole process per event, the archive's drain
	// included: on a shared machine it moves less than the wall clock,
	// and it counts the work done behind the turns.
	b.ReportMetric(float64(cpuTime(b)-cpuBefore)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the user and system CPU time the process has used so far.
func cpuTime(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
