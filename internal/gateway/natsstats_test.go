package gateway

import (
	"testing"
	"time"

	"github.com/agentgateway/gateway/internal/inbox"
)

// The inbox's figures on NATS are read at most once per statsEvery: each
// read goes through every kept record.
func TestNATSStatsAreReusedForAWhile(t *testing.T) {
	now := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	reads := 0
	c := cachedStats{now: func() time.Time { return now }, read: func() inbox.Stats {
		reads++
		return inbox.Stats{Entries: reads}
	}}
	if got := c.get().Entries; got != 1 {
		t.Fatalf("first read gave %d entries", got)
	}
	now = now.Add(statsEvery - time.Second)
	if got := c.get().Entries; got != 1 || reads != 1 {
		t.Errorf("within %s: %d entries after %d reads, want the first figures reused", statsEvery, got, reads)
	}
	now = now.Add(time.Second)
	if got := c.get().Entries; got != 2 || reads != 2 {
		t.Errorf("after %s: %d entries after %d reads, want a fresh read", statsEvery, got, reads)
	}
}
