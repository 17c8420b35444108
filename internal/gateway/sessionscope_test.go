package gateway

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/diamondburned/arikawa/v3/discord"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/config"
	gwdiscord "github.com/agentgateway/gateway/internal/discord"
	"github.com/agentgateway/gateway/internal/fakediscord"
)

// sessionsClaude stands in for claude -p, driven through the real claude
// adapter. Every run is numbered (@LOG@/count) and leaves its prompt
// (stdin) and arguments in @LOG@/prompt.N and args.N. A run given
// --resume ID continues session ID; any other starts session s-N. Run 1
// waits for @LOG@/go to exist, so that the prompts after it queue.
const sessionsClaude = `#!/bin/sh
log=@LOG@
n=$(( $(cat "$log/count" 2>/dev/null || echo 0) + 1 ))
echo "$n" > "$log/count"
cat > "$log/prompt.$n"
printf '%s\n' "$@" > "$log/args.$n"
if [ "$n" = 1 ]; then
	while [ ! -e "$log/go" ]; do sleep 0.01; done
fi
id="s-$n"
prev=""
for a in "$@"; do
	if [ "$prev" = "--resume" ]; then id="$a"; fi
	prev="$a"
done
printf '{"type":"system","subtype":"init","cwd":"/w","session_id":"%s","tools":[],"model":"fake"}\n' "$id"
printf '{"type":"result","subtype":"success","is_error":false,"result":"Answer %d.","session_id":"%s","total_cost_usd":0.01,"num_turns":1}\n' "$n" "$id"
`

// sessionsCLI is sessionsClaude written to disk, with its traces.
type sessionsCLI struct {
	t           *testing.T
	script, log string
}

func newSessionsCLI(t *testing.T) *sessionsCLI {
	t.Helper()
	dir := t.TempDir()
	c := &sessionsCLI{t: t, script: filepath.Join(dir, "claude"), log: filepath.Join(dir, "log")}
	if err := os.Mkdir(c.log, 0o755); err != nil {
		t.Fatal(err)
	}
	body := strings.ReplaceAll(sessionsClaude, "@LOG@", strconv.Quote(c.log))
	if err := os.WriteFile(c.script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *sessionsCLI) backend() backends.Backend {
	c.t.Helper()
	b, err := backends.New(config.BackendClaude, backends.Options{Binary: c.script, Env: os.Environ(), KillGrace: 2 * time.Second})
	if err != nil {
		c.t.Fatal(err)
	}
	return b
}

// release lets run 1 finish.
func (c *sessionsCLI) release() {
	c.t.Helper()
	if err := os.WriteFile(filepath.Join(c.log, "go"), nil, 0o644); err != nil {
		c.t.Fatal(err)
	}
}

// run is run n's prompt and the session it resumed ("" for a new one).
func (c *sessionsCLI) run(n int) (prompt, resumed string) {
	c.t.Helper()
	data, err := os.ReadFile(filepath.Join(c.log, "prompt."+strconv.Itoa(n)))
	if err != nil {
		c.t.Fatal(err)
	}
	args := strings.Fields(readTrace(c.t, c.log, "args."+strconv.Itoa(n)))
	for i, a := range args {
		if a == "--resume" && i+1 < len(args) {
			resumed = args[i+1]
		}
	}
	return strings.TrimSpace(string(data)), resumed
}

// With SESSION_SCOPE=user two people in one channel each continue their
// own session: the CLI resumes a different session for each, the
// channel's own binding is never made, and their turns still run one at
// a time in the order they were asked (one lane: the later prompts wait
// with ⏳ behind the first). /claude-reset resets only its user's.
func TestUserSessionScopeGivesEachPersonTheirOwnSession(t *testing.T) {
	cli := newSessionsCLI(t)
	var bob discord.User
	h, _ := startScriptGateway(t, cli.backend(), harnessOptions{
		env: map[string]string{config.EnvSessionScope: config.SessionScopeUser},
		setup: func(h *harness) map[string]string {
			bob = h.fd.User("bob")
			return nil
		},
	})
	alice := h.user
	ask := func(u discord.User, text string) discord.Message {
		return h.fd.Post(h.channel, u, fakediscord.Mention(h.fd.Bot)+" "+text, h.fd.Bot)
	}

	a1 := ask(alice, "alice one")
	h.fd.Wait(t, "run 1 started", waitLong, func() bool { return fileExists(filepath.Join(cli.log, "args.1")) })
	waiting := []discord.Message{ask(bob, "bob one"), ask(alice, "alice two"), ask(bob, "bob two")}
	for _, m := range waiting {
		h.fd.Wait(t, "⏳ on "+m.Content, waitLong, func() bool { return len(h.fd.Reactions(h.channel, m.ID)[waitingMark]) > 0 })
	}
	cli.release()
	h.waitAnswer(h.channel, a1.ID)
	for _, m := range waiting {
		h.waitAnswer(h.channel, m.ID)
	}

	want := []struct{ prompt, resumed string }{
		{"alice one", ""},
		{"bob one", ""},
		{"alice two", "s-1"},
		{"bob two", "s-2"},
	}
	for i, w := range want {
		prompt, resumed := cli.run(i + 1)
		if prompt != w.prompt || resumed != w.resumed {
			t.Errorf("run %d: prompt %q resuming %q, want %q resuming %q", i+1, prompt, resumed, w.prompt, w.resumed)
		}
	}
	store := h.sessions()
	aliceKey := gwdiscord.UserSessionKey(h.channel.String(), alice.ID.String())
	bobKey := gwdiscord.UserSessionKey(h.channel.String(), bob.ID.String())
	if b, _ := store.Get(aliceKey); b.SessionID != "s-1" {
		t.Errorf("alice's binding = %q, want s-1", b.SessionID)
	}
	if b, _ := store.Get(bobKey); b.SessionID != "s-2" {
		t.Errorf("bob's binding = %q, want s-2", b.SessionID)
	}
	if b, ok := store.Get(h.channel.String()); ok {
		t.Errorf("the channel has a binding of its own (%q); each person's are apart", b.SessionID)
	}
	// /status shows each person their own session.
	for u, id := range map[discord.User]string{alice: "s-1", bob: "s-2"} {
		st := h.answer(h.fd.Interact(h.channel, u, "status", nil))
		if !strings.Contains(st, "Your session here: `"+id+"`") {
			t.Errorf("/status for %s = %q, want their session %s", u.Username, st, id)
		}
	}

	// Alice resets her conversation; Bob's goes on.
	reset := h.fd.Interact(h.channel, alice, "claude-reset", nil)
	if got := h.answer(reset); !strings.Contains(got, "new conversation for you") {
		t.Errorf("/claude-reset answered %q", got)
	}
	a3, b3 := ask(alice, "alice three"), ask(bob, "bob three")
	h.waitAnswer(h.channel, a3.ID)
	h.waitAnswer(h.channel, b3.ID)
	if prompt, resumed := cli.run(5); prompt != "alice three" || resumed != "" {
		t.Errorf("run 5: prompt %q resuming %q, want alice's prompt in a fresh session", prompt, resumed)
	}
	if prompt, resumed := cli.run(6); prompt != "bob three" || resumed != "s-2" {
		t.Errorf("run 6: prompt %q resuming %q, want bob's prompt resuming s-2", prompt, resumed)
	}
}

// With the default SESSION_SCOPE=channel, the channel's people share one
// session.
func TestChannelSessionScopeIsShared(t *testing.T) {
	cli := newSessionsCLI(t)
	cli.release()
	var bob discord.User
	h, _ := startScriptGateway(t, cli.backend(), harnessOptions{setup: func(h *harness) map[string]string {
		bob = h.fd.User("bob")
		return nil
	}})
	a := h.mention(h.channel, "alice asks")
	h.waitAnswer(h.channel, a.ID)
	b := h.fd.Post(h.channel, bob, fakediscord.Mention(h.fd.Bot)+" bob asks", h.fd.Bot)
	h.waitAnswer(h.channel, b.ID)
	if prompt, resumed := cli.run(2); prompt != "bob asks" || resumed != "s-1" {
		t.Errorf("run 2: prompt %q resuming %q, want bob continuing the channel's session s-1", prompt, resumed)
	}
}

// startScriptGateway starts the gateway on backend (a scripted CLI),
// with WORK_DIR a folder of its own, and logs on failure.
func startScriptGateway(t *testing.T, backend backends.Backend, o harnessOptions) (*harness, string) {
	t.Helper()
	work, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	o.env = withEnv(o.env, config.EnvWorkDir, work)
	o.backend = backend
	h := startGateway(t, o)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs:\n%s", h.logs.String())
		}
	})
	return h, work
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// With THREADS=auto and SESSION_SCOPE=user a prompt's thread holds its
// author's session, and another person writing in the thread has their
// own there. A /claude prompt, whose thread opens only when its turn
// comes, binds its session in that thread too.
func TestUserSessionScopeInThreads(t *testing.T) {
	h := threadHarness(t, map[string]string{config.EnvSessionScope: config.SessionScopeUser})
	bob := h.fd.User("bob")
	alice := h.user
	requests := func(n int) []backends.Request {
		h.backendCalls(n)
		return h.backend.Requests()
	}

	first := h.mention(h.channel, "Fix the login bug")
	th := h.waitThread(first)
	h.waitReplies(th.ID, 1)
	aliceKey := gwdiscord.UserSessionKey(th.ID.String(), alice.ID.String())
	aliceSession, _ := h.sessions().Get(aliceKey)
	if aliceSession.SessionID == "" {
		t.Fatalf("no session of alice's in the thread (key %s)", aliceKey)
	}

	h.fd.Post(th.ID, bob, "bob chimes in")
	h.waitReplies(th.ID, 2)
	h.fd.Post(th.ID, alice, "and add a test")
	h.waitReplies(th.ID, 3)
	reqs := requests(3)
	if got := reqs[1].SessionID; got != "" {
		t.Errorf("bob's first prompt in the thread resumed %q, want a session of his own", got)
	}
	if got := reqs[2].SessionID; got != aliceSession.SessionID {
		t.Errorf("alice's second prompt resumed %q, want her session %q", got, aliceSession.SessionID)
	}

	id := h.fd.Interact(h.channel, alice, "claude", map[string]string{"prompt": "Plan the release"})
	var th2 discord.ChannelID
	h.fd.Wait(t, "the /claude prompt's thread", waitLong, func() bool {
		for _, a := range h.fd.Answers() {
			if a.Interaction == id && a.Original {
				th2 = discord.ChannelID(a.ID)
			}
		}
		opened := slices.ContainsFunc(h.fd.Threads(h.channel), func(c discord.Channel) bool { return c.ID == th2 })
		return opened && len(h.fd.BotMessages(th2)) == 1
	})
	slashKey := gwdiscord.UserSessionKey(th2.String(), alice.ID.String())
	slashSession, ok := h.sessions().Get(slashKey)
	if !ok {
		t.Fatalf("the /claude prompt's session is not alice's in its thread (key %s)", slashKey)
	}
	h.fd.Post(th2, alice, "with notes")
	h.waitReplies(th2, 2)
	if got := requests(5)[4].SessionID; got != slashSession.SessionID {
		t.Errorf("alice's follow-up in the /claude thread resumed %q, want %q", got, slashSession.SessionID)
	}
}
