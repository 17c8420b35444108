package jsinbox

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
)

// EnsureBucket creates the key-value bucket want when it is missing and
// checks it when present, as Open does for the inbox's own buckets: a
// replica count, TTL, history or storage that differs is an error naming
// it and how to fix it, never a silent change. Other packages keeping
// gateway state on JetStream (sessions, memory, leases) use it so that
// every bucket is set up alike.
func EnsureBucket(ctx context.Context, js jetstream.JetStream, want jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	return setupBucket(ctx, js, want, true)
}

// CheckBucket checks the bucket want as EnsureBucket does without creating
// it: a missing bucket is ErrNotSetUp (doctor).
func CheckBucket(ctx context.Context, js jetstream.JetStream, want jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	return setupBucket(ctx, js, want, false)
}
