//go:build conformance

package conformance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/agent"
	"github.com/agentgateway/gateway/internal/fakeapi"
	"github.com/agentgateway/gateway/internal/persona"
	"github.com/agentgateway/gateway/internal/queue"
	"github.com/agentgateway/gateway/internal/session"
)

// pi's RPC mode (`pi --mode rpc`) keeps one process for many prompts: JSON
// commands on stdin, responses and agent events on stdout. The raw tests
// below drive it without the adapter and, with PI_RPC_RECORD_DIR set, write
// what pi printed to <name>.jsonl and what it was sent to
// <name>.stdin.jsonl, for testdata/pi/rpc (see testdata/pi/README.md). The
// adapter tests after them run the backend with warm processes on.

// piRPCHome writes pi's config files for api into a new HOME.
func piRPCHome(t *testing.T, api *fakeapi.Anthropic) string {
	t.Helper()
	home := t.TempDir()
	agentDir := filepath.Join(home, ".pi", "agent")
	if err := os.MkdirAll(agentDir, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(agentDir, "models.json"), fmt.Sprintf(`{
  "providers": {
    %q: {
      "baseUrl": %q,
      "api": "anthropic-messages",
      "apiKey": "ANTHROPIC_API_KEY",
      "models": [{"id": %q, "input": ["text", "image"], "cost": {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75}}]
    }
  }
}
`, piProvider, api.URL(), piModelID))
	write(t, filepath.Join(agentDir, "settings.json"), `{
  "retry": {"enabled": false, "provider": {"maxRetries": 0, "timeoutMs": 30000}},
  "enableInstallTelemetry": false,
  "quietStartup": true
}
`)
	return home
}

// piRPCRaw is a pi --mode rpc process driven line by line.
type piRPCRaw struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan []byte
	out   bytes.Buffer // every stdout line
	in    bytes.Buffer // every command sent
}

func startPiRPCRaw(t *testing.T, home, dir string, args ...string) *piRPCRaw {
	t.Helper()
	bin := cliBinary(t, "pi")
	cmd := exec.Command(bin, append([]string{"--mode", "rpc", "--offline", "--model", piModel}, args...)...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "PI_OFFLINE=1", "ANTHROPIC_API_KEY=" + apiKey}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &piRPCRaw{t: t, cmd: cmd, stdin: stdin, lines: make(chan []byte, 1024)}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
		for sc.Scan() {
			r.lines <- bytes.Clone(sc.Bytes())
		}
		close(r.lines)
	}()
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if s := stderr.String(); s != "" {
			t.Logf("pi stderr: %s", s)
		}
	})
	return r
}

func (r *piRPCRaw) send(cmd string) {
	r.t.Helper()
	r.in.WriteString(cmd + "\n")
	if _, err := io.WriteString(r.stdin, cmd+"\n"); err != nil {
		r.t.Fatalf("send: %v", err)
	}
}

// until reads lines until one has type typ (and, if cmd is set, command
// cmd), and returns it.
func (r *piRPCRaw) until(typ, command string) map[string]any {
	r.t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-r.lines:
			if !ok {
				r.t.Fatalf("pi ended before %s %s", typ, command)
			}
			r.out.Write(l)
			r.out.WriteByte('\n')
			var m map[string]any
			if json.Unmarshal(l, &m) != nil {
				r.t.Logf("non-JSON line: %s", l)
				continue
			}
			if m["type"] == typ && (command == "" || m["command"] == command) {
				return m
			}
		case <-deadline:
			r.t.Fatalf("no %s %s within 60s", typ, command)
		}
	}
}

// record writes the traffic when PI_RPC_RECORD_DIR is set.
func (r *piRPCRaw) record(name string) {
	dir := os.Getenv("PI_RPC_RECORD_DIR")
	if dir == "" {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.t.Fatal(err)
	}
	write(r.t, filepath.Join(dir, name+".jsonl"), r.out.String())
	write(r.t, filepath.Join(dir, name+".stdin.jsonl"), r.in.String())
}

// waitMain waits until api has received n main requests.
func waitMain(t *testing.T, api *fakeapi.Anthropic, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := api.WaitMain(ctx, n); err != nil {
		t.Fatalf("waiting for %d model requests: %v\n%s", n, err, api.Summary())
	}
}

// A text prompt, a second prompt on the same process calling a tool, and
// the session's statistics (cost, tokens).
func TestConformancePiRPCRawTurns(t *testing.T) {
	api := fakeapi.StartAnthropic(t,
		fakeapi.Text("First answer."),
		fakeapi.ToolUse("read", map[string]any{"path": "notes.txt"}),
		fakeapi.Text("The notes say hi."),
	)
	home := piRPCHome(t, api)
	dir := t.TempDir()
	write(t, filepath.Join(dir, "notes.txt"), "hi\n")
	r := startPiRPCRaw(t, home, dir)
	r.send(`{"id":"gw-1","type":"get_state"}`)
	r.until("response", "get_state")
	r.send(`{"id":"gw-2","type":"prompt","message":"Say something."}`)
	r.until("agent_end", "")
	r.send(`{"id":"gw-3","type":"prompt","message":"Read notes.txt."}`)
	r.until("agent_end", "")
	r.send(`{"id":"gw-4","type":"get_session_stats"}`)
	r.until("response", "get_session_stats")
	r.record("turns")
	if n := len(api.MainRequests()); n != 3 {
		t.Errorf("model requests = %d, want 3", n)
	}
}

// Abort while the model is answering, then a second prompt on the same
// process: the session goes on.
func TestConformancePiRPCRawAbort(t *testing.T) {
	gate := make(chan struct{})
	defer close(gate)
	api := fakeapi.StartAnthropic(t,
		fakeapi.Turn{Text: "never", Gate: gate},
		fakeapi.Text("After the stop."),
	)
	home := piRPCHome(t, api)
	dir := t.TempDir()
	r := startPiRPCRaw(t, home, dir)
	r.send(`{"id":"gw-1","type":"prompt","message":"Take your time."}`)
	waitMain(t, api, 1)
	r.send(`{"id":"gw-2","type":"abort"}`)
	r.until("response", "abort")
	r.send(`{"id":"gw-3","type":"prompt","message":"Now answer."}`)
	r.until("agent_end", "")
	r.record("abort")
	main := api.MainRequests()
	if len(main) != 2 {
		t.Fatalf("model requests = %d, want 2\n%s", len(main), api.Summary())
	}
	t.Logf("history after abort: %+v", main[1].Messages())
}

// A prompt with an image: pi sends it to the model as an image block.
func TestConformancePiRPCRawImage(t *testing.T) {
	api := fakeapi.StartAnthropic(t, fakeapi.Text("A red dot."))
	home := piRPCHome(t, api)
	r := startPiRPCRaw(t, home, t.TempDir())
	r.send(`{"id":"gw-1","type":"prompt","message":"What is this?","images":[{"type":"image","data":"` + piRPCPNG + `","mimeType":"image/png"}]}`)
	r.until("agent_end", "")
	r.record("image")
	main := api.MainRequests()
	if len(main) != 1 {
		t.Fatalf("model requests = %d, want 1", len(main))
	}
	var found bool
	for _, m := range main[0].Messages() {
		for _, b := range m.Blocks {
			if b.Type == "image" && b.Source != nil && b.Source.Data == piRPCPNG {
				found = true
			}
		}
	}
	if !found {
		t.Errorf("no image block reached the model: %+v", main[0].Messages())
	}
}

// piRPCPNG is a 1x1 PNG, base64.
const piRPCPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="

// A second process started with --session <id> takes the session on, and
// an unknown id stops pi before it answers anything.
func TestConformancePiRPCRawResume(t *testing.T) {
	api := fakeapi.StartAnthropic(t, fakeapi.Text("Remembered."), fakeapi.Text("Still here."))
	home := piRPCHome(t, api)
	dir := t.TempDir()
	first := startPiRPCRaw(t, home, dir)
	first.send(`{"id":"gw-1","type":"prompt","message":"Remember teal."}`)
	first.until("agent_end", "")
	first.send(`{"id":"gw-2","type":"get_state"}`)
	st := first.until("response", "get_state")
	id, _ := st["data"].(map[string]any)["sessionId"].(string)
	if id == "" {
		t.Fatalf("no session id in %v", st)
	}
	_ = first.stdin.Close()
	_ = first.cmd.Wait()

	second := startPiRPCRaw(t, home, dir, "--session", id)
	second.send(`{"id":"gw-1","type":"get_state"}`)
	st2 := second.until("response", "get_state")
	if got := st2["data"].(map[string]any)["sessionId"]; got != id {
		t.Errorf("resumed session id = %v, want %s", got, id)
	}
	second.send(`{"id":"gw-2","type":"prompt","message":"What colour?"}`)
	second.until("agent_end", "")
	second.record("resume")
	main := api.MainRequests()
	if got := main[len(main)-1].Messages(); len(got) < 3 {
		t.Errorf("resumed request has %d messages, want the history too: %+v", len(got), got)
	}
}

// piRPCBackend is the pi backend with warm processes on, as the gateway
// builds it with AGENT_KEEP_ALIVE set.
func piRPCBackend(t *testing.T, home string) backends.Backend {
	t.Helper()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "PI_OFFLINE=1", "ANTHROPIC_API_KEY=" + apiKey}
	b, err := backends.New("pi", backends.Options{Binary: cliBinary(t, "pi"), Env: env, KillGrace: 2 * time.Second,
		Log:  zerolog.New(zerolog.NewTestWriter(t)),
		Warm: backends.WarmOptions{Interactive: true, KeepAlive: time.Hour, MaxProcesses: 2, HangTimeout: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.(io.Closer).Close() })
	return b
}

func piRPCReq(dir, prompt, session string) backends.Request {
	return backends.Request{Prompt: prompt, Key: "chan-1", WorkDir: dir, SessionID: session, Model: piModel,
		SystemPrompt: "You are Conformo.", PermissionMode: "acceptEdits"}
}

func piWarm(b backends.Backend) backends.WarmStats {
	return b.(interface{ Warm() backends.WarmStats }).Warm()
}

func TestConformancePiRPCWarmSecondTurn(t *testing.T) {
	api := fakeapi.StartAnthropic(t, fakeapi.Text("First."), fakeapi.Text("Second."))
	b := piRPCBackend(t, piRPCHome(t, api))
	dir := t.TempDir()
	var events []backends.Event
	res, err := b.Run(context.Background(), piRPCReq(dir, "One.", ""), func(e backends.Event) { events = append(events, e) })
	if err != nil {
		t.Fatalf("first turn: %v\n%s", err, api.Summary())
	}
	if res.Text != "First." || res.SessionID == "" || res.Warm || res.CostUSD <= 0 || res.ContextWindow != 128000 {
		t.Errorf("first turn = %+v", res)
	}
	if len(events) == 0 || events[0].Kind != backends.EventInit || events[0].SessionID != res.SessionID {
		t.Errorf("first event = %+v, want EventInit with the session", events)
	}
	res2, err := b.Run(context.Background(), piRPCReq(dir, "Two.", res.SessionID), nil)
	if err != nil {
		t.Fatalf("second turn: %v\n%s", err, api.Summary())
	}
	if res2.Text != "Second." || !res2.Warm || res2.SessionID != res.SessionID {
		t.Errorf("second turn = %+v, want the warm process and the same session", res2)
	}
	main := api.MainRequests()
	if len(main) != 2 || len(main[1].Messages()) != 3 {
		t.Errorf("second request messages = %+v, want the first exchange and the new prompt", main[len(main)-1].Messages())
	}
	if !strings.Contains(main[1].System(), "You are Conformo.") {
		t.Error("the persona did not reach the model on the warm turn")
	}
	if w := piWarm(b); w.Processes != 1 {
		t.Errorf("warm processes = %+v, want 1", w)
	}
}

func TestConformancePiRPCStopKeepsSession(t *testing.T) {
	gate := make(chan struct{})
	defer close(gate)
	api := fakeapi.StartAnthropic(t, fakeapi.Text("Started."), fakeapi.Turn{Text: "never", Gate: gate}, fakeapi.Text("After the stop."))
	b := piRPCBackend(t, piRPCHome(t, api))
	dir := t.TempDir()
	res, err := b.Run(context.Background(), piRPCReq(dir, "Begin.", ""), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := b.Run(ctx, piRPCReq(dir, "Take your time.", res.SessionID), nil)
		done <- err
	}()
	waitMain(t, api, 2)
	cancel()
	var e *backends.Error
	if err := <-done; !errors.As(err, &e) || e.Kind != backends.KindCanceled {
		t.Fatalf("stopped turn error = %v, want KindCanceled", err)
	}
	if w := piWarm(b); w.Processes != 1 {
		t.Errorf("warm processes after the stop = %+v, want the process kept", w)
	}
	res3, err := b.Run(context.Background(), piRPCReq(dir, "Now answer.", res.SessionID), nil)
	if err != nil {
		t.Fatalf("turn after the stop: %v\n%s", err, api.Summary())
	}
	if res3.Text != "After the stop." || !res3.Warm || res3.SessionID != res.SessionID {
		t.Errorf("turn after the stop = %+v", res3)
	}
	last := api.MainRequests()[2].Messages()
	if len(last) < 3 || last[0].Text != "Begin." {
		t.Errorf("history after the stop = %+v, want the session's first exchange", last)
	}
}

func TestConformancePiRPCImage(t *testing.T) {
	api := fakeapi.StartAnthropic(t, fakeapi.Text("A red dot."))
	b := piRPCBackend(t, piRPCHome(t, api))
	png, err := base64.StdEncoding.DecodeString(piRPCPNG)
	if err != nil {
		t.Fatal(err)
	}
	req := piRPCReq(t.TempDir(), "What is in dot.png?", "")
	req.Images = []backends.Image{{Path: "dot.png", MediaType: "image/png", Data: png}}
	if _, err := b.Run(context.Background(), req, nil); err != nil {
		t.Fatalf("turn: %v\n%s", err, api.Summary())
	}
	var found bool
	for _, m := range api.MainRequests()[0].Messages() {
		for _, bl := range m.Blocks {
			found = found || (bl.Type == "image" && bl.Source != nil && bl.Source.Data == piRPCPNG && bl.Source.MediaType == "image/png")
		}
	}
	if !found {
		t.Errorf("the image did not reach the model: %+v", api.MainRequests()[0].Messages())
	}
}

// A gateway restart: a new backend resumes the session on a new process.
func TestConformancePiRPCResumeAfterRestart(t *testing.T) {
	api := fakeapi.StartAnthropic(t, fakeapi.Text("Noted."), fakeapi.Text("Teal."))
	home := piRPCHome(t, api)
	dir := t.TempDir()
	first := piRPCBackend(t, home)
	res, err := first.Run(context.Background(), piRPCReq(dir, "My colour is teal.", ""), nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = first.(io.Closer).Close()
	second := piRPCBackend(t, home)
	res2, err := second.Run(context.Background(), piRPCReq(dir, "What is my colour?", res.SessionID), nil)
	if err != nil {
		t.Fatalf("resumed turn: %v", err)
	}
	if res2.SessionID != res.SessionID || res2.Warm {
		t.Errorf("resumed turn = %+v", res2)
	}
	last := api.MainRequests()[1].Messages()
	if len(last) != 3 || last[0].Text != "My colour is teal." {
		t.Errorf("resumed history = %+v", last)
	}
}

// BenchmarkConformancePiTurn compares a prompt on a warm RPC process with
// one that starts pi (print mode, AGENT_KEEP_ALIVE=0), against the fake
// API answering at once.
func BenchmarkConformancePiTurn(b *testing.B) {
	for _, warm := range []bool{true, false} {
		name := "cold_print"
		if warm {
			name = "warm_rpc"
		}
		b.Run(name, func(b *testing.B) {
			api := fakeapi.NewAnthropic()
			defer api.Close()
			home := b.TempDir()
			agentDir := filepath.Join(home, ".pi", "agent")
			if err := os.MkdirAll(agentDir, 0o755); err != nil {
				b.Fatal(err)
			}
			models := fmt.Sprintf(`{"providers":{%q:{"baseUrl":%q,"api":"anthropic-messages","apiKey":"ANTHROPIC_API_KEY","models":[{"id":%q}]}}}`,
				piProvider, api.URL(), piModelID)
			if err := os.WriteFile(filepath.Join(agentDir, "models.json"), []byte(models), 0o644); err != nil {
				b.Fatal(err)
			}
			bin := os.Getenv("PI_BIN")
			if bin == "" {
				b.Skip("PI_BIN is not set")
			}
			opts := backends.Options{Binary: bin, KillGrace: 2 * time.Second,
				Env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "PI_OFFLINE=1", "ANTHROPIC_API_KEY=" + apiKey}}
			if warm {
				opts.Warm = backends.WarmOptions{Interactive: true, KeepAlive: time.Hour, MaxProcesses: 1}
			}
			be, err := backends.New("pi", opts)
			if err != nil {
				b.Fatal(err)
			}
			defer be.(io.Closer).Close()
			dir := b.TempDir()
			session := ""
			run := func() {
				api.Add(fakeapi.Text("ok"))
				res, err := be.Run(context.Background(), piRPCReq(dir, "hi", session), nil)
				if err != nil {
					b.Fatal(err)
				}
				session = res.SessionID
			}
			run() // the session exists, and a warm process is up
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				run()
			}
		})
	}
}

// A message steered into a running turn (STEER=steer) reaches the model in
// the same run, after the answer it was written during.
func TestConformancePiRPCSteer(t *testing.T) {
	gate := make(chan struct{})
	api := fakeapi.StartAnthropic(t, fakeapi.Turn{Text: "First.", Gate: gate}, fakeapi.Text("Second."))
	b := piRPCBackend(t, piRPCHome(t, api))
	type outcome struct {
		res backends.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := b.Run(context.Background(), piRPCReq(t.TempDir(), "Start.", ""), nil)
		done <- outcome{res, err}
	}()
	waitMain(t, api, 1)
	steerer := b.(interface{ Steer(key, text string) error })
	if err := steerer.Steer("chan-1", "Also this."); err != nil {
		t.Fatalf("Steer: %v", err)
	}
	close(gate)
	out := <-done
	if out.err != nil || out.res.Text != "First.\n\nSecond." {
		t.Fatalf("turn = %q, %v; want both answers\n%s", out.res.Text, out.err, api.Summary())
	}
	main := api.MainRequests()
	if len(main) != 2 || main[1].Prompt() != "Also this." {
		t.Errorf("second request's prompt = %q, want the steered message\n%s", main[len(main)-1].Prompt(), api.Summary())
	}
}

// A steer command while the model answers.
func TestConformancePiRPCRawSteer(t *testing.T) {
	gate := make(chan struct{})
	api := fakeapi.StartAnthropic(t, fakeapi.Turn{Text: "First.", Gate: gate}, fakeapi.Text("Second."))
	home := piRPCHome(t, api)
	r := startPiRPCRaw(t, home, t.TempDir())
	r.send(`{"id":"gw-1","type":"prompt","message":"Start."}`)
	waitMain(t, api, 1)
	r.send(`{"id":"gw-2","type":"steer","message":"Also this."}`)
	r.until("response", "steer")
	close(gate)
	r.until("agent_end", "")
	r.send(`{"id":"gw-3","type":"get_state"}`)
	r.until("response", "get_state")
	r.record("steer")
	t.Logf("%s", api.Summary())
}

// Through the gateway's runtime: the session bound at the first turn
// brings the channel's second turn to the same warm process, with the
// persona.
func TestConformancePiRPCRuntimeWarm(t *testing.T) {
	api := fakeapi.StartAnthropic(t, fakeapi.Text("One."), fakeapi.Text("Two."))
	home := piRPCHome(t, api)
	dir := t.TempDir()
	log := zerolog.New(zerolog.NewTestWriter(t))
	if _, err := persona.Bootstrap(dir, log); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "identity.md"), "# Identity\n\nYou are Conformo, a test assistant.\n")
	b := piRPCBackend(t, home)
	sessions, _, err := session.Open(filepath.Join(dir, session.FileName))
	if err != nil {
		t.Fatal(err)
	}
	rt := agent.New(agent.Options{ConfigDir: dir, Timeout: time.Minute, PermissionMode: "acceptEdits", MaxTurns: 10, Model: piModel},
		b, sessions, &replies{}, nil, log)
	say := func(id uint64, text string) agent.Outcome {
		return rt.Process(context.Background(), queue.Event{ID: id, Kind: queue.KindMessage, ChannelID: "c1", Lane: "c1", Text: text, Time: time.Now()})
	}
	first := say(1, "First prompt.")
	if first.Err != nil || first.Reply != "One." {
		t.Fatalf("first turn = %q, %v\n%s", first.Reply, first.Err, api.Summary())
	}
	second := say(2, "Second prompt.")
	if second.Err != nil || second.Reply != "Two." {
		t.Fatalf("second turn = %q, %v\n%s", second.Reply, second.Err, api.Summary())
	}
	if !second.Result.Warm || second.Result.SessionID != first.Result.SessionID {
		t.Errorf("second turn warm=%v session %q, want the warm process and session %q", second.Result.Warm, second.Result.SessionID, first.Result.SessionID)
	}
	main := api.MainRequests()
	if len(main) != 2 || !strings.Contains(main[1].System(), "You are Conformo") || len(main[1].Messages()) != 3 {
		t.Errorf("second request: %d messages, persona %v", len(main[len(main)-1].Messages()), strings.Contains(main[len(main)-1].System(), "You are Conformo"))
	}
}

// piApproveExtension writes the gateway's approval extension for pi into
// a temp file.
func piApproveExtension(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "..", "backends", "pi_approve.js"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "gateway-approve.js")
	write(t, path, string(src))
	return path
}

// The gateway's approval extension asks through a select dialog before
// bash runs: allowed, the command runs; denied with a reason, the model
// gets the reason as the tool's error; a write into .pi/ asks even when
// write is not listed.
func TestConformancePiRPCRawApproval(t *testing.T) {
	api := fakeapi.StartAnthropic(t,
		fakeapi.ToolUse("bash", map[string]any{"command": "echo hi > out.txt"}),
		fakeapi.Text("Done."),
		fakeapi.ToolUse("bash", map[string]any{"command": "rm -rf /"}),
		fakeapi.Text("Denied, fine."),
		fakeapi.ToolUse("write", map[string]any{"path": ".pi/extensions/x.ts", "content": "export default function () {}\n"}),
		fakeapi.Text("Not written."),
		fakeapi.ToolUse("bash", map[string]any{"command": "sleep 1"}),
		fakeapi.Text("After the abort."),
	)
	home := piRPCHome(t, api)
	dir := t.TempDir()
	r := startPiRPCRaw(t, home, dir, "-e", piApproveExtension(t), "--gateway-ask", "bash")
	answer := func(value string) map[string]any {
		t.Helper()
		req := r.until("extension_ui_request", "")
		for req["method"] != "select" {
			req = r.until("extension_ui_request", "")
		}
		t.Logf("dialog: %v", req)
		r.send(fmt.Sprintf(`{"type":"extension_ui_response","id":%q,"value":%q}`, req["id"], value))
		return req
	}
	r.send(`{"id":"gw-1","type":"prompt","message":"Write hi to out.txt."}`)
	answer("allow")
	r.until("agent_end", "")
	if b, err := os.ReadFile(filepath.Join(dir, "out.txt")); err != nil || string(b) != "hi\n" {
		t.Errorf("out.txt = %q, %v; want the allowed command's output", b, err)
	}
	r.send(`{"id":"gw-2","type":"prompt","message":"Clean up."}`)
	answer("deny:Denied in Discord by the user.")
	r.until("agent_end", "")
	r.send(`{"id":"gw-3","type":"prompt","message":"Add an extension."}`)
	answer("deny:No.")
	r.until("agent_end", "")
	// Stopped while the dialog waits: the abort resolves it.
	r.send(`{"id":"gw-4","type":"prompt","message":"Sleep."}`)
	r.until("extension_ui_request", "")
	r.send(`{"id":"gw-5","type":"abort"}`)
	r.until("response", "abort")
	r.send(`{"id":"gw-6","type":"prompt","message":"Go on."}`)
	r.until("agent_end", "")
	r.send(`{"id":"gw-7","type":"get_state"}`)
	r.until("response", "get_state")
	r.record("approval")
	if _, err := os.Stat(filepath.Join(dir, ".pi")); err == nil {
		t.Error("the denied write into .pi/ happened")
	}
	main := api.MainRequests()
	if len(main) != 8 {
		t.Fatalf("model requests = %d, want 8\n%s", len(main), api.Summary())
	}
	t.Logf("after the denial: %+v", main[3].Messages())
}

// Through the adapter with the real pi: bash waits for Request.Approve;
// allowed, it runs; denied, pi gets the reason and the model goes on;
// denied and stopped, the run ends and the next prompt goes on in the same
// process and session.
func TestConformancePiRPCApproval(t *testing.T) {
	api := fakeapi.StartAnthropic(t,
		fakeapi.ToolUse("bash", map[string]any{"command": "echo hi > out.txt"}),
		fakeapi.Text("Written."),
		fakeapi.ToolUse("bash", map[string]any{"command": "rm out.txt"}),
		fakeapi.Text("Kept it."),
		fakeapi.ToolUse("bash", map[string]any{"command": "rm -rf ."}),
		fakeapi.Text("never"),
		fakeapi.Text("Still here."),
	)
	b := piRPCBackend(t, piRPCHome(t, api))
	dir := t.TempDir()
	var asked []backends.Approval
	verdict := backends.Verdict{Allow: true}
	req := func(prompt, session string) backends.Request {
		r := piRPCReq(dir, prompt, session)
		r.PermissionMode = "default"
		r.Approve = func(_ context.Context, a backends.Approval) backends.Verdict {
			asked = append(asked, a)
			return verdict
		}
		return r
	}
	res, err := b.Run(context.Background(), req("Write hi.", ""), nil)
	if err != nil || res.Text != "Written." {
		t.Fatalf("allowed turn = %+v, %v\n%s", res, err, api.Summary())
	}
	if got, err := os.ReadFile(filepath.Join(dir, "out.txt")); err != nil || string(got) != "hi\n" {
		t.Errorf("out.txt = %q, %v", got, err)
	}
	if len(asked) != 1 || asked[0].Tool != "bash" || !strings.Contains(string(asked[0].Input), "echo hi > out.txt") {
		t.Errorf("asked = %+v", asked)
	}

	verdict = backends.Verdict{Message: "Denied in Discord."}
	res, err = b.Run(context.Background(), req("Remove it.", res.SessionID), nil)
	if err != nil || res.Text != "Kept it." || !res.Warm {
		t.Fatalf("denied turn = %+v, %v", res, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "out.txt")); err != nil {
		t.Errorf("the denied command ran: %v", err)
	}
	main := api.MainRequests()
	if got := main[3].Messages(); len(got) == 0 || got[len(got)-1].Text != "Denied in Discord." {
		t.Errorf("the model was not told the denial: %+v", got)
	}

	verdict = backends.Verdict{Message: "Stopped.", Interrupt: true}
	_, err = b.Run(context.Background(), req("Clean everything.", res.SessionID), nil)
	var e *backends.Error
	if !errors.As(err, &e) || e.Kind != backends.KindCanceled {
		t.Fatalf("denied-and-stopped turn error = %v, want KindCanceled", err)
	}
	verdict = backends.Verdict{Allow: true}
	res, err = b.Run(context.Background(), req("Are you there?", res.SessionID), nil)
	if err != nil || !res.Warm || res.Text == "" {
		t.Fatalf("turn after the stop = %+v, %v\n%s", res, err, api.Summary())
	}
	if w := piWarm(b); w.Processes != 1 {
		t.Errorf("warm processes = %+v, want the one process kept throughout", w)
	}
}

// /compact on pi: its RPC compact command on the warm process summarises
// the session with one model call; the next turn goes on from the
// summary in the same session and process.
func TestConformancePiRPCCompact(t *testing.T) {
	api := fakeapi.StartAnthropic(t,
		fakeapi.Text("Teal it is."),
		fakeapi.Text("Teal."),
	)
	b := piRPCBackend(t, piRPCHome(t, api))
	dir := t.TempDir()
	res, err := b.Run(context.Background(), piRPCReq(dir, "My favourite colour is teal.", ""), nil)
	if err != nil {
		t.Fatal(err)
	}
	k, ok := b.(interface {
		Compact(context.Context, backends.Request) (backends.Result, error)
	})
	if !ok {
		t.Fatal("the pi backend cannot compact")
	}
	c, err := k.Compact(context.Background(), piRPCReq(dir, "", res.SessionID))
	if err != nil {
		t.Fatalf("Compact: %v\n%s", err, api.Summary())
	}
	if !c.Compacted || c.SessionID != res.SessionID || c.CostUSD <= 0 || !c.CostEstimated {
		t.Errorf("Compact = %+v, want the session compacted and an estimate of what the summary cost", c)
	}
	t.Logf("compaction: %+v", c)
	next, err := b.Run(context.Background(), piRPCReq(dir, "What is my favourite colour?", res.SessionID), nil)
	if err != nil || !next.Warm || next.SessionID != res.SessionID {
		t.Fatalf("turn after the compaction = %+v, %v", next, err)
	}
	all := api.Requests()
	if len(all) != 3 {
		t.Fatalf("model requests = %d, want 3 (the summary's among them)\n%s", len(all), api.Summary())
	}
	// pi keeps the most recent messages as they were, after the summary.
	if last := flatten(all[2]); !strings.Contains(last, "compacted into the following summary") {
		t.Errorf("the turn after the compaction does not start from the summary:\n%.600s", last)
	}
}
