// Command bench measures the gateway's footprint and speed and writes
// BENCHMARKS.md (make bench); with -footprint it prints only the quick
// footprint lines (CI), with -soak it runs steady traffic and prints RSS and
// goroutines over time (make soak); with -warm it prints only the claude
// cold vs warm lines, with -backends the cold vs warm lines of every
// backend.
//
// Everything runs against the in-process fake Discord; the agent is either
// absent (idle measurements of the real binary) or an in-process backend
// that answers at once (this tool's child mode), so the numbers are the
// gateway's own. The cold vs warm measurements are the exception: they
// run the real agent CLIs (CLAUDE_BIN, CODEX_BIN..., or the ones `make
// clis` installs) against the in-process fake model APIs.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/agentgateway/gateway/internal/fakediscord"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "child" {
		if err := runChild(); err != nil {
			fmt.Fprintln(os.Stderr, "bench child:", err)
			os.Exit(1)
		}
		return
	}
	out := flag.String("out", "BENCHMARKS.md", "report file")
	runs := flag.Int("runs", 5, "repetitions of each process measurement")
	footprint := flag.Bool("footprint", false, "print the quick footprint lines only (CI)")
	soak := flag.Duration("soak", 0, "run steady traffic for this long and print RSS and goroutines")
	soakFor := flag.Duration("soak-for", time.Hour, "how long the report's soak runs")
	loadOnly := flag.Bool("load", false, "run only the load measurement and print it (with BENCH_HEAP_PROFILE=file, the child writes a heap profile at exit)")
	warmOnly := flag.Bool("warm", false, "run only the claude cold vs warm measurement (and how many warm processes fit in 1 GiB) and print it")
	backendsOnly := flag.Bool("backends", false, "run only the cold vs warm measurement of every backend (claude, codex, gemini, opencode, pi) and print it")
	turnOnly := flag.Bool("turn", false, "run only the gateway overhead on a warm claude turn (gateway run with the real claude CLI) and print it")
	turnCount := flag.Int("turns", turnTurns, "timed turns of each kind with -turn")
	flag.Parse()

	var err error
	switch {
	case *soak > 0:
		err = runSoak(*soak)
	case *footprint:
		err = printFootprint()
	case *warmOnly:
		err = printWarm()
	case *backendsOnly:
		err = printBackends()
	case *turnOnly:
		err = printTurnOverhead(*turnCount)
	case *loadOnly:
		var self string
		if self, err = os.Executable(); err == nil {
			var res loadResult
			res, err = runLoad(self)
			fmt.Printf("after %d channels, %d events: RSS %.1f MB, 30 s later %.1f MB, %d goroutines\n",
				res.Channels, res.Events, float64(res.RSSAfterKB)/1024, float64(res.RSSAfterIdleKB)/1024, res.Goroutines)
			fmt.Printf("overhead in p50/p99: 1 channel %v/%v, 100 channels at 200/s %v/%v, at 2,000/s %v/%v\n", percentile(res.In1, 50), percentile(res.In1, 99), percentile(res.In200, 50), percentile(res.In200, 99), percentile(res.In100, 50), percentile(res.In100, 99))
			fmt.Printf("overhead out p50/p99: 1 channel %v/%v, 100 channels at 200/s %v/%v, at 2,000/s %v/%v\n", percentile(res.Out1, 50), percentile(res.Out1, 99), percentile(res.Out200, 50), percentile(res.Out200, 99), percentile(res.Out100, 50), percentile(res.Out100, 99))
		}
	default:
		err = runAll(*out, *runs, *soakFor)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// footprint is the static and idle measurements of the real binary.
type footprint struct {
	BinaryBytes int64
	Modules     int
	// LinkedModules are the modules in the binary.
	LinkedModules int
	Start         []time.Duration
	Idle10KB      []int
	Idle60KB      []int
	// Split is the last idle sample's RSS by kind (RssAnon, RssFile).
	Split map[string]int
	// IdleTLSKB and SplitTLS are the same 10 s after READY with the fake
	// Discord served over TLS: the system CA pool and the TLS state.
	IdleTLSKB []int
	SplitTLS  map[string]int
}

// buildGateway builds the binary as `make build` and the release do:
// static (CGO_ENABLED=0), stripped. A cgo build links libc dynamically,
// and its pages (about 1 MB resident) would count in the idle RSS of a
// binary nobody ships.
func buildGateway(dir string) (string, int64, error) {
	bin := filepath.Join(dir, "gateway")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "./cmd/gateway")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return "", 0, fmt.Errorf("build: %w", err)
	}
	st, err := os.Stat(bin)
	if err != nil {
		return "", 0, err
	}
	return bin, st.Size(), nil
}

// linkedModules counts the modules bin was linked from (`go version -m`),
// the main module included: the rest of `go list -m all` serve only the
// tests and the tools.
func linkedModules(bin string) (int, error) {
	out, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		return 0, fmt.Errorf("go version -m: %w", err)
	}
	n := 0
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 && (f[0] == "mod" || f[0] == "dep") {
			n++
		}
	}
	return n, nil
}

func moduleCount() (int, error) {
	out, err := exec.Command("go", "list", "-m", "all").Output()
	if err != nil {
		return 0, fmt.Errorf("go list -m all: %w", err)
	}
	return len(strings.Split(strings.TrimSpace(string(out)), "\n")), nil
}

// measureIdle starts `gateway run` against a fresh fake Discord, times
// process start to READY, and reads RSS at the given offsets after READY.
// With ca, the fake serves TLS with ca's certificate and the gateway
// trusts ca besides the system's CAs.
func measureIdle(bin string, ca *benchCA, split map[string]int, marks ...time.Duration) (time.Duration, []int, error) {
	var fd *fakediscord.Server
	var extraEnv []string
	if ca != nil {
		fd, extraEnv = fakediscord.NewTLS(ca.Server), ca.certEnv()
	} else {
		fd = fakediscord.New()
	}
	defer fd.Close()
	fd.AddGuild("bench")
	dir, err := os.MkdirTemp("", "gateway-bench-")
	if err != nil {
		return 0, nil, err
	}
	defer os.RemoveAll(dir)
	p, err := startGateway(bin, []string{"run"}, gatewayEnv(fd, dir, extraEnv...), false)
	if err != nil {
		return 0, nil, err
	}
	defer p.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := fd.WaitUntil(ctx, fd.Connected); err != nil {
		return 0, nil, fmt.Errorf("gateway did not reach READY: %w", err)
	}
	ready := time.Now()
	start := ready.Sub(p.started)
	var rss []int
	for _, m := range marks {
		time.Sleep(time.Until(ready.Add(m)))
		kb, err := rssKB(p.cmd.Process.Pid)
		if err != nil {
			return 0, nil, err
		}
		rss = append(rss, kb)
	}
	if st, err := procStatus(p.cmd.Process.Pid); err == nil {
		for _, k := range []string{"RssAnon", "RssFile", "RssShmem"} {
			split[k] = st[k]
		}
	}
	return start, rss, nil
}

func measureFootprint(runs int, full bool) (footprint, error) {
	var f footprint
	dir, err := os.MkdirTemp("", "gateway-bench-bin-")
	if err != nil {
		return f, err
	}
	defer os.RemoveAll(dir)
	bin, size, err := buildGateway(dir)
	if err != nil {
		return f, err
	}
	f.BinaryBytes = size
	if f.Modules, err = moduleCount(); err != nil {
		return f, err
	}
	if f.LinkedModules, err = linkedModules(bin); err != nil {
		return f, err
	}
	marks := []time.Duration{10 * time.Second}
	if full {
		marks = append(marks, 60*time.Second)
	}
	ca, err := newBenchCA(dir)
	if err != nil {
		return f, err
	}
	f.Split, f.SplitTLS = map[string]int{}, map[string]int{}
	for range runs {
		start, rss, err := measureIdle(bin, nil, f.Split, marks...)
		if err != nil {
			return f, err
		}
		f.Start = append(f.Start, start)
		f.Idle10KB = append(f.Idle10KB, rss[0])
		if full {
			f.Idle60KB = append(f.Idle60KB, rss[1])
		}
		_, rss, err = measureIdle(bin, ca, f.SplitTLS, 10*time.Second)
		if err != nil {
			return f, fmt.Errorf("over TLS: %w", err)
		}
		f.IdleTLSKB = append(f.IdleTLSKB, rss[0])
	}
	return f, nil
}

func printFootprint() error {
	f, err := measureFootprint(1, false)
	if err != nil {
		return err
	}
	for _, l := range footprintLines(f) {
		fmt.Println(l)
	}
	return nil
}

// footprintLines are the lines CI prints: each measurement with its budget
// and a mark, "OK" or "OVER BUDGET", so a miss stands out in the log (it
// does not fail the build).
func footprintLines(f footprint) []string {
	mark := func(ok bool) string {
		if ok {
			return "OK"
		}
		return "OVER BUDGET"
	}
	idle, idleTLS := f.Idle10KB[0], f.IdleTLSKB[0]
	return []string{
		fmt.Sprintf("footprint: stripped binary %.1f MB (budget %d MB) %s", mb(f.BinaryBytes), budgetBinaryBytes>>20, mark(f.BinaryBytes <= budgetBinaryBytes)),
		fmt.Sprintf("footprint: modules %d (budget %d) %s", f.Modules, budgetModules, mark(f.Modules <= budgetModules)),
		fmt.Sprintf("footprint: start to READY %v", f.Start[0].Round(time.Millisecond)),
		fmt.Sprintf("footprint: idle RSS after 10 s %.1f MB (budget %d MB) %s: anonymous %.1f MB, file-backed %.1f MB",
			float64(idle)/1024, budgetIdleRSSKB/1024, mark(idle <= budgetIdleRSSKB), float64(f.Split["RssAnon"])/1024, float64(f.Split["RssFile"])/1024),
		fmt.Sprintf("footprint: idle RSS over TLS after 10 s %.1f MB (budget %d MB) %s: anonymous %.1f MB, file-backed %.1f MB",
			float64(idleTLS)/1024, budgetIdleTLSRSSKB/1024, mark(idleTLS <= budgetIdleTLSRSSKB), float64(f.SplitTLS["RssAnon"])/1024, float64(f.SplitTLS["RssFile"])/1024),
	}
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

func medianInt(v []int) int {
	s := append([]int(nil), v...)
	sort.Ints(s)
	return s[len(s)/2]
}

func medianDur(v []time.Duration) time.Duration {
	return percentile(v, 50)
}

func machine() string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		mem = strings.Fields(strings.SplitN(string(b), "\n", 2)[0])[1]
		var kb int
		fmt.Sscan(mem, &kb)
		mem = fmt.Sprintf(", %.0f GiB RAM", float64(kb)/(1<<20))
	}
	return fmt.Sprintf("%s, %d cores%s, %s/%s, %s", cpu, runtime.NumCPU(), mem, runtime.GOOS, runtime.GOARCH, runtime.Version())
}

func commit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
		c += " (with uncommitted changes)"
	}
	return c
}
