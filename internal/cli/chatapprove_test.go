package cli

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentgateway/gateway/backends"
)

// approvingClaude stands in for claude -p --input-format stream-json
// --permission-prompt-tool stdio, driven through the real claude adapter:
// every user message is answered with system/init, a tool_use of Bash, a
// can_use_tool request for it, and once the control_response is read, a
// result saying how it was answered. Every line read from stdin is
// appended to @LOG@.
const approvingClaude = `#!/bin/sh
if [ "$1" = --version ]; then echo '2.1.330 (Claude Code)'; exit 0; fi
log=@LOG@
n=0
while IFS= read -r line; do
	printf '%s\n' "$line" >> "$log"
	case "$line" in
	*'"subtype":"interrupt"'*)
		echo '{"type":"control_response","response":{"subtype":"success","request_id":"gw-interrupt","response":{"still_queued":[]}}}'
		echo '{"type":"result","subtype":"error_during_execution","is_error":true,"session_id":"s-chat","total_cost_usd":0.01,"num_turns":1}'
		;;
	*'"type":"user"'*)
		n=$((n+1))
		echo '{"type":"system","subtype":"init","cwd":"/w","session_id":"s-chat","tools":["Bash"],"model":"fake"}'
		echo '{"type":"assistant","session_id":"s-chat","message":{"id":"m1","role":"assistant","content":[{"type":"tool_use","id":"toolu_'$n'","name":"Bash","input":{"command":"npm test"}}]}}'
		echo '{"type":"control_request","request_id":"perm-'$n'","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"npm test"},"permission_suggestions":[{"type":"addRules","rules":[{"toolName":"Bash","ruleContent":"npm test"}],"behavior":"allow","destination":"session"}],"tool_use_id":"toolu_'$n'"}}'
		IFS= read -r line || exit 0
		printf '%s\n' "$line" >> "$log"
		case "$line" in
		*'"behavior":"allow"'*) text="Allowed $n." ;;
		*'"behavior":"deny"'*) text="Denied $n." ;;
		*) text="No answer $n." ;;
		esac
		printf '{"type":"result","subtype":"success","is_error":false,"result":"%s","session_id":"s-chat","total_cost_usd":0.01,"num_turns":2}\n' "$text"
		;;
	esac
done
`

func writeApprovingClaude(t *testing.T) (cli, stdinLog string) {
	t.Helper()
	dir := t.TempDir()
	stdinLog = filepath.Join(dir, "stdin.log")
	cli = filepath.Join(dir, "claude")
	if err := os.WriteFile(cli, []byte(strings.ReplaceAll(approvingClaude, "@LOG@", "'"+stdinLog+"'")), 0o755); err != nil {
		t.Fatal(err)
	}
	return cli, stdinLog
}

const npmQuestion = `Allow Bash "npm test"? [y/N/a] `

// In a mode that asks (acceptEdits), chat asks in the terminal as Discord
// does with buttons: y allows once, N (or anything else) denies, a allows
// the same call for the rest of the chat without asking again.
func TestChatAsksBeforeToolsInTheTerminal(t *testing.T) {
	cli, stdinLog := writeApprovingClaude(t)
	envFile, _ := cliEnv(t, cli, "PERMISSION_MODE=acceptEdits")
	term := startChat(t, "--env-file", envFile)
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(stdinLog)
			t.Logf("CLI stdin:\n%s\nstderr:\n%s", b, term.err.String())
		}
	})
	steps := []struct{ answer, reply string }{
		{"y", "Allowed 1."},
		{"", "Denied 2."},
		{"no", "Denied 3."},
		{"a", "Allowed 4."},
	}
	for i, s := range steps {
		term.err.waitFor(t, "> ", i+1)
		io.WriteString(term.stdin, "run the tests\n")
		term.err.waitFor(t, npmQuestion, i+1)
		io.WriteString(term.stdin, s.answer+"\n")
		term.out.waitFor(t, s.reply, 1)
	}
	// Allowed for the session: not asked again.
	term.err.waitFor(t, "> ", len(steps)+1)
	io.WriteString(term.stdin, "run the tests\n")
	term.out.waitFor(t, "Allowed 5.", 1)
	term.stdin.Close()
	if code := term.exit(t); code != exitOK {
		t.Errorf("exit %d", code)
	}
	if got := strings.Count(term.err.String(), npmQuestion); got != len(steps) {
		t.Errorf("asked %d times, want %d:\n%s", got, len(steps), term.err.String())
	}
	if got, want := strings.Split(strings.TrimSpace(term.out.String()), "\n"), []string{"Allowed 1.", "Denied 2.", "Denied 3.", "Allowed 4.", "Allowed 5."}; !cmp.Equal(got, want) {
		t.Errorf("replies (-want +got):\n%s", cmp.Diff(want, got))
	}
	b, _ := os.ReadFile(stdinLog)
	// y, a, and the call a allowed; a passes the CLI's suggested rule on
	// for the session.
	if n := strings.Count(string(b), `"behavior":"allow"`); n != 4 {
		t.Errorf("the CLI read %d allows, want 4:\n%s", n, b)
	}
	if n := strings.Count(string(b), `"updatedPermissions"`); n != 1 {
		t.Errorf("the CLI read %d session rules, want 1 (for a):\n%s", n, b)
	}
}

// Ctrl-C while chat asks stops the turn; the question is not left open
// and the next line is a prompt again.
func TestChatCtrlCWhileAsking(t *testing.T) {
	cli, _ := writeApprovingClaude(t)
	envFile, _ := cliEnv(t, cli, "PERMISSION_MODE=acceptEdits")
	term := startChat(t, "--env-file", envFile)
	term.err.waitFor(t, "> ", 1)
	io.WriteString(term.stdin, "run the tests\n")
	term.err.waitFor(t, npmQuestion, 1)
	term.interrupts <- os.Interrupt
	term.err.waitFor(t, "> ", 2)
	io.WriteString(term.stdin, "run the tests\n")
	term.err.waitFor(t, npmQuestion, 2)
	io.WriteString(term.stdin, "y\n")
	term.out.waitFor(t, "Allowed", 1)
	term.stdin.Close()
	if code := term.exit(t); code != exitOK {
		t.Errorf("exit %d:\n%s", code, term.err.String())
	}
}

func TestApprovalQuestion(t *testing.T) {
	tests := []struct {
		name string
		a    backends.Approval
		want string
	}{
		{"bash", backends.Approval{Tool: "Bash", Input: []byte(`{"command":"npm test"}`)}, `Allow Bash "npm test"? [y/N/a] `},
		{"a file", backends.Approval{Tool: "Write", Input: []byte(`{"file_path":"/w/a.txt","content":"x"}`)}, `Allow Write "/w/a.txt"? [y/N/a] `},
		// Nothing from the CLI moves the cursor or clears the screen.
		{"control characters", backends.Approval{Tool: "Ba\x1b[2Jsh", Input: []byte(`{"command":"rm -rf /\u001b[1A"}`)}, `Allow Ba[2Jsh "rm -rf /\x1b[1A"? [y/N/a] `},
		{"no input", backends.Approval{Tool: "mcp__x__y"}, `Allow mcp__x__y? [y/N/a] `},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := approvalQuestion(tt.a); got != tt.want {
				t.Errorf("approvalQuestion = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseApprovalAnswer(t *testing.T) {
	for in, want := range map[string]approvalAnswer{
		"y": answerYes, "Y": answerYes, " yes ": answerYes,
		"a": answerSession, "A": answerSession, "always": answerSession,
		"": answerNo, "n": answerNo, "no": answerNo, "maybe": answerNo, "yy": answerNo, "y es": answerNo,
	} {
		if got := parseApprovalAnswer(in); got != want {
			t.Errorf("parseApprovalAnswer(%q) = %v, want %v", in, got, want)
		}
	}
}

// Only the few words that mean yes allow anything.
func FuzzParseApprovalAnswer(f *testing.F) {
	for _, s := range []string{"y", "yes", "a", "always", "", "n", "no", "maybe", " Y "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := parseApprovalAnswer(s)
		w := strings.ToLower(strings.TrimSpace(s))
		allowing := map[string]approvalAnswer{"y": answerYes, "yes": answerYes, "a": answerSession, "always": answerSession}
		want, ok := allowing[w]
		if !ok {
			want = answerNo
		}
		if got != want {
			t.Errorf("parseApprovalAnswer(%q) = %v, want %v", s, got, want)
		}
	})
}

// The seed's default as root: chat does not fail on the root refusal but
// runs with acceptEdits and asks. An explicit bypassPermissions that claude
// refuses is tried once: the refusal was known before the turn, and no
// retry changes it.
func TestChatAsRootWithoutPermissionMode(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the root default applies to root only")
	}
	t.Setenv("IS_SANDBOX", "")
	t.Setenv("PERMISSION_MODE", "")
	cli, _ := writeApprovingClaude(t)
	envFile, _ := cliEnv(t, cli)
	// cliEnv sets acceptEdits; this .env leaves PERMISSION_MODE unset.
	b, _ := os.ReadFile(envFile)
	os.WriteFile(envFile, []byte(strings.ReplaceAll(string(b), "PERMISSION_MODE=acceptEdits\n", "")), 0o600)
	term := startChat(t, "--env-file", envFile)
	term.err.waitFor(t, "> ", 1)
	if errOut := term.err.String(); strings.Count(errOut, "running as root with PERMISSION_MODE unset: the agent uses acceptEdits") != 1 || strings.Contains(errOut, "every turn would fail") {
		t.Errorf("chat does not say once which mode it picked:\n%s", errOut)
	}
	io.WriteString(term.stdin, "run the tests\n")
	term.err.waitFor(t, npmQuestion, 1)
	io.WriteString(term.stdin, "y\n")
	term.out.waitFor(t, "Allowed 1.", 1)
	term.stdin.Close()
	term.exit(t)
}

func TestChatDoesNotRetryTheRootRefusal(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("claude refuses bypassPermissions as root only")
	}
	t.Setenv("IS_SANDBOX", "")
	count := filepath.Join(t.TempDir(), "runs")
	cli := scriptCLI(t, "echo run >> '"+count+"'\necho '--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons' >&2\nexit 1")
	envFile, _ := cliEnv(t, cli, "PERMISSION_MODE=bypassPermissions")
	code, _, errOut := runCode(t, "", "chat", "-m", "hello", "--env-file", envFile)
	if code != exitError {
		t.Errorf("exit %d, want %d", code, exitError)
	}
	if strings.Count(errOut, "every turn would fail") != 1 {
		t.Errorf("the advice is not printed once:\n%s", errOut)
	}
	b, _ := os.ReadFile(count)
	if runs := strings.Count(string(b), "run"); runs != 1 {
		t.Errorf("claude ran %d times for a refusal known before the turn, want 1:\n%s", runs, errOut)
	}
}
