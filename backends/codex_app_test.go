package backends

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

func appCodex(t *testing.T, script string, warm WarmOptions) (*Codex, string) {
	t.Helper()
	bin, dir := fakeCLI(t, "codexapp", map[string]string{"CODEXAPP": "1", "SCRIPT": script})
	if !warm.Interactive {
		warm.Interactive, warm.KeepAlive = true, time.Hour
	}
	c := NewCodex(Options{Binary: bin, Env: os.Environ(), KillGrace: 2 * time.Second, Warm: warm,
		Log: zerolog.New(zerolog.NewTestWriter(t))})
	t.Cleanup(func() { _ = c.Close() })
	return c, dir
}

// appLog is the fake app-server's log, one "<pid> <what> <detail>" per line.
func appLog(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// appLogged counts log lines whose what and detail start with prefix.
func appLogged(lines []string, prefix string) int {
	n := 0
	for _, l := range lines {
		if _, rest, ok := strings.Cut(l, " "); ok && strings.HasPrefix(rest, prefix) {
			n++
		}
	}
	return n
}

func appReq(prompt string) Request {
	return Request{Prompt: prompt, WorkDir: os.TempDir(), Key: "chan-1", PermissionMode: "acceptEdits"}
}

func TestCodexAppWarmSecondTurn(t *testing.T) {
	c, dir := appCodex(t, "text,text", WarmOptions{})
	var events []Event
	first, err := c.Run(t.Context(), appReq("one"), func(e Event) { events = append(events, e) })
	if err != nil {
		t.Fatal(err)
	}
	if first.Warm || first.SessionID == "" || !strings.HasPrefix(first.Text, "hello from ") {
		t.Fatalf("first = %+v", first)
	}
	if first.Usage != (Usage{InputTokens: 80, CacheReadTokens: 20, OutputTokens: 10}) || first.ContextWindow != 1000 {
		t.Errorf("usage = %+v, window %d", first.Usage, first.ContextWindow)
	}
	if len(events) == 0 || events[0].Kind != EventInit || events[0].SessionID != first.SessionID {
		t.Errorf("events = %+v, want init first", events)
	}
	req := appReq("two")
	req.SessionID = first.SessionID
	second, err := c.Run(t.Context(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !second.Warm || second.SessionID != first.SessionID || second.Text != first.Text {
		t.Errorf("second = %+v, want warm on the same process and thread", second)
	}
	log := appLog(t, dir)
	if n := appLogged(log, "spawn"); n != 1 {
		t.Errorf("%d processes started, want 1:\n%s", n, strings.Join(log, "\n"))
	}
	if n := appLogged(log, "thread/"); n != 1 {
		t.Errorf("%d thread/start or resume calls, want 1 (the thread stays open):\n%s", n, strings.Join(log, "\n"))
	}
	if w := c.Warm(); w.Processes != 1 || w.Busy != 0 {
		t.Errorf("Warm() = %+v", w)
	}
}

func TestCodexAppResumesStoredThread(t *testing.T) {
	c, dir := appCodex(t, "text", WarmOptions{})
	req := appReq("after a restart")
	req.SessionID = "00000000-0000-7000-8000-000000000042"
	res, err := c.Run(t.Context(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.SessionID != req.SessionID || res.Warm {
		t.Errorf("result = %+v", res)
	}
	if log := appLog(t, dir); appLogged(log, "thread/resume "+req.SessionID) != 1 {
		t.Errorf("no thread/resume of the stored thread:\n%s", strings.Join(log, "\n"))
	}
}

func TestCodexAppStaleThread(t *testing.T) {
	c, _ := appCodex(t, "text", WarmOptions{})
	req := appReq("hi")
	req.SessionID = fakeStaleThread
	_, err := c.Run(t.Context(), req, nil)
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindStaleSession {
		t.Fatalf("err = %v, want a stale session", err)
	}
}

func TestCodexAppCommandApproval(t *testing.T) {
	for _, tc := range []struct {
		name     string
		verdict  Verdict
		decision string
		denied   bool
	}{
		{"allowed", Verdict{Allow: true}, `"accept"`, false},
		{"denied", Verdict{Message: "no"}, `"decline"`, true},
		{"allowed for the session", Verdict{Allow: true, Remember: true}, `{"acceptWithExecpolicyAmendment":{"execpolicy_amendment":["rm","-f","old.txt"]}}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, dir := appCodex(t, "cmd", WarmOptions{})
			req := appReq("remove it")
			req.PermissionMode = "default"
			var asked []Approval
			req.Approve = func(ctx context.Context, a Approval) Verdict {
				asked = append(asked, a)
				return tc.verdict
			}
			res, err := c.Run(t.Context(), req, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(asked) != 1 || asked[0].Tool != "exec_command" || !strings.Contains(string(asked[0].Input), `rm -f old.txt`) {
				t.Fatalf("asked %+v", asked)
			}
			log := appLog(t, dir)
			if appLogged(log, "decision "+tc.decision) != 1 {
				t.Errorf("decision %s not sent:\n%s", tc.decision, strings.Join(log, "\n"))
			}
			if appLogged(log, "thread/start") != 1 || !strings.Contains(strings.Join(log, "\n"), "policy=untrusted") {
				t.Errorf("thread not started with approvals:\n%s", strings.Join(log, "\n"))
			}
			if got := len(res.PermissionDenials) > 0; got != tc.denied {
				t.Errorf("denials = %v", res.PermissionDenials)
			}
		})
	}
}

func TestCodexAppPatchApprovalShowsDiff(t *testing.T) {
	c, dir := appCodex(t, "patch", WarmOptions{})
	req := appReq("change it")
	var asked Approval
	req.Approve = func(ctx context.Context, a Approval) Verdict {
		asked = a
		return Verdict{Allow: true}
	}
	if _, err := c.Run(t.Context(), req, nil); err != nil {
		t.Fatal(err)
	}
	var in map[string]any
	if err := json.Unmarshal(asked.Input, &in); err != nil {
		t.Fatal(err)
	}
	if asked.Tool != "apply_patch" || in["file_path"] != "/w/old.txt" || in["old_string"] != "old line\n" || in["new_string"] != "new line\n" {
		t.Errorf("approval = %s %s", asked.Tool, asked.Input)
	}
	if log := appLog(t, dir); appLogged(log, `decision "accept"`) != 1 {
		t.Errorf("accept not sent:\n%s", strings.Join(log, "\n"))
	}
}

func TestCodexAppDenyAndStop(t *testing.T) {
	c, dir := appCodex(t, "cmd,text", WarmOptions{})
	req := appReq("remove it")
	req.Approve = func(ctx context.Context, a Approval) Verdict { return Verdict{Interrupt: true} }
	_, err := c.Run(t.Context(), req, nil)
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindCanceled {
		t.Fatalf("err = %v, want canceled", err)
	}
	if log := appLog(t, dir); appLogged(log, `decision "cancel"`) != 1 {
		t.Errorf("cancel not sent:\n%s", strings.Join(log, "\n"))
	}
}

func TestCodexAppInterruptKeepsThread(t *testing.T) {
	c, dir := appCodex(t, "hang,text", WarmOptions{})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	res, err := c.Run(ctx, appReq("be slow"), func(e Event) {
		if e.Kind == EventThinking {
			cancel() // Stop, once the turn is under way
		}
	})
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindCanceled {
		t.Fatalf("err = %v, want canceled", err)
	}
	req := appReq("and now?")
	req.SessionID = res.SessionID
	next, err := c.Run(t.Context(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !next.Warm || next.SessionID != res.SessionID {
		t.Errorf("after the stop: %+v, want the same warm process and thread %s", next, res.SessionID)
	}
	log := appLog(t, dir)
	if appLogged(log, "turn/interrupt turn-1") != 1 || appLogged(log, "spawn") != 1 {
		t.Errorf("want one interrupt and one process:\n%s", strings.Join(log, "\n"))
	}
}

func TestCodexAppInterruptNotAnsweredKills(t *testing.T) {
	c, dir := appCodex(t, "deaf,text", WarmOptions{Interactive: true, KeepAlive: time.Hour, InterruptWait: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	res, err := c.Run(ctx, appReq("be slow"), func(e Event) {
		if e.Kind == EventThinking {
			cancel()
		}
	})
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindCanceled {
		t.Fatalf("err = %v, want canceled", err)
	}
	// The next turn starts a new process and resumes the thread.
	req := appReq("again")
	req.SessionID = res.SessionID
	if _, err := c.Run(t.Context(), req, nil); err != nil {
		t.Fatal(err)
	}
	log := appLog(t, dir)
	if appLogged(log, "spawn") != 2 || appLogged(log, "thread/resume "+res.SessionID) != 1 {
		t.Errorf("want a second process resuming the thread:\n%s", strings.Join(log, "\n"))
	}
}

func TestCodexAppDiedRetriesOnFreshProcess(t *testing.T) {
	c, dir := appCodex(t, "text,die,text", WarmOptions{})
	first, err := c.Run(t.Context(), appReq("one"), nil)
	if err != nil {
		t.Fatal(err)
	}
	req := appReq("two")
	req.SessionID = first.SessionID
	var retried bool
	res, err := c.Run(t.Context(), req, func(e Event) { retried = retried || e.Kind == EventRetry })
	if err != nil {
		t.Fatal(err)
	}
	if !retried || res.SessionID != first.SessionID {
		t.Errorf("retried %v, result %+v", retried, res)
	}
	if log := appLog(t, dir); appLogged(log, "thread/resume "+first.SessionID) != 1 {
		t.Errorf("the fresh process did not resume the thread:\n%s", strings.Join(log, "\n"))
	}
}

func TestCodexAppImagesGoAsDataURLs(t *testing.T) {
	c, dir := appCodex(t, "text", WarmOptions{})
	req := appReq("look")
	req.Images = []Image{{Path: "/x.png", MediaType: "image/png", Data: []byte("png")}, {Path: "/y.png", MediaType: "image/png"}}
	if _, err := c.Run(t.Context(), req, nil); err != nil {
		t.Fatal(err)
	}
	if log := appLog(t, dir); appLogged(log, `turn/start`) != 1 || !strings.Contains(strings.Join(log, "\n"), "images=1") {
		t.Errorf("want one image sent:\n%s", strings.Join(log, "\n"))
	}
}

func TestCodexExecWithoutKeepAlive(t *testing.T) {
	c := NewCodex(Options{Warm: WarmOptions{Interactive: true}})
	if c.usesAppServer() {
		t.Error("AGENT_KEEP_ALIVE=0 must keep codex exec")
	}
	c = NewCodex(Options{Warm: WarmOptions{KeepAlive: time.Hour}})
	if c.usesAppServer() {
		t.Error("print mode (gateway chat) must keep codex exec")
	}
}

func TestCodexAppSteer(t *testing.T) {
	c, dir := appCodex(t, "steer", WarmOptions{})
	if err := c.Steer("chan-1", "too early"); !errors.Is(err, ErrCannotSteer) {
		t.Fatalf("Steer with no turn = %v", err)
	}
	thinking := make(chan struct{}, 1)
	type outcome struct {
		res Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := c.Run(t.Context(), appReq("start"), func(e Event) {
			if e.Kind == EventThinking {
				thinking <- struct{}{}
			}
		})
		done <- outcome{res, err}
	}()
	<-thinking
	if err := c.Steer("chan-1", "and this too"); err != nil {
		t.Fatalf("Steer = %v", err)
	}
	out := <-done
	if out.err != nil || out.res.Text != "steered: and this too" {
		t.Errorf("result %+v, %v", out.res, out.err)
	}
	if log := appLog(t, dir); appLogged(log, "turn/steer turn-1 and this too") != 1 {
		t.Errorf("no steer:\n%s", strings.Join(log, "\n"))
	}
}

func TestCodexAppHungRetriesOnFreshProcess(t *testing.T) {
	c, dir := appCodex(t, "deaf,text", WarmOptions{Interactive: true, KeepAlive: time.Hour, HangTimeout: 100 * time.Millisecond})
	var retried bool
	res, err := c.Run(t.Context(), appReq("hello"), func(e Event) { retried = retried || e.Kind == EventRetry })
	if err != nil {
		t.Fatal(err)
	}
	if !retried || !strings.HasPrefix(res.Text, "hello from ") {
		t.Errorf("retried %v, result %+v", retried, res)
	}
	log := appLog(t, dir)
	if appLogged(log, "spawn") != 2 || appLogged(log, "thread/resume "+res.SessionID) != 1 {
		t.Errorf("want a second process resuming the thread:\n%s", strings.Join(log, "\n"))
	}
}

func TestCodexAppStartFailureSaysWhy(t *testing.T) {
	bin, _ := fakeCLI(t, "codexapp", map[string]string{"CODEXAPP": "1", "STARTERR": "Error loading config.toml: unknown field `modle`"})
	c := NewCodex(Options{Binary: bin, Env: os.Environ(), Warm: WarmOptions{Interactive: true, KeepAlive: time.Hour}})
	t.Cleanup(func() { _ = c.Close() })
	_, err := c.Run(t.Context(), appReq("hi"), nil)
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindInvalid || !strings.Contains(e.Message, "config.toml") {
		t.Fatalf("err = %v, want the config error", err)
	}
}
