package jsinbox

import (
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// Check creates nothing: on an empty server it says what is not set up
// yet, on a set-up one it passes, and a difference is named as Open
// names it.
func TestCheckChangesNothing(t *testing.T) {
	nc := connect(t, runServer(t, t.TempDir()))
	opts := Options{Partitions: 4, MaxDepth: 10, MaxPerLane: 3}
	if err := Check(bg(t), nc, opts); !errors.Is(err, ErrNotSetUp) {
		t.Fatalf("Check on an empty server = %v, want ErrNotSetUp", err)
	}
	js, err := jetstream.New(nc)
	must(t, err)
	if _, err := js.Stream(bg(t), StreamName); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("after Check the stream lookup says %v, want not found: Check created it", err)
	}
	for name := range js.KeyValueStoreNames(bg(t)).Name() {
		t.Errorf("Check created bucket %s", name)
	}
	openInbox(t, nc, opts)
	if err := Check(bg(t), nc, opts); err != nil {
		t.Errorf("Check after Open = %v, want nil", err)
	}
	other := opts
	other.MaxDepth = 20
	if err := Check(bg(t), nc, other); err == nil || !strings.Contains(err.Error(), "max_msgs is 10, want 20") {
		t.Errorf("Check with another depth = %v, want the difference named", err)
	}
}
