//go:build conformance

package conformance

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentgateway/gateway/internal/fakeapi"
	"github.com/agentgateway/gateway/internal/fakediscord"
)

// TestConformanceDiscordRun runs the built `gateway run` against the fake
// Discord, with the real claude CLI and the fake model API: a mention is
// answered by the model, the next one resumes the channel's session, and a
// SIGTERM in the middle of a run lets it finish, delivers its reply and
// exits 0.
func TestConformanceDiscordRun(t *testing.T) {
	bin := buildGateway(t)
	gate := make(chan struct{})
	api := fakeapi.StartAnthropic(t,
		fakeapi.Text("Hello from the model."),
		fakeapi.Turn{Text: "The long job is done.", Gate: gate},
	)
	fd := fakediscord.Start(t)
	_, channel := fd.AddGuild("conformance")
	alice := fd.User("alice")

	work := t.TempDir()
	cmd := exec.Command(bin, "run")
	cmd.Dir = work
	cmd.Env = gatewayEnv(t, fd, api.URL(), filepath.Join(work, "config"))
	var stderr lockedBuffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	// A killed gateway can leave a CLI holding the output pipe.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var exitErr error
	go func() { exitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("gateway output:\n%s", stderr.String())
		}
	})
	fd.Wait(t, "the bot to connect", 30*time.Second, fd.Connected)

	fd.Post(channel, alice, fakediscord.Mention(fd.Bot)+" Say hello.", fd.Bot)
	fd.Wait(t, "the first reply", 90*time.Second, func() bool { return len(fd.BotMessages(channel)) >= 1 })
	if got := fd.BotMessages(channel)[0].Content; got != "Hello from the model." {
		t.Fatalf("reply = %q\n%s\n%s", got, api.Summary(), stderr.String())
	}

	fd.Post(channel, alice, fakediscord.Mention(fd.Bot)+" Start the long job.", fd.Bot)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if _, err := api.WaitMain(ctx, 2); err != nil {
		t.Fatalf("second turn never reached the model: %v\n%s", err, stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	fd.Wait(t, "shutdown to begin", 30*time.Second, func() bool { return strings.Contains(stderr.String(), "shutting down") })
	close(gate)

	select {
	case <-exited:
		if exitErr != nil {
			t.Fatalf("gateway run exited with %v after SIGTERM, want 0", exitErr)
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("gateway run did not exit after SIGTERM\n%s", stderr.String())
	}
	msgs := fd.BotMessages(channel)
	if len(msgs) != 2 || msgs[1].Content != "The long job is done." {
		t.Errorf("bot messages = %+v, want the long job's reply delivered before exit", msgs)
	}
	main := api.MainRequests()
	if len(main) != 2 || !strings.Contains(flatten(main[1]), "Hello from the model.") {
		t.Errorf("the second mention did not resume the channel's session:\n%s", api.Summary())
	}
	for _, secret := range []string{fakediscord.DefaultToken, apiKey} {
		if strings.Contains(stderr.String(), secret) {
			t.Errorf("a secret reached the log: %q", secret)
		}
	}
}

// lockedBuffer is a bytes.Buffer written by a child process and read by
// the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
