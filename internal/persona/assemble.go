package persona

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"strings"
	"unicode"
)

// The prompt format.
//
// A section is "## <Name>\n\n<body>\n\n". The body is the file's content,
// valid UTF-8, without leading blank lines or trailing white space, with two
// changes that keep the section headings unambiguous (R22.5):
//
//   - Outside fenced code blocks, every ATX heading of level 2 to 6 (up to
//     three spaces, then "##" to "######", then a space, a tab or the end of
//     the line) is demoted by one level: "## Cron Jobs" becomes
//     "### Cron Jobs". The file's own structure survives one level deeper
//     ("######" becomes plain text). "# Title" lines stay: they never look
//     like a section heading. Code blocks are left exactly as they are.
//   - A code fence still open at the end of the file is closed, so it cannot
//     swallow the sections after it.
//
// SectionNames tracks fences the same way and reads every "## " line outside
// them as a section heading, so it finds exactly the sections Assemble wrote.

const preambleText = `You are running behind a chat gateway. The sections below are your configuration, read fresh from disk for this event. Headings inside a section are shown one level deeper than they are in the files.

Long-term memory: you may keep durable facts, decisions, IDs and lessons learned by updating the file %MEMORY% with your Edit tool, or your Write tool after reading the file first (other conversations may have added to it). Keep everything already in it, add each new fact as a short markdown bullet point, and keep the file valid markdown. Never store secrets there. Its current content is the "Long-Term Memory" section below.

Files: files the user attaches to a message are saved under .gateway/attachments/ in your working directory, and the message names them. To send the user a file (a report, an image, a patch), write it into .gateway/outbox/ in your working directory: it is attached to your reply, then moved to .gateway/sent/. Only regular files are sent, at most 10 per reply.`

// Assemble builds the system prompt: a preamble telling the agent how to
// update memory.md at memoryPath (made absolute, since the agent's working
// directory may differ), then each non-empty section of f in prompt order
// (Sections, then SkillsSection) as "## <Name>\n\n<body>\n\n"
// (R22.1-R22.4). Headings inside a body are demoted by one level outside
// code fences; see the format note above.
func Assemble(f Files, memoryPath string) string {
	if abs, err := filepath.Abs(memoryPath); err == nil {
		memoryPath = abs
	}
	pre := strings.Replace(preambleText, "%MEMORY%", memoryPath, 1)
	n := len(pre) + 2
	for _, name := range sectionOrder {
		n += len(name) + len(f[name]) + 16
	}
	var b strings.Builder
	b.Grow(n + n/64)
	b.WriteString(pre)
	b.WriteString("\n\n")
	for _, name := range sectionOrder {
		if c := body(f[name]); c != "" {
			writeSection(&b, name, c)
		}
	}
	return b.String()
}

// SectionNames returns the section headings of an assembled prompt in order:
// every line outside code fences that starts with "## ".
func SectionNames(prompt string) []string {
	var names []string
	var fence fenceState
	for len(prompt) > 0 {
		line, rest, _ := strings.Cut(prompt, "\n")
		prompt = rest
		if fence.step(line) {
			continue
		}
		if name, ok := strings.CutPrefix(line, "## "); ok {
			names = append(names, strings.TrimSpace(name))
		}
	}
	return names
}

// Hashes returns the SHA-256 (hex) of each section Assemble would include,
// by section name; sections that are absent or blank have no entry. A
// session remembers them to notice later edits (DESIGN decision 5).
func (f Files) Hashes() map[string]string {
	out := make(map[string]string, len(sectionOrder))
	for _, name := range sectionOrder {
		if c := body(f[name]); c != "" {
			out[name] = Hash(c)
		}
	}
	return out
}

// Hash is the hash of a section's text as Hashes records it.
func Hash(text string) string {
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:])
}

// Changes compares the section hashes a resumed session last saw (old) with
// f. When a section changed, appeared or disappeared it returns a marked
// note to put in front of the turn's prompt, carrying the current version of
// every changed section, and the names of the changed sections in prompt
// order (updated ones first, then removed ones). A nil old means the session's
// view is unknown: every present section is sent. Nothing changed gives "".
func Changes(old map[string]string, f Files) (text string, changed []string) {
	return ChangesFrom(old, f.Hashes(), f)
}

// ChangesFrom is Changes with f's hashes already computed (f.Hashes()).
func ChangesFrom(old, cur map[string]string, f Files) (text string, changed []string) {
	var updated, removed []string
	for _, name := range sectionOrder {
		h, now := cur[name]
		prev, before := old[name]
		switch {
		case now && (old == nil || !before || prev != h):
			updated = append(updated, name)
		case !now && before:
			removed = append(removed, name)
		}
	}
	if len(updated) == 0 && len(removed) == 0 {
		return "", nil
	}
	var b strings.Builder
	b.WriteString("[Gateway note: your configuration files changed since this conversation started.")
	if len(updated) > 0 {
		b.WriteString(" These sections replace the earlier versions in your system prompt:]\n\n")
		for _, name := range updated {
			writeSection(&b, name, body(f[name]))
		}
	} else {
		b.WriteString("]\n\n")
	}
	if len(removed) > 0 {
		b.WriteString("[Removed sections, disregard their earlier versions: ")
		b.WriteString(strings.Join(removed, ", "))
		b.WriteString("]\n")
	}
	b.WriteString("[End of gateway note]\n\n")
	return b.String(), append(updated, removed...)
}

// body returns content as it goes into a section: valid UTF-8, without
// leading blank lines and trailing white space. It is "" for blank content.
func body(content string) string {
	content = strings.ToValidUTF8(content, "\uFFFD")
	for {
		line, rest, found := strings.Cut(content, "\n")
		if !found || strings.TrimSpace(line) != "" {
			break
		}
		content = rest
	}
	return strings.TrimRightFunc(content, unicode.IsSpace)
}

// writeSection writes one section; c is a non-empty body.
func writeSection(b *strings.Builder, name, c string) {
	b.WriteString("## ")
	b.WriteString(name)
	b.WriteString("\n\n")
	var fence fenceState
	for len(c) > 0 {
		line, rest, found := strings.Cut(c, "\n")
		c = rest
		if !fence.step(line) {
			if at := headingAt(line); at >= 0 {
				b.WriteString(line[:at])
				b.WriteByte('#')
				line = line[at:]
			}
		}
		b.WriteString(line)
		if found {
			b.WriteByte('\n')
		}
	}
	if fence.open {
		b.WriteByte('\n')
		b.WriteString(strings.Repeat(string(fence.char), fence.size))
	}
	b.WriteString("\n\n")
}

// headingAt returns the index of the first '#' of an ATX heading of level 2
// to 6, or -1 when line is no such heading.
func headingAt(line string) int {
	i := indent(line)
	if i < 0 || i+1 >= len(line) || line[i] != '#' || line[i+1] != '#' {
		return -1
	}
	n := i
	for n < len(line) && line[n] == '#' {
		n++
	}
	if n-i > 6 {
		return -1
	}
	if n < len(line) && line[n] != ' ' && line[n] != '\t' && line[n] != '\r' {
		return -1
	}
	return i
}

// indent returns the number of leading spaces of line if it is at most 3,
// else -1 (the line is indented code in markdown).
func indent(line string) int {
	i := 0
	for i < len(line) && line[i] == ' ' {
		i++
		if i > 3 {
			return -1
		}
	}
	return i
}

// fenceState follows fenced code blocks (``` or ~~~, three or more, after
// at most three spaces) line by line.
type fenceState struct {
	open bool
	char byte
	size int
}

// step consumes one line and reports whether it is part of a fenced block:
// its opening or closing line or a line inside it.
func (s *fenceState) step(line string) bool {
	i := indent(line)
	if i < 0 {
		return s.open
	}
	rest := line[i:]
	if len(rest) < 3 || (rest[0] != '`' && rest[0] != '~') {
		return s.open
	}
	c := rest[0]
	n := 0
	for n < len(rest) && rest[n] == c {
		n++
	}
	if s.open {
		if c == s.char && n >= s.size && strings.Trim(rest[n:], " \t\r") == "" {
			s.open = false
		}
		return true
	}
	if n < 3 || (c == '`' && strings.IndexByte(rest[n:], '`') >= 0) {
		return false
	}
	*s = fenceState{open: true, char: c, size: n}
	return true
}
