package jsinbox

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/agentgateway/gateway/internal/inbox"
)

// BenchmarkAppend measures Add (Append: key check, publish, PubAck, key
// create) on a local single server (R1) and a local 3-node cluster (R3),
// one caller at a time and many at once, and reports events/s and the
// p50 and p99 of one Append.
func BenchmarkAppend(b *testing.B) {
	for _, replicas := range []int{1, 3} {
		for _, parallel := range []bool{false, true} {
			name := fmt.Sprintf("R%d/serial", replicas)
			if parallel {
				name = fmt.Sprintf("R%d/parallel", replicas)
			}
			b.Run(name, func(b *testing.B) {
				var servers []*server.Server
				if replicas == 1 {
					servers = []*server.Server{runServer(b, b.TempDir())}
				} else {
					servers = runCluster(b, replicas)
				}
				in := openInbox(b, connect(b, servers...), Options{Partitions: 16, Replicas: replicas, Timeout: 10 * time.Second})
				var (
					mu    sync.Mutex
					lat   []time.Duration
					next  atomic.Int64
					fails atomic.Int64
				)
				one := func(local *[]time.Duration) {
					n := next.Add(1)
					start := time.Now()
					_, err := in.Append(context.Background(), event(fmt.Sprint(1000+n%64), fmt.Sprint("discord:message:", n), int(n)))
					*local = append(*local, time.Since(start))
					if err != nil {
						fails.Add(1)
					}
				}
				b.ResetTimer()
				if parallel {
					b.SetParallelism(8)
					b.RunParallel(func(pb *testing.PB) {
						var local []time.Duration
						for pb.Next() {
							one(&local)
						}
						mu.Lock()
						lat = append(lat, local...)
						mu.Unlock()
					})
				} else {
					for range b.N {
						one(&lat)
					}
				}
				b.StopTimer()
				if f := fails.Load(); f > 0 {
					b.Fatalf("%d of %d Appends failed", f, b.N)
				}
				slices.Sort(lat)
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			})
		}
	}
}

// BenchmarkDispatch measures events through the stream end to end on a
// local single server (R1) and a local 3-node cluster (R3): an intake
// appends them across 64 lanes, two dispatchers with 8 slots each take
// them and finish them at once (the instant backend). It reports events/s
// and the p50 and p99 from the start of an Append to the event's Finish.
func BenchmarkDispatch(b *testing.B) {
	for _, replicas := range []int{1, 3} {
		b.Run(fmt.Sprintf("R%d", replicas), func(b *testing.B) {
			var servers []*server.Server
			if replicas == 1 {
				servers = []*server.Server{runServer(b, b.TempDir())}
			} else {
				servers = runCluster(b, replicas)
			}
			opts := Options{Partitions: 64, Replicas: replicas, Timeout: 10 * time.Second}
			intake := openInbox(b, connect(b, servers...), opts)
			var (
				mu      sync.Mutex
				started = map[uint64]time.Time{}
				lat     []time.Duration
				done    = make(chan struct{}, 1024)
			)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			for range 2 {
				in := openInbox(b, connect(b, servers...), opts)
				d := in.Dispatcher(DispatchOptions{Slots: 8, Scan: 50 * time.Millisecond})
				go func() {
					_ = d.Run(ctx, func(dl Delivery) {
						go func() {
							d.Release(dl.Event.ID)
							if err := in.Finish(dl.Event.ID, inbox.Answered); err != nil {
								b.Error(err)
							}
							mu.Lock()
							if t0, ok := started[dl.Event.ID]; ok {
								lat = append(lat, time.Since(t0))
							}
							mu.Unlock()
							done <- struct{}{}
						}()
					})
				}()
			}
			b.ResetTimer()
			go func() {
				for n := range b.N {
					t0 := time.Now()
					e, err := intake.Append(context.Background(), event(fmt.Sprint(1000+n%64), fmt.Sprint("discord:message:", n), n))
					if err != nil {
						b.Error(err)
						continue
					}
					mu.Lock()
					started[e.ID] = t0
					mu.Unlock()
				}
			}()
			for range b.N {
				select {
				case <-done:
				case <-time.After(time.Minute):
					b.Fatal("events stopped coming through")
				}
			}
			b.StopTimer()
			mu.Lock()
			defer mu.Unlock()
			slices.Sort(lat)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
			if len(lat) > 0 {
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			}
		})
	}
}

// BenchmarkFailover measures how long an event whose holder died (its
// connection gone, no ack, no give-back) takes to reach another process,
// with NATS_ACK_WAIT at its 3 s minimum: the ack wait plus at most one
// scan. It reports seconds.
func BenchmarkFailover(b *testing.B) {
	srv := runServer(b, b.TempDir())
	opts := Options{Partitions: 4, AckWait: 3 * time.Second}
	intake := openInbox(b, connect(b, srv), opts)
	took := make(chan Delivery, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	survivor := openInbox(b, connect(b, srv), opts)
	var total time.Duration
	for n := range b.N {
		doomed := connect(b, srv)
		in := openInbox(b, doomed, opts)
		d := in.Dispatcher(DispatchOptions{Slots: 1, Scan: 2 * time.Second})
		dctx, dcancel := context.WithCancel(ctx)
		go func() { _ = d.Run(dctx, func(dl Delivery) { took <- dl }) }()
		e, err := intake.Append(context.Background(), event("4242", fmt.Sprint("k", n), n))
		if err != nil {
			b.Fatal(err)
		}
		<-took
		dcancel()
		doomed.Close()
		died := time.Now()
		s := survivor.Dispatcher(DispatchOptions{Slots: 1, Scan: 2 * time.Second})
		sctx, scancel := context.WithCancel(ctx)
		go func() { _ = s.Run(sctx, func(dl Delivery) { took <- dl }) }()
		dl := <-took
		total += time.Since(died)
		if dl.Event.ID != e.ID {
			b.Fatalf("took event %d, want %d", dl.Event.ID, e.ID)
		}
		s.Release(e.ID)
		if err := survivor.Finish(e.ID, inbox.Answered); err != nil {
			b.Fatal(err)
		}
		scancel()
	}
	b.ReportMetric(total.Seconds()/float64(b.N), "failover-s")
}
