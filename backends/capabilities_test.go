package backends

import (
	"flag"
	"strings"
	"testing"

	"github.com/agentgateway/gateway/internal/readmetest"
)

var updateREADME = flag.Bool("update-readme", false, "rewrite the backend table of docs/backends.md from the adapters' capabilities")

// The backend table in docs/backends.md is made from what each adapter
// declares: go test ./backends -run TestREADMEBackendTable -update-readme
// rewrites it.
func TestREADMEBackendTable(t *testing.T) {
	table, err := CapabilityTable(Names())
	if err != nil {
		t.Fatal(err)
	}
	readmetest.Section(t, "../docs/backends.md",
		"<!-- backend table: made by go test ./backends -update-readme -->\n", "<!-- end of backend table -->",
		table, *updateREADME, "go test ./backends -run TestREADMEBackendTable -update-readme")
}

// Every registered backend declares its capabilities, and a backend that
// can steer has the Steer method the gateway looks for.
func TestEveryBackendDeclaresCapabilities(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			b, err := New(name, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if c, ok := b.(interface{ Close() error }); ok {
				t.Cleanup(func() { c.Close() })
			}
			caps, ok := CapabilitiesOf(b)
			if !ok {
				t.Fatalf("%s has no Capabilities method", name)
			}
			_, steers := b.(interface{ Steer(key, text string) error })
			if caps.Steering && !steers {
				t.Errorf("%s declares steering but has no Steer method", name)
			}
			_, warm := b.(interface{ Warm() WarmStats })
			if caps.Warm != "" && !warm {
				t.Errorf("%s declares warm processes but has no Warm method to report them", name)
			}
		})
	}
}

func TestCapabilitiesSummary(t *testing.T) {
	tests := []struct {
		caps Capabilities
		want []string
	}{
		{Capabilities{Warm: "stream-json", SoftStop: true, Approvals: true, Steering: true, Images: true, Cost: true, Resume: true},
			[]string{"warm processes (stream-json)", "soft stop", "approvals in Discord", "steering", "images", "cost", "resume"}},
		{Capabilities{Resume: true},
			[]string{"a process per turn", "stop kills the process", "no approvals in Discord", "no steering", "no images", "no cost", "resume"}},
	}
	for _, tt := range tests {
		if got := strings.Split(tt.caps.Summary(), ", "); strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("Summary(%+v) = %q, want %q", tt.caps, got, tt.want)
		}
	}
}
