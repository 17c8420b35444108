package discord

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentgateway/gateway/internal/reply"
)

func TestPlanReplyCapsMessagesAndAttachesTheAnswer(t *testing.T) {
	line := "a line of the answer, with words to split at.\n"
	long := func(chars int) string { return strings.Repeat(line, chars/len(line)+1)[:chars] }
	tests := []struct {
		name        string
		text        string
		max, upload int
		// messages is how many parts; file what the last one attaches.
		messages int
		file     string
		notice   string
	}{
		{name: "blank", text: " \n ", max: 10, upload: 1 << 20},
		{name: "short", text: "hello", max: 10, upload: 1 << 20, messages: 1},
		{name: "exactly max messages", text: long(3 * 1900), max: 3, upload: 1 << 20, messages: 3},
		{name: "one message too many", text: long(4 * 1990), max: 3, upload: 1 << 20, messages: 3,
			file: long(4 * 1990), notice: "The answer was 7,960 characters long"},
		{name: "10 MiB answer, default cap", text: long(10 << 20), max: 10, upload: 20 << 20, messages: 10,
			file: long(10 << 20), notice: "The answer was 10,485,760 characters long"},
		{name: "cap of one", text: long(5000), max: 1, upload: 1 << 20, messages: 1,
			file: long(5000), notice: "the whole answer is attached as answer.md"},
		{name: "larger than the upload limit", text: long(100_000), max: 2, upload: 10_000, messages: 2,
			// Cut after the last line break within the limit.
			file: long(100_000)[:10_000/len(line)*len(line)],
			notice: "answer.md holds its first " + thousands(10_000/len(line)*len(line)) +
				" characters (Discord's upload limit is 10,000 bytes); the rest was cut"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parts := planReply(tt.text, tt.max, tt.upload)
			if len(parts) != tt.messages {
				t.Fatalf("%d messages, want %d", len(parts), tt.messages)
			}
			for i, p := range parts {
				if n := utf8.RuneCountInString(p.content); n == 0 || n > reply.DiscordLimit {
					t.Errorf("message %d has %d characters", i, n)
				}
				if len(p.files) > 0 && i != len(parts)-1 {
					t.Errorf("message %d of %d has a file; only the last may", i, len(parts))
				}
			}
			if tt.messages == 0 {
				return
			}
			last := parts[len(parts)-1]
			if tt.file == "" {
				if len(last.files) > 0 {
					t.Fatalf("a reply that fits has a file (%d bytes)", len(last.files[0].data))
				}
				var b strings.Builder
				for _, p := range parts {
					b.WriteString(p.content)
				}
				if strings.ReplaceAll(b.String(), "\n", "") != strings.ReplaceAll(tt.text, "\n", "") {
					t.Error("the messages do not carry the whole answer")
				}
				return
			}
			if len(last.files) != 1 {
				t.Fatalf("a capped reply attaches %d files, want 1", len(last.files))
			}
			if last.files[0].name != AnswerFile {
				t.Errorf("file name = %q, want %q", last.files[0].name, AnswerFile)
			}
			if string(last.files[0].data) != tt.file {
				t.Errorf("file holds %d bytes, want %d", len(last.files[0].data), len(tt.file))
			}
			if len(last.files[0].data) > tt.upload {
				t.Errorf("file of %d bytes is over the upload limit %d", len(last.files[0].data), tt.upload)
			}
			if !strings.Contains(last.content, tt.notice) {
				t.Errorf("last message = %q, want it to contain %q", last.content, tt.notice)
			}
			// The messages before it are the answer's beginning, in order.
			chunks := reply.Split(tt.text, reply.DiscordLimit)
			for i, p := range parts[:len(parts)-1] {
				if p.content != chunks[i] {
					t.Errorf("message %d is not chunk %d of the answer", i, i)
				}
			}
		})
	}
}

// An attachment cut at the upload limit never splits a character.
func TestPlanReplyCutsTheFileAtACharacter(t *testing.T) {
	text := strings.Repeat("日本語のテキスト", 2000) // no line breaks; 3-byte runes
	for limit := 1000; limit < 1010; limit++ {
		parts := planReply(text, 1, limit)
		data := parts[0].files[0].data
		if len(data) > limit || !utf8.Valid(data) || !strings.HasPrefix(text, string(data)) {
			t.Fatalf("limit %d: file of %d bytes, valid UTF-8 %v", limit, len(data), utf8.Valid(data))
		}
		if want := fmt.Sprintf("first %s characters", thousands(utf8.RuneCount(data))); !strings.Contains(parts[0].content, want) {
			t.Errorf("limit %d: notice %q lacks %q", limit, parts[0].content, want)
		}
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 7: "7", 999: "999", 1000: "1,000", 10485760: "10,485,760", -1234: "-1,234"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}
