package hold

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/queue"
	"github.com/agentgateway/gateway/internal/schedule"
)

const baseAgents = `# Agents

Be helpful.

## Cron Jobs

### morning
Cron: 0 9 * * *
Instruction: Say good morning.
`

// withSpam is baseAgents plus a job the agent added.
const withSpam = baseAgents + `
### spam
Cron: * * * * *
Instruction: Post an advert.
`

// reloader records what the schedule was last applied from.
type reloader struct {
	mu     sync.Mutex
	agents string
	count  int
}

func (r *reloader) ReloadFrom(read func(string) (string, error)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count++
	text, err := read(schedule.AgentsFile)
	if errors.Is(err, fs.ErrNotExist) {
		text = "<missing>"
	}
	r.agents = text
	return nil
}

func (r *reloader) applied() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.agents
}

type asked struct{ channel, text, apply, discard string }

type edited struct{ channel, message, text string }

// asker records the messages the gate posts and edits.
type asker struct {
	mu    sync.Mutex
	asks  []asked
	edits []edited
	fail  bool
}

func (a *asker) Ask(_ context.Context, channel, text, apply, discard string) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fail {
		return "", errors.New("discord is down")
	}
	a.asks = append(a.asks, asked{channel, text, apply, discard})
	return "msg" + string(rune('0'+len(a.asks))), nil
}

func (a *asker) Edit(_ context.Context, channel, message, text string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.edits = append(a.edits, edited{channel, message, text})
	return nil
}

type fixture struct {
	t     *testing.T
	dir   string
	clock *clockwork.FakeClock
	gate  *Gate
	rel   *reloader
	ask   *asker
}

func newFixture(t *testing.T, opts Options) *fixture {
	t.Helper()
	dir := opts.Dir
	if dir == "" {
		dir = t.TempDir()
		writeFile(t, dir, schedule.AgentsFile, baseAgents)
	}
	f := &fixture{t: t, dir: dir, clock: clockwork.NewFakeClock(), rel: &reloader{}, ask: &asker{}}
	opts.Dir, opts.Clock, opts.Log = dir, f.clock, zerolog.Nop()
	if opts.Channel == "" {
		opts.Channel = "900"
	}
	if opts.Approvers == nil {
		opts.Approvers = []string{"42"}
	}
	g, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(f.rel); err != nil {
		t.Fatal(err)
	}
	g.SetAsker(f.ask)
	f.gate = g
	return f
}

func writeFile(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) read(name string) string {
	f.t.Helper()
	b, err := os.ReadFile(filepath.Join(f.dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return "<missing>"
	}
	if err != nil {
		f.t.Fatal(err)
	}
	return string(b)
}

func (f *fixture) check() { f.gate.Check(context.Background(), false) }

// writingTurn starts a turn in channel 7 that calls tool.
func (f *fixture) writingTurn(tool string) (ended func()) {
	used, ended := f.gate.TurnStarted(queue.Event{ChannelID: "7"})
	used(tool)
	return ended
}

func (f *fixture) press(action, user string, manage bool) Answer {
	f.t.Helper()
	hs := f.gate.Pending()
	if len(hs) != 1 {
		f.t.Fatalf("pending holds = %d, want 1", len(hs))
	}
	return f.gate.Press(context.Background(), Press{ButtonID: buttonID(action, hs[0].ID), UserID: user, ManageGuild: manage})
}

func (f *fixture) held() {
	f.t.Helper()
	if got := f.rel.applied(); got != baseAgents {
		f.t.Fatalf("schedule applied from:\n%s\nwant the file as it was", got)
	}
	if got := f.read(schedule.AgentsFile); got != baseAgents {
		f.t.Fatalf("agents.md on disk:\n%s\nwant it put back as it was", got)
	}
	if len(f.gate.Pending()) != 1 {
		f.t.Fatalf("pending holds = %d, want 1", len(f.gate.Pending()))
	}
}

func TestChangeWithNoTurnRunningApplies(t *testing.T) {
	f := newFixture(t, Options{})
	writeFile(t, f.dir, schedule.AgentsFile, withSpam)
	f.check()
	if got := f.rel.applied(); got != withSpam {
		t.Fatalf("schedule applied from:\n%s\nwant the edited file", got)
	}
	if len(f.ask.asks) != 0 || len(f.gate.Pending()) != 0 {
		t.Fatalf("an operator's edit was held: asks %v", f.ask.asks)
	}
}

func TestChangeDuringWritingTurnIsHeldUntilApply(t *testing.T) {
	f := newFixture(t, Options{})
	ended := f.writingTurn("Bash")
	writeFile(t, f.dir, schedule.AgentsFile, withSpam)
	f.check()
	ended()
	f.check()
	f.held()
	if len(f.ask.asks) != 1 {
		t.Fatalf("asks = %d, want 1", len(f.ask.asks))
	}
	a := f.ask.asks[0]
	for _, want := range []string{"agents.md", "Bash", "spam", "* * * * *", "Post an advert."} {
		if !strings.Contains(a.text, want) {
			t.Errorf("the held message does not name %q:\n%s", want, a.text)
		}
	}
	if a.channel != "900" {
		t.Errorf("posted in %q, want the output channel 900", a.channel)
	}
	if fi, err := os.Stat(filepath.Join(f.dir, StateFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("state file: %v, mode %v; want it kept 0600", err, fi)
	}

	ans := f.press(actionApply, "42", false)
	if ans.Update == nil || !strings.Contains(*ans.Update, "Applied by <@42>") {
		t.Fatalf("apply answer = %+v", ans)
	}
	if got := f.rel.applied(); got != withSpam {
		t.Fatalf("after Apply the schedule runs from:\n%s", got)
	}
	if got := f.read(schedule.AgentsFile); got != withSpam {
		t.Fatalf("after Apply agents.md is:\n%s", got)
	}
	if _, err := os.Stat(filepath.Join(f.dir, StateFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("state file still there after the last hold was decided: %v", err)
	}
	// Nothing more happens on the next check: the gate wrote the file.
	f.check()
	if len(f.ask.asks) != 1 || len(f.gate.Pending()) != 0 {
		t.Fatalf("the approved content was judged again")
	}
}

func TestDiscardKeepsTheSchedule(t *testing.T) {
	f := newFixture(t, Options{})
	ended := f.writingTurn("Write")
	writeFile(t, f.dir, schedule.AgentsFile, withSpam)
	f.check()
	ended()
	ans := f.press(actionDiscard, "42", false)
	if ans.Update == nil || !strings.Contains(*ans.Update, "Discarded by <@42>") {
		t.Fatalf("discard answer = %+v", ans)
	}
	if got := f.rel.applied(); got != baseAgents {
		t.Fatalf("after Discard the schedule runs from:\n%s", got)
	}
	if got := f.read(schedule.AgentsFile); got != baseAgents {
		t.Fatalf("after Discard agents.md is:\n%s", got)
	}
	if len(f.gate.Pending()) != 0 {
		t.Fatal("hold still pending after Discard")
	}
	// A second press on the old message is told it is gone.
	ans = f.gate.Press(context.Background(), Press{ButtonID: buttonID(actionApply, "whatever"), UserID: "42"})
	if ans.Update != nil || ans.Notice != noticeGone {
		t.Fatalf("press on a decided hold = %+v", ans)
	}
}

func TestOnlyApproversDecide(t *testing.T) {
	cases := []struct {
		name     string
		opts     Options
		user     string
		manage   bool
		approved bool
	}{
		{"approver", Options{Approvers: []string{"42"}}, "42", false, true},
		{"someone else", Options{Approvers: []string{"42"}}, "43", true, false},
		{"allowlisted user without approvers", Options{Approvers: []string{}, AllowedUsers: []string{"43"}}, "43", false, true},
		{"not allowlisted", Options{Approvers: []string{}, AllowedUsers: []string{"43"}}, "44", true, false},
		{"server manager without lists", Options{Approvers: []string{}}, "45", true, true},
		{"member without lists", Options{Approvers: []string{}}, "45", false, false},
		{"the caller's rule decides over the lists", Options{Approvers: []string{"42"}, IsApprover: func(p Press) bool { return p.UserID == "46" }}, "46", false, true},
		{"the caller's rule refuses", Options{Approvers: []string{"42"}, IsApprover: func(p Press) bool { return p.UserID == "46" }}, "42", true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, c.opts)
			ended := f.writingTurn("Edit")
			writeFile(t, f.dir, schedule.AgentsFile, withSpam)
			f.check()
			ended()
			ans := f.press(actionApply, c.user, c.manage)
			if c.approved {
				if ans.Update == nil {
					t.Fatalf("approver refused: %+v", ans)
				}
				return
			}
			if ans.Update != nil || ans.Notice != noticeNotApprover {
				t.Fatalf("press by a non-approver = %+v", ans)
			}
			f.held()
		})
	}
}

func TestChangeDuringTurnIsDecidedByItsTools(t *testing.T) {
	t.Run("read-only turn: applied when it ends", func(t *testing.T) {
		f := newFixture(t, Options{})
		used, ended := f.gate.TurnStarted(queue.Event{ChannelID: "7"})
		writeFile(t, f.dir, schedule.AgentsFile, withSpam)
		f.check()
		if got := f.rel.applied(); got != baseAgents {
			t.Fatal("a change seen during a turn was applied before the turn ended")
		}
		used("Read")
		used("Grep")
		ended()
		f.check()
		if got := f.rel.applied(); got != withSpam {
			t.Fatalf("after a read-only turn the change is not applied:\n%s", got)
		}
		if len(f.ask.asks) != 0 {
			t.Fatal("held after a read-only turn")
		}
	})
	t.Run("writing tool reported after the write: held", func(t *testing.T) {
		f := newFixture(t, Options{})
		used, ended := f.gate.TurnStarted(queue.Event{ChannelID: "7"})
		writeFile(t, f.dir, schedule.AgentsFile, withSpam)
		f.check()
		used("apply_patch")
		f.check()
		f.held()
		ended()
	})
}

func TestChangeRightAfterAWritingTurn(t *testing.T) {
	f := newFixture(t, Options{Grace: 10 * time.Second})
	ended := f.writingTurn("Bash")
	ended()
	f.clock.Advance(5 * time.Second)
	writeFile(t, f.dir, schedule.AgentsFile, withSpam)
	f.check()
	f.held()

	// Past the grace period an edit is the operator's: it applies, and the
	// hold it replaces is closed.
	f.clock.Advance(30 * time.Second)
	writeFile(t, f.dir, schedule.AgentsFile, withSpam+"\n")
	f.check()
	if got := f.rel.applied(); got != withSpam+"\n" {
		t.Fatalf("an edit long after the turn was not applied:\n%s", got)
	}
	if len(f.gate.Pending()) != 0 || len(f.ask.edits) != 1 || !strings.Contains(f.ask.edits[0].text, "no longer does") {
		t.Fatalf("the replaced hold was not closed: pending %d, edits %+v", len(f.gate.Pending()), f.ask.edits)
	}
}

func TestProseChangeIsNotHeld(t *testing.T) {
	f := newFixture(t, Options{})
	ended := f.writingTurn("Edit")
	prose := strings.Replace(baseAgents, "Be helpful.", "Be helpful and brief.", 1)
	writeFile(t, f.dir, schedule.AgentsFile, prose)
	f.check()
	ended()
	if got := f.rel.applied(); got != prose {
		t.Fatalf("a change to prose only was not applied:\n%s", got)
	}
	if len(f.ask.asks) != 0 || f.read(schedule.AgentsFile) != prose {
		t.Fatal("a change to prose only was held")
	}
}

func TestNewerChangeReplacesTheHold(t *testing.T) {
	f := newFixture(t, Options{})
	ended := f.writingTurn("Bash")
	writeFile(t, f.dir, schedule.AgentsFile, withSpam)
	f.check()
	// The same change again (the agent noticed the file was put back):
	// no second message.
	writeFile(t, f.dir, schedule.AgentsFile, withSpam)
	f.check()
	if len(f.ask.asks) != 1 {
		t.Fatalf("asks = %d after the same change twice, want 1", len(f.ask.asks))
	}
	more := strings.Replace(withSpam, "Post an advert.", "Post two adverts.", 1)
	writeFile(t, f.dir, schedule.AgentsFile, more)
	f.check()
	ended()
	f.held()
	if len(f.ask.asks) != 2 || len(f.ask.edits) != 1 || !strings.Contains(f.ask.edits[0].text, "Replaced by a newer change") {
		t.Fatalf("asks %d, edits %+v", len(f.ask.asks), f.ask.edits)
	}
	if !strings.Contains(f.ask.asks[1].text, "two adverts") {
		t.Fatalf("the newer message does not show the newer change:\n%s", f.ask.asks[1].text)
	}
}

func TestHoldSurvivesRestart(t *testing.T) {
	f := newFixture(t, Options{})
	ended := f.writingTurn("Bash")
	writeFile(t, f.dir, schedule.AgentsFile, withSpam)
	f.check()
	ended()
	id := f.gate.Pending()[0].ID

	// A new gate on the same directory: the hold is still pending, the
	// schedule runs from the file as it was, and the old button works.
	g := newFixture(t, Options{Dir: f.dir})
	g.held()
	if got := g.gate.Pending()[0]; got.ID != id || got.Message != "msg1" {
		t.Fatalf("hold after restart = %+v", got)
	}
	g.check()
	if len(g.ask.asks) != 0 {
		t.Fatal("the hold was posted again after a restart")
	}
	ans := g.gate.Press(context.Background(), Press{ButtonID: buttonID(actionApply, id), UserID: "42"})
	if ans.Update == nil || g.rel.applied() != withSpam {
		t.Fatalf("apply after restart = %+v, schedule from:\n%s", ans, g.rel.applied())
	}
}

func TestRestartPutsBackAHeldFile(t *testing.T) {
	f := newFixture(t, Options{})
	ended := f.writingTurn("Bash")
	writeFile(t, f.dir, schedule.AgentsFile, withSpam)
	f.check()
	ended()
	// As if the gateway had died after keeping the hold and before
	// putting the file back.
	writeFile(t, f.dir, schedule.AgentsFile, withSpam)
	g := newFixture(t, Options{Dir: f.dir})
	g.held()
}

func TestEditWhileStoppedVoidsTheHold(t *testing.T) {
	f := newFixture(t, Options{})
	ended := f.writingTurn("Bash")
	writeFile(t, f.dir, schedule.AgentsFile, withSpam)
	f.check()
	ended()
	mine := baseAgents + "\n<!-- the operator's note -->\n"
	writeFile(t, f.dir, schedule.AgentsFile, mine)
	g := newFixture(t, Options{Dir: f.dir})
	if got := g.rel.applied(); got != mine {
		t.Fatalf("the operator's edit made while stopped does not apply:\n%s", got)
	}
	if len(g.gate.Pending()) != 0 {
		t.Fatal("the hold is still pending")
	}
	g.check()
	if len(g.ask.edits) != 1 || g.ask.edits[0].message != "msg1" {
		t.Fatalf("the void hold's message was not closed: %+v", g.ask.edits)
	}
}

func TestHoldWithoutDiscordIsPostedLater(t *testing.T) {
	f := newFixture(t, Options{})
	f.ask.fail = true
	ended := f.writingTurn("Bash")
	writeFile(t, f.dir, schedule.AgentsFile, withSpam)
	f.check()
	ended()
	f.held()
	f.ask.mu.Lock()
	f.ask.fail = false
	f.ask.mu.Unlock()
	f.check()
	if len(f.ask.asks) != 0 {
		t.Fatal("posted again before the retry delay")
	}
	f.clock.Advance(31 * time.Second)
	f.check()
	if len(f.ask.asks) != 1 {
		t.Fatalf("asks = %d after Discord came back, want 1", len(f.ask.asks))
	}
}

func TestHeldNewFileIsRemoved(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, schedule.AgentsFile, baseAgents)
	f := newFixture(t, Options{Dir: dir})
	ended := f.writingTurn("Write")
	writeFile(t, f.dir, schedule.HeartbeatFile, "## ping\nInterval: 60\nInstruction: Ping.\n")
	f.check()
	ended()
	if got := f.read(schedule.HeartbeatFile); got != "<missing>" {
		t.Fatalf("a heartbeat.md the agent created is still there:\n%s", got)
	}
	ans := f.press(actionApply, "42", false)
	if ans.Update == nil || !strings.Contains(f.read(schedule.HeartbeatFile), "Ping.") {
		t.Fatalf("apply = %+v; heartbeat.md:\n%s", ans, f.read(schedule.HeartbeatFile))
	}
}

func TestWriting(t *testing.T) {
	for tool, want := range map[string]bool{
		"Bash": true, "Write": true, "Edit": true, "MultiEdit": true, "Task": true,
		"mcp__fs__write": true, "command_execution": true, "file_change": true,
		"run_shell_command": true, "write_file": true, "replace": true, "bash": true,
		"Read": false, "Grep": false, "Glob": false, "WebFetch": false, "read_file": false,
		"": true,
	} {
		if got := Writing(tool); got != want {
			t.Errorf("Writing(%q) = %v, want %v", tool, got, want)
		}
	}
}

// FuzzHeldMessage checks that whatever the agent writes, the messages fit
// in one Discord message.
func FuzzHeldMessage(f *testing.F) {
	f.Add(schedule.AgentsFile, baseAgents, withSpam, "Bash")
	f.Add(schedule.HeartbeatFile, "", "## a\nInterval: 60\nInstruction: `x` @everyone <@1>\n", "Write")
	f.Add("boot.md", "## Required\n- soul.md\n", "## Required\n- soul.md\n- evil.md\n", "Edit")
	f.Fuzz(func(t *testing.T, file, before, after, tool string) {
		if file != schedule.AgentsFile && file != schedule.HeartbeatFile && file != "boot.md" {
			file = schedule.AgentsFile
		}
		h := &Hold{File: file, Before: text{before, true}, After: text{after, true}, Tools: []string{tool, tool + "2"}}
		for _, m := range []string{heldMessage(h), closedMessage(h, "✅ Applied by <@42>.")} {
			if n := len([]rune(m)); n > messageLimit {
				t.Fatalf("message of %d characters", n)
			}
			if strings.Contains(m, "@everyone") || strings.Contains(m, "@here") {
				t.Fatalf("message can ping:\n%s", m)
			}
		}
	})
}
