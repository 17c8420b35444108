package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/diamondburned/arikawa/v3/discord"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/cost"
	"github.com/agentgateway/gateway/internal/fakediscord"
	"github.com/agentgateway/gateway/internal/session"
)

// cardClaude stands in for the claude CLI, driven through the real claude
// adapter. It replays the recording of the real CLI calling Read and Write
// (testdata/claude/tool_write.jsonl, paths moved to its working
// directory), and leaves behind, in the directory the prompt's first line
// names, its pid, working directory, arguments and system prompt. A prompt
// with "hang" stops after the first tool call and waits, like a CLI whose
// model API call hangs.
const cardClaude = `#!/bin/sh
prompt=$(cat)
log=$(printf '%s\n' "$prompt" | sed -n 's/^.*LOG:\([^ ]*\).*$/\1/p' | head -n 1)
echo $$ > "$log/pid"
pwd > "$log/cwd"
printf '%s\n' "$@" > "$log/args"
prev=
for a in "$@"; do
	[ "$prev" = --append-system-prompt-file ] && cp "$a" "$log/system"
	prev=$a
done
n=$(ls "$log" | grep -c '^run') ; touch "$log/run$n"
session=s-card
case "$prompt" in
*hang*)
	sed "s#/CONFIG_DIR#$PWD#g; s#0d98b416-6100-4178-a672-817b7de9c7a3#$session#g" "$REC" | head -n 11
	sleep 300
	;;
*)
	# The model takes a moment after each tool result, as a real one does.
	sed "s#/CONFIG_DIR#$PWD#g; s#0d98b416-6100-4178-a672-817b7de9c7a3#$session#g" "$REC" | while IFS= read -r line; do
		printf '%s\n' "$line"
		case "$line" in *'"type":"user"'*) sleep 0.4 ;; esac
	done
	;;
esac
`

// newCardClaude writes cardClaude and returns the real claude adapter
// running it, and the directory its runs leave their traces in.
func newCardClaude(t *testing.T) (backends.Backend, string) {
	t.Helper()
	dir := t.TempDir()
	rec, err := filepath.Abs(filepath.Join("..", "..", "testdata", "claude", "tool_write.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "claude")
	body := strings.Replace(cardClaude, `"$REC"`, strconv.Quote(rec), -1)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := backends.New(config.BackendClaude, backends.Options{Binary: script, Env: os.Environ(), KillGrace: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	logs := filepath.Join(dir, "log")
	if err := os.Mkdir(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	return b, logs
}

func readTrace(t *testing.T, dir, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

// card returns the bot's message in ch that replies to prompt and carries
// (or carried) the card: the first one.
func (h *harness) card(ch discord.ChannelID, prompt discord.MessageID) (fakediscord.Message, bool) {
	for _, m := range h.fd.BotMessages(ch) {
		if m.Reference != nil && m.Reference.MessageID == prompt {
			return m, true
		}
	}
	return fakediscord.Message{}, false
}

// A turn with tool calls shows a card that replies to the prompt, lists
// the tools with their inputs, streams the answer's tail, is edited no
// more often than the card interval, and ends as a one-line receipt with
// the cost, while the answer is posted as a reply of its own.
func TestTurnCardFromARecordedClaudeTurn(t *testing.T) {
	claude, logs := newCardClaude(t)
	const every = 150 * time.Millisecond
	h := startGateway(t, harnessOptions{backend: claude, cardEvery: every, env: map[string]string{config.EnvTurnCard: config.TurnCardReceipt}})
	prompt := h.mention(h.channel, "LOG:"+logs+" remember that Ana prefers tea")
	msgs := h.waitReplies(h.channel, 2)
	cardMsg, ok := h.card(h.channel, prompt.ID)
	if !ok {
		t.Fatalf("no card replying to the prompt: %+v", msgs)
	}
	h.fd.Wait(t, "the receipt", waitLong, func() bool {
		m, _ := h.fd.Message(h.channel, cardMsg.ID)
		return strings.HasPrefix(m.Content, "✅ Done")
	})
	final, _ := h.fd.Message(h.channel, cardMsg.ID)
	if !strings.Contains(final.Content, "2 tools") || !strings.Contains(final.Content, "$") || len(final.Buttons()) != 0 {
		t.Errorf("receipt = %q with buttons %v; want the tools, the cost and no buttons", final.Content, final.Buttons())
	}
	// The answer is its own reply, after the card.
	var answer *fakediscord.Message
	for i, m := range h.fd.BotMessages(h.channel) {
		if m.ID != cardMsg.ID && m.Reference != nil && m.Reference.MessageID == prompt.ID {
			answer = &h.fd.BotMessages(h.channel)[i]
		}
	}
	if answer == nil || !strings.Contains(answer.Content, "Ana") {
		t.Fatalf("answer = %+v", answer)
	}
	// Every frame the card showed: tools with their inputs (paths
	// relative to the working directory), never pinging, edits spaced.
	all := strings.Join(h.cardFrames(cardMsg.ID), "\n---\n")
	for _, want := range []string{"`Read` `memory.md`", "`Write` `memory.md`", "`claude-opus-5-5`"} {
		if !strings.Contains(all, want) {
			t.Errorf("no frame shows %q:\n%s", want, all)
		}
	}
	edits := h.fd.Edits(h.channel, cardMsg.ID)
	for i := 1; i < len(edits); i++ {
		// The receipt is the one edit not paced: it comes when the turn ends.
		if gap := edits[i].Time.Sub(edits[i-1].Time); gap < every && i != len(edits)-1 {
			t.Errorf("edits %d and %d only %v apart, want at least %v", i-1, i, gap, every)
		}
	}
	if cwd := readTrace(t, logs, "cwd"); cwd != h.cfg.ConfigDir {
		t.Errorf("the CLI ran in %q, want CONFIG_DIR without a project", cwd)
	}
}

// cardFrames returns every content the bot sent for the card: the post
// that created it and each edit it made, accepted or not.
func (h *harness) cardFrames(card discord.MessageID) []string {
	var out []string
	for _, r := range h.fd.Requests() {
		var body struct {
			Content string `json:"content"`
		}
		isCard := r.Method == "PATCH" && strings.HasSuffix(r.Path, "/messages/"+card.String()) ||
			r.Method == "POST" && strings.HasSuffix(r.Path, "/messages") && strings.Contains(string(r.Body), `"components"`)
		if isCard && json.Unmarshal(r.Body, &body) == nil {
			out = append(out, body.Content)
		}
	}
	return out
}

// A fast stream of text costs one edit per card interval, the latest
// text wins, and a Discord that answers edits with 429 is waited for,
// never hammered.
func TestTurnCardUnderAFastStream(t *testing.T) {
	const every = 100 * time.Millisecond
	release := make(chan struct{})
	h := startGateway(t, harnessOptions{
		cardEvery: every,
		env:       map[string]string{config.EnvTurnCard: config.TurnCardReceipt},
		respond: func(ctx context.Context, req backends.Request, emit func(backends.Event)) (backends.Result, error) {
			emit(backends.Event{Kind: backends.EventInit, SessionID: "s", Model: "m"})
			emit(backends.Event{Kind: backends.EventToolUse, Tool: &backends.ToolCall{ID: "1", Name: "Bash", Input: `{"command":"make test"}`}})
			var text strings.Builder
			deadline := time.Now().Add(1500 * time.Millisecond)
			for i := 0; time.Now().Before(deadline); i++ {
				chunk := fmt.Sprintf(" word%d", i)
				text.WriteString(chunk)
				emit(backends.Event{Kind: backends.EventText, Text: chunk})
				time.Sleep(200 * time.Microsecond) // a CLI streaming tokens
			}
			emit(backends.Event{Kind: backends.EventText, Text: " THE-END"})
			<-release
			return backends.Result{SessionID: "s", Text: text.String() + " THE-END", CostUSD: 0.5}, nil
		},
	})
	h.fd.LimitEdits(250 * time.Millisecond)
	prompt := h.mention(h.channel, "stream")
	var cardMsg fakediscord.Message
	h.fd.Wait(t, "the card", waitLong, func() bool {
		var ok bool
		cardMsg, ok = h.card(h.channel, prompt.ID)
		return ok
	})
	h.fd.Wait(t, "the end of the stream on the card", waitLong, func() bool {
		m, _ := h.fd.Message(h.channel, cardMsg.ID)
		return strings.Contains(m.Content, "THE-END")
	})
	edits := h.fd.Edits(h.channel, cardMsg.ID)
	patches := len(h.requests("PATCH", "/channels/"+h.channel.String()+"/messages/"+cardMsg.ID.String()))
	close(release)
	span := edits[len(edits)-1].Time.Sub(cardMsg.Timestamp.Time())
	t.Logf("fast stream: %d edits accepted (%d requests, %d rate limited) in %v: %.1f edits/s", len(edits), patches, h.fd.RateLimited(), span, float64(len(edits))/span.Seconds())
	if max := int(span/(250*time.Millisecond)) + 2; len(edits) > max {
		t.Errorf("%d edits in %v, want at most %d", len(edits), span, max)
	}
	// Each 429 costs one retry after its retry_after, not a burst.
	if patches > 2*len(edits)+2 {
		t.Errorf("%d edit requests for %d accepted edits: 429s were not waited for", patches, len(edits))
	}
}

// Stop during a hung turn, by button, by reaction and by command: the
// card says it stopped only when no process of the turn is left, keeps
// what the agent had shown, the session is kept, and the next prompt
// resumes it. Strangers cannot stop someone else's turn.
func TestStopAHungTurn(t *testing.T) {
	for _, how := range []string{"button", "reaction", "command"} {
		t.Run(how, func(t *testing.T) {
			claude, logs := newCardClaude(t)
			h := startGateway(t, harnessOptions{backend: claude, cardEvery: 50 * time.Millisecond,
				env: map[string]string{config.EnvTurnCard: config.TurnCardReceipt}})
			stranger := h.fd.User("mallory")
			prompt := h.mention(h.channel, "LOG:"+logs+" hang please")
			var cardMsg fakediscord.Message
			h.fd.Wait(t, "the card with its tool", waitLong, func() bool {
				var ok bool
				cardMsg, ok = h.card(h.channel, prompt.ID)
				m, _ := h.fd.Message(h.channel, cardMsg.ID)
				return ok && strings.Contains(m.Content, "`Read`") && len(m.Buttons()) == 2
			})
			h.fd.Wait(t, "the CLI's pid", waitLong, func() bool { _, err := os.Stat(filepath.Join(logs, "pid")); return err == nil })
			pid, _ := strconv.Atoi(readTrace(t, logs, "pid"))

			// A stranger is refused and nothing stops.
			refusal := h.fd.Press(h.channel, cardMsg.ID, stranger, "stop:1", 0)
			h.fd.Wait(t, "the refusal", waitLong, func() bool { return len(h.fd.Callbacks(refusal)) == 1 })
			if cb := h.fd.Callbacks(refusal); cb[0] != 4 {
				t.Fatalf("stranger's press answered with callback %v, want an ephemeral notice", cb)
			}
			if syscall.Kill(pid, 0) != nil {
				t.Fatal("a stranger's press stopped the turn")
			}

			start := time.Now()
			var stopCmd string
			switch how {
			case "button":
				id := h.fd.Press(h.channel, cardMsg.ID, h.user, cardMsg.Buttons()[0].ID, 0)
				h.fd.Wait(t, "the press answered", waitLong, func() bool { return len(h.fd.Callbacks(id)) == 1 })
			case "reaction":
				h.fd.React(h.channel, prompt.ID, h.user, "🛑")
			case "command":
				stopCmd = h.fd.Interact(h.channel, h.user, "claude-stop", nil)
			}
			h.fd.Wait(t, "the card to say stopped", waitLong, func() bool {
				m, _ := h.fd.Message(h.channel, cardMsg.ID)
				return strings.HasPrefix(m.Content, "🛑 Stopped")
			})
			took := time.Since(start)
			// "Stopped" is said once the process is gone.
			if err := syscall.Kill(pid, 0); err == nil {
				t.Fatalf("the card says stopped while the CLI (pid %d) still runs", pid)
			}
			t.Logf("stop by %s: card said stopped %v after the request, no process left", how, took)
			final, _ := h.fd.Message(h.channel, cardMsg.ID)
			if !strings.Contains(final.Content, "`Read`") || len(final.Buttons()) != 0 {
				t.Errorf("stopped card = %q, buttons %v; want the tools kept and no buttons", final.Content, final.Buttons())
			}
			if stopCmd != "" {
				if got := h.answer(stopCmd); got != "Stopped the prompt that was running; nothing of it is still running." {
					t.Errorf("/claude-stop answer = %q", got)
				}
			}
			if id, ok := h.sessionBinding(); !ok || id != "s-card" {
				t.Fatalf("session after the stop = %q, %v; want it kept", id, ok)
			}
			// The next prompt resumes the session.
			h.mention(h.channel, "LOG:"+logs+" and now?")
			h.fd.Wait(t, "the second run", waitLong, func() bool { _, err := os.Stat(filepath.Join(logs, "run1")); return err == nil })
			h.fd.Wait(t, "the second answer", waitLong, func() bool {
				n := 0
				for _, m := range h.fd.BotMessages(h.channel) {
					if strings.Contains(m.Content, "Ana") {
						n++
					}
				}
				return n >= 1
			})
			if args := readTrace(t, logs, "args"); !strings.Contains(args, "--resume\ns-card") {
				t.Errorf("next run's arguments lack --resume s-card:\n%s", args)
			}
		})
	}
}

// /project binds a channel to a directory inside PROJECTS_ROOT and refuses
// escapes; the CLI then runs there (checked from /proc while it runs),
// with CONFIG_DIR added for memory.md, the channel's model and its own
// instructions; a change with a session asks Keep or Fresh.
func TestProjectModelAndInstructionsReachTheCLI(t *testing.T) {
	claude, logs := newCardClaude(t)
	root := t.TempDir()
	app := filepath.Join(root, "app")
	secret := t.TempDir()
	for _, d := range []string{app, filepath.Join(root, "other")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(secret, filepath.Join(root, "escape")); err != nil {
		t.Fatal(err)
	}
	h := startGateway(t, harnessOptions{backend: claude, env: map[string]string{config.EnvProjectsRoot: root}})

	ask := func(command string, opts ...fakediscord.Option) string {
		return h.answer(h.fd.InteractOptions(h.channel, h.user, command, opts...))
	}
	path := func(p string) fakediscord.Option { return fakediscord.Option{Name: "path", Type: 3, Value: p} }
	for _, bad := range []string{"../" + filepath.Base(secret), "escape", secret, "missing"} {
		if got := ask("project", path(bad)); !strings.HasPrefix(got, "Not changed:") || strings.Contains(got, secret) {
			t.Errorf("/project %s = %q, want a refusal that names no server path", bad, got)
		}
	}
	if got := ask("project", path("app")); got != "This channel now works in `app`." {
		t.Fatalf("/project app = %q", got)
	}
	if got := ask("model", fakediscord.Option{Name: "name", Type: 3, Value: "claude-test-9"}); !strings.Contains(got, "claude-test-9") {
		t.Fatalf("/model = %q", got)
	}
	if got := ask("system-prompt", fakediscord.Option{Name: "text", Type: 3, Value: "Answer like a pirate."}); !strings.HasPrefix(got, "This channel's instructions are set") {
		t.Fatalf("/system-prompt = %q", got)
	}

	prompt := h.mention(h.channel, "LOG:"+logs+" hang here")
	h.fd.Wait(t, "the CLI's pid", waitLong, func() bool { _, err := os.Stat(filepath.Join(logs, "cwd")); return err == nil })
	pid := readTrace(t, logs, "pid")
	if cwd, err := os.Readlink("/proc/" + pid + "/cwd"); err != nil || cwd != app {
		t.Errorf("/proc/%s/cwd = %q, %v; want %q", pid, cwd, err, app)
	}
	args := readTrace(t, logs, "args")
	for _, want := range []string{"--add-dir\n" + h.cfg.ConfigDir, "--model\nclaude-test-9"} {
		if !strings.Contains(args, want) {
			t.Errorf("arguments lack %q:\n%s", want, args)
		}
	}
	system := readTrace(t, logs, "system")
	if !strings.Contains(system, "## Channel Instructions\n\nAnswer like a pirate.") || !strings.Contains(system, filepath.Join(h.cfg.ConfigDir, "memory.md")) {
		t.Errorf("system prompt lacks the channel's instructions or memory.md's path:\n%s", system)
	}
	status := ask("status")
	for _, want := range []string{"Project: `app`", "`claude-test-9`", "Running: a prompt", "Channel instructions: 21 characters"} {
		if !strings.Contains(status, want) {
			t.Errorf("/status lacks %q:\n%s", want, status)
		}
	}
	if strings.Contains(status, root) {
		t.Errorf("/status names a server path:\n%s", status)
	}
	// Stopped once the CLI has named its session, which is kept.
	h.fd.Wait(t, "the session bound", waitLong, func() bool { id, ok := h.sessionBinding(); return ok && id == "s-card" })
	h.fd.React(h.channel, prompt.ID, h.user, "🛑")
	h.fd.Wait(t, "the stopped turn", waitLong, func() bool { return strings.Contains(h.logs.String(), "stopped on request") })

	// With a session, switching asks; Keep keeps the session.
	id := h.fd.InteractOptions(h.channel, h.user, "project", path("other"))
	question := h.answer(id)
	if !strings.Contains(question, "keep the conversation") {
		t.Fatalf("/project other with a session = %q", question)
	}
	var q fakediscord.Message
	for _, a := range h.fd.Answers() {
		if a.Interaction == id && a.Original {
			q = a
		}
	}
	if len(q.Buttons()) != 2 {
		t.Fatalf("question buttons = %v", q.Buttons())
	}
	if s := h.sessions().Settings(h.channel.String()); s.Project != app || s.Model != "claude-test-9" {
		t.Fatalf("settings before the answer = %+v", s)
	}
	refused := h.fd.Press(h.channel, q.ID, stranger(h), q.Buttons()[0].ID, 0)
	h.fd.Wait(t, "the stranger refused", waitLong, func() bool { return len(h.fd.Callbacks(refused)) == 1 })
	if cb := h.fd.Callbacks(refused); cb[0] != 4 {
		t.Fatalf("a stranger's answer to the question got callback %v, want an ephemeral refusal", cb)
	}
	press := h.fd.Press(h.channel, q.ID, h.user, q.Buttons()[0].ID, 0)
	h.fd.Wait(t, "the keep answer", waitLong, func() bool { return len(h.fd.Callbacks(press)) == 1 })
	other := filepath.Join(root, "other")
	if s := h.sessions().Settings(h.channel.String()); s.Project != other {
		t.Fatalf("project after Keep = %q, want %q", s.Project, other)
	}
	if id, ok := h.sessionBinding(); !ok || id != "s-card" {
		t.Fatalf("session after Keep = %q, %v", id, ok)
	}
	// The next run resumes the kept session in the new directory.
	h.mention(h.channel, "LOG:"+logs+" continue")
	h.fd.Wait(t, "the run in the new project", waitLong, func() bool { _, err := os.Stat(filepath.Join(logs, "run1")); return err == nil })
	h.fd.Wait(t, "its cwd", waitLong, func() bool {
		data, _ := os.ReadFile(filepath.Join(logs, "cwd"))
		return strings.TrimSpace(string(data)) == other
	})
	if args := readTrace(t, logs, "args"); !strings.Contains(args, "--resume\ns-card") {
		t.Errorf("run after Keep lacks --resume s-card:\n%s", args)
	}
}

func stranger(h *harness) discord.User { return h.fd.User("mallory") }

// The ledger records each turn, /cost sums it, and with a channel budget
// used up the next prompt is refused with a notice and a Lift button that
// only approvers may press; lifted, prompts run again.
func TestCostLedgerAndBudget(t *testing.T) {
	h := startGateway(t, harnessOptions{
		env: map[string]string{config.EnvChannelBudget: "1"},
		respond: func(ctx context.Context, req backends.Request, emit func(backends.Event)) (backends.Result, error) {
			return backends.Result{SessionID: "s", Text: "done " + req.Prompt, CostUSD: 0.6}, nil
		},
		setup: func(h *harness) map[string]string {
			return map[string]string{config.EnvApproverIDs: h.user.ID.String()}
		},
	})
	h.mention(h.channel, "one")
	h.waitReplies(h.channel, 1)
	h.mention(h.channel, "two")
	h.waitReplies(h.channel, 2)
	got := h.answer(h.fd.Interact(h.channel, h.user, "cost", nil))
	if os.Getenv("GATEWAY_E2E_WORKER") == "1" {
		// The turn ran on a worker, whose ledger record reaches this
		// process through the stream, a moment after the answer may.
		deadline := time.Now().Add(waitLong)
		for !strings.Contains(got, "Today: **$1.20**") && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
			got = h.answer(h.fd.Interact(h.channel, h.user, "cost", nil))
		}
	}
	if !strings.Contains(got, "Today: **$1.20**") {
		t.Errorf("/cost = %q, want $1.20 today", got)
	}
	h.mention(h.channel, "three")
	msgs := h.waitReplies(h.channel, 4)
	var notice, lift fakediscord.Message
	for _, m := range msgs[2:] {
		switch {
		case strings.HasPrefix(m.Content, "Not run:"):
			notice = m
		case len(m.Buttons()) == 1:
			lift = m
		}
	}
	if !strings.Contains(notice.Content, "daily budget of $1.00 is used up") || lift.ID == 0 {
		t.Fatalf("refusal = %q, lift message = %q", notice.Content, lift.Content)
	}
	if n := len(h.backend.Requests()); n != 2 {
		t.Errorf("%d runs, want 2: the third was over budget", n)
	}
	stranger := h.fd.User("mallory")
	refused := h.fd.Press(h.channel, lift.ID, stranger, lift.Buttons()[0].ID, 0)
	h.fd.Wait(t, "the refusal", waitLong, func() bool { return len(h.fd.Callbacks(refused)) == 1 })
	h.fd.Press(h.channel, lift.ID, h.user, lift.Buttons()[0].ID, 0)
	h.fd.Wait(t, "the lift", waitLong, func() bool {
		m, _ := h.fd.Message(h.channel, lift.ID)
		return strings.HasPrefix(m.Content, "Budget lifted")
	})
	h.mention(h.channel, "four")
	h.fd.Wait(t, "the fourth answer", waitLong, func() bool {
		for _, m := range h.fd.BotMessages(h.channel) {
			if m.Content == "done four" {
				return true
			}
		}
		return false
	})
	var gw, ch float64
	h.fd.Wait(t, "three turns in the ledger on disk", waitLong, func() bool {
		ledger, err := cost.Open(filepath.Join(h.cfg.ConfigDir, cost.FileName), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ledger.Close()
		gw, ch = ledger.Spent(time.Now(), h.channel.String())
		return gw > 1.79 && ch > 1.79
	})
}

// sessions reads the session store as it is on disk.
func (h *harness) sessions() *session.Store {
	store, _, err := session.Open(filepath.Join(h.cfg.ConfigDir, session.FileName))
	if err != nil {
		h.t.Fatal(err)
	}
	return store
}

// A /claude turn shows its card in the command's own response; the answer
// comes as a follow-up, and the response ends as the receipt.
func TestTurnCardInASlashCommandResponse(t *testing.T) {
	release := make(chan struct{})
	h := startGateway(t, harnessOptions{
		cardEvery: 50 * time.Millisecond,
		env:       map[string]string{config.EnvTurnCard: config.TurnCardReceipt},
		respond: func(ctx context.Context, req backends.Request, emit func(backends.Event)) (backends.Result, error) {
			emit(backends.Event{Kind: backends.EventToolUse, Tool: &backends.ToolCall{ID: "1", Name: "Grep", Input: `{"pattern":"TODO"}`}})
			<-release
			emit(backends.Event{Kind: backends.EventToolResult, Tool: &backends.ToolCall{ID: "1"}})
			return backends.Result{SessionID: "s", Text: "Found 3 TODOs.", CostUSD: 0.02}, nil
		},
	})
	id := h.fd.Interact(h.channel, h.user, "claude", map[string]string{"prompt": "find todos"})
	h.fd.Wait(t, "the card in the response", waitLong, func() bool {
		for _, a := range h.fd.Answers() {
			if a.Interaction == id && a.Original && strings.Contains(a.Content, "`Grep` `TODO`") && len(a.Buttons()) == 2 {
				return true
			}
		}
		return false
	})
	close(release)
	h.fd.Wait(t, "the answer and the receipt", waitLong, func() bool {
		var answered, receipt bool
		for _, a := range h.fd.Answers() {
			if a.Interaction != id {
				continue
			}
			answered = answered || (!a.Original && a.Content == "Found 3 TODOs.")
			receipt = receipt || (a.Original && strings.HasPrefix(a.Content, "✅ Done") && strings.Contains(a.Content, "1 tool") && len(a.Buttons()) == 0)
		}
		return answered && receipt
	})
}

// TURN_CARD=delete removes the card once the answer is posted.
func TestTurnCardDeletedAfterTheAnswer(t *testing.T) {
	release := make(chan struct{})
	h := startGateway(t, harnessOptions{
		env: map[string]string{config.EnvTurnCard: config.TurnCardDelete},
		respond: func(ctx context.Context, req backends.Request, emit func(backends.Event)) (backends.Result, error) {
			emit(backends.Event{Kind: backends.EventToolUse, Tool: &backends.ToolCall{ID: "1", Name: "Bash", Input: `{"command":"ls"}`}})
			<-release
			emit(backends.Event{Kind: backends.EventToolResult, Tool: &backends.ToolCall{ID: "1"}})
			return backends.Result{SessionID: "s", Text: "Listed."}, nil
		},
	})
	prompt := h.mention(h.channel, "list")
	var card fakediscord.Message
	h.fd.Wait(t, "the card", waitLong, func() bool {
		var ok bool
		card, ok = h.card(h.channel, prompt.ID)
		return ok
	})
	close(release)
	h.fd.Wait(t, "the card deleted after the answer", waitLong, func() bool { return len(h.fd.Deleted(h.channel)) == 1 })
	if d := h.fd.Deleted(h.channel); d[0] != card.ID {
		t.Errorf("deleted %v, want the card %v", d, card.ID)
	}
	msgs := h.fd.BotMessages(h.channel)
	if len(msgs) != 1 || msgs[0].Content != "Listed." {
		t.Fatalf("messages left = %+v, want the answer alone", msgs)
	}
}

// A shutdown that does not wait leaves no card saying "Working": it says
// the prompt runs again after the restart.
func TestTurnCardOfAnInterruptedTurn(t *testing.T) {
	started := make(chan string, 10)
	signals := make(chan os.Signal, 1)
	h := startGateway(t, harnessOptions{respond: blockOn(started), signals: signals, cardDelay: 10 * time.Millisecond,
		env: map[string]string{config.EnvTurnCard: config.TurnCardReceipt}})
	prompt := h.mention(h.channel, "forever")
	<-started
	var cardMsg fakediscord.Message
	h.fd.Wait(t, "the card", waitLong, func() bool {
		var ok bool
		cardMsg, ok = h.card(h.channel, prompt.ID)
		return ok && len(cardMsg.Buttons()) == 2
	})
	h.cancel()
	h.fd.Wait(t, "the drain", waitLong, func() bool { return strings.Contains(h.logs.String(), "shutting down") })
	signals <- syscall.SIGTERM
	t.Cleanup(func() {
		if t.Failed() {
			m, _ := h.fd.Message(h.channel, cardMsg.ID)
			t.Logf("card: %q\nlogs:\n%s", m.Content, h.logs.String())
		}
	})
	h.fd.Wait(t, "the card to say interrupted", waitLong, func() bool {
		m, _ := h.fd.Message(h.channel, cardMsg.ID)
		return strings.HasPrefix(m.Content, "⏸️ Interrupted by a gateway restart") && len(m.Buttons()) == 0
	})
}

// A CLI retrying a failing model API call is on the card as it happens.
func TestTurnCardShowsAPIRetries(t *testing.T) {
	release := make(chan struct{})
	h := startGateway(t, harnessOptions{
		cardDelay: 10 * time.Millisecond, cardEvery: 20 * time.Millisecond,
		env: map[string]string{config.EnvTurnCard: config.TurnCardReceipt},
		respond: func(ctx context.Context, req backends.Request, emit func(backends.Event)) (backends.Result, error) {
			emit(backends.Event{Kind: backends.EventRetry, Attempt: 2, MaxAttempts: 10,
				Err: &backends.Error{Kind: backends.KindAuth, Status: 401}})
			<-release
			return backends.Result{}, &backends.Error{Kind: backends.KindAuth, Status: 401, Message: "the model API refused the credentials"}
		},
	})
	prompt := h.mention(h.channel, "hello")
	h.fd.Wait(t, "the retry on the card", waitLong, func() bool {
		m, ok := h.card(h.channel, prompt.ID)
		return ok && strings.Contains(m.Content, "🔁 retrying the model API (attempt 2 of 10): HTTP 401 authentication failed")
	})
	close(release)
	h.fd.Wait(t, "the failed receipt", waitLong, func() bool {
		m, _ := h.card(h.channel, prompt.ID)
		return strings.HasPrefix(m.Content, "❌ Failed after")
	})
}
