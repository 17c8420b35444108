// Package reply splits an agent's reply into messages that fit Discord's
// length limit without breaking Markdown code blocks.
//
// Lengths are counted in Unicode code points, as Discord counts them. A split
// prefers a line break, then the last breaking whitespace inside a line, then
// any code point boundary, and avoids cutting an emoji or a letter from its
// combining marks where it can. A split inside a fenced code block closes the
// fence at the end of one message and reopens it, with the same fence and
// info string, at the start of the next.
//
// What a split drops and inserts is exact, so the original text can be
// rebuilt:
//
//   - A split at a line break drops that one "\n". A split inside a line
//     drops nothing: the whitespace it broke at stays at the end of the
//     earlier message.
//   - A message that reopens a fence starts with an inserted opening fence
//     line and "\n"; a message that ends inside a fence ends with an inserted
//     "\n" and closing fence.
//   - A piece whose own text is only whitespace is not returned, since Discord
//     refuses blank messages; that whitespace is dropped.
//
// Split is a pure function and safe for concurrent use.
package reply

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// DiscordLimit is the longest message Discord accepts, in code points.
const DiscordLimit = 2000

// Split cuts text into messages of at most max code points each.
//
// Text that is empty or only whitespace gives nil. Text that already fits is
// returned unchanged as its only element, even if it has an unclosed fence.
// Otherwise every message is a balanced Markdown fragment: a fence opened in
// a message is closed in it, if need be by an inserted closing fence, and a
// message that continues a code block reopens it. The package comment lists
// exactly what is dropped and inserted at each split. Split panics if max is
// less than 1.
func Split(text string, max int) []string {
	if max < 1 {
		panic("reply: Split max must be at least 1")
	}
	if !hasInk(text) {
		return nil
	}
	if _, ok := fit(text, max); ok {
		return []string{text}
	}
	out := make([]string, 0, len(text)/max+2)
	s := newSplitter(text, max)
	for {
		p, ok := s.next()
		if !ok {
			return out
		}
		if !p.blank {
			out = append(out, p.render(text))
		}
	}
}

// piece is one message before rendering: the body text[start:end] plus what
// Split inserts around it.
type piece struct {
	start, end int
	// open is the fence line to insert before the body, without its "\n";
	// "" when the piece does not reopen a fence.
	open string
	// close is the fence run to insert after the body, after a "\n"; "" when
	// the piece ends outside any fence.
	close string
	// blank reports a body of only whitespace; Split drops such pieces.
	blank bool
}

// render returns the message text of p.
func (p piece) render(text string) string {
	body := text[p.start:p.end]
	if p.open == "" && p.close == "" {
		return body
	}
	var b strings.Builder
	b.Grow(len(p.open) + len(body) + len(p.close) + 2)
	if p.open != "" {
		b.WriteString(p.open)
		b.WriteByte('\n')
	}
	b.WriteString(body)
	if p.close != "" {
		b.WriteByte('\n')
		b.WriteString(p.close)
	}
	return b.String()
}

// fence is the state of a CommonMark fenced code block scan.
type fence struct {
	// run is the opening run of backticks or tildes; "" outside a block.
	run string
	// line is the opening fence line without its line ending.
	line string
}

// closeLen is the number of code points needed to close f: "\n" and the run.
func closeLen(f fence) int {
	if f.run == "" {
		return 0
	}
	return 1 + len(f.run)
}

// classify returns the fence state after line, given the state f before it.
// It follows CommonMark: a fence is at least three backticks or tildes after
// at most three spaces; a backtick fence's info string has no backticks; a
// closing fence uses the opening character at least as many times and has
// nothing but spaces and tabs after it.
func classify(line string, f fence) fence {
	line = strings.TrimSuffix(line, "\r")
	i := 0
	for i < 3 && i < len(line) && line[i] == ' ' {
		i++
	}
	if i == len(line) || (line[i] != '`' && line[i] != '~') {
		return f
	}
	c := line[i]
	j := i
	for j < len(line) && line[j] == c {
		j++
	}
	if f.run == "" {
		if j-i < 3 || (c == '`' && strings.IndexByte(line[j:], '`') >= 0) {
			return f
		}
		return fence{run: line[i:j], line: line}
	}
	if c != f.run[0] || j-i < len(f.run) {
		return f
	}
	for k := j; k < len(line); k++ {
		if line[k] != ' ' && line[k] != '\t' {
			return f
		}
	}
	return fence{}
}

// reopenLine returns the line that reopens f in a new message of at most max
// code points, or "" if even the bare fence would take more than half of it.
// It drops the info string after its first word, then the word, as needed.
func reopenLine(f fence, max int) string {
	budget := max/2 - 1 - closeLen(f)
	if _, ok := fit(f.line, budget); ok {
		return f.line
	}
	runEnd := strings.Index(f.line, f.run) + len(f.run)
	word := runEnd
	for word < len(f.line) && (f.line[word] == ' ' || f.line[word] == '\t') {
		word++
	}
	for word < len(f.line) && f.line[word] != ' ' && f.line[word] != '\t' {
		word++
	}
	if _, ok := fit(f.line[:word], budget); ok && word > runEnd {
		return f.line[:word]
	}
	if runEnd <= budget {
		return f.line[:runEnd]
	}
	return ""
}

// splitter walks text line by line and hands out one piece at a time. It
// tracks the fence state of the original text; each piece separately tracks
// the state of its own message, which is what a Markdown renderer sees.
type splitter struct {
	text string
	max  int
	// pos is where the next piece's body starts; it may be inside a line
	// after a split within that line.
	pos int
	// The current line is text[ls:le]; le is its "\n" or len(text).
	ls, le int
	// st is the original fence state before the current line, after the
	// state after it.
	st, after fence
	done      bool
}

func newSplitter(text string, max int) *splitter {
	s := &splitter{text: text, max: max}
	s.load(0)
	return s
}

// load makes the line starting at ls current.
func (s *splitter) load(ls int) {
	s.ls, s.pos = ls, ls
	if i := strings.IndexByte(s.text[ls:], '\n'); i >= 0 {
		s.le = ls + i
	} else {
		s.le = len(s.text)
	}
	s.after = classify(s.text[ls:s.le], s.st)
}

// advance moves past the current line and the "\n" that ends it.
func (s *splitter) advance() {
	s.st = s.after
	if s.le == len(s.text) {
		s.pos, s.done = len(s.text), true
		return
	}
	s.load(s.le + 1)
}

// next returns the next piece, or false when the text is used up. Every
// call that returns true consumes at least one byte.
func (s *splitter) next() (piece, bool) {
	if s.done {
		return piece{}, false
	}
	p := piece{start: s.pos, end: s.pos}
	var loc fence // fence state of the message so far
	used := 0     // code points in the message so far
	if s.st.run != "" {
		if l := reopenLine(s.st, s.max); l != "" {
			p.open = l
			used = utf8.RuneCountInString(l) + 1
			loc = fence{run: s.st.run}
		}
	}
	var (
		first = true  // no line of the body yet
		ink   = false // the body has a character other than whitespace
		// prose reports ink outside fence lines. Until the body has some,
		// the message is not ended at a line break, so that it never holds
		// only an empty code block.
		prose = false
		// saved is the state before the last line when that line opened a
		// fence after some text; ending the message right after such a
		// line would send an empty code block, so next backs off to it.
		saved     splitter
		savedEnd  int
		savedLoc  fence
		haveSaved bool
	)
	for !s.done {
		seg := s.text[s.pos:s.le]
		sep := 1
		if first {
			sep = 0
		}
		// Measure before classifying: both may scan all of seg, but fit
		// stops at the room left, which keeps a huge line linear.
		n, ok := fit(seg, s.max-used-sep)
		var nl fence
		if ok {
			nl = classify(seg, loc)
			ok = n <= s.max-used-sep-closeLen(nl)
		}
		if ok {
			segInk := hasInk(seg)
			switch {
			case nl != loc:
				if loc.run == "" && prose {
					saved, savedEnd, savedLoc, haveSaved = *s, p.end, loc, true
				}
			case segInk:
				prose, haveSaved = true, false
			}
			used += sep + n
			loc, first, ink = nl, false, ink || segInk
			p.end = s.le
			s.advance()
			continue
		}
		if prose || (!ink && !first) {
			// End at the line break before seg, which is dropped. A body
			// of blank lines ends here too, as a blank piece, rather than
			// take part of seg.
			if haveSaved {
				*s, p.end, loc = saved, savedEnd, savedLoc
			}
			break
		}
		budget := s.max - used - sep - closeLen(loc)
		if budget < 1 {
			// Only fence lines so far and no room left.
			break
		}
		if n <= budget {
			// seg fits but opens a fence that cannot be closed here.
			budget = n - 1
		}
		for {
			c := s.cut(budget)
			frag := s.text[s.pos:c]
			n := utf8.RuneCountInString(frag)
			nl := classify(frag, loc)
			over := used + sep + n + closeLen(nl) - s.max
			if over <= 0 {
				loc, ink = nl, ink || hasInk(frag)
				p.end, s.pos = c, c
				break
			}
			// frag opens or closes a fence and the new state costs more
			// to close; a fragment of one or two code points never does.
			if budget = n - over; budget < 1 {
				budget = n / 2
			}
		}
		break
	}
	p.close = loc.run
	p.blank = !ink
	return p, true
}

// maxBack bounds how far back from the hard limit cut looks for a cut that
// keeps a grapheme whole and does not start a line with a fence.
const maxBack = 64

// cut returns where to split the current line so that text[s.pos:c] holds
// at most limit code points; the rest of the line must hold more than that.
// It prefers the last breaking whitespace that leaves some ink before it,
// then a boundary near the limit that neither splits a grapheme nor leaves
// a fence-like start for the next message, then any grapheme boundary near
// the limit, then the limit itself.
func (s *splitter) cut(limit int) int {
	seg := s.text[s.pos:s.le]
	h, ink := 0, -1
	for range limit {
		r, w := utf8.DecodeRuneInString(seg[h:])
		if ink < 0 && !unicode.IsSpace(r) {
			ink = h
		}
		h += w
	}
	good, safe := -1, -1
	for c, back := h, 0; c > max(ink, 0); back++ {
		r, w := utf8.DecodeLastRuneInString(seg[:c])
		if back < maxBack && (safe < 0 || good < 0) && boundarySafe(seg, c) {
			if safe < 0 {
				safe = c
			}
			if good < 0 && !fenceLike(seg[c:]) {
				good = c
			}
		}
		if isBreakSpace(r) && boundarySafe(seg, c) && !fenceLike(seg[c:]) {
			return s.pos + c
		}
		c -= w
	}
	switch {
	case good >= 0:
		return s.pos + good
	case safe >= 0:
		return s.pos + safe
	}
	return s.pos + h
}

// fenceLike reports whether s, as the start of a line, could be read as a
// fence: up to three spaces and three backticks or tildes.
func fenceLike(s string) bool {
	i := 0
	for i < 3 && i < len(s) && s[i] == ' ' {
		i++
	}
	s = s[i:]
	return len(s) >= 3 && (s[0] == '`' || s[0] == '~') && s[1] == s[0] && s[2] == s[0]
}

// isBreakSpace reports whether a line may break after r.
func isBreakSpace(r rune) bool {
	switch r {
	case ' ', '\t':
		return true
	case 0xA0, 0x2007, 0x202F: // no-break spaces
		return false
	}
	return r > unicode.MaxASCII && unicode.IsSpace(r)
}

const zwj = 0x200D // zero-width joiner, which glues emoji together

// boundarySafe reports whether cutting s at byte offset c (0 < c < len(s))
// keeps graphemes whole, as far as cheap checks tell: it does not cut
// before a combining mark, variation selector, emoji modifier or tag, next
// to a zero-width joiner, or inside a pair of regional indicators (a flag).
// Flags pair up from the start of s, which cut makes the start of the
// message, so the count stays within one message.
func boundarySafe(s string, c int) bool {
	r, _ := utf8.DecodeRuneInString(s[c:])
	q, w := utf8.DecodeLastRuneInString(s[:c])
	if r < 0x300 && q < 0x300 {
		return true
	}
	switch {
	case r == zwj || q == zwj:
		return false
	case unicode.In(r, unicode.Mn, unicode.Me, unicode.Mc):
		return false
	case 0x1F3FB <= r && r <= 0x1F3FF, 0xE0020 <= r && r <= 0xE007F:
		return false
	case isRegional(r) && isRegional(q):
		n := 1
		for i := c - w; i > 0; n++ {
			q, w := utf8.DecodeLastRuneInString(s[:i])
			if !isRegional(q) {
				break
			}
			i -= w
		}
		return n%2 == 0
	}
	return true
}

func isRegional(r rune) bool { return 0x1F1E6 <= r && r <= 0x1F1FF }

// fit returns the number of code points in s and whether it is at most
// room. It stops counting once s is too long, so that a huge line costs
// only as much as the room it is measured against.
func fit(s string, room int) (int, bool) {
	if room < 0 {
		return 0, false
	}
	if len(s) <= room {
		return utf8.RuneCountInString(s), true
	}
	n := 0
	for range s {
		if n++; n > room {
			return n, false
		}
	}
	return n, true
}

// hasInk reports whether s has a character other than whitespace.
func hasInk(s string) bool {
	for _, r := range s {
		if !unicode.IsSpace(r) {
			return true
		}
	}
	return false
}
