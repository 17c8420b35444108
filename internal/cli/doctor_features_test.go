package cli

import (
	"os"
	"strings"
	"testing"
)

// doctor says what the selected backend supports, and whether the
// settings turn its warm mode on.
func TestDoctorSaysWhatTheBackendSupports(t *testing.T) {
	tests := []struct {
		name, env string
		want      []string
	}{
		{"claude warm", "", []string{"claude: warm processes (stream-json)", "soft stop", "approvals in Discord", "warm processes are on"}},
		{"claude cold", "AGENT_KEEP_ALIVE=0\n", []string{"claude: warm processes (stream-json)", "warm processes are off (AGENT_KEEP_ALIVE=0)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, envFile := chatEnv(t)
			f, err := os.OpenFile(envFile, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString(tt.env)
			f.Close()
			report, out := doctorJSON(t, envFile)
			for _, c := range report.Checks {
				if c.Name != "features" {
					continue
				}
				for _, w := range tt.want {
					if !strings.Contains(c.Detail, w) {
						t.Errorf("features = %q, want it to say %q", c.Detail, w)
					}
				}
				return
			}
			t.Fatalf("doctor has no features line:\n%s", out)
		})
	}
}
