package card

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestRenderApproval(t *testing.T) {
	for _, tc := range []struct {
		name string
		a    Approval
		want []string
	}{
		{"bash asking", Approval{Tool: "Bash", Input: json.RawMessage(`{"command":"rm -rf build","description":"Clean"}`), Description: "Clean", Asker: "42", Timeout: 10 * time.Minute},
			[]string{"🔐 <@42>, the agent wants to use `Bash`. Allow it?", "```sh\nrm -rf build\n```", "within 10m"}},
		{"edit diff", Approval{Phase: Allowed, By: "7", Tool: "Edit", Input: json.RawMessage(`{"file_path":"/w/a.go","old_string":"x := 1","new_string":"x := 2"}`)},
			[]string{"✅ Allowed by <@7>: `Edit`", "File: `/w/a.go`", "-x := 1\n+x := 2"}},
		{"path inside the work dir is relative", Approval{Tool: "Edit", WorkDir: "/srv/app", Input: json.RawMessage(`{"file_path":"/srv/app/cmd/main.go","old_string":"a","new_string":"b"}`)},
			[]string{"File: `cmd/main.go`"}},
		{"a description naming the work dir", Approval{Tool: "edit", WorkDir: "/srv/app", Description: "in /srv/app/out.txt",
			Input: json.RawMessage(`{"file_path":"/srv/app/out.txt","content":"hello"}`)},
			[]string{"-# in out.txt\n", "File: `out.txt`", "+hello"}},
		{"a description that only names the file is left out", Approval{Tool: "edit", WorkDir: "/srv/app", Description: "/srv/app/out.txt",
			Input: json.RawMessage(`{"file_path":"/srv/app/out.txt","content":"hello"}`)},
			[]string{"Allow it?\nFile: `out.txt`"}},
		{"write", Approval{Phase: TimedOut, Tool: "Write", Input: json.RawMessage(`{"file_path":"/w/n.md","content":"# N\nhi"}`)},
			[]string{"⌛ Denied: nobody answered in time", "+# N\n+hi"}},
		{"fence in command", Approval{Tool: "Bash", Input: json.RawMessage("{\"command\":\"echo ```\"}")},
			[]string{"echo `\u200b``"}},
		{"restart", Approval{Phase: Restarted, Tool: "Bash", Input: json.RawMessage(`{"command":"ls"}`)},
			[]string{"gateway restarted", "did not run"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := RenderApproval(tc.a)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("RenderApproval = %q\nwant it to contain %q", got, w)
				}
			}
		})
	}
}

// Property: whatever the tool's input, the message fits Discord's 2000
// characters, keeps its code fences balanced and is valid UTF-8.
func TestRenderApprovalFitsDiscord(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	alphabet := []rune("ab \n`é😀-+{}\"\\")
	text := func(n int) string {
		var b strings.Builder
		for range r.IntN(n) {
			b.WriteRune(alphabet[r.IntN(len(alphabet))])
		}
		return b.String()
	}
	for i := range 2000 {
		in := map[string]any{}
		switch i % 5 {
		case 0:
			in["command"] = text(5000)
		case 1:
			in["file_path"], in["old_string"], in["new_string"] = text(500), text(4000), text(4000)
		case 2:
			in["file_path"], in["content"] = text(100), text(8000)
		case 3:
			in["edits"] = []any{map[string]any{"old_string": text(3000), "new_string": text(3000)}, map[string]any{"old_string": text(100)}}
		case 4:
			in["query"] = text(6000)
		}
		raw, _ := json.Marshal(in)
		a := Approval{Phase: ApprovalPhase(r.IntN(int(Restarted) + 1)), Tool: text(60), Input: raw, Description: text(500),
			Asker: "123456789012345678", By: "123456789012345678", Timeout: time.Duration(r.IntN(100)) * time.Minute}
		got := RenderApproval(a)
		if n := utf8.RuneCountInString(got); n > 2000 || n == 0 {
			t.Fatalf("iteration %d: %d characters", i, n)
		}
		if !utf8.ValidString(got) {
			t.Fatalf("iteration %d: invalid UTF-8", i)
		}
		if strings.Count(got, "```")%2 != 0 {
			t.Fatalf("iteration %d: unbalanced fences in\n%s", i, got)
		}
	}
}
