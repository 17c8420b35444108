package backends

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPiRegistered(t *testing.T) {
	t.Parallel()
	b, err := New("pi", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := b.(*Pi); !ok || b.Name() != "pi" {
		t.Errorf("New(pi) = %T named %q", b, b.Name())
	}
}

func TestPiArgs(t *testing.T) {
	t.Parallel()
	base := []string{"-p", "--mode", "json", "--offline"}
	tests := []struct {
		name string
		req  Request
		file string
		want []string
	}{
		{
			name: "new session, bypass: pi's own tools",
			req:  Request{PermissionMode: "bypassPermissions", MaxTurns: 5},
			file: "/tmp/persona.md",
			want: append(base[:4:4], "--append-system-prompt", "/tmp/persona.md"),
		},
		{
			name: "resume with model",
			req:  Request{PermissionMode: "bypassPermissions", SessionID: "0193-abc", Model: "anthropic/claude-sonnet-4-5"},
			want: append(base[:4:4], "--session", "0193-abc", "--model", "anthropic/claude-sonnet-4-5"),
		},
		{
			name: "acceptEdits adds edit and write to the read-only tools",
			req:  Request{PermissionMode: "acceptEdits", AllowedTools: []string{"Read", "Write", "Edit"}},
			want: append(base[:4:4], "--tools", "read,grep,find,ls,edit,write"),
		},
		{
			name: "default: read-only tools and the allowed ones, mapped",
			req:  Request{PermissionMode: "default", AllowedTools: []string{"Read", "Glob", "Grep", "WebSearch", "WebFetch", "Bash(git:*)", "Bash"}},
			want: append(base[:4:4], "--tools", "read,grep,find,ls,WebSearch,WebFetch,bash"),
		},
		{
			name: "no mode is default",
			req:  Request{},
			want: append(base[:4:4], "--tools", "read,grep,find,ls"),
		},
		{
			name: "plan ignores allowed writers",
			req:  Request{PermissionMode: "plan", AllowedTools: []string{"Write", "Bash", "MultiEdit"}},
			want: append(base[:4:4], "--tools", "read,grep,find,ls"),
		},
		{
			name: "pi tool names and extension tools pass through",
			req:  Request{PermissionMode: "default", AllowedTools: []string{" write ", "my_ext_tool", "", "MultiEdit", "Edit"}},
			want: append(base[:4:4], "--tools", "read,grep,find,ls,write,my_ext_tool,edit"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, piArgs(tt.req, tt.file)); diff != "" {
				t.Errorf("args (-want +got):\n%s", diff)
			}
		})
	}
}
