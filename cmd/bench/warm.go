package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/fakeapi"
	"github.com/agentgateway/gateway/internal/procmem"
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

// printWarm runs the claude measurements alone (cold vs warm, then warm
// processes per GiB) and prints their lines.
func printWarm() error {
	r, err := runWarm()
	if err != nil {
		return err
	}
	for _, l := range warmLines(r) {
		fmt.Println(l)
	}
	fit, err := runWarmFit()
	if err != nil {
		return fmt.Errorf("claude warm per GiB: %w", err)
	}
	for _, l := range warmFitLines(fit) {
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
	w("\nWarm first output is %.1fx sooner (median over median). One idle warm process (its process group) is %.1f MB resident: %.1f MB anonymous, %.1f MB file-backed (mostly the claude binary's pages, which warm processes share; MAX_WARM_MEMORY_MB counts proportional memory, PSS, which divides them among the processes).\n\n",
		r.Speedup(), mb(r.IdleRSSBytes), float64(r.AnonKB)/1024, float64(r.FileKB)/1024)
}

// warmSpread is the median (as medianDur, the one the budget uses) with
// min and max.
func warmSpread(v []time.Duration) string {
	lo, hi := slices.Min(v), slices.Max(v)
	return fmt.Sprintf("%v (min %v, max %v, n=%d)", medianDur(v).Round(time.Millisecond), lo.Round(time.Millisecond), hi.Round(time.Millisecond), len(v))
}

// The warm-processes-per-GiB measurement: real claude processes, one per
// channel, kept by the real pool under MAX_WARM_MEMORY_MB=1024 until it
// stops one; what stayed is how many fit.

const (
	// fitCapMiB is MAX_WARM_MEMORY_MB for the measurement.
	fitCapMiB = 1024
	// fitMaxChannels bounds the run should the pool never evict.
	fitMaxChannels = 24
)

// warmFitResult is how many warm claude processes the pool kept within
// fitCapMiB.
type warmFitResult struct {
	// Version is `claude --version`'s first word.
	Version string
	CapMiB  int
	// Started is how many channels got a process; Kept is how many the
	// pool still kept after its first eviction (Started-1 when one went).
	Started, Kept int
	// Evicted is set when the pool stopped a process; without it, Kept
	// is a lower bound (fitMaxChannels were not enough).
	Evicted bool
	// Procs is each kept process group's memory, once the evicted one
	// was gone.
	Procs []fitProc
	// RSSOnly is how many processes counted by RSS for want of
	// smaps_rollup.
	RSSOnly int
	// Skipped says why nothing was measured; the rest is then zero.
	Skipped string
}

// fitProc is one kept claude process group's memory, in bytes.
type fitProc struct {
	PSS, PSSAnon, PSSFile int64
	RSS, RSSAnon, RSSFile int64
}

// Sum adds up the kept processes.
func (r warmFitResult) Sum() fitProc {
	var s fitProc
	for _, p := range r.Procs {
		s.PSS += p.PSS
		s.PSSAnon += p.PSSAnon
		s.PSSFile += p.PSSFile
		s.RSS += p.RSS
		s.RSSAnon += p.RSSAnon
		s.RSSFile += p.RSSFile
	}
	return s
}

// runWarmFit measures how many warm claude processes fit in fitCapMiB, or
// returns a result that says why it was skipped when there is no claude
// CLI.
func runWarmFit() (warmFitResult, error) {
	bin, err := claudeBinary()
	if errors.Is(err, errNoClaude) {
		return warmFitResult{Skipped: err.Error()}, nil
	}
	if err != nil {
		return warmFitResult{}, err
	}
	return measureWarmFit(bin)
}

// measureWarmFit starts one warm claude per channel, a turn each, through
// a pool capped at fitCapMiB, until the pool stops one; then it waits for
// the stopped process group to be gone and reads the kept ones.
func measureWarmFit(bin string) (warmFitResult, error) {
	res := warmFitResult{Version: claudeVersion(bin), CapMiB: fitCapMiB}
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
	owner := fmt.Sprintf("benchfit%d", os.Getpid())
	c := backends.NewClaude(backends.Options{
		Binary: bin, Env: claudeBenchEnv(api.URL(), home), KillGrace: 2 * time.Second, Owner: owner,
		Warm: backends.WarmOptions{Interactive: true, KeepAlive: time.Hour, MaxProcesses: fitMaxChannels + 1,
			MemoryCap: fitCapMiB << 20}, // as MAX_WARM_MEMORY_MB=1024 sets it
	})
	defer c.Close()
	for i := 1; i <= fitMaxChannels && !res.Evicted; i++ {
		req := backends.Request{Prompt: "Say ok.", Key: fmt.Sprintf("fit-%d", i), WorkDir: work, PermissionMode: "acceptEdits", MaxTurns: 10}
		if _, _, _, err := timeTurn(c, req); err != nil {
			return res, fmt.Errorf("channel %d: %w", i, err)
		}
		res.Started = i
		res.Evicted = c.Warm().Processes < i
	}
	s := c.Warm()
	res.Kept = s.Processes
	groups, err := waitOwnedGroups(owner, res.Kept, 30*time.Second)
	if err != nil {
		return res, err
	}
	usage := procmem.Groups(groups...)
	for _, g := range groups {
		u := usage[g]
		anonKB, fileKB := groupRSSSplit(owner, g)
		res.Procs = append(res.Procs, fitProc{PSS: u.PSSBytes, PSSAnon: u.PSSAnonBytes, PSSFile: u.PSSFileBytes,
			RSS: u.RSSBytes, RSSAnon: int64(anonKB) << 10, RSSFile: int64(fileKB) << 10})
		res.RSSOnly += u.RSSOnly
	}
	return res, nil
}

// ownedGroups lists the process groups of the live processes that carry
// owner's mark (proc.Spec.Owner sets GATEWAY_OWNER_<owner>=1 in their
// environment), and, for each group, its marked pids.
func ownedGroups(owner string) map[int][]int {
	mark := "GATEWAY_OWNER_" + owner + "=1"
	out := map[int][]int{}
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		pgrp, live := statPgrp(stat)
		if !live {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", d.Name(), "environ"))
		if err != nil || !slices.Contains(strings.Split(string(env), "\x00"), mark) {
			continue
		}
		out[pgrp] = append(out[pgrp], pid)
	}
	return out
}

// statPgrp reads the process group from /proc/<pid>/stat, and whether the
// process is alive (not a zombie).
func statPgrp(b []byte) (int, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
		return 0, false
	}
	pgrp, err := strconv.Atoi(f[2])
	return pgrp, err == nil
}

// waitOwnedGroups waits until owner's marked processes are in exactly n
// process groups (the evicted group gone), and returns them sorted.
func waitOwnedGroups(owner string, n int, within time.Duration) ([]int, error) {
	deadline := time.Now().Add(within)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		groups := slices.Sorted(maps.Keys(ownedGroups(owner)))
		if len(groups) == n {
			return groups, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the claude processes are in %d process groups after %v, want the %d kept", len(groups), within, n)
		}
		<-tick.C
	}
}

// groupRSSSplit sums RssAnon and RssFile (kB) over group's marked
// processes.
func groupRSSSplit(owner string, group int) (anonKB, fileKB int) {
	for _, pid := range ownedGroups(owner)[group] {
		if st, err := procStatus(pid); err == nil {
			anonKB += st["RssAnon"]
			fileKB += st["RssFile"]
		}
	}
	return anonKB, fileKB
}

// warmFitMarkdown is the BENCHMARKS.md section on the measurement.
func warmFitMarkdown(r warmFitResult) []string {
	const head = "## Warm claude processes per GiB"
	if r.Skipped != "" {
		return []string{head, "", "Not measured: " + r.Skipped + ".", ""}
	}
	sum := r.Sum()
	n := int64(max(len(r.Procs), 1))
	kept := fmt.Sprintf("%d", r.Kept)
	if !r.Evicted {
		kept = fmt.Sprintf("at least %d (the pool had not stopped one after %d channels)", r.Kept, r.Started)
	}
	lines := []string{head, "",
		fmt.Sprintf("The real claude CLI (%s) against the in-process fake Anthropic API, one channel per process, one turn each, through the claude adapter's pool with MAX_WARM_MEMORY_MB=%d, until the pool stopped one: %s stayed warm of %d started. "+
			"Memory is read once the stopped process group was gone; PSS from /proc/<pid>/smaps_rollup, RSS from /proc/<pid>/status.", r.Version, r.CapMiB, kept, r.Started),
		"",
		"| kept processes | PSS (what the cap counts) | of it anonymous | of it file-backed | RSS | of it anonymous | of it file-backed |",
		"|---|---|---|---|---|---|---|",
		fmt.Sprintf("| all %d, summed | %.1f MB | %.1f MB | %.1f MB | %.1f MB | %.1f MB | %.1f MB |", len(r.Procs),
			mb(sum.PSS), mb(sum.PSSAnon), mb(sum.PSSFile), mb(sum.RSS), mb(sum.RSSAnon), mb(sum.RSSFile)),
		fmt.Sprintf("| one, on average | %.1f MB | %.1f MB | %.1f MB | %.1f MB | %.1f MB | %.1f MB |",
			mb(sum.PSS/n), mb(sum.PSSAnon/n), mb(sum.PSSFile/n), mb(sum.RSS/n), mb(sum.RSSAnon/n), mb(sum.RSSFile/n)),
		"",
		fmt.Sprintf("RSS counts the file-backed pages (claude's binary, shared by every warm process) once per process: the kept processes' summed RSS is %.1f MB, %.1fx their summed PSS; a cap on summed RSS would have held %d of them.",
			mb(sum.RSS), float64(sum.RSS)/float64(max(sum.PSS, 1)), fitsByRSS(r)),
	}
	if r.RSSOnly > 0 {
		lines = append(lines, "", fmt.Sprintf("%d processes' smaps_rollup could not be read: they count by RSS in the PSS figures.", r.RSSOnly))
	}
	return append(lines, "")
}

// fitsByRSS is how many of the kept processes, in order, a cap on summed
// RSS at r.CapMiB would have held.
func fitsByRSS(r warmFitResult) int {
	var total int64
	for i, p := range r.Procs {
		total += p.RSS
		if total > int64(r.CapMiB)<<20 {
			return i
		}
	}
	return len(r.Procs)
}

// warmFitLines are the lines the -warm flag prints for the measurement.
func warmFitLines(r warmFitResult) []string {
	if r.Skipped != "" {
		return []string{"claude warm per GiB: skipped: " + r.Skipped}
	}
	sum := r.Sum()
	n := int64(max(len(r.Procs), 1))
	return []string{
		fmt.Sprintf("claude warm per GiB: %d kept of %d started under MAX_WARM_MEMORY_MB=%d (evicted: %v); summed PSS %.1f MB, summed RSS %.1f MB",
			r.Kept, r.Started, r.CapMiB, r.Evicted, mb(sum.PSS), mb(sum.RSS)),
		fmt.Sprintf("claude warm per GiB: one process on average PSS %.1f MB (anonymous %.1f, file-backed %.1f), RSS %.1f MB (anonymous %.1f, file-backed %.1f) (claude %s)",
			mb(sum.PSS/n), mb(sum.PSSAnon/n), mb(sum.PSSFile/n), mb(sum.RSS/n), mb(sum.RSSAnon/n), mb(sum.RSSFile/n), r.Version),
	}
}
