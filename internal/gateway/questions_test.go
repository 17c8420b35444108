package gateway

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/diamondburned/arikawa/v3/discord"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/fakediscord"
)

// questionsClaude stands in for claude -p --input-format stream-json
// --permission-prompt-tool stdio, driven through the real claude adapter,
// with the control requests claude 2.1.330 sends for AskUserQuestion and
// ExitPlanMode (testdata/claude/ask_user_question.txt,
// exit_plan_mode.txt). A prompt with "colour" asks a single-choice
// question, "extras" a multiple-choice one, "plan" for a plan's approval
// (with the plan in the input, as the model writes it; 2.1.330 passes an
// empty input and keeps the plan in a file). Once the control_response is
// read, the result says what came back. Every line read from stdin is
// appended to @LOG@, and each start's arguments to @LOG@.args.
const questionsClaude = `#!/bin/sh
log=@LOG@
printf '%s\n' "$*" >> "$log.args"
while IFS= read -r line; do
	printf '%s\n' "$line" >> "$log"
	case "$line" in
	*'"subtype":"interrupt"'*)
		echo '{"type":"control_response","response":{"subtype":"success","request_id":"gw-interrupt","response":{"still_queued":[]}}}'
		echo '{"type":"result","subtype":"error_during_execution","is_error":true,"session_id":"s-q","total_cost_usd":0.01,"num_turns":1}'
		continue
		;;
	*'"type":"user"'*) ;;
	*) continue ;;
	esac
	write=
	case "$line" in
	*planfile*)
		tool=ExitPlanMode
		input='{}'
		mkdir -p @PLANS@
		printf '# Plan from the file\n\n1. Write hello.txt\n' > @PLANS@/from-file.md
		write=@PLANS@/from-file.md
		;;
	*planlink*)
		tool=ExitPlanMode
		input='{}'
		mkdir -p @PLANS@
		ln -sf @PLANS@/../../secret.txt @PLANS@/linked.md
		write=@PLANS@/linked.md
		;;
	*colour*)
		tool=AskUserQuestion
		input='{"questions":[{"question":"Which colour should the button be?","header":"Colour","options":[{"label":"Blue","description":"Matches the logo"},{"label":"Green","description":"Reads as go"}],"multiSelect":false}]}'
		;;
	*two\ questions*)
		tool=AskUserQuestion
		input='{"questions":[{"question":"Which colour should the button be?","header":"Colour","options":[{"label":"Blue","description":"Matches the logo"},{"label":"Green","description":"Reads as go"}],"multiSelect":false},{"question":"What should I add?","header":"Extras","options":[{"label":"Tests","description":"Unit tests"},{"label":"Docs","description":"A README section"},{"label":"Benchmarks","description":"A benchmark"}],"multiSelect":true}]}'
		;;
	*extras*)
		tool=AskUserQuestion
		input='{"questions":[{"question":"What should I add?","header":"Extras","options":[{"label":"Tests","description":"Unit tests"},{"label":"Docs","description":"A README section"},{"label":"Benchmarks","description":"A benchmark"}],"multiSelect":true}]}'
		;;
	*plan*)
		tool=ExitPlanMode
		input='{"plan":"# Plan\n\n1. Write hello.txt\n2. Say done."}'
		;;
	*) continue ;;
	esac
	echo '{"type":"system","subtype":"init","cwd":"/w","session_id":"s-q","tools":["AskUserQuestion","ExitPlanMode"],"model":"fake"}'
	if [ -n "$write" ]; then
		printf '{"type":"assistant","session_id":"s-q","message":{"id":"m0","role":"assistant","content":[{"type":"tool_use","id":"toolu_0","name":"Write","input":{"file_path":"%s","content":"plan"}}]}}\n' "$write"
	fi
	printf '{"type":"assistant","session_id":"s-q","message":{"id":"m1","role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"%s","input":%s}]}}\n' "$tool" "$input"
	printf '{"type":"control_request","request_id":"perm-1","request":{"subtype":"can_use_tool","tool_name":"%s","display_name":"%s","input":%s,"tool_use_id":"toolu_1","requires_user_interaction":true}}\n' "$tool" "$tool" "$input"
	IFS= read -r line || exit 0
	printf '%s\n' "$line" >> "$log"
	case "$line" in
	*'"setMode"'*)
		echo '{"type":"system","subtype":"status","status":null,"permissionMode":"acceptEdits","session_id":"s-q"}'
		text='Carrying out the plan.'
		;;
	*'"answers":{}'*) text='Nobody answered; going on.' ;;
	*'"behavior":"allow"'*'"answers"'*) text='Thanks for the answer.' ;;
	*'"behavior":"deny"'*) text='Revising the plan.' ;;
	*) text='No answer I understand.' ;;
	esac
	printf '{"type":"result","subtype":"success","is_error":false,"result":"%s","session_id":"s-q","total_cost_usd":0.01,"num_turns":2}\n' "$text"
done
`

func startQuestionsGateway(t *testing.T, o harnessOptions) *approvalHarness {
	t.Helper()
	dir := t.TempDir()
	stdin := filepath.Join(dir, "stdin.log")
	script := filepath.Join(dir, "claude")
	plans := filepath.Join(dir, "home", ".claude", "plans")
	text := strings.NewReplacer("@LOG@", "'"+stdin+"'", "@PLANS@", "'"+plans+"'").Replace(questionsClaude)
	if err := os.WriteFile(script, []byte(text), 0o755); err != nil {
		t.Fatal(err)
	}
	claude, err := backends.New(config.BackendClaude, backends.Options{
		Binary: script, Env: os.Environ(),
		Warm: backends.WarmOptions{Interactive: true, KeepAlive: time.Hour, MaxProcesses: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	o.backend = claude
	return watchApprovals(t, startGateway(t, o), stdin)
}

// waitAsk waits for the bot's message in ch whose content has want and
// that carries controls.
func (h *approvalHarness) waitAsk(ch discord.ChannelID, want string) fakediscord.Message {
	h.t.Helper()
	var ask fakediscord.Message
	h.fd.Wait(h.t, "the message asking "+want, waitLong, func() bool {
		for _, m := range h.fd.BotMessages(ch) {
			if strings.Contains(m.Content, want) && (len(m.Buttons()) > 0 || len(m.Selects()) > 0) {
				ask = m
				return true
			}
		}
		return false
	})
	return ask
}

// waitMessageSays waits until message id in ch has no controls and its
// content starts with prefix.
func (h *approvalHarness) waitMessageSays(ch discord.ChannelID, id discord.MessageID, prefix string) fakediscord.Message {
	h.t.Helper()
	var got fakediscord.Message
	h.fd.Wait(h.t, "the message to say "+prefix, waitLong, func() bool {
		got, _ = h.fd.Message(ch, id)
		return len(got.Buttons()) == 0 && len(got.Selects()) == 0 && strings.HasPrefix(got.Content, prefix)
	})
	return got
}

// answersSent is the "answers" of the one control_response the CLI read,
// checking it is an allow whose input is the question's plus them.
func (h *approvalHarness) answersSent() map[string]string {
	h.t.Helper()
	r := h.onlyAnswer().Response.Response
	var in struct {
		Questions []json.RawMessage `json:"questions"`
		Answers   map[string]string `json:"answers"`
	}
	if r.Behavior != "allow" || json.Unmarshal(r.UpdatedInput, &in) != nil || len(in.Questions) == 0 || in.Answers == nil {
		h.t.Fatalf("the CLI's answer = %+v %s, want allow with the questions and answers", r, r.UpdatedInput)
	}
	return in.Answers
}

func labels(m fakediscord.Message) string {
	var out []string
	for _, b := range m.Buttons() {
		out = append(out, b.Label)
	}
	return strings.Join(out, "|")
}

func TestQuestionAnsweredByATap(t *testing.T) {
	var stranger discord.User
	h := startQuestionsGateway(t, harnessOptions{setup: func(h *harness) map[string]string {
		stranger = h.fd.User("mallory")
		return nil
	}})
	prompt := h.mention(h.channel, "pick a colour for the button")
	ask := h.waitAsk(h.channel, "Which colour should the button be?")
	if ask.Reference == nil || ask.Reference.MessageID != prompt.ID {
		t.Errorf("the question is not a reply to the prompt: %+v", ask.Reference)
	}
	for _, want := range []string{"❓ <@" + h.user.ID.String() + ">, the agent has a question:", "1. Blue — Matches the logo", "2. Green — Reads as go", "within 10m 00s"} {
		if !strings.Contains(ask.Content, want) {
			t.Errorf("question message does not say %q:\n%s", want, ask.Content)
		}
	}
	if got := labels(ask); got != "Blue|Green|Other…" {
		t.Errorf("buttons = %q, want Blue|Green|Other…", got)
	}

	// A stranger is told privately; nothing changes.
	h.fd.Press(h.channel, ask.ID, stranger, button(t, ask, "Green"), discord.PermissionAdministrator)
	h.fd.Wait(t, "the refusal", waitLong, func() bool {
		return slices.ContainsFunc(h.fd.Answers(), func(a fakediscord.Message) bool {
			return a.Ephemeral && strings.Contains(a.Content, "Only the person who asked")
		})
	})
	if m, _ := h.fd.Message(h.channel, ask.ID); m.Edited || len(h.answers()) != 0 {
		t.Fatalf("a stranger's press was taken: %q, %d answers", m.Content, len(h.answers()))
	}

	h.fd.Press(h.channel, ask.ID, h.user, button(t, ask, "Blue"), 0)
	m := h.waitMessageSays(h.channel, ask.ID, "✅ Answered by <@"+h.user.ID.String()+">:")
	if !strings.Contains(m.Content, "→ Blue") {
		t.Errorf("answered message = %q, want the answer", m.Content)
	}
	reply := h.waitReplyOtherThan(h.channel, ask.ID)
	if reply.Content != "Thanks for the answer." {
		t.Errorf("reply = %q: the turn did not go on with the answer", reply.Content)
	}
	if got := h.answersSent(); len(got) != 1 || got["Which colour should the button be?"] != "Blue" {
		t.Errorf("answers = %v, want the question answered Blue", got)
	}
}

func TestQuestionMultipleChoiceBySelect(t *testing.T) {
	h := startQuestionsGateway(t, harnessOptions{})
	h.mention(h.channel, "what extras should you add")
	ask := h.waitAsk(h.channel, "What should I add?")
	sels := ask.Selects()
	if len(sels) != 1 || len(ask.Buttons()) != 0 {
		t.Fatalf("controls = %+v / %+v, want one select menu", sels, ask.Buttons())
	}
	var opts []string
	for _, o := range sels[0].Options {
		opts = append(opts, o.Label+"="+o.Value)
	}
	if got := strings.Join(opts, "|"); got != "Tests=0|Docs=1|Benchmarks=2|Other…=other" || sels[0].Min != 1 || sels[0].Max != 4 {
		t.Errorf("select = %s (%d-%d), want the options, Other… and 1-4", got, sels[0].Min, sels[0].Max)
	}
	if _, err := h.fd.ChooseOptions(h.channel, ask.ID, h.user, sels[0].ID, "0", "1"); err != nil {
		t.Fatal(err)
	}
	m := h.waitMessageSays(h.channel, ask.ID, "✅ Answered")
	if !strings.Contains(m.Content, "→ Tests, Docs") {
		t.Errorf("answered message = %q", m.Content)
	}
	h.waitReplyOtherThan(h.channel, ask.ID)
	// Several labels go back joined with ", ", as the CLI takes them.
	if got := h.answersSent(); got["What should I add?"] != "Tests, Docs" {
		t.Errorf("answers = %v, want Tests, Docs", got)
	}
}

func TestQuestionAnsweredWithOther(t *testing.T) {
	h := startQuestionsGateway(t, harnessOptions{})
	h.mention(h.channel, "pick a colour for the button")
	ask := h.waitAsk(h.channel, "Which colour")
	in := h.fd.Press(h.channel, ask.ID, h.user, button(t, ask, "Other…"), 0)
	var form fakediscord.Modal
	h.fd.Wait(t, "the form", waitLong, func() bool {
		var ok bool
		form, ok = h.fd.ModalOpened(in)
		return ok
	})
	if len(form.Fields) != 1 || !form.Fields[0].Required {
		t.Fatalf("form = %+v, want one required text field", form)
	}
	if len(h.answers()) != 0 {
		t.Fatal("opening the form answered the CLI")
	}
	if _, err := h.fd.SubmitModal(h.user, form.ID, map[string]string{form.Fields[0].ID: "Purple, like the old one"}); err != nil {
		t.Fatal(err)
	}
	m := h.waitMessageSays(h.channel, ask.ID, "✅ Answered")
	if !strings.Contains(m.Content, "→ Purple, like the old one") {
		t.Errorf("answered message = %q", m.Content)
	}
	h.waitReplyOtherThan(h.channel, ask.ID)
	if got := h.answersSent(); got["Which colour should the button be?"] != "Purple, like the old one" {
		t.Errorf("answers = %v, want the typed answer", got)
	}
}

// The bot's clock is not the harness's, so the timeout is a short real
// one, as in TestApprovalTimesOut; nothing sleeps.
func TestQuestionTimesOut(t *testing.T) {
	h := startQuestionsGateway(t, harnessOptions{env: map[string]string{config.EnvApprovalTimeout: "1s"}})
	h.mention(h.channel, "pick a colour for the button")
	ask := h.waitAsk(h.channel, "Which colour")
	m := h.waitMessageSays(h.channel, ask.ID, "⌛ Nobody answered in time")
	if !strings.Contains(m.Content, "→ (no answer)") {
		t.Errorf("timed-out message = %q", m.Content)
	}
	reply := h.waitReplyOtherThan(h.channel, ask.ID)
	if reply.Content != "Nobody answered; going on." {
		t.Errorf("reply = %q", reply.Content)
	}
	// No answers: the CLI tells the model "The user did not answer the
	// questions." (testdata/claude/ask_user_question.txt, unanswered).
	if got := h.answersSent(); len(got) != 0 {
		t.Errorf("answers = %v, want none", got)
	}
}

func TestPlanApproved(t *testing.T) {
	h := startQuestionsGateway(t, harnessOptions{})
	prompt := h.mention(h.channel, "make a plan for hello.txt")
	ask := h.waitAsk(h.channel, "the agent has a plan")
	if ask.Reference == nil || ask.Reference.MessageID != prompt.ID {
		t.Errorf("the plan is not a reply to the prompt: %+v", ask.Reference)
	}
	if !strings.Contains(ask.Content, "> 1. Write hello.txt") || labels(ask) != "Approve|Keep planning…" {
		t.Errorf("plan message = %q %q", ask.Content, labels(ask))
	}
	h.fd.Press(h.channel, ask.ID, h.user, button(t, ask, "Approve"), 0)
	h.waitMessageSays(h.channel, ask.ID, "✅ Plan approved by <@"+h.user.ID.String()+">")
	reply := h.waitReplyOtherThan(h.channel, ask.ID)
	if reply.Content != "Carrying out the plan." {
		t.Errorf("reply = %q: the turn did not go on", reply.Content)
	}
	r := h.onlyAnswer().Response.Response
	var perms []map[string]string
	if r.Behavior != "allow" || json.Unmarshal(r.UpdatedPermissions, &perms) != nil || len(perms) != 1 ||
		perms[0]["type"] != "setMode" || perms[0]["mode"] != "acceptEdits" || perms[0]["destination"] != "session" {
		t.Errorf("the CLI's answer = %+v %s, want allow switching the session to acceptEdits", r, r.UpdatedPermissions)
	}
}

// claude 2.1.330 sends ExitPlanMode with an empty input and the plan in
// the file the model wrote: the plan message shows that file.
func TestPlanFromThePlanFile(t *testing.T) {
	h := startQuestionsGateway(t, harnessOptions{})
	h.mention(h.channel, "planfile please")
	ask := h.waitAsk(h.channel, "the agent has a plan")
	if !strings.Contains(ask.Content, "1. Write hello.txt") {
		t.Errorf("plan message = %q, want the plan file's text", ask.Content)
	}
}

// A plan file that is a link is not followed: the agent chose the path,
// and a link could lead to the gateway's own files. The user is told the
// plan could not be shown, and what the link points at is never posted.
func TestPlanFileThroughALinkIsNotRead(t *testing.T) {
	h := startQuestionsGateway(t, harnessOptions{})
	const marker = "CONTENT-BEHIND-THE-LINK"
	secret := filepath.Join(filepath.Dir(h.stdin), "home", "secret.txt")
	if err := os.MkdirAll(filepath.Dir(secret), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secret, []byte(marker+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h.mention(h.channel, "planlink please")
	ask := h.waitAsk(h.channel, "the agent has a plan")
	for _, r := range h.fd.Requests() {
		if strings.Contains(string(r.Body), marker) {
			t.Fatalf("what the plan file links to reached Discord: %s %s", r.Path, r.Body)
		}
	}
	if strings.Contains(ask.Content, marker) {
		t.Errorf("plan message = %q", ask.Content)
	}
}

func TestPlanSentBackWithANote(t *testing.T) {
	h := startQuestionsGateway(t, harnessOptions{})
	h.mention(h.channel, "make a plan for hello.txt")
	ask := h.waitAsk(h.channel, "the agent has a plan")
	in := h.fd.Press(h.channel, ask.ID, h.user, button(t, ask, "Keep planning…"), 0)
	var form fakediscord.Modal
	h.fd.Wait(t, "the form", waitLong, func() bool {
		var ok bool
		form, ok = h.fd.ModalOpened(in)
		return ok
	})
	if _, err := h.fd.SubmitModal(h.user, form.ID, map[string]string{form.Fields[0].ID: "Add a step that tests it."}); err != nil {
		t.Fatal(err)
	}
	m := h.waitMessageSays(h.channel, ask.ID, "📝 Sent back by <@"+h.user.ID.String()+">")
	if !strings.Contains(m.Content, "Note: Add a step that tests it.") {
		t.Errorf("sent-back message = %q", m.Content)
	}
	if reply := h.waitReplyOtherThan(h.channel, ask.ID); reply.Content != "Revising the plan." {
		t.Errorf("reply = %q", reply.Content)
	}
	r := h.onlyAnswer().Response.Response
	if r.Behavior != "deny" || !strings.Contains(r.Message, "Add a step that tests it.") || r.Interrupt == nil || *r.Interrupt {
		t.Errorf("the CLI's answer = %+v, want deny with the note, not interrupting", r)
	}
}

// spawns are the command lines the stand-in was started with.
func (h *approvalHarness) spawns() []string {
	b, _ := os.ReadFile(h.stdin + ".args")
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func TestPlanCommandWithAPrompt(t *testing.T) {
	h := startQuestionsGateway(t, harnessOptions{})
	in := h.fd.Interact(h.channel, h.user, "plan", map[string]string{"prompt": "make a plan for hello.txt"})
	h.fd.Wait(t, "the answer to /plan", waitLong, func() bool {
		return slices.ContainsFunc(h.fd.Answers(), func(a fakediscord.Message) bool {
			return a.Interaction == in && strings.HasPrefix(a.Content, "📋 Planning") && strings.Contains(a.Content, "> make a plan for hello.txt")
		})
	})
	ask := h.waitAsk(h.channel, "the agent has a plan")
	if got := h.spawns(); len(got) != 1 || !strings.Contains(got[0], "--permission-mode plan") {
		t.Errorf("claude started with %q, want plan mode", got)
	}
	h.fd.Press(h.channel, ask.ID, h.user, button(t, ask, "Approve"), 0)
	h.waitMessageSays(h.channel, ask.ID, "✅ Plan approved")
	h.fd.Wait(t, "the answer", waitLong, func() bool {
		return slices.ContainsFunc(h.fd.BotMessages(h.channel), func(m fakediscord.Message) bool { return m.Content == "Carrying out the plan." })
	})
}

func TestPlanCommandMarksTheNextPrompt(t *testing.T) {
	h := startQuestionsGateway(t, harnessOptions{})
	if got := h.command(h.channel, "plan"); !strings.Contains(got.Content, "The next prompt in this channel runs in plan mode") {
		t.Errorf("/plan answered %q", got.Content)
	}
	h.mention(h.channel, "pick a colour for the button")
	ask := h.waitAsk(h.channel, "Which colour")
	h.fd.Press(h.channel, ask.ID, h.user, button(t, ask, "Green"), 0)
	first := h.waitReplyOtherThan(h.channel, ask.ID)

	// Only the next prompt: the one after runs in the gateway's mode.
	h.mention(h.channel, "make a plan for hello.txt")
	plan := h.waitAsk(h.channel, "the agent has a plan")
	got := h.spawns()
	if len(got) != 2 || !strings.Contains(got[0], "--permission-mode plan") || strings.Contains(got[1], "--permission-mode plan") {
		t.Errorf("claude started with %q, want plan mode the first time only", got)
	}
	h.fd.Press(h.channel, plan.ID, h.user, button(t, plan, "Approve"), 0)
	h.waitReplyOtherThan(h.channel, ask.ID, first.ID, plan.ID)
}

// Two questions in one call: each answer shows as it comes and takes its
// question's controls away; the last one answers the tool with both. A
// select menu's Other… opens the form too.
func TestQuestionsAnsweredOneByOne(t *testing.T) {
	h := startQuestionsGateway(t, harnessOptions{})
	h.mention(h.channel, "ask me two questions")
	ask := h.waitAsk(h.channel, "the agent has 2 questions:")
	if got := labels(ask); got != "Blue|Green|Other…" || len(ask.Selects()) != 1 {
		t.Fatalf("controls = %q and %d select menus, want the colour's buttons and the extras' menu", got, len(ask.Selects()))
	}
	h.fd.Press(h.channel, ask.ID, h.user, button(t, ask, "Green"), 0)
	var m fakediscord.Message
	h.fd.Wait(t, "the first answer shown", waitLong, func() bool {
		m, _ = h.fd.Message(h.channel, ask.ID)
		return strings.Contains(m.Content, "→ Green") && len(m.Buttons()) == 0 && len(m.Selects()) == 1
	})
	if !strings.HasPrefix(m.Content, "❓") || len(h.answers()) != 0 {
		t.Fatalf("after one answer of two: %q, %d answers to the CLI", m.Content, len(h.answers()))
	}
	in, err := h.fd.ChooseOptions(h.channel, ask.ID, h.user, m.Selects()[0].ID, "other")
	if err != nil {
		t.Fatal(err)
	}
	var form fakediscord.Modal
	h.fd.Wait(t, "the form", waitLong, func() bool {
		var ok bool
		form, ok = h.fd.ModalOpened(in)
		return ok
	})
	if _, err := h.fd.SubmitModal(h.user, form.ID, map[string]string{form.Fields[0].ID: "A changelog entry"}); err != nil {
		t.Fatal(err)
	}
	done := h.waitMessageSays(h.channel, ask.ID, "✅ Answered")
	if !strings.Contains(done.Content, "→ Green") || !strings.Contains(done.Content, "→ A changelog entry") {
		t.Errorf("answered message = %q", done.Content)
	}
	h.waitReplyOtherThan(h.channel, ask.ID)
	got := h.answersSent()
	if len(got) != 2 || got["Which colour should the button be?"] != "Green" || got["What should I add?"] != "A changelog entry" {
		t.Errorf("answers = %v", got)
	}
}

// A process whose mode an approved plan switched is not kept: the next
// /plan prompt starts one in plan mode again.
func TestPlanApprovedProcessNotReused(t *testing.T) {
	h := startQuestionsGateway(t, harnessOptions{})
	var asks []discord.MessageID
	for i := range 2 {
		h.fd.Interact(h.channel, h.user, "plan", map[string]string{"prompt": "make a plan for hello.txt"})
		var ask fakediscord.Message
		h.fd.Wait(t, "a new plan", waitLong, func() bool {
			for _, m := range h.fd.BotMessages(h.channel) {
				if strings.Contains(m.Content, "the agent has a plan") && len(m.Buttons()) > 0 && !slices.Contains(asks, m.ID) {
					ask = m
					return true
				}
			}
			return false
		})
		asks = append(asks, ask.ID)
		h.fd.Press(h.channel, ask.ID, h.user, button(t, ask, "Approve"), 0)
		h.fd.Wait(t, "the answer", waitLong, func() bool {
			n := 0
			for _, m := range h.fd.BotMessages(h.channel) {
				if m.Content == "Carrying out the plan." {
					n++
				}
			}
			return n == i+1
		})
	}
	if got := h.spawns(); len(got) != 2 || !strings.Contains(got[1], "--permission-mode plan") {
		t.Errorf("claude started %d times (%q), want a fresh plan-mode process for the second /plan", len(got), got)
	}
}
