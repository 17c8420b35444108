package hold

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentgateway/gateway/internal/queue"
	"github.com/agentgateway/gateway/internal/schedule"
)

// nightly is a job a cron action adds.
const nightly = "\n### nightly\nCron: 0 2 * * *\nInstruction: Clean up.\n"

func addNightly(content string) (string, error) { return content + nightly, nil }

func (f *fixture) editAgents(change func(string) (string, error)) error {
	return f.gate.EditAgents(context.Background(), change)
}

// A cron action's edit is the gateway's own: applied at once, while
// another channel's writing turn runs and after it, never held or put back.
func TestEditAgentsIsAppliedDuringAWritingTurn(t *testing.T) {
	f := newFixture(t, Options{})
	ended := f.writingTurn("Bash")
	if err := f.editAgents(addNightly); err != nil {
		t.Fatal(err)
	}
	want := baseAgents + nightly
	if got := f.rel.applied(); got != want {
		t.Fatalf("schedule applied from:\n%s\nwant the edited file", got)
	}
	for _, step := range []func(){f.check, ended, f.check} {
		step()
		if got := f.read(schedule.AgentsFile); got != want {
			t.Fatalf("agents.md:\n%s\nwant the edit kept", got)
		}
		if len(f.gate.Pending()) != 0 || len(f.ask.asks) != 0 {
			t.Fatalf("the gateway's own edit was held: asks %v", f.ask.asks)
		}
	}
	if got := f.rel.applied(); got != want {
		t.Fatalf("schedule applied from:\n%s\nafter the turn ended", got)
	}
}

// An agent's write that is already on disk is judged first, and held as
// ever; the cron action builds on the file as it was put back, and the hold
// it makes stale is closed with a reason.
func TestEditAgentsJudgesAnAgentsWriteFirst(t *testing.T) {
	f := newFixture(t, Options{})
	ended := f.writingTurn("Write")
	defer ended()
	writeFile(t, f.dir, schedule.AgentsFile, withSpam)
	var got string
	err := f.editAgents(func(c string) (string, error) {
		got = c
		return addNightly(c)
	})
	if err != nil {
		t.Fatal(err)
	}
	if got != baseAgents {
		t.Fatalf("the change was given:\n%s\nwant the file put back as it was", got)
	}
	if got := f.read(schedule.AgentsFile); got != baseAgents+nightly {
		t.Fatalf("agents.md:\n%s", got)
	}
	if strings.Contains(f.rel.applied(), "spam") {
		t.Fatal("the agent's held job reached the schedule")
	}
	if len(f.ask.asks) != 1 || len(f.ask.edits) != 1 || !strings.Contains(f.ask.edits[0].text, "changed by a cron action") {
		t.Fatalf("asks %v, edits %v; want the hold posted, then closed as stale", f.ask.asks, f.ask.edits)
	}
	if len(f.gate.Pending()) != 0 {
		t.Fatal("a stale hold is still pending")
	}
}

func TestEditAgentsRefusesAnUndecidedChange(t *testing.T) {
	f := newFixture(t, Options{})
	_, ended := f.gate.TurnStarted(queue.Event{ChannelID: "7"}) // no tool yet
	writeFile(t, f.dir, schedule.AgentsFile, withSpam)
	called := false
	err := f.editAgents(func(c string) (string, error) { called = true; return c, nil })
	if !errors.Is(err, ErrUndecided) || called {
		t.Fatalf("EditAgents = %v (change called: %v), want ErrUndecided before any change", err, called)
	}
	if got := f.read(schedule.AgentsFile); got != withSpam {
		t.Fatalf("agents.md:\n%s\nwant the undecided edit left alone", got)
	}
	ended()
	if err := f.editAgents(addNightly); err != nil {
		t.Fatalf("after the turn ended: %v", err)
	}
	if got := f.rel.applied(); got != withSpam+nightly {
		t.Fatalf("schedule applied from:\n%s", got)
	}
}

func TestEditAgentsErrorsWriteNothing(t *testing.T) {
	f := newFixture(t, Options{})
	boom := errors.New("no such job")
	if err := f.editAgents(func(string) (string, error) { return "junk", boom }); !errors.Is(err, boom) {
		t.Fatalf("EditAgents = %v, want the change's error", err)
	}
	if got := f.read(schedule.AgentsFile); got != baseAgents {
		t.Fatalf("agents.md:\n%s\nwant it untouched", got)
	}
	if n := f.rel.count; n != 1 {
		t.Fatalf("%d reloads, want only the one at Start", n)
	}
}

func TestEditAgentsCreatesTheFile(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t, Options{Dir: dir})
	var got string
	err := f.editAgents(func(c string) (string, error) { got = c; return "## Cron Jobs\n" + nightly, nil })
	if err != nil {
		t.Fatal(err)
	}
	if got != "" {
		t.Fatalf("a missing file was given as %q, want empty", got)
	}
	fi, err := os.Stat(filepath.Join(dir, schedule.AgentsFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("agents.md: %v, mode %v; want it created 0600", err, fi)
	}
	if !strings.Contains(f.rel.applied(), "nightly") {
		t.Fatalf("schedule applied from:\n%s", f.rel.applied())
	}
}
