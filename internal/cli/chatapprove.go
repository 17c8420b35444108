package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/agent"
	"github.com/agentgateway/gateway/internal/queue"
)

// approvalAnswer is what the person at the terminal answered.
type approvalAnswer int

const (
	answerNo      approvalAnswer = iota // deny this call
	answerYes                           // allow this call
	answerSession                       // allow this call for the rest of the chat
)

// parseApprovalAnswer reads a line typed after approvalQuestion. Only y,
// yes, a and always (any case) allow; everything else, the empty line
// included, denies.
func parseApprovalAnswer(line string) approvalAnswer {
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return answerYes
	case "a", "always":
		return answerSession
	}
	return answerNo
}

// approvalQuestion is the question chat prints for a tool approval:
// `Allow Bash "npm test"? [y/N/a] `. What comes from the CLI is quoted or
// stripped of control characters, so it cannot move the cursor or restyle
// the terminal.
func approvalQuestion(a backends.Approval) string {
	q := "Allow " + printable(a.Tool)
	if s := agent.ToolSummary(a, 200); s != "" {
		q += fmt.Sprintf(" %q", s)
	}
	return q + "? [y/N/a] "
}

// printable drops control characters.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, s)
}

// approvalLegend is printed under the first question of a chat.
const approvalLegend = "  y: allow once · N (or Enter): deny · a: allow this call for the rest of the chat"

// Messages to the model when a call is not allowed.
const (
	deniedInTerminal = "The user denied this tool call."
	deniedNoAnswer   = "Nobody answered the approval request in time, so this tool call was denied. Go on without it, or say in your answer what you need approved."
	deniedInputEnded = "The approval could not be asked (the terminal's input ended), so this tool call was denied."
)

// terminalApprover asks the person at the terminal about the agent's tool
// calls, as the Discord bot does with buttons (agent.Approver). It reads
// the answer from the chat's input, the same lines prompts come from: while
// a turn runs, the prompt loop does not read them.
//
// It is safe for concurrent use; questions are asked one at a time.
type terminalApprover struct {
	errOut  io.Writer
	status  *statusLine
	lines   func() <-chan string
	timeout time.Duration

	mu sync.Mutex // held while a question is open; guards the fields below
	// allowed are the calls (tool and summary) answered with a: allowed
	// without asking for the rest of the chat.
	allowed map[string]bool
	legend  bool // the legend was printed
}

var _ agent.Approver = (*terminalApprover)(nil)

// Approve asks about one call and waits for a line, the approval timeout,
// or ctx (the CLI withdrew the request, or the turn was stopped).
func (t *terminalApprover) Approve(ctx context.Context, _ queue.Event, a backends.Approval) agent.Decision {
	t.mu.Lock()
	defer t.mu.Unlock()
	key := a.Tool + "\x00" + agent.ToolSummary(a, 1<<12)
	if t.allowed[key] {
		return agent.Decision{Verdict: backends.Verdict{Allow: true}, By: "terminal (this chat)"}
	}
	t.status.Stop()
	defer func() {
		if ctx.Err() == nil {
			t.status.Start() // the turn goes on
		}
	}()
	if !t.legend {
		fmt.Fprintln(t.errOut, approvalLegend)
		t.legend = true
	}
	fmt.Fprint(t.errOut, approvalQuestion(a))
	timer := time.NewTimer(t.timeout)
	defer timer.Stop()
	select {
	case line, ok := <-t.lines():
		if !ok {
			fmt.Fprintln(t.errOut)
			return agent.Decision{Verdict: backends.Verdict{Message: deniedInputEnded}, By: "end of input"}
		}
		switch parseApprovalAnswer(line) {
		case answerYes:
			return agent.Decision{Verdict: backends.Verdict{Allow: true}, By: "terminal"}
		case answerSession:
			if t.allowed == nil {
				t.allowed = make(map[string]bool)
			}
			t.allowed[key] = true
			return agent.Decision{Verdict: backends.Verdict{Allow: true, Remember: a.CanRemember}, By: "terminal"}
		}
		return agent.Decision{Verdict: backends.Verdict{Message: deniedInTerminal}, By: "terminal"}
	case <-timer.C:
		fmt.Fprintf(t.errOut, "\nno answer in %s: denied\n", t.timeout)
		return agent.Decision{Verdict: backends.Verdict{Message: deniedNoAnswer}, By: "timeout"}
	case <-ctx.Done():
		fmt.Fprintln(t.errOut)
		return agent.Decision{Verdict: backends.Verdict{Message: deniedInTerminal}, By: "withdrawn"}
	}
}

// askingReplier is the chat's replier when the terminal answers tool
// approvals.
type askingReplier struct {
	*chatReplier
	*terminalApprover
}

// inputLines reads the chat's input, one line at a time, from the first
// use on: prompts and approval answers come from the same lines.
type inputLines struct {
	r    io.Reader
	once sync.Once
	c    chan string
	err  chan error // the reader's error once c is closed
	quit chan struct{}
}

func newInputLines(r io.Reader) *inputLines {
	return &inputLines{r: r, c: make(chan string), err: make(chan error, 1), quit: make(chan struct{})}
}

// lines returns the input's lines, starting the reader on first use. The
// channel is closed at the end of input; err then tells why.
func (in *inputLines) lines() <-chan string {
	in.once.Do(func() {
		go func() {
			sc := newLineScanner(in.r)
			for sc.Scan() {
				select {
				case in.c <- sc.Text():
				case <-in.quit:
					return
				}
			}
			in.err <- sc.Err()
			close(in.c)
		}()
	})
	return in.c
}

// close stops the reader at its next line.
func (in *inputLines) close() { close(in.quit) }
