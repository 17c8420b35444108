package gateway

import (
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/agent"
	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/queue"
)

// A person's own session in a shared channel (SESSION_SCOPE=user) is
// given only their own recent exchanges; the channel's session all of
// them.
func TestRecentContextOfOnePerson(t *testing.T) {
	x := openExchanges(&config.Config{ConfigDir: t.TempDir(), HistoryMessages: 20}, zerolog.Nop())
	if x == nil {
		t.Fatal("no archive")
	}
	t.Cleanup(func() { x.Close() })
	for _, e := range []queue.Event{
		{ID: 1, Kind: queue.KindMessage, ChannelID: "10", UserID: "alice", Author: "alice", Text: "alice's question"},
		{ID: 2, Kind: queue.KindMessage, ChannelID: "10", UserID: "bob", Author: "bob", Text: "bob's question"},
	} {
		x.Exchange(e, agent.Outcome{Reply: "answer to " + e.Text}, time.Second)
	}
	all := x.RecentContext("10", "", time.Time{})
	bobs := x.RecentContext("10", "bob", time.Time{})
	if !strings.Contains(all, "alice's question") || !strings.Contains(all, "bob's question") {
		t.Errorf("the channel's recent context = %q, want both people's exchanges", all)
	}
	if strings.Contains(bobs, "alice's question") || !strings.Contains(bobs, "bob's question") {
		t.Errorf("bob's recent context = %q, want only his own exchanges", bobs)
	}
}
