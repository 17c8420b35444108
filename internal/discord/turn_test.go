package discord

import (
	"context"
	"testing"

	"github.com/agentgateway/gateway/internal/queue"
)

// A tap on a Stop button whose turn is over (a client that still shows
// it) is acknowledged and changes nothing.
func TestLateStopTapIsIgnored(t *testing.T) {
	b := &Bot{turns: map[uint64]*turn{}}
	for _, id := range []string{"stop:7", "stopall:7", "stop:x"} {
		if a := b.onStopPress(context.Background(), Press{ButtonID: id, UserID: "1", ChannelID: "2"}); a.Update != nil || a.Notice != "" {
			t.Errorf("late press %s answered %+v, want a silent acknowledgement", id, a)
		}
	}
}

func TestMayStop(t *testing.T) {
	open := &Bot{}
	listed := &Bot{opts: Options{Access: NewAccess([]string{"9"}, nil, nil)}}
	prompt := queue.Event{UserID: "1"}
	heartbeat := queue.Event{}
	for _, tt := range []struct {
		b    *Bot
		user string
		e    queue.Event
		want bool
	}{
		{open, "1", prompt, true},
		{open, "2", prompt, false},
		{listed, "9", prompt, true},
		{listed, "2", prompt, false},
		{open, "2", heartbeat, true},
	} {
		if got := tt.b.mayStop(tt.user, tt.e); got != tt.want {
			t.Errorf("mayStop(%s, %+v) = %v, want %v", tt.user, tt.e, got, tt.want)
		}
	}
}
