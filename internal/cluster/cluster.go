// Package cluster lets several gateway processes behind one bot agree on
// who does what, over JetStream key-value buckets (docs/scale-out.md §3, §5):
//
//   - a Lease runs a function on exactly one process at a time (the
//     scheduler, so heartbeats and cron jobs fire once), handing it over
//     when its holder dies or stops;
//   - a Registry keeps one heartbeat entry per process (its role, slots and
//     running turns), which `gateway doctor` lists.
//
// Both keep their state only in their buckets, whose entries expire with
// the bucket's TTL, so a process killed without cleaning up is forgotten
// once its entries lapse. A Lease and a Registry are safe for concurrent
// use; each Run or Beat call is one loop.
package cluster

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Buckets and their default TTLs.
const (
	// BucketLeases holds one key per lease, naming its holder.
	BucketLeases = "gateway-leases"
	// BucketWorkers holds one heartbeat entry per gateway process.
	BucketWorkers = "gateway-workers"

	// DefaultLeaseTTL is how long a lease outlives its holder's last
	// renewal.
	DefaultLeaseTTL = 15 * time.Second
	// DefaultWorkerTTL is how long a process stays listed after its last
	// heartbeat.
	DefaultWorkerTTL = 30 * time.Second
)

// bucket is a bucket's configuration: one value per key, kept on file,
// each entry expiring ttl after its last write.
func bucket(name, desc string, ttl time.Duration, replicas int) jetstream.KeyValueConfig {
	if replicas <= 0 {
		replicas = 1
	}
	return jetstream.KeyValueConfig{
		Bucket:      name,
		Description: desc,
		History:     1,
		TTL:         ttl,
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
	}
}

// LeaseBucket is the configuration of the leases' bucket.
func LeaseBucket(ttl time.Duration, replicas int) jetstream.KeyValueConfig {
	return bucket(BucketLeases, "agent gateway: <lease> -> its holder, renewed while held", ttl, replicas)
}

// WorkerBucket is the configuration of the heartbeat bucket.
func WorkerBucket(ttl time.Duration, replicas int) jetstream.KeyValueConfig {
	return bucket(BucketWorkers, "agent gateway: <process> -> its role, slots and running turns", ttl, replicas)
}

// ErrBadName is returned for a lease or worker name that cannot be a key.
var ErrBadName = errors.New("a name is letters, digits, '-', '_' or '=', in parts joined by dots")

// keyPattern is what a KV key may be, without NATS wildcards.
var keyPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_=-]+(\.[A-Za-z0-9_=-]+)*$`) })

func checkName(name string) error {
	if !keyPattern().MatchString(name) {
		return fmt.Errorf("%q: %w", name, ErrBadName)
	}
	return nil
}

// DefaultName names this process: its host name and a short random
// suffix, so two processes on one host (or a restart that overlaps the
// old entry) get entries of their own.
func DefaultName() string {
	host, err := os.Hostname()
	if err != nil {
		host = ""
	}
	return keyable(host) + "-" + randomHex(2)
}

// keyable maps a host name to key characters.
func keyable(s string) string {
	s = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			return r
		}
		return '-'
	}, s)
	if s = strings.Trim(s, "-"); s == "" {
		s = "gateway"
	}
	return s
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24).
	return hex.EncodeToString(b)
}
