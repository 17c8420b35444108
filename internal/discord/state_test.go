package discord

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/google/go-cmp/cmp"
)

func TestStateRoundTripAndBadFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, StateFile)
	want := map[discord.ChannelID]seen{1: {message: 10, guild: 5}, 2: {message: 20}}
	if err := saveState(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := loadState(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(seen{})); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	if got, err := loadState(filepath.Join(dir, "missing.json")); err != nil || len(got) != 0 {
		t.Errorf("missing file = %v, %v; want empty, no error", got, err)
	}
	for _, bad := range []string{"{", `{"version":99,"channels":{}}`, `[]`} {
		os.WriteFile(path, []byte(bad), 0o600)
		got, err := loadState(path)
		if err == nil || len(got) != 0 {
			t.Errorf("loadState(%q) = %v, %v; want empty with an error", bad, got, err)
		}
	}
}
