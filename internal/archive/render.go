package archive

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/agentgateway/gateway/internal/card"
)

// dayHeader is the first line of a day file.
func dayHeader(dir, day string) string {
	return "# " + dir + " · " + day + "\n"
}

// render formats e as the markdown block of a day file: a heading, the
// prompt quoted, the reply and a footer in italics. The heading is the
// block's only line that starts with "### ", so `grep '^### '` lists the
// entries whatever the prompt and reply hold. The block ends with a newline.
func render(e Entry, loc *time.Location) string {
	var b strings.Builder
	b.WriteString(heading(e, loc))
	b.WriteByte('\n')
	if p := trimBlank(newlines(e.Prompt)); p != "" {
		b.WriteByte('\n')
		for line := range strings.SplitSeq(p, "\n") {
			if line == "" {
				b.WriteString(">\n")
				continue
			}
			b.WriteString("> " + line + "\n")
		}
	}
	if r := trimBlank(newlines(e.Reply)); r != "" {
		b.WriteByte('\n')
		b.WriteString(reply(r))
	}
	if f := footer(e); f != "" {
		b.WriteString("\n_" + f + "_\n")
	}
	return b.String()
}

// heading is an entry's heading line, without its newline:
// "### 14:03:07 · alice (123) · message" or "### 09:00:00 · cron daily-report".
func heading(e Entry, loc *time.Location) string {
	parts := []string{e.Time.In(loc).Format(time.TimeOnly)}
	who := oneLine(e.Author)
	if id := oneLine(e.UserID); id != "" {
		who = strings.TrimSpace(who + " (" + id + ")")
	}
	if who != "" {
		parts = append(parts, who)
	}
	if what := oneLine(strings.TrimSpace(e.Kind + " " + e.Name)); what != "" {
		parts = append(parts, what)
	}
	return "### " + strings.Join(parts, " · ")
}

// reply returns the reply's lines ready for the day file. Two things in a
// reply could otherwise spill into the rest of the file: a level-3
// heading, which would pass for an entry's, is escaped (even inside a code
// block, so that grep cannot be fooled either); a code fence left open (a
// reply cut short) is closed, or every later entry would render as code.
func reply(r string) string {
	var b strings.Builder
	var open fence
	for line := range strings.SplitSeq(r, "\n") {
		if i, ok := headingLike(line); ok {
			line = line[:i] + `\` + line[i:]
		}
		open = open.next(line)
		b.WriteString(line + "\n")
	}
	if open.n > 0 {
		b.WriteString(strings.Repeat(string(open.char), open.n) + "\n")
	}
	return b.String()
}

// headingLike reports whether line is a markdown heading of level 3 and
// where its hashes start: at most three spaces, "###", then a space, a
// tab or the end of the line.
func headingLike(line string) (int, bool) {
	i := indent(line)
	if i > 3 || !strings.HasPrefix(line[i:], "###") {
		return 0, false
	}
	rest := line[i+3:]
	return i, rest == "" || rest[0] == ' ' || rest[0] == '\t'
}

// fence is the code fence a reply is inside of; n == 0 is none.
type fence struct {
	char byte // '`' or '~'
	n    int  // how many opened it
}

// next is the fence state after line, after CommonMark's rules for fences
// at the top level: at most three spaces of indent, three or more
// backticks or tildes; a closing one as long as the opening or longer,
// and nothing after it but spaces.
func (f fence) next(line string) fence {
	i := indent(line)
	if i > 3 || i == len(line) {
		return f
	}
	c := line[i]
	if c != '`' && c != '~' {
		return f
	}
	n := len(line[i:]) - len(strings.TrimLeft(line[i:], string(c)))
	if n < 3 {
		return f
	}
	rest := line[i+n:]
	if f.n > 0 {
		if c == f.char && n >= f.n && strings.Trim(rest, " \t") == "" {
			return fence{}
		}
		return f
	}
	if c == '`' && strings.Contains(rest, "`") {
		// Not a fence but inline code, as in "```x``` is code".
		return f
	}
	return fence{char: c, n: n}
}

// indent is how many spaces line starts with.
func indent(line string) int {
	return len(line) - len(strings.TrimLeft(line, " "))
}

// footer is the italic line under an entry, without its underscores:
// "Bash ×3, Read · $0.0123 (estimate) · 4.2s · ok · attached: a.png". It
// is "" when there is nothing to say.
func footer(e Entry) string {
	var parts []string
	if t := toolSummary(e.Tools); t != "" {
		parts = append(parts, t)
	}
	if e.CostUSD > 0 || e.Estimate {
		c := card.Dollars(e.CostUSD)
		if e.Estimate {
			c += " (estimate)"
		}
		parts = append(parts, c)
	}
	if e.Duration > 0 {
		parts = append(parts, e.Duration.Round(100*time.Millisecond).String())
	}
	if o := oneLine(e.Outcome); o != "" {
		parts = append(parts, o)
	}
	if names := nameList(e.Attachments); names != "" {
		parts = append(parts, "attached: "+names)
	}
	if names := nameList(e.Files); names != "" {
		parts = append(parts, "sent: "+names)
	}
	if e.EventID != 0 {
		parts = append(parts, "event "+strconv.FormatUint(e.EventID, 10))
	}
	return escapeInline(strings.Join(parts, " · "))
}

// toolSummary counts the tools in the order they were first used:
// "Bash ×3, Read".
func toolSummary(tools []string) string {
	var order []string
	counts := map[string]int{}
	for _, t := range tools {
		t = oneLine(t)
		if t == "" {
			continue
		}
		if counts[t] == 0 {
			order = append(order, t)
		}
		counts[t]++
	}
	for i, t := range order {
		if n := counts[t]; n > 1 {
			order[i] = fmt.Sprintf("%s ×%d", t, n)
		}
	}
	return strings.Join(order, ", ")
}

func nameList(names []string) string {
	var out []string
	for _, n := range names {
		if n = oneLine(n); n != "" {
			out = append(out, n)
		}
	}
	return strings.Join(out, ", ")
}

// oneLine makes s fit on one line: control characters (newlines among
// them) become spaces.
func oneLine(s string) string {
	return strings.TrimSpace(strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s))
}

// inlineEscaper escapes what would end the footer's italics early or
// start other emphasis: a file named "my_report.csv" stays as it is.
var inlineEscaper = strings.NewReplacer(`\`, `\\`, "_", `\_`, "*", `\*`, "`", "\\`")

func escapeInline(s string) string { return inlineEscaper.Replace(s) }

// newlineFixer turns the line endings markdown knows, but grep does not,
// into "\n": a lone "\r" in a prompt would start a line outside its quote.
var newlineFixer = strings.NewReplacer("\r\n", "\n", "\r", "\n")

func newlines(s string) string { return newlineFixer.Replace(s) }

// trimBlank drops the blank lines and trailing spaces around s.
func trimBlank(s string) string {
	s = strings.TrimRight(s, " \t\n")
	for {
		line, rest, ok := strings.Cut(s, "\n")
		if !ok || strings.Trim(line, " \t") != "" {
			return s
		}
		s = rest
	}
}
