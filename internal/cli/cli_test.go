package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/fakediscord"
)

// chatEnv points the config at a fresh CONFIG_DIR with an empty .env.
func chatEnv(t *testing.T) (configDir, envFile string) {
	t.Helper()
	dir := t.TempDir()
	configDir = filepath.Join(dir, "config")
	envFile = filepath.Join(dir, ".env")
	os.WriteFile(envFile, []byte("ANTHROPIC_API_KEY=sk-test\nCONFIG_DIR="+configDir+"\n"), 0o600)
	return configDir, envFile
}

func TestChatRepliesPerLineAndKeepsTheSession(t *testing.T) {
	configDir, envFile := chatEnv(t)
	var out, errOut bytes.Buffer
	fake := &backends.Fake{}
	err := runChat(context.Background(), chatOptions{
		io:      streams{in: strings.NewReader("first question\n\n  second question  \n"), out: &out, errOut: &errOut},
		envFile: envFile,
		backend: fake,
	})
	if err != nil {
		t.Fatalf("chat: %v\n%s", err, errOut.String())
	}
	if got, want := out.String(), "echo: first question\necho: second question\n"; got != want {
		t.Errorf("stdout = %q, want %q", got, want)
	}
	reqs := fake.Requests()
	if len(reqs) != 2 || reqs[0].SessionID != "" || reqs[1].SessionID == "" {
		t.Fatalf("requests = %+v, want a new session then a resume", reqs)
	}
	if reqs[0].WorkDir != configDir {
		t.Errorf("work dir = %q, want %q", reqs[0].WorkDir, configDir)
	}
	// Bootstrap created the persona files, and an unnamed chat keeps no session.
	for _, f := range []string{"soul.md", "identity.md", "memory.md"} {
		if _, err := os.Stat(filepath.Join(configDir, f)); err != nil {
			t.Errorf("%s not created: %v", f, err)
		}
	}
	data, _ := os.ReadFile(filepath.Join(configDir, "sessions.json"))
	if strings.Contains(string(data), "chat:") {
		t.Errorf("sessions.json keeps the unnamed chat: %s", data)
	}
}

func TestChatNamedSessionPersists(t *testing.T) {
	_, envFile := chatEnv(t)
	fake := &backends.Fake{}
	for _, msg := range []string{"one", "two"} {
		var out bytes.Buffer
		err := runChat(context.Background(), chatOptions{
			io: streams{in: strings.NewReader(""), out: &out, errOut: &bytes.Buffer{}}, envFile: envFile,
			backend: fake, message: msg, session: "docs",
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	reqs := fake.Requests()
	if len(reqs) != 2 || reqs[1].SessionID == "" || reqs[1].Prompt != "two" {
		t.Errorf("second chat did not resume the named session: %+v", reqs)
	}
}

func TestConfigErrorsExitWithAllProblems(t *testing.T) {
	dir := t.TempDir()
	env := filepath.Join(dir, ".env")
	os.WriteFile(env, []byte("QUERY_TIMEOUT_MS=abc\nPERMISSION_MODE=yolo\nAGENT_BACKEND=nope\nMAX_QUEUE_DEPTH=0\n"), 0o600)
	for _, name := range []string{"DISCORD_BOT_TOKEN", "ANTHROPIC_API_KEY", "QUERY_TIMEOUT_MS", "PERMISSION_MODE", "AGENT_BACKEND", "MAX_QUEUE_DEPTH"} {
		t.Setenv(name, "")
	}
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"run", "--env-file", env}, streams{in: strings.NewReader(""), out: &out, errOut: &errOut})
	if code != exitConfig {
		t.Errorf("exit code = %d, want %d", code, exitConfig)
	}
	for _, want := range []string{"QUERY_TIMEOUT_MS", "PERMISSION_MODE", "AGENT_BACKEND", "MAX_QUEUE_DEPTH", "DISCORD_BOT_TOKEN"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("error output lacks %s:\n%s", want, errOut.String())
		}
	}
}

func TestDoctorJSON(t *testing.T) {
	_, envFile := chatEnv(t)
	t.Setenv("DISCORD_BOT_TOKEN", "")
	t.Setenv("AGENT_CLI_PATH", "/nonexistent/claude")
	var out bytes.Buffer
	code := run(context.Background(), []string{"doctor", "--json", "--env-file", envFile}, streams{in: strings.NewReader(""), out: &out, errOut: &bytes.Buffer{}})
	if code == exitOK {
		t.Errorf("doctor passed with no Discord token and no CLI")
	}
	var report struct {
		OK     bool    `json:"ok"`
		Checks []check `json:"checks"`
	}
	if err := json.Unmarshal(out.Bytes(), &report); err != nil {
		t.Fatalf("doctor --json output is not JSON: %v\n%s", err, out.String())
	}
	var sawToken, sawCLI bool
	for _, c := range report.Checks {
		sawToken = sawToken || (!c.OK && strings.Contains(c.Detail, "DISCORD_BOT_TOKEN"))
		sawCLI = sawCLI || (c.Name == "agent-cli" && !c.OK)
	}
	if report.OK || !sawToken || !sawCLI {
		t.Errorf("report = %+v", report)
	}
	if strings.Contains(out.String(), "sk-test") {
		t.Error("doctor output shows the API key")
	}
}

func TestVersion(t *testing.T) {
	var out bytes.Buffer
	if code := run(context.Background(), []string{"version"}, streams{out: &out, errOut: &out}); code != 0 || !strings.HasPrefix(out.String(), "gateway ") {
		t.Errorf("version: code %d, output %q", code, out.String())
	}
}

func TestRunWithRejectedTokenExitsWithAdvice(t *testing.T) {
	fd := fakediscord.Start(t)
	dir := t.TempDir()
	env := filepath.Join(dir, ".env")
	os.WriteFile(env, []byte(strings.Join([]string{
		"DISCORD_BOT_TOKEN=not-the-token",
		"ANTHROPIC_API_KEY=sk-ant-test",
		"DISCORD_API_BASE_URL=" + fd.APIBaseURL(),
		"DISCORD_GATEWAY_URL=" + fd.GatewayURL(),
		"CONFIG_DIR=" + filepath.Join(dir, "config"),
		"PERMISSION_MODE=default",
	}, "\n")), 0o600)
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"run", "--env-file", env}, streams{in: strings.NewReader(""), out: &out, errOut: &errOut})
	if code != exitError {
		t.Fatalf("exit code = %d, want %d\n%s", code, exitError, errOut.String())
	}
	if !strings.Contains(errOut.String(), "(code 4004)") || !strings.Contains(errOut.String(), "DISCORD_BOT_TOKEN") {
		t.Errorf("stderr lacks the reason and the fix:\n%s", errOut.String())
	}
	if strings.Contains(errOut.String(), "not-the-token") {
		t.Error("the token was printed")
	}
}

func TestDoctorListsScheduleAndItsProblems(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "heartbeat.md"), []byte("## inbox\nInterval: 600\nInstruction: Check.\n\n## fast\nInterval: 5\nInstruction: Too often.\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "agents.md"), []byte("# Rules\n\n## Cron Jobs\n\n### brief\nCron: 0 9 * * *\nTimezone: UTC\nInstruction: Brief.\n\n### bad\nCron: not cron\nInstruction: x\n\n### off\nCron: 0 1 * * *\nPaused: yes\nInstruction: Off.\n\n## Hooks\n\n### shutdown\nInstruction: Bye.\n\n## Webhooks\n\n### deploy\nSecret-Env: WEBHOOK_DEPLOY\nInstruction: {{payload}}\n\n### weak\nSecret-Env: DEPLOY_SECRET\nInstruction: {{payload}}\n"), 0o600)
	cfg, err := config.Load(config.LoadOptions{Environ: []string{"CONFIG_DIR=" + dir, "OUTPUT_CHANNEL_ID=42", "DEPLOY_SECRET=0123456789abcdef0123", "WEBHOOK_DEPLOY=0123456789abcdef0123", "WEBHOOK_ADDR=:8080"}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	var lines []string
	for _, c := range scheduleChecks(cfg, now) {
		lines = append(lines, fmt.Sprintf("%v %s %s", c.OK, c.Name, c.Detail))
	}
	got := strings.Join(lines, "\n")
	for _, want := range []string{
		"true heartbeat inbox every 10m0s, posts to OUTPUT_CHANNEL_ID 42",
		"false schedule heartbeat.md:6: check \"fast\"",
		`true cron brief "0 9 * * *", posts to OUTPUT_CHANNEL_ID 42, next 2026-01-02 09:00 UTC`,
		`true cron off "0 1 * * *", posts to OUTPUT_CHANNEL_ID 42, paused` + "\n",
		"false schedule agents.md:11:",
		"true hook shutdown",
		"true webhook POST /hooks/deploy, secret from WEBHOOK_DEPLOY, posts to OUTPUT_CHANNEL_ID 42\n",
		"false webhook POST /hooks/weak, secret from DEPLOY_SECRET, posts to OUTPUT_CHANNEL_ID 42: disabled, every request is refused: Secret-Env DEPLOY_SECRET does not start with WEBHOOK_",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("doctor lacks %q:\n%s", want, got)
		}
	}
}

func TestDoctorListsSkills(t *testing.T) {
	configDir, envFile := chatEnv(t)
	t.Setenv("DISCORD_BOT_TOKEN", "")
	t.Setenv("AGENT_CLI_PATH", "/nonexistent/claude")
	doctor := func() string {
		t.Helper()
		var out bytes.Buffer
		run(context.Background(), []string{"doctor", "--env-file", envFile}, streams{in: strings.NewReader(""), out: &out, errOut: &bytes.Buffer{}})
		return out.String()
	}
	if got, want := doctor(), "[ok  ] skills     no skills (CONFIG_DIR/skills/<name>/SKILL.md)\n"; !strings.Contains(got, want) {
		t.Errorf("doctor output lacks %q:\n%s", want, got)
	}

	skill := func(dir, content string) {
		t.Helper()
		path := filepath.Join(configDir, "skills", dir, "SKILL.md")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	skill("release-notes", "---\nname: release-notes\ndescription: Write release notes.\n---\n")
	skill("deploy", "---\nname: deploy\ndescription: Deploy the site.\n---\n")
	skill("triage", "---\nname: triage\ndescription: >\n  Sort the issues.\n---\n")
	got := doctor()
	for _, want := range []string{
		"[ok  ] skills     2 skills: deploy, release-notes\n",
		"[warn] skills     skills/triage/SKILL.md: description: block values (> or |) are not supported: write the value on one line\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "FAIL] skills") {
		t.Errorf("a malformed skill failed the doctor:\n%s", got)
	}
}

// fakeClaude is a claude CLI that prints a recorded stream.
func fakeClaude(t *testing.T, recording string) string {
	t.Helper()
	abs, err := filepath.Abs(filepath.Join("..", "..", "testdata", "claude", recording))
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "claude")
	body := "#!/bin/sh\nif [ \"$1\" = --version ]; then echo '2.1.330 (Claude Code)'; exit 0; fi\n/bin/cat >/dev/null\n/bin/cat '" + abs + "'\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return script
}

func TestDoctorOnlineLiveAndAll(t *testing.T) {
	fd := fakediscord.Start(t)
	dir := t.TempDir()
	env := filepath.Join(dir, ".env")
	os.WriteFile(env, []byte(strings.Join([]string{
		"DISCORD_BOT_TOKEN=" + fakediscord.DefaultToken,
		"DISCORD_API_BASE_URL=" + fd.APIBaseURL(),
		"ANTHROPIC_API_KEY=sk-ant-test",
		"AGENT_CLI_PATH=" + fakeClaude(t, "text.jsonl"),
		"CONFIG_DIR=" + filepath.Join(dir, "config"),
		"PERMISSION_MODE=acceptEdits",
		"PATH=/nonexistent",
	}, "\n")), 0o600)
	t.Setenv("PATH", "/nonexistent") // no other CLI is found
	var out bytes.Buffer
	code := run(context.Background(), []string{"doctor", "--online", "--live", "--all", "--env-file", env}, streams{in: strings.NewReader(""), out: &out, errOut: &bytes.Buffer{}})
	got := out.String()
	if code != exitOK {
		t.Errorf("exit %d; the selected backend is healthy, other CLIs missing are warnings:\n%s", code, got)
	}
	for _, want := range []string{
		"[ok  ] discord    DISCORD_BOT_TOKEN looks like a bot token (bot user id 1234567890123456789)",
		"[ok  ] discord    Discord says the token belongs to the bot gatewaybot",
		"[ok  ] agent-cli  claude 2.1.330 (Claude Code)",
		"[ok  ] credentials claude: ANTHROPIC_API_KEY is set",
		"[ok  ] live       claude answered \"Hello! I'm Tova",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, got)
		}
	}
	for _, name := range backends.Names() {
		if want := fmt.Sprintf("[warn] cli:%s", name); name != "claude" && !strings.Contains(got, want) {
			t.Errorf("--all: doctor output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "sk-ant-test") || strings.Contains(got, fakediscord.DefaultToken) {
		t.Error("doctor printed a secret")
	}
}

func TestWorkerWithoutNATSIsAConfigError(t *testing.T) {
	dir := t.TempDir()
	env := filepath.Join(dir, ".env")
	os.WriteFile(env, []byte("DISCORD_BOT_TOKEN=a.b.c\nANTHROPIC_API_KEY=k\nCONFIG_DIR="+filepath.Join(dir, "config")+"\n"), 0o600)
	for _, name := range []string{"DISCORD_BOT_TOKEN", "ANTHROPIC_API_KEY", "CONFIG_DIR", "NATS_URL"} {
		t.Setenv(name, "")
	}
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"worker", "--env-file", env}, streams{in: strings.NewReader(""), out: &out, errOut: &errOut})
	if code != exitConfig || !strings.Contains(errOut.String(), "set NATS_URL") {
		t.Errorf("exit code = %d, stderr %q; want %d and the advice to set NATS_URL", code, errOut.String(), exitConfig)
	}
}
