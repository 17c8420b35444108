//go:build conformance

package conformance

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentgateway/gateway/internal/fakeapi"
)

// TestConformanceChatBinary runs the built gateway binary's chat command with
// the real claude CLI against the fake model API: the path a newcomer takes
// in the quick start.
func TestConformanceChatBinary(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "gateway")
	build := exec.Command("go", "build", "-o", bin, "../../cmd/gateway")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	api := fakeapi.StartAnthropic(t, fakeapi.Text("First reply."), fakeapi.Text("Second reply."))
	work := t.TempDir()
	configDir := filepath.Join(work, "config")
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + t.TempDir(),
		"CONFIG_DIR=" + configDir,
		"AGENT_CLI_PATH=" + cliBinary(t, "claude"),
		"PERMISSION_MODE=acceptEdits",
		"QUERY_TIMEOUT_MS=60000",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"CLAUDE_CODE_MAX_RETRIES=0",
		"DISABLE_AUTOUPDATER=1",
		"DISCORD_BOT_TOKEN=" + discordToken,
	}
	// The key and the base URL come from .env, as a user would set them.
	os.WriteFile(filepath.Join(work, ".env"), []byte("ANTHROPIC_API_KEY="+apiKey+"\nANTHROPIC_BASE_URL="+api.URL()+"\n"), 0o600)

	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "chat")
	cmd.Dir = work
	cmd.Env = env
	cmd.Stdin = strings.NewReader("Hello there.\nAnd again.\n")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("gateway chat: %v\nstderr:\n%s\n%s", err, stderr.String(), api.Summary())
	}
	if got, want := stdout.String(), "First reply.\nSecond reply.\n"; got != want {
		t.Errorf("stdout = %q, want %q\nstderr:\n%s", got, want, stderr.String())
	}
	main := api.MainRequests()
	if len(main) != 2 {
		t.Fatalf("%d main requests:\n%s", len(main), api.Summary())
	}
	if !strings.Contains(flatten(main[1]), "First reply.") {
		t.Errorf("the second line did not resume the chat's session:\n%s", flatten(main[1]))
	}
	if strings.Contains(stderr.String(), apiKey) || strings.Contains(stdout.String(), apiKey) {
		t.Error("the API key reached the terminal")
	}
	for _, f := range []string{"soul.md", "identity.md", "memory.md"} {
		if _, err := os.Stat(filepath.Join(configDir, f)); err != nil {
			t.Errorf("bootstrap did not create %s: %v", f, err)
		}
	}
}
