// Package actions lets the agent act on Discord: it writes action blocks
// in its reply,
//
//	<discord-action>{"type":"channelCreate","name":"standup"}</discord-action>
//
// and the gateway takes them out of the text, checks each against what is
// enabled for the event, runs it and reports one "Done:" or "Failed:" line
// per action after the reply.
//
// Parse and Decode are pure. Only the agent's own final text is parsed:
// text the agent quotes (a webhook's payload, a fetched message, a file)
// reaches Discord as text, never as an action.
package actions

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
)

// The tags around an action.
const (
	OpenTag  = "<discord-action>"
	CloseTag = "</discord-action>"
)

// Block is one action block as found in a reply.
type Block struct {
	// Raw is the JSON between the tags, as written.
	Raw string
	// Err says why the block could not be read; Raw may then be partial.
	Err error
}

// Errors of unreadable blocks.
var (
	ErrNotJSON   = errors.New("not a JSON object")
	ErrNotClosed = errors.New("no closing " + CloseTag)
)

// Parse finds the action blocks in text and returns the text without them
// and the blocks in order. Blocks inside code (a fenced code block, or an
// inline code span) are examples the agent shows, not actions: they stay in
// the text and do not run. A block that is not a JSON object, or has no
// closing tag, is returned with Err set and removed from the text all the
// same (up to its closing tag, or to the end of its line), so that no half
// action reaches the channel. Blank lines left where blocks were are
// collapsed. Parse is pure.
func Parse(text string) (clean string, blocks []Block) {
	if !strings.Contains(text, OpenTag) {
		return text, nil
	}
	var out strings.Builder
	var fence fenceState
	rest := text
	for len(rest) > 0 {
		line, next, hasNL := strings.Cut(rest, "\n")
		if fence.step(line) {
			out.WriteString(line)
			if hasNL {
				out.WriteByte('\n')
			}
			rest = next
			continue
		}
		i := openOutsideCode(line)
		if i < 0 {
			out.WriteString(line)
			if hasNL {
				out.WriteByte('\n')
			}
			rest = next
			continue
		}
		// A block starts on this line; it may run over several lines.
		out.WriteString(line[:i])
		after := rest[i+len(OpenTag):]
		b, consumed := readBlock(after)
		blocks = append(blocks, b)
		rest = after[consumed:]
	}
	return tidy(out.String()), blocks
}

// readBlock reads one block's JSON and closing tag from s, which follows
// an opening tag, and returns the block and how many bytes it took.
func readBlock(s string) (Block, int) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var obj map[string]json.RawMessage
	if err := dec.Decode(&obj); err == nil && obj != nil {
		end := int(dec.InputOffset())
		tail := s[end:]
		trimmed := strings.TrimLeft(tail, " \t\r\n")
		skipped := len(tail) - len(trimmed)
		raw := strings.TrimSpace(s[:end])
		if strings.HasPrefix(trimmed, CloseTag) {
			return Block{Raw: raw}, end + skipped + len(CloseTag)
		}
		return Block{Raw: raw, Err: ErrNotClosed}, end
	}
	// Not JSON: up to the closing tag if there is one, else the line.
	if j := strings.Index(s, CloseTag); j >= 0 {
		return Block{Raw: strings.TrimSpace(s[:j]), Err: ErrNotJSON}, j + len(CloseTag)
	}
	j := strings.IndexByte(s, '\n')
	if j < 0 {
		j = len(s)
	}
	return Block{Raw: strings.TrimSpace(s[:j]), Err: ErrNotClosed}, j
}

// openOutsideCode returns the index of the first opening tag in line that
// is not inside an inline code span, or -1.
func openOutsideCode(line string) int {
	inCode := 0 // length of the backtick run that opened the span
	for i := 0; i < len(line); {
		if line[i] == '`' {
			n := 1
			for i+n < len(line) && line[i+n] == '`' {
				n++
			}
			switch {
			case inCode == 0 && strings.Contains(line[i+n:], strings.Repeat("`", n)):
				inCode = n
			case inCode == n:
				inCode = 0
			}
			i += n
			continue
		}
		if inCode == 0 && strings.HasPrefix(line[i:], OpenTag) {
			return i
		}
		i++
	}
	return -1
}

// tidy removes the blank lines and trailing spaces blocks leave behind.
func tidy(s string) string {
	lines := strings.Split(s, "\n")
	var out []string
	blank := 0
	for _, l := range lines {
		l = strings.TrimRight(l, " \t")
		if l == "" {
			blank++
			if blank > 1 {
				continue
			}
		} else {
			blank = 0
		}
		out = append(out, l)
	}
	return strings.TrimSpace(strings.Join(out, "\n"))
}

// fenceState tracks fenced code blocks (``` or ~~~, three or more) line by
// line, as CommonMark opens and closes them.
type fenceState struct {
	char byte
	n    int
}

// step reports whether line is inside a fence or is a fence line.
func (f *fenceState) step(line string) bool {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 {
		return f.n > 0
	}
	if f.n == 0 {
		if c, n := fenceRun(t); n >= 3 && !(c == '`' && strings.ContainsRune(t[n:], '`')) {
			f.char, f.n = c, n
			return true
		}
		return false
	}
	if c, n := fenceRun(t); c == f.char && n >= f.n && strings.TrimSpace(t[n:]) == "" {
		f.char, f.n = 0, 0
	}
	return true
}

func fenceRun(s string) (byte, int) {
	if s == "" || (s[0] != '`' && s[0] != '~') {
		return 0, 0
	}
	n := 0
	for n < len(s) && s[n] == s[0] {
		n++
	}
	return s[0], n
}

// compact is the JSON of a block on one line, for logs and reports.
func compact(raw string) string {
	var b bytes.Buffer
	if json.Compact(&b, []byte(raw)) != nil {
		return raw
	}
	return b.String()
}
