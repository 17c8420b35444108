package jsinbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"

	"github.com/nats-io/nats.go/jetstream"
)

// See records the newest messages seen without an event; none lowers a
// channel's newest.
func (in *Inbox) See(seen ...Seen) error {
	if err := in.checkOpen(); err != nil {
		return err
	}
	ctx, cancel := in.ctx()
	defer cancel()
	return in.see(ctx, seen)
}

// see raises each channel's newest message under a revision check, so two
// writers never lower it.
func (in *Inbox) see(ctx context.Context, seen []Seen) error {
	var errs []error
	for _, s := range seen {
		if s.Channel == "" || s.Message == "" {
			continue
		}
		if err := in.raise(ctx, s); err != nil {
			errs = append(errs, fmt.Errorf("record the newest message of channel %s: %w", s.Channel, err))
		}
	}
	return errors.Join(errs...)
}

func (in *Inbox) raise(ctx context.Context, s Seen) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	key := seenKey(s.Channel)
	for {
		old, err := in.seen.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			_, err = in.seen.Create(ctx, key, b)
		case err != nil:
			return err
		default:
			var o Seen
			if json.Unmarshal(old.Value(), &o) == nil && !newer(s.Message, o.Message) {
				return nil
			}
			_, err = in.seen.Update(ctx, key, b, old.Revision())
		}
		if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			continue
		}
		return err
	}
}

// seenKey is a channel as a KV key: snowflakes as they are, anything else
// encoded as a lane is.
func seenKey(channel string) string { return "ch." + laneToken(channel) }

// newer compares Discord snowflakes as numbers ("10" is newer than "9").
func newer(a, b string) bool {
	x, okA := new(big.Int).SetString(a, 10)
	y, okB := new(big.Int).SetString(b, 10)
	if !okA || !okB {
		return okA && !okB
	}
	return x.Cmp(y) > 0
}

// LastSeen returns the newest message seen per channel; nil when the
// server could not be read.
func (in *Inbox) LastSeen() map[string]Seen {
	ctx, cancel := in.ctx()
	defer cancel()
	out := map[string]Seen{}
	w, err := in.seen.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil
	}
	defer w.Stop()
	for {
		select {
		case kv := <-w.Updates():
			if kv == nil {
				return out
			}
			var s Seen
			if json.Unmarshal(kv.Value(), &s) == nil {
				out[s.Channel] = s
			}
		case <-ctx.Done():
			return nil
		}
	}
}
