package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/queue"
)

// While the CLI retries the model API, chat's status line says so, with
// the attempt and the reason, instead of a bare "thinking…"; it goes back
// to thinking once the model answers.
func TestChatStatusShowsRetries(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	s := newStatusLine(&b, true)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s.now = func() time.Time { return now }
	c := &chatReplier{status: s}
	s.Start()
	now = now.Add(27 * time.Second)
	c.Observe(queue.Event{}, backends.Event{Kind: backends.EventRetry, Attempt: 5, MaxAttempts: 10,
		Err: &backends.Error{Kind: backends.KindUnreachable}})
	c.Observe(queue.Event{}, backends.Event{Kind: backends.EventText, Text: "hi"})
	s.Stop()
	want := clearLine + "thinking… 0s" +
		clearLine + "retrying the model API (attempt 5 of 10): no response · 27s" +
		clearLine + "thinking… 27s" + clearLine
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("status output (-want +got):\n%s", diff)
	}
}

// Without a terminal (no status line) each retry is a line of its own, as
// each tool is.
func TestChatPrintsRetriesWithoutATerminal(t *testing.T) {
	t.Parallel()
	var lines bytes.Buffer
	c := &chatReplier{status: newStatusLine(&bytes.Buffer{}, false), tools: &lines}
	c.Observe(queue.Event{}, backends.Event{Kind: backends.EventRetry, Attempt: 1, MaxAttempts: 10,
		Err: &backends.Error{Kind: backends.KindOverloaded, Status: 529}})
	c.Observe(queue.Event{}, backends.Event{Kind: backends.EventToolUse, Tool: &backends.ToolCall{Name: "Bash"}})
	want := "· retrying the model API (attempt 1 of 10): HTTP 529 overloaded\n· Bash\n"
	if got := lines.String(); got != want {
		t.Errorf("lines = %q, want %q", got, want)
	}
}

// The status line fits an 80-column terminal (a wrapped line cannot be
// redrawn in place) and keeps the elapsed time when it is cut.
func TestRenderStatusFitsTheTerminal(t *testing.T) {
	t.Parallel()
	long := "retrying the model API (attempt 10 of 10): HTTP 401 authentication failed " + strings.Repeat("x", 50)
	for _, got := range []string{
		renderStatus(187*time.Second, "", long),
		renderStatus(3*time.Second, "mcp__"+strings.Repeat("tool", 40), ""),
	} {
		if n := utf8.RuneCountInString(got); n > maxStatus {
			t.Errorf("%q: %d characters, want at most %d", got, n, maxStatus)
		}
	}
	if got := renderStatus(187*time.Second, "", long); !strings.HasSuffix(got, "… · 187s") {
		t.Errorf("renderStatus = %q, want the elapsed time kept after the cut", got)
	}
}
