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
