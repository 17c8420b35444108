package kvpersona

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/jsinbox"
	"github.com/agentgateway/gateway/internal/persona"
)

// The bucket that holds memory.md for every worker.
const (
	MemoryBucket = "gateway-memory"
	MemoryKey    = persona.MemoryFile
)

// memoryHistory is how many revisions of memory.md the bucket keeps. A
// guard's first merge (after a start) looks through them for the text its
// file holds, to know what the other machines deleted since it last
// merged; a worker that missed more writes than this keeps those lines.
const memoryHistory = 16

// memoryTimeout bounds one merge with the shared copy. The guard holds its
// lock meanwhile, so a slow server delays the runs' observations on this
// machine at most this long.
const memoryTimeout = 5 * time.Second

// maxConflicts bounds how often a merge starts over because another
// machine wrote between its read and its write.
const maxConflicts = 16

// errUnreachable is a merge tried while the connection to NATS is down.
var errUnreachable = errors.New("NATS is not connected")

// MemoryBucketConfig is the gateway-memory bucket, for EnsureBucket and
// CheckBucket (doctor).
func MemoryBucketConfig(replicas int) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:       MemoryBucket,
		Description:  "memory.md, merged line by line by every worker's memory guard",
		History:      memoryHistory,
		Replicas:     replicas,
		Storage:      jetstream.FileStorage,
		MaxValueSize: persona.MaxFileSize,
	}
}

// Memory is memory.md in the gateway-memory bucket: a persona.SharedMemory
// for the memory guard of each worker (MemoryGuard.Share), so no fact is
// lost when runs on two machines write at once. Every merge reads the key
// with its revision, merges, and writes with Update at that revision; when
// another machine wrote meanwhile it reads and merges again. It is safe
// for concurrent use.
type Memory struct {
	kv      jetstream.KeyValue
	conn    *nats.Conn
	timeout time.Duration
	log     zerolog.Logger
}

var _ persona.SharedMemory = (*Memory)(nil)

// OpenMemory creates the gateway-memory bucket with replicas copies, or
// checks the one there.
func OpenMemory(ctx context.Context, js jetstream.JetStream, replicas int, log zerolog.Logger) (*Memory, error) {
	kv, err := jsinbox.EnsureBucket(ctx, js, MemoryBucketConfig(replicas))
	if err != nil {
		return nil, err
	}
	return &Memory{kv: kv, conn: js.Conn(), timeout: memoryTimeout, log: log}, nil
}

// Merge implements persona.SharedMemory. A failure is logged here, as a
// warning: the file keeps every line and is merged at the next run.
func (m *Memory) Merge(base *string, local string) (string, bool) {
	merged, err := m.merge(base, local)
	if err != nil {
		m.log.Warn().Err(err).Msg("memory.md was not merged with the copy the other workers share; this worker's file keeps every line and is merged at its next run")
		return "", false
	}
	return merged, true
}

func (m *Memory) merge(base *string, local string) (string, error) {
	if !m.conn.IsConnected() {
		return "", fmt.Errorf("merge memory.md in bucket %s: %w", MemoryBucket, errUnreachable)
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.timeout)
	defer cancel()
	for range maxConflicts {
		shared, rev, err := m.get(ctx)
		if err != nil {
			return "", err
		}
		from := ""
		if base != nil {
			from = *base
		} else if from, err = m.firstBase(ctx, local, shared); err != nil {
			return "", err
		}
		merged := persona.MergeLines(from, shared, local)
		if len(merged) > persona.MaxFileSize {
			return "", fmt.Errorf("merge memory.md in bucket %s: %w: merged it would be %d bytes, the limit is %d (%d KiB); trim memory.md",
				MemoryBucket, persona.ErrMemoryTooLarge, len(merged), persona.MaxFileSize, persona.MaxFileSize>>10)
		}
		if rev != 0 && merged == shared {
			return merged, nil
		}
		if rev == 0 {
			_, err = m.kv.Create(ctx, MemoryKey, []byte(merged))
		} else {
			_, err = m.kv.Update(ctx, MemoryKey, []byte(merged), rev)
		}
		switch {
		case err == nil:
			return merged, nil
		case errors.Is(err, jetstream.ErrKeyRevisionMismatch), errors.Is(err, jetstream.ErrKeyExists):
			continue // another machine wrote first: merge with what it wrote
		default:
			return "", fmt.Errorf("write memory.md in bucket %s: %w", MemoryBucket, err)
		}
	}
	return "", fmt.Errorf("write memory.md in bucket %s: other workers wrote it %d times while this one merged", MemoryBucket, maxConflicts)
}

// get returns the shared text and its revision; 0 when there is none (never
// written, or deleted by hand).
func (m *Memory) get(ctx context.Context) (string, uint64, error) {
	e, err := m.kv.Get(ctx, MemoryKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", 0, nil
	}
	if err != nil {
		return "", 0, fmt.Errorf("read memory.md in bucket %s: %w", MemoryBucket, err)
	}
	return string(e.Value()), e.Revision(), nil
}

// firstBase is the base of a guard's first merge: the newest kept revision
// whose text is the file's, when there is one. A worker that restarts with
// the file it last merged then takes the deletions made elsewhere since,
// instead of bringing the deleted lines back. Otherwise (the file changed
// since, or it is older than the history) the base is empty: every line of
// both is kept, since a line lost is worse than one kept.
func (m *Memory) firstBase(ctx context.Context, local, shared string) (string, error) {
	if local == shared {
		return local, nil
	}
	entries, err := m.kv.History(ctx, MemoryKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the history of memory.md in bucket %s: %w", MemoryBucket, err)
	}
	for i := len(entries) - 1; i >= 0; i-- {
		if e := entries[i]; e.Operation() == jetstream.KeyValuePut && string(e.Value()) == local {
			return local, nil
		}
	}
	return "", nil
}
