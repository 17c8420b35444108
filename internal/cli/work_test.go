package cli

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/cost"
)

func TestWorkChecks(t *testing.T) {
	dir := t.TempDir()
	cfg := &config.Config{ConfigDir: dir, WorkDir: filepath.Join(dir, "missing"), ProjectsRoot: dir, DailyBudgetUSD: 1}
	l, err := cost.Open(filepath.Join(dir, cost.FileName), nil)
	if err != nil {
		t.Fatal(err)
	}
	l.Record(cost.Entry{Time: time.Now(), Kind: "message", CostUSD: 1.5})
	l.Close() // writes it
	var lines []string
	for _, c := range workChecks(cfg, time.Now()) {
		lines = append(lines, c.Name+" ok="+map[bool]string{true: "y", false: "n"}[c.OK]+" warn="+map[bool]string{true: "y", false: "n"}[c.Warning]+" "+c.Detail)
	}
	got := strings.Join(lines, "\n")
	for _, want := range []string{"work-dir ok=n warn=n WORK_DIR", "projects ok=y", "cost ok=n warn=y spent today: $1.50", "used up"} {
		if !strings.Contains(got, want) {
			t.Errorf("checks lack %q:\n%s", want, got)
		}
	}
}
