package card

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// A voice prompt's card quotes the transcript under its first line, on one
// line, mentions defused; the receipt keeps it; neither passes Limit.
func TestHeardQuote(t *testing.T) {
	t.Parallel()
	heard := "ping @everyone about <@123>\nthen deploy"
	got := Render(State{Phase: Running, Heard: heard, Text: "working on it"})
	lines := strings.Split(got, "\n")
	if len(lines) < 2 || lines[1] != "> 🎙️ ping @\u200beveryone about <\u200b@123> then deploy" {
		t.Errorf("card = %q, want the quote on its second line", got)
	}
	receipt := WithHeard("✅ Done in 3s", heard)
	if !strings.HasPrefix(receipt, "✅ Done in 3s\n> 🎙️ ping") {
		t.Errorf("receipt = %q", receipt)
	}
	if WithHeard("✅ Done in 3s", "") != "✅ Done in 3s" {
		t.Error("a receipt without a transcript changed")
	}
	long := strings.Repeat("word ", 1000)
	if n := utf8.RuneCountInString(Render(State{Phase: Running, Heard: long, Text: long})); n > Limit {
		t.Errorf("card of %d characters, over %d", n, Limit)
	}
	full := strings.Repeat("x", Limit-5)
	if got := WithHeard(full, long); got != full {
		t.Errorf("a full text took the quote anyway (%d characters)", utf8.RuneCountInString(got))
	}
	if n := utf8.RuneCountInString(WithHeard("head\n"+strings.Repeat("y", 1700), long)); n > Limit {
		t.Errorf("receipt of %d characters, over %d", n, Limit)
	}
}
