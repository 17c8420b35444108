//go:build conformance

package conformance

import (
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
	"github.com/agentgateway/gateway/internal/fakeapi"
)

// The ACP conformance table: the real gemini (--acp) and opencode (acp)
// agents against the fake model APIs, through backends.ACP with warm
// processes, approvals and stop. ACP_RECORD=<dir> also records the
// JSON-RPC traffic both ways (<test>-<n>.in.jsonl is what the gateway
// sent, .out.jsonl what the agent answered; see testdata/*/README.md).

// acpAgent starts one scenario's agent: its backend and a way to read
// what the model API received.
type acpAgent struct {
	backend backends.Backend
	// bodies lists the main request bodies the fake model API received.
	bodies func() []string
	// work is the turns' working directory.
	work string
	// api or chat is the fake model API, to script more turns.
	api  *fakeapi.Gemini
	chat *fakeapi.Chat
}

// acpRecorder wraps bin, when ACP_RECORD names a folder, in a script that
// tees the agent's stdin, stdout, stderr and argv there.
func acpRecorder(t testing.TB, bin string) string {
	t.Helper()
	dir := os.Getenv("ACP_RECORD")
	if dir == "" {
		return bin
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	prefix := filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_"))
	script := fmt.Sprintf(`#!/bin/bash
n=1; while [ -e %[1]s-$n.out.jsonl ]; do n=$((n+1)); done
printf '%%s\n' "$*" > %[1]s-$n.args
tee %[1]s-$n.in.jsonl | %[2]s "$@" 2> >(tee %[1]s-$n.stderr >&2) | tee %[1]s-$n.out.jsonl
`, opencodeQuote(prefix), opencodeQuote(bin))
	src := filepath.Join(t.TempDir(), "acp.src")
	acpWrite(t, src, script)
	out := filepath.Join(t.TempDir(), "acp-recorder")
	if b, err := exec.Command("install", "-m", "0755", src, out).CombinedOutput(); err != nil {
		t.Fatalf("install recorder: %v: %s", err, b)
	}
	return out
}

func acpWarm() backends.WarmOptions {
	return backends.WarmOptions{Interactive: true, KeepAlive: time.Minute, MaxProcesses: 4, InterruptWait: 10 * time.Second}
}

func newACPGemini(t *testing.T, generic bool, turns ...fakeapi.Turn) *acpAgent {
	t.Helper()
	return acpGeminiWith(t, cliBinary(t, "gemini"), generic, acpWarm(), turns...)
}

func acpGeminiWith(t testing.TB, bin string, generic bool, warm backends.WarmOptions, turns ...fakeapi.Turn) *acpAgent {
	t.Helper()
	api := fakeapi.StartGemini(t, turns...)
	home := t.TempDir()
	acpWrite(t, filepath.Join(home, ".gemini", "settings.json"), geminiSettings)
	env := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TMPDIR=" + t.TempDir(),
		"GEMINI_API_KEY=" + geminiAPIKey, "GOOGLE_GEMINI_BASE_URL=" + api.URL(),
		"GEMINI_CLI_TRUST_WORKSPACE=true",
	}
	bin = acpRecorder(t, bin)
	opts := backends.Options{Binary: bin, Env: env, KillGrace: 2 * time.Second, Log: zerolog.New(zerolog.NewTestWriter(t)), Warm: warm}
	name := "gemini"
	if generic {
		name = "acp"
		opts.Binary = ""
		// As an operator writes it; the model comes with session/set_model.
		opts.Env = append(opts.Env, "ACP_COMMAND="+bin+" --acp")
	}
	b, err := backends.New(name, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.(io.Closer).Close() })
	return &acpAgent{backend: b, work: t.TempDir(), api: api, bodies: func() []string {
		var out []string
		for _, r := range api.MainRequests() {
			out = append(out, string(r.Body))
		}
		return out
	}}
}

// acpWrite writes a file, and the folders it needs.
func acpWrite(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func newACPOpencode(t *testing.T, turns ...fakeapi.Turn) *acpAgent {
	t.Helper()
	return acpOpencodeWith(t, cliBinary(t, "opencode"), acpWarm(), turns...)
}

func acpOpencodeWith(t testing.TB, bin string, warm backends.WarmOptions, turns ...fakeapi.Turn) *acpAgent {
	t.Helper()
	api := fakeapi.StartChat(t, turns...)
	home := t.TempDir()
	config := map[string]any{
		"provider": map[string]any{"fake": map[string]any{
			"npm": "@ai-sdk/openai-compatible", "name": "Fake",
			"options": map[string]any{"baseURL": api.BaseURL(), "apiKey": opencodeAPIKey, "timeout": 120000},
			"models":  map[string]any{opencodeModel: map[string]any{"name": "Fake Model", "attachment": true, "modalities": map[string]any{"input": []string{"text", "image"}, "output": []string{"text"}}}},
		}},
		"model": "fake/" + opencodeModel, "autoupdate": false, "share": "disabled",
	}
	b, _ := json.Marshal(config)
	acpWrite(t, filepath.Join(home, ".config", "opencode", "opencode.json"), string(b))
	env := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home,
		"OPENCODE_DISABLE_MODELS_FETCH=1", "OPENCODE_DISABLE_AUTOUPDATE=1",
		"OPENCODE_DISABLE_DEFAULT_PLUGINS=1", "OPENCODE_DISABLE_SHARE=1",
	}
	bin = acpRecorder(t, bin)
	log := zerolog.New(zerolog.NewTestWriter(t))
	be, err := backends.New("opencode", backends.Options{Binary: bin, Env: env, KillGrace: 2 * time.Second, Log: log, Warm: warm})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = be.(io.Closer).Close() })
	return &acpAgent{backend: be, work: t.TempDir(), chat: api, bodies: func() []string {
		var out []string
		for _, r := range api.MainRequests() {
			out = append(out, string(r.Body))
		}
		return out
	}}
}

func (a *acpAgent) run(t *testing.T, ctx context.Context, req backends.Request) (backends.Result, []backends.Event, error) {
	t.Helper()
	if req.WorkDir == "" {
		req.WorkDir = a.work
	}
	if req.Key == "" {
		req.Key = "c1"
	}
	var evs []backends.Event
	res, err := a.backend.Run(ctx, req, func(e backends.Event) { evs = append(evs, e) })
	return res, evs, err
}

type acpScenario struct {
	name       string
	start      func(t *testing.T, turns ...fakeapi.Turn) *acpAgent
	model      string
	writeTool  string // the agent's tool that writes a file
	writeInput func(path string) any
	approveIn  string // PermissionMode in which writes ask
	images     bool
	// loads is set when session/load brings back a session on a new
	// process. gemini 0.61.0 advertises loadSession but its ACP mode
	// writes only the header line of a session's chat file, so its
	// session/load fails ("No previous sessions found for this
	// project."): the adapter reports a stale session and the runtime
	// starts a new one with the recent conversation.
	loads bool
}

func acpScenarios() []acpScenario {
	geminiWriteInput := func(path string) any { return map[string]any{"file_path": path, "content": "hello\n"} }
	return []acpScenario{
		{name: "gemini", start: func(t *testing.T, turns ...fakeapi.Turn) *acpAgent { return newACPGemini(t, false, turns...) },
			model: geminiModel, writeTool: "write_file", writeInput: geminiWriteInput, approveIn: "default", images: true},
		{name: "acp-gemini", start: func(t *testing.T, turns ...fakeapi.Turn) *acpAgent { return newACPGemini(t, true, turns...) },
			model: geminiModel, writeTool: "write_file", writeInput: geminiWriteInput, approveIn: "default", images: true},
		{name: "opencode", start: newACPOpencode, writeTool: "write",
			writeInput: func(path string) any { return map[string]any{"filePath": path, "content": "hello\n"} },
			approveIn:  "default", images: true, loads: true},
	}
}

func TestConformanceACPWarmSecondTurn(t *testing.T) {
	for _, sc := range acpScenarios() {
		t.Run(sc.name, func(t *testing.T) {
			a := sc.start(t, fakeapi.Text("First answer."), fakeapi.Text("Second answer."))
			ctx := context.Background()
			res1, _, err := a.run(t, ctx, backends.Request{Prompt: "Say one.", Model: sc.model, SystemPrompt: "You are Conformo."})
			if err != nil {
				t.Fatalf("first turn: %v", err)
			}
			if res1.Text != "First answer." || res1.Warm || res1.SessionID == "" {
				t.Errorf("first turn = %+v", res1)
			}
			res2, _, err := a.run(t, ctx, backends.Request{Prompt: "Say two.", Model: sc.model, SessionID: res1.SessionID,
				SystemPrompt: "You are Conformo. Your favourite colour is teal."})
			if err != nil {
				t.Fatalf("second turn: %v", err)
			}
			if res2.Text != "Second answer." || !res2.Warm || res2.SessionID != res1.SessionID {
				t.Errorf("second turn = %+v, want warm on session %s", res2, res1.SessionID)
			}
			bodies := a.bodies()
			if len(bodies) < 2 || !strings.Contains(bodies[len(bodies)-1], "Say one.") {
				t.Errorf("the second request does not carry the first turn")
			}
			// opencode reads its instructions file on every call: the kept
			// process sees the new persona (a memory the agent wrote).
			if sc.name == "opencode" && !strings.Contains(bodies[len(bodies)-1], "teal") {
				t.Errorf("the warm turn's request lacks the new persona")
			}
		})
	}
}

func TestConformanceACPApproval(t *testing.T) {
	for _, sc := range acpScenarios() {
		for _, allow := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/allow=%v", sc.name, allow), func(t *testing.T) {
				work := t.TempDir()
				target := filepath.Join(work, "out.txt")
				a := sc.start(t, fakeapi.ToolUse(sc.writeTool, sc.writeInput(target)), fakeapi.Text("Done."))
				a.work = work
				var asked []backends.Approval
				approve := func(_ context.Context, ap backends.Approval) backends.Verdict {
					asked = append(asked, ap)
					return backends.Verdict{Allow: allow, Message: "not now"}
				}
				_, evs, err := a.run(t, context.Background(), backends.Request{Prompt: "Write the file.", Model: sc.model, PermissionMode: sc.approveIn, Approve: approve})
				if err != nil {
					t.Fatalf("turn: %v", err)
				}
				if len(asked) == 0 {
					t.Fatalf("no approval asked; events %v", acpKinds(evs))
				}
				_, statErr := os.Stat(target)
				if allow && statErr != nil {
					t.Errorf("allowed write did not happen: %v", statErr)
				}
				if !allow && statErr == nil {
					t.Errorf("denied write happened")
				}
			})
		}
	}
}

func TestConformanceACPStopKeepsSession(t *testing.T) {
	for _, sc := range acpScenarios() {
		t.Run(sc.name, func(t *testing.T) {
			gate := make(chan struct{})
			defer close(gate)
			a := sc.start(t, fakeapi.Text("First."), fakeapi.Turn{Text: "never", Gate: gate}, fakeapi.Text("After the stop."))
			res1, _, err := a.run(t, context.Background(), backends.Request{Prompt: "One.", Model: sc.model})
			if err != nil {
				t.Fatalf("first turn: %v", err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				_, _, err := a.run(t, ctx, backends.Request{Prompt: "Two.", Model: sc.model, SessionID: res1.SessionID})
				done <- err
			}()
			waitCtx, stop := context.WithTimeout(context.Background(), 60*time.Second)
			defer stop()
			for len(a.bodies()) < 2 {
				select {
				case <-waitCtx.Done():
					t.Fatal("the second turn never reached the model")
				case <-time.After(50 * time.Millisecond):
				}
			}
			cancel()
			stoppedAt := time.Now()
			err = <-done
			t.Logf("the stopped turn ended %s after the stop", time.Since(stoppedAt).Round(time.Millisecond))
			var be *backends.Error
			if !errors.As(err, &be) || be.Kind != backends.KindCanceled {
				t.Fatalf("stopped turn: %v, want canceled", err)
			}
			res3, _, err := a.run(t, context.Background(), backends.Request{Prompt: "Three.", Model: sc.model, SessionID: res1.SessionID})
			if err != nil {
				t.Fatalf("turn after stop: %v", err)
			}
			if !res3.Warm || res3.SessionID != res1.SessionID {
				t.Errorf("turn after stop = %+v, want warm on %s", res3, res1.SessionID)
			}
		})
	}
}

// acpPNG is a 1x1 PNG.
var acpPNG, _ = base64.StdEncoding.DecodeString("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")

func TestConformanceACPImage(t *testing.T) {
	for _, sc := range acpScenarios() {
		if !sc.images {
			continue
		}
		t.Run(sc.name, func(t *testing.T) {
			a := sc.start(t, fakeapi.Text("A pixel."))
			_, _, err := a.run(t, context.Background(), backends.Request{Prompt: "What is this?", Model: sc.model,
				Images: []backends.Image{{Path: "/x/p.png", MediaType: "image/png", Data: acpPNG}}})
			if err != nil {
				t.Fatalf("turn: %v", err)
			}
			want := base64.StdEncoding.EncodeToString(acpPNG)
			bodies := a.bodies()
			if len(bodies) == 0 || !strings.Contains(bodies[len(bodies)-1], want) {
				t.Errorf("the image did not reach the model API")
			}
		})
	}
}

func acpKinds(evs []backends.Event) []string {
	var out []string
	for _, e := range evs {
		s := e.Kind.String()
		if e.Tool != nil {
			s += ":" + e.Tool.Name
		}
		out = append(out, s)
	}
	return out
}

// A session the process does not have open (another process kept it, or
// the gateway restarted) is loaded with session/load on a new process.
func TestConformanceACPLoadSession(t *testing.T) {
	for _, sc := range acpScenarios() {
		t.Run(sc.name, func(t *testing.T) {
			a := sc.start(t, fakeapi.Text("First answer."), fakeapi.Text("Second answer."))
			res1, _, err := a.run(t, context.Background(), backends.Request{Key: "c1", Prompt: "Say one.", Model: sc.model})
			if err != nil {
				t.Fatalf("first turn: %v", err)
			}
			res2, evs, err := a.run(t, context.Background(), backends.Request{Key: "c2", Prompt: "Say two.", Model: sc.model, SessionID: res1.SessionID})
			if !sc.loads {
				if !errors.Is(err, backends.ErrStaleSession) {
					t.Fatalf("second turn: %v, want a stale session", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("second turn: %v", err)
			}
			if res2.Warm || res2.SessionID != res1.SessionID || res2.Text != "Second answer." {
				t.Errorf("second turn = %+v, want a loaded %s", res2, res1.SessionID)
			}
			for _, e := range evs {
				if e.Kind == backends.EventText && strings.Contains(e.Text, "First") {
					t.Errorf("the loaded session's history reached the turn: %q", e.Text)
				}
			}
			bodies := a.bodies()
			if len(bodies) < 2 || !strings.Contains(bodies[len(bodies)-1], "Say one.") {
				t.Errorf("the loaded session's request does not carry the first turn")
			}
		})
	}
}

// A tool call reaches the card as a tool use with the agent's title and a
// tool result.
func TestConformanceACPToolEvents(t *testing.T) {
	for _, sc := range acpScenarios() {
		t.Run(sc.name, func(t *testing.T) {
			work := t.TempDir()
			target := filepath.Join(work, "out.txt")
			a := sc.start(t, fakeapi.ToolUse(sc.writeTool, sc.writeInput(target)), fakeapi.Text("Done."))
			a.work = work
			allow := func(context.Context, backends.Approval) backends.Verdict { return backends.Verdict{Allow: true} }
			res, evs, err := a.run(t, context.Background(), backends.Request{Prompt: "Write the file.", Model: sc.model, Approve: allow})
			if err != nil {
				t.Fatalf("turn: %v", err)
			}
			var use, result bool
			for _, e := range evs {
				use = use || e.Kind == backends.EventToolUse && e.Tool.Name != ""
				result = result || e.Kind == backends.EventToolResult && !e.Tool.IsError
			}
			if !use || !result {
				t.Errorf("events %v, want a tool use and its result", acpKinds(evs))
			}
			if res.Usage.InputTokens == 0 {
				t.Errorf("no usage reported: %+v", res.Usage)
			}
			if _, err := os.Stat(target); err != nil {
				t.Errorf("the write did not happen: %v", err)
			}
		})
	}
}

// BenchmarkACPTurn compares a resumed turn on a warm ACP process with the
// headless run per turn (AGENT_KEEP_ALIVE=0), for gemini and opencode.
func BenchmarkACPTurn(b *testing.B) {
	for _, agent := range []struct {
		name  string
		bin   string
		model string
		start func(b *testing.B, bin string, warm backends.WarmOptions) *acpAgent
	}{
		{"gemini", os.Getenv("GEMINI_BIN"), geminiModel, func(b *testing.B, bin string, warm backends.WarmOptions) *acpAgent {
			return acpGeminiWith(b, bin, false, warm)
		}},
		{"opencode", os.Getenv("OPENCODE_BIN"), "", func(b *testing.B, bin string, warm backends.WarmOptions) *acpAgent {
			return acpOpencodeWith(b, bin, warm)
		}},
	} {
		for _, mode := range []struct {
			name string
			warm backends.WarmOptions
		}{
			{"acp-warm", backends.WarmOptions{Interactive: true, KeepAlive: time.Hour, MaxProcesses: 1}},
			{"headless", backends.WarmOptions{}},
		} {
			b.Run(agent.name+"/"+mode.name, func(b *testing.B) {
				if agent.bin == "" {
					b.Skip("the CLI's _BIN is not set")
				}
				a := agent.start(b, agent.bin, mode.warm)
				script := func() {
					if a.api != nil {
						a.api.Add(fakeapi.Text("ok"))
					} else {
						a.chat.Add(fakeapi.Text("ok"))
					}
				}
				script()
				req := backends.Request{Prompt: "start", WorkDir: a.work, Key: "c1", Model: agent.model, SystemPrompt: "You are Conformo."}
				first, err := a.backend.Run(context.Background(), req, nil)
				if err != nil {
					b.Fatal(err)
				}
				req.SessionID, req.Prompt = first.SessionID, "again"
				b.ResetTimer()
				for range b.N {
					b.StopTimer()
					script()
					b.StartTimer()
					if _, err := a.backend.Run(context.Background(), req, nil); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
