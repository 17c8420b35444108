package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/diamondburned/arikawa/v3/discord"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/fakeapi"
	"github.com/agentgateway/gateway/internal/fakediscord"
)

// The gateway's share of a warm claude turn: `gateway run` (the real
// binary) with the real claude CLI kept warm (AGENT_KEEP_ALIVE) against the
// in-process fake Discord and fake Anthropic API, timed from the mention
// posted to the reply's POST; beside it, alternately, the same CLI alone:
// the claude adapter's warm turn (Run -> result) with the same request.
// The difference of the medians is what the gateway adds to a turn.

const (
	// turnTurns is how many turns of each kind are timed.
	turnTurns = 20
	// budgetTurnOverhead is the most the gateway may add to a warm turn
	// (median through the gateway minus median of the CLI alone).
	budgetTurnOverhead = 2 * time.Millisecond
	// turnReplyPrefix starts each scripted answer of the fake API: the
	// reply's POST is known by it.
	turnReplyPrefix = "bench reply "
	// turnSettle is how long the gateway is left after a reply before the
	// next prompt: the turn's last edits, reactions and records go out,
	// so one turn's tail is not in the next one's time.
	turnSettle = 150 * time.Millisecond
)

// turnResult is what the measurement found.
type turnResult struct {
	// Version is `claude --version`'s first word.
	Version string
	// Gateway is mention posted -> reply POST received by the fake
	// Discord, one per timed turn; Alone is the adapter's Run -> return.
	Gateway, Alone []time.Duration
	// GatewayBody and AloneBody are the size of the last turn's model
	// request as the fake API received it: the same prompt and system
	// prompt make them (nearly) equal.
	GatewayBody, AloneBody int
	// Skipped says why nothing was measured; the rest is then zero.
	Skipped string
}

// Overhead is the gateway's share of a warm turn: median through the
// gateway minus median of the CLI alone.
func (r turnResult) Overhead() time.Duration {
	return medianDur(r.Gateway) - medianDur(r.Alone)
}

// Within reports whether the overhead is within budgetTurnOverhead.
func (r turnResult) Within() bool { return r.Overhead() < budgetTurnOverhead }

// runTurnOverhead measures the gateway's share of a warm claude turn, or
// returns a result that says why it was skipped when there is no claude
// CLI.
func runTurnOverhead() (turnResult, error) {
	return runTurnOverheadN(turnTurns)
}

// runTurnOverheadN is runTurnOverhead with n timed turns of each kind.
func runTurnOverheadN(n int) (turnResult, error) {
	bin, err := claudeBinary()
	if errors.Is(err, errNoClaude) {
		return turnResult{Skipped: err.Error()}, nil
	}
	if err != nil {
		return turnResult{}, err
	}
	res := turnResult{Version: claudeVersion(bin)}
	dir, err := os.MkdirTemp("", "gateway-bench-turn-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	gw, _, err := buildGateway(dir)
	if err != nil {
		return res, err
	}
	return res, measureTurns(gw, bin, dir, n, &res)
}

// measureTurns starts `gateway run` with the real claude backend and,
// beside it, the claude adapter alone with the request the gateway makes
// of claude; after an untimed turn on each, it times n turns of each,
// alternating, so that a machine busy with other work slows both alike.
func measureTurns(gw, claude, dir string, n int, res *turnResult) error {
	api := fakeapi.NewAnthropic(scriptedReplies(n + 1)...)
	defer api.Close()
	fd := fakediscord.New()
	defer fd.Close()
	_, ch := fd.AddGuild("bench")
	user := fd.User("bench")
	configDir := filepath.Join(dir, "config")
	if err := os.MkdirAll(configDir, 0o700); err != nil {
		return err
	}
	env := gatewayEnv(fd, configDir, append(claudeGatewayEnv(api.URL()), "AGENT_CLI_PATH="+claude, "AGENT_KEEP_ALIVE=1h")...)
	p, err := startTurnGateway(gw, env)
	if err != nil {
		return err
	}
	defer p.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := fd.WaitUntil(ctx, fd.Connected); err != nil {
		return fmt.Errorf("gateway did not reach READY: %w", err)
	}
	if _, err := gatewayTurn(ctx, fd, ch, user, 0); err != nil {
		return fmt.Errorf("through the gateway: first turn: %w", err)
	}
	req, err := claudeRequestOf(configDir)
	if err != nil {
		return err
	}
	alone, err := newAlone(claude, req, n)
	if err != nil {
		return err
	}
	defer alone.close()
	for i := range n + 1 {
		if i > 0 {
			time.Sleep(turnSettle)
			took, err := gatewayTurn(ctx, fd, ch, user, i)
			if err != nil {
				return fmt.Errorf("through the gateway: turn %d: %w", i, err)
			}
			res.Gateway = append(res.Gateway, took)
		}
		main := api.MainRequests()
		if len(main) != i+1 {
			return fmt.Errorf("through the gateway: the fake API had %d model requests after %d turns, want one per turn", len(main), i+1)
		}
		took, err := alone.turn(promptOf(main[i]), i)
		if err != nil {
			return fmt.Errorf("claude alone: turn %d: %w", i, err)
		}
		if i > 0 {
			res.Alone = append(res.Alone, took)
		}
	}
	res.GatewayBody = len(api.MainRequests()[n].Body)
	res.AloneBody = len(alone.api.MainRequests()[n].Body)
	if s := alone.c.Warm(); s.Processes != 1 {
		return fmt.Errorf("claude alone: %d processes kept after the turns, want one", s.Processes)
	}
	return nil
}

// gatewayTurn posts turn i's mention and waits for its reply's POST.
func gatewayTurn(ctx context.Context, fd *fakediscord.Server, ch discord.ChannelID, user discord.User, i int) (time.Duration, error) {
	want := turnReplyPrefix + strconv.Itoa(i)
	seen := len(fd.Requests())
	sent := time.Now()
	fd.Post(ch, user, fakediscord.Mention(fd.Bot)+" say ok "+strconv.Itoa(i), fd.Bot)
	var posted time.Time
	err := fd.WaitUntil(ctx, func() bool {
		reqs := fd.Requests()
		for _, r := range reqs[min(seen, len(reqs)):] {
			if replyPost(r, want) {
				posted = r.Time
				return true
			}
		}
		return false
	})
	if err != nil {
		return 0, fmt.Errorf("no reply %q: %w", want, err)
	}
	if os.Getenv("BENCH_TURN_REQUESTS") != "" {
		time.Sleep(turnSettle)
		reqs := fd.Requests()
		for _, r := range reqs[min(seen, len(reqs)):] {
			fmt.Fprintf(os.Stderr, "turn %d: +%v %s %s %.80s\n", i, r.Time.Sub(sent).Round(10*time.Microsecond), r.Method, r.Path, r.Body)
		}
	}
	return posted.Sub(sent), nil
}

// replyPost reports whether r is the POST of a message whose content is
// want.
func replyPost(r fakediscord.Request, want string) bool {
	if r.Method != "POST" || !strings.HasSuffix(r.Path, "/messages") || r.Status != 200 {
		return false
	}
	var body struct {
		Content string `json:"content"`
	}
	if json.Unmarshal(r.Body, &body) != nil {
		// A multipart message (files) carries its JSON in a part.
		return bytes.Contains(r.Body, []byte(want))
	}
	return strings.TrimSpace(body.Content) == want
}

// scriptedReplies is the fake API's script: turn i answers "bench reply i".
func scriptedReplies(n int) []fakeapi.Turn {
	turns := make([]fakeapi.Turn, n)
	for i := range turns {
		turns[i] = fakeapi.Text(turnReplyPrefix + strconv.Itoa(i))
	}
	return turns
}

// claudeGatewayEnv is claudeBenchEnv without PATH and HOME, which
// gatewayEnv sets: the gateway hands the rest to claude.
func claudeGatewayEnv(apiURL string) []string {
	var out []string
	for _, kv := range claudeBenchEnv(apiURL, "") {
		if !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "HOME=") {
			out = append(out, kv)
		}
	}
	return out
}

// turnGateway is `gateway run` started for the measurement.
type turnGateway struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// startTurnGateway starts `gw run` with env. BENCH_TURN_STDERR=file keeps
// its log (raise it with BENCH_TURN_LOG_LEVEL=debug) to trace a turn.
func startTurnGateway(gw string, env []string) (*turnGateway, error) {
	cmd := exec.Command(gw, "run")
	cmd.Env = env
	if lvl := os.Getenv("BENCH_TURN_LOG_LEVEL"); lvl != "" {
		cmd.Env = append(cmd.Env, "LOG_LEVEL="+lvl)
	}
	if path := os.Getenv("BENCH_TURN_STDERR"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return nil, err
		}
		defer f.Close() // the child has its own descriptor
		cmd.Stderr = f
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &turnGateway{cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(p.done) }()
	return p, nil
}

// stop sends SIGTERM and waits; the gateway stops its claude processes.
func (p *turnGateway) stop() { stopProcess(p.cmd, p.done) }

// claudeRequestOf reads the command line of the warm claude the gateway
// keeps (the one whose HOME is configDir) back into a backends.Request:
// its system prompt and flags, so the CLI alone runs the same request.
func claudeRequestOf(configDir string) (backends.Request, error) {
	args, err := findClaudeArgs(configDir)
	if err != nil {
		return backends.Request{}, err
	}
	return requestFromArgs(args)
}

// findClaudeArgs returns the arguments of the live process with
// HOME=home in its environment and --input-format on its command line.
func findClaudeArgs(home string) ([]string, error) {
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", d.Name(), "environ"))
		if err != nil || !slices.Contains(strings.Split(string(env), "\x00"), "HOME="+home) {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00")
		if slices.Contains(args, "--input-format") {
			return args, nil
		}
	}
	return nil, errors.New("the gateway keeps no warm claude process")
}

// requestFromArgs is the request behind a warm claude's command line
// (interactiveArgs): system prompt file, tools, permission mode, turns,
// model, directories, approvals. The prompt is not on it.
func requestFromArgs(args []string) (backends.Request, error) {
	var req backends.Request
	value := func(i int) string {
		if i+1 < len(args) {
			return args[i+1]
		}
		return ""
	}
	for i, a := range args {
		switch a {
		case "--append-system-prompt-file":
			b, err := os.ReadFile(value(i))
			if err != nil {
				return req, fmt.Errorf("the gateway's system prompt: %w", err)
			}
			req.SystemPrompt = string(b)
		case "--allowedTools":
			req.AllowedTools = strings.Split(value(i), ",")
		case "--permission-mode":
			req.PermissionMode = value(i)
		case "--max-turns":
			req.MaxTurns, _ = strconv.Atoi(value(i))
		case "--model":
			req.Model = value(i)
		case "--add-dir":
			req.AddDirs = append(req.AddDirs, value(i))
		case "--strict-mcp-config":
			req.Isolated = true
		case "--permission-prompt-tool":
			// The gateway asks for approvals on the process's pipe; the
			// bench allows everything (none is asked for a text answer).
			req.Approve = func(context.Context, backends.Approval) backends.Verdict { return backends.Verdict{Allow: true} }
		}
	}
	return req, nil
}

// promptOf is the prompt of a model request: the last text block of its
// last user message (claude puts its own reminders in blocks before it).
func promptOf(r fakeapi.Request) string {
	msgs := r.Messages()
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != "user" {
			continue
		}
		for j := len(msgs[i].Blocks) - 1; j >= 0; j-- {
			if b := msgs[i].Blocks[j]; b.Type == "text" {
				return b.Text
			}
		}
		return ""
	}
	return ""
}

// aloneClaude is the claude adapter alone, with its own fake API, taking
// the gateway's request in one kept process.
type aloneClaude struct {
	api       *fakeapi.Anthropic
	c         *backends.Claude
	req       backends.Request
	home, dir string
}

// newAlone starts the adapter for turns 0..n.
func newAlone(bin string, req backends.Request, n int) (*aloneClaude, error) {
	a := &aloneClaude{api: fakeapi.NewAnthropic(scriptedReplies(n + 1)...), req: req}
	var err error
	if a.home, err = os.MkdirTemp("", "gateway-bench-home-"); err != nil {
		a.close()
		return nil, err
	}
	if a.dir, err = os.MkdirTemp("", "gateway-bench-work-"); err != nil {
		a.close()
		return nil, err
	}
	a.c = backends.NewClaude(backends.Options{Binary: bin, Env: claudeBenchEnv(a.api.URL(), a.home), KillGrace: 2 * time.Second,
		Warm: backends.WarmOptions{Interactive: true, KeepAlive: time.Hour, MaxProcesses: 1}})
	a.req.Key, a.req.WorkDir = "bench", a.dir
	return a, nil
}

// turn runs prompt as turn i of the conversation and times Run -> return.
func (a *aloneClaude) turn(prompt string, i int) (time.Duration, error) {
	a.req.Prompt = prompt
	r, _, took, err := timeTurn(a.c, a.req)
	if err != nil {
		return 0, err
	}
	if want := turnReplyPrefix + strconv.Itoa(i); strings.TrimSpace(r.Text) != want {
		return 0, fmt.Errorf("answered %q, want %q", r.Text, want)
	}
	a.req.SessionID = r.SessionID
	return took, nil
}

func (a *aloneClaude) close() {
	if a.c != nil {
		a.c.Close()
	}
	a.api.Close()
	for _, d := range []string{a.home, a.dir} {
		if d != "" {
			os.RemoveAll(d)
		}
	}
}

// turnOverheadMarkdown is the measurement for BENCHMARKS.md: first the
// budget table's row, then lines to put beside the cold vs warm table.
func turnOverheadMarkdown(r turnResult) []string {
	const what = "| gateway overhead on a warm claude turn < 2 ms |"
	if r.Skipped != "" {
		return []string{what + " not measured: " + r.Skipped + " | - |", "", "Gateway overhead on a warm turn: not measured: " + r.Skipped + ".", ""}
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
	return []string{
		fmt.Sprintf("%s %s (median through the gateway %s - claude alone %s) | %s |", what,
			ms(r.Overhead()), ms(medianDur(r.Gateway)), ms(medianDur(r.Alone)), verdict(r.Within())),
		"",
		fmt.Sprintf("Gateway overhead on a warm turn: `gateway run` with the real claude CLI (%s) kept warm (AGENT_KEEP_ALIVE), THREADS=off, against the in-process fake Discord and fake Anthropic API; one untimed turn, then %d timed turns in one channel, each mention posted -> reply POST received. "+
			"Beside it, turn for turn in alternation, the same request (the gateway's prompt, system prompt and flags; model request %d bytes through the gateway, %d alone) on the claude adapter's warm process alone, Run -> result. "+
			"The CLI's own time varies by several ms from turn to turn on a shared machine, so the difference of the medians moves by a few ms between runs.", r.Version, len(r.Gateway), r.GatewayBody, r.AloneBody),
		"",
		"| warm turn | median | p90 | min | max |",
		"|---|---|---|---|---|",
		turnRow("through the gateway (mention -> reply POST)", r.Gateway, ms),
		turnRow("claude alone (Run -> result)", r.Alone, ms),
		fmt.Sprintf("| gateway overhead (median - median) | %s | budget %s | | |", ms(r.Overhead()), ms(budgetTurnOverhead)),
		"",
	}
}

func turnRow(name string, v []time.Duration, ms func(time.Duration) string) string {
	return fmt.Sprintf("| %s | %s | %s | %s | %s |", name, ms(medianDur(v)), ms(percentile(v, 90)), ms(slices.Min(v)), ms(slices.Max(v)))
}

// turnOverheadLines are the lines the quick run prints.
func turnOverheadLines(r turnResult) []string {
	if r.Skipped != "" {
		return []string{"gateway overhead on a warm turn: skipped: " + r.Skipped}
	}
	mark := "OK"
	if !r.Within() {
		mark = "OVER BUDGET"
	}
	return []string{
		fmt.Sprintf("gateway overhead on a warm turn: %v (budget %v) %s", r.Overhead().Round(10*time.Microsecond), budgetTurnOverhead, mark),
		fmt.Sprintf("gateway overhead on a warm turn: through the gateway median %v p90 %v; claude alone median %v p90 %v (n=%d; model request %d bytes vs %d; claude %s)",
			medianDur(r.Gateway).Round(10*time.Microsecond), percentile(r.Gateway, 90).Round(10*time.Microsecond),
			medianDur(r.Alone).Round(10*time.Microsecond), percentile(r.Alone, 90).Round(10*time.Microsecond), len(r.Gateway), r.GatewayBody, r.AloneBody, r.Version),
	}
}

// printTurnOverhead runs the measurement alone with n timed turns of each
// kind and prints its lines.
func printTurnOverhead(n int) error {
	r, err := runTurnOverheadN(n)
	if err != nil {
		return err
	}
	for _, l := range turnOverheadLines(r) {
		fmt.Println(l)
	}
	return nil
}
