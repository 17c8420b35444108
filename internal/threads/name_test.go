package threads

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestName(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("refactor the parser ", 10)
	tests := []struct {
		name, prompt, want string
	}{
		{"first line", "Fix the login bug\nIt fails on Safari", "Fix the login bug"},
		{"mentions removed", "<@123456> <@!99> please fix <#42> for <@&7> @everyone", "please fix for"},
		{"blank first lines", "\n  \n<@1>\n  Add tests  ", "Add tests"},
		{"whitespace collapsed", "a\t\tb   c", "a b c"},
		{"markdown marks trimmed", "## Plan the release", "Plan the release"},
		{"only files", "", fallbackName},
		{"only a mention", "<@123>", fallbackName},
		{"cut at a word", long, strings.Repeat("refactor the parser ", 4) + "refactor the…"},
		{"control characters", "a\x00b\u200dc", "abc"},
		{"invalid utf8", "ok \xff\xfe done", "ok done"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Name(tt.prompt); got != tt.want {
				t.Errorf("Name(%q) = %q, want %q", tt.prompt, got, tt.want)
			}
		})
	}
}

func TestNameOfOneLongWordIsCut(t *testing.T) {
	t.Parallel()
	got := Name(strings.Repeat("x", 500))
	if n := utf8.RuneCountInString(got); n != MaxName {
		t.Errorf("Name of a 500-character word has %d characters, want %d", n, MaxName)
	}
}

func FuzzName(f *testing.F) {
	for _, s := range []string{"", "hello", "<@1> hi", strings.Repeat("ab ", 80), "\xff", "@here now", "é" + strings.Repeat("ü", 200)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, prompt string) {
		got := Name(prompt)
		if got == "" {
			t.Fatal("empty name")
		}
		if !utf8.ValidString(got) {
			t.Fatalf("invalid UTF-8 %q", got)
		}
		if n := utf8.RuneCountInString(got); n > MaxName {
			t.Fatalf("%d characters > %d: %q", n, MaxName, got)
		}
		if mentionToken().MatchString(got) {
			t.Fatalf("a mention survived: %q", got)
		}
		if strings.ContainsAny(got, "\n\r\t") {
			t.Fatalf("a line break or tab survived: %q", got)
		}
		if got != strings.TrimSpace(got) {
			t.Fatalf("untrimmed: %q", got)
		}
	})
}
