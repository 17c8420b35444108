package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/gateway"
)

// runChild is the gateway under load: gateway.Run, configured from the
// environment like `gateway run`, with an in-process backend that answers at
// once. It prints one line per turn ("RUN <event text> <start ns> <end ns>",
// wall clock) so the parent can place the backend call between Discord's
// message and the reply, and a "STATS <goroutines>" line every second.
func runChild() error {
	cfg, err := config.Load(config.LoadOptions{Require: config.RequireDiscord})
	if err != nil {
		return err
	}
	out := bufio.NewWriterSize(os.Stdout, 64<<10)
	var mu sync.Mutex // guards out
	write := func(format string, args ...any) {
		mu.Lock()
		fmt.Fprintf(out, format, args...)
		mu.Unlock()
	}
	backend := &backends.Fake{Forget: true, Respond: func(ctx context.Context, req backends.Request, emit func(backends.Event)) (backends.Result, error) {
		start := time.Now().UnixNano()
		res := backends.Result{SessionID: "bench-session", Text: "ok " + lastLine(req.Prompt), CostUSD: 0.0001, Turns: 1}
		emit(backends.Event{Kind: backends.EventInit, SessionID: res.SessionID})
		emit(backends.Event{Kind: backends.EventResult, SessionID: res.SessionID, Result: &res})
		write("RUN %s %d %d\n", lastLine(req.Prompt), start, time.Now().UnixNano())
		return res, nil
	}}
	if path := os.Getenv("BENCH_CPU_PROFILE"); path != "" {
		if f, ferr := os.Create(path); ferr == nil {
			pprof.StartCPUProfile(f)
			defer func() { pprof.StopCPUProfile(); f.Close() }()
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				write("STATS %d\n", runtime.NumGoroutine())
				mu.Lock()
				out.Flush()
				mu.Unlock()
			}
		}
	}()
	err = gateway.Run(ctx, cfg, gateway.Options{
		Backend: backend,
		Ready:   func() { write("READY\n"); mu.Lock(); out.Flush(); mu.Unlock() },
	}, zerolog.Nop())
	mu.Lock()
	out.Flush()
	mu.Unlock()
	if path := os.Getenv("BENCH_HEAP_PROFILE"); path != "" {
		if f, ferr := os.Create(path); ferr == nil {
			runtime.GC()
			pprof.WriteHeapProfile(f)
			f.Close()
		}
	}
	return err
}

// lastLine is the prompt's last line: the runtime may put notes before it.
func lastLine(s string) string {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '\n' {
			return s[i+1:]
		}
	}
	return s
}
