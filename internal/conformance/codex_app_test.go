//go:build conformance

package conformance

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/fakeapi"
)

// appServerRaw drives `codex app-server` with hand-written JSON-RPC and
// keeps the traffic both ways, for recording testdata/codex/app_server_*.
type appServerRaw struct {
	t     *testing.T
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan json.RawMessage
	mu    sync.Mutex
	log   []string // {"from":"client"|"server","msg":…} lines
	seq   int
}

// codexAppHome writes an isolated HOME whose config.toml points codex at
// the fake API through the gateway's provider id.
func codexAppHome(t *testing.T, api *fakeapi.Responses) string {
	t.Helper()
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".codex"), 0o700); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(home, ".codex", "config.toml"), fmt.Sprintf(`model = %q
model_provider = %q
check_for_update_on_startup = false

[analytics]
enabled = false

[features]
plugins = false
apps = false
remote_plugin = false

[model_providers.%s]
name = "OpenAI (agent gateway)"
base_url = %q
wire_api = "responses"
env_key = "OPENAI_API_KEY"
request_max_retries = 0
stream_max_retries = 0
stream_idle_timeout_ms = 120000
`, codexModel, backends.CodexProviderID, backends.CodexProviderID, api.URL()+"/v1"))
	return home
}

func startAppServerRaw(t *testing.T, bin, home, dir string) *appServerRaw {
	t.Helper()
	cmd := exec.Command(bin, "app-server")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "OPENAI_API_KEY=" + codexAPIKey}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &appServerRaw{t: t, cmd: cmd, stdin: stdin, lines: make(chan json.RawMessage, 1024)}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
		for sc.Scan() {
			line := json.RawMessage(append([]byte(nil), sc.Bytes()...))
			r.record("server", line)
			r.lines <- line
		}
		close(r.lines)
	}()
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return r
}

func (r *appServerRaw) record(from string, msg json.RawMessage) {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, _ := json.Marshal(map[string]any{"from": from, "msg": msg})
	r.log = append(r.log, string(b))
}

func (r *appServerRaw) send(v any) {
	r.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		r.t.Fatal(err)
	}
	r.record("client", b)
	if _, err := r.stdin.Write(append(b, '\n')); err != nil {
		r.t.Fatal(err)
	}
}

// call sends a request and returns its id.
func (r *appServerRaw) call(method string, params any) int {
	r.seq++
	r.send(map[string]any{"jsonrpc": "2.0", "id": r.seq, "method": method, "params": params})
	return r.seq
}

type rawMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// until reads messages until match returns true, and returns that one.
func (r *appServerRaw) until(what string, match func(rawMsg) bool) rawMsg {
	r.t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case line, ok := <-r.lines:
			if !ok {
				r.t.Fatalf("app-server ended while waiting for %s", what)
			}
			var m rawMsg
			if err := json.Unmarshal(line, &m); err != nil {
				r.t.Fatalf("unreadable line %s: %v", line, err)
			}
			if match(m) {
				return m
			}
		case <-deadline:
			r.t.Fatalf("no %s within 60 s", what)
		}
	}
}

func (r *appServerRaw) response(id int) rawMsg {
	r.t.Helper()
	want := fmt.Sprint(id)
	return r.until("response "+want, func(m rawMsg) bool { return m.Method == "" && string(m.ID) == want })
}

func (r *appServerRaw) method(name string) rawMsg {
	r.t.Helper()
	return r.until(name, func(m rawMsg) bool { return m.Method == name })
}

// mark is where the traffic recorded so far ends.
func (r *appServerRaw) mark() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.log)
}

// save writes the traffic from mark from on to
// CODEX_APP_RECORD_DIR/<name>.jsonl when set.
func (r *appServerRaw) save(name string, from int) {
	dir := os.Getenv("CODEX_APP_RECORD_DIR")
	if dir == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".jsonl"), []byte(strings.Join(r.log[from:], "\n")+"\n"), 0o644); err != nil {
		r.t.Fatal(err)
	}
}

func (r *appServerRaw) initialize() {
	r.t.Helper()
	id := r.call("initialize", map[string]any{
		"clientInfo":   map[string]any{"name": "agent-gateway", "title": nil, "version": "test"},
		"capabilities": map[string]any{"experimentalApi": false, "requestAttestation": false},
	})
	r.response(id)
	r.send(map[string]any{"jsonrpc": "2.0", "method": "initialized"})
}

func TestConformanceCodexAppRecord(t *testing.T) {
	if os.Getenv("CODEX_APP_RECORD_DIR") == "" {
		t.Skip("CODEX_APP_RECORD_DIR not set")
	}
	bin := cliBinary(t, "codex")
	gate := make(chan struct{})
	dir := t.TempDir()
	write(t, filepath.Join(dir, "old.txt"), "first line\nold line\nlast line\n")
	api := fakeapi.StartResponses(t,
		fakeapi.Text("Hello from the app server."),
		fakeapi.Text("Second answer."),
		fakeapi.Turn{Text: "Let me look.", ToolCalls: []fakeapi.ToolCall{{Name: "exec_command", Input: json.RawMessage(`{"cmd":"touch made-by-command.txt"}`)}}},
		fakeapi.Text("Ran it."),
		fakeapi.Turn{ToolCalls: []fakeapi.ToolCall{{Name: "exec_command", Input: json.RawMessage(`{"cmd":"rm -f old.txt"}`)}}},
		fakeapi.Text("Did not run it."),
		codexAppPatch("*** Add File: notes.txt\n+patched line"),
		fakeapi.Text("Not patched."),
		codexAppPatch("*** Update File: old.txt\n@@\n first line\n-old line\n+new line"),
		fakeapi.Text("Patched."),
		fakeapi.Turn{Text: "slow", Gate: gate},
		fakeapi.Text("After the stop."),
		fakeapi.Text("Resumed."),
		fakeapi.Turn{Error: &fakeapi.APIError{Status: 401, Message: "bad key"}},
	)
	defer close(gate)
	home := codexAppHome(t, api)
	r := startAppServerRaw(t, bin, home, dir)
	r.initialize()
	id := r.call("thread/start", map[string]any{"cwd": dir, "approvalPolicy": "untrusted", "sandbox": "workspace-write", "developerInstructions": "You are Conformo."})
	thread := threadID(t, r.response(id))
	turn := func(prompt string) {
		r.call("turn/start", map[string]any{"threadId": thread, "input": []any{map[string]any{"type": "text", "text": prompt, "text_elements": []any{}}}})
	}
	approval := func(decision string) {
		req := r.until("approval", func(m rawMsg) bool { return strings.HasSuffix(m.Method, "/requestApproval") })
		r.send(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": map[string]any{"decision": decision}})
	}
	turn("hello")
	r.method("turn/completed")
	turn("second")
	r.method("turn/completed")
	r.save("app_server_turn", 0)

	from := r.mark()
	turn("run a command")
	approval("accept")
	r.method("turn/completed")
	turn("remove a file")
	approval("decline")
	r.method("turn/completed")
	r.save("app_server_command_approval", from)

	from = r.mark()
	turn("add a file")
	approval("decline")
	r.method("turn/completed")
	turn("change a file")
	approval("accept")
	r.method("turn/completed")
	r.save("app_server_patch_approval", from)

	from = r.mark()
	turn("be slow")
	started := r.method("turn/started")
	var st struct {
		Turn struct {
			ID string `json:"id"`
		} `json:"turn"`
	}
	_ = json.Unmarshal(started.Params, &st)
	if _, err := api.WaitMain(t.Context(), 11); err != nil {
		t.Fatal(err)
	}
	r.call("turn/interrupt", map[string]any{"threadId": thread, "turnId": st.Turn.ID})
	r.method("turn/completed")
	turn("and now?")
	r.method("turn/completed")
	r.save("app_server_interrupt", from)
	r.stdin.Close()
	_ = r.cmd.Wait()

	// A new process picks the thread up again; an unknown thread is refused.
	r2 := startAppServerRaw(t, bin, home, dir)
	r2.initialize()
	id = r2.call("thread/resume", map[string]any{"threadId": thread, "cwd": dir, "approvalPolicy": "untrusted", "sandbox": "workspace-write", "excludeTurns": true})
	r2.response(id)
	r2.call("turn/start", map[string]any{"threadId": thread, "input": []any{map[string]any{"type": "text", "text": "still there?", "text_elements": []any{}}}})
	r2.method("turn/completed")
	id = r2.call("thread/resume", map[string]any{"threadId": "01a21c09-0000-7000-8000-000000000000", "cwd": dir, "excludeTurns": true})
	r2.response(id)
	r2.save("app_server_resume", 0)

	from = r2.mark()
	r2.call("turn/start", map[string]any{"threadId": thread, "input": []any{map[string]any{"type": "text", "text": "fail", "text_elements": []any{}}}})
	r2.method("turn/completed")
	r2.save("app_server_error", from)
}

func threadID(t *testing.T, m rawMsg) string {
	t.Helper()
	var ts struct {
		Thread struct {
			ID string `json:"id"`
		} `json:"thread"`
	}
	if err := json.Unmarshal(m.Result, &ts); err != nil || ts.Thread.ID == "" {
		t.Fatalf("no thread id in %s (%v)", m.Result, err)
	}
	return ts.Thread.ID
}

// codexAppPatch is an apply_patch call with body between its markers.
func codexAppPatch(body string) fakeapi.Turn {
	patch := "*** Begin Patch\n" + body + "\n*** End Patch"
	b, _ := json.Marshal(patch)
	return fakeapi.Turn{ToolCalls: []fakeapi.ToolCall{{Name: "apply_patch", Input: b}}}
}

// codexAppBackend is the codex adapter with warm processes on, against the
// fake API the way production reaches it: OPENAI_BASE_URL and
// OPENAI_API_KEY, with the provider's retries off in config.toml.
func codexAppBackend(t *testing.T, api *fakeapi.Responses) backends.Backend {
	t.Helper()
	opts := codexAppOptions(t, api, cliBinary(t, "codex"))
	opts.Warm = backends.WarmOptions{Interactive: true, KeepAlive: time.Hour, MaxProcesses: 2}
	b, err := backends.New("codex", opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c, ok := b.(io.Closer); ok {
			_ = c.Close()
		}
	})
	return b
}

// codexAppOptions are the adapter's options for codex bin against api,
// with an isolated HOME; warm processes off.
func codexAppOptions(tb testing.TB, api *fakeapi.Responses, bin string) backends.Options {
	tb.Helper()
	home := tb.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".codex"), 0o700); err != nil {
		tb.Fatal(err)
	}
	config := fmt.Sprintf(`model = %q
check_for_update_on_startup = false

[analytics]
enabled = false

[features]
plugins = false
apps = false
remote_plugin = false

[model_providers.%s]
name = "OpenAI (agent gateway)"
wire_api = "responses"
env_key = "OPENAI_API_KEY"
request_max_retries = 0
stream_max_retries = 0
stream_idle_timeout_ms = 120000
`, codexModel, backends.CodexProviderID)
	if err := os.WriteFile(filepath.Join(home, ".codex", "config.toml"), []byte(config), 0o600); err != nil {
		tb.Fatal(err)
	}
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"OPENAI_BASE_URL=" + api.URL() + "/v1",
		"OPENAI_API_KEY=" + codexAPIKey,
		"DISCORD_BOT_TOKEN=" + discordToken,
	}
	return backends.Options{Binary: bin, Env: env, KillGrace: 2 * time.Second, Log: zerolog.New(zerolog.NewTestWriter(tb))}
}

// BenchmarkCodexTurn times a text turn against a fake API that answers at
// once: on a warm app-server (after a first turn that starts it) and with
// a fresh `codex exec` each time.
func BenchmarkCodexTurn(b *testing.B) {
	bin := os.Getenv("CODEX_BIN")
	if bin == "" {
		b.Skip("CODEX_BIN is not set")
	}
	for _, mode := range []struct {
		name string
		warm backends.WarmOptions
	}{
		{"app-server-warm", backends.WarmOptions{Interactive: true, KeepAlive: time.Hour, MaxProcesses: 1}},
		{"exec", backends.WarmOptions{}},
	} {
		b.Run(mode.name, func(b *testing.B) {
			turns := make([]fakeapi.Turn, b.N+1)
			for i := range turns {
				turns[i] = fakeapi.Text("ok")
			}
			api := fakeapi.NewResponses(turns...)
			defer api.Close()
			opts := codexAppOptions(b, api, bin)
			opts.Log = zerolog.Nop()
			opts.Warm = mode.warm
			backend, err := backends.New("codex", opts)
			if err != nil {
				b.Fatal(err)
			}
			if c, ok := backend.(io.Closer); ok {
				defer c.Close()
			}
			dir := b.TempDir()
			first, err := backend.Run(context.Background(), codexAppRequest(dir, "start"), nil)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				req := codexAppRequest(dir, "again")
				req.SessionID = first.SessionID
				if _, err := backend.Run(context.Background(), req, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func codexAppRequest(dir, prompt string) backends.Request {
	return backends.Request{Prompt: prompt, WorkDir: dir, Key: "channel-1", Model: codexModel,
		PermissionMode: "acceptEdits", SystemPrompt: "You are Conformo."}
}

func TestConformanceCodexAppWarmSecondTurn(t *testing.T) {
	api := fakeapi.StartResponses(t, fakeapi.Text("First."), fakeapi.Text("Second."))
	b := codexAppBackend(t, api)
	dir := t.TempDir()
	started := time.Now()
	first, err := b.Run(t.Context(), codexAppRequest(dir, "one"), nil)
	if err != nil {
		t.Fatal(err)
	}
	cold := time.Since(started)
	if first.Warm || first.Text != "First." || first.SessionID == "" || first.Usage.OutputTokens == 0 {
		t.Fatalf("first = %+v", first)
	}
	req := codexAppRequest(dir, "two")
	req.SessionID = first.SessionID
	var texts string
	started = time.Now()
	second, err := b.Run(t.Context(), req, func(e backends.Event) { texts += e.Text })
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first turn (process started) %v, second (warm) %v", cold, time.Since(started))
	if !second.Warm || second.SessionID != first.SessionID || second.Text != "Second." || texts != "Second." {
		t.Errorf("second = %+v (streamed %q), want warm on the same thread", second, texts)
	}
	reqs, err := api.WaitMain(t.Context(), 2)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(reqs[1].Body), "First.") {
		t.Errorf("the second request does not carry the first answer: the thread was not kept")
	}
	if w := b.(interface{ Warm() backends.WarmStats }).Warm(); w.Processes != 1 {
		t.Errorf("warm processes = %+v", w)
	}
}

func TestConformanceCodexAppApprovals(t *testing.T) {
	api := fakeapi.StartResponses(t,
		fakeapi.Turn{ToolCalls: []fakeapi.ToolCall{{Name: "exec_command", Input: json.RawMessage(`{"cmd":"touch allowed.txt"}`)}}},
		fakeapi.Text("Ran it."),
		codexAppPatch("*** Add File: denied.txt\n+should not exist"),
		fakeapi.Text("Did not patch."),
	)
	b := codexAppBackend(t, api)
	dir := t.TempDir()
	var asked []backends.Approval
	approve := func(allow bool) backends.ApproveFunc {
		return func(ctx context.Context, a backends.Approval) backends.Verdict {
			asked = append(asked, a)
			return backends.Verdict{Allow: allow}
		}
	}
	req := codexAppRequest(dir, "make a file")
	req.PermissionMode, req.AllowedTools = "default", []string{"Write"}
	req.Approve = approve(true)
	res, err := b.Run(t.Context(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(asked) != 1 || asked[0].Tool != "exec_command" || !strings.Contains(string(asked[0].Input), "touch allowed.txt") {
		t.Fatalf("asked %+v", asked)
	}
	if _, err := os.Stat(filepath.Join(dir, "allowed.txt")); err != nil {
		t.Errorf("the allowed command did not run: %v", err)
	}

	req = codexAppRequest(dir, "patch a file")
	req.PermissionMode, req.AllowedTools = "default", []string{"Write"}
	req.SessionID = res.SessionID
	req.Approve = approve(false)
	res, err = b.Run(t.Context(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(asked) != 2 || asked[1].Tool != "apply_patch" || !strings.Contains(string(asked[1].Input), "should not exist") {
		t.Fatalf("asked %+v", asked)
	}
	if _, err := os.Stat(filepath.Join(dir, "denied.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the denied patch was applied: %v", err)
	}
	if !slices.Contains(res.PermissionDenials, "apply_patch") || !res.Warm {
		t.Errorf("result %+v, want a warm turn with apply_patch denied", res)
	}
}

func TestConformanceCodexAppStopKeepsSession(t *testing.T) {
	gate := make(chan struct{})
	defer close(gate)
	api := fakeapi.StartResponses(t, fakeapi.Turn{Text: "never", Gate: gate}, fakeapi.Text("Still here."))
	b := codexAppBackend(t, api)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		if _, err := api.WaitMain(ctx, 1); err == nil {
			cancel() // Stop while the model is answering
		}
	}()
	var session string
	_, err := b.Run(ctx, codexAppRequest(dir, "be slow"), func(e backends.Event) {
		if e.Kind == backends.EventInit {
			session = e.SessionID
		}
	})
	var e *backends.Error
	if !errors.As(err, &e) || e.Kind != backends.KindCanceled {
		t.Fatalf("err = %v, want canceled", err)
	}
	req := codexAppRequest(dir, "still there?")
	req.SessionID = session
	res, err := b.Run(t.Context(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Warm || res.SessionID != session || res.Text != "Still here." {
		t.Errorf("after the stop: %+v, want the same warm thread %s", res, session)
	}
}

func TestConformanceCodexAppSteer(t *testing.T) {
	gate := make(chan struct{})
	api := fakeapi.StartResponses(t, fakeapi.Turn{Text: "Working on it.", Gate: gate}, fakeapi.Text("Done, with the extra too."))
	b := codexAppBackend(t, api)
	steerer := b.(interface{ Steer(key, text string) error })
	dir := t.TempDir()
	go func() {
		if _, err := api.WaitMain(t.Context(), 1); err != nil {
			return
		}
		if err := steerer.Steer("channel-1", "also say purple"); err != nil {
			t.Errorf("Steer = %v", err)
		}
		close(gate)
	}()
	res, err := b.Run(t.Context(), codexAppRequest(dir, "start"), nil)
	if err != nil {
		t.Fatal(err)
	}
	reqs := api.Requests()
	t.Logf("%d requests; result %q", len(reqs), res.Text)
	if len(reqs) < 2 || !strings.Contains(string(reqs[len(reqs)-1].Body), "also say purple") {
		t.Errorf("the steered message did not reach the model:\n%s", api.Summary())
	}
	if res.Text != "Done, with the extra too." {
		t.Errorf("result %q", res.Text)
	}
}

func TestConformanceCodexAppImage(t *testing.T) {
	api := fakeapi.StartResponses(t, fakeapi.Text("A red dot."))
	b := codexAppBackend(t, api)
	// A 1x1 PNG.
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00\x90wS\xde\x00\x00\x00\x0cIDATx\x9cc\xf8\xcf\xc0\x00\x00\x03\x01\x01\x00\xc9\xfe\x92\xef\x00\x00\x00\x00IEND\xaeB`\x82")
	req := codexAppRequest(t.TempDir(), "what is in the picture?")
	req.Images = []backends.Image{{Path: "/nowhere/dot.png", MediaType: "image/png", Data: png}}
	if _, err := b.Run(t.Context(), req, nil); err != nil {
		t.Fatal(err)
	}
	reqs, err := api.WaitMain(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if body := string(reqs[0].Body); !strings.Contains(body, `"input_image"`) || !strings.Contains(body, "data:image/png;base64,") {
		t.Errorf("the image did not reach the model:\n%.2000s", body)
	}
}

func TestConformanceCodexAppStopWhileAsking(t *testing.T) {
	api := fakeapi.StartResponses(t,
		fakeapi.Turn{ToolCalls: []fakeapi.ToolCall{{Name: "exec_command", Input: json.RawMessage(`{"cmd":"touch never.txt"}`)}}},
		fakeapi.Text("Still here."),
	)
	b := codexAppBackend(t, api)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	withdrawn := make(chan error, 1)
	req := codexAppRequest(dir, "make a file")
	req.PermissionMode = "default"
	req.Approve = func(actx context.Context, a backends.Approval) backends.Verdict {
		cancel() // Stop while the question is open
		<-actx.Done()
		withdrawn <- context.Cause(actx)
		return backends.Verdict{}
	}
	var session string
	_, err := b.Run(ctx, req, func(e backends.Event) {
		if e.Kind == backends.EventInit {
			session = e.SessionID
		}
	})
	var e *backends.Error
	if !errors.As(err, &e) || e.Kind != backends.KindCanceled {
		t.Fatalf("err = %v, want canceled", err)
	}
	t.Logf("the question ended with: %v", <-withdrawn)
	if _, err := os.Stat(filepath.Join(dir, "never.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the command ran: %v", err)
	}
	next := codexAppRequest(dir, "still there?")
	next.SessionID, next.PermissionMode = session, "default"
	next.Approve = func(context.Context, backends.Approval) backends.Verdict { return backends.Verdict{} }
	res, err := b.Run(t.Context(), next, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Warm || res.Text != "Still here." || res.Usage.InputTokens != 100 {
		t.Errorf("after the stop: %+v", res)
	}
}
