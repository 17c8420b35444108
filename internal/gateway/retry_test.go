package gateway

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/discord"
	"github.com/agentgateway/gateway/internal/inbox"
	"github.com/agentgateway/gateway/internal/queue"
)

// The Retry of an interrupted prompt is its author's, an approver's by
// id, or an approver's by role.
func TestRetryIsTheAuthorsOrAnApproversByIDOrRole(t *testing.T) {
	in, err := inbox.Open(filepath.Join(t.TempDir(), "inbox"), inbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close() })
	for id := uint64(1); id <= 4; id++ {
		if err := in.Add(queue.Event{ID: id, Kind: queue.KindMessage, ChannelID: "10", UserID: "100", Text: "again", Key: "key-" + strconv.FormatUint(id, 10)}); err != nil {
			t.Fatal(err)
		}
	}
	var retried []string
	r := &retrier{in: in, approvers: []string{"200"}, approverRoles: []string{"900"}, log: zerolog.Nop(),
		enqueue: func(e queue.Event) (queue.Receipt, error) {
			retried = append(retried, e.Key)
			return queue.Receipt{Event: e}, nil
		}}
	press := func(id, user string, roles ...string) discord.PressAnswer {
		return r.press(context.Background(), discord.Press{ButtonID: discord.RetryPrefix + id, UserID: user, Roles: roles})
	}
	for _, c := range []struct {
		id, user string
		roles    []string
		ok       bool
	}{
		{"1", "100", nil, true},              // the author
		{"2", "200", nil, true},              // APPROVER_IDS
		{"3", "300", []string{"900"}, true},  // APPROVER_ROLE_IDS
		{"4", "300", []string{"901"}, false}, // another role
	} {
		a := press(c.id, c.user, c.roles...)
		if got := a.Update != nil; got != c.ok {
			t.Errorf("retry %s by %s %v: retried %v (%q), want %v", c.id, c.user, c.roles, got, a.Notice, c.ok)
		}
	}
	if len(retried) != 3 {
		t.Errorf("retried %q, want three", retried)
	}
}
