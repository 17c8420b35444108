package discord

import (
	"fmt"
	"mime"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agentgateway/gateway/internal/files"
	"github.com/agentgateway/gateway/internal/reply"
)

// DefaultUploadLimit is the largest file Discord takes from a bot in a
// guild without boosts (10 MiB since January 2025, webhooks and interaction
// responses included).
const DefaultUploadLimit = 10 << 20

// AnswerFile is the name of the attachment that carries an answer too long
// to post as messages.
const AnswerFile = "answer.md"

// part is one Discord message of a reply.
type part struct {
	content string
	// files are attached to the message.
	files []file
}

// file is an attachment: data, or a file of the agent's outbox read when
// the message is posted (it may be large; the outbox holds only its path).
type file struct {
	name string
	data []byte
	out  *files.Outgoing
}

// contentType is the type the file is uploaded with.
func (f file) contentType() string {
	if f.out == nil {
		return "text/markdown; charset=utf-8"
	}
	if t := mime.TypeByExtension(filepath.Ext(f.name)); t != "" {
		return t
	}
	return "application/octet-stream"
}

// size is what a part holds in memory, for the outbox's bound.
func (p part) size() int {
	n := len(p.content)
	for _, f := range p.files {
		n += len(f.data)
	}
	return n
}

// withFiles attaches the outbox's files to a reply's parts: to its last
// message when that has room (Discord takes MaxFilesPerMessage files per
// message), else to a message of their own.
func withFiles(parts []part, out []files.Outgoing) []part {
	if len(out) == 0 {
		return parts
	}
	fs := make([]file, len(out))
	for i := range out {
		fs[i] = file{name: out[i].Name, data: out[i].Data, out: &out[i]}
	}
	if n := len(parts); n > 0 && len(parts[n-1].files)+len(fs) <= files.MaxFilesPerMessage {
		parts[n-1].files = append(parts[n-1].files, fs...)
		return parts
	}
	return append(parts, part{files: fs})
}

// planReply cuts an answer into the messages that carry it: split at
// Discord's limit with code blocks kept well-formed (reply.Split), at most
// max messages. An answer that needs more is posted as its first max-1
// messages and a last one that says it was cut and attaches the whole
// answer as AnswerFile, or its first uploadLimit bytes (ending at a line
// break where one is near) when it is larger than that. Blank text gives no
// parts. planReply is pure.
func planReply(text string, max, uploadLimit int) []part {
	if max < 1 {
		max = 1
	}
	chunks := reply.Split(text, reply.DiscordLimit)
	if len(chunks) <= max {
		parts := make([]part, len(chunks))
		for i, c := range chunks {
			parts[i] = part{content: c}
		}
		return parts
	}
	parts := make([]part, 0, max)
	for _, c := range chunks[:max-1] {
		parts = append(parts, part{content: c})
	}
	total := utf8.RuneCountInString(text)
	data := text
	if len(data) > uploadLimit {
		data = data[:cutAt(data, uploadLimit)]
	}
	return append(parts, part{
		content: cutNotice(total, utf8.RuneCountInString(data), uploadLimit),
		files:   []file{{name: AnswerFile, data: []byte(data)}},
	})
}

// cutAt is where to cut s to at most limit bytes: at a rune boundary, and
// after a line break if there is one in the last quarter.
func cutAt(s string, limit int) int {
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	if nl := strings.LastIndexByte(s[:cut], '\n'); nl >= 0 && nl+1 > cut-cut/4 {
		cut = nl + 1
	}
	return cut
}

// cutNotice is the last message of a capped answer: how long the answer
// was and what the attachment holds.
func cutNotice(total, attached, uploadLimit int) string {
	if attached == total {
		return fmt.Sprintf("_(The answer was %s characters long, too long to post in full here: the whole answer is attached as %s.)_",
			thousands(total), AnswerFile)
	}
	return fmt.Sprintf("_(The answer was %s characters long, too long to post in full here, and too large to attach whole: %s holds its first %s characters (Discord's upload limit is %s); the rest was cut.)_",
		thousands(total), AnswerFile, thousands(attached), byteSize(uploadLimit))
}

// thousands formats n with comma separators: 1234567 -> "1,234,567".
func thousands(n int) string {
	s := strconv.Itoa(n)
	if n < 0 {
		return "-" + thousands(-n)
	}
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// byteSize formats a size in bytes for people: whole MiB when it is one,
// else bytes.
func byteSize(n int) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return thousands(n) + " bytes"
}
