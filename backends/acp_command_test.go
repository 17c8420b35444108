package backends

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSplitCommand(t *testing.T) {
	for _, tc := range []struct {
		line string
		want []string
		err  string
	}{
		{"gemini --acp", []string{"gemini", "--acp"}, ""},
		{"  /opt/my agent/bin/agent  acp ", []string{"/opt/my", "agent/bin/agent", "acp"}, ""},
		{`"/opt/my agent/bin/agent" --flag='a b' x\ y`, []string{"/opt/my agent/bin/agent", "--flag=a b", "x y"}, ""},
		{`npx -y @zed-industries/claude-code-acp`, []string{"npx", "-y", "@zed-industries/claude-code-acp"}, ""},
		{`a "" b`, []string{"a", "", "b"}, ""},
		{`a "q\"uote" 'it''s'`, []string{"a", `q"uote`, "its"}, ""},
		{`a "back\slash"`, []string{"a", `back\slash`}, ""},
		{`echo $HOME | cat`, []string{"echo", "$HOME", "|", "cat"}, ""},
		{"", nil, ""},
		{`a "open`, nil, "unclosed quote"},
		{`a \`, nil, "lone backslash"},
	} {
		t.Run(tc.line, func(t *testing.T) {
			got, err := SplitCommand(tc.line)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("words (-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzSplitCommand(f *testing.F) {
	for _, s := range []string{"gemini --acp", `"a b" 'c d' e\ f`, `a "`, `\`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		words, err := SplitCommand(line)
		if err != nil {
			return
		}
		// Quoting every word again and splitting gives the same words.
		var quoted []string
		for _, w := range words {
			quoted = append(quoted, "'"+strings.ReplaceAll(w, "'", `'\''`)+"'")
		}
		again, err := SplitCommand(strings.Join(quoted, " "))
		if err != nil {
			t.Fatalf("requoted %q: %v", quoted, err)
		}
		if !cmp.Equal(words, again, cmp.Comparer(func(a, b string) bool { return a == b })) && !(len(words) == 0 && len(again) == 0) {
			t.Fatalf("%q -> %q -> %q", line, words, again)
		}
	})
}
