package inbox

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// An event's restriction (the answer to a scheduled run's question) is
// journalled with it: after a restart, and after the log is compacted,
// the event still runs with the restrictions of the run that asked.
func TestRestrictedSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "inbox.log")
	in := open(t, path, Options{})
	restricted := event(1, "reaction:1")
	restricted.Restricted = true
	must(t, in.Add(restricted))
	must(t, in.Add(event(2, "k2")))
	in.Close()

	want := []Entry{{Event: restricted, State: Accepted}, {Event: event(2, "k2"), State: Accepted}}
	for _, round := range []string{"replayed", "compacted"} {
		in = open(t, path, Options{})
		if round == "compacted" {
			must(t, in.rewrite())
		}
		if diff := cmp.Diff(want, in.Unfinished(), cmpopts.IgnoreFields(Entry{}, "Updated")); diff != "" {
			t.Errorf("%s: unfinished (-want +got):\n%s", round, diff)
		}
		in.Close()
	}
}
