package backends

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"
)

// A prompt with images goes to claude as a text block and one image block
// per image; an image too large or unreadable is left out (the prompt
// names its path); claude's echo of it is recognised by its text.
func TestUserMessageWithImages(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\nfake")
	line := userMessageWithImages("look", []Image{
		{Path: "a.png", MediaType: "image/png", Data: png},
		{Path: "b.png", MediaType: "image/png", Data: make([]byte, maxImageBytes+1)},
		{Path: "missing.jpg", MediaType: "image/jpeg"},
	}, zerolog.Nop())
	var msg struct {
		Type    string `json:"type"`
		Message struct {
			Role    string           `json:"role"`
			Content []map[string]any `json:"content"`
		} `json:"message"`
	}
	if err := json.Unmarshal(line, &msg); err != nil {
		t.Fatalf("not JSON: %v: %s", err, line)
	}
	want := []map[string]any{
		{"type": "text", "text": "look"},
		{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": base64.StdEncoding.EncodeToString(png)}},
	}
	if d := cmp.Diff(want, msg.Message.Content); d != "" || msg.Type != "user" || msg.Message.Role != "user" {
		t.Errorf("message (-want +got):\n%s", d)
	}
	// The echo claude prints with --replay-user-messages.
	var echo map[string]any
	json.Unmarshal(line, &echo)
	echo["isReplay"] = true
	b, _ := json.Marshal(echo)
	if text, ok := replayedText(b); !ok || text != "look" {
		t.Errorf("replayedText = %q, %v; want the prompt's text", text, ok)
	}
	if string(userMessageWithImages("plain", nil, zerolog.Nop())) != string(userMessage("plain")) {
		t.Errorf("a prompt without images changed shape")
	}
}

func TestIsolatedClaudeArgs(t *testing.T) {
	args := claudeArgs(Request{Isolated: true}, "")
	i := slices.Index(args, "--setting-sources")
	if !slices.Contains(args, "--strict-mcp-config") || i < 0 || args[i+1] != "project,local" {
		t.Errorf("isolated args = %q", args)
	}
	if slices.Contains(claudeArgs(Request{}, ""), "--strict-mcp-config") {
		t.Errorf("a normal run is isolated")
	}
}

// An image goes up only from the bytes the gateway saved and checked: its
// path is never opened again, so a file the agent swapped in for it (a
// link to a secret) does not reach the model.
func TestUserMessageImagesAreNotReadFromTheirPath(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret.png")
	os.WriteFile(secret, []byte("\x89PNG\r\n\x1a\nSECRET"), 0o600)
	line := userMessageWithImages("look", []Image{{Path: secret, MediaType: "image/png"}}, zerolog.Nop())
	if strings.Contains(string(line), base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\nSECRET"))) {
		t.Errorf("the image was read from its path: %s", line)
	}
}
