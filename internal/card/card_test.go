package card

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jonboulle/clockwork"
)

func TestRenderRunning(t *testing.T) {
	s := State{
		Elapsed: 75 * time.Second, Model: "claude-sonnet-4-5", Thinking: true,
		Tools: []Tool{
			{Name: "Bash", Summary: "npm test", Done: true},
			{Name: "Read", Summary: "src/main.go", Failed: true},
			{Name: "Grep", Summary: "TODO in internal"},
		},
		Text: "Here is what I found so far",
	}
	got := Render(s)
	want := "⏳ **Working** · 1m 15s · `claude-sonnet-4-5`\n" +
		"✓ `Bash` `npm test`\n" +
		"✗ `Read` `src/main.go`\n" +
		"⋯ `Grep` `TODO in internal`\n" +
		"💭 thinking…\n\n" +
		"Here is what I found so far"
	if got != want {
		t.Fatalf("Render =\n%s\nwant\n%s", got, want)
	}
}

func TestRenderShowsTheLastToolsAndTheEndOfALongAnswer(t *testing.T) {
	var tools []Tool
	for i := range 10 {
		tools = append(tools, Tool{Name: "Bash", Summary: fmt.Sprintf("step %d", i), Done: true})
	}
	text := strings.Repeat("filler line\n", 5000) + "THE END"
	got := Render(State{Phase: Stopped, StoppedBy: "ana", Elapsed: 3 * time.Second, Tools: tools, Text: text})
	if n := utf8.RuneCountInString(got); n > Limit {
		t.Fatalf("%d characters", n)
	}
	for _, want := range []string{"🛑 **Stopped** by ana", "4 earlier tool calls", "step 9", "THE END"} {
		if !strings.Contains(got, want) {
			t.Errorf("card lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "step 3`") {
		t.Errorf("card shows an older tool than the last %d:\n%s", MaxTools, got)
	}
}

func TestPreviewReopensAndClosesFences(t *testing.T) {
	text := "intro\n```go\n" + strings.Repeat("x := 1\n", 400) + "fmt.Println(x)"
	got := Render(State{Text: text})
	if !strings.Contains(got, "…\n```\n") || !strings.HasSuffix(got, "\n```") {
		t.Fatalf("fence not reopened and closed:\n%s", got)
	}
	if fences(got)%2 != 0 {
		t.Fatalf("unbalanced fences:\n%s", got)
	}
}

func TestReceipt(t *testing.T) {
	tests := []struct {
		r    Receipt
		want string
	}{
		{Receipt{Phase: Finished, Tools: 4, Elapsed: 42 * time.Second, CostUSD: 0.01234}, "✅ Done in 42s · 4 tools · $0.0123"},
		{Receipt{Phase: Finished, Tools: 1, Elapsed: time.Second, CostUSD: 2.5, Estimate: true}, "✅ Done in 1s · 1 tool · $2.50 (estimate)"},
		{Receipt{Phase: Stopped, Elapsed: 12 * time.Second, CostUSD: -1}, "🛑 Stopped after 12s"},
		{Receipt{Phase: Failed, Tools: 2, Elapsed: 61 * time.Second, CostUSD: -1}, "❌ Failed after 1m 01s · 2 tools"},
	}
	for _, tt := range tests {
		if got := tt.r.String(); got != tt.want {
			t.Errorf("%+v = %q, want %q", tt.r, got, tt.want)
		}
	}
}

func TestSummarize(t *testing.T) {
	tests := []struct{ name, input, want string }{
		{"Bash", `{"command":"npm test\nnpm run lint","description":"x"}`, "npm test …"},
		{"Read", `{"file_path":"/srv/app/src/main.go"}`, "src/main.go"},
		{"Write", `{"file_path":"/etc/passwd"}`, "/etc/passwd"},
		{"Grep", `{"pattern":"TODO","path":"/srv/app/internal"}`, "TODO in internal"},
		{"Glob", `{"pattern":"**/*.go"}`, "**/*.go"},
		{"WebFetch", `{"url":"https://example.com","prompt":"p"}`, "https://example.com"},
		{"Task", `{"description":"review","prompt":"long"}`, "review"},
		{"TodoWrite", `{"todos":[{},{},{}]}`, "3 todos"},
		{"command_execution", `{"command":["bash","-lc","ls -la"]}`, "ls -la"},
		{"run_shell_command", `{"command":"git status"}`, "git status"},
		{"read_file", `{"absolute_path":"/srv/app/README.md"}`, "README.md"},
		{"edit", `{"filePath":"/srv/app/a.txt"}`, "a.txt"},
		{"mcp__x__y", `{"b":"second","a":"first"}`, "first"},
		{"Bash", `{"command":"echo @everyone <@123>"}`, "echo @\u200beveryone <\u200b@123>"},
		{"Bash", `not json`, ""},
	}
	for _, tt := range tests {
		if got := Summarize(tt.name, tt.input, "/srv/app"); got != tt.want {
			t.Errorf("Summarize(%s, %s) = %q, want %q", tt.name, tt.input, got, tt.want)
		}
	}
}

func fences(s string) int {
	n := 0
	for line := range strings.SplitSeq(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			n++
		}
	}
	return n
}

// checkCard is the card's contract: within Discord's limit, fences
// balanced, no mention Discord would render.
func checkCard(t *testing.T, s string) {
	t.Helper()
	if n := utf8.RuneCountInString(s); n > Limit || n == 0 {
		t.Fatalf("card of %d characters", n)
	}
	if fences(s)%2 != 0 {
		t.Fatalf("unbalanced fences:\n%s", s)
	}
	for _, bad := range []string{"@everyone", "@here", "<@", "<#"} {
		if strings.Contains(s, bad) {
			t.Fatalf("card contains %q:\n%s", bad, s)
		}
	}
}

func FuzzRender(f *testing.F) {
	f.Add("hello ```go\ncode", "Bash", `{"command":"ls"}`, "notice", "claude", 3, int64(5e9))
	f.Add(strings.Repeat("```\n", 7), "Read`x", `{"file_path":"`+strings.Repeat("a", 300)+`"}`, "@everyone", "<@1>", 30, int64(-1))
	f.Fuzz(func(t *testing.T, text, tool, input, notice, model string, ntools int, elapsed int64) {
		var tools []Tool
		for i := range ntools % 40 {
			tools = append(tools, Tool{Name: tool, Summary: Summarize(tool, input, "/w"), Done: i%2 == 0, Failed: i%3 == 0})
		}
		for _, p := range []Phase{Running, Stopping, Stopped, Finished, Failed} {
			s := State{Phase: p, Elapsed: time.Duration(elapsed), Model: model, Tools: tools, Thinking: true,
				Text: text, Retry: notice, Notice: notice, Warning: notice, StoppedBy: model}
			checkCard(t, Render(s))
			s.Header = Receipt{Phase: p, Tools: ntools, Elapsed: time.Duration(elapsed), CostUSD: 12345.678, Estimate: true}.String() + notice
			checkCard(t, Render(s))
			checkCard(t, Receipt{Phase: p, Tools: ntools, Elapsed: time.Duration(elapsed), CostUSD: float64(elapsed) / 1e9}.String())
		}
		if s := Summarize(tool, input, "/w"); strings.Contains(s, "\n") || utf8.RuneCountInString(s) > maxSummary {
			t.Fatalf("summary %q", s)
		}
	})
}

func BenchmarkRender(b *testing.B) {
	s := State{Model: "claude", Text: strings.Repeat("word ", 4000)}
	for range 20 {
		s.Tools = append(s.Tools, Tool{Name: "Bash", Summary: "go test ./...", Done: true})
	}
	for b.Loop() {
		Render(s)
	}
}

// recordingSender records frames and answers as told.
type recordingSender struct {
	mu     sync.Mutex
	frames []string
	answer func(n int) (time.Duration, error)
	sent   chan struct{}
}

func newSender() *recordingSender { return &recordingSender{sent: make(chan struct{}, 100)} }

func (r *recordingSender) send(_ context.Context, frame string) (time.Duration, error) {
	r.mu.Lock()
	r.frames = append(r.frames, frame)
	n := len(r.frames)
	r.mu.Unlock()
	r.sent <- struct{}{}
	if r.answer != nil {
		return r.answer(n)
	}
	return 0, nil
}

func (r *recordingSender) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.frames...)
}

func waitSent(t *testing.T, r *recordingSender) {
	t.Helper()
	select {
	case <-r.sent:
	case <-time.After(5 * time.Second):
		t.Fatal("no frame sent")
	}
}

func TestPacerSendsTheLatestFrameOncePerInterval(t *testing.T) {
	clock := clockwork.NewFakeClock()
	r := newSender()
	p := NewPacer(clock, 1200*time.Millisecond, r.send, "")
	p.Update("frame 0")
	waitSent(t, r) // the first frame goes at once
	for i := 1; i <= 50; i++ {
		p.Update(fmt.Sprintf("frame %d", i))
	}
	if err := clock.BlockUntilContext(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(1199 * time.Millisecond)
	select {
	case <-r.sent:
		t.Fatal("a frame went before the interval")
	default:
	}
	clock.Advance(time.Millisecond)
	waitSent(t, r)
	p.Update("frame 50") // already sent: not again
	if got := p.Close(t.Context()); got != "frame 50" {
		t.Fatalf("Close = %q", got)
	}
	if got := r.got(); len(got) != 2 || got[1] != "frame 50" {
		t.Fatalf("frames = %q, want frame 0 and frame 50", got)
	}
}

func TestPacerHonoursRetryAfter(t *testing.T) {
	clock := clockwork.NewFakeClock()
	r := newSender()
	r.answer = func(n int) (time.Duration, error) {
		if n == 1 {
			return 3 * time.Second, fmt.Errorf("429")
		}
		return 0, nil
	}
	p := NewPacer(clock, time.Second, r.send, "")
	p.Update("a")
	waitSent(t, r)
	p.Update("b")
	if err := clock.BlockUntilContext(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2999 * time.Millisecond)
	select {
	case <-r.sent:
		t.Fatal("sent before retry_after passed")
	default:
	}
	clock.Advance(time.Millisecond)
	waitSent(t, r)
	if got := p.Close(t.Context()); got != "b" {
		t.Fatalf("Close = %q, want b", got)
	}
	if got := r.got(); got[1] != "b" {
		t.Fatalf("frames = %q: the latest frame must follow the 429", got)
	}
}

func TestPacerSendsNothingAfterClose(t *testing.T) {
	clock := clockwork.NewFakeClock()
	r := newSender()
	p := NewPacer(clock, time.Second, r.send, "")
	p.Update("a")
	waitSent(t, r)
	p.Update("b")
	p.Close(t.Context())
	p.Update("c")
	clock.Advance(time.Minute)
	if got := r.got(); len(got) != 1 || p.Sends() != 1 {
		t.Fatalf("frames after close = %q", got)
	}
}

// Close does not wait for the interval to pass: a pacer between two
// sends stops at once.
func TestPacerCloseDoesNotWaitForTheInterval(t *testing.T) {
	clock := clockwork.NewFakeClock()
	r := newSender()
	p := NewPacer(clock, time.Hour, r.send, "")
	p.Update("a")
	waitSent(t, r)
	p.Update("b")
	if err := clock.BlockUntilContext(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	closed := make(chan string)
	go func() { closed <- p.Close(context.Background()) }()
	select {
	case got := <-closed:
		if got != "a" {
			t.Fatalf("Close = %q", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close waited for the interval")
	}
}

// A pacer for a message created with a frame does not send it again, and
// waits an interval before the first edit.
func TestPacerAfterTheFirstFrame(t *testing.T) {
	clock := clockwork.NewFakeClock()
	r := newSender()
	p := NewPacer(clock, time.Second, r.send, "posted")
	p.Update("posted")
	p.Update("next")
	if err := clock.BlockUntilContext(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.sent:
		t.Fatal("an edit before the interval")
	default:
	}
	clock.Advance(time.Second)
	waitSent(t, r)
	if got := p.Close(t.Context()); got != "next" || len(r.got()) != 1 {
		t.Fatalf("Close = %q, frames %q", got, r.got())
	}
}

func TestRenderShowsTheSandboxTier(t *testing.T) {
	got := Render(State{Phase: Running, Elapsed: 3 * time.Second, Model: "gpt-5", Sandbox: "workspace-write"})
	if first := strings.SplitN(got, "\n", 2)[0]; !strings.HasSuffix(first, "· `gpt-5` · sandbox `workspace-write`") {
		t.Errorf("header %q: want the sandbox tier after the model", first)
	}
}

// The card does not show the JSON of action blocks, whole or half written.
func TestPreviewHidesActionBlocks(t *testing.T) {
	for text, want := range map[string]string{
		"Creating it now.\n<discord-action>{\"type\":\"channelCreate\",\"name\":\"standup\"}</discord-action>\nDone soon.": "Creating it now.\n\nDone soon.",
		"Creating it now.\n<discord-action>{\"type\":\"chann":                                                              "Creating it now.",
	} {
		if got := withoutActions(text); strings.TrimSpace(got) != strings.TrimSpace(want) {
			t.Errorf("withoutActions(%q) = %q, want %q", text, got, want)
		}
		if card := preview(text, 500); strings.Contains(card, "discord-action") {
			t.Errorf("preview shows an action block: %q", card)
		}
	}
}
