package gateway

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/files"
)

// fakeAnnouncer records what the bot would post.
type fakeAnnouncer struct{ posted [][]files.Outgoing }

func (f *fakeAnnouncer) Announce(_ context.Context, _, _ string, attached []files.Outgoing) error {
	f.posted = append(f.posted, attached)
	return nil
}

// An IPC message's file is checked when the watcher resolves it and read
// again through the guard when it is posted: a file the agent rewrote in
// between with a secret in it is not uploaded, and what is uploaded is
// the bytes that read allowed.
func TestIPCPostReadsFilesThroughTheGuard(t *testing.T) {
	const secret = "discord-token-0123456789"
	root := t.TempDir()
	path := filepath.Join(root, "report.txt")
	if err := os.WriteFile(path, []byte("weekly numbers"), 0o600); err != nil {
		t.Fatal(err)
	}
	guard := &files.Guard{Secrets: func() []string { return []string{secret} }}
	ipcf := ipcFiles{roots: func() []string { return []string{root} }, limit: 1 << 20, guard: guard}
	bot := &fakeAnnouncer{}
	post := announce{bot, ipcf}

	resolved, err := ipcf.resolve("report.txt")
	if err != nil {
		t.Fatal(err)
	}
	if err := post.Post(context.Background(), "1", "here", []string{resolved}); err != nil {
		t.Fatal(err)
	}
	if len(bot.posted) != 1 || len(bot.posted[0]) != 1 {
		t.Fatalf("posted %v, want one message with one file", bot.posted)
	}
	if diff := cmp.Diff("weekly numbers", string(bot.posted[0][0].Data)); diff != "" {
		t.Errorf("uploaded bytes (-want +got):\n%s", diff)
	}

	// Between the watcher's check and the post, the agent rewrites it.
	resolved, err = ipcf.resolve("report.txt")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("token: "+secret), 0o600); err != nil {
		t.Fatal(err)
	}
	err = post.Post(context.Background(), "1", "here", []string{resolved})
	if !errors.Is(err, files.ErrSecret) {
		t.Errorf("post after the rewrite: %v, want %v", err, files.ErrSecret)
	}
	if len(bot.posted) != 1 {
		t.Errorf("the rewritten file was posted: %d messages", len(bot.posted))
	}
}

// No file the gateway uploads may carry the transcription key: it is a
// secret of the gateway's like the bot token.
func TestSecretsOfIncludeTheTranscriptionKey(t *testing.T) {
	cfg := &config.Config{DiscordToken: "discord-token-0123456789", TranscribeAPIKey: "transcribe-key-0123456789"}
	got := secretsOf(cfg, nil)()
	for _, want := range []string{cfg.DiscordToken, cfg.TranscribeAPIKey} {
		if !slices.Contains(got, want) {
			t.Errorf("secretsOf = %q, want %q among them", got, want)
		}
	}
}
