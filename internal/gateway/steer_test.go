package gateway

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/diamondburned/arikawa/v3/discord"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/fakediscord"
)

// steerClaude stands in for claude -p --input-format stream-json
// --replay-user-messages (testdata/claude/interactive_facts.txt): it logs
// its pid to @SPAWNS@ once and every stdin line to @LOG@. A user message
// with "hold" in it is not answered until the next user message arrives
// (a message written into the running turn): that one is echoed back as
// claude echoes what it takes in, and one result answers both. Any other
// user message gets a result of its own.
const steerClaude = `#!/bin/sh
echo $$ >> @SPAWNS@
init='{"type":"system","subtype":"init","cwd":"/w","session_id":"s-steer","tools":["Bash"],"model":"fake"}'
n=0
while IFS= read -r line; do
	printf '%s\n' "$line" >> @LOG@
	case "$line" in
	*hold*'"type":"user"'*)
		echo "$init"
		IFS= read -r steered || exit 0
		printf '%s\n' "$steered" >> @LOG@
		printf '%s\n' "$steered" | sed 's/"type":"user"}$/"type":"user","isReplay":true}/'
		echo '{"type":"result","subtype":"success","is_error":false,"result":"Answered both: the held prompt and the one sent during it.","session_id":"s-steer","total_cost_usd":0.01,"num_turns":1}'
		;;
	*'"type":"user"'*)
		n=$((n+1))
		echo "$init"
		printf '{"type":"result","subtype":"success","is_error":false,"result":"Plain answer %d.","session_id":"s-steer","total_cost_usd":0.02,"num_turns":1}\n' "$n"
		;;
	esac
done
`

// newSteerClaude writes steerClaude and returns the claude adapter driving
// it (warm processes on), with the paths of its spawn and stdin logs.
func newSteerClaude(t *testing.T) (b backends.Backend, spawns, stdin string) {
	t.Helper()
	dir := t.TempDir()
	spawns, stdin = filepath.Join(dir, "spawns"), filepath.Join(dir, "stdin.log")
	script := filepath.Join(dir, "claude")
	text := strings.NewReplacer("@SPAWNS@", "'"+spawns+"'", "@LOG@", "'"+stdin+"'").Replace(steerClaude)
	if err := os.WriteFile(script, []byte(text), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := backends.New(config.BackendClaude, backends.Options{Binary: script, Env: os.Environ(),
		Warm: backends.WarmOptions{Interactive: true, KeepAlive: time.Hour, MaxProcesses: 2}})
	if err != nil {
		t.Fatal(err)
	}
	return b, spawns, stdin
}

func lines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Fields(strings.TrimSpace(string(b)))
}

// answerTo returns the bot's answer to prompt, if there is one yet; the
// tests here run without turn cards, so it is the reply to the prompt.
func (h *harness) answerTo(ch discord.ChannelID, prompt discord.MessageID) (fakediscord.Message, bool) {
	for _, m := range h.fd.BotMessages(ch) {
		if m.Reference != nil && m.Reference.MessageID == prompt {
			return m, true
		}
	}
	return fakediscord.Message{}, false
}

// Two prompts in a channel run on one warm claude process: the second is
// written to the process the first started.
func TestWarmProcessAnswersTheChannelsNextPrompt(t *testing.T) {
	claude, spawns, _ := newSteerClaude(t)
	h := startGateway(t, harnessOptions{backend: claude, env: map[string]string{config.EnvTurnCard: config.TurnCardOff}})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs:\n%s", h.logs.String())
		}
	})
	for i, text := range []string{"first", "second"} {
		p := h.mention(h.channel, text)
		h.fd.Wait(t, "answer "+text, waitLong, func() bool { _, ok := h.answerTo(h.channel, p.ID); return ok })
		if got, _ := h.answerTo(h.channel, p.ID); got.Content != []string{"Plain answer 1.", "Plain answer 2."}[i] {
			t.Errorf("answer to %s = %q", text, got.Content)
		}
	}
	if got := lines(t, spawns); len(got) != 1 {
		t.Errorf("claude started %d times for two prompts of one channel, want once (warm)", len(got))
	}
}

// STEER=steer: a prompt sent while the channel's turn runs is written into
// that turn (📨), the turn's answer covers it, and it gets no answer of
// its own and no second run.
func TestSteeredPromptJoinsTheRunningTurn(t *testing.T) {
	claude, spawns, stdin := newSteerClaude(t)
	h := startGateway(t, harnessOptions{backend: claude, env: map[string]string{
		config.EnvSteer: config.SteerInject, config.EnvTurnCard: config.TurnCardOff}})
	held := h.mention(h.channel, "hold on, working")
	h.fd.Wait(t, "the held turn to start", waitLong, func() bool { return len(lines(t, stdin)) >= 1 })
	during := h.mention(h.channel, "also check the logs")
	h.fd.Wait(t, "the held turn's answer", waitLong, func() bool { _, ok := h.answerTo(h.channel, held.ID); return ok })
	if got, _ := h.answerTo(h.channel, held.ID); !strings.HasPrefix(got.Content, "Answered both") {
		t.Errorf("answer = %q", got.Content)
	}
	h.fd.Wait(t, "📨 on the steered prompt", waitLong, func() bool { return len(h.fd.Reactions(h.channel, during.ID)["📨"]) == 1 })
	// The steered prompt's own turn comes up and is skipped: it was answered.
	h.fd.Wait(t, "the steered prompt skipped", waitLong, func() bool {
		return strings.Contains(h.logs.String(), "prompt answered within the turn it was written into")
	})
	if _, ok := h.answerTo(h.channel, during.ID); ok {
		t.Error("the steered prompt got an answer of its own")
	}
	log, _ := os.ReadFile(stdin)
	if n := strings.Count(string(log), `"type":"user"`); n != 2 || !strings.Contains(string(log), "also check the logs") {
		t.Errorf("claude read %d user messages, want the held prompt and the steered one:\n%s", n, log)
	}
	if got := lines(t, spawns); len(got) != 1 {
		t.Errorf("claude started %d times", len(got))
	}
}
