package limit

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jonboulle/clockwork"

	"github.com/agentgateway/gateway/backends"
)

var start = time.Date(2026, 11, 27, 13, 48, 0, 0, time.UTC)

// waitForWaiters blocks until n prompts wait at g (their timers are set),
// failing the test after a deadline.
func waitForWaiters(t *testing.T, clock *clockwork.FakeClock, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := clock.BlockUntilContext(ctx, n); err != nil {
		t.Fatalf("%d waiters never blocked: %v", n, err)
	}
}

func TestDoWaitsForTheResetAndRunsAgain(t *testing.T) {
	clock := clockwork.NewFakeClockAt(start)
	g := New(clock)
	reset := start.Add(72 * time.Minute)
	var runs int
	var told []*Notice
	var mu sync.Mutex
	done := make(chan error)
	go func() {
		done <- g.Do(context.Background(), func(n *Notice) {
			mu.Lock()
			told = append(told, n)
			mu.Unlock()
		}, func() (Limit, bool) {
			runs++
			if runs == 1 {
				return Limit{ResetAt: reset, Window: "five_hour"}, true
			}
			return Limit{}, false
		})
	}()
	waitForWaiters(t, clock, 1)
	if l, ok := g.Current(); !ok || !l.ResetAt.Equal(reset) {
		t.Errorf("Current = %v, %t", l, ok)
	}
	if g.Waiting() != 1 {
		t.Errorf("Waiting = %d", g.Waiting())
	}
	clock.Advance(72*time.Minute - time.Second)
	select {
	case <-done:
		t.Fatal("ran again before the reset")
	default:
	}
	clock.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if runs != 2 {
		t.Errorf("runs = %d, want 2", runs)
	}
	if len(told) != 2 || told[0] == nil || told[1] != nil {
		t.Fatalf("notices = %v, want a wait then its end", told)
	}
	if diff := cmp.Diff(Limit{ResetAt: reset, Window: "five_hour"}, told[0].Limit); diff != "" || !told[0].Own {
		t.Errorf("notice (-want +got):\n%s own %t", diff, told[0].Own)
	}
	if left := told[0].Left(); left != 0 {
		t.Errorf("Left after the reset = %v", left)
	}
	if _, ok := g.Current(); ok {
		t.Error("the gate is still closed after the reset")
	}
}

func TestOtherPromptsWaitBehindTheLimit(t *testing.T) {
	clock := clockwork.NewFakeClockAt(start)
	g := New(clock)
	reset := start.Add(time.Hour)
	g.Hit(Limit{ResetAt: reset})
	ran := make(chan int, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = g.Do(context.Background(), func(n *Notice) {
				if n != nil && n.Own {
					t.Error("a prompt waiting behind the limit is told it met it")
				}
			}, func() (Limit, bool) {
				ran <- i
				return Limit{}, false
			})
		}()
	}
	waitForWaiters(t, clock, 2)
	if len(ran) != 0 {
		t.Fatal("a prompt ran while the limit lasted")
	}
	clock.Advance(time.Hour)
	wg.Wait()
	if len(ran) != 2 {
		t.Errorf("%d prompts ran after the reset, want 2", len(ran))
	}
}

func TestCancelledWhileWaiting(t *testing.T) {
	clock := clockwork.NewFakeClockAt(start)
	g := New(clock)
	errStopped := errors.New("stopped on request")
	ctx, cancel := context.WithCancelCause(context.Background())
	runs := 0
	done := make(chan error)
	go func() {
		done <- g.Do(ctx, nil, func() (Limit, bool) {
			runs++
			return Limit{ResetAt: start.Add(time.Hour)}, true
		})
	}()
	waitForWaiters(t, clock, 1)
	cancel(errStopped)
	if err := <-done; !errors.Is(err, errStopped) {
		t.Errorf("err = %v, want the cancel's cause", err)
	}
	if runs != 1 {
		t.Errorf("runs = %d, want 1", runs)
	}
	if g.Waiting() != 0 {
		t.Errorf("Waiting = %d after the cancel", g.Waiting())
	}
	// The limit itself stays for the login's other prompts.
	if _, ok := g.Current(); !ok {
		t.Error("the cancel opened the gate")
	}
}

// Close ends the waits at once (a shutdown), and the prompt is not run.
func TestCloseEndsTheWaits(t *testing.T) {
	clock := clockwork.NewFakeClockAt(start)
	g := New(clock)
	g.Hit(Limit{ResetAt: start.Add(time.Hour)})
	done := make(chan error)
	go func() {
		done <- g.Do(context.Background(), nil, func() (Limit, bool) {
			t.Error("a prompt ran at a closed gate")
			return Limit{}, false
		})
	}()
	waitForWaiters(t, clock, 1)
	g.Close()
	g.Close()
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Errorf("err = %v, want ErrClosed", err)
	}
	if err := g.Wait(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("a later wait: %v", err)
	}
	var nilGate *Gate
	nilGate.Close()
}

func TestALaterLimitMetWhileWaitingIsWaitedFor(t *testing.T) {
	clock := clockwork.NewFakeClockAt(start)
	g := New(clock)
	g.Hit(Limit{ResetAt: start.Add(time.Minute)})
	done := make(chan error)
	go func() { done <- g.Wait(context.Background()) }()
	waitForWaiters(t, clock, 1)
	g.Hit(Limit{ResetAt: start.Add(time.Hour), Window: "seven_day"})
	g.Hit(Limit{ResetAt: start.Add(2 * time.Minute)}) // earlier: changes nothing
	clock.Advance(time.Minute)
	waitForWaiters(t, clock, 1)
	select {
	case <-done:
		t.Fatal("Wait returned before the later reset")
	default:
	}
	clock.Advance(59 * time.Minute)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestDoWithoutAGateOrALimit(t *testing.T) {
	var nilGate *Gate
	for name, g := range map[string]*Gate{"nil gate": nilGate, "open gate": New(clockwork.NewFakeClockAt(start))} {
		runs := 0
		err := g.Do(context.Background(), func(*Notice) { t.Errorf("%s: told of a wait", name) }, func() (Limit, bool) {
			runs++
			return Limit{ResetAt: start.Add(-time.Minute)}, true // already over: the failure stands
		})
		if err != nil || runs != 1 {
			t.Errorf("%s: err %v, runs %d", name, err, runs)
		}
	}
	if _, ok := nilGate.Current(); ok || nilGate.Waiting() != 0 {
		t.Error("a nil gate holds something back")
	}
}

func TestOf(t *testing.T) {
	at := start.Add(time.Hour)
	if l, ok := Of(&backends.Error{Kind: backends.KindRateLimit, ResetAt: at, LimitWindow: "five_hour"}); !ok || l != (Limit{ResetAt: at, Window: "five_hour"}) {
		t.Errorf("Of = %v, %t", l, ok)
	}
	if _, ok := Of(&backends.Error{Kind: backends.KindRateLimit}); ok {
		t.Error("a limit without a time is something to wait for")
	}
}
