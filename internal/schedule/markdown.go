package schedule

import (
	"strings"
	"unicode/utf8"
)

// line is one line of a config file as the parsers see it.
type line struct {
	num int // 1-based line number in the original file
	// text is the line without HTML comments and trailing white space. In a
	// fenced code block it is the line exactly as written (minus trailing
	// white space): code is never read as structure.
	text string
	// code is true for a fenced code block's lines, fences included. Outside
	// an instruction they are skipped; inside one they are part of its text.
	code bool
}

// scan splits a config file into lines, drops HTML comments (which may span
// lines) and marks fenced code blocks. A comment or fence still open at the
// end of the file is reported: it hides everything after it.
func scan(file, text string) ([]line, []Problem) {
	text = strings.ToValidUTF8(text, string(utf8.RuneError))
	text = strings.TrimPrefix(text, "\uFEFF")
	var (
		lines       []line
		problems    []Problem
		fence       fenceState
		fenceLine   int
		inComment   bool
		commentLine int
	)
	for i, raw := range strings.Split(text, "\n") {
		num := i + 1
		raw = strings.TrimRight(raw, " \t\r")
		switch {
		case fence.open:
			fence.step(raw)
			lines = append(lines, line{num: num, text: raw, code: true})
		case !inComment && fence.step(raw):
			fenceLine = num
			lines = append(lines, line{num: num, text: raw, code: true})
		default:
			startedIn := inComment
			var visible string
			visible, inComment = stripComments(raw, inComment)
			if inComment && (!startedIn || strings.Contains(raw, "-->")) {
				commentLine = num
			}
			visible = strings.TrimRight(visible, " \t")
			if visible == "" && (startedIn || inComment || strings.Contains(raw, "<!--")) {
				continue // a line of comment only: not even a blank line
			}
			lines = append(lines, line{num: num, text: visible})
		}
	}
	if inComment {
		problems = append(problems, Problem{File: file, Line: commentLine,
			Message: "HTML comment is never closed (missing -->): the rest of the file is ignored"})
	}
	if fence.open {
		problems = append(problems, Problem{File: file, Line: fenceLine,
			Message: "code block is never closed: the rest of the file is ignored"})
	}
	return lines, problems
}

// stripComments removes the parts of s inside HTML comments. inComment says
// whether s starts inside a comment; the result says whether it ends inside
// one.
func stripComments(s string, inComment bool) (string, bool) {
	var b strings.Builder
	for s != "" {
		if inComment {
			_, after, found := strings.Cut(s, "-->")
			if !found {
				return b.String(), true
			}
			s, inComment = after, false
			continue
		}
		before, after, found := strings.Cut(s, "<!--")
		b.WriteString(before)
		if !found {
			break
		}
		s, inComment = after, true
	}
	return b.String(), inComment
}

// fenceState follows fenced code blocks (``` or ~~~, three or more, after at
// most three spaces of indentation) line by line, like CommonMark.
type fenceState struct {
	open bool
	char byte
	size int
}

// step consumes one line and reports whether it belongs to a fenced block:
// its opening or closing fence or a line inside it.
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
		if c == s.char && n >= s.size && strings.Trim(rest[n:], " \t") == "" {
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

// indent returns the number of leading spaces of s if it is at most 3, else
// -1 (markdown reads such a line as indented code, never as structure).
func indent(s string) int {
	i := 0
	for i < len(s) && s[i] == ' ' {
		i++
		if i > 3 {
			return -1
		}
	}
	return i
}

// heading parses an ATX heading ("## Name", up to three spaces of
// indentation, an optional closing run of '#'). It returns the level (1-6)
// and the trimmed text, or level 0 when s is no heading.
func heading(s string) (level int, text string) {
	i := indent(s)
	if i < 0 {
		return 0, ""
	}
	s = s[i:]
	for level < len(s) && s[level] == '#' {
		level++
	}
	if level == 0 || level > 6 {
		return 0, ""
	}
	s = s[level:]
	if s != "" && s[0] != ' ' && s[0] != '\t' {
		return 0, ""
	}
	s = strings.TrimSpace(s)
	if t := strings.TrimRight(s, "#"); t != s && (t == "" || t[len(t)-1] == ' ' || t[len(t)-1] == '\t') {
		s = strings.TrimSpace(t)
	}
	return level, s
}

// keyValue parses a "Key: value" line: up to three spaces, a key of letters,
// digits and dashes starting with a letter, a colon. The key is returned in
// lower case and the value trimmed.
func keyValue(s string) (key, value string, ok bool) {
	i := indent(s)
	if i < 0 {
		return "", "", false
	}
	k, v, found := strings.Cut(s[i:], ":")
	if !found {
		return "", "", false
	}
	k = strings.TrimRight(k, " \t")
	if k == "" || !isLetter(k[0]) {
		return "", "", false
	}
	for j := 0; j < len(k); j++ {
		if c := k[j]; !isLetter(c) && !(c >= '0' && c <= '9') && c != '-' {
			return "", "", false
		}
	}
	return strings.ToLower(k), strings.TrimSpace(v), true
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
