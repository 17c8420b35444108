// Package kvstate keeps the state that must follow a channel to whichever
// worker runs its next turn on NATS JetStream (docs/scale-out.md §4): the
// session bindings, channel settings and reset times in the key-value
// bucket gateway-sessions (a session.Remote), and the agent CLIs'
// session transcripts in the object store bucket gateway-transcripts.
// Everything here is safe for concurrent use; each call to the server is
// bounded by the configured timeout.
package kvstate

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentgateway/gateway/internal/jsinbox"
	"github.com/agentgateway/gateway/internal/session"
)

// BucketSessions is the key-value bucket of the session bindings, channel
// settings and reset times.
const BucketSessions = "gateway-sessions"

// DefaultTimeout bounds each call to the server when Options leaves it 0.
const DefaultTimeout = 2 * time.Second

// Options configures the buckets.
type Options struct {
	// Replicas is the buckets' replica count (1 on a single server, 3 on
	// a cluster); 0 means 1.
	Replicas int
	// Timeout bounds each read or write; 0 means DefaultTimeout.
	Timeout time.Duration
}

func (o Options) withDefaults() Options {
	if o.Replicas <= 0 {
		o.Replicas = 1
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	return o
}

// SessionsConfig is the bucket OpenSessions creates or checks (doctor
// checks it with jsinbox.CheckBucket).
func SessionsConfig(o Options) jetstream.KeyValueConfig {
	o = o.withDefaults()
	return jetstream.KeyValueConfig{
		Bucket:      BucketSessions,
		Description: "agent gateway: sess.<channel> -> session binding, set.<channel> -> settings, reset.<channel> -> last reset",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    o.Replicas,
	}
}

// Sessions is a session.Remote on the bucket gateway-sessions: the record
// of kind k for channel c is the key k.<c encoded by EncodeKey>.
type Sessions struct {
	kv      jetstream.KeyValue
	timeout time.Duration
}

var _ session.Remote = (*Sessions)(nil)

// OpenSessions creates the bucket when missing and checks it when present
// (a different replica count is an error naming the fix).
func OpenSessions(ctx context.Context, js jetstream.JetStream, o Options) (*Sessions, error) {
	o = o.withDefaults()
	kv, err := jsinbox.EnsureBucket(ctx, js, SessionsConfig(o))
	if err != nil {
		return nil, err
	}
	return &Sessions{kv: kv, timeout: o.Timeout}, nil
}

// Get returns the record of kind for channel; a missing one is the zero
// Record.
func (s *Sessions) Get(ctx context.Context, kind, channel string) (session.Record, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	e, err := s.kv.Get(ctx, kind+"."+EncodeKey(channel))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return session.Record{}, nil
	}
	if err != nil {
		return session.Record{}, fmt.Errorf("read %s of %s from bucket %s: %w", kind, channel, BucketSessions, err)
	}
	return session.Record{Value: e.Value(), Revision: e.Revision()}, nil
}

// Update writes the record if its revision is still revision (0: create
// it); ok is false when another writer came first.
func (s *Sessions) Update(ctx context.Context, kind, channel string, value []byte, revision uint64) (uint64, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	key := kind + "." + EncodeKey(channel)
	var rev uint64
	var err error
	if revision == 0 {
		rev, err = s.kv.Create(ctx, key, value)
	} else {
		rev, err = s.kv.Update(ctx, key, value, revision)
	}
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("write %s of %s to bucket %s: %w", kind, channel, BucketSessions, err)
	}
	return rev, true, nil
}

// List returns every record of kind by channel. Keys whose channel part
// cannot be decoded were not written here and are skipped.
func (s *Sessions) List(ctx context.Context, kind string) (map[string]session.Record, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	w, err := s.kv.Watch(ctx, kind+".>", jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("list %s in bucket %s: %w", kind, BucketSessions, err)
	}
	defer w.Stop()
	out := map[string]session.Record{}
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("list %s in bucket %s: %w", kind, BucketSessions, ctx.Err())
		case e, ok := <-w.Updates():
			if !ok {
				return nil, fmt.Errorf("list %s in bucket %s: the watch ended", kind, BucketSessions)
			}
			if e == nil {
				return out, nil // every current record has come
			}
			ch, err := DecodeKey(strings.TrimPrefix(e.Key(), kind+"."))
			if err != nil {
				continue
			}
			out[ch] = session.Record{Value: e.Value(), Revision: e.Revision()}
		}
	}
}

// keyPrefix marks an encoded key token: '=' is allowed in KV keys but is
// never the first character of a plain one.
const keyPrefix = "="

// EncodeKey makes a channel or session key one valid token of a KV key.
// A key of only ASCII letters, digits, '-' and '_' (Discord ids) stays as
// it is, so the bucket reads plainly; anything else, and the empty key,
// becomes "=" and its unpadded base64url.
func EncodeKey(key string) string {
	if plainKey(key) {
		return key
	}
	return keyPrefix + base64.RawURLEncoding.EncodeToString([]byte(key))
}

func plainKey(key string) bool {
	if key == "" {
		return false
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// DecodeKey reverses EncodeKey; a token EncodeKey would not have made is
// an error.
func DecodeKey(token string) (string, error) {
	enc, ok := strings.CutPrefix(token, keyPrefix)
	if !ok {
		if !plainKey(token) {
			return "", fmt.Errorf("decode key %q: not a key token", token)
		}
		return token, nil
	}
	if enc != "" && !plainKey(enc) {
		// The decoder skips newlines; a token never holds one.
		return "", fmt.Errorf("decode key %q: not base64url", token)
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(enc)
	if err != nil {
		return "", fmt.Errorf("decode key %q: %w", token, err)
	}
	if plainKey(string(b)) {
		return "", fmt.Errorf("decode key %q: a plain key encoded", token)
	}
	return string(b), nil
}
