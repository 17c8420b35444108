package jsinbox

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"
)

// stopKey is a lane's stop mark in gateway-lanes.
func stopKey(lane string) string { return "stop." + laneToken(lane) }

// MarkStop records that the lane's events up to now are dropped
// (/claude-stop all:true): whichever worker is handed one of them later
// finishes it as dropped instead of running it. It returns how many of the
// lane's events the stream held (the running one included).
func (in *Inbox) MarkStop(ctx context.Context, lane string) (held int, err error) {
	if err := in.checkOpen(); err != nil {
		return 0, err
	}
	info, err := in.stream.Info(ctx, jetstream.WithSubjectFilter(subject(lane, in.opts.Partitions)))
	if err != nil {
		return 0, fmt.Errorf("read the lane's events: %w", err)
	}
	for _, n := range info.State.Subjects {
		held += int(n)
	}
	mark := strconv.FormatUint(info.State.LastSeq, 10)
	if _, err := in.lanes.PutString(ctx, stopKey(lane), mark); err != nil {
		return held, fmt.Errorf("record the lane's stop: %w", err)
	}
	return held, nil
}

// LaneDepth is how many of the lane's events the stream holds: the one
// running, if any, and those waiting behind it.
func (in *Inbox) LaneDepth(ctx context.Context, lane string) (int, error) {
	info, err := in.stream.Info(ctx, jetstream.WithSubjectFilter(subject(lane, in.opts.Partitions)))
	if err != nil {
		return 0, fmt.Errorf("read the lane's events: %w", err)
	}
	n := 0
	for _, c := range info.State.Subjects {
		n += int(c)
	}
	return n, nil
}

// StopMark is the last event id a stop of the lane dropped; 0 when none.
func (in *Inbox) StopMark(ctx context.Context, lane string) (uint64, error) {
	kv, err := in.lanes.Get(ctx, stopKey(lane))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read the lane's stop: %w", err)
	}
	n, err := strconv.ParseUint(string(kv.Value()), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("the lane's stop mark %q: %w", kv.Value(), err)
	}
	return n, nil
}
