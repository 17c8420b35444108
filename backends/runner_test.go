package backends

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// testRunner is a runner for a CLI named "tool" whose binary is a shell
// script.
func testRunner(t *testing.T, script string, env ...string) runner {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "tool")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
	opts := &Options{Binary: bin, Env: append([]string{"PATH=" + os.Getenv("PATH")}, env...), Log: zerolog.New(zerolog.NewTestWriter(t))}
	return newRunner(cliSpec{name: "tool", envAllow: []string{"TOOL_*"}}, opts)
}

// echoParse takes lines that start with '{' as text events.
func echoParse(line []byte) ([]Event, error) {
	if !strings.HasPrefix(string(line), "{") {
		return nil, errors.New("not JSON")
	}
	return []Event{{Kind: EventText, Text: string(line)}}, nil
}

func TestRunnerNotFoundSaysHowToInstall(t *testing.T) {
	r := newRunner(cliSpec{name: "claude"}, &Options{Binary: "no-such-tool-here"})
	_, err := r.binary()
	var e *Error
	want := "`npm install --prefix .tools/claude @anthropic-ai/claude-code@" + Tested["claude"] + "`"
	if !errors.As(err, &e) || e.Kind != KindNotFound || !strings.Contains(e.Message, want) {
		t.Fatalf("binary() = %v, want KindNotFound naming the pinned install %s", err, want)
	}
}

func TestRunnerEnvKeepsTheAllowlistOnly(t *testing.T) {
	r := testRunner(t, "", "TOOL_KEY=1", "OTHER_KEY=2", "DISCORD_BOT_TOKEN=secret", "EXTRA=3")
	got := r.env([]string{"EXTRA"}, []string{"TOOL_KEY"})
	names := make([]string, 0, len(got))
	for _, kv := range got {
		name, _, _ := strings.Cut(kv, "=")
		names = append(names, name)
	}
	if want := []string{"PATH", "EXTRA"}; !slices.Equal(names, want) {
		t.Errorf("env = %v, want %v", names, want)
	}
}

// A CLI that exits without its result is KindCrashed, and the message has
// its exit, stderr's last line and the output that was not JSON.
func TestRunnerEndedSaysWhatTheCLILeft(t *testing.T) {
	r := testRunner(t, `echo '{"a":1}'; echo 'Traceback: boom'; echo 'first' >&2; echo 'disk full' >&2; exit 3`)
	bin, err := r.binary()
	if err != nil {
		t.Fatal(err)
	}
	var events []Event
	out, err := r.runOnce(context.Background(), runSpec{bin: bin}, echoParse, func(ev Event) { events = append(events, ev) })
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || !out.ModelOutput {
		t.Errorf("events = %v (model output %v), want the one JSON line", events, out.ModelOutput)
	}
	e := r.ended(out, "ended without a result", "")
	for _, want := range []string{"tool ended without a result (exit status 3)", "stderr: disk full", "last non-JSON output: Traceback: boom"} {
		if !strings.Contains(e.Message, want) {
			t.Errorf("message %q does not say %q", e.Message, want)
		}
	}
	if e.Kind != KindCrashed || !strings.Contains(e.Stderr, "first") {
		t.Errorf("error = %+v, want KindCrashed with stderr's tail", e)
	}
	if note := r.ended(out, "ended", "Error: quota"); !strings.Contains(note.Message, "; Error: quota") || strings.Contains(note.Message, "disk full") {
		t.Errorf("with a note: %q, want the note instead of stderr's last line", note.Message)
	}
}

// A run whose context ends is stopped with its group, and says so.
func TestRunnerStoppedByTheContext(t *testing.T) {
	r := testRunner(t, `echo '{"started":1}'; exec sleep 300`)
	bin, _ := r.binary()
	ctx, cancel := context.WithCancel(context.Background())
	out, err := r.runOnce(ctx, runSpec{bin: bin}, echoParse, func(Event) { cancel() })
	if err != nil {
		t.Fatal(err)
	}
	e := r.stopped(ctx, out)
	if e == nil || e.Kind != KindCanceled || e.Message != "tool was stopped" || !e.ModelOutput {
		t.Fatalf("stopped = %+v, want KindCanceled after model output", e)
	}
	if r.stopped(context.Background(), out) != nil {
		t.Error("a run whose context did not end was reported stopped")
	}
}

func TestRunnerStartAfterTheContextEndedIsStopped(t *testing.T) {
	r := testRunner(t, "exit 0")
	bin, _ := r.binary()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := r.start(ctx, runSpec{bin: bin})
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindCanceled {
		t.Fatalf("start = %v, want KindCanceled", err)
	}
}

func TestRunnerTempFileIsPrivateAndRemoved(t *testing.T) {
	r := testRunner(t, "")
	path, remove, err := r.tempFile("tool-system-*.md", "persona")
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("stat = %v, %v; want a 0600 file", st, err)
	}
	if b, _ := os.ReadFile(path); string(b) != "persona" {
		t.Errorf("content = %q", b)
	}
	remove()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after remove: %v", err)
	}
}

func TestStreamErrorCopiesWithStderr(t *testing.T) {
	orig := &Error{Kind: KindAuth, Message: "bad key"}
	got := streamError(orig, "tail")
	if got == orig || got.Stderr != "tail" || orig.Stderr != "" || got.Kind != KindAuth {
		t.Errorf("streamError = %+v (original %+v), want a copy with the tail", got, orig)
	}
	if streamError(errNoResult, "tail") != nil {
		t.Error("a plain error became an *Error")
	}
}

// A CLI with its own not-found text (an agent the user names by its
// command line) says that, not how to install a package.
func TestRunnerStartNotFoundUsesTheCLIsText(t *testing.T) {
	cli := cliSpec{name: "agent", missing: func(bin string) string { return bin + " is missing: fix AGENT_CMD" }}
	r := newRunner(cli, &Options{})
	for _, bin := range []string{"no-such-agent-here", filepath.Join(t.TempDir(), "agent")} {
		_, err := r.start(context.Background(), runSpec{bin: bin})
		var e *Error
		if !errors.As(err, &e) || e.Kind != KindNotFound || e.Message != bin+" is missing: fix AGENT_CMD" {
			t.Errorf("start(%s) = %v, want KindNotFound with the CLI's own text", bin, err)
		}
	}
	if _, err := newRunner(cli, &Options{Binary: "no-such-agent-here"}).binary(); err == nil || !strings.Contains(err.Error(), "fix AGENT_CMD") {
		t.Errorf("binary() = %v, want the CLI's own text", err)
	}
}
