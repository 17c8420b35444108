package gateway

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentgateway/gateway/internal/archive"
	"github.com/agentgateway/gateway/internal/config"
)

// /claude-reset is a clean slate (DESIGN decision 23), also across a
// restart between the reset and the next prompt: the next session is
// given no earlier turn. A session lost later without anyone asking (here
// the retry ladder) is given the recent conversation, but only what was
// said since the reset.
func TestResetIsACleanSlateAcrossARestart(t *testing.T) {
	cli := newFilesCLI(t)
	env := map[string]string{config.EnvHistoryMessages: "20"}
	first, work := startFilesGateway(t, cli, harnessOptions{env: env})
	m := first.mention(first.channel, "remember the number 42")
	if got := first.waitAnswer(first.channel, m.ID).Content; got != "Answer 1." {
		t.Fatalf("answer = %q", got)
	}
	reset := first.fd.Interact(first.channel, first.user, "claude-reset", nil)
	if got := first.answer(reset); !strings.Contains(got, "new conversation") {
		t.Fatalf("/claude-reset answered %q", got)
	}
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}

	env = map[string]string{config.EnvHistoryMessages: "20", config.EnvWorkDir: work}
	second, _ := startFilesGateway(t, cli, harnessOptions{env: env, fd: first.fd, configDir: first.cfg.ConfigDir})
	second.guild, second.channel, second.user = first.guild, first.channel, first.user
	m = second.mention(second.channel, "and now?")
	second.waitAnswer(second.channel, m.ID)
	if args := cli.args(2); strings.Contains(args, "--resume") {
		t.Errorf("the run after the reset resumes:\n%s", args)
	}
	if got := cli.prompt(2); got != "and now?" {
		t.Errorf("prompt after the reset = %q, want it alone: the model must see no earlier turn", got)
	}

	// The exchange since the reset reaches the archive's recent exchanges
	// (written behind the turn) before the session is lost.
	recent := filepath.Join(second.cfg.ConfigDir, ArchiveDir, second.channel.String(), archive.RecentFile)
	second.fd.Wait(t, "the exchange after the reset archived", waitLong, func() bool {
		data, err := os.ReadFile(recent)
		return err == nil && strings.Contains(string(data), "and now?")
	})

	// Runs 3 and 4 resume and fail; run 5 starts afresh, given what was
	// said since the reset and nothing before it.
	cli.failNext("2")
	m = second.mention(second.channel, "still there?")
	second.waitAnswer(second.channel, m.ID)
	if cli.runs() != 5 || !strings.Contains(cli.args(3), "--resume") || strings.Contains(cli.args(5), "--resume") {
		t.Fatalf("runs = %d; args 3:\n%s\nargs 5:\n%s", cli.runs(), cli.args(3), cli.args(5))
	}
	prompt := cli.prompt(5)
	if !strings.HasPrefix(prompt, archive.SectionStart+"\n") || !strings.HasSuffix(prompt, archive.SectionEnd+"\n\nstill there?") {
		t.Fatalf("prompt of the lost session's successor does not carry the recent conversation:\n%s", prompt)
	}
	if !strings.Contains(prompt, ": and now?\nassistant: Answer 2.\n") {
		t.Errorf("recent conversation lacks the exchange since the reset:\n%s", prompt)
	}
	if strings.Contains(prompt, "42") {
		t.Errorf("recent conversation carries a turn from before the reset:\n%s", prompt)
	}
}
