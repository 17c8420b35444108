package threads

import (
	"regexp"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// MaxName is the longest thread name Discord takes, in characters.
const MaxName = 100

// fallbackName names a thread whose prompt has no words (files only).
const fallbackName = "New task"

// mentionToken matches what would ping or name someone in a thread name:
// user, role and channel mentions, @everyone and @here.
var mentionToken = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`<@[!&]?\d+>|<#\d+>|@(?:everyone|here)\b`) })

// Name builds a thread's name from the prompt that opens it: its first
// line with words in it, without mentions, whitespace collapsed, cut at a
// word boundary to at most MaxName characters (an ellipsis says it was
// cut). It is never empty and never longer than MaxName.
func Name(prompt string) string {
	if !utf8.ValidString(prompt) {
		prompt = strings.ToValidUTF8(prompt, "")
	}
	var line string
	for l := range strings.SplitSeq(prompt, "\n") {
		l = strings.Join(strings.FieldsFunc(mentionToken().ReplaceAllString(l, " "), isSpace), " ")
		l = strings.TrimLeft(l, "#>*_~`- ")
		l = strings.TrimSpace(strings.Map(printable, l))
		if l != "" {
			line = l
			break
		}
	}
	if line == "" {
		return fallbackName
	}
	// A removed mention may leave an @ that now starts a word: it stays
	// text, since thread names never ping.
	runes := []rune(line)
	if len(runes) <= MaxName {
		return line
	}
	cut := runes[:MaxName-1]
	if i := lastSpace(cut); i > MaxName/2 {
		cut = cut[:i]
	}
	return strings.TrimRight(string(cut), " .,;:-") + "…"
}

func isSpace(r rune) bool { return unicode.IsSpace(r) }

// printable drops control and format characters (a zero-width joiner
// still counts as a character but shows nothing).
func printable(r rune) rune {
	if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
		return -1
	}
	return r
}

func lastSpace(rs []rune) int {
	for i := len(rs) - 1; i >= 0; i-- {
		if rs[i] == ' ' {
			return i
		}
	}
	return -1
}
