package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/fakeapi"
)

// The claude cold vs warm measurement: how much sooner a turn on a kept
// (warm) claude process shows its first output than a turn that starts
// claude, with the real pinned CLI against the in-process fake Anthropic
// API, so the model's own latency is not in the numbers.

const (
	// warmTurns is how many turns of each kind are timed.
	warmTurns = 10
	// budgetWarmSpeedup is how many times sooner a warm turn's first
	// output must come than a cold one's (the point of keeping processes).
	budgetWarmSpeedup = 5
	// claudeToolsPath is where `make clis` installs the pinned claude CLI.
	claudeToolsPath = ".tools/claude/node_modules/.bin/claude"
)

// errNoClaude is a missing claude CLI: the measurement is skipped.
var errNoClaude = errors.New("no claude CLI")

// warmResult is what the cold vs warm measurement found.
type warmResult struct {
	// Version is `claude --version`'s first word.
	Version string
	// ColdFirst and WarmFirst are Run -> first event (the CLI's first
	// output), ColdTurn and WarmTurn Run -> return, one per timed turn.
	ColdFirst, WarmFirst []time.Duration
	ColdTurn, WarmTurn   []time.Duration
	// ColdKind and WarmKind are the kind of the first event (of the last
	// turn): what "first output" was.
	ColdKind, WarmKind backends.EventKind
	// IdleRSSBytes is the kept process group's resident memory, idle
	// after the last warm turn; AnonKB and FileKB split it (RssAnon,
	// RssFile): the file-backed part is mostly the claude binary's pages,
	// which warm processes share.
	IdleRSSBytes   int64
	AnonKB, FileKB int
	// Skipped says why nothing was measured; the rest is then zero.
	Skipped string
}

// Speedup is the cold median over the warm median, or 0.
func (r warmResult) Speedup() float64 {
	warm := medianDur(r.WarmFirst)
	if warm <= 0 {
		return 0
	}
	return float64(medianDur(r.ColdFirst)) / float64(warm)
}

// claudeBinary is the claude CLI to measure: CLAUDE_BIN (as the
// conformance suite has it), else the one `make clis` installs.
func claudeBinary() (string, error) {
	bin := os.Getenv("CLAUDE_BIN")
	if bin == "" {
		bin = claudeToolsPath
	}
	abs, err := filepath.Abs(bin)
	if err != nil {
		return "", fmt.Errorf("claude CLI %s: %w", bin, err)
	}
	if _, err := os.Stat(abs); errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%w at %s (set CLAUDE_BIN, or run make clis)", errNoClaude, bin)
	} else if err != nil {
		return "", fmt.Errorf("claude CLI %s: %w", bin, err)
	}
	return abs, nil
}

// runWarm measures cold vs warm, or returns a result that says why it was
// skipped when there is no claude CLI.
func runWarm() (warmResult, error) {
	bin, err := claudeBinary()
	if errors.Is(err, errNoClaude) {
		return warmResult{Skipped: err.Error()}, nil
	}
	if err != nil {
		return warmResult{}, err
	}
	return measureWarm(bin)
}

// measureWarm times warmTurns cold turns (claude -p per turn, resuming the
// conversation's session, as with AGENT_KEEP_ALIVE=0) and warmTurns warm
// turns (one kept process), each after one untimed turn that creates the
// session or the process.
func measureWarm(bin string) (warmResult, error) {
	res := warmResult{Version: claudeVersion(bin)}
	api := fakeapi.NewAnthropic()
	defer api.Close()
	home, err := os.MkdirTemp("", "gateway-bench-home-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(home)
	work, err := os.MkdirTemp("", "gateway-bench-work-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(work)
	opts := backends.Options{Binary: bin, Env: claudeBenchEnv(api.URL(), home), KillGrace: 2 * time.Second}
	req := backends.Request{Prompt: "Say ok.", Key: "bench", WorkDir: work, PermissionMode: "acceptEdits", MaxTurns: 10}

	cold := backends.NewClaude(opts)
	defer cold.Close()
	if res.ColdFirst, res.ColdTurn, res.ColdKind, err = timeTurns(cold, req); err != nil {
		return res, fmt.Errorf("cold: %w", err)
	}

	opts.Warm = backends.WarmOptions{Interactive: true, KeepAlive: time.Hour, MaxProcesses: 1}
	// The mark finds the kept process for its memory split.
	opts.Owner = fmt.Sprintf("benchwarm%d", os.Getpid())
	warm := backends.NewClaude(opts)
	defer warm.Close()
	if res.WarmFirst, res.WarmTurn, res.WarmKind, err = timeTurns(warm, req); err != nil {
		return res, fmt.Errorf("warm: %w", err)
	}
	// A second process would mean the turns were not all warm.
	s := warm.Warm()
	if s.Processes != 1 || s.Busy != 0 {
		return res, fmt.Errorf("warm: %d processes kept (%d busy) after the turns, want one idle", s.Processes, s.Busy)
	}
	res.IdleRSSBytes = s.RSSBytes
	res.AnonKB, res.FileKB = ownedSplit(opts.Owner)
	return res, nil
}

// ownedSplit sums RssAnon and RssFile (kB) over the processes that carry
// owner's mark (proc.Spec.Owner sets GATEWAY_OWNER_<owner>=1 in their
// environment).
func ownedSplit(owner string) (anonKB, fileKB int) {
	mark := "GATEWAY_OWNER_" + owner + "=1"
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", d.Name(), "environ"))
		if err != nil || !slices.Contains(strings.Split(string(env), "\x00"), mark) {
			continue
		}
		if st, err := procStatus(pid); err == nil {
			anonKB += st["RssAnon"]
			fileKB += st["RssFile"]
		}
	}
	return anonKB, fileKB
}

// timeTurns runs one untimed turn on c, then warmTurns timed ones in the
// same session, and returns Run -> first event and Run -> return of each,
// and the kind of the last turn's first event.
func timeTurns(c *backends.Claude, req backends.Request) (first, turn []time.Duration, kind backends.EventKind, err error) {
	r, _, _, err := timeTurn(c, req)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("first turn: %w", err)
	}
	req.SessionID = r.SessionID
	for i := range warmTurns {
		r, f, t, err := timeTurn(c, req)
		if err != nil {
			return nil, nil, 0, fmt.Errorf("turn %d: %w", i+1, err)
		}
		if r.SessionID != req.SessionID {
			return nil, nil, 0, fmt.Errorf("turn %d: session %q, want %q", i+1, r.SessionID, req.SessionID)
		}
		first, turn = append(first, f.at), append(turn, t)
		kind = f.kind
	}
	return first, turn, kind, nil
}

// firstEvent is when a turn's first event came (from Run's call) and what
// it was.
type firstEvent struct {
	at   time.Duration
	kind backends.EventKind
}

// timeTurn runs req once and times it. emit is called on Run's goroutine,
// so it needs no lock.
func timeTurn(c *backends.Claude, req backends.Request) (backends.Result, firstEvent, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var f firstEvent
	seen := false
	start := time.Now()
	res, err := c.Run(ctx, req, func(ev backends.Event) {
		if !seen {
			seen = true
			f = firstEvent{at: time.Since(start), kind: ev.Kind}
		}
	})
	took := time.Since(start)
	if err != nil {
		return res, f, took, err
	}
	if !seen {
		return res, f, took, errors.New("the turn emitted no event")
	}
	return res, f, took, nil
}

// claudeBenchEnv is claude's environment against the fake API: a fresh
// HOME, no retries and no traffic but the model requests.
func claudeBenchEnv(apiURL, home string) []string {
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"ANTHROPIC_BASE_URL=" + apiURL,
		"ANTHROPIC_API_KEY=sk-ant-bench",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"CLAUDE_CODE_MAX_RETRIES=0",
		"DISABLE_TELEMETRY=1",
		"DISABLE_AUTOUPDATER=1",
		"DISABLE_ERROR_REPORTING=1",
	}
}

// claudeVersion is `claude --version`'s first word, or "unknown".
func claudeVersion(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if f := strings.Fields(string(out)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "unknown"
}

// warmLines are the lines the -warm flag prints, with the budget marked
// "OK" or "OVER BUDGET" like footprintLines.
func warmLines(r warmResult) []string {
	if r.Skipped != "" {
		return []string{"claude cold vs warm: skipped: " + r.Skipped}
	}
	mark := "OK"
	if r.Speedup() < budgetWarmSpeedup {
		mark = "OVER BUDGET"
	}
	return []string{
		fmt.Sprintf("claude cold vs warm: first output cold %v, warm %v (medians of %d): %.1fx sooner (budget %dx) %s",
			medianDur(r.ColdFirst).Round(time.Millisecond), medianDur(r.WarmFirst).Round(time.Millisecond), len(r.WarmFirst), r.Speedup(), budgetWarmSpeedup, mark),
		fmt.Sprintf("claude cold vs warm: whole turn cold %v, warm %v (medians); first event %s cold, %s warm",
			medianDur(r.ColdTurn).Round(time.Millisecond), medianDur(r.WarmTurn).Round(time.Millisecond), r.ColdKind, r.WarmKind),
		fmt.Sprintf("claude cold vs warm: one idle warm process %.1f MB RSS: anonymous %.1f MB, file-backed %.1f MB (claude %s)",
			mb(r.IdleRSSBytes), float64(r.AnonKB)/1024, float64(r.FileKB)/1024, r.Version),
	}
}

// printWarm runs the measurement alone and prints its lines.
func printWarm() error {
	r, err := runWarm()
	if err != nil {
		return err
	}
	for _, l := range warmLines(r) {
		fmt.Println(l)
	}
	return nil
}

// warmBudgetRow is the budget table's row for the measurement.
func warmBudgetRow(r warmResult) string {
	const what = "| claude warm first output >= 5x sooner than cold |"
	if r.Skipped != "" {
		return what + " not measured: " + r.Skipped + " | - |"
	}
	return fmt.Sprintf("%s cold %v, warm %v (medians): %.1fx | %s |", what,
		medianDur(r.ColdFirst).Round(time.Millisecond), medianDur(r.WarmFirst).Round(time.Millisecond), r.Speedup(), verdict(r.Speedup() >= budgetWarmSpeedup))
}

// writeWarm writes the report's section on the measurement.
func writeWarm(w func(string, ...any), r warmResult) {
	w("## Claude cold vs warm\n\n")
	if r.Skipped != "" {
		w("Not measured: %s.\n\n", r.Skipped)
		return
	}
	w("The real claude CLI (%s) against the in-process fake Anthropic API, %d turns of each kind; see Method.\n\n", r.Version, len(r.WarmFirst))
	w("| what | cold (a process per turn) | warm (the kept process) |\n|---|---|---|\n")
	w("| Run -> first event (%s cold, %s warm) | %s | %s |\n", r.ColdKind, r.WarmKind, warmSpread(r.ColdFirst), warmSpread(r.WarmFirst))
	w("| Run -> result | %s | %s |\n", warmSpread(r.ColdTurn), warmSpread(r.WarmTurn))
	w("\nWarm first output is %.1fx sooner (median over median). One idle warm process (its process group) is %.1f MB resident: %.1f MB anonymous, %.1f MB file-backed (mostly the claude binary's pages, which warm processes share; MAX_WARM_MEMORY_MB counts them in each).\n\n",
		r.Speedup(), mb(r.IdleRSSBytes), float64(r.AnonKB)/1024, float64(r.FileKB)/1024)
}

// warmSpread is the median (as medianDur, the one the budget uses) with
// min and max.
func warmSpread(v []time.Duration) string {
	lo, hi := slices.Min(v), slices.Max(v)
	return fmt.Sprintf("%v (min %v, max %v, n=%d)", medianDur(v).Round(time.Millisecond), lo.Round(time.Millisecond), hi.Round(time.Millisecond), len(v))
}
