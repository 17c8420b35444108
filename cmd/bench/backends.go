package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/fakeapi"
)

// The cold vs warm measurement of every backend: claude, codex, gemini,
// opencode and pi, each the real pinned CLI against the in-process fake
// model API it speaks, through its adapter. Cold is AGENT_KEEP_ALIVE=0 (a
// process per turn, resuming the session); warm is the adapter's
// long-running mode (claude's stream-json, codex app-server, ACP, pi's RPC
// mode) keeping one process.
//
// First output is the first event that is not EventInit: a warm adapter
// knows the session id before the CLI prints anything and reports it at
// once, so an init event would time the adapter, not the CLI.

const (
	// backendTurns is how many turns of each kind are timed per backend:
	// a cold turn of gemini or opencode takes seconds, and the four
	// backends together must stay within a few minutes.
	backendTurns = 5
	// backendTurnTimeout bounds one turn; a cold node CLI on a busy
	// machine can take several seconds to start.
	backendTurnTimeout = 120 * time.Second
	// benchPersona is the persona every turn carries, as the gateway's
	// turns always do (codex writes it to a profile, gemini to its
	// system prompt file, pi and opencode to a file they read).
	benchPersona = "You are a benchmark assistant. Answer in one word."
)

// backendWarm is one backend's cold vs warm measurement.
type backendWarm struct {
	// Name is the registry name; Version the CLI's --version.
	Name, Version string
	// Mode is the warm mode the adapter declares (Capabilities.Warm).
	Mode string
	// ColdFirst and WarmFirst are Run -> first event, ColdTurn and
	// WarmTurn Run -> return, one per timed turn.
	ColdFirst, WarmFirst []time.Duration
	ColdTurn, WarmTurn   []time.Duration
	// ColdKind and WarmKind are the kind of the last turn's first event.
	ColdKind, WarmKind backends.EventKind
	// Skipped says why nothing was measured (no CLI, no warm mode).
	Skipped string
	// Failed is the error that stopped the measurement.
	Failed string
}

// FirstSpeedup is the cold over the warm median of the first output, or 0.
func (r backendWarm) FirstSpeedup() float64 { return ratio(r.ColdFirst, r.WarmFirst) }

// TurnSpeedup is the cold over the warm median of the whole turn, or 0.
func (r backendWarm) TurnSpeedup() float64 { return ratio(r.ColdTurn, r.WarmTurn) }

func ratio(cold, warm []time.Duration) float64 {
	if len(cold) == 0 || len(warm) == 0 || medianDur(warm) <= 0 {
		return 0
	}
	return float64(medianDur(cold)) / float64(medianDur(warm))
}

// fakeModelAPI is an in-process fake model API.
type fakeModelAPI interface {
	URL() string
	Close()
}

// cliBench is how one CLI reaches its fake model API: the fake, the
// config files in HOME and the environment, as the conformance suite sets
// them (internal/conformance/<cli>_test.go).
type cliBench struct {
	name string
	// model is Request.Model ("" for the CLI's configured default).
	model string
	// setup starts the fake API, writes the CLI's config into home and
	// returns the CLI's environment.
	setup func(home string) (fakeModelAPI, []string, error)
}

// benchCLIs are the backends measured here, in the table's order.
func benchCLIs() []cliBench {
	return []cliBench{
		{name: "claude", setup: claudeBackendSetup},
		{name: "codex", model: "gpt-5.5", setup: codexBenchSetup},
		{name: "gemini", model: "gemini-2.5-pro", setup: geminiBenchSetup},
		{name: "opencode", setup: opencodeBenchSetup},
		{name: "pi", model: "fake/fake-model", setup: piBenchSetup},
	}
}

// baseBenchEnv is what every CLI gets: PATH, a fresh HOME and TMPDIR.
func baseBenchEnv(home string) []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TMPDIR=" + filepath.Join(home, "tmp")}
}

// writeBenchFile writes content to path under home, making its folders.
func writeBenchFile(path, content string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(content), 0o600)
}

// claudeBackendSetup: the fake Anthropic API, as for the claude
// measurement (claudeBenchEnv).
func claudeBackendSetup(home string) (fakeModelAPI, []string, error) {
	api := fakeapi.NewAnthropic()
	return api, append(claudeBenchEnv(api.URL(), home), "TMPDIR="+filepath.Join(home, "tmp")), nil
}

// codexBenchSetup: the fake Responses API through the gateway's provider
// settings (OPENAI_BASE_URL, OPENAI_API_KEY), retries and update checks
// off in ~/.codex/config.toml.
func codexBenchSetup(home string) (fakeModelAPI, []string, error) {
	config := fmt.Sprintf(`model = "gpt-5.5"
check_for_update_on_startup = false

[analytics]
enabled = false

[features]
plugins = false
apps = false
remote_plugin = false

[model_providers.%s]
name = "OpenAI (agent gateway)"
wire_api = "responses"
env_key = "OPENAI_API_KEY"
request_max_retries = 0
stream_max_retries = 0
stream_idle_timeout_ms = 120000
`, backends.CodexProviderID)
	if err := writeBenchFile(filepath.Join(home, ".codex", "config.toml"), config); err != nil {
		return nil, nil, err
	}
	api := fakeapi.NewResponses()
	return api, append(baseBenchEnv(home), "OPENAI_BASE_URL="+api.URL()+"/v1", "OPENAI_API_KEY=sk-codex-bench"), nil
}

// geminiBenchSetup: the fake Gemini API (GOOGLE_GEMINI_BASE_URL), API-key
// auth, no retries, telemetry or update checks.
func geminiBenchSetup(home string) (fakeModelAPI, []string, error) {
	const settings = `{
  "security": {"auth": {"selectedType": "gemini-api-key"}},
  "general": {"maxAttempts": 1, "retryFetchErrors": false, "enableAutoUpdate": false, "enableAutoUpdateNotification": false},
  "privacy": {"usageStatisticsEnabled": false},
  "telemetry": {"enabled": false}
}
`
	if err := writeBenchFile(filepath.Join(home, ".gemini", "settings.json"), settings); err != nil {
		return nil, nil, err
	}
	api := fakeapi.NewGemini()
	return api, append(baseBenchEnv(home), "GEMINI_API_KEY=AIza-bench-key", "GOOGLE_GEMINI_BASE_URL="+api.URL(),
		"GEMINI_CLI_TRUST_WORKSPACE=true"), nil
}

// opencodeBenchSetup: the fake Chat Completions API as an
// openai-compatible provider in ~/.config/opencode/opencode.json.
func opencodeBenchSetup(home string) (fakeModelAPI, []string, error) {
	api := fakeapi.NewChat()
	config, err := json.Marshal(map[string]any{
		"provider": map[string]any{"fake": map[string]any{
			"npm": "@ai-sdk/openai-compatible", "name": "Fake",
			"options": map[string]any{"baseURL": api.BaseURL(), "apiKey": "sk-opencode-bench", "timeout": 120000},
			"models":  map[string]any{"fake-model": map[string]any{"name": "Fake Model"}},
		}},
		"model": "fake/fake-model", "autoupdate": false, "share": "disabled",
	})
	if err == nil {
		err = writeBenchFile(filepath.Join(home, ".config", "opencode", "opencode.json"), string(config))
	}
	if err != nil {
		api.Close()
		return nil, nil, err
	}
	return api, append(baseBenchEnv(home), "OPENCODE_DISABLE_MODELS_FETCH=1", "OPENCODE_DISABLE_AUTOUPDATE=1",
		"OPENCODE_DISABLE_DEFAULT_PLUGINS=1", "OPENCODE_DISABLE_SHARE=1"), nil
}

// piBenchSetup: the fake Anthropic API as a provider in
// ~/.pi/agent/models.json, retries and telemetry off.
func piBenchSetup(home string) (fakeModelAPI, []string, error) {
	api := fakeapi.NewAnthropic()
	agentDir := filepath.Join(home, ".pi", "agent")
	err := writeBenchFile(filepath.Join(agentDir, "models.json"), fmt.Sprintf(`{
  "providers": {
    "fake": {
      "baseUrl": %q,
      "api": "anthropic-messages",
      "apiKey": "ANTHROPIC_API_KEY",
      "models": [{"id": "fake-model", "cost": {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75}}]
    }
  }
}
`, api.URL()))
	if err == nil {
		err = writeBenchFile(filepath.Join(agentDir, "settings.json"), `{
  "retry": {"enabled": false, "provider": {"maxRetries": 0, "timeoutMs": 30000}},
  "enableInstallTelemetry": false,
  "quietStartup": true
}
`)
	}
	if err != nil {
		api.Close()
		return nil, nil, err
	}
	return api, append(baseBenchEnv(home), "PI_OFFLINE=1", "ANTHROPIC_API_KEY=sk-ant-bench"), nil
}

// errNoCLI is a CLI that is not installed: its measurement is skipped.
var errNoCLI = errors.New("CLI not installed")

// cliBinary is the pinned CLI name: <NAME>_BIN (as `make conformance`
// sets it), else the one `make clis` installs.
func cliBinary(name string) (string, error) {
	envName := strings.ToUpper(name) + "_BIN"
	bin := os.Getenv(envName)
	if bin == "" {
		bin = filepath.Join(".tools", name, "node_modules", ".bin", name)
	}
	abs, err := filepath.Abs(bin)
	if err != nil {
		return "", fmt.Errorf("%s CLI %s: %w", name, bin, err)
	}
	if _, err := os.Stat(abs); errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%w: no %s CLI at %s (set %s, or run make clis)", errNoCLI, name, bin, envName)
	} else if err != nil {
		return "", fmt.Errorf("%s CLI %s: %w", name, bin, err)
	}
	return abs, nil
}

// cliVersion is the version `bin --version` prints: the first word of
// its first line that starts with a digit ("codex-cli 0.169.0",
// "2.1.330 (Claude Code)"; pi prints it on stderr), or "unknown".
func cliVersion(bin string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
	if err != nil {
		return "unknown"
	}
	return versionIn(string(out))
}

// versionIn picks the version out of a --version output (cliVersion).
func versionIn(out string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(out), "\n")
	for _, f := range strings.Fields(line) {
		if f[0] >= '0' && f[0] <= '9' {
			return f
		}
	}
	return "unknown"
}

// warmMode is the long-running mode the adapter declares, "" for none.
func warmMode(name string) (string, error) {
	be, err := backends.New(name, backends.Options{})
	if err != nil {
		return "", err
	}
	if c, ok := be.(interface{ Close() error }); ok {
		defer c.Close()
	}
	caps, _ := backends.CapabilitiesOf(be)
	return strings.ReplaceAll(caps.Warm, "`", ""), nil
}

// runBackends measures every backend of benchCLIs in turn. A backend that
// is skipped or fails says so in its row; the others still run.
func runBackends(progress func(string)) []backendWarm {
	var rows []backendWarm
	for _, c := range benchCLIs() {
		progress(c.name)
		r := measureBackend(c)
		if r.Failed != "" {
			fmt.Fprintf(os.Stderr, "bench: %s cold vs warm failed: %s\n", c.name, r.Failed)
		}
		rows = append(rows, r)
	}
	return rows
}

// measureBackend is one backend's row: skipped without its CLI or a warm
// mode, failed with the error that stopped it.
func measureBackend(c cliBench) backendWarm {
	res := backendWarm{Name: c.name}
	bin, err := cliBinary(c.name)
	if errors.Is(err, errNoCLI) {
		res.Skipped = strings.TrimPrefix(err.Error(), errNoCLI.Error()+": ")
		return res
	}
	if err != nil {
		res.Failed = err.Error()
		return res
	}
	if res.Mode, err = warmMode(c.name); err != nil {
		res.Failed = err.Error()
		return res
	}
	if res.Mode == "" {
		res.Skipped = "the adapter has no warm mode in this build"
		return res
	}
	res.Version = cliVersion(bin)
	if err := coldVsWarm(c, bin, &res); err != nil {
		res.Failed = err.Error()
	}
	return res
}

// coldVsWarm times backendTurns cold turns (AGENT_KEEP_ALIVE=0: a process
// per turn resuming the session) and backendTurns warm turns (one kept
// process), each after one untimed turn, into res.
func coldVsWarm(c cliBench, bin string, res *backendWarm) error {
	home, err := os.MkdirTemp("", "gateway-bench-home-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(home)
	if err := os.MkdirAll(filepath.Join(home, "tmp"), 0o700); err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "gateway-bench-work-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	api, env, err := c.setup(home)
	if err != nil {
		return fmt.Errorf("set up %s: %w", c.name, err)
	}
	defer api.Close()

	req := backends.Request{Prompt: "Say ok.", Key: "bench", WorkDir: work, Model: c.model,
		SystemPrompt: benchPersona, PermissionMode: "acceptEdits", MaxTurns: 10}
	opts := backends.Options{Binary: bin, Env: env, KillGrace: 2 * time.Second,
		Warm: backends.WarmOptions{Interactive: true}} // AGENT_KEEP_ALIVE=0
	cold, err := timeBackend(c.name, opts, req, false)
	if err != nil {
		return fmt.Errorf("cold: %w", err)
	}
	res.ColdFirst, res.ColdTurn, res.ColdKind = cold.first, cold.turn, cold.kind

	opts.Warm = backends.WarmOptions{Interactive: true, KeepAlive: time.Hour, MaxProcesses: 1}
	warm, err := timeBackend(c.name, opts, req, true)
	if err != nil {
		return fmt.Errorf("warm: %w", err)
	}
	res.WarmFirst, res.WarmTurn, res.WarmKind = warm.first, warm.turn, warm.kind
	return nil
}

// timedTurns are a run of timed turns: Run -> first event and Run ->
// return of each, and the kind of the last one's first event.
type timedTurns struct {
	first, turn []time.Duration
	kind        backends.EventKind
}

// timeBackend builds the backend, runs one untimed turn, then
// backendTurns timed ones in the same session, each of which must have
// run on a kept process when warm is set, and on a new one otherwise.
func timeBackend(name string, opts backends.Options, req backends.Request, warm bool) (timedTurns, error) {
	var out timedTurns
	be, err := backends.New(name, opts)
	if err != nil {
		return out, err
	}
	if c, ok := be.(interface{ Close() error }); ok {
		defer c.Close()
	}
	r, _, _, err := timeBackendTurn(be, req)
	if err != nil {
		return out, fmt.Errorf("first turn: %w", err)
	}
	if r.SessionID == "" {
		return out, errors.New("first turn: no session id")
	}
	req.SessionID = r.SessionID
	for i := range backendTurns {
		r, f, t, err := timeBackendTurn(be, req)
		if err != nil {
			return out, fmt.Errorf("turn %d: %w", i+1, err)
		}
		if r.SessionID != req.SessionID {
			return out, fmt.Errorf("turn %d: session %q, want %q", i+1, r.SessionID, req.SessionID)
		}
		if r.Warm != warm {
			return out, fmt.Errorf("turn %d: ran on a kept process: %v, want %v", i+1, r.Warm, warm)
		}
		out.first, out.turn, out.kind = append(out.first, f.at), append(out.turn, t), f.kind
	}
	return out, nil
}

// timeBackendTurn runs req once on be and times it. emit is called on
// Run's goroutine, so it needs no lock.
func timeBackendTurn(be backends.Backend, req backends.Request) (backends.Result, firstEvent, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), backendTurnTimeout)
	defer cancel()
	var f firstEvent
	seen := false
	start := time.Now()
	res, err := be.Run(ctx, req, func(ev backends.Event) {
		if !seen && ev.Kind != backends.EventInit {
			seen = true
			f = firstEvent{at: time.Since(start), kind: ev.Kind}
		}
	})
	took := time.Since(start)
	if err == nil && !seen {
		err = errors.New("the turn emitted no event but init")
	}
	return res, f, took, err
}

// backendsLines are the lines the -backends flag prints, one per backend.
func backendsLines(rows []backendWarm) []string {
	var lines []string
	for _, r := range rows {
		prefix := r.Name + " cold vs warm: "
		switch {
		case r.Skipped != "":
			lines = append(lines, prefix+"skipped: "+r.Skipped)
		case r.Failed != "":
			lines = append(lines, prefix+"FAILED: "+r.Failed)
		default:
			lines = append(lines, fmt.Sprintf("%sfirst output cold %v, warm %v: %.1fx sooner; whole turn cold %v, warm %v: %.1fx (medians of %d; first event %s cold, %s warm; %s %s)",
				prefix, roundMs(medianDur(r.ColdFirst)), roundMs(medianDur(r.WarmFirst)), r.FirstSpeedup(),
				roundMs(medianDur(r.ColdTurn)), roundMs(medianDur(r.WarmTurn)), r.TurnSpeedup(), len(r.WarmFirst), r.ColdKind, r.WarmKind, r.Name, r.Version))
		}
	}
	return lines
}

func roundMs(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

// backendsMarkdown is the BENCHMARKS.md section: one row per backend.
func backendsMarkdown(rows []backendWarm) []string {
	lines := []string{"## Cold vs warm per backend", "",
		"Each backend's real pinned CLI against the in-process fake model API it speaks (`internal/fakeapi`: Anthropic for claude and pi, Responses for codex, Gemini for gemini, Chat Completions for opencode), through its adapter, which the fake answers at once. " +
			"Cold is a turn with AGENT_KEEP_ALIVE=0: a process of its own, resuming the conversation's session; warm is a turn on the conversation's process kept by the adapter's warm mode. " +
			fmt.Sprintf("Each kind runs one untimed turn first (it creates the session, or the process), then %d timed turns of the same session; figures are medians. ", backendTurns) +
			"First output is Run called -> the first event the adapter emits other than init (a warm adapter reports the session it already knows before the CLI prints anything); the whole turn is Run called -> Run returned. " +
			"The machine's two cores are shared with other work, so the cold figures move by a few hundred ms from run to run.",
		"",
		"| backend | CLI | warm mode | first output cold | first output warm | sooner | whole turn cold | whole turn warm | sooner |",
		"|---|---|---|---|---|---|---|---|---|",
	}
	for _, r := range rows {
		switch {
		case r.Skipped != "":
			lines = append(lines, fmt.Sprintf("| %s | - | - | skipped: %s | | | | | |", r.Name, tableCell(r.Skipped)))
		case r.Failed != "":
			lines = append(lines, fmt.Sprintf("| %s | %s | %s | failed: %s | | | | | |", r.Name, orDash(r.Version), orDash(r.Mode), tableCell(r.Failed)))
		default:
			lines = append(lines, fmt.Sprintf("| %s | %s | %s | %v (%s) | %v (%s) | %.1fx | %v | %v | %.1fx |", r.Name, r.Version, r.Mode,
				roundMs(medianDur(r.ColdFirst)), r.ColdKind, roundMs(medianDur(r.WarmFirst)), r.WarmKind, r.FirstSpeedup(),
				roundMs(medianDur(r.ColdTurn)), roundMs(medianDur(r.WarmTurn)), r.TurnSpeedup()))
		}
	}
	return append(lines, "", "The kind in brackets is what the first output was. claude's budget (warm first output at least 5x sooner, counting its init event) is in Budgets.", "")
}

// tableCell keeps text on one Markdown table row.
func tableCell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printBackends runs the per-backend cold vs warm measurement and prints
// one line per backend; a backend that failed makes it return an error
// after the lines.
func printBackends() error {
	rows := runBackends(func(name string) {
		fmt.Fprintf(os.Stderr, "bench: %s cold vs warm...\n", name)
	})
	for _, l := range backendsLines(rows) {
		fmt.Println(l)
	}
	var failed []string
	for _, r := range rows {
		if r.Failed != "" {
			failed = append(failed, r.Name)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("cold vs warm failed for %s", strings.Join(failed, ", "))
	}
	return nil
}
