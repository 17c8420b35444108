//go:build chaos

// Package chaos kills the built gateway at random moments and checks that
// every prompt and webhook delivery it accepted is answered exactly once.
package chaos

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/diamondburned/arikawa/v3/discord"

	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/fakediscord"
	"github.com/agentgateway/gateway/internal/gateway"
	"github.com/agentgateway/gateway/internal/natstest"
)

// fakeClaude stands for the claude CLI: it answers "answer: <token>" for
// each token (p-… or w-…) in its prompt after a random delay, and in about
// half the runs starts a Bash tool first, so some kills land after a tool
// started. The gateway runs claude with stream-json input: the turn is the
// first line on stdin; the fake answers it and exits.
const fakeClaude = `#!/bin/sh
IFS= read -r prompt
tokens=$(printf '%s\n' "$prompt" | grep -o '[pw]-[0-9][0-9-]*' | sort -u | tr '\n' ' ')
r=$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')
printf '%s\n' '{"type":"system","subtype":"init","cwd":"/w","session_id":"chaos","tools":["Bash"],"model":"fake"}'
if [ $((r % 2)) -eq 0 ]; then
	printf '%s\n' '{"type":"assistant","session_id":"chaos","message":{"id":"m1","role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"true"}}]}}'
	printf '%s\n' '{"type":"user","session_id":"chaos","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}}'
fi
sleep "$((r % 15 / 10)).$((r % 10))"
printf '{"type":"result","subtype":"success","is_error":false,"result":"answer: %s","session_id":"chaos","total_cost_usd":0.001,"num_turns":1}\n' "$tokens"
`

const webhookSecret = "chaos-webhook-secret-0123456789"

// figures are what the test prints.
type figures struct {
	seed                                               uint64
	rounds, sigkills, sigterms                         int
	prompts, webhooks, answers, notices                int
	duplicates, lost, outOfOrder, leftover, unanswered int
}

func (f figures) String() string {
	return fmt.Sprintf("chaos: seed=%d rounds=%d sigkills=%d sigterms=%d prompts=%d webhooks=%d answers=%d notices=%d duplicates=%d lost=%d out_of_order=%d leftover_cli=%d",
		f.seed, f.rounds, f.sigkills, f.sigterms, f.prompts, f.webhooks, f.answers, f.notices, f.duplicates, f.lost, f.outOfOrder, f.leftover)
}

type prompt struct {
	channel discord.ChannelID
	id      discord.MessageID
	token   string
}

func TestChaos(t *testing.T) {
	rounds := envInt("CHAOS_KILLS", 12)
	threaded := os.Getenv("CHAOS_THREADS") == "1"
	// CHAOS_NATS=1: the inbox is on a NATS JetStream server that outlives
	// every kill (in this process, its store on disk).
	onNATS := os.Getenv("CHAOS_NATS") == "1"
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CHAOS_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	r := rand.New(rand.NewPCG(seed, 1))
	fig := figures{seed: seed, rounds: rounds}
	t.Logf("seed %d (replay with CHAOS_SEED=%d)", seed, seed)

	work := t.TempDir()
	bin := filepath.Join(work, "gateway")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/gateway").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	script := filepath.Join(work, "claude")
	if err := os.WriteFile(script, []byte(fakeClaude), 0o755); err != nil {
		t.Fatal(err)
	}

	fd := fakediscord.Start(t)
	guild, first := fd.AddGuild("chaos")
	channels := []discord.ChannelID{first}
	for i := 1; i < 4; i++ {
		channels = append(channels, fd.AddChannel(fakediscord.Channel{GuildID: guild, Name: fmt.Sprint("c", i)}))
	}
	hooks := fd.AddChannel(fakediscord.Channel{GuildID: guild, Name: "hooks"})
	alice := fd.User("alice")

	configDir := filepath.Join(work, "config")
	if err := os.MkdirAll(configDir, 0o700); err != nil {
		t.Fatal(err)
	}
	agents := "# Agents\n\n## Webhooks\n\n### chaos\nSecret-Env: WEBHOOK_CHAOS_SECRET\nChannel: " + hooks.String() + "\nInstruction: {{payload}}\n"
	if err := os.WriteFile(filepath.Join(configDir, "agents.md"), []byte(agents), 0o600); err != nil {
		t.Fatal(err)
	}
	webhookAddr := freeAddr(t)
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + filepath.Join(work, "home"),
		"CONFIG_DIR=" + configDir,
		"AGENT_BACKEND=claude",
		"AGENT_CLI_PATH=" + script,
		"ANTHROPIC_API_KEY=sk-ant-chaos",
		"PERMISSION_MODE=acceptEdits",
		"QUERY_TIMEOUT_MS=20000",
		"MAX_CHANNEL_QUEUE=100",
		"MAX_QUEUE_DEPTH=1000",
		"DISCORD_BOT_TOKEN=" + fakediscord.DefaultToken,
		"DISCORD_API_BASE_URL=" + fd.APIBaseURL(),
		"DISCORD_GATEWAY_URL=" + fd.GatewayURL(),
		"WEBHOOK_ADDR=" + webhookAddr,
		"WEBHOOK_CHAOS_SECRET=" + webhookSecret,
		"LOG_FORMAT=json",
		// CHAOS_THREADS=1: each prompt opens a thread and is answered
		// there; otherwise answers come in the channels, where their
		// order is checked.
		"THREADS=" + map[bool]string{true: "auto", false: "off"}[threaded],
	}
	if onNATS {
		env = append(env, "NATS_URL="+natsServer(t), "NATS_PARTITIONS=8")
	}
	owner := gateway.Owner(&config.Config{ConfigDir: configDir})

	var (
		mu        sync.Mutex
		prompts   []prompt
		accepted  = map[string]bool{} // webhook tokens with a 202
		pending   []string            // webhook tokens still to send
		nextP     = map[discord.ChannelID]int{}
		nextHook  int
		lastLogs  string
		logsMu    sync.Mutex
		gatewayUp bool
	)
	pick := rand.New(rand.NewPCG(seed, 99))
	post := func() {
		mu.Lock()
		defer mu.Unlock()
		i := pick.IntN(len(channels))
		ch := channels[i]
		nextP[ch]++
		token := fmt.Sprintf("p-%d-%d", i, nextP[ch])
		m := fd.Post(ch, alice, fakediscord.Mention(fd.Bot)+" "+token, fd.Bot)
		prompts = append(prompts, prompt{channel: ch, id: m.ID, token: token})
	}
	sendHooks := func() {
		mu.Lock()
		todo := append([]string(nil), pending...)
		mu.Unlock()
		for _, token := range todo {
			if sendWebhook(webhookAddr, token) {
				mu.Lock()
				accepted[token] = true
				pending = slicesDelete(pending, token)
				mu.Unlock()
			}
		}
	}

	start := func() (*exec.Cmd, *bytes.Buffer) {
		var logs bytes.Buffer
		cmd := exec.Command(bin, "run")
		cmd.Dir = work
		cmd.Env = env
		cmd.Stdout, cmd.Stderr = &syncWriter{w: &logs, mu: &logsMu}, &syncWriter{w: &logs, mu: &logsMu}
		cmd.WaitDelay = 5 * time.Second
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		_, _, before := fd.Counts()
		deadline := time.Now().Add(30 * time.Second)
		for {
			if _, _, now := fd.Counts(); now > before && fd.Connected() {
				break
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatalf("the gateway did not connect\n%s", tail(&logs, &logsMu))
			}
			time.Sleep(10 * time.Millisecond)
		}
		return cmd, &logs
	}

	for round := 0; round < rounds; round++ {
		cmd, logs := start()
		mu.Lock()
		gatewayUp = true
		nextHook++
		pending = append(pending, fmt.Sprintf("w-%d", nextHook))
		mu.Unlock()
		stop := make(chan struct{})
		posted := make(chan struct{})
		delays := rand.New(rand.NewPCG(seed, uint64(round)+2))
		go func() {
			defer close(posted)
			for {
				select {
				case <-stop:
					return
				case <-time.After(time.Duration(150+delays.IntN(450)) * time.Millisecond):
					post()
				}
			}
		}()
		sendHooks()
		time.Sleep(time.Duration(300+r.IntN(2700)) * time.Millisecond)
		if r.IntN(5) == 0 {
			fig.sigterms++
			cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("round %d: gateway exited with %v after SIGTERM, want 0\n%s", round, err, tail(logs, &logsMu))
				}
			case <-time.After(120 * time.Second):
				cmd.Process.Kill()
				<-done
				t.Errorf("round %d: the gateway did not stop within 120 s of SIGTERM (its drain is bounded by QUERY_TIMEOUT_MS + 30 s)", round)
			}
		} else {
			fig.sigkills++
			cmd.Process.Kill()
			cmd.Wait()
		}
		mu.Lock()
		gatewayUp = false
		mu.Unlock()
		// Sometimes prompts keep coming while it is down.
		if r.IntN(2) == 0 {
			time.Sleep(time.Duration(100+r.IntN(400)) * time.Millisecond)
		}
		close(stop)
		<-posted
		lastLogs = tail(logs, &logsMu)
		keepLog(round, logs, &logsMu)
	}
	_ = gatewayUp

	// The last start: everything accepted must be answered. A slow machine
	// may take a while with a backlog: give up only when nothing moved for
	// a minute.
	cmd, logs := start()
	sendHooks()
	progress, before := time.Now(), -1
	for {
		mu.Lock()
		o := outcomes(fd, channels, hooks, prompts, accepted)
		left := len(pending)
		mu.Unlock()
		if o.unanswered == 0 && left == 0 {
			break
		}
		if o.unanswered != before {
			progress, before = time.Now(), o.unanswered
		}
		if time.Since(progress) > time.Minute {
			t.Errorf("%d prompts or deliveries still without an outcome, none answered in the last minute (%d webhooks never accepted)", o.unanswered, left)
			break
		}
		if left > 0 {
			sendHooks()
		}
		time.Sleep(100 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Errorf("the last gateway exited with %v", err)
	}
	lastLogs = tail(logs, &logsMu)
	keepLog(rounds, logs, &logsMu)

	mu.Lock()
	o := outcomes(fd, channels, hooks, prompts, accepted)
	fig.prompts, fig.webhooks = len(prompts), len(accepted)
	mu.Unlock()
	fig.answers, fig.notices, fig.duplicates, fig.lost, fig.outOfOrder = o.answers, o.notices, o.duplicates, o.lost, o.outOfOrder
	fig.leftover = leftovers(owner)
	if _, err := os.Stat(filepath.Join(configDir, gateway.InboxFile)); onNATS && err == nil {
		t.Errorf("with NATS_URL the gateway wrote %s: the events were not kept in JetStream", gateway.InboxFile)
	}
	fmt.Println(fig)
	t.Log(fig)
	if fig.duplicates+fig.lost+fig.outOfOrder+fig.leftover > 0 {
		for _, d := range o.details {
			t.Log(d)
		}
		t.Errorf("%s\nlast gateway's log:\n%s", fig, lastLogs)
	}
}

type result struct {
	answers, notices, duplicates, lost, outOfOrder, unanswered int
	details                                                    []string
}

var tokenRe = regexp.MustCompile(`[pw]-[0-9][0-9-]*`)

// outcomes reads every channel and sorts out what became of each prompt
// and accepted webhook delivery.
func outcomes(fd *fakediscord.Server, channels []discord.ChannelID, hooks discord.ChannelID, prompts []prompt, accepted map[string]bool) result {
	var o result
	answersOf := map[string][]discord.MessageID{}
	noticesOf := map[discord.MessageID]int{}
	inThreads := map[string]bool{} // answers posted in a thread
	scan := append(append([]discord.ChannelID(nil), channels...), hooks)
	for _, ch := range channels {
		for _, th := range fd.Threads(ch) {
			scan = append(scan, th.ID)
		}
	}
	for _, ch := range scan {
		for _, m := range fd.BotMessages(ch) {
			if strings.HasPrefix(m.Content, "answer: ") {
				for _, tok := range tokenRe.FindAllString(m.Content, -1) {
					answersOf[tok] = append(answersOf[tok], m.ID)
					inThreads[tok] = inThreads[tok] || !slices.Contains(channels, ch) && ch != hooks
				}
				continue
			}
			if m.Reference != nil {
				noticesOf[m.Reference.MessageID]++
			}
		}
	}
	lastAnswer := map[discord.ChannelID]discord.MessageID{}
	for _, p := range prompts {
		as := answersOf[p.token]
		switch {
		case len(as) == 1:
			o.answers++
			if inThreads[p.token] {
				// Each thread is a lane of its own: no order across them.
				break
			}
			if as[0] < lastAnswer[p.channel] {
				o.outOfOrder++
				o.details = append(o.details, fmt.Sprintf("%s answered out of order", p.token))
			}
			lastAnswer[p.channel] = max(lastAnswer[p.channel], as[0])
		case len(as) > 1:
			o.duplicates++
			o.details = append(o.details, fmt.Sprintf("%s answered %d times", p.token, len(as)))
		case noticesOf[p.id] > 0 && !restartOnly(fd, p):
			o.notices++
		default:
			o.unanswered++
			o.lost++
			o.details = append(o.details, fmt.Sprintf("%s has no answer", p.token))
		}
	}
	// A webhook run has no prompt to answer: a notice about it names the
	// webhook in its channel, so notices are matched by count.
	hookNotices := 0
	for _, m := range fd.BotMessages(hooks) {
		if strings.HasPrefix(m.Content, "The webhook `chaos`") {
			hookNotices++
		}
	}
	for tok := range accepted {
		switch n := len(answersOf[tok]); {
		case n == 1:
			o.answers++
		case n > 1:
			o.duplicates++
			o.details = append(o.details, fmt.Sprintf("webhook %s answered %d times", tok, n))
		case hookNotices > 0:
			hookNotices--
			o.notices++
		default:
			o.unanswered++
			o.lost++
			o.details = append(o.details, fmt.Sprintf("webhook %s has no answer", tok))
		}
	}
	return o
}

// natsServer starts a JetStream server for the whole test, its store in a
// temporary folder, and returns its URL.
func natsServer(t *testing.T) string { return natstest.Start(t, t.TempDir()).ClientURL() }

// restartOnly reports whether the only notices on p say the gateway is
// restarting: the prompt is still to be answered.
func restartOnly(fd *fakediscord.Server, p prompt) bool {
	for _, m := range fd.BotMessages(p.channel) {
		if m.Reference != nil && m.Reference.MessageID == p.id && !strings.Contains(m.Content, "is restarting") {
			return false
		}
	}
	return true
}

// leftovers counts live processes that carry the gateway's owner mark.
func leftovers(owner string) int {
	mark := []byte("GATEWAY_OWNER_" + owner + "=1\x00")
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	n := 0
	for _, d := range dirs {
		env, err := os.ReadFile(filepath.Join(d, "environ"))
		if err != nil || !bytes.Contains(env, mark) {
			continue
		}
		if st, err := os.ReadFile(filepath.Join(d, "stat")); err == nil && bytes.Contains(st, []byte(") Z ")) {
			continue
		}
		n++
		pid, _ := strconv.Atoi(filepath.Base(d))
		syscall.Kill(pid, syscall.SIGKILL)
	}
	return n
}

func sendWebhook(addr, token string) bool {
	body := `{"token":"` + token + `"}`
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/hooks/chaos", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+webhookSecret)
	req.Header.Set("X-Delivery-Id", token)
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusAccepted
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

func slicesDelete(s []string, v string) []string {
	out := s[:0]
	for _, x := range s {
		if x != v {
			out = append(out, x)
		}
	}
	return out
}

type syncWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// tail returns the last 200 lines of a gateway's log.
func tail(b *bytes.Buffer, mu *sync.Mutex) string {
	mu.Lock()
	defer mu.Unlock()
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(b.Bytes()))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > 200 {
		lines = lines[len(lines)-200:]
	}
	return strings.Join(lines, "\n")
}

// keepLog writes a round's log to CHAOS_LOGDIR, when set, for debugging.
func keepLog(round int, b *bytes.Buffer, mu *sync.Mutex) {
	dir := os.Getenv("CHAOS_LOGDIR")
	if dir == "" {
		return
	}
	mu.Lock()
	defer mu.Unlock()
	os.WriteFile(filepath.Join(dir, fmt.Sprintf("round-%02d.log", round)), b.Bytes(), 0o600)
}
