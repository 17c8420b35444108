//go:build conformance

package conformance

import (
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentgateway/gateway/internal/fakeapi"
	"github.com/agentgateway/gateway/internal/fakediscord"
)

// TestConformanceDiscordResetIsACleanSlate runs the built `gateway run`
// with the real claude CLI: a fact said before /claude-reset reaches the
// model in no form afterwards, neither in the resumed transcript nor in a
// "recent conversation" section of the prompt, across a restart between
// the reset and the next prompt.
func TestConformanceDiscordResetIsACleanSlate(t *testing.T) {
	const secret = "PINEAPPLE-7734"
	bin := buildGateway(t)
	api := fakeapi.StartAnthropic(t,
		fakeapi.Text("Noted: the code word is "+secret+"."),
		fakeapi.Text("I know of no code word."),
	)
	fd := fakediscord.Start(t)
	_, channel := fd.AddGuild("conformance")
	alice := fd.User("alice")
	work := t.TempDir()
	env := gatewayEnv(t, fd, api.URL(), filepath.Join(work, "config"))

	start := func() int {
		_, pid := gatewayRun(t, bin, work, env, api)
		fd.Wait(t, "the bot to connect", 30*time.Second, fd.Connected)
		return pid
	}

	pid := start()
	fd.Post(channel, alice, fakediscord.Mention(fd.Bot)+" Remember the code word "+secret+".", fd.Bot)
	fd.Wait(t, "the first reply", 90*time.Second, func() bool { return len(fd.BotMessages(channel)) >= 1 })

	reset := fd.Interact(channel, alice, "claude-reset", nil)
	fd.Wait(t, "the reset's answer", 30*time.Second, func() bool {
		for _, a := range fd.Answers() {
			if a.Interaction == reset {
				return true
			}
		}
		return false
	})
	// A restart between the reset and the next prompt must not bring the
	// conversation back.
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	fd.Wait(t, "the gateway to exit", 60*time.Second, func() bool { return syscall.Kill(pid, 0) != nil })
	start()

	fd.Post(channel, alice, fakediscord.Mention(fd.Bot)+" What was the code word?", fd.Bot)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	main, err := api.WaitMain(ctx, 2)
	if err != nil {
		t.Fatalf("the prompt after the reset never reached the model: %v\n%s", err, api.Summary())
	}
	after := main[1]
	if body := string(after.Body); strings.Contains(body, secret) {
		t.Errorf("the model was sent the conversation before /claude-reset:\n%s", flatten(after))
	}
	// claude sends its environment as a message of its own (role
	// "system"); the conversation is the user and assistant messages.
	var turns []fakeapi.Message
	for _, m := range after.Messages() {
		if m.Role != "system" {
			turns = append(turns, m)
		}
	}
	if len(turns) != 1 || !strings.Contains(turns[0].Text, "What was the code word?") {
		t.Errorf("the first request after the reset holds %d conversation messages, want the new prompt alone:\n%s", len(turns), flatten(after))
	}
}
