package cli

import (
	"fmt"
	"io"
	"sync"
	"time"
	"unicode/utf8"
)

// statusLine is the one-line indicator chat shows on stderr while a turn
// runs ("thinking… 4s · Bash", or "retrying the model API (attempt 2 of
// 10): no response · 27s" while the CLI retries a failed call):
// overwritten in place, redrawn every second and when a tool starts or
// ends or a retry begins, and cleared before the reply or a log line is
// printed. When stderr is not a terminal it shows nothing and only
// passes log lines through.
//
// It is safe for concurrent use: the runtime reports tools from its
// goroutine, a ticker redraws, and logs may be written from anywhere.
type statusLine struct {
	w       io.Writer
	enabled bool
	now     func() time.Time

	// mu guards everything below and serialises writes to w.
	mu      sync.Mutex
	active  bool      // a turn is running
	shown   bool      // the line is on the screen now
	started time.Time // when the turn started
	tool    string    // the running tool, "" when none
	retry   string    // what the CLI is retrying and why, "" when it is not
	quit    chan struct{}
}

func newStatusLine(w io.Writer, enabled bool) *statusLine {
	return &statusLine{w: w, enabled: enabled, now: time.Now}
}

// maxStatus is the indicator's width in characters: a line wider than
// the terminal wraps, and the carriage return that redraws it would leave
// its first part on the screen.
const maxStatus = 79

// renderStatus is the indicator's text: what the CLI retries, when it
// does, else thinking and the running tool; and the time since the turn
// started.
func renderStatus(elapsed time.Duration, tool, retry string) string {
	secs := fmt.Sprintf("%ds", int(elapsed.Seconds()))
	if retry != "" {
		tail := " · " + secs
		return cutRunes(retry, maxStatus-utf8.RuneCountInString(tail)) + tail
	}
	s := "thinking… " + secs
	if tool != "" {
		s += " · " + tool
	}
	return cutRunes(s, maxStatus)
}

// cutRunes cuts s to at most n characters, marking a cut with "…".
func cutRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// clearLine returns the cursor to the line's start and erases it.
const clearLine = "\r\x1b[K"

func (s *statusLine) drawLocked() {
	if !s.enabled || !s.active {
		return
	}
	fmt.Fprint(s.w, clearLine+renderStatus(s.now().Sub(s.started), s.tool, s.retry))
	s.shown = true
}

func (s *statusLine) clearLocked() {
	if s.shown {
		fmt.Fprint(s.w, clearLine)
		s.shown = false
	}
}

// Start shows the indicator for a new turn.
func (s *statusLine) Start() {
	if !s.enabled {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active {
		return
	}
	s.active, s.started, s.tool, s.retry = true, s.now(), "", ""
	s.quit = make(chan struct{})
	s.drawLocked()
	go s.tick(s.quit)
}

func (s *statusLine) tick(quit chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			s.mu.Lock()
			s.drawLocked()
			s.mu.Unlock()
		case <-quit:
			return
		}
	}
}

// Tool shows the running tool; "" goes back to thinking.
func (s *statusLine) Tool(name string) {
	if !s.enabled {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tool = name
	s.drawLocked()
}

// Retry shows what the CLI is retrying and why; "" when the model API
// has answered.
func (s *statusLine) Retry(what string) {
	if !s.enabled {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.retry == what {
		return
	}
	s.retry = what
	s.drawLocked()
}

// Stop clears the indicator; the turn is over or its reply follows.
func (s *statusLine) Stop() {
	if !s.enabled {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.active {
		close(s.quit)
		s.active = false
	}
	s.clearLocked()
}

// Write prints p (a log line) above the indicator: it clears the line,
// writes, and draws the indicator again.
func (s *statusLine) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clearLocked()
	n, err := s.w.Write(p)
	s.drawLocked()
	return n, err
}
