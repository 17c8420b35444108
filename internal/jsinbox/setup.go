package jsinbox

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Names of what Open creates (docs/scale-out.md §2).
const (
	StreamName      = "GATEWAY_EVENTS"
	BucketKeys      = "gateway-keys"
	BucketEvents    = "gateway-events"
	BucketDelivered = "gateway-deliveries"
	BucketSeen      = "gateway-seen"
	BucketMeta      = "gateway-meta"
	BucketLanes     = "gateway-lanes"

	consumerPrefix = "ev-"
	streamSubjects = subjectPrefix + "*.*"
)

// Keys of the meta bucket.
const (
	metaPrefix     = "nonce_prefix"
	metaCreated    = "created"
	metaPartitions = "partitions"
)

// streamConfig is the stream the options ask for.
func (o Options) streamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:                 StreamName,
		Description:          "agent gateway: accepted events, one subject per lane",
		Subjects:             []string{streamSubjects},
		Retention:            jetstream.WorkQueuePolicy,
		Storage:              jetstream.FileStorage,
		Replicas:             o.Replicas,
		Discard:              jetstream.DiscardNew,
		MaxMsgs:              limit(o.MaxDepth),
		MaxMsgsPerSubject:    limit(o.MaxPerLane),
		DiscardNewPerSubject: o.MaxPerLane > 0,
		MaxBytes:             -1,
		MaxAge:               0,
		Duplicates:           o.DuplicateWindow,
	}
}

// limit is a JetStream limit: -1 for none.
func limit(n int) int64 {
	if n <= 0 {
		return -1
	}
	return int64(n)
}

func (o Options) consumerConfig(p int) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       consumerPrefix + strconv.Itoa(p),
		Description:   "agent gateway: the events of partition " + strconv.Itoa(p) + ", one at a time",
		FilterSubject: subjectPrefix + strconv.Itoa(p) + ".*",
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       o.AckWait,
		MaxDeliver:    o.MaxDeliver,
		MaxAckPending: 1,
		ReplayPolicy:  jetstream.ReplayInstantPolicy,
	}
}

func (o Options) bucketConfigs() []jetstream.KeyValueConfig {
	kv := func(name, desc string, ttl time.Duration) jetstream.KeyValueConfig {
		return jetstream.KeyValueConfig{
			Bucket:      name,
			Description: desc,
			History:     1,
			TTL:         ttl,
			Storage:     jetstream.FileStorage,
			Replicas:    o.Replicas,
		}
	}
	return []jetstream.KeyValueConfig{
		kv(BucketKeys, "agent gateway: SHA-256 of each source key -> its event id", o.KeyTTL),
		kv(BucketEvents, "agent gateway: ev.<id> -> the event and its state", o.KeepFor),
		kv(BucketDelivered, "agent gateway: <id>.<chunk> -> the Discord message", o.KeepFor),
		kv(BucketSeen, "agent gateway: channel -> newest message seen", 0),
		kv(BucketMeta, "agent gateway: the nonce prefix, creation time and partitions", 0),
		kv(BucketLanes, "agent gateway: stop.<lane> -> the last event id a stop drops", o.KeepFor),
	}
}

// mismatch collects what differs between what exists and what is asked.
type mismatch []string

func (m *mismatch) add(format string, args ...any) { *m = append(*m, fmt.Sprintf(format, args...)) }

func (m mismatch) err(what, fix string) error {
	if len(m) == 0 {
		return nil
	}
	return fmt.Errorf("%s does not match this gateway's settings: %s; %s", what, strings.Join(m, "; "), fix)
}

// ensureStream creates the stream or checks the one there.
func ensureStream(ctx context.Context, js jetstream.JetStream, o Options) (jetstream.Stream, error) {
	return setupStream(ctx, js, o, true)
}

// setupStream checks the stream there; a missing one is created when
// create is set, else an ErrNotSetUp.
func setupStream(ctx context.Context, js jetstream.JetStream, o Options, create bool) (jetstream.Stream, error) {
	want := o.streamConfig()
	s, err := js.Stream(ctx, StreamName)
	if errors.Is(err, jetstream.ErrStreamNotFound) && !create {
		return nil, fmt.Errorf("stream %s: %w", StreamName, ErrNotSetUp)
	}
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		s, err = js.CreateStream(ctx, want)
		if err != nil {
			return nil, fmt.Errorf("create stream %s: %w", StreamName, err)
		}
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look up stream %s: %w", StreamName, err)
	}
	if err := checkStream(s.CachedInfo().Config, want); err != nil {
		return nil, err
	}
	return s, nil
}

// checkStream compares the settings that matter. The fix names the
// gateway setting to change or the nats CLI command that changes the
// stream, since the gateway never changes an existing stream itself.
func checkStream(got, want jetstream.StreamConfig) error {
	var m mismatch
	if strings.Join(got.Subjects, ",") != strings.Join(want.Subjects, ",") {
		m.add("subjects are %q, want %q", got.Subjects, want.Subjects)
	}
	if got.Retention != want.Retention {
		m.add("retention is %s, want %s (retention cannot change: the stream must be drained and deleted)", got.Retention, want.Retention)
	}
	if got.Storage != want.Storage {
		m.add("storage is %s, want %s", got.Storage, want.Storage)
	}
	if got.Replicas != want.Replicas {
		m.add("replicas are %d, want %d (nats stream edit %s --replicas %d, or set the gateway's replicas to %d)",
			got.Replicas, want.Replicas, StreamName, want.Replicas, got.Replicas)
	}
	if got.Discard != want.Discard {
		m.add("discard policy is %s, want %s", got.Discard, want.Discard)
	}
	if norm(got.MaxMsgs) != norm(want.MaxMsgs) {
		m.add("max_msgs is %s, want %s (set MAX_QUEUE_DEPTH=%s, or nats stream edit %s --max-msgs %d)",
			show(got.MaxMsgs), show(want.MaxMsgs), show(got.MaxMsgs), StreamName, want.MaxMsgs)
	}
	if norm(got.MaxMsgsPerSubject) != norm(want.MaxMsgsPerSubject) || got.DiscardNewPerSubject != want.DiscardNewPerSubject {
		m.add("max_msgs_per_subject is %s (discard new per subject %t), want %s (%t) (set MAX_CHANNEL_QUEUE=%s, or nats stream edit %s --max-msgs-per-subject %d)",
			show(got.MaxMsgsPerSubject), got.DiscardNewPerSubject, show(want.MaxMsgsPerSubject), want.DiscardNewPerSubject,
			show(got.MaxMsgsPerSubject), StreamName, want.MaxMsgsPerSubject)
	}
	if got.Duplicates != want.Duplicates {
		m.add("duplicate_window is %s, want %s (nats stream edit %s --dupe-window %s)", got.Duplicates, want.Duplicates, StreamName, want.Duplicates)
	}
	return m.err("stream "+StreamName, "the gateway does not change an existing stream: change the setting or the stream")
}

func norm(n int64) int64 {
	if n <= 0 {
		return -1
	}
	return n
}

func show(n int64) string {
	if n <= 0 {
		return "unlimited"
	}
	return strconv.FormatInt(n, 10)
}

// ensureConsumers creates the partitions' consumers or checks them; a
// partition consumer beyond o.Partitions means the stream was made with
// more partitions.
func ensureConsumers(ctx context.Context, s jetstream.Stream, o Options) error {
	return setupConsumers(ctx, s, o, true)
}

// setupConsumers checks the consumers; missing ones are created when
// create is set, else reported.
func setupConsumers(ctx context.Context, s jetstream.Stream, o Options, create bool) error {
	have := map[string]*jetstream.ConsumerInfo{}
	infos := s.ListConsumers(ctx)
	for ci := range infos.Info() {
		have[ci.Name] = ci
	}
	if err := infos.Err(); err != nil {
		return fmt.Errorf("list the consumers of %s: %w", StreamName, err)
	}
	var m mismatch
	for name := range have {
		n, ok := strings.CutPrefix(name, consumerPrefix)
		if p, err := strconv.Atoi(n); ok && err == nil && p >= o.Partitions {
			m.add("consumer %s exists, so the stream was made with more than %d partitions", name, o.Partitions)
		}
	}
	for p := range o.Partitions {
		want := o.consumerConfig(p)
		ci := have[want.Durable]
		if ci == nil && !create {
			m.add("consumer %s is missing", want.Durable)
			continue
		}
		if ci == nil {
			if _, err := s.CreateConsumer(ctx, want); err != nil {
				return fmt.Errorf("create consumer %s: %w", want.Durable, err)
			}
			continue
		}
		got := ci.Config
		if got.FilterSubject != want.FilterSubject || got.AckPolicy != want.AckPolicy || got.MaxAckPending != want.MaxAckPending ||
			got.AckWait != want.AckWait || got.MaxDeliver != want.MaxDeliver || got.DeliverPolicy != want.DeliverPolicy {
			m.add("consumer %s has filter %q, ack %s, ack_wait %s, max_deliver %d, max_ack_pending %d; want %q, %s, %s, %d, 1",
				want.Durable, got.FilterSubject, got.AckPolicy, got.AckWait, got.MaxDeliver, got.MaxAckPending,
				want.FilterSubject, want.AckPolicy, want.AckWait, want.MaxDeliver)
		}
	}
	return m.err("the consumers of "+StreamName, "partitions are fixed when the stream is made: let every event finish, delete the stream (nats stream rm "+StreamName+") and start again, or go back to the settings it was made with")
}

// ensureBucket creates a KV bucket or checks the one there.
func ensureBucket(ctx context.Context, js jetstream.JetStream, want jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	return setupBucket(ctx, js, want, true)
}

// setupBucket checks a bucket; a missing one is created when create is
// set, else an ErrNotSetUp.
func setupBucket(ctx context.Context, js jetstream.JetStream, want jetstream.KeyValueConfig, create bool) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, want.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) && !create {
		return nil, fmt.Errorf("bucket %s: %w", want.Bucket, ErrNotSetUp)
	}
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, want)
		if err != nil {
			return nil, fmt.Errorf("create bucket %s: %w", want.Bucket, err)
		}
		return kv, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look up bucket %s: %w", want.Bucket, err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("read bucket %s: %w", want.Bucket, err)
	}
	got := st.Config()
	var m mismatch
	if got.Replicas != want.Replicas {
		m.add("replicas are %d, want %d", got.Replicas, want.Replicas)
	}
	if got.TTL != want.TTL {
		m.add("ttl is %s, want %s", got.TTL, want.TTL)
	}
	if got.History != want.History {
		m.add("history is %d, want %d", got.History, want.History)
	}
	if got.Storage != want.Storage {
		m.add("storage is %s, want %s", got.Storage, want.Storage)
	}
	if err := m.err("bucket "+want.Bucket, fmt.Sprintf("change the setting, or edit the bucket (nats kv edit %s)", want.Bucket)); err != nil {
		return nil, err
	}
	return kv, nil
}

// ensureMeta reads the nonce prefix, creation time and partition count,
// writing them the first time. Two gateways starting at once both try to
// create each key; the first wins and the other reads what it wrote.
func ensureMeta(ctx context.Context, kv jetstream.KeyValue, o Options) (prefix string, created time.Time, err error) {
	get := func(key, fresh string) (string, error) {
		if _, err := kv.Create(ctx, key, []byte(fresh)); err == nil {
			return fresh, nil
		} else if !errors.Is(err, jetstream.ErrKeyExists) {
			return "", fmt.Errorf("write %s in bucket %s: %w", key, BucketMeta, err)
		}
		e, err := kv.Get(ctx, key)
		if err != nil {
			return "", fmt.Errorf("read %s in bucket %s: %w", key, BucketMeta, err)
		}
		return string(e.Value()), nil
	}
	parts, err := get(metaPartitions, strconv.Itoa(o.Partitions))
	if err != nil {
		return "", time.Time{}, err
	}
	if parts != strconv.Itoa(o.Partitions) {
		return "", time.Time{}, fmt.Errorf("stream %s was made with %s partitions and this gateway asks for %d: "+
			"partitions are fixed when the stream is made; go back to %s, or let every event finish, delete the stream and bucket %s (nats stream rm %s; nats kv del %s) and start again",
			StreamName, parts, o.Partitions, parts, BucketMeta, StreamName, BucketMeta)
	}
	if prefix, err = get(metaPrefix, newPrefix()); err != nil {
		return "", time.Time{}, err
	}
	at, err := get(metaCreated, o.Now().UTC().Format(time.RFC3339Nano))
	if err != nil {
		return "", time.Time{}, err
	}
	if created, err = time.Parse(time.RFC3339Nano, at); err != nil {
		return "", time.Time{}, fmt.Errorf("bucket %s: created %q: %w", BucketMeta, at, err)
	}
	return prefix, created, nil
}
