package hold

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentgateway/gateway/internal/queue"
	"github.com/agentgateway/gateway/internal/schedule"
)

// forwarded collects what a worker's gate hands on.
type forwarded chan Proposal

func (f forwarded) forward(_ context.Context, p Proposal) error {
	f <- p
	return nil
}

func (f forwarded) next(t *testing.T) Proposal {
	t.Helper()
	select {
	case p := <-f:
		return p
	case <-time.After(10 * time.Second):
		t.Fatal("nothing was handed on")
		return Proposal{}
	}
}

func (f forwarded) none(t *testing.T) {
	t.Helper()
	select {
	case p := <-f:
		t.Fatalf("handed on %+v, want nothing", p)
	default:
	}
}

// On a worker an agent's schedule edit is handed to the process that runs
// the schedule instead of being asked about here; the file is put back and
// the change is not handed on again.
func TestWorkerGateHandsTheChangeOn(t *testing.T) {
	fw := make(forwarded, 4)
	f := newFixture(t, Options{Forward: fw.forward})
	used, ended := f.gate.TurnStarted(turnEvent("7", "55"))
	used("Write")
	writeFile(t, f.dir, schedule.AgentsFile, withSpam)
	f.check()
	ended()
	f.check()
	got := fw.next(t)
	want := Proposal{File: schedule.AgentsFile, Content: withSpam, Base: baseAgents, BaseExists: true, Tools: []string{"Write"}, Channel: "7", User: "55"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("proposal (-want +got):\n%s", diff)
	}
	if got := f.read(schedule.AgentsFile); got != baseAgents {
		t.Fatalf("agents.md on the worker:\n%s\nwant it put back", got)
	}
	if len(f.ask.asks) != 0 || len(f.gate.Pending()) != 0 {
		t.Fatalf("the worker asked itself: asks %v, pending %d", f.ask.asks, len(f.gate.Pending()))
	}
	f.check()
	fw.none(t)
	if got := f.rel.applied(); got != baseAgents {
		t.Fatalf("the worker's schedule runs from:\n%s", got)
	}
}

// The process that runs the schedule holds a proposal as its own agent's
// edit: the same message, approvers and Apply.
func TestProposeIsHeldAndApplied(t *testing.T) {
	for _, tc := range []struct {
		name, output, wantChannel string
	}{
		{"output channel", "900", "900"},
		{"the turn's channel", "", "7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Options{Channel: tc.output})
			if tc.output == "" {
				f.gate.opts.Channel = ""
			}
			err := f.gate.Propose(context.Background(), Proposal{File: schedule.AgentsFile, Content: withSpam, Base: baseAgents, BaseExists: true, Tools: []string{"Write"}, Channel: "7", User: "55"})
			if err != nil {
				t.Fatal(err)
			}
			f.held()
			if len(f.ask.asks) != 1 || f.ask.asks[0].channel != tc.wantChannel {
				t.Fatalf("asks = %+v, want one in %s", f.ask.asks, tc.wantChannel)
			}
			if !strings.Contains(f.ask.asks[0].text, "Post an advert.") {
				t.Fatalf("held message:\n%s", f.ask.asks[0].text)
			}
			ans := f.press(actionApply, "42", false)
			if ans.Update == nil || !strings.Contains(*ans.Update, "Applied by <@42>") {
				t.Fatalf("apply answer = %+v", ans)
			}
			if got := f.read(schedule.AgentsFile); got != withSpam {
				t.Fatalf("agents.md after Apply:\n%s", got)
			}
			if got := f.rel.applied(); got != withSpam {
				t.Fatalf("schedule after Apply:\n%s", got)
			}
		})
	}
}

// A proposal of what already applies changes nothing (a worker's mirror
// catching up); one that changes prose only is written as it would be on
// one machine.
func TestProposeWithoutScheduleChange(t *testing.T) {
	f := newFixture(t, Options{})
	if err := f.gate.Propose(context.Background(), Proposal{File: schedule.AgentsFile, Content: baseAgents, Base: baseAgents, BaseExists: true, Tools: []string{"Write"}}); err != nil {
		t.Fatal(err)
	}
	if len(f.ask.asks) != 0 || len(f.gate.Pending()) != 0 {
		t.Fatal("a proposal of the applied content was held")
	}
	prose := strings.Replace(baseAgents, "Be helpful.", "Be kind.", 1)
	if err := f.gate.Propose(context.Background(), Proposal{File: schedule.AgentsFile, Content: prose, Base: baseAgents, BaseExists: true, Tools: []string{"Write"}}); err != nil {
		t.Fatal(err)
	}
	if got := f.read(schedule.AgentsFile); got != prose {
		t.Fatalf("agents.md:\n%s\nwant the prose change written", got)
	}
	if len(f.ask.asks) != 0 || len(f.gate.Pending()) != 0 {
		t.Fatal("a prose change was held")
	}
}

// A cron action on a worker hands its edit on and writes nothing there;
// the process running the schedule applies it at once when agents.md is
// still what the edit was made on, and refuses it otherwise.
func TestCronEditOnAWorkerIsAppliedWhereTheScheduleRuns(t *testing.T) {
	fw := make(forwarded, 4)
	w := newFixture(t, Options{Forward: fw.forward})
	if err := w.editAgents(addNightly); err != nil {
		t.Fatal(err)
	}
	p := fw.next(t)
	if !p.Cron || p.Content != baseAgents+nightly || p.Base != baseAgents {
		t.Fatalf("proposal = %+v", p)
	}
	if got := w.read(schedule.AgentsFile); got != baseAgents {
		t.Fatalf("the worker wrote agents.md:\n%s", got)
	}

	run := newFixture(t, Options{})
	if err := run.gate.Propose(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if got := run.read(schedule.AgentsFile); got != baseAgents+nightly {
		t.Fatalf("agents.md where the schedule runs:\n%s", got)
	}
	if got := run.rel.applied(); got != baseAgents+nightly {
		t.Fatalf("schedule:\n%s", got)
	}
	if len(run.ask.asks) != 0 {
		t.Fatal("a cron action's edit was held")
	}
	// Made on an older agents.md: refused, nothing written.
	err := run.gate.Propose(context.Background(), p)
	if !errors.Is(err, ErrStale) {
		t.Fatalf("stale cron edit: err = %v, want ErrStale", err)
	}
	if got := run.read(schedule.AgentsFile); got != baseAgents+nightly {
		t.Fatalf("agents.md after a stale edit:\n%s", got)
	}
}

// A worker whose hand-on fails says so to the cron action.
func TestCronEditOnAWorkerReportsAFailedHandOn(t *testing.T) {
	w := newFixture(t, Options{Forward: func(context.Context, Proposal) error { return errors.New("no run node") }})
	if err := w.editAgents(addNightly); err == nil || !strings.Contains(err.Error(), "no run node") {
		t.Fatalf("err = %v", err)
	}
}

func turnEvent(channel, user string) queue.Event {
	return queue.Event{ChannelID: channel, UserID: user}
}

// A file the worker's mirror writes during a turn that wrote before is
// the operator's: applied, not handed on.
func TestAdoptedFileIsNotHandedOn(t *testing.T) {
	fw := make(forwarded, 4)
	f := newFixture(t, Options{Forward: fw.forward})
	ended := f.writingTurn("Write")
	defer ended()
	writeFile(t, f.dir, schedule.AgentsFile, withSpam)
	f.gate.Adopt(context.Background(), schedule.AgentsFile, "soul.md")
	f.check()
	ended()
	f.check()
	fw.none(t)
	if got := f.read(schedule.AgentsFile); got != withSpam {
		t.Fatalf("agents.md:\n%s\nwant the mirrored file kept", got)
	}
	if got := f.rel.applied(); got != withSpam {
		t.Fatalf("schedule:\n%s", got)
	}
}
