package backends

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// recordedTranscript is a session the real claude 2.1.330 made with
// `claude -p` in a terminal: a Read tool call, then a resumed second
// prompt (testdata/claude/transcripts).
const recordedTranscript = "../testdata/claude/transcripts/7e8d8a5c-70e2-4c25-9420-5cf22aa11aa5.jsonl"

func TestParseClaudeTranscriptRecorded(t *testing.T) {
	data, err := os.ReadFile(recordedTranscript)
	if err != nil {
		t.Fatal(err)
	}
	got := ParseClaudeTranscript(data)
	want := TranscriptHead{
		SessionID:   "7e8d8a5c-70e2-4c25-9420-5cf22aa11aa5",
		Dir:         "/srv/projects/my app",
		FirstPrompt: "Read notes.txt and tell me\nwhat it says",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("head (-want +got):\n%s", diff)
	}
}

var transcriptCases = []struct {
	name string
	in   string
	want TranscriptHead
}{
	{"empty", "", TranscriptHead{}},
	{"not json", "hello\n{\n", TranscriptHead{}},
	{
		"string content",
		`{"type":"user","message":{"role":"user","content":"fix the bug"},"cwd":"/p/a","sessionId":"s1"}`,
		TranscriptHead{SessionID: "s1", Dir: "/p/a", FirstPrompt: "fix the bug"},
	},
	{
		// The gateway's own sessions (stream-json input) send blocks.
		"text blocks",
		`{"type":"user","message":{"role":"user","content":[{"type":"image","source":{}},{"type":"text","text":"look"},{"type":"text","text":"at this"}]},"cwd":"/p"}`,
		TranscriptHead{Dir: "/p", FirstPrompt: "look\nat this"},
	},
	{
		"tool results, meta lines and side chains are no prompts",
		`{"type":"user","isMeta":true,"message":{"role":"user","content":"<local-command-caveat>x</local-command-caveat>"}}
{"type":"user","isSidechain":true,"message":{"role":"user","content":"sub agent task"}}
{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"1\thello"}]}}
{"type":"user","message":{"role":"user","content":"<command-name>/clear</command-name>"}}
{"type":"summary","summary":"Old chat","leafUuid":"x"}
{"type":"user","message":{"role":"user","content":"  the real one  "},"cwd":"/w","sessionId":"s2"}`,
		TranscriptHead{SessionID: "s2", Dir: "/w", FirstPrompt: "the real one"},
	},
	{
		"cwd from an earlier line",
		`{"type":"queue-operation","sessionId":"s3","content":"hi"}
{"type":"attachment","cwd":"/first","sessionId":"s3"}
{"type":"user","message":{"role":"user","content":"hi"},"cwd":"/second"}`,
		TranscriptHead{SessionID: "s3", Dir: "/first", FirstPrompt: "hi"},
	},
	{
		"wrong types are skipped",
		`{"type":"user","message":{"role":"user","content":42},"cwd":7}
{"type":"user","message":"x"}
{"type":"user","message":{"role":"assistant","content":"not a user"}}
{"type":"user","message":{"role":"user","content":"ok"}}`,
		TranscriptHead{FirstPrompt: "ok"},
	},
}

func TestParseClaudeTranscript(t *testing.T) {
	for _, tc := range transcriptCases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ParseClaudeTranscript([]byte(tc.in))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzParseClaudeTranscript(f *testing.F) {
	for _, tc := range transcriptCases {
		f.Add([]byte(tc.in))
	}
	if data, err := os.ReadFile(recordedTranscript); err == nil {
		f.Add(data[:min(len(data), 8<<10)])
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h := ParseClaudeTranscript(data)
		if len(h.FirstPrompt) > maxFirstPrompt {
			t.Errorf("first prompt of %d bytes, over %d", len(h.FirstPrompt), maxFirstPrompt)
		}
		if h.FirstPrompt != strings.TrimSpace(h.FirstPrompt) {
			t.Errorf("first prompt %q not trimmed", h.FirstPrompt)
		}
	})
}

func TestValidSessionID(t *testing.T) {
	for _, tc := range []struct {
		backend, id string
		want        bool
	}{
		{"claude", "7e8d8a5c-70e2-4c25-9420-5cf22aa11aa5", true},
		{"claude", "7E8D8A5C-70E2-4C25-9420-5CF22AA11AA5", true},
		{"claude", "7e8d8a5c-70e2-4c25-9420-5cf22aa11aa", false},
		{"claude", "../../etc/passwd", false},
		{"claude", "ses_e003ba4faffeGjddRRx7vuOWwJ", false},
		{"codex", "01a1ffc4-2f44-75c3-a170-fae02c601c30", true},
		{"gemini", "9fa439a7-4012-4157-bab7-fa6f10f12ab0", true},
		{"pi", "01a1ffc2-9b24-7101-8740-0cb6d63f60f6", true},
		{"opencode", "ses_e003ba4faffeGjddRRx7vuOWwJ", true},
		{"opencode", "ses_", false},
		{"opencode", "ses_a/b", false},
		{"opencode", "7e8d8a5c-70e2-4c25-9420-5cf22aa11aa5", false},
		{"acp", "--help", false},
		{"acp", "anything-1", true},
		{"claude", "", false},
	} {
		if got := ValidSessionID(tc.backend, tc.id); got != tc.want {
			t.Errorf("ValidSessionID(%q, %q) = %v, want %v", tc.backend, tc.id, got, tc.want)
		}
	}
}

// addSession writes a transcript for id made in dir, modified at mod.
func (r *sessionRig) addSession(t *testing.T, dir, id, prompt string, mod time.Time) string {
	t.Helper()
	folder := filepath.Join(r.projects(), claudeProjectDir(dir))
	r.mkdir(t, folder, 0o700, true)
	p := filepath.Join(folder, id+".jsonl")
	r.write(t, p, `{"type":"user","message":{"role":"user","content":"`+prompt+`"},"cwd":"`+dir+`","sessionId":"`+id+`"}`+"\n", true)
	if err := os.Chtimes(p, mod, mod); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestClaudeSessionsNewestFirst(t *testing.T) {
	for _, agent := range sessionModes(t) {
		t.Run(modeName(agent), func(t *testing.T) {
			r := newSessionRig(t, agent)
			base := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
			ids := []string{
				"11111111-1111-4111-8111-111111111111",
				"22222222-2222-4222-8222-222222222222",
				"33333333-3333-4333-8333-333333333333",
			}
			for i, id := range ids {
				r.addSession(t, r.to, id, "prompt "+id[:1], base.Add(time.Duration(i)*time.Hour))
			}
			// Not sessions: another name, a folder, a link to the secret.
			r.write(t, filepath.Join(r.newDir(), "notes.jsonl"), "{}\n", true)
			r.mkdir(t, filepath.Join(r.newDir(), "44444444-4444-4444-8444-444444444444.jsonl"), 0o700, true)
			link := filepath.Join(r.newDir(), "55555555-5555-4555-8555-555555555555.jsonl")
			if err := os.Symlink(r.secret, link); err != nil {
				t.Fatal(err)
			}
			r.own(t, link)

			got, err := r.c.Sessions(r.to, 2)
			if err != nil {
				t.Fatal(err)
			}
			want := []SessionInfo{
				{ID: ids[2], Dir: r.to, FirstPrompt: "prompt 3", Modified: base.Add(2 * time.Hour)},
				{ID: ids[1], Dir: r.to, FirstPrompt: "prompt 2", Modified: base.Add(time.Hour)},
			}
			if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
				t.Errorf("sessions (-want +got):\n%s", diff)
			}
			none, err := r.c.Sessions(filepath.Join(r.dir, "elsewhere"), 25)
			if err != nil || len(none) != 0 {
				t.Errorf("a directory without sessions: %v, %v", none, err)
			}
		})
	}
}

func TestClaudeFindSession(t *testing.T) {
	for _, agent := range sessionModes(t) {
		t.Run(modeName(agent), func(t *testing.T) {
			r := newSessionRig(t, agent)
			other := "66666666-6666-4666-8666-666666666666"
			mod := time.Date(2026, 11, 2, 8, 0, 0, 0, time.UTC)
			r.addSession(t, r.to, other, "in the new one", mod)

			got, err := r.c.FindSession(other)
			if err != nil {
				t.Fatal(err)
			}
			want := SessionInfo{ID: other, Dir: r.to, FirstPrompt: "in the new one", Modified: mod}
			if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			// The rig's transcript names no working directory, so it
			// could not be carried to the channel's: not offered.
			for _, id := range []string{testSessionID, "77777777-7777-4777-8777-777777777777", "../x", "", "*"} {
				if _, err := r.c.FindSession(id); !errors.Is(err, ErrNoSession) {
					t.Errorf("FindSession(%q) = %v, want ErrNoSession", id, err)
				}
			}
			// A transcript that is a link to the gateway's secret is not read.
			planted := "88888888-8888-4888-8888-888888888888"
			link := filepath.Join(r.oldDir(), planted+".jsonl")
			if err := os.Symlink(r.secret, link); err != nil {
				t.Fatal(err)
			}
			r.own(t, link)
			if s, err := r.c.FindSession(planted); err == nil || strings.Contains(s.FirstPrompt, "sk-ant") {
				t.Errorf("a planted link was read: %+v, %v", s, err)
			}
		})
	}
}
