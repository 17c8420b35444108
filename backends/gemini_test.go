package backends

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestGeminiRegistered(t *testing.T) {
	b, err := New("gemini", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Name() != "gemini" {
		t.Errorf("Name = %q", b.Name())
	}
	if _, ok := b.(*Gemini); !ok {
		t.Errorf("New(gemini) = %T, want *Gemini", b)
	}
}

func TestGeminiArgs(t *testing.T) {
	t.Parallel()
	base := []string{"-p", "", "-o", "stream-json", "--skip-trust"}
	tests := []struct {
		name string
		req  Request
		want []string
		kind ErrorKind
	}{
		{name: "bare", req: Request{Prompt: "not on argv"}, want: base},
		{
			name: "everything",
			req: Request{Prompt: "hi", Model: "gemini-2.5-pro", PermissionMode: "acceptEdits", SessionID: "0b1e6f7c-3d2a-4c5b-9e8f-7a6b5c4d3e2f",
				AllowedTools: []string{"Read", "Write", "Edit", "MultiEdit", "custom_tool", "", "read_file"}, MaxTurns: 7},
			want: append(append([]string(nil), base...), "-m", "gemini-2.5-pro", "--approval-mode", "auto_edit",
				"--allowed-tools", "read_file,write_file,replace,custom_tool", "--resume", "0b1e6f7c-3d2a-4c5b-9e8f-7a6b5c4d3e2f"),
		},
		{name: "default", req: Request{PermissionMode: "default"}, want: append(append([]string(nil), base...), "--approval-mode", "default")},
		{name: "plan", req: Request{PermissionMode: "plan"}, want: append(append([]string(nil), base...), "--approval-mode", "plan")},
		{name: "bypass", req: Request{PermissionMode: "bypassPermissions"}, want: append(append([]string(nil), base...), "--approval-mode", "yolo")},
		{name: "unknown mode", req: Request{PermissionMode: "dontAsk"}, kind: KindInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := geminiArgs(tt.req)
			if tt.kind != "" {
				var e *Error
				if !errors.As(err, &e) || e.Kind != tt.kind {
					t.Fatalf("err = %v, want kind %s", err, tt.kind)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("args (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGeminiBaseKeyIgnoresResume(t *testing.T) {
	t.Parallel()
	a, _ := geminiArgs(Request{Model: "m", PermissionMode: "plan"})
	b, _ := geminiArgs(Request{Model: "m", PermissionMode: "plan", SessionID: "s1"})
	c, _ := geminiArgs(Request{Model: "m", PermissionMode: "acceptEdits"})
	if geminiBaseKey("bin", "/w", a) != geminiBaseKey("bin", "/w", b) {
		t.Error("--resume changes the key")
	}
	if geminiBaseKey("bin", "/w", a) == geminiBaseKey("bin", "/w", c) {
		t.Error("the approval mode does not change the key")
	}
	if geminiBaseKey("bin", "/w", a) == geminiBaseKey("bin", "/v", a) {
		t.Error("the work dir does not change the key")
	}
}

func TestGeminiPersona(t *testing.T) {
	t.Parallel()
	f := filepath.Join(t.TempDir(), "p.md")
	if err := os.WriteFile(f, []byte("from the file"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		req  Request
		want string
		err  bool
	}{
		{Request{SystemPrompt: "inline", SystemPromptFile: f}, "inline", false},
		{Request{SystemPromptFile: f}, "from the file", false},
		{Request{}, "", false},
		{Request{SystemPromptFile: filepath.Join(t.TempDir(), "missing.md")}, "", true},
	}
	for _, tt := range tests {
		got, err := geminiPersona(tt.req)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("geminiPersona(%+v) = %q, %v", tt.req, got, err)
		}
	}
}

func TestGeminiEnvValue(t *testing.T) {
	t.Parallel()
	env := []string{"HOME=/a", "X", "HOME=/b", "HOMEX=/c"}
	if got := envValue(env, "HOME"); got != "/b" {
		t.Errorf("envValue = %q, want /b (the last one)", got)
	}
	if got := envValue(env, "NOPE"); got != "" {
		t.Errorf("envValue = %q", got)
	}
}

func TestGeminiArgsAddDirs(t *testing.T) {
	args, err := geminiArgs(Request{AddDirs: []string{"/cfg"}})
	if err != nil || !strings.Contains(strings.Join(args, " "), "--include-directories /cfg") {
		t.Errorf("args = %q, %v", args, err)
	}
}
