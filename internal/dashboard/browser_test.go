//go:build browser

// The dashboard in a real headless Chromium. Run with
//
//	go test -tags browser -count=1 -run Browser ./internal/dashboard/
//
// It skips when neither chromium nor chromium-browser is on PATH, and
// writes its screenshots to SCREENSHOT_DIR (default: a temporary
// directory).

package dashboard

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/rs/zerolog"
)

// sampleState is a gateway in the middle of a working day, with names long
// enough to test the layout.
func sampleState(now time.Time) State {
	const long = "a-channel-with-an-unusually-long-name-that-never-breaks"
	return State{
		Queue: []Lane{
			{Lane: "100", Name: "general", Waiting: 2, Oldest: now.Add(-40 * time.Second)},
			{Lane: "system", Waiting: 1, Oldest: now.Add(-5 * time.Second)},
		},
		Activity: []Entry{
			{EventID: 40, Time: now.Add(-3 * time.Minute), ChannelID: "100", ChannelName: "general", Kind: "message", Outcome: "ok", Duration: 47 * time.Second, CostUSD: 0.0831},
			{EventID: 39, Time: now.Add(-9 * time.Minute), ChannelID: "200", ChannelName: "ops", Kind: "cron", Name: "daily-report", Outcome: "ok", Duration: 2 * time.Minute, CostUSD: 0.2114},
			{EventID: 38, Time: now.Add(-31 * time.Minute), ChannelID: "300", ChannelName: long, Kind: "message", Outcome: "stopped", Duration: 12 * time.Second, CostUSD: 0.0102},
			{EventID: 37, Time: now.Add(-48 * time.Minute), Kind: "heartbeat", Name: "inbox", Outcome: "error", Duration: 3 * time.Second},
			{EventID: 36, Time: now.Add(-26 * time.Hour), ChannelID: "100", ChannelName: "general", Kind: "webhook", Name: "github", Outcome: "ok", Duration: 95 * time.Second, CostUSD: 1.4},
		},
		Costs: Costs{
			Today: Spend{Total: 1.2347, ByChannel: map[string]float64{"general": 0.8, "ops": 0.4247, long: 0.01},
				ByKind: map[string]float64{"message": 0.81, "cron": 0.4247}},
			Week: Spend{Total: 8.76, ByChannel: map[string]float64{"general": 6.1, "ops": 2.66},
				ByKind: map[string]float64{"message": 6.2, "cron": 2.1, "webhook": 0.46}},
		},
		Schedule: []Job{
			{Kind: ScheduleHeartbeat, Name: "inbox", Schedule: "every 30m", NextRun: now.Add(12 * time.Minute), LastRun: now.Add(-18 * time.Minute), LastOutcome: "error"},
			{Kind: ScheduleCron, Name: "daily-report", Schedule: "0 9 * * 1-5", ChannelName: "ops", NextRun: now.Add(19 * time.Hour), LastRun: now.Add(-9 * time.Minute), LastOutcome: "ok"},
			{Kind: ScheduleCron, Name: "weekly-cleanup", Schedule: "0 3 * * 0", Paused: true},
		},
		Sessions: []Session{
			{ChannelID: "100", ChannelName: "general", SessionID: "3f2a9c1e", Started: now.Add(-2 * time.Hour), Model: "opus"},
			{ChannelID: "200", ChannelName: "ops", SessionID: "a91b22d0", Started: now.Add(-26 * time.Hour), Model: "sonnet"},
			{ChannelID: "300", ChannelName: long, SessionID: "77c0e4b3", Started: now.Add(-5 * time.Minute)},
		},
		Health: Health{Discord: true, CLI: "claude", CLIVersion: "2.1.3", Ready: true},
		Processes: &Processes{Self: "run-1", Read: now, List: []Process{
			{Name: "run-1", Role: "run", Version: "1.4.0", Started: now.Add(-3 * time.Hour), Beat: now.Add(-2 * time.Second)},
			{Name: "worker-a", Role: "worker", Version: "1.4.0", Started: now.Add(-3 * time.Hour), Slots: 4, Beat: now.Add(-4 * time.Second),
				Turns: []ProcessTurn{
					{EventID: 44, Lane: "200", ChannelName: "ops", Since: now.Add(-2 * time.Minute)},
					{EventID: 45, Lane: "400", ChannelName: hostileName, Since: now.Add(-10 * time.Second)},
				}},
			{Name: "worker-b", Role: "worker", Version: "1.3.9", Started: now.Add(-time.Hour), Slots: 2, Beat: now.Add(-1 * time.Second)},
		}},
	}
}

// hostileName is a thread name (users name threads) written to be taken
// for markup.
const hostileName = `<img src=x onerror="document.title='pwned'">fix`

func findChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium or chromium-browser on PATH")
	return ""
}

// browserProblems collects what the page says is wrong: console errors,
// uncaught exceptions and browser log errors (a refused script, a failed
// request).
type browserProblems struct {
	mu   sync.Mutex // guards list
	list []string
}

func (p *browserProblems) watch(t *testing.T, ctx context.Context) {
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			switch m.Type {
			case chromedp.ConsoleError, chromedp.ConsoleException:
				p.mu.Lock()
				p.list = append(p.list, fmt.Sprintf("%s %s:%d %s", m.Type, m.URL, m.Line+1, m.Text))
				p.mu.Unlock()
			default:
				t.Logf("console %s: %s", m.Type, m.Text)
			}
		}
	}()
}

func (p *browserProblems) check(t *testing.T, when string) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.list {
		t.Errorf("%s: %s", when, s)
	}
	p.list = nil
}

// acceptDialogs accepts every dialog the page opens (confirm before Stop)
// and reports its message.
func acceptDialogs(ctx context.Context) <-chan string {
	opened := chromedp.Events(ctx, page.JavascriptDialogOpening)
	messages := make(chan string, 4)
	go func() {
		for ev, err := range opened {
			if err != nil {
				return
			}
			// The page is blocked until the dialog closes, and with it
			// the key press that opened it: answer from here.
			chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
			select {
			case messages <- ev.Message:
			default:
			}
		}
	}()
	return messages
}

// waitCall fails unless the Source's next action is want.
func waitCall(t *testing.T, src *fakeSource, want string) {
	t.Helper()
	select {
	case call := <-src.called:
		if call != want {
			t.Errorf("the source got %q, want %q", call, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the source did not get %q", want)
	}
}

func TestBrowserDashboard(t *testing.T) {
	bin := findChromium(t)
	shots := os.Getenv("SCREENSHOT_DIR")
	if shots == "" {
		shots = t.TempDir()
	} else if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	began := time.Now()

	src := newFakeSource(State{})
	src.onStop = func(id uint64) {
		src.Publish(TurnFinished(Entry{EventID: id, Time: time.Now(), ChannelID: "100", ChannelName: "general",
			Kind: "message", Outcome: "stopped", Duration: 80 * time.Second, CostUSD: 0.0377}))
	}
	// Registered first, so it closes after the browser (whose streams
	// would hold it open).
	srv := newServer(t, Handler(src, Options{Log: zerolog.New(zerolog.NewTestWriter(t))}))

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	browserCtx, cancelBrowser := chromedp.NewContext(allocCtx)
	t.Cleanup(cancelBrowser)
	// The first call starts the browser and lives as long as its context:
	// no timeout on this one.
	if err := chromedp.Do(browserCtx); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	t.Logf("chromium started in %v", time.Since(began).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(browserCtx, 90*time.Second)
	defer cancel()

	var problems browserProblems
	problems.watch(t, ctx)
	dialogs := acceptDialogs(ctx)

	step := func(name string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		start := time.Now()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Logf("%s: %v", name, time.Since(start).Round(time.Millisecond))
	}
	poll := func(js string) chromedp.Action[chromedp.Void] {
		return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
			_, err := chromedp.Poll[bool](js, chromedp.WithPollingTimeout(10*time.Second))(ctx, tg)
			if err != nil {
				err = fmt.Errorf("waiting for %s: %w", js, err)
			}
			return chromedp.Void{}, err
		}
	}
	eval := func(js string) int {
		t.Helper()
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](js))
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		return n
	}
	screenshot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		path := filepath.Join(shots, name)
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot %s", path)
	}

	// The stream is open once the badge says live; the handler subscribes
	// before it answers, so from here on the page sees every change.
	step("load the page of an idle gateway",
		chromedp.EmulateViewport(1280, 900),
		chromedp.Navigate(srv.URL+"/"),
		poll(`document.getElementById('badge-stream').textContent === 'live'`),
		poll(`!document.getElementById('running-empty').hidden && document.getElementById('schedule-body').closest('table').hidden`),
		// One machine: no processes, and the page says so nowhere.
		poll(`document.getElementById('processes').hidden && document.getElementById('running-empty').textContent === 'Nothing is running.'`),
	)
	problems.check(t, "after loading")

	// The gateway gets busy; a Resync makes the page take it all in.
	src.mu.Lock()
	src.state = sampleState(time.Now())
	src.mu.Unlock()
	src.Publish(Update{Resync: true})
	step("a resync shows the whole state",
		poll(`document.querySelectorAll('#schedule-body tr').length === 3`),
		poll(`document.querySelectorAll('#activity-body tr').length === 5`),
		poll(`document.getElementById('badge-cli').textContent === 'claude 2.1.3'`),
		poll(`!document.getElementById('processes').hidden && document.querySelectorAll('#processes-body tr').length === 3`),
		poll(`document.getElementById('running-empty').textContent === 'Nothing is running on this process.'`),
	)
	// Each process's turns are listed under it, a hostile thread name as
	// plain text.
	if n := eval(`document.querySelector('#processes-body tr[data-key="worker-a"]').textContent.includes('#ops') ? 1 : 0`); n != 1 {
		t.Error("worker-a's turn in #ops is not listed under it")
	}
	if n := eval(`document.querySelector('#processes-body tr[data-key="run-1"]').textContent.includes('(this one)') ? 1 : 0`); n != 1 {
		t.Error("the process serving the page is not marked")
	}
	if n := eval(`document.querySelectorAll('#processes-body img, #processes-body [onerror]').length`); n != 0 {
		t.Errorf("%d elements made from a thread name", n)
	}
	if n := eval(fmt.Sprintf(`document.querySelector('#processes-body').textContent.includes(%q) ? 1 : 0`, hostileName)); n != 1 {
		t.Error("the hostile thread name is not shown as text")
	}
	// A later list replaces the rows in place.
	later := *sampleState(time.Now()).Processes
	later.List = later.List[1:]
	later.List[0].Turns = later.List[0].Turns[:1]
	src.Publish(ProcessesChanged(later))
	step("a new list of processes replaces the old",
		poll(`document.querySelectorAll('#processes-body tr').length === 2`),
		poll(`document.querySelector('#processes-body tr[data-key="worker-a"] .num').textContent === '1 / 4'`),
	)
	src.Publish(ProcessesChanged(*sampleState(time.Now()).Processes))
	step("and back", poll(`document.querySelectorAll('#processes-body tr').length === 3`))

	turn := `#running-list li[data-id="42"]`
	src.Publish(TurnStarted(Turn{EventID: 42, ChannelID: "100", ChannelName: "general", Kind: "message",
		Prompt: "Why does the deploy fail on arm64? <b>not bold</b>", StartedAt: time.Now().Add(-75 * time.Second), Process: "run-1"}))
	step("a running turn appears live",
		chromedp.WaitVisible(chromedp.CSS(turn)),
		poll(`document.querySelector('#running-list li[data-id="42"] .prompt').textContent.includes('<b>not bold</b>')`),
		poll(`document.querySelector('#running-list li[data-id="42"] b') === null`),
	)
	src.Publish(ToolUsed(42, "Bash"))
	step("its tool shows", poll(`document.querySelector('#running-list li[data-id="42"] .tool').textContent === 'Bash'`))
	step("it names its process", poll(`document.querySelector('#running-list li[data-id="42"] .proc').textContent === ' · on run-1'`))
	first, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(turn+" .elapsed")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(first, "1m ") {
		t.Errorf("elapsed %q, want 1m and some seconds", first)
	}
	step("its elapsed time ticks", poll(fmt.Sprintf(
		`document.querySelector('#running-list li[data-id="42"] .elapsed').textContent !== %q`, first)))
	screenshot("dashboard-desktop.png")

	// Stop from the keyboard: focus the button, press Enter, accept the
	// confirm dialog.
	if tag := eval(`document.querySelector('#running-list li[data-id="42"] button.stop') instanceof HTMLButtonElement ? 1 : 0`); tag != 1 {
		t.Fatal("Stop is not a button")
	}
	step("press Stop", chromedp.Focus(chromedp.CSS(turn+" button.stop")), chromedp.KeyEvent("\r"))
	select {
	case msg := <-dialogs:
		if !strings.Contains(msg, "#general") {
			t.Errorf("confirm says %q, want it to name #general", msg)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no confirm dialog")
	}
	waitCall(t, src, "stop 42")
	step("the stopped turn leaves for the activity list",
		chromedp.WaitNotPresent(chromedp.CSS(turn)),
		poll(`document.querySelector('#activity-body tr').textContent.includes('stopped')`),
		poll(`document.getElementById('toast').textContent.startsWith('Stop sent')`),
	)
	problems.check(t, "after stopping")

	step("Run now", chromedp.Click(chromedp.CSS(`#schedule-body tr[data-key="cron/daily-report"] button.run`)))
	waitCall(t, src, "run cron daily-report")
	step("Reset", chromedp.Focus(chromedp.CSS(`#sessions-body tr[data-key="200"] button.reset`)), chromedp.KeyEvent("\r"))
	select {
	case msg := <-dialogs:
		if !strings.Contains(msg, "#ops") {
			t.Errorf("confirm says %q, want it to name #ops", msg)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no confirm dialog before a reset")
	}
	waitCall(t, src, "reset 200")

	// A phone: 390 CSS px wide.
	src.Publish(TurnStarted(Turn{EventID: 43, ChannelID: "300", ChannelName: "a-channel-with-an-unusually-long-name-that-never-breaks",
		Kind: "message", Prompt: strings.Repeat("averyveryverylongwordwithoutanyspaces", 6), StartedAt: time.Now().Add(-5 * time.Second), Process: "run-1"}))
	src.Publish(ToolUsed(43, "mcp__github__search_pull_requests_with_a_long_tool_name"))
	step("at 390 px",
		chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile),
		// screen.width follows the emulation; innerWidth would grow with a
		// page too wide for the phone, which is what is checked below.
		poll(`screen.width === 390`),
		chromedp.WaitVisible(chromedp.CSS(`#running-list li[data-id="43"]`)),
		poll(`document.querySelector('#running-list li[data-id="43"] .tool').textContent.startsWith('mcp__')`),
	)
	w, inner := eval(`document.documentElement.scrollWidth`), eval(`window.innerWidth`)
	t.Logf("at 390 px: document scrollWidth %d, innerWidth %d", w, inner)
	if w > 390 || inner > 390 {
		t.Errorf("document scrollWidth %d, innerWidth %d at a 390 px viewport: the page is wider than the phone", w, inner)
	}
	if w := eval(`document.body.scrollWidth`); w > 390 {
		t.Errorf("body scrollWidth %d at a 390 px viewport", w)
	}
	// The tables have turned into labelled cards.
	if n := eval(`getComputedStyle(document.querySelector('#activity-body td')).display === 'flex' ? 1 : 0`); n != 1 {
		t.Error("the activity table is not stacked at 390 px")
	}
	// The Stop notice would cover part of the picture.
	eval(`document.getElementById('toast').textContent = ''; 0`)
	screenshot("dashboard-390.png")
	problems.check(t, "at 390 px")
	if title := eval(`document.title.includes('pwned') ? 1 : 0`); title != 0 {
		t.Error("a name ran as script")
	}
	t.Logf("browser test took %v", time.Since(began).Round(time.Millisecond))
}
