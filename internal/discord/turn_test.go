package discord

import (
	"context"
	"testing"
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
