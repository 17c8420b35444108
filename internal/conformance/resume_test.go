//go:build conformance

package conformance

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentgateway/gateway/internal/fakeapi"
	"github.com/agentgateway/gateway/internal/fakediscord"
)

// TestConformanceResumeATerminalSession makes a session with the real
// claude CLI as a person would in a terminal (`claude -p` in a project
// directory), then, through the built `gateway run` against the fake
// Discord, finds it with /resume's autocompletion in a channel working in
// that project, confirms it, and sends the next prompt: the model is sent
// the terminal's conversation with it.
func TestConformanceResumeATerminalSession(t *testing.T) {
	const secret = "MANGO-4471"
	bin := buildGateway(t)
	api := fakeapi.StartAnthropic(t,
		fakeapi.Text("Noted: the code word is "+secret+"."),
		fakeapi.Text("The code word was "+secret+"."),
	)
	home, root := t.TempDir(), t.TempDir()
	app := filepath.Join(root, "app")
	if err := os.Mkdir(app, 0o755); err != nil {
		t.Fatal(err)
	}

	// The terminal.
	claude := exec.Command(cliBinary(t, "claude"), "-p", "Remember the code word "+secret+".", "--output-format", "json")
	claude.Dir = app
	claude.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home,
		"ANTHROPIC_API_KEY=" + apiKey, "ANTHROPIC_BASE_URL=" + api.URL(),
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "CLAUDE_CODE_MAX_RETRIES=0", "DISABLE_AUTOUPDATER=1",
	}
	out, err := claude.Output()
	if err != nil {
		t.Fatalf("claude -p in the terminal: %v\n%s", err, out)
	}
	var result struct {
		SessionID string `json:"session_id"`
	}
	if err := json.Unmarshal(out, &result); err != nil || result.SessionID == "" {
		t.Fatalf("claude -p printed no session id (%v):\n%s", err, out)
	}
	id := result.SessionID

	fd := fakediscord.Start(t)
	_, channel := fd.AddGuild("conformance")
	alice := fd.User("alice")
	work := t.TempDir()
	env := gatewayEnv(t, fd, api.URL(), filepath.Join(work, "config"),
		"HOME="+home, "PROJECTS_ROOT="+root, "THREADS=off")
	gatewayRun(t, bin, work, env, api)
	fd.Wait(t, "the bot to connect", 30*time.Second, fd.Connected)

	answer := func(interaction string) fakediscord.Message {
		t.Helper()
		var got fakediscord.Message
		fd.Wait(t, "the answer to "+interaction, 30*time.Second, func() bool {
			for _, a := range fd.Answers() {
				if a.Interaction == interaction && a.Original && a.Content != "" {
					got = a
					return true
				}
			}
			return false
		})
		return got
	}
	if a := answer(fd.Interact(channel, alice, "project", map[string]string{"path": "app"})); !strings.Contains(a.Content, "`app`") {
		t.Fatalf("/project app = %q", a.Content)
	}
	choices, err := fd.Autocomplete(channel, alice, "resume", "session", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(choices) != 1 || choices[0].Value != id || !strings.HasPrefix(choices[0].Name, "Remember the code word "+secret) {
		t.Fatalf("/resume choices %+v, want the terminal's session %s with its first prompt", choices, id)
	}
	q := answer(fd.Interact(channel, alice, "resume", map[string]string{"session": id}))
	if !strings.Contains(q.Content, "> Remember the code word "+secret) || len(q.Buttons()) != 2 {
		t.Fatalf("/resume question = %q, buttons %+v", q.Content, q.Buttons())
	}
	press := fd.Press(channel, q.ID, alice, q.Buttons()[0].ID, 0)
	fd.Wait(t, "the confirmation", 30*time.Second, func() bool { return len(fd.Callbacks(press)) > 0 })

	fd.Post(channel, alice, fakediscord.Mention(fd.Bot)+" What was the code word?", fd.Bot)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	main, err := api.WaitMain(ctx, 2)
	if err != nil {
		t.Fatalf("the prompt in Discord never reached the model: %v\n%s", err, api.Summary())
	}
	next := main[1]
	var said, asked bool
	for _, m := range next.Messages() {
		said = said || (m.Role == "user" && strings.Contains(m.Text, "Remember the code word "+secret))
		asked = asked || (m.Role == "user" && strings.Contains(m.Text, "What was the code word?"))
	}
	if !said || !asked {
		t.Errorf("the prompt from Discord did not continue the terminal's conversation:\n%s", flatten(next))
	}
	fd.Wait(t, "the answer in Discord", 60*time.Second, func() bool {
		for _, m := range fd.BotMessages(channel) {
			if strings.Contains(m.Content, "The code word was "+secret) {
				return true
			}
		}
		return false
	})
}
