package schedule

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The shipped config keeps its examples inside HTML comments: they must not
// run until the operator moves them out.
func TestShippedConfigParsesEmpty(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("..", "..", "config")
	hb, err := os.ReadFile(filepath.Join(dir, HeartbeatFile))
	if err != nil {
		t.Fatal(err)
	}
	checks, problems := ParseHeartbeats(string(hb))
	if len(checks) != 0 || len(problems) != 0 {
		t.Errorf("ParseHeartbeats(config/heartbeat.md) = %v, %v; want nothing", checks, problems)
	}
	ag, err := os.ReadFile(filepath.Join(dir, AgentsFile))
	if err != nil {
		t.Fatal(err)
	}
	agents, problems := ParseAgents(string(ag))
	if len(agents.CronJobs) != 0 || len(agents.Hooks) != 0 || len(agents.Webhooks) != 0 || len(problems) != 0 {
		t.Errorf("ParseAgents(config/agents.md) = %+v, %v; want nothing", agents, problems)
	}
}

// Uncommenting the shipped examples must give working items: the examples
// are the documentation.
func TestShippedExamplesParseWhenUncommented(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("..", "..", "config")
	hb, err := os.ReadFile(filepath.Join(dir, HeartbeatFile))
	if err != nil {
		t.Fatal(err)
	}
	checks, problems := ParseHeartbeats(uncomment(string(hb)))
	if len(checks) == 0 || len(problems) != 0 {
		t.Errorf("uncommented heartbeat.md: %d checks, problems %v; want some checks and no problems", len(checks), problems)
	}
	ag, err := os.ReadFile(filepath.Join(dir, AgentsFile))
	if err != nil {
		t.Fatal(err)
	}
	agents, problems := ParseAgents(uncomment(string(ag)))
	if len(agents.CronJobs) == 0 || len(agents.Hooks) == 0 || len(problems) != 0 {
		t.Errorf("uncommented agents.md: %+v, problems %v; want cron jobs, hooks and no problems", agents, problems)
	}
}

// uncomment removes the HTML comment markers, keeping what they enclosed.
func uncomment(s string) string {
	return strings.NewReplacer("<!--", "", "-->", "").Replace(s)
}
