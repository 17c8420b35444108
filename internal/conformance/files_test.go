//go:build conformance

package conformance

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/google/go-cmp/cmp"

	"github.com/agentgateway/gateway/internal/fakeapi"
	"github.com/agentgateway/gateway/internal/fakediscord"
)

// tinyPNG is a valid 2x2 PNG, four different pixels.
func tinyPNG(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 2, 2))
	img.Set(0, 0, color.RGBA{R: 255, A: 255})
	img.Set(1, 0, color.RGBA{G: 255, A: 255})
	img.Set(0, 1, color.RGBA{B: 255, A: 255})
	img.Set(1, 1, color.RGBA{R: 255, G: 255, B: 255, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// replyTo returns the bot's message replying to prompt whose content
// contains text.
func replyTo(fd *fakediscord.Server, ch discord.ChannelID, prompt discord.MessageID, text string) (fakediscord.Message, bool) {
	for _, m := range fd.BotMessages(ch) {
		if m.Reference != nil && m.Reference.MessageID == prompt && strings.Contains(m.Content, text) {
			return m, true
		}
	}
	return fakediscord.Message{}, false
}

// imageMessage returns the first user message of req holding an image
// block, and that block.
func imageMessage(req fakeapi.Request) (fakeapi.Message, fakeapi.Block, bool) {
	for _, m := range req.Messages() {
		if m.Role != "user" {
			continue
		}
		for _, b := range m.Blocks {
			if b.Type == "image" {
				return m, b, true
			}
		}
	}
	return fakeapi.Message{}, fakeapi.Block{}, false
}

// loggedEvent returns the event id of the first JSON log line whose
// message is msg.
func loggedEvent(logs, msg string) (uint64, bool) {
	for _, line := range strings.Split(logs, "\n") {
		var l struct {
			Message string  `json:"message"`
			Event   *uint64 `json:"event"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Message == msg && l.Event != nil {
			return *l.Event, true
		}
	}
	return 0, false
}

// A PNG attached to a Discord prompt reaches the model as an image: the
// built gateway saves it under WORK_DIR/.gateway/attachments/<message id>/,
// names that path in the prompt, and writes the prompt to the warm claude
// process with an image block that claude passes on to the Messages API.
func TestConformanceClaudeImageAttachment(t *testing.T) {
	bin := buildGateway(t)
	work := t.TempDir()
	configDir, workDir := filepath.Join(work, "config"), filepath.Join(work, "agent")
	for _, d := range []string{configDir, workDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	pic := tinyPNG(t)
	api := fakeapi.StartAnthropic(t, fakeapi.Text("Four coloured pixels."))
	fd := fakediscord.Start(t)
	_, channel := fd.AddGuild("conformance")
	alice := fd.User("alice")
	gatewayRun(t, bin, work, gatewayEnv(t, fd, api.URL(), configDir, "WORK_DIR="+workDir), api)
	fd.Wait(t, "the bot to connect", 30*time.Second, fd.Connected)

	start := time.Now()
	prompt := fd.PostFiles(channel, alice, fakediscord.Mention(fd.Bot)+" What is in this picture?",
		[]fakediscord.Upload{{Name: "dot.png", ContentType: "image/png", Data: pic}}, fd.Bot)
	fd.Wait(t, "the answer", 90*time.Second, func() bool {
		_, ok := replyTo(fd, channel, prompt.ID, "Four coloured pixels.")
		return ok
	})
	t.Logf("prompt with an image -> answer: %v", time.Since(start))

	if n := fd.Downloads(); n != 1 {
		t.Errorf("the attachment was downloaded %d times, want 1", n)
	}
	rel := filepath.Join(".gateway", "attachments", prompt.ID.String(), "dot.png")
	if saved, err := os.ReadFile(filepath.Join(workDir, rel)); err != nil || !bytes.Equal(saved, pic) {
		t.Errorf("%s in WORK_DIR: %v, %d bytes; want the %d uploaded", rel, err, len(saved), len(pic))
	}

	main := api.MainRequests()
	if len(main) != 1 || api.Exhausted() != 0 {
		t.Fatalf("got %d main requests (%d past the script), want 1", len(main), api.Exhausted())
	}
	msg, img, ok := imageMessage(main[0])
	if !ok {
		t.Fatalf("no image block in the request claude sent:\n%s", flatten(main[0]))
	}
	want := &fakeapi.Source{Type: "base64", MediaType: "image/png", Data: base64.StdEncoding.EncodeToString(pic)}
	if diff := cmp.Diff(want, img.Source); diff != "" {
		t.Errorf("the image block's source (-want +got):\n%s", diff)
	}
	for _, s := range []string{"What is in this picture?", rel, "an image: look at it"} {
		if !strings.Contains(msg.Text, s) {
			t.Errorf("the text beside the image does not say %q:\n%s", s, msg.Text)
		}
	}
	var types []string
	for _, b := range msg.Blocks {
		types = append(types, b.Type)
	}
	t.Logf("the user message with the image: blocks %v", types)
}

// A file the agent writes into WORK_DIR/.gateway/outbox goes up with its
// reply: the built gateway uploads it on the answer message and moves it
// to .gateway/sent/<event id>/, leaving the outbox empty.
func TestConformanceClaudeOutboxUpload(t *testing.T) {
	bin := buildGateway(t)
	work := t.TempDir()
	configDir, workDir := filepath.Join(work, "config"), filepath.Join(work, "agent")
	for _, d := range []string{configDir, workDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	const content = "hello from the agent\n"
	outbox := filepath.Join(workDir, ".gateway", "outbox")
	api := fakeapi.StartAnthropic(t,
		fakeapi.ToolUse("Write", map[string]any{"file_path": filepath.Join(outbox, "report.txt"), "content": content}),
		fakeapi.Text("The report is attached."),
	)
	fd := fakediscord.Start(t)
	_, channel := fd.AddGuild("conformance")
	alice := fd.User("alice")
	logs, _ := gatewayRun(t, bin, work, gatewayEnv(t, fd, api.URL(), configDir, "WORK_DIR="+workDir), api)
	fd.Wait(t, "the bot to connect", 30*time.Second, fd.Connected)

	start := time.Now()
	prompt := fd.Post(channel, alice, fakediscord.Mention(fd.Bot)+" Write me a report.", fd.Bot)
	var answer fakediscord.Message
	fd.Wait(t, "the answer", 90*time.Second, func() bool {
		var ok bool
		answer, ok = replyTo(fd, channel, prompt.ID, "The report is attached.")
		return ok
	})
	t.Logf("prompt -> answer with the file: %v", time.Since(start))

	var got []fakediscord.File
	for _, f := range answer.Files {
		got = append(got, fakediscord.File{Name: f.Name, Data: f.Data})
	}
	if diff := cmp.Diff([]fakediscord.File{{Name: "report.txt", Data: []byte(content)}}, got); diff != "" {
		t.Errorf("files uploaded with the answer (-want +got):\n%s", diff)
	}
	main := api.MainRequests()
	if len(main) != 2 || api.Exhausted() != 0 {
		t.Fatalf("got %d main requests (%d past the script), want 2", len(main), api.Exhausted())
	}
	if res, ok := warmToolResult(main[1]); !ok || res.IsError {
		t.Errorf("the Write's result = %+v (found %v); want a success", res, ok)
	}

	event, ok := loggedEvent(logs.String(), "files taken from the outbox for the reply")
	if !ok {
		t.Fatal("no event id logged with the files taken from the outbox")
	}
	sent := filepath.Join(workDir, ".gateway", "sent", strconv.FormatUint(event, 10), "report.txt")
	if b, err := os.ReadFile(sent); err != nil || string(b) != content {
		t.Errorf("%s: %q, %v; want the report", sent, b, err)
	}
	if left, err := os.ReadDir(outbox); err != nil || len(left) != 0 {
		t.Errorf("the outbox after the reply: %v, %v; want it empty", left, err)
	}
}
