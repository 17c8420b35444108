//go:build conformance

package conformance

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/diamondburned/arikawa/v3/discord"

	"github.com/agentgateway/gateway/internal/fakeapi"
	"github.com/agentgateway/gateway/internal/fakediscord"
)

// The built `gateway run` against the fake Discord, once per backend that
// keeps warm processes over a protocol (codex app-server, gemini and
// opencode over ACP, any ACP agent, pi --mode rpc), with what a Discord
// user sees: a risky tool call asks under the prompt and only the author's
// answer counts; the next prompt is answered on the same process and
// session; Stop on the turn card ends a held turn and keeps the session.

// discordBackend is one backend's settings for `gateway run` and its fake
// model API.
type discordBackend struct {
	name string
	// start starts the fake model API with turns and returns it and the
	// gateway settings that select the backend and point its CLI (whose
	// HOME is home) at the API.
	start func(t *testing.T, home string, turns ...fakeapi.Turn) (discordModelAPI, []string)
	// risky is the model's tool call that writes target (an absolute
	// path in the agent's working directory), in the CLI's own tool.
	risky func(target string) fakeapi.Turn
}

// discordModelAPI is what the scenario reads of any fake model API.
type discordModelAPI interface {
	Summary() string
	// mainBodies lists the bodies of the main requests so far.
	mainBodies() []string
}

// mainBodiesOf adapts a fake whose requests embed fakeapi.Exchange.
type mainBodiesOf[R any] struct {
	summary func() string
	main    func() []R
	body    func(R) []byte
}

func (m mainBodiesOf[R]) Summary() string { return m.summary() }

func (m mainBodiesOf[R]) mainBodies() []string {
	var out []string
	for _, r := range m.main() {
		out = append(out, string(m.body(r)))
	}
	return out
}

func discordBackends() []discordBackend {
	geminiWrite := func(target string) fakeapi.Turn {
		return fakeapi.ToolUse("write_file", map[string]any{"file_path": target, "content": "hello\n"})
	}
	return []discordBackend{
		{name: "codex", start: discordCodex, risky: func(target string) fakeapi.Turn {
			cmd, _ := json.Marshal(map[string]any{"cmd": "echo hello > " + filepath.Base(target)})
			return fakeapi.Turn{ToolCalls: []fakeapi.ToolCall{{Name: "exec_command", Input: cmd}}}
		}},
		{name: "gemini", start: func(t *testing.T, home string, turns ...fakeapi.Turn) (discordModelAPI, []string) {
			return discordGemini(t, home, false, turns...)
		}, risky: geminiWrite},
		{name: "acp", start: func(t *testing.T, home string, turns ...fakeapi.Turn) (discordModelAPI, []string) {
			return discordGemini(t, home, true, turns...)
		}, risky: geminiWrite},
		{name: "opencode", start: discordOpencode, risky: func(target string) fakeapi.Turn {
			return fakeapi.ToolUse("write", map[string]any{"filePath": target, "content": "hello\n"})
		}},
		{name: "pi", start: discordPi, risky: func(target string) fakeapi.Turn {
			return fakeapi.ToolUse("bash", map[string]any{"command": "echo hello > " + filepath.Base(target)})
		}},
	}
}

// discordCodex: codex app-server against the fake Responses API through
// OPENAI_BASE_URL, with config.toml as codexAppOptions writes it.
func discordCodex(t *testing.T, home string, turns ...fakeapi.Turn) (discordModelAPI, []string) {
	api := fakeapi.StartResponses(t, turns...)
	opts := codexAppOptions(t, api, cliBinary(t, "codex"))
	env := []string{"AGENT_BACKEND=codex", "AGENT_CLI_PATH=" + opts.Binary, "AGENT_MODEL=" + codexModel}
	for _, kv := range opts.Env {
		name, value, _ := strings.Cut(kv, "=")
		switch {
		case name == "HOME":
			// The config is in its own HOME: copy it into the CLI's.
			if err := os.CopyFS(home, os.DirFS(value)); err != nil {
				t.Fatal(err)
			}
		case strings.HasPrefix(name, "OPENAI_"):
			env = append(env, kv)
		}
	}
	return mainBodiesOf[fakeapi.ResponsesRequest]{api.Summary, api.MainRequests,
		func(r fakeapi.ResponsesRequest) []byte { return r.Body }}, env
}

// discordGemini: gemini with API-key auth against the fake Gemini API;
// generic runs it as an operator configures any ACP agent.
func discordGemini(t *testing.T, home string, generic bool, turns ...fakeapi.Turn) (discordModelAPI, []string) {
	api := fakeapi.StartGemini(t, turns...)
	acpWrite(t, filepath.Join(home, ".gemini", "settings.json"), geminiSettings)
	env := []string{"GEMINI_API_KEY=" + geminiAPIKey, "GOOGLE_GEMINI_BASE_URL=" + api.URL(),
		"GEMINI_CLI_TRUST_WORKSPACE=true", "TMPDIR=" + t.TempDir(), "AGENT_MODEL=" + geminiModel}
	if generic {
		env = append(env, "AGENT_BACKEND=acp", "ACP_COMMAND="+cliBinary(t, "gemini")+" --acp")
	} else {
		env = append(env, "AGENT_BACKEND=gemini", "AGENT_CLI_PATH="+cliBinary(t, "gemini"))
	}
	return mainBodiesOf[fakeapi.GeminiRequest]{api.Summary, api.MainRequests,
		func(r fakeapi.GeminiRequest) []byte { return r.Body }}, env
}

// discordOpencode: opencode with the fake Chat Completions API as its
// provider in opencode.json (the model comes from there).
func discordOpencode(t *testing.T, home string, turns ...fakeapi.Turn) (discordModelAPI, []string) {
	api := fakeapi.StartChat(t, turns...)
	config, _ := json.Marshal(map[string]any{
		"provider": map[string]any{"fake": map[string]any{
			"npm": "@ai-sdk/openai-compatible", "name": "Fake",
			"options": map[string]any{"baseURL": api.BaseURL(), "apiKey": opencodeAPIKey, "timeout": 120000},
			"models":  map[string]any{opencodeModel: map[string]any{"name": "Fake Model"}},
		}},
		"model": "fake/" + opencodeModel, "autoupdate": false, "share": "disabled",
	})
	acpWrite(t, filepath.Join(home, ".config", "opencode", "opencode.json"), string(config))
	env := []string{"AGENT_BACKEND=opencode", "AGENT_CLI_PATH=" + cliBinary(t, "opencode"),
		"OPENCODE_DISABLE_MODELS_FETCH=1", "OPENCODE_DISABLE_AUTOUPDATE=1",
		"OPENCODE_DISABLE_DEFAULT_PLUGINS=1", "OPENCODE_DISABLE_SHARE=1"}
	return mainBodiesOf[fakeapi.ChatRequest]{api.Summary, api.MainRequests,
		func(r fakeapi.ChatRequest) []byte { return r.Body }}, env
}

// discordPi: pi --mode rpc with the fake Anthropic API as a provider in
// models.json (ANTHROPIC_API_KEY comes from gatewayEnv).
func discordPi(t *testing.T, home string, turns ...fakeapi.Turn) (discordModelAPI, []string) {
	api := fakeapi.StartAnthropic(t, turns...)
	own := piRPCHome(t, api)
	if err := os.CopyFS(home, os.DirFS(own)); err != nil {
		t.Fatal(err)
	}
	env := []string{"AGENT_BACKEND=pi", "AGENT_CLI_PATH=" + cliBinary(t, "pi"), "PI_OFFLINE=1", "AGENT_MODEL=" + piModel}
	return mainBodiesOf[fakeapi.Request]{api.Summary, api.MainRequests,
		func(r fakeapi.Request) []byte { return r.Body }}, env
}

func TestConformanceBackendsDiscord(t *testing.T) {
	bin := buildGateway(t)
	for _, b := range discordBackends() {
		t.Run(b.name, func(t *testing.T) { discordScenario(t, bin, b) })
	}
}

func TestConformanceBackendsDiscordAllowForSession(t *testing.T) {
	bin := buildGateway(t)
	for _, b := range discordBackends() {
		t.Run(b.name, func(t *testing.T) { discordAllowForSession(t, bin, b) })
	}
}

// discordRun is one backend's `gateway run` with its fake Discord and
// model API, and the channel where alice and bob talk to it.
type discordRun struct {
	t          *testing.T
	fd         *fakediscord.Server
	channel    discord.ChannelID
	alice, bob discord.User
	api        discordModelAPI
	work       string // the gateway's folder; the agent works in work/config
	target     string // the file the risky call writes
	marker     string // an env entry only this gateway's agent processes carry
	gatewayPid int
}

// startDiscord starts the gateway for b with the model answering turns;
// turns gets the risky call's target.
func startDiscord(t *testing.T, bin string, b discordBackend, turns func(target string) []fakeapi.Turn) *discordRun {
	work := t.TempDir()
	configDir := filepath.Join(work, "config")
	if err := os.MkdirAll(configDir, 0o700); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(configDir, "out.txt")
	home := t.TempDir()
	api, extra := b.start(t, home, turns(target)...)
	fd := fakediscord.Start(t)
	_, channel := fd.AddGuild("conformance")
	env := gatewayEnv(t, fd, "http://127.0.0.1:1", configDir,
		append(extra, "HOME="+home, "PERMISSION_MODE=default", "TURN_CARD=receipt")...)
	marker := "HOME=" + home
	t.Cleanup(func() {
		for _, pid := range processesWith(marker) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	_, pid := startGatewayRun(t, bin, work, env, api, syscall.SIGTERM)
	fd.Wait(t, "the bot to connect", 30*time.Second, fd.Connected)
	return &discordRun{t: t, fd: fd, channel: channel, alice: fd.User("alice"), bob: fd.User("bob"),
		api: api, work: work, target: target, marker: marker, gatewayPid: pid}
}

// mention posts alice's prompt mentioning the bot.
func (r *discordRun) mention(text string) discord.Message {
	return r.fd.Post(r.channel, r.alice, fakediscord.Mention(r.fd.Bot)+" "+text, r.fd.Bot)
}

// answered reports whether the bot replied to prompt with text.
func (r *discordRun) answered(prompt discord.Message, text string) func() bool {
	return func() bool {
		for _, m := range r.fd.BotMessages(r.channel) {
			if strings.Contains(m.Content, text) && m.Reference != nil && m.Reference.MessageID == prompt.ID {
				return true
			}
		}
		return false
	}
}

// question waits for an approval question with buttons.
func (r *discordRun) question() fakediscord.Message {
	r.t.Helper()
	var ask fakediscord.Message
	r.fd.Wait(r.t, "the approval question", 90*time.Second, func() bool {
		for _, m := range r.fd.BotMessages(r.channel) {
			if strings.Contains(m.Content, "the agent wants to use") && len(m.Buttons()) > 0 {
				ask = m
				return true
			}
		}
		return false
	})
	return ask
}

// questions counts the approval messages, asked or answered.
func (r *discordRun) questions() int {
	n := 0
	for _, m := range r.fd.BotMessages(r.channel) {
		if strings.Contains(m.Content, "the agent wants to use") || strings.HasPrefix(m.Content, "✅ Allowed") {
			n++
		}
	}
	return n
}

// agentProcesses lists the pids of the backend's agent processes.
func (r *discordRun) agentProcesses() []int { return cliProcesses(r.marker, r.gatewayPid) }

// sharesProcess reports whether one of before still runs in after.
func sharesProcess(before, after []int) bool {
	return slices.ContainsFunc(before, func(pid int) bool { return slices.Contains(after, pid) })
}

func buttonID(t *testing.T, m fakediscord.Message, label string) string {
	t.Helper()
	for _, b := range m.Buttons() {
		if b.Label == label {
			return b.ID
		}
	}
	t.Fatalf("no %q button in %+v", label, m.Buttons())
	return ""
}

func buttonLabels(m fakediscord.Message) []string {
	var out []string
	for _, b := range m.Buttons() {
		out = append(out, b.Label)
	}
	return out
}

// discordScenario runs the three points in one channel of one gateway:
// approval, warm second turn, Stop and the turn after it.
func discordScenario(t *testing.T, bin string, b discordBackend) {
	gate := make(chan struct{})
	defer close(gate)
	r := startDiscord(t, bin, b, func(target string) []fakeapi.Turn {
		return []fakeapi.Turn{
			b.risky(target),
			fakeapi.Text("Wrote out.txt."),
			fakeapi.Text("Second answer."),
			{Text: "never", Gate: gate},
			fakeapi.Text("After the stop."),
		}
	})
	fd, channel, alice, bob, api, target := r.fd, r.channel, r.alice, r.bob, r.api, r.target

	// 1. The approval.
	first := r.mention("Write hello to out.txt.")
	ask := r.question()
	t.Logf("question: %q", ask.Content)
	if !strings.Contains(ask.Content, "<@"+alice.ID.String()+">") {
		t.Errorf("question = %q, want the author named", ask.Content)
	}
	if ask.Reference == nil || ask.Reference.MessageID != first.ID {
		t.Errorf("the question does not answer the prompt: %+v", ask.Reference)
	}
	t.Run("question", func(t *testing.T) {
		if !strings.Contains(ask.Content, "out.txt") || strings.Contains(ask.Content, r.work) || strings.Contains(ask.Content, "```json") {
			t.Errorf("question = %q, want the file or command named without the server's paths", ask.Content)
		}
	})
	if got, want := buttonLabels(ask), []string{"Allow", "Allow for this session", "Deny", "Deny and stop"}; !slices.Equal(got, want) {
		t.Errorf("buttons %q, want %q", got, want)
	}
	press := fd.Press(channel, ask.ID, bob, buttonID(t, ask, "Allow"), discord.PermissionSendMessages)
	fd.Wait(t, "the answer to bob's press", 30*time.Second, func() bool { return len(fd.Callbacks(press)) > 0 })
	if _, err := os.Stat(target); err == nil {
		t.Fatal("bob's press wrote the file")
	}
	if m, _ := fd.Message(channel, ask.ID); len(m.Buttons()) == 0 || m.Content != ask.Content {
		t.Errorf("bob's press changed the question: %q with buttons %q", m.Content, buttonLabels(m))
	}
	fd.Press(channel, ask.ID, alice, buttonID(t, ask, "Allow"), discord.PermissionSendMessages)
	fd.Wait(t, "the first reply", 90*time.Second, r.answered(first, "Wrote out.txt."))
	if got, err := os.ReadFile(target); err != nil || strings.TrimSpace(string(got)) != "hello" {
		t.Errorf("out.txt = %q, %v; want the allowed write", got, err)
	}
	fd.Wait(t, "the question to say who allowed it", 30*time.Second, func() bool {
		m, _ := fd.Message(channel, ask.ID)
		return strings.HasPrefix(m.Content, "✅ Allowed by <@"+alice.ID.String()+">") && len(m.Buttons()) == 0
	})
	afterFirst := r.agentProcesses()
	if len(afterFirst) == 0 {
		t.Fatalf("no %s process left after the first turn: warm processes are on", b.name)
	}

	// 2. The warm second turn, in the same session.
	second := r.mention("Say something else.")
	fd.Wait(t, "the second reply", 90*time.Second, r.answered(second, "Second answer."))
	bodies := api.mainBodies()
	if last := bodies[len(bodies)-1]; !strings.Contains(last, "Write hello to out.txt.") || !strings.Contains(last, "Wrote out.txt.") {
		t.Errorf("the second model request does not carry the first exchange:\n%.3000s", last)
	}
	afterSecond := r.agentProcesses()
	if !sharesProcess(afterFirst, afterSecond) {
		t.Errorf("the first turn's %s processes %v are gone after the second (%v): it did not run warm", b.name, afterFirst, afterSecond)
	}
	status := fd.Interact(channel, alice, "status", nil)
	var statusText string
	fd.Wait(t, "the /status answer", 30*time.Second, func() bool {
		for _, a := range fd.Answers() {
			if a.Interaction == status {
				statusText = a.Content
				return true
			}
		}
		return false
	})
	if !strings.Contains(statusText, "Warm agent processes: 1 of") {
		t.Errorf("/status = %q, want one warm process", statusText)
	}

	// 3. Stop on the card while the model holds its answer.
	held := r.mention("Take your time.")
	fd.Wait(t, "the held model request", 60*time.Second, func() bool { return len(api.mainBodies()) >= 4 })
	var card fakediscord.Message
	fd.Wait(t, "the held turn's card", 30*time.Second, func() bool {
		var ok bool
		card, ok = cardOf(fd, channel, held.ID)
		return ok && slices.Contains(buttonLabels(card), "Stop")
	})
	fd.Press(channel, card.ID, alice, buttonID(t, card, "Stop"), discord.PermissionSendMessages)
	fd.Wait(t, "the card to say stopped", 30*time.Second, func() bool {
		m, _ := fd.Message(channel, card.ID)
		return strings.HasPrefix(m.Content, "🛑 Stopped")
	})
	after := r.mention("Are you still there?")
	fd.Wait(t, "the answer after the stop", 90*time.Second, r.answered(after, "After the stop."))
	if afterStop := r.agentProcesses(); !sharesProcess(afterFirst, afterStop) {
		t.Errorf("the %s processes %v are gone after the stop (%v): Stop did not keep the warm process", b.name, afterFirst, afterStop)
	}
	bodies = api.mainBodies()
	if last := bodies[len(bodies)-1]; !strings.Contains(last, "Write hello to out.txt.") || !strings.Contains(last, "Second answer.") {
		t.Errorf("the turn after the stop did not continue the session:\n%.3000s", last)
	}
	for _, m := range fd.BotMessages(channel) {
		if strings.Contains(m.Content, "could not be resumed") {
			t.Errorf("bot message %q after the stop", m.Content)
		}
	}
}

// discordAllowForSession: the author's "Allow for this session" runs the
// call, the question says so, and the same call in the next prompt runs
// without a question, on the same warm process.
func discordAllowForSession(t *testing.T, bin string, b discordBackend) {
	r := startDiscord(t, bin, b, func(target string) []fakeapi.Turn {
		return []fakeapi.Turn{b.risky(target), fakeapi.Text("Done once."), b.risky(target), fakeapi.Text("Done twice.")}
	})
	first := r.mention("Write hello to out.txt.")
	ask := r.question()
	r.fd.Press(r.channel, ask.ID, r.alice, buttonID(t, ask, "Allow for this session"), discord.PermissionSendMessages)
	r.fd.Wait(t, "the first reply", 90*time.Second, r.answered(first, "Done once."))
	if m, _ := r.fd.Message(r.channel, ask.ID); !strings.HasPrefix(m.Content, "✅ Allowed for this session by <@"+r.alice.ID.String()+">") || len(m.Buttons()) != 0 {
		t.Errorf("answered question = %q with buttons %q, want who allowed it for the session", m.Content, buttonLabels(m))
	}
	if _, err := os.Stat(r.target); err != nil {
		t.Fatalf("the allowed call did not write: %v", err)
	}
	if err := os.Remove(r.target); err != nil {
		t.Fatal(err)
	}
	before := r.agentProcesses()

	second := r.mention("Once more.")
	r.fd.Wait(t, "the second reply or a question", 90*time.Second, func() bool {
		return r.answered(second, "Done twice.")() || r.questions() > 1
	})
	if n := r.questions(); n != 1 {
		t.Errorf("%d approval messages, want 1: the second call was allowed for the session", n)
	}
	r.fd.Wait(t, "the second reply", 90*time.Second, r.answered(second, "Done twice."))
	if _, err := os.Stat(r.target); err != nil {
		t.Errorf("the call allowed for the session did not run again: %v", err)
	}
	if after := r.agentProcesses(); !sharesProcess(before, after) {
		t.Errorf("the %s processes %v are gone after the second turn (%v)", b.name, before, after)
	}
}
