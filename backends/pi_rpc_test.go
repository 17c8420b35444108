package backends

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// The fake `pi --mode rpc` is a shell script speaking the protocol as
// recorded in testdata/pi/rpc: get_state and get_session_stats answered,
// a prompt answered with "answer <n>" (n counts the process's prompts),
// an abort with the aborted agent_end and then its response. The file
// "mode" in its directory changes how it takes the next prompt:
//
//	hang      agent_start and nothing more until an abort
//	deaf      the same, and an abort is not answered
//	die_once  the first process to take a prompt exits 3 mid-turn
//	hang_once the first prompt gets agent_start and nothing more
//	dialog    an extension's confirm dialog before the answer; the reply is recorded
//	approve   bash starts and the approval extension's dialog asks about it;
//	          the reply is recorded, and a denial ends the tool with an error
//	approve_stop  the same, then the next command (the abort) ends the run
//	refuse    the prompt is refused (no API key)
//	steer     a prompt waits; a steer command is taken in and answered
//	nocompact the compact command is refused
//
// Every start appends its arguments (one line, NUL-separated) to "args";
// every command it reads goes to "stdin".
const piRPCFakeScript = `#!/bin/sh
d=%s
printf '%%s\0' "$@" >> "$d/args"; echo >> "$d/args"
sess=s-new
prev=
for a in "$@"; do
  if [ "$prev" = --session ]; then sess=$a; fi
  prev=$a
done
if [ "$sess" = s-stale ]; then echo "No session found matching '$sess'" >&2; exit 1; fi
n=0
compacts=0
ans() { printf '{"id":"%%s","type":"response","command":"%%s","success":true%%s}\n' "$1" "$2" "$3"; }
while IFS= read -r line; do
  printf '%%s\n' "$line" >> "$d/stdin"
  id=$(printf '%%s' "$line" | sed -n 's/^{"id":"\([^"]*\)".*/\1/p')
  mode=$(cat "$d/mode" 2>/dev/null)
  case "$line" in
  *'"type":"get_state"'*)
    ans "$id" get_state ",\"data\":{\"sessionId\":\"$sess\",\"model\":{\"provider\":\"fake\",\"id\":\"m\"},\"isStreaming\":false,\"isCompacting\":false}" ;;
  *'"type":"get_session_stats"'*)
    ans "$id" get_session_stats ",\"data\":{\"cost\":0.0$compacts,\"contextUsage\":{\"tokens\":110,\"contextWindow\":128000}}" ;;
  *'"type":"compact"'*)
    if [ "$mode" = nocompact ]; then
      printf '{"id":"%%s","type":"response","command":"compact","success":false,"error":"Nothing to compact (session too small)"}\n' "$id"; continue
    fi
    compacts=$((compacts+1))
    echo '{"type":"compaction_start","reason":"manual"}'
    echo '{"type":"compaction_end","reason":"manual","result":{"summary":"s","tokensBefore":5000},"aborted":false,"willRetry":false}'
    ans "$id" compact ',"data":{"summary":"s","firstKeptEntryId":"e1","tokensBefore":5000}' ;;
  *'"type":"prompt"'*)
    n=$((n+1))
    if [ "$mode" = refuse ]; then
      printf '{"id":"%%s","type":"response","command":"prompt","success":false,"error":"No API key found for fake."}\n' "$id"; continue
    fi
    ans "$id" prompt ""
    echo '{"type":"agent_start"}'
    echo '{"type":"turn_start"}'
    case "$mode" in
    hang|deaf|steer) continue ;;
    hang_once)
      if [ ! -e "$d/hung" ]; then touch "$d/hung"; continue; fi ;;
    dialog)
      echo '{"type":"extension_ui_request","id":"ui-1","method":"confirm","title":"Allow rm -rf?"}'
      IFS= read -r reply; printf '%%s\n' "$reply" >> "$d/stdin" ;;
    approve|approve_stop)
      echo '{"type":"tool_execution_start","toolCallId":"call-1","toolName":"bash","args":{"command":"rm -rf build"}}'
      echo '{"type":"extension_ui_request","id":"ui-2","method":"select","title":"agent-gateway/approve {\"id\":\"call-1\",\"tool\":\"bash\",\"input\":{\"command\":\"rm -rf build\"},\"guarded\":false}","options":["allow","allow-session","deny"]}'
      IFS= read -r reply; printf '%%s\n' "$reply" >> "$d/stdin"
      case "$reply" in
      *'"value":"allow'*) echo '{"type":"tool_execution_end","toolCallId":"call-1","toolName":"bash","result":{"content":[{"type":"text","text":"(no output)"}]},"isError":false}' ;;
      *) echo '{"type":"tool_execution_end","toolCallId":"call-1","toolName":"bash","result":{"content":[{"type":"text","text":"denied"}]},"isError":true}' ;;
      esac
      if [ "$mode" = approve_stop ]; then
        IFS= read -r line; printf '%%s\n' "$line" >> "$d/stdin"
        id=$(printf '%%s' "$line" | sed -n 's/^{"id":"\([^"]*\)".*/\1/p')
        msg='{"role":"assistant","content":[],"stopReason":"aborted","errorMessage":"Request was aborted."}'
        echo "{\"type\":\"message_end\",\"message\":$msg}"
        echo "{\"type\":\"agent_end\",\"messages\":[$msg]}"
        ans "$id" abort ""
        continue
      fi ;;

    die_once)
      if [ ! -e "$d/died" ]; then touch "$d/died"; echo "fake pi crashed" >&2; exit 3; fi ;;
    esac
    echo '{"type":"message_update","assistantMessageEvent":{"type":"text_start","contentIndex":0}}'
    echo "{\"type\":\"message_update\",\"assistantMessageEvent\":{\"type\":\"text_delta\",\"contentIndex\":0,\"delta\":\"answer $n\"}}"
    msg="{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"answer $n\"}],\"usage\":{\"input\":100,\"output\":10,\"cacheRead\":0,\"cacheWrite\":0,\"cost\":{\"total\":0.00045}},\"stopReason\":\"stop\"}"
    echo "{\"type\":\"message_end\",\"message\":$msg}"
    echo "{\"type\":\"agent_end\",\"messages\":[$msg]}" ;;
  *'"type":"steer"'*)
    ans "$id" steer ""
    echo '{"type":"message_start","message":{"role":"user","content":[{"type":"text","text":"steered"}]}}'
    msg='{"role":"assistant","content":[{"type":"text","text":"steered answer"}],"stopReason":"stop"}'
    echo "{\"type\":\"message_end\",\"message\":$msg}"
    echo "{\"type\":\"agent_end\",\"messages\":[$msg]}" ;;
  *'"type":"abort"'*)
    if [ "$mode" = deaf ]; then continue; fi
    msg='{"role":"assistant","content":[],"stopReason":"aborted","errorMessage":"Request was aborted."}'
    echo "{\"type\":\"message_end\",\"message\":$msg}"
    echo "{\"type\":\"agent_end\",\"messages\":[$msg]}"
    ans "$id" abort "" ;;
  esac
done
`

type piRPCFake struct {
	bin, dir string
}

func newPiRPCFake(t *testing.T) piRPCFake {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "pi.src")
	bin := filepath.Join(dir, "pi")
	if err := os.WriteFile(src, []byte(fmt.Sprintf(piRPCFakeScript, shellQuote(dir))), 0o644); err != nil {
		t.Fatal(err)
	}
	// A child writes the executable: see fakeCLI (ETXTBSY).
	if out, err := exec.Command("install", "-m", "0755", src, bin).CombinedOutput(); err != nil {
		t.Fatalf("install fake pi: %v: %s", err, out)
	}
	return piRPCFake{bin: bin, dir: dir}
}

func (f piRPCFake) setMode(t *testing.T, mode string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(f.dir, "mode"), []byte(mode), 0o600); err != nil {
		t.Fatal(err)
	}
}

func (f piRPCFake) file(name string) string {
	b, _ := os.ReadFile(filepath.Join(f.dir, name))
	return string(b)
}

// starts returns the arguments of every start of the fake, in order.
func (f piRPCFake) starts() [][]string {
	var out [][]string
	for _, line := range strings.Split(strings.TrimSuffix(f.file("args"), "\n"), "\n") {
		if line == "" {
			continue
		}
		out = append(out, strings.Split(strings.TrimSuffix(line, "\x00"), "\x00"))
	}
	return out
}

func newTestPiRPC(t *testing.T, bin string, warm WarmOptions) *Pi {
	t.Helper()
	warm.Interactive = true
	if warm.KeepAlive == 0 {
		warm.KeepAlive = time.Hour
	}
	if warm.MaxProcesses == 0 {
		warm.MaxProcesses = 2
	}
	p := NewPi(Options{Binary: bin, Env: os.Environ(), KillGrace: time.Second, Warm: warm,
		Log: zerolog.New(zerolog.NewTestWriter(t))})
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func piRPCRequest(work, session string) Request {
	return Request{Prompt: "hello", Key: "chan-1", WorkDir: work, SessionID: session, SystemPrompt: "You are Tova."}
}

// events collects what a turn emitted.
type piRPCEvents []Event

func (e *piRPCEvents) add(ev Event) { *e = append(*e, ev) }

func (e piRPCEvents) kinds() []EventKind {
	var out []EventKind
	for _, ev := range e {
		out = append(out, ev.Kind)
	}
	return out
}

func TestPiRPCWarmSecondTurn(t *testing.T) {
	t.Parallel()
	fake := newPiRPCFake(t)
	p := newTestPiRPC(t, fake.bin, WarmOptions{})
	work := t.TempDir()

	var evs piRPCEvents
	res, err := p.Run(context.Background(), piRPCRequest(work, ""), evs.add)
	if err != nil {
		t.Fatalf("first turn: %v", err)
	}
	if res.Text != "answer 1" || res.SessionID != "s-new" || res.Warm {
		t.Errorf("first turn = %+v", res)
	}
	if res.ContextTokens != 110 || res.ContextWindow != 128000 || res.Model != "fake/m" || res.CostUSD != 0.00045 {
		t.Errorf("first turn context/model/cost = %d/%d/%q/%v", res.ContextTokens, res.ContextWindow, res.Model, res.CostUSD)
	}
	if k := evs.kinds(); len(k) < 3 || k[0] != EventInit || k[1] != EventText || k[len(k)-1] != EventResult {
		t.Errorf("first turn events = %v", k)
	}

	req := piRPCRequest(work, res.SessionID)
	req.Images = []Image{{Path: "/w/a.png", MediaType: "image/png", Data: []byte("png")}}
	res, err = p.Run(context.Background(), req, nil)
	if err != nil {
		t.Fatalf("second turn: %v", err)
	}
	if res.Text != "answer 2" || !res.Warm || res.SessionID != "s-new" {
		t.Errorf("second turn = %+v, want answer 2 on the warm process", res)
	}
	starts := fake.starts()
	if len(starts) != 1 {
		t.Fatalf("pi started %d times, want once: %q", len(starts), starts)
	}
	if got := strings.Join(starts[0], " "); !strings.HasPrefix(got, "--mode rpc --offline --append-system-prompt ") || strings.Contains(got, "--session") {
		t.Errorf("args = %q", got)
	}
	if stdin := fake.file("stdin"); !strings.Contains(stdin, `"images":[{"type":"image","data":"cG5n","mimeType":"image/png"}]`) {
		t.Errorf("the second prompt did not carry its image:\n%s", stdin)
	}
	if w := p.Warm(); w.Processes != 1 || w.Busy != 0 {
		t.Errorf("Warm() = %+v, want one idle process", w)
	}
}

func TestPiRPCStopKeepsSession(t *testing.T) {
	t.Parallel()
	fake := newPiRPCFake(t)
	p := newTestPiRPC(t, fake.bin, WarmOptions{})
	work := t.TempDir()
	if _, err := p.Run(context.Background(), piRPCRequest(work, ""), nil); err != nil {
		t.Fatal(err)
	}

	fake.setMode(t, "hang")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := p.Run(ctx, piRPCRequest(work, "s-new"), nil)
		done <- err
	}()
	waitFor(t, 10*time.Second, "the second prompt", func() bool { return strings.Count(fake.file("stdin"), `"type":"prompt"`) == 2 })
	cancel()
	err := <-done
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindCanceled {
		t.Fatalf("stopped turn error = %v, want KindCanceled", err)
	}
	if !strings.Contains(fake.file("stdin"), `"type":"abort"`) {
		t.Error("no abort command was sent")
	}

	fake.setMode(t, "")
	res, err := p.Run(context.Background(), piRPCRequest(work, "s-new"), nil)
	if err != nil {
		t.Fatalf("turn after the stop: %v", err)
	}
	if res.Text != "answer 3" || !res.Warm || res.SessionID != "s-new" {
		t.Errorf("turn after the stop = %+v, want answer 3 on the same process", res)
	}
	if n := len(fake.starts()); n != 1 {
		t.Errorf("pi started %d times, want once", n)
	}
}

func TestPiRPCStopKillsProcessThatDoesNotAnswer(t *testing.T) {
	t.Parallel()
	fake := newPiRPCFake(t)
	p := newTestPiRPC(t, fake.bin, WarmOptions{InterruptWait: 50 * time.Millisecond})
	work := t.TempDir()
	if _, err := p.Run(context.Background(), piRPCRequest(work, ""), nil); err != nil {
		t.Fatal(err)
	}
	fake.setMode(t, "deaf")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := p.Run(ctx, piRPCRequest(work, "s-new"), nil)
		done <- err
	}()
	waitFor(t, 10*time.Second, "the second prompt", func() bool { return strings.Count(fake.file("stdin"), `"type":"prompt"`) == 2 })
	cancel()
	var e *Error
	if err := <-done; !errors.As(err, &e) || e.Kind != KindCanceled {
		t.Fatalf("stopped turn error = %v, want KindCanceled", err)
	}
	if w := p.Warm(); w.Processes != 0 {
		t.Errorf("Warm() = %+v, want the deaf process gone", w)
	}

	// The session is kept: the next turn resumes it on a new process.
	fake.setMode(t, "")
	res, err := p.Run(context.Background(), piRPCRequest(work, "s-new"), nil)
	if err != nil || res.Text != "answer 1" || res.Warm {
		t.Fatalf("turn after the kill = %+v, %v", res, err)
	}
	starts := fake.starts()
	if len(starts) != 2 || !strings.Contains(strings.Join(starts[1], " "), "--session s-new") {
		t.Errorf("starts = %q, want a second start resuming s-new", starts)
	}
}

func TestPiRPCResumesAfterRestart(t *testing.T) {
	t.Parallel()
	fake := newPiRPCFake(t)
	p := newTestPiRPC(t, fake.bin, WarmOptions{})
	res, err := p.Run(context.Background(), piRPCRequest(t.TempDir(), "s-old"), nil)
	if err != nil || res.SessionID != "s-old" || res.Text != "answer 1" {
		t.Fatalf("resumed turn = %+v, %v", res, err)
	}
	if args := strings.Join(fake.starts()[0], " "); !strings.Contains(args, "--session s-old") {
		t.Errorf("args = %q, want --session s-old", args)
	}
}

func TestPiRPCStaleSession(t *testing.T) {
	t.Parallel()
	fake := newPiRPCFake(t)
	p := newTestPiRPC(t, fake.bin, WarmOptions{})
	_, err := p.Run(context.Background(), piRPCRequest(t.TempDir(), "s-stale"), nil)
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindStaleSession {
		t.Fatalf("error = %v, want KindStaleSession", err)
	}
}

func TestPiRPCRetriesOnceAfterCrash(t *testing.T) {
	t.Parallel()
	fake := newPiRPCFake(t)
	fake.setMode(t, "die_once")
	p := newTestPiRPC(t, fake.bin, WarmOptions{})
	var evs piRPCEvents
	res, err := p.Run(context.Background(), piRPCRequest(t.TempDir(), ""), evs.add)
	if err != nil || res.Text != "answer 1" {
		t.Fatalf("turn = %+v, %v", res, err)
	}
	retried := false
	for _, ev := range evs {
		retried = retried || ev.Kind == EventRetry
	}
	if !retried {
		t.Errorf("no EventRetry in %v", evs.kinds())
	}
	starts := fake.starts()
	if len(starts) != 2 || !strings.Contains(strings.Join(starts[1], " "), "--session s-new") {
		t.Errorf("starts = %q, want a second start resuming the session", starts)
	}
}

func TestPiRPCCloseStopsProcesses(t *testing.T) {
	t.Parallel()
	fake := newPiRPCFake(t)
	p := newTestPiRPC(t, fake.bin, WarmOptions{})
	if _, err := p.Run(context.Background(), piRPCRequest(t.TempDir(), ""), nil); err != nil {
		t.Fatal(err)
	}
	p.rpc.pool.mu.Lock()
	var pid int
	for _, e := range p.rpc.pool.procs {
		pid = e.proc.p.Pid()
	}
	p.rpc.pool.mu.Unlock()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("pi process %d still there after Close: %v", pid, err)
	}
}

func TestPiRPCWants(t *testing.T) {
	t.Parallel()
	on := newPiRPC(Options{Warm: WarmOptions{Interactive: true, KeepAlive: time.Minute}})
	if !on.wants(Request{Key: "c"}) {
		t.Error("a keyed turn with warm processes on does not use rpc mode")
	}
	if on.wants(Request{}) {
		t.Error("a turn without a key uses rpc mode")
	}
	off := newPiRPC(Options{Warm: WarmOptions{Interactive: true}})
	if off.wants(Request{Key: "c"}) {
		t.Error("rpc mode without AGENT_KEEP_ALIVE")
	}
	asking := Request{Key: "c", PermissionMode: "default", Approve: func(context.Context, Approval) Verdict { return Verdict{} }}
	if !off.wants(asking) {
		t.Error("a turn that may ask for approvals does not use rpc mode without AGENT_KEEP_ALIVE")
	}
	if newPiRPC(Options{}).wants(asking) {
		t.Error("rpc mode outside the gateway's interactive commands")
	}
}

func TestPiRPCHangRetriesOnFreshProcess(t *testing.T) {
	t.Parallel()
	fake := newPiRPCFake(t)
	fake.setMode(t, "hang_once")
	p := newTestPiRPC(t, fake.bin, WarmOptions{HangTimeout: 200 * time.Millisecond})
	var evs piRPCEvents
	res, err := p.Run(context.Background(), piRPCRequest(t.TempDir(), ""), evs.add)
	if err != nil || res.Text != "answer 1" {
		t.Fatalf("turn = %+v, %v", res, err)
	}
	starts := fake.starts()
	if len(starts) != 2 || !strings.Contains(strings.Join(starts[1], " "), "--session s-new") {
		t.Errorf("starts = %q, want a second start resuming the session", starts)
	}
}

func TestPiRPCDismissesExtensionDialogs(t *testing.T) {
	t.Parallel()
	fake := newPiRPCFake(t)
	fake.setMode(t, "dialog")
	p := newTestPiRPC(t, fake.bin, WarmOptions{})
	res, err := p.Run(context.Background(), piRPCRequest(t.TempDir(), ""), nil)
	if err != nil || res.Text != "answer 1" {
		t.Fatalf("turn = %+v, %v", res, err)
	}
	if !strings.Contains(fake.file("stdin"), `{"cancelled":true,"id":"ui-1","type":"extension_ui_response"}`) {
		t.Errorf("the dialog was not dismissed:\n%s", fake.file("stdin"))
	}
}

func TestPiRPCRefusedPrompt(t *testing.T) {
	t.Parallel()
	fake := newPiRPCFake(t)
	fake.setMode(t, "refuse")
	p := newTestPiRPC(t, fake.bin, WarmOptions{})
	_, err := p.Run(context.Background(), piRPCRequest(t.TempDir(), ""), nil)
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindAuth {
		t.Fatalf("error = %v, want KindAuth", err)
	}
	if w := p.Warm(); w.Processes != 0 {
		t.Errorf("Warm() = %+v: a process refusing prompts was kept", w)
	}
}

func TestPiRPCSteer(t *testing.T) {
	t.Parallel()
	fake := newPiRPCFake(t)
	fake.setMode(t, "steer")
	p := newTestPiRPC(t, fake.bin, WarmOptions{})
	if err := p.Steer("chan-1", "more"); !errors.Is(err, ErrCannotSteer) {
		t.Errorf("Steer with no turn running = %v, want ErrCannotSteer", err)
	}
	type outcome struct {
		res Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := p.Run(context.Background(), piRPCRequest(t.TempDir(), ""), nil)
		done <- outcome{res, err}
	}()
	waitFor(t, 10*time.Second, "a steerable turn", func() bool { return p.Steer("chan-1", "more") == nil })
	out := <-done
	if out.err != nil || out.res.Text != "steered answer" {
		t.Fatalf("turn = %+v, %v", out.res, out.err)
	}
	if !strings.Contains(fake.file("stdin"), `"message":"more","type":"steer"`) {
		t.Errorf("no steer command:\n%s", fake.file("stdin"))
	}
	if err := p.Steer("chan-1", "late"); !errors.Is(err, ErrCannotSteer) {
		t.Errorf("Steer after the turn = %v, want ErrCannotSteer", err)
	}
}
