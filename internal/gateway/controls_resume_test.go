package gateway

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/config"
	gwdiscord "github.com/agentgateway/gateway/internal/discord"
	"github.com/agentgateway/gateway/internal/fakediscord"
	"github.com/agentgateway/gateway/internal/session"
)

// claudeSlug is claude's name for a directory's sessions folder.
func claudeSlug(dir string) string {
	return strings.Map(func(r rune) rune {
		if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return r
		}
		return '-'
	}, dir)
}

// terminalSession writes a transcript as claude in a terminal leaves it:
// the recorded one, made in dir, modified at mod.
func terminalSession(t *testing.T, home, dir, id, prompt string, mod time.Time) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "claude", "transcripts", "7e8d8a5c-70e2-4c25-9420-5cf22aa11aa5.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(data), "/srv/projects/my app", dir)
	text = strings.ReplaceAll(text, "7e8d8a5c-70e2-4c25-9420-5cf22aa11aa5", id)
	text = strings.ReplaceAll(text, `Read notes.txt and tell me\nwhat it says`, prompt)
	folder := filepath.Join(home, ".claude", "projects", claudeSlug(dir))
	if err := os.MkdirAll(folder, 0o700); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(folder, id+".jsonl")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, mod, mod); err != nil {
		t.Fatal(err)
	}
	return p
}

// resumeClaude is cardClaude answering in the session it resumes.
func resumeClaude(t *testing.T, home string) (backends.Backend, string) {
	t.Helper()
	dir := t.TempDir()
	rec, err := filepath.Abs(filepath.Join("..", "..", "testdata", "claude", "tool_write.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Replace(cardClaude, `"$REC"`, strconv.Quote(rec), -1)
	body = strings.Replace(body, "session=s-card\n", "session=s-card\nprev=\nfor a in \"$@\"; do [ \"$prev\" = --resume ] && session=$a; prev=$a; done\n", 1)
	script := filepath.Join(dir, "claude")
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := backends.New(config.BackendClaude, backends.Options{Binary: script, Env: append(os.Environ(), "HOME="+home), KillGrace: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	logs := filepath.Join(dir, "log")
	if err := os.Mkdir(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	return b, logs
}

// answerMessage is the response message of an interaction.
func (h *harness) answerMessage(interaction string) fakediscord.Message {
	h.t.Helper()
	h.answer(interaction)
	for _, a := range h.fd.Answers() {
		if a.Interaction == interaction && a.Original {
			return a
		}
	}
	h.t.Fatalf("no answer to %s", interaction)
	return fakediscord.Message{}
}

// A session made with claude in a terminal is offered by /resume's
// autocompletion in a channel working in the same project, is confirmed
// with its first prompt shown, and the next prompt resumes it; one made in
// another directory is carried into the channel's; /status then shows how
// to go back to the terminal.
func TestResumeATerminalSession(t *testing.T) {
	home := t.TempDir()
	root := t.TempDir()
	app, other := filepath.Join(root, "app"), filepath.Join(root, "my app")
	for _, d := range []string{app, other, filepath.Join(root, ".worktrees"), filepath.Join(root, "web")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	const (
		inApp    = "11111111-2222-4333-8444-555555555555"
		older    = "11111111-2222-4333-8444-666666666666"
		inOther  = "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee"
		notFound = "99999999-2222-4333-8444-555555555555"
	)
	terminalSession(t, home, app, inApp, "Fix the login bug", now.Add(-time.Hour))
	terminalSession(t, home, app, older, "Write the README", now.Add(-48*time.Hour))
	moved := terminalSession(t, home, other, inOther, "Refactor the parser", now.Add(-time.Minute))
	claude, logs := resumeClaude(t, home)
	h := startGateway(t, harnessOptions{backend: claude, env: map[string]string{config.EnvProjectsRoot: root}})

	complete := func(command, option, value string) []fakediscord.Choice {
		t.Helper()
		c, err := h.fd.Autocomplete(h.channel, h.user, command, option, value, nil)
		if err != nil {
			t.Fatalf("/%s %s:%q: %v", command, option, value, err)
		}
		return c
	}
	if diff := cmp.Diff([]fakediscord.Choice{{Name: "app", Value: "app"}, {Name: "my app", Value: "my app"}}, complete("project", "path", "app")); diff != "" {
		t.Errorf("/project path:app choices (-want +got):\n%s", diff)
	}
	all := []fakediscord.Choice{{Name: "app", Value: "app"}, {Name: "my app", Value: "my app"}, {Name: "web", Value: "web"}}
	if diff := cmp.Diff(all, complete("project", "path", "")); diff != "" {
		t.Errorf("/project choices, hidden folders left out (-want +got):\n%s", diff)
	}
	path := fakediscord.Option{Name: "path", Type: 3, Value: "app"}
	if got := h.answer(h.fd.InteractOptions(h.channel, h.user, "project", path)); got != "This channel now works in `app`." {
		t.Fatalf("/project app = %q", got)
	}
	want := []fakediscord.Choice{
		{Name: "Fix the login bug · 1h ago", Value: inApp},
		{Name: "Write the README · 2d ago", Value: older},
	}
	if diff := cmp.Diff(want, complete("resume", "session", "")); diff != "" {
		t.Errorf("/resume choices (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want[1:], complete("resume", "session", "readme")); diff != "" {
		t.Errorf("/resume choices for readme (-want +got):\n%s", diff)
	}

	ask := func(id string) string {
		return h.fd.InteractOptions(h.channel, h.user, "resume", fakediscord.Option{Name: "session", Type: 3, Value: id})
	}
	for id, want := range map[string]string{
		"../../etc/passwd": "Not changed: that is not a session id of claude",
		notFound:           "Not found:",
	} {
		if got := h.answer(ask(id)); !strings.HasPrefix(got, want) {
			t.Errorf("/resume %s = %q, want %q…", id, got, want)
		}
	}

	q := h.answerMessage(ask(inOther))
	if !q.Ephemeral || !strings.Contains(q.Content, `"$PROJECTS_ROOT"/'my app'`) || !strings.Contains(q.Content, "> Refactor the parser") || strings.Contains(q.Content, root) {
		t.Errorf("question = %q (ephemeral %v), want the session's project and first prompt, no server path", q.Content, q.Ephemeral)
	}
	buttons := q.Buttons()
	if len(buttons) != 2 {
		t.Fatalf("buttons %+v", buttons)
	}
	bob := h.fd.User("bob")
	h.fd.Press(h.channel, q.ID, bob, buttons[0].ID, 0)
	h.fd.Wait(t, "bob's press refused", waitLong, func() bool {
		for _, a := range h.fd.Answers() {
			if strings.HasPrefix(a.Content, "Only the person who ran") {
				return true
			}
		}
		return false
	})
	if _, ok := h.sessions().Get(h.channel.String()); ok {
		t.Fatal("bound after someone else pressed")
	}
	press := h.fd.Press(h.channel, q.ID, h.user, buttons[0].ID, 0)
	h.fd.Wait(t, "the confirmation", waitLong, func() bool { return len(h.fd.Callbacks(press)) > 0 })
	b, ok := h.sessions().Get(h.channel.String())
	if !ok || b.SessionID != inOther || b.Backend != "claude" || b.WorkDir != other {
		t.Fatalf("binding %+v, want %s made in %s", b, inOther, other)
	}

	h.mention(h.channel, "LOG:"+logs+" go on")
	h.fd.Wait(t, "the resumed run", waitLong, func() bool { _, err := os.Stat(filepath.Join(logs, "run0")); return err == nil })
	if args := readTrace(t, logs, "args"); !strings.Contains(args, "--resume\n"+inOther) {
		t.Errorf("arguments lack --resume %s:\n%s", inOther, args)
	}
	if cwd := readTrace(t, logs, "cwd"); cwd != app {
		t.Errorf("ran in %q, want %q", cwd, app)
	}
	copied := filepath.Join(home, ".claude", "projects", claudeSlug(app), inOther+".jsonl")
	if a, err := os.ReadFile(copied); err != nil {
		t.Errorf("the session was not carried into the channel's directory: %v", err)
	} else if m, _ := os.ReadFile(moved); string(a) != string(m) {
		t.Error("the carried transcript differs from the terminal's")
	}
	h.waitReplies(h.channel, 1)
	status := h.answer(h.fd.Interact(h.channel, h.user, "status", nil))
	if want := "`cd \"$PROJECTS_ROOT\"/app && claude --resume " + inOther + "`"; !strings.Contains(status, want) {
		t.Errorf("/status lacks %s:\n%s", want, status)
	}
}

// fakeFinder is a backend's session finder with a fixed list.
type fakeFinder struct {
	backends.Backend
	list []backends.SessionInfo
}

func (f fakeFinder) Sessions(string, int) ([]backends.SessionInfo, error) { return f.list, nil }
func (f fakeFinder) FindSession(id string) (backends.SessionInfo, error) {
	for _, s := range f.list {
		if s.ID == id {
			return s, nil
		}
	}
	return backends.SessionInfo{}, backends.ErrNoSession
}

func newTestControls(t *testing.T, cfg *config.Config, backend string) *controls {
	t.Helper()
	store, _, err := session.Open("")
	if err != nil {
		t.Fatal(err)
	}
	c := newControls(cfg, store, nil, backend, clockwork.NewFakeClockAt(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)), zerolog.New(zerolog.NewTestWriter(t)))
	return c
}

func TestTerminalCommand(t *testing.T) {
	root := t.TempDir()
	cfg := &config.Config{ProjectsRoot: root, WorkDir: "/srv/work", ConfigDir: "/etc/gw"}
	for _, tc := range []struct {
		name, backend, user string
		b                   session.Binding
		want                string
	}{
		{"claude in a project", "claude", "", session.Binding{SessionID: "s1", WorkDir: filepath.Join(root, "app")}, `cd "$PROJECTS_ROOT"/app && claude --resume s1`},
		{"a path to quote", "claude", "", session.Binding{SessionID: "s1", WorkDir: filepath.Join(root, "it's here")}, `cd "$PROJECTS_ROOT"/'it'\''s here' && claude --resume s1`},
		{"the root itself", "claude", "", session.Binding{SessionID: "s1", WorkDir: root}, `cd "$PROJECTS_ROOT" && claude --resume s1`},
		{"codex in WORK_DIR", "codex", "", session.Binding{SessionID: "t1", WorkDir: "/srv/work"}, `cd "$WORK_DIR" && codex resume t1`},
		{"gemini in CONFIG_DIR", "gemini", "", session.Binding{SessionID: "g1", WorkDir: "/etc/gw/sub"}, `cd "$CONFIG_DIR"/sub && gemini --resume g1`},
		{"opencode", "opencode", "", session.Binding{SessionID: "ses_x", WorkDir: "/srv/work"}, `cd "$WORK_DIR" && opencode --session ses_x`},
		{"pi as the agent user", "pi", "agent", session.Binding{SessionID: "p1", WorkDir: "/srv/work"}, `cd "$WORK_DIR" && sudo -u agent -H pi --session p1`},
		{"the binding's backend wins", "claude", "", session.Binding{SessionID: "t1", Backend: "codex", WorkDir: "/srv/work"}, `cd "$WORK_DIR" && codex resume t1`},
		{"a directory of its own is not shown", "claude", "", session.Binding{SessionID: "s1", WorkDir: "/home/someone/x"}, `claude --resume s1`},
		{"no directory recorded: the channel's", "claude", "", session.Binding{SessionID: "s1"}, `cd "$WORK_DIR" && claude --resume s1`},
		{"unknown backend", "acp", "", session.Binding{SessionID: "s1"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := *cfg
			cfg.AgentUser = tc.user
			c := newTestControls(t, &cfg, tc.backend)
			if got := c.terminalCommand(tc.b, "1"); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestResumeRefusals(t *testing.T) {
	const id = "11111111-2222-4333-8444-555555555555"
	cfg := &config.Config{ConfigDir: "/etc/gw"}
	ask := func(c *controls, channel, id string) gwdiscord.CommandAnswer {
		return c.resume(context.Background(), gwdiscord.Command{Name: "resume", UserID: "u", ChannelID: channel, Options: map[string]any{"session": id}})
	}
	c := newTestControls(t, cfg, "claude")
	c.cli = fakeFinder{list: []backends.SessionInfo{{ID: id, Dir: "/etc/gw", FirstPrompt: "hi"}}}
	c.sessions.Set("other", session.Binding{SessionID: id, Backend: "claude"})
	if got := ask(c, "1", id); !got.Ephemeral || !strings.HasPrefix(got.Text, "Not changed: another channel continues that session") {
		t.Errorf("a session another channel continues: %+v", got)
	}
	c.sessions.Set("other", session.Binding{SessionID: id, Backend: "codex"})
	if got := ask(c, "1", id); !strings.Contains(got.Text, "made by codex") {
		t.Errorf("a session of another backend: %+v", got)
	}
	c.sessions.Delete("other")
	c.sessions.Set("1", session.Binding{SessionID: id, Backend: "claude"})
	if got := ask(c, "1", id); got.Text != "This channel already continues that session." {
		t.Errorf("the channel's own session: %+v", got)
	}

	// A backend the gateway cannot look into: bound as given.
	o := newTestControls(t, cfg, "opencode")
	if got := ask(o, "1", id); !strings.Contains(got.Text, "not a session id of opencode") {
		t.Errorf("a UUID for opencode: %+v", got)
	}
	if got := ask(o, "1", "ses_abc123"); !strings.Contains(got.Text, "could not check it") {
		t.Errorf("an opencode id: %+v", got)
	}
	if b, ok := o.sessions.Get("1"); !ok || b.SessionID != "ses_abc123" || b.Backend != "opencode" || b.WorkDir != "/etc/gw" {
		t.Errorf("binding %+v", b)
	}
}

func TestResumePressChecksTheToken(t *testing.T) {
	const id = "11111111-2222-4333-8444-555555555555"
	c := newTestControls(t, &config.Config{ConfigDir: "/etc/gw"}, "claude")
	c.cli = fakeFinder{list: []backends.SessionInfo{{ID: id, Dir: "/etc/gw/x", FirstPrompt: "hi"}}}
	a := c.resume(context.Background(), gwdiscord.Command{UserID: "u", ChannelID: "1", Options: map[string]any{"session": id}})
	if len(a.Buttons) != 2 {
		t.Fatalf("answer %+v", a)
	}
	press := func(button, user, channel string) string {
		p := c.resumePress(context.Background(), gwdiscord.Press{ButtonID: button, UserID: user, ChannelID: channel})
		if p.Update != nil {
			return *p.Update
		}
		return p.Notice
	}
	yes := a.Buttons[0].ID
	if got := press(yes, "v", "1"); !strings.HasPrefix(got, "Only the person") {
		t.Errorf("another user: %q", got)
	}
	if got := press(strings.TrimSuffix(yes, "a")+"zz", "u", "1"); !strings.Contains(got, "expired") {
		t.Errorf("a made-up token: %q", got)
	}
	c.clock.(*clockwork.FakeClock).Advance(pendingTTL + time.Second)
	if got := press(yes, "u", "1"); !strings.Contains(got, "expired") {
		t.Errorf("after the expiry: %q", got)
	}
	if _, ok := c.sessions.Get("1"); ok {
		t.Error("bound by an expired question")
	}
}

func TestCompleteModel(t *testing.T) {
	cfg := &config.Config{Model: "opus"}
	c := newTestControls(t, cfg, "claude")
	c.sessions.UpdateSettings("1", func(s *session.Settings) { s.Model = "claude-sonnet-4-5" })
	got := c.completeModel(context.Background(), gwdiscord.AutocompleteRequest{ChannelID: "1", Focused: "name", Value: "SON"})
	var names []string
	for _, ch := range got {
		names = append(names, ch.Name)
	}
	want := []string{"claude-sonnet-4-5 (this channel's)", "sonnet", "sonnet[1m]", "claude-sonnet-5-5", "claude-sonnet-5", "claude-sonnet-4-6"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	all := c.completeModel(context.Background(), gwdiscord.AutocompleteRequest{ChannelID: "1", Focused: "name"})
	if len(all) == 0 || len(all) > 25 || all[1].Name != "opus (the default)" {
		t.Errorf("all: %+v", all)
	}
	for _, b := range []string{"claude", "codex", "gemini", "opencode", "pi"} {
		for _, m := range backends.KnownModels(b) {
			if !validModel(m) {
				t.Errorf("%s model %q is refused by /model", b, m)
			}
		}
	}
}
