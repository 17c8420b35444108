package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/jonboulle/clockwork"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/config"
	gwdiscord "github.com/agentgateway/gateway/internal/discord"
	"github.com/agentgateway/gateway/internal/fakediscord"
	"github.com/agentgateway/gateway/internal/queue"
)

// approvalClaude stands in for claude -p --input-format stream-json
// --permission-prompt-tool stdio (testdata/claude/interactive.txt), driven
// through the real claude adapter: every user message is answered with
// system/init, a tool_use of Bash, a can_use_tool request for it, and once
// the control_response is read, a result saying how it was answered (an
// allowed call touches approved.txt in the working directory). Every line
// read from stdin is appended to @LOG@.
const approvalClaude = `#!/bin/sh
log=@LOG@
while IFS= read -r line; do
	printf '%s\n' "$line" >> "$log"
	case "$line" in
	*'"subtype":"interrupt"'*)
		echo '{"type":"control_response","response":{"subtype":"success","request_id":"gw-interrupt","response":{"still_queued":[]}}}'
		echo '{"type":"result","subtype":"error_during_execution","is_error":true,"session_id":"s-appr","total_cost_usd":0.01,"num_turns":1}'
		;;
	*'"type":"user"'*)
		echo '{"type":"system","subtype":"init","cwd":"/w","session_id":"s-appr","tools":["Bash"],"model":"fake"}'
		echo '{"type":"assistant","session_id":"s-appr","message":{"id":"m1","role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"touch approved.txt"}}]}}'
		echo '{"type":"control_request","request_id":"perm-1","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"touch approved.txt"},"permission_suggestions":[{"type":"addRules","rules":[{"toolName":"Bash","ruleContent":"touch approved.txt"}],"behavior":"allow","destination":"localSettings"}],"tool_use_id":"toolu_1"}}'
		IFS= read -r line || exit 0
		printf '%s\n' "$line" >> "$log"
		case "$line" in
		*'"behavior":"allow"'*)
			touch approved.txt
			text='Allowed: I created approved.txt.'
			;;
		*'"behavior":"deny"'*'in time'*)
			text='Denied by the timeout: approved.txt was not created.'
			;;
		*'"behavior":"deny"'*)
			text='Denied: approved.txt was not created.'
			;;
		*)
			text='No answer I understand.'
			;;
		esac
		printf '{"type":"result","subtype":"success","is_error":false,"result":"%s","session_id":"s-appr","total_cost_usd":0.01,"num_turns":2}\n' "$text"
		;;
	esac
done
`

// Results of approvalClaude.
const (
	cliAllowed  = "Allowed: I created approved.txt."
	cliDenied   = "Denied: approved.txt was not created."
	cliTimedOut = "Denied by the timeout: approved.txt was not created."
)

// approvalHarness is the gateway with the real claude adapter driving
// approvalClaude.
type approvalHarness struct {
	*harness
	// stdin is the file of every line the fake CLI read.
	stdin string
}

// newApprovalClaude writes approvalClaude and returns the claude adapter
// driving it, with the path of its stdin log.
func newApprovalClaude(t *testing.T) (backends.Backend, string) {
	t.Helper()
	dir := t.TempDir()
	stdin := filepath.Join(dir, "stdin.log")
	script := filepath.Join(dir, "claude")
	text := strings.ReplaceAll(approvalClaude, "@LOG@", "'"+stdin+"'")
	if err := os.WriteFile(script, []byte(text), 0o755); err != nil {
		t.Fatal(err)
	}
	claude, err := backends.New(config.BackendClaude, backends.Options{
		Binary: script,
		Env:    os.Environ(),
		Warm:   backends.WarmOptions{Interactive: true, KeepAlive: time.Hour, MaxProcesses: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	return claude, stdin
}

func startApprovalGateway(t *testing.T, o harnessOptions) *approvalHarness {
	t.Helper()
	claude, stdin := newApprovalClaude(t)
	o.backend = claude
	return watchApprovals(t, startGateway(t, o), stdin)
}

func watchApprovals(t *testing.T, h *harness, stdin string) *approvalHarness {
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(stdin)
			t.Logf("CLI stdin:\n%s\nlogs:\n%s", b, h.logs.String())
		}
	})
	return &approvalHarness{harness: h, stdin: stdin}
}

// cliAnswer is a control_response the fake CLI read.
type cliAnswer struct {
	Type     string `json:"type"`
	Response struct {
		Subtype   string `json:"subtype"`
		RequestID string `json:"request_id"`
		Response  struct {
			Behavior           string          `json:"behavior"`
			Message            string          `json:"message"`
			Interrupt          *bool           `json:"interrupt"`
			UpdatedInput       json.RawMessage `json:"updatedInput"`
			UpdatedPermissions json.RawMessage `json:"updatedPermissions"`
		} `json:"response"`
	} `json:"response"`
}

// answers returns the control_responses the fake CLI has read so far.
func (h *approvalHarness) answers() []cliAnswer {
	h.t.Helper()
	f, err := os.Open(h.stdin)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		h.t.Fatal(err)
	}
	defer f.Close()
	var out []cliAnswer
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var a cliAnswer
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			h.t.Fatalf("the CLI read a line that is not JSON: %q", sc.Text())
		}
		if a.Type == "control_response" {
			out = append(out, a)
		}
	}
	return out
}

// onlyAnswer returns the one control_response the CLI read.
func (h *approvalHarness) onlyAnswer() cliAnswer {
	h.t.Helper()
	got := h.answers()
	if len(got) != 1 {
		h.t.Fatalf("the CLI read %d control responses, want 1: %+v", len(got), got)
	}
	if got[0].Response.Subtype != "success" || got[0].Response.RequestID != "perm-1" {
		h.t.Errorf("control response = %+v, want a success for request perm-1", got[0].Response)
	}
	return got[0]
}

// waitApproval waits for the approval message in ch: a bot message with
// approval buttons.
func (h *approvalHarness) waitApproval(ch discord.ChannelID) fakediscord.Message {
	h.t.Helper()
	return h.waitApprovalOtherThan(ch)
}

// waitApprovalOtherThan waits for an approval message in ch other than
// those named.
func (h *approvalHarness) waitApprovalOtherThan(ch discord.ChannelID, not ...discord.MessageID) fakediscord.Message {
	h.t.Helper()
	var ask fakediscord.Message
	h.fd.Wait(h.t, "the approval message", waitLong, func() bool {
		for _, m := range h.fd.BotMessages(ch) {
			if b := m.Buttons(); len(b) > 0 && strings.HasPrefix(b[0].ID, "appr:") && !slices.Contains(not, m.ID) {
				ask = m
				return true
			}
		}
		return false
	})
	return ask
}

// waitReply waits for the bot's one message in ch other than the approval
// message ask.
func (h *approvalHarness) waitReply(ch discord.ChannelID, ask discord.MessageID) fakediscord.Message {
	h.t.Helper()
	return h.waitReplyOtherThan(ch, ask)
}

// waitReplyOtherThan waits for a bot message in ch other than those named.
func (h *approvalHarness) waitReplyOtherThan(ch discord.ChannelID, not ...discord.MessageID) fakediscord.Message {
	h.t.Helper()
	var reply fakediscord.Message
	h.fd.Wait(h.t, "the reply", waitLong, func() bool {
		for _, m := range h.fd.BotMessages(ch) {
			if !slices.Contains(not, m.ID) {
				reply = m
				return true
			}
		}
		return false
	})
	return reply
}

// button returns the ID of the button labelled label under m.
func button(t *testing.T, m fakediscord.Message, label string) string {
	t.Helper()
	for _, b := range m.Buttons() {
		if b.Label == label {
			return b.ID
		}
	}
	t.Fatalf("no button %q under %q: %+v", label, m.Content, m.Buttons())
	return ""
}

func (h *approvalHarness) approvedFile() bool {
	_, err := os.Stat(filepath.Join(h.cfg.ConfigDir, "approved.txt"))
	return err == nil
}

// checkQuestion checks what an approval message asks, and that it is a
// reply to prompt naming its author.
func checkQuestion(t *testing.T, h *approvalHarness, ask fakediscord.Message, prompt discord.Message) {
	t.Helper()
	if ask.Reference == nil || ask.Reference.MessageID != prompt.ID {
		t.Errorf("the approval message is not a reply to the prompt: %+v", ask.Reference)
	}
	for _, want := range []string{"<@" + h.user.ID.String() + ">", "`Bash`", "Allow it?", "```sh\ntouch approved.txt\n```"} {
		if !strings.Contains(ask.Content, want) {
			t.Errorf("approval message does not say %q:\n%s", want, ask.Content)
		}
	}
	var labels, ids []string
	for _, b := range ask.Buttons() {
		labels = append(labels, b.Label)
		ids = append(ids, b.ID)
	}
	if got, want := strings.Join(labels, "|"), "Allow|Allow for this session|Deny|Deny and stop"; got != want {
		t.Errorf("buttons = %q, want %q", got, want)
	}
	for i, suffix := range []string{":a", ":s", ":d", ":x"} {
		if i < len(ids) && (!strings.HasPrefix(ids[i], "appr:") || !strings.HasSuffix(ids[i], suffix)) {
			t.Errorf("button %d id = %q, want appr:<n>%s", i, ids[i], suffix)
		}
	}
	// The reply notifies the author; the text pings nobody.
	var am struct {
		Parse       []string `json:"parse"`
		RepliedUser *bool    `json:"replied_user"`
	}
	if err := json.Unmarshal(ask.AllowedMentions, &am); err != nil || am.Parse == nil || len(am.Parse) != 0 || am.RepliedUser == nil || !*am.RepliedUser {
		t.Errorf("allowed_mentions = %s, want parse [] and replied_user true", ask.AllowedMentions)
	}
}

func TestApprovalAllowByTheAuthor(t *testing.T) {
	var stranger discord.User
	h := startApprovalGateway(t, harnessOptions{setup: func(h *harness) map[string]string {
		stranger = h.fd.User("mallory")
		return nil
	}})
	prompt := h.mention(h.channel, "please touch approved.txt")
	ask := h.waitApproval(h.channel)
	checkQuestion(t, h, ask, prompt)
	if !strings.Contains(ask.Content, "Denied automatically if nobody answers within 10m 00s") {
		t.Errorf("approval message does not give the default timeout:\n%s", ask.Content)
	}
	allow := button(t, ask, "Allow")

	// Someone else is told, privately, that it is not theirs to answer.
	h.fd.Press(h.channel, ask.ID, stranger, allow, discord.PermissionAdministrator)
	h.fd.Wait(t, "the refusal", waitLong, func() bool {
		for _, a := range h.fd.Answers() {
			if a.Ephemeral && strings.Contains(a.Content, "Only the person who asked") {
				return true
			}
		}
		return false
	})
	if m, _ := h.fd.Message(h.channel, ask.ID); len(m.Buttons()) != 4 || m.Content != ask.Content || m.Edited {
		t.Fatalf("a refused press changed the approval message: %q %+v", m.Content, m.Buttons())
	}
	if got := h.answers(); len(got) != 0 {
		t.Fatalf("the CLI got an answer after a refused press: %+v", got)
	}
	if h.approvedFile() {
		t.Fatal("the tool ran after a refused press")
	}
	if n := len(h.fd.BotMessages(h.channel)); n != 1 {
		t.Fatalf("%d bot messages while the approval is open, want 1", n)
	}

	h.fd.Press(h.channel, ask.ID, h.user, allow, 0)
	h.fd.Wait(t, "the approval message to say Allowed", waitLong, func() bool {
		m, _ := h.fd.Message(h.channel, ask.ID)
		return len(m.Buttons()) == 0 && strings.HasPrefix(m.Content, "✅ Allowed by <@"+h.user.ID.String()+">: `Bash`")
	})
	reply := h.waitReply(h.channel, ask.ID)
	if reply.Content != cliAllowed {
		t.Errorf("reply = %q, want %q", reply.Content, cliAllowed)
	}
	if reply.Reference == nil || reply.Reference.MessageID != prompt.ID {
		t.Errorf("reply does not reference the prompt: %+v", reply.Reference)
	}
	a := h.onlyAnswer()
	if r := a.Response.Response; r.Behavior != "allow" || string(r.UpdatedInput) != `{"command":"touch approved.txt"}` || r.UpdatedPermissions != nil {
		t.Errorf("the CLI's answer = %+v, want allow with the input as asked and no session rules", r)
	}
	if !h.approvedFile() {
		t.Error("approved.txt was not created: the allowed tool did not run")
	}
	m, _ := h.fd.Message(h.channel, ask.ID)
	if strings.Contains(m.Content, "Allow it?") || !strings.Contains(m.Content, "touch approved.txt") {
		t.Errorf("answered approval message = %q, want the answer over the command", m.Content)
	}
	if n := len(h.fd.BotMessages(h.channel)); n != 2 {
		t.Errorf("%d bot messages, want the approval and the reply", n)
	}
	if !strings.Contains(h.logs.String(), `"allowed":true`) || !strings.Contains(h.logs.String(), `"by":"`+h.user.ID.String()+`"`) {
		t.Errorf("the decision was not logged with who made it:\n%s", h.logs.String())
	}
}

func TestApprovalDenyByAnApprover(t *testing.T) {
	var boss discord.User
	h := startApprovalGateway(t, harnessOptions{setup: func(h *harness) map[string]string {
		boss = h.fd.User("boss")
		return map[string]string{config.EnvApproverIDs: boss.ID.String()}
	}})
	prompt := h.mention(h.channel, "please touch approved.txt")
	ask := h.waitApproval(h.channel)
	checkQuestion(t, h, ask, prompt)

	// Someone in APPROVER_IDS may answer a prompt that is not theirs.
	h.fd.Press(h.channel, ask.ID, boss, button(t, ask, "Deny"), 0)
	h.fd.Wait(t, "the approval message to say Denied", waitLong, func() bool {
		m, _ := h.fd.Message(h.channel, ask.ID)
		return len(m.Buttons()) == 0 && strings.HasPrefix(m.Content, "🚫 Denied by <@"+boss.ID.String()+">: `Bash`")
	})
	reply := h.waitReply(h.channel, ask.ID)
	if reply.Content != cliDenied {
		t.Errorf("reply = %q, want %q", reply.Content, cliDenied)
	}
	a := h.onlyAnswer()
	if r := a.Response.Response; r.Behavior != "deny" || r.Message != "The user denied this tool call." || r.Interrupt == nil || *r.Interrupt {
		t.Errorf("the CLI's answer = %+v, want deny with the user's message and interrupt false", r)
	}
	if h.approvedFile() {
		t.Error("approved.txt was created: the denied tool ran")
	}
	for _, a := range h.fd.Answers() {
		if a.Ephemeral {
			t.Errorf("an approver's press got a notice: %q", a.Content)
		}
	}
}

// The bot's clock is not the harness's (harnessOptions.clock drives the
// schedules only), so the timeout is a short real one; nothing sleeps.
func TestApprovalTimesOut(t *testing.T) {
	h := startApprovalGateway(t, harnessOptions{env: map[string]string{config.EnvApprovalTimeout: "1s"}})
	prompt := h.mention(h.channel, "please touch approved.txt")
	ask := h.waitApproval(h.channel)
	if ask.Reference == nil || ask.Reference.MessageID != prompt.ID {
		t.Errorf("the approval message is not a reply to the prompt: %+v", ask.Reference)
	}
	h.fd.Wait(t, "the approval message to time out", waitLong, func() bool {
		m, _ := h.fd.Message(h.channel, ask.ID)
		return len(m.Buttons()) == 0 && m.Edited
	})
	edits := h.fd.Edits(h.channel, ask.ID)
	if len(edits) != 1 {
		t.Fatalf("approval message edits = %+v, want 1", edits)
	}
	if want := "⌛ Denied: nobody answered in time: `Bash`\n```sh\ntouch approved.txt\n```"; edits[0].Content != want || len(edits[0].Buttons) != 0 {
		t.Errorf("timed-out approval = %q %+v, want %q without buttons", edits[0].Content, edits[0].Buttons, want)
	}
	// The question said when it would be denied.
	posted := false
	for _, r := range h.requests("POST", "/channels/"+h.channel.String()+"/messages") {
		if strings.Contains(string(r.Body), "Denied automatically if nobody answers within 1s") && strings.Contains(string(r.Body), "appr:") {
			posted = true
		}
	}
	if !posted {
		t.Error("the approval message did not say it would be denied after 1s")
	}
	reply := h.waitReply(h.channel, ask.ID)
	if reply.Content != cliTimedOut {
		t.Errorf("reply = %q, want %q", reply.Content, cliTimedOut)
	}
	a := h.onlyAnswer()
	if r := a.Response.Response; r.Behavior != "deny" || !strings.Contains(r.Message, "Nobody answered the approval request in time") {
		t.Errorf("the CLI's answer = %+v, want deny saying nobody answered in time", r)
	}
	if h.approvedFile() {
		t.Error("approved.txt was created after a timeout")
	}
	if got := h.answers(); len(got) != 1 {
		t.Errorf("the CLI got %d answers, want 1", len(got))
	}
}

const approvalHeartbeat = "## chores\nInterval: 60\nInstruction: Touch approved.txt.\n"

// A heartbeat has nobody to ask: SCHEDULED_TOOLS_POLICY answers, and no
// approval message is posted.
func TestApprovalScheduledEventFollowsPolicy(t *testing.T) {
	for _, tc := range []struct {
		policy     string // "" for the default
		reply      string
		behavior   string
		ran        bool
		logAllowed string
	}{
		{policy: "", reply: cliDenied, behavior: "deny", logAllowed: `"allowed":false`},
		{policy: config.ScheduledToolsAllow, reply: cliAllowed, behavior: "allow", ran: true, logAllowed: `"allowed":true`},
	} {
		name := tc.policy
		if name == "" {
			name = "default"
		}
		t.Run(name, func(t *testing.T) {
			clock := clockwork.NewFakeClock()
			h := startApprovalGateway(t, harnessOptions{
				clock: clock,
				files: map[string]string{"heartbeat.md": approvalHeartbeat},
				setup: func(h *harness) map[string]string {
					env := map[string]string{config.EnvOutputChannelID: h.channel.String()}
					if tc.policy != "" {
						env[config.EnvScheduledTools] = tc.policy
					}
					return env
				},
			})
			advance(t, clock, 1, 60*time.Second)
			msgs := h.waitReplies(h.channel, 1)
			if msgs[0].Content != tc.reply || len(msgs[0].Buttons()) != 0 {
				t.Errorf("heartbeat post = %q %+v, want %q", msgs[0].Content, msgs[0].Buttons(), tc.reply)
			}
			h.fd.Wait(t, "the heartbeat to finish", waitLong, func() bool { return strings.Contains(h.logs.String(), "event finished") })
			if n := len(h.fd.BotMessages(h.channel)); n != 1 {
				t.Errorf("%d bot messages, want the heartbeat's post only (no approval message)", n)
			}
			a := h.onlyAnswer()
			if r := a.Response.Response; r.Behavior != tc.behavior {
				t.Errorf("the CLI's answer = %+v, want %s", r, tc.behavior)
			} else if r.Behavior == "deny" && !strings.Contains(r.Message, "SCHEDULED_TOOLS_POLICY=deny") {
				t.Errorf("the model is not told why: %q", r.Message)
			}
			if h.approvedFile() != tc.ran {
				t.Errorf("approved.txt exists = %v, want %v", h.approvedFile(), tc.ran)
			}
			if l := h.logs.String(); !strings.Contains(l, `"by":"policy"`) || !strings.Contains(l, tc.logAllowed) {
				t.Errorf("the policy decision was not logged:\n%s", l)
			}
		})
	}
}

// staleApproval is what a killed gateway left: an approval message with
// its buttons, posted as the bot did (appr:1, the first approval of that
// run), and recorded in the inbox as open for event e.
func staleApproval(t *testing.T, l *leftBehind, e queue.Event, prompt discord.Message) fakediscord.Message {
	t.Helper()
	body, _ := json.Marshal(map[string]any{
		"content":           "🔐 <@" + l.user.ID.String() + ">, the agent wants to use `Bash`. Allow it?\n```sh\nrm -rf /srv/data\n```",
		"message_reference": map[string]any{"message_id": prompt.ID.String()},
		"components": []any{map[string]any{"type": 1, "components": []any{
			map[string]any{"type": 2, "style": 3, "label": "Allow", "custom_id": "appr:1:a"},
			map[string]any{"type": 2, "style": 1, "label": "Allow for this session", "custom_id": "appr:1:s"},
			map[string]any{"type": 2, "style": 2, "label": "Deny", "custom_id": "appr:1:d"},
			map[string]any{"type": 2, "style": 4, "label": "Deny and stop", "custom_id": "appr:1:x"},
		}}},
	})
	req, _ := http.NewRequest("POST", l.fd.APIBaseURL()+"/channels/"+l.channel.String()+"/messages", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bot "+fakediscord.DefaultToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var m discord.Message
	err = json.NewDecoder(resp.Body).Decode(&m)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("posting the stale approval: %d %v", resp.StatusCode, err)
	}
	l.do(l.in.Started(e.ID))
	// The first approval of an event is its chunk -1001 (discord.ApprovalChunk).
	if !gwdiscord.ApprovalChunk(-1001) {
		t.Fatal("chunk -1001 is not an approval's")
	}
	l.do(l.in.Delivered(e.ID, -1001, m.ID.String()))
	got, _ := l.fd.Message(l.channel, m.ID)
	if len(got.Buttons()) != 4 {
		t.Fatalf("stale approval buttons = %+v", got.Buttons())
	}
	return got
}

func TestApprovalLeftOpenByAKilledGatewayIsClosedAsDenied(t *testing.T) {
	l := newLeftBehind(t)
	prompt, e := l.prompt("please touch approved.txt")
	stale := staleApproval(t, l, e, prompt)
	claude, stdin := newApprovalClaude(t)
	h := watchApprovals(t, l.start(harnessOptions{backend: claude}), stdin)
	h.fd.Wait(t, "the stale approval closed", waitLong, func() bool {
		m, _ := h.fd.Message(h.channel, stale.ID)
		return m.Content == gwdiscord.StaleApprovalNotice && len(m.Buttons()) == 0
	})
	// The turn runs again and asks again, under a new message.
	ask := h.waitApprovalOtherThan(h.channel, stale.ID)
	checkQuestion(t, h, ask, prompt)
	h.fd.Press(h.channel, ask.ID, h.user, button(t, ask, "Deny"), 0)
	reply := h.waitReplyOtherThan(h.channel, stale.ID, ask.ID)
	if reply.Content != cliDenied {
		t.Errorf("reply = %q, want %q", reply.Content, cliDenied)
	}
}

// Approval ids start again at 1 with each run: a previous run's approval
// whose closing edit failed keeps its buttons, and a press on them must
// not answer this run's approval 1, which asks about something else.
func TestApprovalStaleButtonsDoNotAnswerANewApproval(t *testing.T) {
	l := newLeftBehind(t)
	prompt, e := l.prompt("please touch approved.txt")
	stale := staleApproval(t, l, e, prompt)
	stalePath := "/channels/" + l.channel.String() + "/messages/" + stale.ID.String()
	l.fd.Fail(fakediscord.Fault{Method: "PATCH", Path: stalePath, Status: http.StatusForbidden, Times: 1000})
	claude, stdin := newApprovalClaude(t)
	h := watchApprovals(t, l.start(harnessOptions{backend: claude}), stdin)
	h.fd.Wait(t, "the failed edit of the stale approval", waitLong, func() bool { return len(h.requests("PATCH", stalePath)) > 0 })
	ask := h.waitApprovalOtherThan(h.channel, stale.ID)
	if !strings.HasPrefix(button(t, ask, "Allow"), "appr:1:") {
		t.Fatalf("the new approval's buttons = %+v, want approval 1 (the test relies on it)", ask.Buttons())
	}
	if m, _ := h.fd.Message(h.channel, stale.ID); len(m.Buttons()) != 4 {
		t.Fatalf("the stale approval lost its buttons: %+v", m.Buttons())
	}

	h.fd.Press(h.channel, stale.ID, h.user, button(t, stale, "Allow"), 0)
	h.fd.Wait(t, "the press to be answered", waitLong, func() bool {
		for _, a := range h.fd.Answers() {
			if a.Ephemeral {
				return true
			}
		}
		m, _ := h.fd.Message(h.channel, stale.ID)
		return m.Edited || len(h.answers()) > 0
	})
	if m, _ := h.fd.Message(h.channel, stale.ID); m.Edited {
		t.Errorf("the press on the stale approval was taken: it now says %q", m.Content)
	}
	for _, a := range h.fd.Answers() {
		if a.Ephemeral && a.Content != "This approval is no longer open." {
			t.Errorf("notice = %q", a.Content)
		}
	}
	if got := h.answers(); len(got) != 0 {
		t.Fatalf("a press on the stale approval answered the CLI: %+v", got)
	}
	if m, _ := h.fd.Message(h.channel, ask.ID); len(m.Buttons()) != 4 || m.Content != ask.Content {
		t.Fatalf("a press on the stale approval changed the new one: %q %+v", m.Content, m.Buttons())
	}
	if h.approvedFile() {
		t.Fatal("the tool ran")
	}

	h.fd.Press(h.channel, ask.ID, h.user, button(t, ask, "Deny"), 0)
	reply := h.waitReplyOtherThan(h.channel, stale.ID, ask.ID)
	if reply.Content != cliDenied {
		t.Errorf("reply = %q, want %q", reply.Content, cliDenied)
	}
	if a := h.onlyAnswer(); a.Response.Response.Behavior != "deny" {
		t.Errorf("the CLI's answer = %+v, want deny", a.Response.Response)
	}
}
