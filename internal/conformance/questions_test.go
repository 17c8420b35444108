//go:build conformance

package conformance

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/agentgateway/gateway/internal/fakeapi"
	"github.com/agentgateway/gateway/internal/fakediscord"
)

// Questions the scripted model asks with AskUserQuestion.
var (
	colourQuestion = map[string]any{"question": "Which colour should the button be?", "header": "Colour", "multiSelect": false,
		"options": []any{
			map[string]any{"label": "Blue", "description": "Matches the logo"},
			map[string]any{"label": "Green", "description": "Reads as go"},
		}}
	extrasQuestion = map[string]any{"question": "What should I add?", "header": "Extras", "multiSelect": true,
		"options": []any{
			map[string]any{"label": "Tests", "description": "Unit tests"},
			map[string]any{"label": "Docs", "description": "A README section"},
			map[string]any{"label": "Benchmarks", "description": "A benchmark"},
		}}
)

// qAnswered is the tool result claude 2.1.330 gives the model for answers
// that are all option labels (a multi-select's joined with ", ").
func qAnswered(pairs string) string {
	return "Your questions have been answered: " + pairs + ". You can now continue with these answers in mind."
}

// qFreeText is the tool result for an answer that is not one of the
// options (the user typed their own).
func qFreeText(pairs string) string {
	return "The user answered: " + pairs + ". Read the answers carefully \u2014 they may request clarification, changes, " +
		"or that you not proceed \u2014 and follow what they actually say."
}

// exitedPlan is the tool result of an allowed ExitPlanMode.
const exitedPlan = "## Exited Plan Mode\n\nYou have exited plan mode. You can now make edits, run tools, and take actions."

// qRecords collects each scenario's exchange, by file.
type qRecords struct{ files map[string]*ccFactsLog }

// keep adds p's exchange to file's log under t's name when t ends,
// without the stream_event lines (the partial messages split the paths
// the rewriting would hide, and they say nothing about questions).
func (r *qRecords) keep(t *testing.T, file string, p *ccProc) {
	name := t.Name()[strings.LastIndex(t.Name(), "/")+1:]
	t.Cleanup(func() {
		var kept []string
		for _, l := range strings.SplitAfter(p.record(), "\n") {
			if !strings.HasPrefix(l, `{"type":"stream_event"`) {
				kept = append(kept, l)
			}
		}
		rec := strings.Join(kept, "")
		if strings.Contains(rec, os.TempDir()+"/Test") {
			t.Errorf("the recording keeps a temp path")
		}
		r.files[file].add(name, rec)
	})
}

func (r *qRecords) write(t *testing.T) {
	if os.Getenv("RECORD_TESTDATA") == "" {
		return
	}
	for file, log := range r.files {
		var b strings.Builder
		names := make([]string, 0, len(log.sections))
		for name := range log.sections {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			b.WriteString("# " + name + "\n" + log.sections[name])
		}
		if err := os.WriteFile(filepath.Join("..", "..", "testdata", "claude", file), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// askAndAnswer runs one AskUserQuestion call through claude, answers the
// can_use_tool request with answer(request) and returns the tool result
// the model got in its next call and the request line.
func askAndAnswer(t *testing.T, rec *qRecords, questions []any, answer func(req map[string]any) map[string]any) (fakeapi.Block, map[string]any) {
	t.Helper()
	api := fakeapi.StartAnthropic(t, fakeapi.ToolUse("AskUserQuestion", map[string]any{"questions": questions}),
		fakeapi.Text("Thanks."))
	p := startCC(t, api, "", ccApprovals...)
	rec.keep(t, "ask_user_question.txt", p)
	p.user("Make me a button.")
	req, _ := p.until("can_use_tool", ccIsControl("can_use_tool"))
	p.send(answer(req.m))
	r, _ := p.until("result", ccIsType("result"))
	ccCheckResult(t, r.m, "success", "Thanks.", "completed", 0)
	reqs := ccWaitMain(t, api, 2)
	last := ccLast(reqs[1])
	if last.Role != "user" || len(last.Blocks) != 1 || last.Blocks[0].Type != "tool_result" {
		t.Fatalf("second call ends with %s %+v, want the tool_result", last.Role, last.Blocks)
	}
	ccNoMoreTurns(t, p, 0)
	return last.Blocks[0], req.m
}

// withAnswers is an allow whose updatedInput is the request's input plus
// "answers".
func withAnswers(req map[string]any, answers map[string]any) map[string]any {
	inner, _ := req["request"].(map[string]any)
	in, _ := inner["input"].(map[string]any)
	out := map[string]any{}
	for k, v := range in {
		out[k] = v
	}
	out["answers"] = answers
	return ccAllow(req, map[string]any{"updatedInput": out})
}

// TestConformanceClaudeQuestions records, against the pinned claude, how an
// AskUserQuestion call and, in plan mode, an ExitPlanMode call reach the
// gateway (can_use_tool) and which answers give the model which tool
// result. The exchanges go to testdata/claude/ask_user_question.txt and
// exit_plan_mode.txt when RECORD_TESTDATA is set.
func TestConformanceClaudeQuestions(t *testing.T) {
	rec := &qRecords{files: map[string]*ccFactsLog{
		"ask_user_question.txt": {sections: map[string]string{}},
		"exit_plan_mode.txt":    {sections: map[string]string{}},
	}}
	t.Cleanup(func() {
		if !t.Failed() {
			rec.write(t)
		}
	})

	t.Run("single_select", func(t *testing.T) {
		t.Parallel()
		res, req := askAndAnswer(t, rec, []any{colourQuestion}, func(req map[string]any) map[string]any {
			return withAnswers(req, map[string]any{"Which colour should the button be?": "Blue"})
		})
		inner, _ := req["request"].(map[string]any)
		if inner["tool_name"] != "AskUserQuestion" || inner["requires_user_interaction"] != true {
			t.Errorf("request = %v, want tool_name AskUserQuestion and requires_user_interaction", inner)
		}
		if want := qAnswered(`"Which colour should the button be?"="Blue"`); res.IsError || res.Text != want {
			t.Errorf("tool result = %v %q, want %q", res.IsError, res.Text, want)
		}
	})

	t.Run("multi_select_joined", func(t *testing.T) {
		t.Parallel()
		res, _ := askAndAnswer(t, rec, []any{extrasQuestion}, func(req map[string]any) map[string]any {
			return withAnswers(req, map[string]any{"What should I add?": "Tests, Docs"})
		})
		if want := qAnswered(`"What should I add?"="Tests, Docs"`); res.IsError || res.Text != want {
			t.Errorf("tool result = %v %q, want %q", res.IsError, res.Text, want)
		}
	})

	t.Run("multi_select_array", func(t *testing.T) {
		t.Parallel()
		res, _ := askAndAnswer(t, rec, []any{extrasQuestion}, func(req map[string]any) map[string]any {
			return withAnswers(req, map[string]any{"What should I add?": []any{"Tests", "Docs"}})
		})
		// An array is taken too, joined with "," (no space).
		if want := qAnswered(`"What should I add?"="Tests,Docs"`); res.IsError || res.Text != want {
			t.Errorf("tool result = %v %q, want %q", res.IsError, res.Text, want)
		}
	})

	t.Run("two_questions", func(t *testing.T) {
		t.Parallel()
		res, _ := askAndAnswer(t, rec, []any{colourQuestion, extrasQuestion}, func(req map[string]any) map[string]any {
			return withAnswers(req, map[string]any{"Which colour should the button be?": "Green", "What should I add?": "Benchmarks"})
		})
		if want := qAnswered(`"Which colour should the button be?"="Green", "What should I add?"="Benchmarks"`); res.IsError || res.Text != want {
			t.Errorf("tool result = %v %q, want %q", res.IsError, res.Text, want)
		}
	})

	t.Run("other_free_text", func(t *testing.T) {
		t.Parallel()
		res, _ := askAndAnswer(t, rec, []any{colourQuestion}, func(req map[string]any) map[string]any {
			return withAnswers(req, map[string]any{"Which colour should the button be?": "Purple, like the old one"})
		})
		if want := qFreeText(`"Which colour should the button be?"="Purple, like the old one"`); res.IsError || res.Text != want {
			t.Errorf("tool result = %v %q, want %q", res.IsError, res.Text, want)
		}
	})

	t.Run("unanswered", func(t *testing.T) {
		t.Parallel()
		res, _ := askAndAnswer(t, rec, []any{colourQuestion}, func(req map[string]any) map[string]any {
			return withAnswers(req, map[string]any{})
		})
		if want := "The user did not answer the questions."; res.IsError || res.Text != want {
			t.Errorf("tool result = %v %q, want %q", res.IsError, res.Text, want)
		}
	})

	t.Run("denied", func(t *testing.T) {
		t.Parallel()
		res, _ := askAndAnswer(t, rec, []any{colourQuestion}, func(req map[string]any) map[string]any {
			return ccDeny(req, "Nobody answered.", false)
		})
		if !res.IsError || res.Text != "Nobody answered." {
			t.Errorf("tool result = %v %q, want an error with the message", res.IsError, res.Text)
		}
	})

	plan := "# Plan\n\n1. Write hello.txt\n2. Say done."
	// planThenWrite runs ExitPlanMode in plan mode and answers it with the
	// lines answer returns; the model then writes a file in a directory
	// given with --add-dir: whether that asks tells the mode the answer
	// left. It returns ExitPlanMode's tool result and whether the Write was
	// asked about (it is then allowed).
	planThenWrite := func(t *testing.T, answer func(req map[string]any) []map[string]any) (fakeapi.Block, bool) {
		t.Helper()
		home := t.TempDir()
		api := fakeapi.StartAnthropic(t, fakeapi.ToolUse("ExitPlanMode", map[string]any{"plan": plan}),
			fakeapi.ToolUse("Write", map[string]any{"file_path": filepath.Join(home, "hello.txt"), "content": "hello\n"}),
			fakeapi.Text("Done."))
		p := startCC(t, api, home, "--permission-prompt-tool", "stdio", "--permission-mode", "plan", "--add-dir", home)
		rec.keep(t, "exit_plan_mode.txt", p)
		p.user("Plan a hello file.")
		req, _ := p.until("can_use_tool", ccIsControl("can_use_tool"))
		inner, _ := req.m["request"].(map[string]any)
		if inner["tool_name"] != "ExitPlanMode" {
			t.Fatalf("request = %v, want ExitPlanMode", inner)
		}
		for _, line := range answer(req.m) {
			p.send(line)
		}
		asked := false
		for {
			l, _ := p.until("result or can_use_tool", func(m map[string]any) bool {
				return m["type"] == "result" || ccIsControl("can_use_tool")(m)
			})
			if l.m["type"] == "result" {
				break
			}
			asked = true
			p.send(ccAllow(l.m, nil))
		}
		reqs := ccWaitMain(t, api, 2)
		last := ccLast(reqs[1])
		if len(last.Blocks) == 0 {
			t.Fatalf("second call ends with %+v", last)
		}
		if b, err := os.ReadFile(filepath.Join(home, "hello.txt")); err != nil || string(b) != "hello\n" {
			t.Logf("hello.txt: %q %v", b, err)
		}
		ccNoMoreTurns(t, p, 0)
		return last.Blocks[0], asked
	}
	single := func(l map[string]any) []map[string]any { return []map[string]any{l} }

	t.Run("plan_allow", func(t *testing.T) {
		t.Parallel()
		res, asked := planThenWrite(t, func(req map[string]any) []map[string]any { return single(ccAllow(req, nil)) })
		// A plain allow leaves plan mode for default: the Write is asked about.
		if res.IsError || res.Text != exitedPlan || !asked {
			t.Errorf("tool result %v %q, write asked %v; want %q and the write asked about", res.IsError, res.Text, asked, exitedPlan)
		}
	})
	t.Run("plan_allow_set_mode", func(t *testing.T) {
		t.Parallel()
		res, asked := planThenWrite(t, func(req map[string]any) []map[string]any {
			return single(ccAllow(req, map[string]any{"updatedPermissions": []any{
				map[string]any{"type": "setMode", "mode": "acceptEdits", "destination": "session"}}}))
		})
		if res.IsError || res.Text != exitedPlan || asked {
			t.Errorf("tool result %v %q, write asked %v; want %q and acceptEdits (no question)", res.IsError, res.Text, asked, exitedPlan)
		}
	})
	t.Run("plan_set_permission_mode_then_allow", func(t *testing.T) {
		t.Parallel()
		res, asked := planThenWrite(t, func(req map[string]any) []map[string]any {
			return []map[string]any{
				{"type": "control_request", "request_id": "mode-1", "request": map[string]any{"subtype": "set_permission_mode", "mode": "acceptEdits"}},
				ccAllow(req, nil),
			}
		})
		if res.IsError || res.Text != exitedPlan || asked {
			t.Errorf("tool result %v %q, write asked %v; want %q and acceptEdits (no question)", res.IsError, res.Text, asked, exitedPlan)
		}
	})
	t.Run("plan_keep_planning", func(t *testing.T) {
		t.Parallel()
		res, _ := planThenWrite(t, func(req map[string]any) []map[string]any {
			return single(ccDeny(req, "Add a step that tests it.", false))
		})
		if !res.IsError || res.Text != "Add a step that tests it." {
			t.Errorf("tool result %v %q, want an error with the note", res.IsError, res.Text)
		}
	})
}

// TestConformanceDiscordQuestions runs the built `gateway run` against the
// fake Discord with the real claude CLI: a question the model asks is
// answered by a tap and the model gets the answer in the same turn; a
// /plan prompt's plan is approved and the turn goes on in acceptEdits (a
// Write runs without asking, though PERMISSION_MODE is default).
func TestConformanceDiscordQuestions(t *testing.T) {
	bin := buildGateway(t)
	work := t.TempDir()
	configDir := filepath.Join(work, "config")
	hello := filepath.Join(configDir, "hello.txt")
	api := fakeapi.StartAnthropic(t,
		fakeapi.ToolUse("AskUserQuestion", map[string]any{"questions": []any{colourQuestion}}),
		fakeapi.Text("Blue it is."),
		fakeapi.ToolUse("ExitPlanMode", map[string]any{}),
		fakeapi.ToolUse("Write", map[string]any{"file_path": hello, "content": "hello\n"}),
		fakeapi.Text("Done."),
	)
	fd := fakediscord.Start(t)
	_, channel := fd.AddGuild("conformance")
	alice := fd.User("alice")
	cmd := exec.Command(bin, "run")
	cmd.Dir = work
	cmd.Env = gatewayEnv(t, fd, api.URL(), configDir, "PERMISSION_MODE=default")
	var stderr lockedBuffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("gateway output:\n%s\n%s", stderr.String(), api.Summary())
		}
	})
	fd.Wait(t, "the bot to connect", 30*time.Second, fd.Connected)

	withButton := func(label string) (fakediscord.Message, string) {
		var m fakediscord.Message
		var id string
		fd.Wait(t, "a message with "+label, 90*time.Second, func() bool {
			for _, bm := range fd.BotMessages(channel) {
				for _, b := range bm.Buttons() {
					if b.Label == label {
						m, id = bm, b.ID
						return true
					}
				}
			}
			return false
		})
		return m, id
	}
	said := func(text string) {
		fd.Wait(t, "the reply "+text, 90*time.Second, func() bool {
			for _, m := range fd.BotMessages(channel) {
				if m.Content == text {
					return true
				}
			}
			return false
		})
	}

	fd.Post(channel, alice, fakediscord.Mention(fd.Bot)+" Make me a button.", fd.Bot)
	ask, blue := withButton("Blue")
	if !strings.Contains(ask.Content, "Which colour should the button be?") {
		t.Errorf("question message = %q", ask.Content)
	}
	fd.Press(channel, ask.ID, alice, blue, 0)
	said("Blue it is.")
	reqs := ccWaitMain(t, api, 2)
	if got := ccLast(reqs[1]); len(got.Blocks) != 1 || got.Blocks[0].Text != qAnswered(`"Which colour should the button be?"="Blue"`) {
		t.Errorf("the model got %+v, want the answer", got.Blocks)
	}

	fd.Interact(channel, alice, "plan", map[string]string{"prompt": "Plan a hello file."})
	plan, approve := withButton("Approve")
	fd.Press(channel, plan.ID, alice, approve, 0)
	said("Done.")
	reqs = ccWaitMain(t, api, 5)
	if got := ccLast(reqs[3]); len(got.Blocks) != 1 || got.Blocks[0].Text != exitedPlan {
		t.Errorf("after Approve the model got %+v, want %q", got.Blocks, exitedPlan)
	}
	if b, err := os.ReadFile(hello); err != nil || string(b) != "hello\n" {
		t.Errorf("hello.txt = %q, %v: the Write after the plan did not run", b, err)
	}
	for _, m := range fd.BotMessages(channel) {
		if strings.Contains(m.Content, "wants to use `Write`") {
			t.Errorf("the Write after the approved plan was asked about: %q", m.Content)
		}
	}
	t.Logf("plan message: %q", plan.Content)
}

// planFilesFollowed says backends/claude_warm.go's turn loop feeds
// planFiles (observe each event, fill each approval).
const planFilesFollowed = true

// TestConformanceDiscordPlanFromFile: claude 2.1.330 sends ExitPlanMode
// with an empty input and keeps the plan in ~/.claude/plans/<slug>.md,
// which the model writes first; the plan message shows that file.
func TestConformanceDiscordPlanFromFile(t *testing.T) {
	if !planFilesFollowed {
		t.Skip("the claude adapter's turn loop does not yet follow the plan file (backends.planFiles)")
	}
	bin := buildGateway(t)
	work := t.TempDir()
	configDir := filepath.Join(work, "config")
	home := t.TempDir()
	planFile := filepath.Join(home, ".claude", "plans", "hello-plan.md")
	gate := make(chan struct{})
	write := fakeapi.ToolUse("Write", map[string]any{"file_path": planFile, "content": "# Plan\n\n1. Write hello.txt\n2. Say done.\n"})
	write.Gate = gate
	api := fakeapi.StartAnthropic(t,
		write,
		fakeapi.ToolUse("ExitPlanMode", map[string]any{}),
		fakeapi.Text("Done."),
	)
	fd := fakediscord.Start(t)
	_, channel := fd.AddGuild("conformance")
	alice := fd.User("alice")
	cmd := exec.Command(bin, "run")
	cmd.Dir = work
	cmd.Env = gatewayEnv(t, fd, api.URL(), configDir, "PERMISSION_MODE=plan", "HOME="+home)
	var stderr lockedBuffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-exited })
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("gateway output:\n%s\n%s", stderr.String(), api.Summary())
		}
	})
	fd.Wait(t, "the bot to connect", 30*time.Second, fd.Connected)
	fd.Post(channel, alice, fakediscord.Mention(fd.Bot)+" Plan a hello file.", fd.Bot)
	// The model writes the plan where the system prompt says (a random
	// name), as the real one does.
	first := ccWaitMain(t, api, 1)[0]
	m := regexp.MustCompile(`create your plan at (\S+\.md)`).FindStringSubmatch(string(first.Body))
	if m == nil {
		t.Fatal("the system prompt names no plan file")
	}
	planFile = m[1]
	in, _ := json.Marshal(map[string]any{"file_path": planFile, "content": "# Plan\n\n1. Write hello.txt\n2. Say done.\n"})
	write.ToolCalls[0].Input = in
	close(gate)
	var plan fakediscord.Message
	var approve string
	fd.Wait(t, "the plan or a question", 90*time.Second, func() bool {
		for _, m := range fd.BotMessages(channel) {
			for _, b := range m.Buttons() {
				if b.Label == "Allow" && !m.Edited {
					fd.Press(channel, m.ID, alice, b.ID, 0)
					t.Logf("allowed: %q", m.Content)
				}
				if b.Label == "Approve" {
					plan, approve = m, b.ID
					return true
				}
			}
		}
		return false
	})
	t.Logf("plan message: %q", plan.Content)
	if !strings.Contains(plan.Content, "> 1. Write hello.txt") {
		t.Errorf("plan message = %q, want the plan file's text", plan.Content)
	}
	fd.Press(channel, plan.ID, alice, approve, 0)
}
