package card

import (
	"strings"
	"testing"
	"time"
)

// A model API call the CLI retries is on the card, with the attempt and
// the reason, while the turn runs; a finished or stopped turn no longer
// says it is retrying.
func TestRenderShowsTheRetry(t *testing.T) {
	const retry = "retrying the model API (attempt 5 of 10): no response"
	s := State{Elapsed: 27 * time.Second, Model: "claude-opus-5-5", Retry: retry}
	want := "⏳ **Working** · 27s · `claude-opus-5-5`\n" +
		"🔁 retrying the model API (attempt 5 of 10): no response"
	if got := Render(s); got != want {
		t.Fatalf("Render =\n%s\nwant\n%s", got, want)
	}
	for _, p := range []Phase{Stopping, Stopped, Finished, Failed} {
		s.Phase = p
		if got := Render(s); strings.Contains(got, "retrying") {
			t.Errorf("phase %d: card still says it is retrying:\n%s", p, got)
		}
	}
}
