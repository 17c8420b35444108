package cli

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/google/go-cmp/cmp"

	"github.com/agentgateway/gateway/internal/dirlock"
	"github.com/agentgateway/gateway/internal/fakediscord"
	"github.com/agentgateway/gateway/internal/ipc"
)

// sendGateway runs `gateway run` against a fake Discord with one allowed
// channel and returns the fake, that channel and the .env to send with.
func sendGateway(t *testing.T) (*fakediscord.Server, discord.ChannelID, string) {
	t.Helper()
	fd := fakediscord.Start(t)
	_, ch := fd.AddGuild("home")
	dir := t.TempDir()
	env := filepath.Join(dir, ".env")
	configDir := filepath.Join(dir, "config")
	if err := os.WriteFile(env, []byte(strings.Join([]string{
		"DISCORD_BOT_TOKEN=" + fakediscord.DefaultToken,
		"ANTHROPIC_API_KEY=sk-ant-test",
		"DISCORD_API_BASE_URL=" + fd.APIBaseURL(),
		"DISCORD_GATEWAY_URL=" + fd.GatewayURL(),
		"AGENT_CLI_PATH=" + fakeClaude(t, "text.jsonl"),
		"CONFIG_DIR=" + configDir,
		"PERMISSION_MODE=acceptEdits",
		"ALLOWED_CHANNEL_IDS=" + ch.String(),
	}, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	errOut := &lockedWriter{}
	go func() {
		done <- runRun(ctx, runOptions{io: streams{out: io.Discard, errOut: errOut}, envFile: env})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("run did not stop")
		}
	})
	fd.Wait(t, "the gateway to connect and watch its IPC folder", 30*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(configDir, "ipc", ipc.OutboundDir))
		return fd.Connected() && err == nil
	})
	return fd, ch, env
}

func TestSendPostsThroughTheRunningGateway(t *testing.T) {
	fd, ch, env := sendGateway(t)
	report := filepath.Join(t.TempDir(), "report.txt")
	if err := os.WriteFile(report, []byte("all green"), 0o600); err != nil {
		t.Fatal(err)
	}

	code, _, stderr := runCmd(t, "--env-file", env, "send", "--channel", ch.String(), "--file", report, "Backup", "finished")
	if code != exitOK {
		t.Fatalf("send exited %d, want %d: %s", code, exitOK, stderr)
	}
	posts := fd.BotMessages(ch)
	if len(posts) != 1 {
		t.Fatalf("the bot posted %d messages, want 1", len(posts))
	}
	type upload struct{ Name, Data string }
	var got []upload
	for _, f := range posts[0].Files {
		got = append(got, upload{f.Name, string(f.Data)})
	}
	if diff := cmp.Diff([]upload{{"report.txt", "all green"}}, got); diff != "" {
		t.Errorf("uploaded files (-want +got):\n%s", diff)
	}
	if posts[0].Content != "Backup finished" {
		t.Errorf("posted %q, want %q", posts[0].Content, "Backup finished")
	}
	outbound := filepath.Join(filepath.Dir(env), "config", "ipc", ipc.OutboundDir)
	if left, _ := os.ReadDir(outbound); len(left) != 0 {
		t.Errorf("outbound/ still holds %v after the post", left)
	}

	// Text from standard input.
	var out, errOut strings.Builder
	code = run(context.Background(), []string{"--env-file", env, "send", "--channel", ch.String(), "-"},
		streams{in: strings.NewReader("disk 91% full\n"), out: &out, errOut: &errOut})
	if code != exitOK {
		t.Fatalf("send - exited %d: %s", code, errOut.String())
	}
	if posts := fd.BotMessages(ch); len(posts) != 2 || posts[1].Content != "disk 91% full" {
		t.Errorf("posts after send -: %+v", posts)
	}
}

// A message the gateway refuses (a channel it may not post in) ends in
// failed/, and send exits 1 with the watcher's reason.
func TestSendReportsTheGatewaysRefusal(t *testing.T) {
	fd, _, env := sendGateway(t)
	const elsewhere = "123456789012345678"
	code, _, stderr := runCmd(t, "--env-file", env, "send", "--channel", elsewhere, "hello")
	if code != exitError {
		t.Fatalf("send exited %d, want %d: %s", code, exitError, stderr)
	}
	if !strings.Contains(stderr, "channel "+elsewhere+" is not allowed") {
		t.Errorf("stderr lacks the reason: %s", stderr)
	}
	if n := fd.BotMessageCount(); n != 0 {
		t.Errorf("the bot posted %d messages", n)
	}
}

// What send refuses itself, before writing anything, exits 2 and says
// why.
func TestSendRefusesUsageErrors(t *testing.T) {
	dir := t.TempDir()
	configDir := filepath.Join(dir, "config")
	outbound := filepath.Join(configDir, "ipc", ipc.OutboundDir)
	if err := os.MkdirAll(outbound, 0o700); err != nil {
		t.Fatal(err)
	}
	env := filepath.Join(dir, ".env")
	if err := os.WriteFile(env, []byte("CONFIG_DIR="+configDir+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.bin")
	if err := os.WriteFile(big, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, 11<<20); err != nil {
		t.Fatal(err)
	}
	const ch = "123456789012345678"
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no channel", []string{"hi"}, "--channel is required"},
		{"not a snowflake", []string{"--channel", "general", "hi"}, `--channel "general" is not a Discord channel id (a number such as 123456789012345678;`},
		{"too short", []string{"--channel", "1234567890123456", "hi"}, `--channel "1234567890123456" is not a Discord channel id`},
		{"nothing to send", []string{"--channel", ch}, "nothing to send"},
		{"no time to wait", []string{"--channel", ch, "--timeout", "0s", "hi"}, "--timeout 0s"},
		{"bad timeout", []string{"--channel", ch, "--timeout", "soon", "hi"}, `invalid argument "soon" for "--timeout"`},
		{"file too large", []string{"--channel", ch, "--file", big}, "larger than Discord's upload limit"},
		{"missing file", []string{"--channel", ch, "--file", filepath.Join(dir, "nope")}, "cannot attach"},
		{"unknown flag", []string{"--chanel", ch, "hi"}, "unknown flag"},
		{"gateway never ran", []string{"--channel", ch, "hi"}, "the gateway is not running"},
		{"elsewhere", []string{"--ipc-dir", filepath.Join(dir, "elsewhere", "ipc"), "--channel", ch, "hi"}, "no `gateway run` has used"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCmd(t, append([]string{"--env-file", env, "send"}, tc.args...)...)
			if code != exitConfig {
				t.Errorf("exit %d, want %d: %s", code, exitConfig, stderr)
			}
			if !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr lacks %q: %s", tc.want, stderr)
			}
			if strings.Contains(stderr, "channel_id") {
				t.Errorf("stderr names the IPC file's field instead of the flag: %s", stderr)
			}
		})
	}

	// A lock file nobody holds: a gateway ran here once and stopped.
	if err := os.WriteFile(filepath.Join(configDir, dirlock.FileName), []byte("1 gateway run\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCmd(t, "--env-file", env, "send", "--channel", ch, "hi")
	if code != exitConfig || !strings.Contains(stderr, "start `gateway run`") {
		t.Errorf("stopped gateway: exit %d: %s", code, stderr)
	}

	// `gateway chat` holds CONFIG_DIR but posts nothing from the folder.
	lock, err := dirlock.Acquire(configDir, "gateway chat")
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	code, _, stderr = runCmd(t, "--env-file", env, "send", "--channel", ch, "hi")
	if code != exitConfig || !strings.Contains(stderr, "held by `gateway chat`") {
		t.Errorf("gateway chat: exit %d: %s", code, stderr)
	}
	if left, _ := os.ReadDir(outbound); len(left) != 0 {
		t.Errorf("a refused send left %v in outbound/", left)
	}
}

// With the gateway holding the folder but not posting, send waits for
// --timeout and exits 3; the message stays queued. --no-wait returns at
// once.
func TestSendTimesOutAndNoWait(t *testing.T) {
	dir := t.TempDir()
	ipcDir := filepath.Join(dir, "ipc")
	outbound := filepath.Join(ipcDir, ipc.OutboundDir)
	if err := os.MkdirAll(outbound, 0o700); err != nil {
		t.Fatal(err)
	}
	lock, err := dirlock.Acquire(dir, "gateway run")
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	const ch = "123456789012345678"

	code, stdout, stderr := runCmd(t, "send", "--ipc-dir", ipcDir, "--channel", ch, "--no-wait", "queued only")
	if code != exitOK || !strings.HasPrefix(stdout, "queued send-") {
		t.Fatalf("--no-wait: exit %d, stdout %q: %s", code, stdout, stderr)
	}
	name := strings.TrimSpace(strings.TrimPrefix(stdout, "queued "))
	data, err := os.ReadFile(filepath.Join(outbound, name))
	if err != nil {
		t.Fatal(err)
	}
	msg, err := ipc.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ipc.Message{ChannelID: ch, Text: "queued only"}, msg); diff != "" {
		t.Errorf("queued message (-want +got):\n%s", diff)
	}

	code, _, stderr = runCmd(t, "send", "--ipc-dir", filepath.Join(dir, "other"), "--channel", ch, "hi")
	if code != exitConfig || !strings.Contains(stderr, "there is no IPC folder") {
		t.Errorf("no IPC folder: exit %d: %s", code, stderr)
	}

	code, _, stderr = runCmd(t, "send", "--ipc-dir", ipcDir, "--channel", ch, "--timeout", "1ms", "waits")
	if code != exitTimeout || !strings.Contains(stderr, "stays queued") {
		t.Errorf("timeout: exit %d, want %d: %s", code, exitTimeout, stderr)
	}
}

// The agent's CLI runs in CONFIG_DIR without a CONFIG_DIR variable or a
// readable .env: send finds the IPC folder in its working directory.
func TestSendFindsTheIPCFolderInTheWorkingDirectory(t *testing.T) {
	dir := t.TempDir()
	outbound := filepath.Join(dir, "ipc", ipc.OutboundDir)
	if err := os.MkdirAll(outbound, 0o700); err != nil {
		t.Fatal(err)
	}
	lock, err := dirlock.Acquire(dir, "gateway run")
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	t.Setenv("CONFIG_DIR", "")
	os.Unsetenv("CONFIG_DIR")
	t.Chdir(dir)

	code, stdout, stderr := runCmd(t, "send", "--channel", "123456789012345678", "--no-wait", "from the agent")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	name := strings.TrimSpace(strings.TrimPrefix(stdout, "queued "))
	if _, err := os.Stat(filepath.Join(outbound, name)); err != nil {
		t.Errorf("the message is not in the working directory's IPC folder: %v", err)
	}
}

// The agent under AGENT_USER may not look into failed/: it reads the
// receipt the gateway left for its message.
func TestSendReadsTheReceipt(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name, receipt string
		code          int
		says          string
	}{
		{"posted", ipc.ReceiptPosted + "\n", 0, ""},
		{"refused", ipc.ReceiptRefused + "channel 1 is not allowed\n", exitError, "refused the message: channel 1 is not allowed"},
		{"unexpected", "maybe\n", exitUnknown, `says "maybe"`},
		{"none", "", exitUnknown, "no receipt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "missing")
			if tc.receipt != "" {
				path = write(tc.name, tc.receipt)
			}
			err := receiptOutcome(path)
			var ec *exitCodeError
			switch {
			case tc.code == 0 && err != nil:
				t.Errorf("receiptOutcome = %v, want nil", err)
			case tc.code != 0 && (!errors.As(err, &ec) || ec.code != tc.code || !strings.Contains(ec.err.Error(), tc.says)):
				t.Errorf("receiptOutcome = %v, want exit %d saying %q", err, tc.code, tc.says)
			}
		})
	}
}
