package reply

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

type splitCase struct {
	name string
	text string
	max  int
	want []string
}

// goProgram is a reply of about 4,500 code points whose ```go block spans
// two message boundaries at DiscordLimit.
func goProgram() splitCase {
	lines := make([]string, 90)
	for i := range lines {
		lines[i] = fmt.Sprintf("fmt.Println(%02d) // %s", i, strings.Repeat("-", 30))
	}
	code := func(from, to int) string { return strings.Join(lines[from:to], "\n") }
	return splitCase{
		name: "go block spanning two boundaries",
		text: "Here is the program:\n```go\n" + code(0, 90) + "\n```\nThat's all.",
		max:  DiscordLimit,
		want: []string{
			// 39 lines of 50 code points fill the first message up to
			// the room kept for the closing fence.
			"Here is the program:\n```go\n" + code(0, 39) + "\n```",
			"```go\n" + code(39, 78) + "\n```",
			"```go\n" + code(78, 90) + "\n```\nThat's all.",
		},
	}
}

func splitCases() []splitCase {
	family := "👨\u200d👩\u200d👧" // five code points
	return []splitCase{
		{name: "short", text: "Hello, world!", max: DiscordLimit, want: []string{"Hello, world!"}},
		{name: "empty", text: "", max: DiscordLimit, want: nil},
		{name: "whitespace only", text: " \n\t \r\n ", max: DiscordLimit, want: nil},
		{name: "whitespace only over the limit", text: strings.Repeat(" \n", 3000), max: DiscordLimit, want: nil},
		{name: "exactly the limit", text: strings.Repeat("a", 2000), max: DiscordLimit, want: []string{strings.Repeat("a", 2000)}},
		{
			name: "one over the limit splits at the line break",
			text: strings.Repeat("a", 1000) + "\n" + strings.Repeat("b", 1000),
			max:  DiscordLimit,
			want: []string{strings.Repeat("a", 1000), strings.Repeat("b", 1000)},
		},
		{
			name: "trailing newline after a full message is dropped",
			text: strings.Repeat("a", 2000) + "\n",
			max:  DiscordLimit,
			want: []string{strings.Repeat("a", 2000)},
		},
		{
			name: "long line without spaces",
			text: strings.Repeat("x", 4500),
			max:  DiscordLimit,
			want: []string{strings.Repeat("x", 2000), strings.Repeat("x", 2000), strings.Repeat("x", 500)},
		},
		{
			name: "long line splits after the last space",
			text: strings.Repeat("abcdef ", 300),
			max:  DiscordLimit,
			want: []string{strings.Repeat("abcdef ", 285), strings.Repeat("abcdef ", 15)},
		},
		{name: "words", text: "aaa bbb ccc", max: 8, want: []string{"aaa bbb ", "ccc"}},
		{
			name: "multi-byte text counts code points not bytes",
			text: strings.Repeat("日本語", 600), // 1,800 code points, 5,400 bytes
			max:  DiscordLimit,
			want: []string{strings.Repeat("日本語", 600)},
		},
		{
			name: "emoji over the limit",
			text: strings.Repeat("😀", 2500),
			max:  DiscordLimit,
			want: []string{strings.Repeat("😀", 2000), strings.Repeat("😀", 500)},
		},
		{
			name: "variation selector stays with its emoji",
			text: "a" + strings.Repeat("❤️", 1500),
			max:  DiscordLimit,
			want: []string{"a" + strings.Repeat("❤️", 999), strings.Repeat("❤️", 501)},
		},
		{
			name: "zero-width joiner sequence stays whole",
			text: "ab" + strings.Repeat(family, 500),
			max:  DiscordLimit,
			want: []string{"ab" + strings.Repeat(family, 399), strings.Repeat(family, 101)},
		},
		{
			name: "flag stays whole",
			text: "a" + strings.Repeat("🇯🇵", 1200),
			max:  DiscordLimit,
			want: []string{"a" + strings.Repeat("🇯🇵", 999), strings.Repeat("🇯🇵", 201)},
		},
		goProgram(),
		{
			name: "tilde fence",
			text: "Steps:\n~~~python\nprint('one')\nprint('two')\nprint('three')\n~~~\nDone.",
			max:  40,
			want: []string{
				"Steps:\n~~~python\nprint('one')\n~~~",
				"~~~python\nprint('two')\n~~~",
				"~~~python\nprint('three')\n~~~\nDone.",
			},
		},
		{
			name: "shorter backtick runs inside a longer fence",
			text: "````markdown\n```go\nfmt.Println(1)\n```\nmore text\n````\nend",
			max:  40,
			want: []string{
				"````markdown\n```go\nfmt.Println(1)\n````",
				"````markdown\n```\nmore text\n````\nend",
			},
		},
		{
			name: "backticks inside a line do not close the fence",
			text: "```go\ns := \"```\"\nt := `x`\n``` no\n```",
			max:  24,
			want: []string{
				"```go\ns := \"```\"\n```",
				"```go\nt := `x`\n```",
				"```go\n``` no\n```", // the original closing fence
			},
		},
		{
			name: "indented fence keeps its indent",
			text: "  ```js\nlet a = 1;\nlet b = 2;\n  ```",
			max:  30,
			want: []string{"  ```js\nlet a = 1;\n```", "  ```js\nlet b = 2;\n  ```"},
		},
		{
			name: "unclosed fence is closed in every message",
			text: "```sh\necho one\necho two\necho three",
			max:  30,
			want: []string{"```sh\necho one\necho two\n```", "```sh\necho three\n```"},
		},
		{
			name: "CRLF line endings",
			text: "```go\r\nx := 1\r\ny := 2\r\n```\r\n",
			max:  20,
			want: []string{"```go\r\nx := 1\r\n```", "```go\ny := 2\r\n```\r\n"},
		},
		{
			name: "opening fence moves to the next message",
			text: "Intro text here\n```go\nfmt.Println(\"hi\")\n```",
			max:  30,
			want: []string{"Intro text here", "```go\nfmt.Println(\"hi\")\n```"},
		},
		{
			name: "long line inside a fence splits at a space",
			text: "```\nalpha beta gamma delta epsilon zeta\n```",
			max:  30,
			want: []string{"```\nalpha beta gamma \n```", "```\ndelta epsilon zeta\n```"},
		},
		{
			name: "no message starts with fence-like text from inside a line",
			text: "abcdefghijklmnop ```x yz",
			max:  20,
			want: []string{"abcdefghijklmnop ```", "x yz"},
		},
	}
}

func TestSplit(t *testing.T) {
	t.Parallel()
	for _, tc := range splitCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := Split(tc.text, tc.max)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Split(%d) mismatch (-want +got):\n%s", tc.max, diff)
			}
			checkSplit(t, tc.text, tc.max)
		})
	}
}

func TestSplitGoBlockWellFormed(t *testing.T) {
	t.Parallel()
	tc := goProgram()
	got := Split(tc.text, tc.max)
	if len(got) < 3 {
		t.Fatalf("got %d messages, want at least 3", len(got))
	}
	for i, m := range got {
		kinds, open := parseFences(m)
		n := 0
		for _, k := range kinds {
			if k == lineOpen || k == lineClose {
				n++
			}
		}
		if n%2 != 0 || open != "" {
			t.Errorf("message %d has %d fence lines and ends inside %q", i, n, open)
		}
		if i > 0 && !strings.HasPrefix(m, "```go\n") {
			t.Errorf("message %d starts %q, want a reopened ```go fence", i, m[:10])
		}
	}
}

func TestSplitPanicsOnBadMax(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Error("Split(text, 0) did not panic")
		}
	}()
	Split("text", 0)
}

// TestSplitProperties checks Property 9 (message splitting with code block
// preservation) over random replies and limits.
func TestSplitProperties(t *testing.T) {
	t.Parallel()
	n := 3000
	if testing.Short() {
		n = 300
	}
	r := rand.New(rand.NewPCG(9, 2000))
	for i := range n {
		limit := 20 + r.IntN(1981)
		text := genText(r, 4*limit, true)
		if i%2 == 0 && limit >= 200 {
			// Short lines only: no split falls inside a line, so
			// checkSplit also compares how each line reads.
			text = genText(r, limit/8-2, false)
		}
		if !checkSplit(t, text, limit) {
			t.Fatalf("case %d failed: limit %d, text %q", i, limit, text)
		}
	}
}

func FuzzSplit(f *testing.F) {
	for _, tc := range splitCases() {
		f.Add(tc.text, uint16(tc.max-20))
	}
	f.Fuzz(func(t *testing.T, text string, n uint16) {
		checkSplit(t, text, 20+int(n)%1981)
	})
}

func BenchmarkSplit(b *testing.B) {
	text := benchText()
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		Split(text, DiscordLimit)
	}
}

// BenchmarkSplitLongFenceLine guards against quadratic time on a 1 MB line
// of backticks, which looks like a fence at the start of every message.
func BenchmarkSplitLongFenceLine(b *testing.B) {
	text := strings.Repeat("`", 1<<20)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		Split(text, DiscordLimit)
	}
}

// benchText is a reply of about 10 KB: prose, lists and code blocks.
func benchText() string {
	var b strings.Builder
	for i := 0; b.Len() < 10_000; i++ {
		fmt.Fprintf(&b, "## Step %d\n\nThe agent looked at the failing test and found that the handler "+
			"returned before the queue drained. Here is the fix, with a test:\n\n", i)
		b.WriteString("```go\n")
		for j := range 12 {
			fmt.Fprintf(&b, "\tif err := q.Drain(ctx); err != nil { // step %d.%d\n\t\treturn fmt.Errorf(\"drain: %%w\", err)\n\t}\n", i, j)
		}
		b.WriteString("```\n\n- It keeps the order.\n- It bounds the wait. 🙂\n\n")
	}
	return b.String()
}

// checkSplit checks every property Split promises for text and limit and
// reports whether they all held.
func checkSplit(t *testing.T, text string, limit int) bool {
	t.Helper()
	ok := true
	errorf := func(format string, args ...any) {
		t.Helper()
		t.Errorf(format, args...)
		ok = false
	}
	got := Split(text, limit)

	if strings.TrimSpace(text) == "" {
		if got != nil {
			errorf("Split of blank text = %q, want nil", got)
		}
		return ok
	}
	if utf8.RuneCountInString(text) <= limit {
		if diff := cmp.Diff([]string{text}, got); diff != "" {
			errorf("text within the limit changed (-want +got):\n%s", diff)
		}
		return ok
	}

	// (a) Every message fits, is valid UTF-8 if the text is, and is not
	// blank.
	for i, m := range got {
		if n := utf8.RuneCountInString(m); n > limit {
			errorf("message %d has %d code points, limit %d", i, n, limit)
		}
		if utf8.ValidString(text) && !utf8.ValidString(m) {
			errorf("message %d is not valid UTF-8: %q", i, m)
		}
		if strings.TrimSpace(m) == "" {
			errorf("message %d is blank: %q", i, m)
		}
	}

	// (b) Removing what was inserted and putting back what was dropped
	// rebuilds the text: a "\n" at each split on a line break, and the
	// whitespace of each blank piece.
	var pieces []piece
	for s := newSplitter(text, limit); ; {
		p, more := s.next()
		if !more {
			break
		}
		pieces = append(pieces, p)
	}
	var rebuilt strings.Builder
	k := 0
	for i, p := range pieces {
		if i > 0 {
			switch gap := p.start - pieces[i-1].end; gap {
			case 0:
			case 1:
				rebuilt.WriteByte('\n')
			default:
				errorf("piece %d starts %d bytes after piece %d ends", i, gap, i-1)
			}
		}
		if p.blank {
			if body := text[p.start:p.end]; strings.TrimSpace(body) != "" {
				errorf("piece %d is marked blank but holds %q", i, body)
			}
			rebuilt.WriteString(text[p.start:p.end])
			continue
		}
		if k == len(got) {
			errorf("Split returned %d messages, fewer than the non-blank pieces", len(got))
			return ok
		}
		m := got[k]
		k++
		if p.open != "" {
			if !strings.HasPrefix(m, p.open+"\n") {
				errorf("message %d does not start with its reopening fence %q: %q", k-1, p.open, m)
				return ok
			}
			m = m[len(p.open)+1:]
		}
		if p.close != "" {
			if !strings.HasSuffix(m, "\n"+p.close) {
				errorf("message %d does not end with its closing fence %q: %q", k-1, p.close, m)
				return ok
			}
			m = m[:len(m)-len(p.close)-1]
		}
		rebuilt.WriteString(m)
	}
	if k != len(got) {
		errorf("Split returned %d messages, want %d", len(got), k)
	}
	if rebuilt.String() != text {
		errorf("rebuilt text differs (-want +got):\n%s", cmp.Diff(text, rebuilt.String()))
	}

	// (c) Every message is balanced: a fence it opens, it closes.
	for i, m := range got {
		if kinds, open := parseFences(m); open != "" {
			errorf("message %d ends inside a %q fence (lines %v): %q", i, open, kinds, m)
		}
	}

	// When no line is long enough to need splitting, every line of every
	// message also reads as it does in the text: code stays code, fences
	// stay fences, prose stays prose.
	if ok && limit >= 40 && longestLine(text) <= limit/8 {
		checkSameReading(t, text, pieces, got)
	}
	return ok
}

// checkSameReading checks that each line of each message is a fence, code
// or prose line exactly when it is one in text.
func checkSameReading(t *testing.T, text string, pieces []piece, got []string) {
	t.Helper()
	want, _ := parseFences(text)
	k, line, counted := 0, 0, 0
	for i, p := range pieces {
		if p.blank {
			continue
		}
		m := got[k]
		k++
		if p.start > 0 && text[p.start-1] != '\n' {
			t.Errorf("piece %d starts inside a line though every line fits", i)
			return
		}
		kinds, _ := parseFences(m)
		if p.open != "" {
			kinds = kinds[1:]
		}
		if p.close != "" {
			kinds = kinds[:len(kinds)-1]
		}
		line += strings.Count(text[counted:p.start], "\n")
		counted = p.start
		if diff := cmp.Diff(want[line:line+len(kinds)], kinds); diff != "" {
			t.Errorf("message %d reads differently from the text (-want +got):\n%s\nmessage: %q", k-1, diff, m)
		}
	}
}

func longestLine(text string) int {
	n := 0
	for line := range strings.SplitSeq(text, "\n") {
		n = max(n, utf8.RuneCountInString(line))
	}
	return n
}

type lineKind string

const (
	lineProse lineKind = "prose"
	lineOpen  lineKind = "open"
	lineCode  lineKind = "code"
	lineClose lineKind = "close"
)

// The reference fence rules, written apart from the package's scanner.
var (
	openRe  = regexp.MustCompile("^ {0,3}(`{3,}|~{3,})(.*)$")
	closeRe = regexp.MustCompile("^ {0,3}(`{3,}|~{3,})[ \t]*$")
)

// parseFences reads s as CommonMark fenced code blocks and returns the kind
// of each line and the fence still open at the end, if any.
func parseFences(s string) (kinds []lineKind, open string) {
	for line := range strings.SplitSeq(s, "\n") {
		line = strings.TrimSuffix(line, "\r")
		switch {
		case open == "":
			m := openRe.FindStringSubmatch(line)
			if m == nil || (m[1][0] == '`' && strings.Contains(m[2], "`")) {
				kinds = append(kinds, lineProse)
				continue
			}
			open = m[1]
			kinds = append(kinds, lineOpen)
		default:
			m := closeRe.FindStringSubmatch(line)
			if m == nil || m[1][0] != open[0] || len(m[1]) < len(open) {
				kinds = append(kinds, lineCode)
				continue
			}
			open = ""
			kinds = append(kinds, lineClose)
		}
	}
	return kinds, open
}

var (
	words = []string{
		"the", "agent", "replied", "with", "a", "fix", "and", "tests", "ok.",
		"🙂", "❤️", "👨\u200d👩\u200d👧", "🇯🇵🇫🇷", "日本語のテキスト", "naïve", "e\u0301", "Ünïcödé",
		"`x`", "``y``", "```", "~~~", "tab\there", "a\u00a0b",
	}
	wordRunes = []rune("abcxyz.é日🙂\u0301\ufe0f\u200d🇯`~")
	infos     = []string{"", "go", "python", " js", "c++ {.numberLines}", "日本", "sh  extra words"}
)

// genText returns a random reply with prose, fenced blocks (some unclosed,
// some with fence-like lines inside), blank lines and, if long, very long
// words. Prose lines hold at most lineCap code points, give or take one
// word.
func genText(r *rand.Rand, lineCap int, long bool) string {
	var b strings.Builder
	eol := "\n"
	if r.IntN(8) == 0 {
		eol = "\r\n"
	}
	proseLine := func() {
		n := 0
		for {
			w := words[r.IntN(len(words))]
			wn := utf8.RuneCountInString(w)
			if n > 0 && n+1+wn > lineCap {
				break
			}
			if n > 0 {
				b.WriteByte(' ')
				n++
			}
			b.WriteString(w)
			n += wn
			if r.IntN(12) == 0 {
				break
			}
		}
		b.WriteString(eol)
	}
	for range 1 + r.IntN(14) {
		switch r.IntN(5) {
		case 0, 1:
			for range 1 + r.IntN(6) {
				proseLine()
			}
		case 2:
			char := "`~"[r.IntN(2)]
			run := strings.Repeat(string(char), 3+r.IntN(3))
			indent := strings.Repeat(" ", max(0, r.IntN(7)-3))
			fmt.Fprintf(&b, "%s%s%s%s", indent, run, infos[r.IntN(len(infos))], eol)
			for range r.IntN(25) {
				switch r.IntN(8) {
				case 0:
					b.WriteString(strings.Repeat(string(char), 2+r.IntN(len(run))))
				case 1:
					b.WriteString("```" + infos[r.IntN(len(infos))])
				case 2:
					b.WriteString("    " + run) // indented code, not a fence
				case 3:
					b.WriteString(run + " not a close")
				default:
					b.WriteString("\t")
					proseLine()
					continue
				}
				b.WriteString(eol)
			}
			if r.IntN(7) > 0 {
				fmt.Fprintf(&b, "%s%s%s", indent, run+strings.Repeat(string(char), r.IntN(2)), eol)
			}
		case 3:
			b.WriteString(strings.Repeat(eol, r.IntN(4)))
			b.WriteString(strings.Repeat(" ", r.IntN(5)))
			b.WriteString(eol)
		case 4:
			if !long {
				proseLine()
				continue
			}
			// A long word, with fence characters and marks inside.
			for n := 50 + r.IntN(3000); n > 0; n-- {
				b.WriteRune(wordRunes[r.IntN(len(wordRunes))])
			}
			b.WriteString(eol)
		}
	}
	s := b.String()
	if r.IntN(2) == 0 {
		s = strings.TrimRight(s, "\r\n")
	}
	return s
}
