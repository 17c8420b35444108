package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentgateway/gateway/internal/fakediscord"
)

// gatewayProcess is a gateway (the real binary, or this tool's child mode)
// running against a fake Discord.
type gatewayProcess struct {
	cmd     *exec.Cmd
	started time.Time
	// ready is closed when the child printed READY (child mode only).
	ready chan struct{}
	mu    sync.Mutex // guards runs and goroutines
	runs  map[string][2]int64
	// goroutines is the child's last reported goroutine count.
	goroutines int
	done       chan struct{}
}

// env is the environment of a gateway pointed at fd, with its own
// CONFIG_DIR.
func gatewayEnv(fd *fakediscord.Server, configDir string, extra ...string) []string {
	return append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + configDir,
		"DISCORD_BOT_TOKEN=" + fakediscord.DefaultToken,
		"DISCORD_API_BASE_URL=" + fd.APIBaseURL(),
		"DISCORD_GATEWAY_URL=" + fd.GatewayURL(),
		"ANTHROPIC_API_KEY=sk-ant-bench",
		"CONFIG_DIR=" + configDir,
		"PERMISSION_MODE=acceptEdits",
		"LOG_LEVEL=warn",
		// The same path as the figures before threads: one channel, one
		// lane, answers in the channel.
		"THREADS=off",
	}, extra...)
}

// startGateway starts bin with args and env. In child mode it reads the
// child's RUN and STATS lines.
func startGateway(bin string, args, env []string, child bool) (*gatewayProcess, error) {
	p := &gatewayProcess{ready: make(chan struct{}), runs: map[string][2]int64{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = env
	// The gateway's own log (LOG_LEVEL=warn) is not part of the report.
	p.cmd.Stderr = nil
	var stdout io.ReadCloser
	if child {
		var err error
		if stdout, err = p.cmd.StdoutPipe(); err != nil {
			return nil, err
		}
	}
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	if child {
		go p.read(stdout)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	return p, nil
}

func (p *gatewayProcess) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 1 && f[0] == "READY":
			close(p.ready)
		case len(f) == 4 && f[0] == "RUN":
			start, _ := strconv.ParseInt(f[2], 10, 64)
			end, _ := strconv.ParseInt(f[3], 10, 64)
			p.mu.Lock()
			p.runs[f[1]] = [2]int64{start, end}
			p.mu.Unlock()
		case len(f) == 2 && f[0] == "STATS":
			n, _ := strconv.Atoi(f[1])
			p.mu.Lock()
			p.goroutines = n
			p.mu.Unlock()
		}
	}
}

func (p *gatewayProcess) run(text string) ([2]int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.runs[text]
	return r, ok
}

func (p *gatewayProcess) goroutineCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.goroutines
}

// stop sends SIGTERM and waits.
func (p *gatewayProcess) stop() { stopProcess(p.cmd, p.done) }

// stopProcess sends cmd SIGTERM and waits until done is closed (its Wait
// returned), killing it after 30 s.
func stopProcess(cmd *exec.Cmd, done <-chan struct{}) {
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
	}
}

// rssKB reads the process's resident set size from /proc.
func rssKB(pid int) (int, error) {
	m, err := procStatus(pid)
	if err != nil {
		return 0, err
	}
	kb, ok := m["VmRSS"]
	if !ok {
		return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
	}
	return kb, nil
}

// procStatus reads the kB fields of /proc/<pid>/status (VmRSS, RssAnon,
// RssFile...).
func procStatus(pid int) (map[string]int, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, line := range strings.Split(string(b), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		f := strings.Fields(rest)
		if ok && len(f) == 2 && f[1] == "kB" {
			if v, err := strconv.Atoi(f[0]); err == nil {
				out[name] = v
			}
		}
	}
	return out, nil
}
