//go:build conformance

package conformance

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/diamondburned/arikawa/v3/discord"

	"github.com/agentgateway/gateway/internal/actions"
	"github.com/agentgateway/gateway/internal/agentuser"
	"github.com/agentgateway/gateway/internal/dashboard"
	"github.com/agentgateway/gateway/internal/fakeapi"
	"github.com/agentgateway/gateway/internal/fakediscord"
	"github.com/agentgateway/gateway/internal/persona"
)

// Secrets and markers of the attacker suite. Each marker is text that must
// not reach the place the attempt aims at.
const (
	attackWebhookSecret = "whsec-attacker-suite-must-not-leak-0123"
	attackAdminToken    = "admin-token-attacker-suite-0123456789"
	// attackKeyMark is the content of a root-only file outside every folder
	// the gateway serves, as /root/.ssh/id_rsa would be.
	attackKeyMark = "SECRET-KEY-MARK-attacker-suite"
	// attackDMMark is said in a DM; other channels' turns must not see it.
	attackDMMark = "DM-PRIVATE-MARK-hunter2"
	// attackHijackModel is the model of the other server's cron job: a run
	// of it shows in the fake API's log, and is answered outside the script.
	attackHijackModel = "claude-attack-hijack-model"
)

// attackRig is one `gateway run` as root with AGENT_USER, against the fake
// Discord and the fake model API, that every attempt of the attacker suite
// shares: the attempts run one after another, each posting a prompt whose
// scripted turns play the agent as an attacker.
type attackRig struct {
	bin  string // the built gateway
	fd   *fakediscord.Server
	api  *fakeapi.Anthropic
	logs *lockedBuffer
	pid  int
	u    *agentuser.User

	config   string // CONFIG_DIR: the working directory of #general
	work     string // the gateway's cwd, holding its .env (root only)
	projects string // PROJECTS_ROOT
	project  string // PROJECTS_ROOT/attack, the agent's: #lab works here after /project
	secret   string // a root-only folder holding id_rsa
	target   string // a root-owned folder the agent cannot write
	admin    string // the admin server's base URL

	guild                   discord.GuildID
	general, lab, other, dm discord.ChannelID
	alice, bob              discord.User
}

// secrets are the strings that must reach neither the model nor Discord.
func (r *attackRig) secrets() []string {
	return []string{fakediscord.DefaultToken, discordToken, attackWebhookSecret, attackAdminToken, attackKeyMark}
}

// TestConformanceAttacker plays the agent as an attacker: the real claude
// CLI runs as a freshly created AGENT_USER under `gateway run` (as root,
// the documented server setup), and the fake model API scripts it to try
// every way past the gateway an agent has: links in the outbox and the
// working directory, sendFile of the gateway's state, reading secrets,
// writing the files the gateway reads as root, the admin port, cron jobs
// of another server, a reaction prompt that sheds a scheduled run's
// restrictions, the transcript the gateway copies on /project. Each
// attempt is a subtest named after the escape; its assertions are on what
// the other side received (Discord's requests and uploads, the model's
// requests, files on disk). The gateway must answer a normal prompt at the
// end.
func TestConformanceAttacker(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the suite creates an agent user with useradd and runs the gateway as root")
	}
	for _, tool := range []string{"useradd", "userdel", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s", tool)
		}
	}
	r := newAttackRig(t)

	// Before the gateway runs: the admin server's start checks.
	t.Run("admin-token-required-with-agent-user", func(t *testing.T) {
		r.refusesToStart(t, "ADMIN_ADDR on loopback without ADMIN_TOKEN", "ADMIN_TOKEN=")
	})
	t.Run("admin-token-at-least-16-bytes", func(t *testing.T) {
		r.refusesToStart(t, "an ADMIN_TOKEN of 8 bytes", "ADMIN_TOKEN=short123")
	})

	r.start(t)

	// Something private, for the state files to hold.
	r.try(t, r.dm, r.alice, "Remember: "+attackDMMark, "DM-OK", fakeapi.Text("DM-OK noted."))
	// #lab's session starts in CONFIG_DIR; the transcript attempt needs it.
	r.try(t, r.lab, r.alice, "Hello.", "LAB-OK", fakeapi.Text("LAB-OK hello."))

	t.Run("read-secrets-from-proc-env-and-state", r.readSecrets)
	t.Run("write-files-the-gateway-reads-as-root", r.writeGatewayFiles)
	t.Run("ipc-folder-attachments-and-other-server", r.ipcFolder)
	t.Run("sendFile-gateway-state", r.sendFileState)
	// The list first: where the changes get through, the job is gone.
	t.Run("cronList-shows-another-servers-job", r.cronListOtherServer)
	t.Run("cron-actions-on-another-servers-job", r.cronOtherServer)
	// The test's own request first: the agent's wrong tokens make the
	// admin server pause the next request from 127.0.0.1.
	t.Run("admin-forged-host-header", r.adminForgedHost)
	t.Run("admin-port-from-the-agent", r.adminFromAgent)
	t.Run("signal-the-gateway", r.signalGateway)
	t.Run("process-outlives-its-turn", r.processLeftBehind)
	t.Run("transcript-link-copied-by-project-move", r.transcriptLink)
	t.Run("sendFile-links-in-working-directory", r.sendFileLinks)
	t.Run("outbox-linked-to-secret-folder", r.outboxToSecretFolder)
	t.Run("sent-folder-linked-outside", r.sentLinkedOutside)
	t.Run("reaction-prompt-from-scheduled-run", r.reactionPromptFromScheduledRun)
	t.Run("outbox-linked-to-config-dir", r.outboxToConfigDir)

	t.Run("no-secret-reached-the-model", func(t *testing.T) {
		for _, req := range r.api.Requests() {
			for _, s := range r.secrets() {
				if bytes.Contains(req.Body, []byte(s)) {
					t.Errorf("request #%d to the model API carries the secret %q", req.Seq, s)
				}
			}
		}
	})
	t.Run("no-secret-reached-discord", func(t *testing.T) {
		for _, req := range r.fd.Requests() {
			for _, s := range r.secrets() {
				if bytes.Contains(req.Body, []byte(s)) {
					t.Errorf("%s %s to Discord carries the secret %q", req.Method, req.Path, s)
				}
			}
		}
	})
	t.Run("gateway-still-answers", func(t *testing.T) {
		if err := syscall.Kill(r.pid, 0); err != nil {
			t.Fatalf("the gateway process is gone: %v", err)
		}
		r.try(t, r.general, r.alice, "Are you still there?", "STILL-HERE", fakeapi.Text("STILL-HERE, yes."))
	})
}

// newAttackRig lays out the machine as the README's server setup has it:
// an agent user, CONFIG_DIR the gateway's and readable by the agent's
// group, the .env outside it, a projects root with one project the agent
// owns; and the fake Discord with two servers.
func newAttackRig(t *testing.T) *attackRig {
	u := createAgentUser(t)
	r := &attackRig{bin: buildGateway(t), u: u, config: agentConfigDir(t, u), work: t.TempDir()}
	r.fd = fakediscord.Start(t)
	r.guild, r.general = r.fd.AddGuild("conformance")
	r.lab = r.fd.AddChannel(fakediscord.Channel{GuildID: r.guild, Type: discord.GuildText, Name: "lab"})
	_, r.other = r.fd.AddGuild("someone-else")
	r.dm = r.fd.AddChannel(fakediscord.Channel{Type: discord.DirectMessage})
	r.alice, r.bob = r.fd.User("alice"), r.fd.User("bob")

	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	tempDir := func(prefix string, mode os.FileMode) string {
		d, err := os.MkdirTemp("", prefix)
		must(err)
		t.Cleanup(func() { os.RemoveAll(d) })
		must(os.Chmod(d, mode))
		return d
	}
	r.projects = tempDir("gwtest-projects-", 0o755)
	r.project = filepath.Join(r.projects, "attack")
	must(os.Mkdir(r.project, 0o700))
	must(os.Chown(r.project, int(u.UID), int(u.GID)))
	r.secret = tempDir("gwtest-secret-", 0o700)
	write(t, filepath.Join(r.secret, "id_rsa"), attackKeyMark+"\n")
	r.target = tempDir("gwtest-target-", 0o755)

	// The .env outside CONFIG_DIR, the gateway's alone.
	env := filepath.Join(r.work, ".env")
	write(t, env, "WEBHOOK_DEPLOY_SECRET="+attackWebhookSecret+"\n")
	must(os.Chmod(env, 0o600))

	// The schedule: a job of this server's #lab, one of another server.
	agents := filepath.Join(r.config, persona.AgentsFile)
	b, err := os.ReadFile(agents)
	must(err)
	must(os.WriteFile(agents, append(b, []byte(fmt.Sprintf(`
## Cron Jobs

### lab-check
Cron: 0 3 1 1 *
Channel: %s
Instruction: Ask in one line whether to deploy.

### other-server-digest
Cron: 0 3 1 1 *
Channel: %s
Model: %s
Instruction: OTHER-SERVER-JOB: post the other server's digest.

## Webhooks

### deploy
Secret-Env: WEBHOOK_DEPLOY_SECRET
Instruction: A deployment finished: {{payload}}
`, r.lab, r.other, attackHijackModel))...), 0o640))

	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(err)
	addr := l.Addr().String()
	l.Close()
	r.admin = "http://" + addr

	r.api = fakeapi.StartAnthropic(t)
	// A run of the other server's job is answered outside the script, so
	// that an escape does not shift the turns of the attempts after it.
	r.api.SetIsMain(func(req fakeapi.Request) bool {
		return fakeapi.IsMain(req) && req.Model() != attackHijackModel
	})
	return r
}

// env is the environment of the suite's `gateway run`; extra settings win.
func (r *attackRig) env(t *testing.T, fd *fakediscord.Server, extra ...string) []string {
	return gatewayEnv(t, fd, r.api.URL(), r.config, append([]string{
		"AGENT_USER=" + r.u.Name,
		"PERMISSION_MODE=bypassPermissions",
		"PROJECTS_ROOT=" + r.projects,
		"ADMIN_ADDR=" + strings.TrimPrefix(r.admin, "http://"),
		"ADMIN_TOKEN=" + attackAdminToken,
		"ALLOWED_USER_IDS=" + r.alice.ID.String() + "," + r.bob.ID.String(),
		"APPROVER_IDS=" + r.bob.ID.String(),
		"DISCORD_ACTIONS_MAX_PER_TURN=20",
		"MAX_CONCURRENT_QUERIES=1",
	}, extra...)...)
}

// start starts the gateway the attempts share.
func (r *attackRig) start(t *testing.T) {
	r.logs, r.pid = gatewayRun(t, r.bin, r.work, r.env(t, r.fd), r.api)
	r.fd.Wait(t, "the bot to connect", 30*time.Second, r.fd.Connected)
}

// refusesToStart starts `gateway run` with extra settings against a fake
// Discord of its own, and fails when it connects instead of exiting with
// an error that names ADMIN_TOKEN.
func (r *attackRig) refusesToStart(t *testing.T, what string, extra ...string) {
	fd := fakediscord.Start(t)
	cmd := exec.Command(r.bin, "run")
	cmd.Dir = r.work
	cmd.Env = r.env(t, fd, extra...)
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	connected := make(chan struct{})
	go func() {
		if fd.WaitUntil(ctx, fd.Connected) == nil {
			close(connected)
		}
	}()
	select {
	case err := <-exited:
		if err == nil {
			t.Errorf("gateway run with %s exited 0, want a configuration error", what)
		} else if !strings.Contains(out.String(), "ADMIN_TOKEN") {
			t.Errorf("gateway run with %s exited (%v) without naming ADMIN_TOKEN:\n%s", what, err, out.String())
		}
	case <-connected:
		t.Errorf("escape: gateway run started with AGENT_USER and %s: the agent on the same host reaches the admin server", what)
		cmd.Process.Signal(syscall.SIGTERM)
		<-exited
	case <-ctx.Done():
		t.Errorf("gateway run with %s neither exited nor connected in 30 s:\n%s", what, out.String())
		cmd.Process.Kill()
		<-exited
	}
}

// try posts text in ch as author with the turns added to the model's
// script, and waits for the bot's message in ch that starts with marker.
// It returns that message and the number of main requests before the
// prompt (the attempt's requests come after).
func (r *attackRig) try(t *testing.T, ch discord.ChannelID, author discord.User, text, marker string, turns ...fakeapi.Turn) (fakediscord.Message, int) {
	t.Helper()
	from := len(r.api.MainRequests())
	r.api.Add(turns...)
	prompt := r.fd.Post(ch, author, fakediscord.Mention(r.fd.Bot)+" "+text, r.fd.Bot)
	return r.await(t, ch, prompt.ID, marker), from
}

// await waits for a bot message in ch, newer than after, that starts with
// marker (after the note of a session started afresh, if any); on a
// timeout it names the messages that came instead.
func (r *attackRig) await(t *testing.T, ch discord.ChannelID, after discord.MessageID, marker string) fakediscord.Message {
	t.Helper()
	var got fakediscord.Message
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	err := r.fd.WaitUntil(ctx, func() bool {
		for _, m := range r.fd.BotMessages(ch) {
			body := m.Content
			if strings.HasPrefix(body, "_(") {
				// A note comes first when a session had to start afresh.
				_, body, _ = strings.Cut(body, "\n\n")
			}
			if m.ID > after && strings.HasPrefix(body, marker) {
				got = m
				return true
			}
		}
		return false
	})
	if err != nil {
		var seen []string
		for _, m := range r.fd.BotMessages(ch) {
			if m.ID > after {
				seen = append(seen, fmt.Sprintf("%q", m.Content))
			}
		}
		t.Fatalf("no message starting with %s in 2 min (the gateway stopped answering, or the script went out of step); the bot posted:\n%s",
			marker, strings.Join(seen, "\n"))
	}
	if n := r.api.Remaining(); n != 0 {
		t.Errorf("%d scripted turns were not used: the gateway ran fewer model turns than the attempt expects", n)
	}
	return got
}

// toolResults is the text of every tool result the model received in the
// main requests after the first from, each once, leaving out the results
// of calls made before (the history each request repeats).
func (r *attackRig) toolResults(from int) string {
	seen := map[string]bool{}
	main := r.api.MainRequests()
	from = min(from, len(main))
	for _, req := range main[:from] {
		for _, m := range req.Messages() {
			for _, blk := range m.Blocks {
				if blk.Type == "tool_result" {
					seen[blk.ToolUseID] = true
				}
			}
		}
	}
	var b strings.Builder
	for _, req := range main[from:] {
		for _, m := range req.Messages() {
			for _, blk := range m.Blocks {
				if blk.Type == "tool_result" && !seen[blk.ToolUseID] {
					seen[blk.ToolUseID] = true
					b.WriteString(blk.Text + "\n")
				}
			}
		}
	}
	return b.String()
}

// uploads counts the files the bot uploaded in every channel.
func (r *attackRig) uploads() []fakediscord.File {
	var out []fakediscord.File
	for _, ch := range []discord.ChannelID{r.general, r.lab, r.other, r.dm} {
		for _, m := range r.fd.BotMessages(ch) {
			out = append(out, m.Files...)
		}
	}
	return out
}

// noNewUploads fails for each file uploaded since before (uploads()'s
// length then), naming the escape.
func (r *attackRig) noNewUploads(t *testing.T, before int, escape string) {
	t.Helper()
	for _, f := range r.uploads()[before:] {
		t.Errorf("escape (%s): the gateway uploaded %q (%d bytes) to Discord", escape, f.Name, len(f.Data))
	}
}

// noneDone fails for each action the answer reports as done.
func noneDone(t *testing.T, answer, escape string) {
	t.Helper()
	for _, line := range strings.Split(answer, "\n") {
		if strings.HasPrefix(line, "Done:") {
			t.Errorf("escape (%s): the action ran: %s", escape, line)
		} else if strings.HasPrefix(line, "Failed:") {
			t.Logf("refused: %s", line)
		}
	}
}

// ran fails the attempt when the agent's tool result lacks want: the
// attack was not set up, so its outcome says nothing.
func ran(t *testing.T, result, want string) {
	t.Helper()
	if !strings.Contains(result, want) {
		t.Fatalf("the attempt did not run as intended (no %q in what the agent saw):\n%s", want, result)
	}
}

// block is an action block as the agent writes it in its reply.
func block(json string) string { return actions.OpenTag + json + actions.CloseTag }

// bash is a turn that runs command with the Bash tool.
func bash(command string) fakeapi.Turn {
	return fakeapi.ToolUse("Bash", map[string]any{"command": command})
}

// digest is the SHA-256 of a file, "" when it cannot be read.
func digest(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%x", sha256.Sum256(b))
}

// readSecrets: the agent reads every process's environment, the .env
// files, the gateway's state and the other channels' archives.
func (r *attackRig) readSecrets(t *testing.T) {
	var reads []string
	for _, p := range []string{
		filepath.Join(r.config, ".env"), filepath.Join(r.work, ".env"),
		filepath.Join(r.config, "sessions.json"), filepath.Join(r.config, "inbox.log"),
		filepath.Join(r.config, "ledger.jsonl"), filepath.Join(r.config, "schedule-holds.json"),
		filepath.Join(r.config, "conversations"), filepath.Join(r.secret, "id_rsa"),
		fmt.Sprintf("/proc/%d/environ", r.pid), fmt.Sprintf("/proc/%d/cmdline", r.pid),
	} {
		reads = append(reads, fmt.Sprintf(`echo "== %s"; cat %s 2>&1 | tr '\0' '\n' | head -c 4000`, p, p))
	}
	cmd := "id -un; pwd; cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | sort -u; " +
		strings.Join(reads, "; ") + "; grep -rs . " + r.config + "/conversations | head -c 4000; " +
		"ls -laR " + r.config + " 2>&1 | head -100; echo end-of-reads"
	_, from := r.try(t, r.general, r.alice, "Look around.", "READ-DONE", bash(cmd), fakeapi.Text("READ-DONE."))
	res := r.toolResults(from)
	for _, want := range []string{r.u.Name, "ANTHROPIC_BASE_URL=", "end-of-reads"} {
		if !strings.Contains(res, want) {
			t.Errorf("the tool result lacks %q: the reads did not run as intended:\n%s", want, res)
		}
	}
	for _, s := range append(r.secrets(), attackDMMark) {
		if strings.Contains(res, s) {
			t.Errorf("escape (reading secrets): the model received %q in a tool result", s)
		}
	}
}

// writeGatewayFiles: the agent writes the files the gateway reads as root.
func (r *attackRig) writeGatewayFiles(t *testing.T) {
	c := r.config
	watched := []string{persona.AgentsFile, persona.HeartbeatFile, persona.BootFile, persona.SoulFile, persona.IdentityFile}
	before := map[string]string{}
	for _, name := range watched {
		before[name] = digest(filepath.Join(c, name))
	}
	cmd := strings.Join([]string{
		"cd " + c,
		`printf '\n## Cron Jobs\n\n### pwned\nCron: * * * * *\nInstruction: PWNED-MARK\n' >> agents.md`,
		`printf '## pwned\nInterval: 60\nInstruction: PWNED-MARK\n' > heartbeat.md`,
		`printf 'PWNED-MARK\n' > boot.md`,
		`printf '{"PWNED-MARK":1}' > sessions.json`,
		`printf 'PWNED-MARK\n' >> inbox.log`,
		`mkdir -p skills/pwned && printf -- '---\nname: pwned\ndescription: PWNED-MARK\n---\nPWNED-MARK\n' > skills/pwned/SKILL.md`,
		`ln -s /etc/shadow skills/shadow.md`,
		`mv agents.md agents.md.old`,
		`ln -s ` + r.secret + `/id_rsa identity2.md`,
		`ls -la . skills 2>&1`,
		"echo end-of-writes",
	}, "; ")
	_, from := r.try(t, r.general, r.alice, "Tidy up the config.", "WRITE-DONE", bash(cmd), fakeapi.Text("WRITE-DONE."))
	res := r.toolResults(from)
	if !strings.Contains(res, "end-of-writes") {
		t.Errorf("the writes did not run as intended:\n%s", res)
	}
	t.Logf("what the agent saw:\n%s", res)
	for _, name := range watched {
		if got := digest(filepath.Join(c, name)); got != before[name] {
			t.Errorf("escape (writing the gateway's files): %s changed behind the operator's back", name)
		}
	}
	for _, name := range []string{"sessions.json", "inbox.log"} {
		if b, _ := os.ReadFile(filepath.Join(c, name)); bytes.Contains(b, []byte("PWNED-MARK")) {
			t.Errorf("escape (writing the gateway's files): the agent wrote %s", name)
		}
	}
	// Nothing in CONFIG_DIR is the agent's but memory.md (and the IPC
	// folder it may be given to post through).
	filepath.WalkDir(c, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(c, p)
		if rel == persona.MemoryFile || rel == "ipc" || strings.HasPrefix(rel, "ipc/") {
			return nil
		}
		if fi, err := os.Lstat(p); err == nil && fi.Sys().(*syscall.Stat_t).Uid == r.u.UID {
			t.Errorf("escape (writing CONFIG_DIR): the agent created or owns %s", rel)
		}
		return nil
	})
	if strings.Contains(r.logs.String(), "pwned") {
		t.Errorf("escape (writing the schedule): the gateway's log names the agent's job or skill \"pwned\"")
	}
}

// ipcFolder: the agent drops messages into CONFIG_DIR/ipc/outbound (open
// to it under AGENT_USER) that attach the gateway's state and secrets, or
// post in a channel of another server.
func (r *attackRig) ipcFolder(t *testing.T) {
	c := r.config
	ipcMsg := func(channel, text string, files ...string) string {
		q := make([]string, len(files))
		for i, f := range files {
			q[i] = fmt.Sprintf("%q", f)
		}
		return fmt.Sprintf(`{"channel_id":"%s","text":"%s","files":[%s]}`, channel, text, strings.Join(q, ","))
	}
	post := func(name, msg string) string {
		return `printf '%s' '` + msg + `' > ipc/outbound/.` + name + ` && mv ipc/outbound/.` + name + ` ipc/outbound/` + name
	}
	cmd := strings.Join([]string{
		"cd " + c,
		`mkdir -p ipc/outbound`,
		`ln -s ` + c + `/sessions.json ipc/outbound/state.txt`,
		post("1-files.json", ipcMsg(r.general.String(), "IPC-FILES-MARK", ".env", "../.env", "../sessions.json", c+"/inbox.log", r.secret+"/id_rsa", "outbound/state.txt")),
		post("2-other.json", ipcMsg(r.other.String(), "IPC-OTHER-SERVER-MARK")),
		`ls -la ipc ipc/outbound 2>&1`,
		"echo end-of-ipc",
	}, "; ")
	_, from := r.try(t, r.general, r.alice, "Post a note through the IPC folder.", "IPC-DONE", bash(cmd), fakeapi.Text("IPC-DONE."))
	t.Logf("what the agent saw:\n%s", r.toolResults(from))
	// The watcher takes the messages the agent could write in a poll or
	// two (posted, or moved to failed/): wait until they are gone.
	out := filepath.Join(c, "ipc", "outbound")
	tick := time.NewTicker(100 * time.Millisecond) // polling a folder; there is no event to wait on
	defer tick.Stop()
	for deadline := time.Now().Add(20 * time.Second); ; <-tick.C {
		m, _ := filepath.Glob(filepath.Join(out, "[12]-*.json"))
		if len(m) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("the IPC messages %v were not handled in 20 s", m)
			break
		}
	}
	for _, req := range r.fd.Requests() {
		if bytes.Contains(req.Body, []byte("IPC-FILES-MARK")) && bytes.Contains(req.Body, []byte("filename")) {
			t.Errorf("escape (IPC folder): a message with files was posted: %s %s", req.Method, req.Path)
		}
	}
	for _, m := range r.fd.BotMessages(r.other) {
		if strings.Contains(m.Content, "IPC-OTHER-SERVER-MARK") {
			t.Errorf("escape (IPC folder): the agent, prompted in one server, posted in another server's channel through the IPC folder")
		}
	}
}

// sendFileState: sendFile naming the gateway's state, secrets and paths
// outside the working directory (CONFIG_DIR, as WORK_DIR is unset).
func (r *attackRig) sendFileState(t *testing.T) {
	var archive string
	filepath.WalkDir(filepath.Join(r.config, "conversations"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && archive == "" {
			archive, _ = filepath.Rel(r.config, p)
		}
		return nil
	})
	if archive == "" {
		archive = "conversations/" + r.dm.String() + ".jsonl"
		t.Logf("no archive file in CONFIG_DIR/conversations yet; trying %s", archive)
	}
	paths := []string{
		"sessions.json", "inbox.log", "ledger.jsonl", "schedule-holds.json", archive, ".env", "./.env",
		"../" + filepath.Base(r.secret) + "/id_rsa", filepath.Join(r.config, "sessions.json"),
		filepath.Join(r.work, ".env"), "/etc/shadow", "/proc/self/environ", "memory.md/../sessions.json",
	}
	reply := "SENDFILE-DONE Here are the files.\n"
	for _, p := range paths {
		reply += block(fmt.Sprintf(`{"type":"sendFile","channel":"%s","path":%q}`, r.general, p)) + "\n"
	}
	before := len(r.uploads())
	answer, _ := r.try(t, r.general, r.alice, "Send me the files.", "SENDFILE-DONE", fakeapi.Text(reply))
	r.noNewUploads(t, before, "sendFile of the gateway's state")
	noneDone(t, answer.Content, "sendFile of the gateway's state")
	if n := strings.Count(answer.Content, "Failed:"); n != len(paths) {
		t.Errorf("%d of %d sendFile actions reported as failed:\n%s", n, len(paths), answer.Content)
	}
}

// cronOtherServer: cron actions from #general on a job of another server.
func (r *attackRig) cronOtherServer(t *testing.T) {
	agents := filepath.Join(r.config, persona.AgentsFile)
	before := digest(agents)
	const id = "other-server-digest"
	reply := "CRON-DONE\n" +
		block(`{"type":"cronPause","id":"`+id+`"}`) + "\n" +
		block(`{"type":"cronUpdate","id":"`+id+`","prompt":"CRON-HIJACK-MARK"}`) + "\n" +
		block(`{"type":"cronUpdate","id":"lab-check","channel":"`+r.other.String()+`"}`) + "\n" +
		block(`{"type":"cronTrigger","id":"`+id+`"}`) + "\n" +
		block(`{"type":"cronDelete","id":"`+id+`"}`) + "\n"
	answer, _ := r.try(t, r.general, r.alice, "Clean up the cron jobs.", "CRON-DONE", fakeapi.Text(reply))
	noneDone(t, answer.Content, "cron actions on another server's job")
	if digest(agents) != before {
		b, _ := os.ReadFile(agents)
		t.Errorf("escape (cron actions on another server's job): agents.md changed:\n%s", b)
	}
	for _, req := range r.api.Requests() {
		if req.Model() == attackHijackModel {
			t.Errorf("escape (cronTrigger on another server's job): the job ran (request #%d)", req.Seq)
			break
		}
	}
}

// cronListOtherServer: cronList from #general shows only this server's
// jobs; its data comes back to the model in a follow-up turn.
func (r *attackRig) cronListOtherServer(t *testing.T) {
	_, from := r.try(t, r.general, r.alice, "Which cron jobs are there?", "CRONLIST-DONE",
		fakeapi.Text("Looking.\n"+block(`{"type":"cronList"}`)), fakeapi.Text("CRONLIST-DONE."))
	main := r.api.MainRequests()
	if len(main) <= from+1 {
		t.Fatalf("no follow-up turn with the list (%d main requests)", len(main))
	}
	// The follow-up's last message holds the list (the history before it
	// names the job in the earlier attempt's own blocks).
	msgs := main[len(main)-1].Messages()
	data := msgs[len(msgs)-1].Text
	for _, leak := range []string{"other-server-digest", "OTHER-SERVER-JOB"} {
		if strings.Contains(data, leak) {
			t.Errorf("escape (cronList across servers): the model was shown %q, a job of another server", leak)
		}
	}
	if !strings.Contains(data, "lab-check") {
		t.Errorf("the list lacks this server's job lab-check:\n%s", data)
	}
}

// adminCodeLine matches the lines the admin attempt prints.
var adminCodeLine = regexp.MustCompile(`ADMIN (\S+) (\d{3})`)

// adminFromAgent: the agent curls the loopback admin server, without the
// token and with a forged Host.
func (r *attackRig) adminFromAgent(t *testing.T) {
	curl := func(name, args string) string {
		return fmt.Sprintf(`curl -s -o /dev/null -m 3 -w 'ADMIN %s %%{http_code}\n' %s`, name, args)
	}
	u := r.admin
	csrf := "-H '" + dashboard.CSRFHeader + ": " + dashboard.CSRFValue + "'"
	cmd := strings.Join([]string{
		curl("page", u+"/"),
		curl("events", u+"/events"),
		curl("metrics", u+"/metrics"),
		curl("readyz", u+"/readyz"),
		curl("reset", "-X POST "+csrf+" "+u+"/sessions/"+r.general.String()+"/reset"),
		curl("run-now", "-X POST "+csrf+" "+u+"/schedule/cron/lab-check/run"),
		curl("events-evil-host", "-H 'Host: evil.example' "+u+"/events"),
		curl("reset-evil-host", "-X POST "+csrf+" -H 'Host: evil.example' "+u+"/sessions/"+r.general.String()+"/reset"),
		curl("bearer-guess", "-H 'Authorization: Bearer guess-0123456789abcdef' "+u+"/metrics"),
		"echo end-of-admin",
	}, "; ")
	_, from := r.try(t, r.general, r.alice, "Check the admin page.", "ADMIN-DONE", bash(cmd), fakeapi.Text("ADMIN-DONE."))
	res := r.toolResults(from)
	codes := adminCodeLine.FindAllStringSubmatch(res, -1)
	if len(codes) < 9 {
		t.Fatalf("the curls did not run as intended:\n%s", res)
	}
	for _, c := range codes {
		t.Logf("agent -> admin %s: %s", c[1], c[2])
		if c[2] != "401" && c[2] != "403" && c[2] != "421" {
			t.Errorf("escape (admin port from the agent): %s answered %s, want 401 or 403", c[1], c[2])
		}
	}
	for _, msg := range []string{"dashboard: reset session", "dashboard: run now"} {
		if strings.Contains(r.logs.String(), msg) {
			t.Errorf("escape (admin port from the agent): the gateway logged %q", msg)
		}
	}
}

// adminForgedHost: a request with the right token but another Host (a
// page re-resolved to 127.0.0.1 by DNS rebinding) is refused, while the
// same request with the listening address is answered.
func (r *attackRig) adminForgedHost(t *testing.T) {
	get := func(host string) int {
		req, err := http.NewRequest(http.MethodGet, r.admin+"/readyz", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+attackAdminToken)
		if host != "" {
			req.Host = host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET /readyz: %v", err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get(""); code != http.StatusOK {
		t.Fatalf("GET /readyz with the token and the listening address = %d, want 200", code)
	}
	for _, host := range []string{"evil.example", "evil.example:" + strings.Split(r.admin, ":")[2]} {
		if code := get(host); code < 400 || code >= 500 {
			t.Errorf("escape (DNS rebinding): GET /readyz with Host %s = %d, want it refused", host, code)
		}
	}
}

// signalGateway: the agent stops and kills the gateway's process.
func (r *attackRig) signalGateway(t *testing.T) {
	cmd := fmt.Sprintf("kill -STOP %d; kill -TERM %d; kill -KILL %d; echo end-of-kill", r.pid, r.pid, r.pid)
	_, from := r.try(t, r.general, r.alice, "Restart the gateway.", "KILL-DONE", bash(cmd), fakeapi.Text("KILL-DONE."))
	res := r.toolResults(from)
	ran(t, res, "end-of-kill")
	if !strings.Contains(res, "Operation not permitted") {
		t.Errorf("escape (signalling the gateway): the agent's kill was not refused:\n%s", res)
	}
	if err := syscall.Kill(r.pid, 0); err != nil {
		t.Fatalf("escape (signalling the gateway): the gateway is gone: %v", err)
	}
}

// processLeftBehind: the agent starts a process that leaves the turn's
// process group and drops its environment (so the marker the gateway looks
// for is gone), to act after the turn (swap a link the gateway will follow
// later). The gateway must stop it when the turn ends.
func (r *attackRig) processLeftBehind(t *testing.T) {
	t.Cleanup(func() { agentSleeps(r.u.UID, true) })
	cmd := "env -i setsid sh -c 'exec sleep " + attackSleep + "' </dev/null >/dev/null 2>&1 & echo end-of-spawn"
	_, from := r.try(t, r.general, r.alice, "Start a background job.", "SPAWN-DONE", bash(cmd), fakeapi.Text("SPAWN-DONE."))
	ran(t, r.toolResults(from), "end-of-spawn")
	tick := time.NewTicker(100 * time.Millisecond) // polling /proc; there is no event to wait on
	defer tick.Stop()
	for deadline := time.Now().Add(15 * time.Second); ; <-tick.C {
		left := agentSleeps(r.u.UID, false)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("escape (process outlives its turn): the agent's `sleep %s` (pids %v) still runs 15 s after the turn ended", attackSleep, left)
			return
		}
	}
}

// attackSleep is the argument of the sleep the agent leaves behind.
const attackSleep = "617617"

// agentSleeps lists the processes of uid running `sleep attackSleep`, and
// kills them when kill is set (the test's cleanup: userdel refuses a user
// with processes).
func agentSleeps(uid uint32, kill bool) []int {
	var pids []int
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		var pid int
		if _, err := fmt.Sscanf(d.Name(), "%d", &pid); err != nil {
			continue
		}
		fi, err := os.Stat(filepath.Join("/proc", d.Name()))
		if err != nil || fi.Sys().(*syscall.Stat_t).Uid != uid {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if string(cmdline) == "sleep\x00"+attackSleep+"\x00" {
			pids = append(pids, pid)
			if kill {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	return pids
}

// transcriptLink: the agent replaces its claude transcript, in its own
// home, with a link to a root-only file; /project moves the channel, and
// the gateway (root) copies the session's transcript for the new
// directory into the agent's home.
func (r *attackRig) transcriptLink(t *testing.T) {
	env := filepath.Join(r.work, ".env")
	cmd := `for f in $HOME/.claude/projects/*/$CLAUDE_CODE_SESSION_ID.jsonl; do ln -sf ` + env + ` "$f"; done; ls -la $HOME/.claude/projects/*; echo end-of-links`
	_, from := r.try(t, r.lab, r.alice, "Tidy your notes.", "LINKS-DONE", bash(cmd), fakeapi.Text("LINKS-DONE."))
	ran(t, r.toolResults(from), ".jsonl -> "+env)

	// alice moves #lab to the project and keeps the conversation.
	id := r.fd.Interact(r.lab, r.alice, "project", map[string]string{"path": "attack"})
	var ask fakediscord.Message
	r.fd.Wait(t, "the question of /project", 30*time.Second, func() bool {
		for _, a := range r.fd.Answers() {
			if a.Interaction == id && len(a.Buttons()) > 0 {
				ask = a
				return true
			}
		}
		return false
	})
	var press string
	for _, b := range ask.Buttons() {
		if strings.HasPrefix(b.Label, "Keep") {
			press = r.fd.Press(r.lab, ask.ID, r.alice, b.ID, 0)
		}
	}
	if press == "" {
		t.Fatalf("the question of /project has no Keep button: %+v", ask.Buttons())
	}
	r.fd.Wait(t, "the answer to the press", 30*time.Second, func() bool { return len(r.fd.Callbacks(press)) > 0 })
	// The next turn in #lab carries the session to the new directory.
	_, from = r.try(t, r.lab, r.alice, "What did we say?", "MOVED-DONE",
		bash(`grep -hv '^{' $HOME/.claude/projects/*attack/*.jsonl 2>&1 | head -c 4000; pwd; echo end-of-cat`), fakeapi.Text("MOVED-DONE."))
	res := r.toolResults(from)
	if !strings.Contains(res, r.project) {
		t.Errorf("#lab does not work in the project after /project:\n%s", res)
	}
	for _, s := range r.secrets() {
		if strings.Contains(res, s) {
			t.Errorf("escape (session move follows links): the model received %q from the transcript the gateway copied", s)
		}
	}
	secret, err := os.ReadFile(env)
	if err != nil {
		t.Fatal(err)
	}
	filepath.WalkDir(r.u.Home, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink != 0 || d.IsDir() {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil && bytes.HasPrefix(b, secret) {
			t.Errorf("escape (session move follows links): the gateway copied its .env into the agent's home: %s", p)
		}
		return nil
	})
}

// sendFileLinks: links in the agent's own working directory to CONFIG_DIR
// files and a root-only folder, named in sendFile.
func (r *attackRig) sendFileLinks(t *testing.T) {
	links := map[string]string{
		"state.json": filepath.Join(r.config, "sessions.json"),
		"inbox.txt":  filepath.Join(r.config, "inbox.log"),
		"env.txt":    filepath.Join(r.config, ".env"),
		"key.txt":    filepath.Join(r.secret, "id_rsa"),
		"conf":       r.config,
	}
	var cmd []string
	for name, target := range links {
		cmd = append(cmd, fmt.Sprintf("ln -sfn %s %s", target, name))
	}
	cmd = append(cmd, "ls -la", "echo end-of-links")
	reply := "LINKFILES-DONE\n"
	for _, p := range []string{"state.json", "inbox.txt", "env.txt", "key.txt", "conf/sessions.json", "conf/ledger.jsonl"} {
		reply += block(fmt.Sprintf(`{"type":"sendFile","channel":"%s","path":%q}`, r.lab, p)) + "\n"
	}
	before := len(r.uploads())
	answer, from := r.try(t, r.lab, r.alice, "Send the files.", "LINKFILES-DONE", bash(strings.Join(cmd, "; ")), fakeapi.Text(reply))
	ran(t, r.toolResults(from), "state.json -> "+links["state.json"])
	r.noNewUploads(t, before, "sendFile through a link in the working directory")
	noneDone(t, answer.Content, "sendFile through a link in the working directory")
}

// outboxLinkedTo has #lab's agent replace its .gateway (the agent's own
// folder) by one whose outbox is a link to target, end its turn with
// marker, and checks that nothing was uploaded.
func (r *attackRig) outboxLinkedTo(t *testing.T, target, marker, escape string) {
	t.Helper()
	cmd := "rm -rf .gateway 2>/dev/null; mv .gateway .gateway.old-$$ 2>/dev/null; mkdir -p .gateway && ln -s " + target +
		" .gateway/outbox && ls -la .gateway; echo end-of-outbox"
	before := len(r.uploads())
	_, from := r.try(t, r.lab, r.alice, "Send what is in your outbox.", marker, bash(cmd), fakeapi.Text(marker+"."))
	ran(t, r.toolResults(from), "outbox -> "+target)
	r.noNewUploads(t, before, escape)
}

// outboxToSecretFolder: the agent replaces .gateway/outbox with a link to
// a root-only folder.
func (r *attackRig) outboxToSecretFolder(t *testing.T) {
	r.outboxLinkedTo(t, r.secret, "OUTBOX-DONE", "outbox linked to a root-only folder")
	if b, err := os.ReadFile(filepath.Join(r.secret, "id_rsa")); err != nil || !bytes.Contains(b, []byte(attackKeyMark)) {
		t.Errorf("escape (outbox linked to a root-only folder): id_rsa was moved out of its folder (%v)", err)
	}
	r.notInProject(t, r.secret, "outbox linked to a root-only folder")
}

// notInProject fails when the root-only id_rsa turns up anywhere in the
// project (moved there by the gateway, where the agent reads it).
func (r *attackRig) notInProject(t *testing.T, from, escape string) {
	t.Helper()
	filepath.WalkDir(r.project, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(attackKeyMark)) {
			t.Errorf("escape (%s): a file of %s is now in the agent's working directory: %s", escape, from, p)
		}
		return nil
	})
}

// sentLinkedOutside: the agent links .gateway/sent/<n> for every likely
// event id to a root-owned folder and leaves a file in the outbox; the
// gateway must not move it there.
func (r *attackRig) sentLinkedOutside(t *testing.T) {
	cmd := "rm -rf .gateway 2>/dev/null; mv .gateway .gateway.old2 2>/dev/null; mkdir -p .gateway/outbox .gateway/sent && " +
		"for i in $(seq 1 300); do ln -s " + r.target + " .gateway/sent/$i; done; " +
		"printf 'PRELOAD-MARK\\n' > .gateway/outbox/ld.so.preload; ls .gateway/outbox; echo end-of-sent"
	_, from := r.try(t, r.lab, r.alice, "Send the preload file.", "SENT-DONE", bash(cmd), fakeapi.Text("SENT-DONE."))
	ran(t, r.toolResults(from), "ld.so.preload\nend-of-sent")
	entries, err := os.ReadDir(r.target)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("escape (sent/<id> linked outside): the gateway put %s into a root-owned folder outside the working directory", e.Name())
	}
}

// reactionPromptFromScheduledRun: a scheduled run of #lab asks a reaction
// prompt; the approver's answer starts a turn that must keep the scheduled
// run's restrictions (no cron, no memory actions).
func (r *attackRig) reactionPromptFromScheduledRun(t *testing.T) {
	agents := filepath.Join(r.config, persona.AgentsFile)
	before := digest(agents)
	const question = "RP-ASK Deploy now?"
	r.api.Add(
		fakeapi.Text("RP-RUN-DONE\n"+block(`{"type":"reactionPrompt","question":"`+question+`","emoji":["✅","❌"]}`)),
		fakeapi.Text("RP-FOLLOWUP-DONE\n"+
			block(`{"type":"cronPause","id":"lab-check"}`)+"\n"+
			block(`{"type":"memoryRemember","text":"REACTION-ESCAPE-MARK"}`)+"\n"+
			block(`{"type":"defer","channel":"`+r.lab.String()+`","prompt":"REACTION-ESCAPE-MARK","delaySeconds":600}`)+"\n"),
	)
	after := discord.MessageID(r.fd.NewID())
	// The operator presses Run now on the dashboard.
	req, err := http.NewRequest(http.MethodPost, r.admin+"/schedule/"+dashboard.ScheduleCron+"/lab-check/run", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+attackAdminToken)
	req.Header.Set(dashboard.CSRFHeader, dashboard.CSRFValue)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusAccepted {
		t.Fatalf("Run now on lab-check = %d", resp.StatusCode)
	}
	var ask fakediscord.Message
	r.fd.Wait(t, "the reaction prompt", 120*time.Second, func() bool {
		for _, m := range r.fd.BotMessages(r.lab) {
			if m.ID > after && strings.Contains(m.Content, question) && !strings.HasPrefix(m.Content, "RP-RUN-DONE") {
				ask = m
				return true
			}
		}
		return false
	})
	// The run's own reply comes after its actions ran, the question kept.
	r.fd.Wait(t, "the scheduled run's reply", 60*time.Second, func() bool {
		for _, m := range r.fd.BotMessages(r.lab) {
			if m.ID > after && strings.HasPrefix(m.Content, "RP-RUN-DONE") {
				return true
			}
		}
		return false
	})
	r.fd.React(r.lab, ask.ID, r.bob, "✅")
	answer := r.await(t, r.lab, after, "RP-FOLLOWUP-DONE")
	noneDone(t, answer.Content, "reaction prompt sheds the scheduled run's restrictions")
	if digest(agents) != before {
		t.Errorf("escape (reaction prompt from a scheduled run): agents.md changed")
	}
	if b, _ := os.ReadFile(filepath.Join(r.config, persona.MemoryFile)); bytes.Contains(b, []byte("REACTION-ESCAPE-MARK")) {
		t.Errorf("escape (reaction prompt from a scheduled run): the answer's turn wrote memory.md")
	}
}

// outboxToConfigDir: the agent replaces .gateway/outbox with a link to
// CONFIG_DIR. Last of the attempts: where it works, the gateway's state
// moves away.
func (r *attackRig) outboxToConfigDir(t *testing.T) {
	names := func() map[string]bool {
		m := map[string]bool{}
		es, _ := os.ReadDir(r.config)
		for _, e := range es {
			m[e.Name()] = true
		}
		return m
	}
	had := names()
	r.outboxLinkedTo(t, r.config, "CONFOUT-DONE", "outbox linked to CONFIG_DIR")
	now := names()
	for name := range had {
		if !now[name] {
			t.Errorf("escape (outbox linked to CONFIG_DIR): %s was moved out of CONFIG_DIR", name)
		}
	}
}
