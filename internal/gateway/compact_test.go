package gateway

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/cost"
	"github.com/agentgateway/gateway/internal/fakediscord"
)

// compactingFake is the fake backend with a Compact of its own.
type compactingFake struct {
	*backends.Fake
	mu       sync.Mutex // guards compacts
	compacts []backends.Request
	compact  func(ctx context.Context, req backends.Request) (backends.Result, error)
}

func (f *compactingFake) Compact(ctx context.Context, req backends.Request) (backends.Result, error) {
	f.mu.Lock()
	f.compacts = append(f.compacts, req)
	f.mu.Unlock()
	return f.compact(ctx, req)
}

func (f *compactingFake) requests() []backends.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]backends.Request(nil), f.compacts...)
}

// botSays waits for a bot message in the harness's channel containing s.
func (h *harness) botSays(s string) fakediscord.Message {
	h.t.Helper()
	var found fakediscord.Message
	h.fd.Wait(h.t, fmt.Sprintf("a message saying %q", s), waitLong, func() bool {
		for _, m := range h.fd.BotMessages(h.channel) {
			if strings.Contains(m.Content, s) {
				found = m
				return true
			}
		}
		return false
	})
	return found
}

// compactWhenIdle runs /compact until the channel's lane has let go of
// the last turn (its receipt comes a moment before), and returns the
// answer.
func (h *harness) compactWhenIdle() string {
	h.t.Helper()
	deadline := time.Now().Add(waitLong)
	for {
		got := h.answer(h.fd.Interact(h.channel, h.user, commandCompact, nil))
		if !strings.Contains(got, "a prompt is running or waiting") || time.Now().After(deadline) {
			return got
		}
	}
}

// A turn's receipt shows how full the context is and, past 80 %, points
// to /compact; /compact then summarises the channel's session on the
// backend, binds the session id it gives back, and says how full the
// context is now.
func TestCompactCommand(t *testing.T) {
	release := make(chan struct{})
	calls := 0 // Compact's calls, one at a time
	fake := &compactingFake{
		Fake: &backends.Fake{Respond: func(ctx context.Context, req backends.Request, emit func(backends.Event)) (backends.Result, error) {
			emit(backends.Event{Kind: backends.EventInit, SessionID: "s1"})
			<-release // until the card is up
			return backends.Result{SessionID: "s1", Text: "A long answer.", Model: "claude-sonnet-4-5", ContextTokens: 170_000, SessionCostUSD: 0.5}, nil
		}},
		compact: func(ctx context.Context, req backends.Request) (backends.Result, error) {
			// claude keeps the session id; a CLI that changes it (here
			// the second time) is followed.
			if calls++; calls == 2 {
				return backends.Result{SessionID: "s2", Compacted: true, ContextTokens: 3_000, ContextWindow: 200_000}, nil
			}
			return backends.Result{SessionID: req.SessionID, Compacted: true, ContextTokens: 4_000, ContextWindow: 200_000, SessionCostUSD: 0.52}, nil
		},
	}
	h := startGateway(t, harnessOptions{backend: fake, cardDelay: time.Millisecond, env: map[string]string{config.EnvTurnCard: config.TurnCardReceipt}})

	id := h.fd.Interact(h.channel, h.user, commandCompact, nil)
	if got := h.answer(id); !strings.Contains(got, "no conversation to compact") {
		t.Errorf("/compact without a session answered %q", got)
	}

	h.mention(h.channel, "tell me everything")
	h.botSays("Working")
	close(release)
	h.botSays("context 85% — /compact to summarise")

	if got := h.compactWhenIdle(); !strings.Contains(got, "Compacting this conversation") {
		t.Errorf("/compact answered %q", got)
	}
	report := h.botSays("Compacted")
	if want := "🗜️ Compacted: the conversation so far is now a summary. Context 2% (4,000 tokens). The summary cost $0.0200."; report.Content != want {
		t.Errorf("report = %q, want %q", report.Content, want)
	}
	// The summary is a ledger entry of its own; the binding's total
	// moved on, so the next prompt is not charged for it again.
	if b, _ := h.sessions().Get(h.channel.String()); b.SessionCostUSD != 0.52 {
		t.Errorf("binding's session total after /compact = %v, want 0.52", b.SessionCostUSD)
	}
	var spent float64
	h.fd.Wait(t, "the prompt and the compaction in the ledger", waitLong, func() bool {
		ledger, err := cost.Open(filepath.Join(h.cfg.ConfigDir, cost.FileName), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ledger.Close()
		_, spent = ledger.Spent(time.Now(), h.channel.String())
		return math.Abs(spent-0.52) < 1e-9
	})
	reqs := fake.requests()
	if len(reqs) != 1 || reqs[0].SessionID != "s1" || reqs[0].Key != h.channel.String() || reqs[0].WorkDir != h.cfg.ConfigDir {
		t.Fatalf("Compact got %+v, want session s1 of the channel in CONFIG_DIR", reqs)
	}
	if id, _ := h.sessionBinding(); id != "s1" {
		t.Errorf("binding after /compact = %q, want s1 kept", id)
	}

	h.fd.Interact(h.channel, h.user, commandCompact, nil)
	h.botSays("(3,000 tokens)")
	if id, _ := h.sessionBinding(); id != "s2" {
		t.Errorf("binding after /compact = %q, want the session the CLI gave back", id)
	}
}

// /compact refuses what cannot work, in words the user can act on.
func TestCompactRefusals(t *testing.T) {
	t.Run("backend without compaction", func(t *testing.T) {
		h := startGateway(t, harnessOptions{})
		h.mention(h.channel, "hello")
		h.waitReplies(h.channel, 1)
		id := h.fd.Interact(h.channel, h.user, commandCompact, nil)
		if got := h.answer(id); !strings.Contains(got, "not supported by this backend (fake)") {
			t.Errorf("answer = %q", got)
		}
	})
	t.Run("prompt running", func(t *testing.T) {
		release := make(chan struct{})
		started := make(chan struct{}, 1)
		fake := &compactingFake{
			Fake: &backends.Fake{Respond: func(ctx context.Context, req backends.Request, emit func(backends.Event)) (backends.Result, error) {
				emit(backends.Event{Kind: backends.EventInit, SessionID: "s1"})
				started <- struct{}{}
				<-release
				return backends.Result{SessionID: "s1", Text: "done"}, nil
			}},
			compact: func(context.Context, backends.Request) (backends.Result, error) {
				return backends.Result{}, errors.New("must not run")
			},
		}
		h := startGateway(t, harnessOptions{backend: fake})
		h.mention(h.channel, "work")
		<-started
		id := h.fd.Interact(h.channel, h.user, commandCompact, nil)
		if got := h.answer(id); !strings.Contains(got, "a prompt is running or waiting") {
			t.Errorf("answer = %q", got)
		}
		close(release)
		h.waitReplies(h.channel, 1)
		if n := len(fake.requests()); n != 0 {
			t.Errorf("Compact ran %d times during a turn", n)
		}
	})
	t.Run("nothing to compact", func(t *testing.T) {
		fake := &compactingFake{
			Fake: &backends.Fake{Respond: func(ctx context.Context, req backends.Request, emit func(backends.Event)) (backends.Result, error) {
				emit(backends.Event{Kind: backends.EventInit, SessionID: "s1"})
				return backends.Result{SessionID: "s1", Text: "hi"}, nil
			}},
			compact: func(context.Context, backends.Request) (backends.Result, error) {
				return backends.Result{SessionID: "s1"}, fmt.Errorf("%w: Not enough messages to compact.", backends.ErrNotCompacted)
			},
		}
		h := startGateway(t, harnessOptions{backend: fake})
		h.mention(h.channel, "hi")
		h.waitReplies(h.channel, 1)
		h.compactWhenIdle()
		h.botSays("Not compacted: Not enough messages to compact. The conversation goes on as it was.")
		if id, _ := h.sessionBinding(); id != "s1" {
			t.Errorf("binding = %q, want s1 kept", id)
		}
	})
}

// A turn of a channel being compacted waits until the compaction is over;
// a shutdown ends the wait.
func TestCompactionsHoldTheLane(t *testing.T) {
	t.Parallel()
	var k compactions
	end, ok := k.begin("c1")
	if !ok {
		t.Fatal("begin refused on an idle lane")
	}
	if _, ok := k.begin("c1"); ok {
		t.Error("a second compaction of the same lane began")
	}
	if !k.wait(context.Background(), "c2") {
		t.Error("another lane waited")
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if k.wait(cancelled, "c1") {
		t.Error("wait returned true for a compacting lane whose context ended")
	}
	waited := make(chan bool)
	go func() { waited <- k.wait(context.Background(), "c1") }()
	end()
	if !<-waited {
		t.Error("wait did not end with the compaction")
	}
	if _, ok := k.begin("c1"); !ok {
		t.Error("the lane stayed marked after its compaction ended")
	}
}

func TestCompactReport(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		res  backends.Result
		err  error
		want string
	}{
		{"window from the CLI", backends.Result{Compacted: true, ContextTokens: 2566, ContextWindow: 1_000_000},
			nil, "🗜️ Compacted: the conversation so far is now a summary. Context 1% (2,566 tokens)."},
		{"unknown window", backends.Result{Compacted: true, ContextTokens: 45_300, Model: "llama"},
			nil, "🗜️ Compacted: the conversation so far is now a summary. Context 45k tokens."},
		{"an estimate (pi)", backends.Result{Compacted: true, CostUSD: 0.0123, CostEstimated: true},
			nil, "🗜️ Compacted: the conversation so far is now a summary. The summary cost about $0.0123."},
		{"CLI failed", backends.Result{}, &backends.Error{Kind: backends.KindTimeout, Message: "/srv/secret path"},
			"Not compacted: the agent's CLI failed (timeout). The conversation goes on as it was; the gateway's log says more."},
	} {
		if got := compactReport(tc.res, tc.err); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
