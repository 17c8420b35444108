package backends

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

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

// An agent that is not there says what to fix: the command line the user
// gave (ACP_COMMAND) for the generic adapter, the package to install for
// gemini and opencode over ACP.
func TestACPAgentNotFound(t *testing.T) {
	emptyPath := "PATH=" + t.TempDir()
	interactive := WarmOptions{Interactive: true, KeepAlive: time.Minute}
	for _, tc := range []struct {
		name    string
		backend Backend
		want    []string
	}{
		{"acp, a name not on PATH", NewACP(Options{Env: []string{emptyPath, "ACP_COMMAND=no-such-acp-agent --acp"}, Warm: interactive}),
			[]string{`"no-such-acp-agent"`, "ACP_COMMAND"}},
		{"acp, a path that does not exist", NewACP(Options{Env: []string{emptyPath, "ACP_COMMAND=/no/such/dir/agent --acp"}, Warm: interactive}),
			[]string{`"/no/such/dir/agent"`, "ACP_COMMAND"}},
		{"gemini over ACP", NewGemini(Options{Env: []string{emptyPath}, Warm: interactive}),
			[]string{"npm install --prefix .tools/gemini @google/gemini-cli@" + Tested["gemini"]}},
		{"opencode over ACP", NewOpencode(Options{Env: []string{emptyPath}, Warm: interactive}),
			[]string{"npm install --prefix .tools/opencode opencode-ai@" + Tested["opencode"]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("PATH", strings.TrimPrefix(emptyPath, "PATH="))
			t.Cleanup(func() { _ = tc.backend.(interface{ Close() error }).Close() })
			_, err := tc.backend.Run(context.Background(), Request{Prompt: "x", Key: "chan", WorkDir: t.TempDir()}, nil)
			var e *Error
			if !errors.As(err, &e) || e.Kind != KindNotFound {
				t.Fatalf("Run = %v, want %s", err, KindNotFound)
			}
			for _, want := range tc.want {
				if !strings.Contains(e.Message, want) {
					t.Errorf("message %q does not say %q", e.Message, want)
				}
			}
		})
	}
}
