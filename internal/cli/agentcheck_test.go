package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentgateway/gateway/internal/gateway"
	"github.com/agentgateway/gateway/internal/hold"
	"github.com/agentgateway/gateway/internal/inbox"
	"github.com/agentgateway/gateway/internal/queue"
)

func TestDoctorRunsTheAgentUserCheck(t *testing.T) {
	_, envFile := chatEnv(t)
	t.Setenv("AGENT_USER", "no-such-agent-user-here")
	report, out := doctorJSON(t, envFile)
	found := false
	for _, c := range report.Checks {
		if c.Name == "agent-user" && !c.OK && !c.Warning && strings.Contains(c.Detail, "no-such-agent-user-here") {
			found = true
		}
	}
	if !found {
		t.Fatalf("doctor does not report the unknown AGENT_USER:\n%s", out)
	}
	if !strings.Contains(out, "an AGENT_USER setup that holds") {
		t.Errorf("the commands are not said to need a working AGENT_USER:\n%s", out)
	}
}

func TestChatWithUnknownAgentUserIsAConfigError(t *testing.T) {
	_, envFile := chatEnv(t)
	t.Setenv("AGENT_USER", "no-such-agent-user-here")
	var errOut bytes.Buffer
	code := run(context.Background(), []string{"chat", "--env-file", envFile, "-m", "hi"},
		streams{in: strings.NewReader(""), out: &bytes.Buffer{}, errOut: &errOut})
	if code != exitConfig {
		t.Fatalf("exit code %d, want %d (a configuration error)\n%s", code, exitConfig, errOut.String())
	}
}

func TestDoctorListsHeldScheduleChanges(t *testing.T) {
	configDir, envFile := chatEnv(t)
	if err := os.MkdirAll(configDir, 0o700); err != nil {
		t.Fatal(err)
	}
	state := `{"holds":[{"id":"ab12","file":"agents.md","before":{"body":"","exists":false},"after":{"body":"x","exists":true},` +
		`"tools":["Bash"],"channel":"900","message":"901","created":"` + time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC).Format(time.RFC3339) + `"}]}`
	if err := os.WriteFile(filepath.Join(configDir, hold.StateFile), []byte(state), 0o600); err != nil {
		t.Fatal(err)
	}
	report, out := doctorJSON(t, envFile)
	for _, c := range report.Checks {
		if c.Name == "schedule" && c.Warning && strings.Contains(c.Detail, "agents.md") && strings.Contains(c.Detail, "channel 900") {
			return
		}
	}
	t.Fatalf("doctor does not list the held change:\n%s", out)
}

func TestDoctorDescribesTheInbox(t *testing.T) {
	configDir, envFile := chatEnv(t)
	in, err := inbox.Open(filepath.Join(configDir, gateway.InboxFile), inbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for id := uint64(1); id <= 3; id++ {
		if err := in.Add(queue.Event{ID: id, Kind: queue.KindMessage, ChannelID: "1"}); err != nil {
			t.Fatal(err)
		}
	}
	in.Started(1)
	in.Finish(2, inbox.Failed)
	in.Close()
	report, out := doctorJSON(t, envFile)
	for _, c := range report.Checks {
		if c.Name == "inbox" && c.OK && strings.Contains(c.Detail, "3 events kept, 1 waiting, 1 running, 1 failed") {
			return
		}
	}
	t.Fatalf("doctor does not describe the inbox:\n%s", out)
}
