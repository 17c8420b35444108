//go:build chaos

package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/fakediscord"
	"github.com/agentgateway/gateway/internal/gateway"
)

// clusterClaude is fakeClaude for a gateway spread over several
// processes. Besides answering each token it says which session it ran
// (sid), which one it was asked to resume (resumed, "-" for none), on
// which process (host, the name of its HOME) and what the session's
// transcript held before this turn (prev: the tokens of its last turn with
// "-" made "_", "new" for a fresh session, "missing" when the worker had no
// transcript to resume). It keeps the transcript where claude does,
// ~/.claude/projects/<escaped cwd>/<session>.jsonl, so the gateway carries
// it between workers as it would claude's.
const clusterClaude = `#!/bin/sh
IFS= read -r prompt
resumed=-
while [ $# -gt 0 ]; do
	if [ "$1" = "--resume" ]; then resumed=$2; shift; fi
	shift
done
tokens=$(printf '%s\n' "$prompt" | grep -o '[pw]-[0-9][0-9-]*' | sort -u | tr '\n' ' ')
r=$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')
dir="$HOME/.claude/projects/$(pwd | sed 's/[^A-Za-z0-9]/-/g')"
if [ "$resumed" = - ]; then
	sid="s$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"
	prev=new
else
	sid=$resumed
	if [ -s "$dir/$sid.jsonl" ]; then
		prev=$(tail -n 1 "$dir/$sid.jsonl" | sed 's/.*"tokens":"\([^"]*\)".*/\1/' | tr -d ' ' | tr - _)
	else
		prev=missing
	fi
fi
printf '{"type":"system","subtype":"init","cwd":"/w","session_id":"%s","tools":["Bash"],"model":"fake"}\n' "$sid"
if [ $((r % 2)) -eq 0 ]; then
	printf '{"type":"assistant","session_id":"%s","message":{"id":"m1","role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"true"}}]}}\n' "$sid"
	printf '{"type":"user","session_id":"%s","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}}\n' "$sid"
fi
sleep "$((r % 15 / 10)).$((r % 10))"
mkdir -p "$dir"
printf '{"type":"user","tokens":"%s"}\n' "$tokens" >> "$dir/$sid.jsonl"
printf '{"type":"result","subtype":"success","is_error":false,"result":"answer: %s[sid=%s resumed=%s host=%s prev=%s]","session_id":"%s","total_cost_usd":0.001,"num_turns":1}\n' "$tokens" "$sid" "$resumed" "${HOME##*/}" "$prev" "$sid"
`

// answerRe reads what clusterClaude answered.
var answerRe = regexp.MustCompile(`^answer: (.*)\[sid=(\S+) resumed=(\S+) host=(\S+) prev=(\S+)\]$`)

// clusterFigures are what TestChaosCluster prints.
type clusterFigures struct {
	seed                                       uint64
	kills                                      map[string]int
	unexpectedExits                            int
	prompts, accepted, refused, webhooks       int
	answers, notices, duplicates, lost, outOf  int
	refusedAnswered, hourglassLeft, leftover   int
	resumes, movedResumes, movedWithTranscript int
	missingTranscript, behindTranscript        int
	failovers                                  []time.Duration
	cutNotRun                                  int
}

func (f clusterFigures) String() string {
	fo := "none"
	if n := len(f.failovers); n > 0 {
		s := slices.Clone(f.failovers)
		slices.Sort(s)
		fo = fmt.Sprintf("n=%d min=%.1fs p50=%.1fs max=%.1fs", n, s[0].Seconds(), s[n/2].Seconds(), s[n-1].Seconds())
	}
	return fmt.Sprintf("chaos-cluster: seed=%d kills(worker=%d run=%d nats=%d) unexpected_exits=%d prompts=%d accepted=%d refused=%d webhooks=%d "+
		"answers=%d notices=%d duplicates=%d lost=%d out_of_order=%d refused_yet_answered=%d hourglass_left=%d leftover_cli=%d "+
		"resumes=%d resumed_on_another_worker=%d of_them_with_transcript=%d transcript_missing=%d transcript_behind=%d failover(%s) cut_not_run_again=%d",
		f.seed, f.kills["worker"], f.kills["run"], f.kills["nats"], f.unexpectedExits, f.prompts, f.accepted, f.refused, f.webhooks,
		f.answers, f.notices, f.duplicates, f.lost, f.outOf, f.refusedAnswered, f.hourglassLeft, f.leftover,
		f.resumes, f.movedResumes, f.movedWithTranscript, f.missingTranscript, f.behindTranscript, fo, f.cutNotRun)
}

// TestChaosCluster runs a gateway spread over processes, as on several
// machines: a real nats-server (JetStream, sync_interval always), one
// `gateway run` and two `gateway worker`s, each with its own CONFIG_DIR
// and HOME, against the fake Discord. It kill -9s the workers, the run
// node and the NATS server at random moments, each on its own cadence, and
// restarts them; then every prompt and webhook delivery the gateway took
// must have exactly one answer or one notice, in channel order, no agent
// process may be left, and a conversation continued on another worker
// must have resumed its session with its transcript.
func TestChaosCluster(t *testing.T) {
	budget := envInt("CHAOS_KILLS", 12)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CHAOS_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	// The run node also runs turns, one at a time, so that a kill of the
	// node holding the Discord connection also cuts a turn and the
	// conversations move among three processes; CHAOS_RUN_TURNS=0 makes
	// it intake only.
	runSlots := "1"
	if os.Getenv("CHAOS_RUN_TURNS") == "0" {
		runSlots = "0"
	}
	r := rand.New(rand.NewPCG(seed, 1))
	fig := clusterFigures{seed: seed, kills: map[string]int{}}
	t.Logf("seed %d (replay the schedule with CHAOS_SEED=%d)", seed, seed)

	work := t.TempDir()
	bin := filepath.Join(work, "gateway")
	natsBin := filepath.Join(work, "nats-server")
	for _, b := range [][]string{{bin, "../../cmd/gateway"}, {natsBin, "github.com/nats-io/nats-server/v2"}} {
		if out, err := exec.Command("go", "build", "-o", b[0], b[1]).CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", b[1], err, out)
		}
	}
	script := filepath.Join(work, "claude")
	if err := os.WriteFile(script, []byte(clusterClaude), 0o755); err != nil {
		t.Fatal(err)
	}
	project := filepath.Join(work, "project")
	if err := os.MkdirAll(project, 0o755); err != nil {
		t.Fatal(err)
	}

	natsAddr := freeAddr(t)
	ns := newNATSProc(t, natsBin, natsAddr, filepath.Join(work, "nats"))

	fd := fakediscord.Start(t)
	guild, first := fd.AddGuild("chaos")
	channels := []discord.ChannelID{first}
	for i := 1; i < 6; i++ {
		channels = append(channels, fd.AddChannel(fakediscord.Channel{GuildID: guild, Name: fmt.Sprint("c", i)}))
	}
	hooks := fd.AddChannel(fakediscord.Channel{GuildID: guild, Name: "hooks"})
	alice := fd.User("alice")

	webhookAddr := freeAddr(t)
	base := []string{
		"PATH=" + os.Getenv("PATH"),
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
		"THREADS=off",
		// No turn cards: a notice is then any reply to a prompt that is
		// not its answer.
		"TURN_CARD=off",
		// Every process runs the CLI in the same folder, as workers that
		// share PROJECTS_ROOT do, so a session's transcript has one place.
		"WORK_DIR=" + project,
		"NATS_URL=nats://" + natsAddr,
		"NATS_PARTITIONS=16",
		"NATS_ACK_WAIT=3s",
	}
	var owners []string
	node := func(name, role string, extra ...string) *gwProc {
		configDir := filepath.Join(work, "config-"+name)
		if err := os.MkdirAll(configDir, 0o700); err != nil {
			t.Fatal(err)
		}
		owners = append(owners, gateway.Owner(&config.Config{ConfigDir: configDir}))
		home := filepath.Join(work, "home-"+name)
		if err := os.MkdirAll(home, 0o700); err != nil {
			t.Fatal(err)
		}
		env := append(slices.Clone(base), "CONFIG_DIR="+configDir, "HOME="+home)
		return &gwProc{name: name, argv: []string{bin, role}, env: append(env, extra...), dir: work}
	}
	run := node("run", "run", "MAX_CONCURRENT_QUERIES="+runSlots)
	agents := "# Agents\n\n## Webhooks\n\n### chaos\nSecret-Env: WEBHOOK_CHAOS_SECRET\nChannel: " + hooks.String() + "\nInstruction: {{payload}}\n"
	if err := os.WriteFile(filepath.Join(work, "config-run", "agents.md"), []byte(agents), 0o600); err != nil {
		t.Fatal(err)
	}
	wa, wb := node("wa", "worker"), node("wb", "worker")
	gws := []*gwProc{run, wa, wb}
	defer func() {
		for _, g := range gws {
			g.kill()
		}
		ns.kill()
		for _, g := range gws {
			g.keep(t)
		}
		keepDiscord(t, fd, append(slices.Clone(channels), hooks))
	}()

	// Everything up before the first prompt.
	ns.start()
	if err := ns.waitReady(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	run.start()
	if err := waitFor(30*time.Second, fd.Connected); err != nil {
		t.Fatalf("the run node did not connect to Discord\n%s", run.tail())
	}
	for _, g := range gws[1:] {
		g.start()
	}
	for _, g := range gws {
		if err := waitFor(60*time.Second, g.running); err != nil {
			t.Fatalf("%s did not start\n%s", g.name, g.tail())
		}
	}

	var (
		mu       sync.Mutex // guards prompts, accepted, pending
		prompts  []prompt
		accepted = map[string]bool{}
		pending  []string
	)
	stopPosting := make(chan struct{})
	var posters sync.WaitGroup
	posters.Add(2)
	go func() {
		defer posters.Done()
		pick := rand.New(rand.NewPCG(seed, 99))
		next := map[int]int{}
		for {
			select {
			case <-stopPosting:
				return
			case <-time.After(time.Duration(150+pick.IntN(450)) * time.Millisecond):
			}
			i := pick.IntN(len(channels))
			next[i]++
			token := fmt.Sprintf("p-%d-%d", i, next[i])
			m := fd.Post(channels[i], alice, fakediscord.Mention(fd.Bot)+" "+token, fd.Bot)
			mu.Lock()
			prompts = append(prompts, prompt{channel: channels[i], id: m.ID, token: token})
			mu.Unlock()
		}
	}()
	sendHooks := func() {
		mu.Lock()
		todo := slices.Clone(pending)
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
	go func() {
		defer posters.Done()
		pick := rand.New(rand.NewPCG(seed, 98))
		n := 0
		for {
			select {
			case <-stopPosting:
				return
			case <-time.After(time.Duration(1000+pick.IntN(2000)) * time.Millisecond):
			}
			n++
			mu.Lock()
			pending = append(pending, fmt.Sprintf("w-%d", n))
			mu.Unlock()
			sendHooks()
		}
	}()

	// The kills: each victim on its own cadence (the time from its
	// restart to its next kill) and downtime. Killing the run node or NATS
	// less often than a worker keeps the gateway taking prompts most of
	// the time.
	type victim struct {
		kind      string
		p         killable
		every     [2]int // ms
		down      [2]int // ms
		nextKill  time.Time
		restartAt time.Time // zero while up
		killedAt  time.Time
	}
	between := func(b [2]int) time.Duration { return time.Duration(b[0]+r.IntN(b[1]-b[0])) * time.Millisecond }
	now := time.Now()
	victims := []*victim{
		{kind: "worker", p: wa, every: [2]int{2000, 8000}, down: [2]int{200, 3000}},
		{kind: "worker", p: wb, every: [2]int{2000, 8000}, down: [2]int{200, 3000}},
		{kind: "run", p: run, every: [2]int{4000, 14000}, down: [2]int{200, 2000}},
		{kind: "nats", p: ns, every: [2]int{6000, 20000}, down: [2]int{500, 4000}},
	}
	for _, v := range victims {
		v.nextKill = now.Add(between(v.every))
	}
	var killLog []killRecord
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	kills := 0
	for kills < budget {
		<-tick.C
		now := time.Now()
		for _, v := range victims {
			if !v.restartAt.IsZero() && now.After(v.restartAt) {
				if v.kind != "nats" && !ns.isUp() {
					continue // a gateway cannot start without NATS: systemd would retry
				}
				v.p.start()
				v.restartAt = time.Time{}
				v.nextKill = now.Add(between(v.every))
			}
		}
		for _, g := range gws {
			if g.exitedAlone() {
				// It stopped on its own (NATS gone during its start): start it again.
				for _, v := range victims {
					if v.p == g && v.restartAt.IsZero() {
						v.restartAt = now.Add(500 * time.Millisecond)
					}
				}
			}
		}
		for _, v := range victims {
			if !v.restartAt.IsZero() || now.Before(v.nextKill) {
				continue
			}
			// Keep the last kills for kinds not killed yet, so a short
			// run still kills each kind once.
			unkilled := 0
			for _, k := range []string{"worker", "run", "nats"} {
				if fig.kills[k] == 0 {
					unkilled++
				}
			}
			if fig.kills[v.kind] > 0 && budget-kills <= unkilled {
				v.nextKill = now.Add(between(v.every))
				continue
			}
			v.p.kill()
			kills++
			fig.kills[v.kind]++
			killLog = append(killLog, killRecord{name: v.p.label(), at: now})
			v.restartAt = now.Add(between(v.down))
			break
		}
	}
	close(stopPosting)
	posters.Wait()
	if dir := os.Getenv("CHAOS_LOGDIR"); dir != "" {
		var b strings.Builder
		for _, k := range killLog {
			fmt.Fprintf(&b, "%s kill -9 %s\n", k.at.Format("15:04:05.000"), k.name)
		}
		os.WriteFile(filepath.Join(dir, "cluster-kills.log"), []byte(b.String()), 0o600)
	}

	// Everything up again, then wait until the stream is drained and
	// every prompt has its outcome; give up only when nothing moved for a
	// minute.
	for _, v := range victims {
		if !v.restartAt.IsZero() && v.kind == "nats" {
			ns.start()
			v.restartAt = time.Time{}
		}
	}
	if err := ns.waitReady(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	for _, g := range gws {
		err := waitFor(60*time.Second, func() bool {
			if !g.isUp() {
				g.start() // killed last, or stopped on its own while NATS was away
			}
			return g.running()
		})
		if err != nil {
			t.Fatalf("%s did not start after the kills\n%s", g.name, g.tail())
		}
	}
	sendHooks()
	progress, before := time.Now(), -1
	for {
		mu.Lock()
		o := clusterOutcomes(fd, channels, hooks, prompts, accepted)
		left := len(pending)
		mu.Unlock()
		busy := ns.busy()
		if o.unanswered == 0 && left == 0 && busy == 0 {
			break
		}
		if o.unanswered+busy != before {
			progress, before = time.Now(), o.unanswered+busy
		}
		if time.Since(progress) > time.Minute {
			t.Errorf("%d prompts or deliveries still without an outcome and %d events in the stream, nothing moved for a minute (%d webhooks never accepted)", o.unanswered, busy, left)
			for _, d := range o.details {
				t.Log(d)
			}
			break
		}
		if left > 0 {
			sendHooks()
		}
		<-tick.C
	}
	// Then they all stop as an operator stops them.
	for _, g := range gws {
		if err := g.stop(90 * time.Second); err != nil {
			t.Errorf("%s: %v\n%s", g.name, err, g.tail())
		}
	}
	for _, owner := range owners {
		fig.leftover += leftovers(owner)
	}

	mu.Lock()
	o := clusterOutcomes(fd, channels, hooks, prompts, accepted)
	fig.prompts, fig.webhooks = len(prompts), len(accepted)
	mu.Unlock()
	fig.accepted, fig.refused, fig.answers, fig.notices = o.accepted, o.refused, o.answers, o.notices
	fig.duplicates, fig.lost, fig.outOf, fig.refusedAnswered = o.duplicates, o.lost, o.outOfOrder, o.refusedAnswered
	fig.hourglassLeft = o.hourglassLeft
	fig.resumes, fig.movedResumes, fig.movedWithTranscript = o.resumes, o.moved, o.movedWithTranscript
	fig.missingTranscript, fig.behindTranscript = o.missingTranscript, o.behindTranscript
	for _, g := range gws {
		fig.unexpectedExits += g.unexpected
	}
	fig.failovers, fig.cutNotRun = failovers(killLog, gws)

	fmt.Println(fig)
	t.Log(fig)
	for _, d := range o.details {
		t.Log(d)
	}
	if fig.duplicates+fig.lost+fig.outOf+fig.leftover > 0 {
		t.Errorf("%s", fig)
	}
	if fig.movedWithTranscript == 0 {
		t.Errorf("no conversation continued on another worker resumed its session with its transcript (%d resumed on another worker)", fig.movedResumes)
	}
	for _, g := range gws {
		for _, e := range g.exits {
			t.Logf("%s exited on its own: %s", g.name, e)
		}
	}
}

// killable is a process the test kills and restarts.
type killable interface {
	start()
	kill()
	label() string
}

type killRecord struct {
	name string // the incarnation killed, "wa#3"
	at   time.Time
}

// clusterResult is what became of the prompts and webhook deliveries.
type clusterResult struct {
	accepted, refused, refusedAnswered, hourglassLeft                        int
	answers, notices, duplicates, lost, outOfOrder, unanswered               int
	resumes, moved, movedWithTranscript, missingTranscript, behindTranscript int
	details                                                                  []string
}

// answer is one of clusterClaude's answers as posted.
type answer struct {
	id                       discord.MessageID
	channel                  discord.ChannelID
	tokens                   []string
	sid, resumed, host, prev string
}

// Notice texts: what the intake answers when it could not store a prompt
// (not taken: the user sends it again), and what the other notices say.
var refusalRe = regexp.MustCompile(`could not store this message|is shutting down and did not take`)

// clusterOutcomes reads every channel and sorts out what became of each
// prompt and accepted webhook delivery, and of each conversation.
func clusterOutcomes(fd *fakediscord.Server, channels []discord.ChannelID, hooks discord.ChannelID, prompts []prompt, accepted map[string]bool) clusterResult {
	var o clusterResult
	answersOf := map[string][]answer{}
	var all []answer
	notices := map[discord.MessageID][]string{}
	for _, ch := range append(slices.Clone(channels), hooks) {
		for _, m := range fd.BotMessages(ch) {
			if a := answerRe.FindStringSubmatch(m.Content); a != nil {
				an := answer{id: m.ID, channel: ch, tokens: tokenRe.FindAllString(a[1], -1), sid: a[2], resumed: a[3], host: a[4], prev: a[5]}
				all = append(all, an)
				for _, tok := range an.tokens {
					answersOf[tok] = append(answersOf[tok], an)
				}
				continue
			}
			if m.Reference != nil {
				notices[m.Reference.MessageID] = append(notices[m.Reference.MessageID], m.Content)
			}
		}
	}
	hourglass := hourglassed(fd)
	lastAnswer := map[discord.ChannelID]discord.MessageID{}
	for _, p := range prompts {
		as := answersOf[p.token]
		var refusals, others int
		for _, n := range notices[p.id] {
			if refusalRe.MatchString(n) {
				refusals++
			} else {
				others++
			}
		}
		if refusals > 0 {
			o.refused++
			if len(as) > 0 {
				o.refusedAnswered++
				o.details = append(o.details, fmt.Sprintf("%s was refused (not stored) and yet answered", p.token))
			}
		}
		if hourglass[p.id] || len(as) > 0 || others > 0 {
			o.accepted++
		}
		if len(as)+others > 0 && slices.Contains(fd.Reactions(p.channel, p.id)["⏳"], fd.Bot.ID) {
			// Answered, yet still marked as waiting.
			o.hourglassLeft++
			o.details = append(o.details, fmt.Sprintf("%s is answered and still has the bot's ⏳", p.token))
		}
		switch {
		case len(as) == 1 && others == 0:
			o.answers++
			if as[0].id < lastAnswer[p.channel] {
				o.outOfOrder++
				o.details = append(o.details, fmt.Sprintf("%s answered out of order", p.token))
			}
			lastAnswer[p.channel] = max(lastAnswer[p.channel], as[0].id)
		case len(as) > 1:
			o.duplicates++
			o.details = append(o.details, fmt.Sprintf("%s answered %d times", p.token, len(as)))
		case len(as) == 1:
			o.duplicates++
			o.details = append(o.details, fmt.Sprintf("%s has an answer and %d notices: %q", p.token, others, notices[p.id]))
		case others == 1:
			o.notices++
		case others > 1:
			o.duplicates++
			o.details = append(o.details, fmt.Sprintf("%s has %d notices: %q", p.token, others, notices[p.id]))
		case refusals > 0:
			// Not taken, and the user was told so.
		default:
			o.unanswered++
			o.lost++
			o.details = append(o.details, fmt.Sprintf("%s has no answer, notice or refusal (⏳ seen: %v)", p.token, hourglass[p.id]))
		}
	}
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
	o.conversations(all)
	return o
}

// conversations follows each session through its channel's answers: who
// began it, who resumed it, and whether the resuming worker had its
// transcript (prev names the tokens of a turn of the session).
func (o *clusterResult) conversations(all []answer) {
	sort.Slice(all, func(i, j int) bool { return all[i].id < all[j].id })
	type session struct {
		host   string
		tokens map[string]bool // tokens of the turns answered in it
		last   string
	}
	sessions := map[string]*session{}
	for _, a := range all {
		joined := strings.ReplaceAll(strings.Join(a.tokens, ""), "-", "_")
		if a.resumed == "-" {
			sessions[a.sid] = &session{host: a.host, tokens: map[string]bool{joined: true}, last: joined}
			continue
		}
		o.resumes++
		s := sessions[a.resumed]
		if s == nil {
			continue // began before a duplicate check could see it: not ours
		}
		moved := s.host != a.host
		switch {
		case a.prev == "missing":
			o.missingTranscript++
			o.details = append(o.details, fmt.Sprintf("%s resumed %s on %s without its transcript (begun on %s)", a.tokens, a.sid, a.host, s.host))
		case a.prev != s.last && s.tokens[a.prev]:
			// The transcript ends with a turn before the last answered
			// one: the model lost a turn the user saw answered. (One
			// ending with a turn whose answer never reached Discord, cut
			// by a kill, is what claude would have too.)
			o.behindTranscript++
			o.details = append(o.details, fmt.Sprintf("%s resumed %s on %s: its transcript ends at %s, the last answer was %s", a.tokens, a.sid, a.host, a.prev, s.last))
		}
		if moved {
			o.moved++
			if a.prev != "missing" && s.tokens[a.prev] {
				o.movedWithTranscript++
			}
		}
		s.host = a.host
		s.tokens[joined] = true
		s.last = joined
	}
}

// hourglassed returns the messages the gateway put ⏳ on at some point.
func hourglassed(fd *fakediscord.Server) map[discord.MessageID]bool {
	out := map[discord.MessageID]bool{}
	for _, req := range fd.Requests() {
		if req.Method != "PUT" || req.Status/100 != 2 || !strings.Contains(req.Path, "/reactions/") {
			continue
		}
		if !strings.Contains(req.Path, "⏳") && !strings.Contains(req.Path, "%E2%8F%B3") {
			continue
		}
		parts := strings.Split(req.Path, "/")
		for i, s := range parts {
			if s == "messages" && i+1 < len(parts) {
				if id, err := discord.ParseSnowflake(parts[i+1]); err == nil {
					out[discord.MessageID(id)] = true
				}
			}
		}
	}
	return out
}

// failovers pairs each kill of a process running turns with the events it
// had started and not finished (from its log): the time from the kill to
// the event starting on another process is one failover. Events cut off
// after a tool started are not run again but told with Retry; they are
// counted apart.
func failovers(kills []killRecord, gws []*gwProc) ([]time.Duration, int) {
	type start struct {
		who string
		at  time.Time
	}
	starts := map[uint64][]start{}
	running := map[string]map[uint64]bool{} // incarnation → started, not finished
	for _, g := range gws {
		for _, l := range g.lines() {
			var rec struct {
				Message string `json:"message"`
				Event   uint64 `json:"event"`
			}
			if json.Unmarshal(l.text, &rec) != nil || rec.Event == 0 {
				continue
			}
			switch rec.Message {
			case "event started":
				starts[rec.Event] = append(starts[rec.Event], start{who: l.who, at: l.at})
				if running[l.who] == nil {
					running[l.who] = map[uint64]bool{}
				}
				running[l.who][rec.Event] = true
			case "event finished":
				delete(running[l.who], rec.Event)
			}
		}
	}
	var out []time.Duration
	notRun := 0
	for _, k := range kills {
		for ev := range running[k.name] {
			found := false
			for _, s := range starts[ev] {
				if s.who != k.name && s.at.After(k.at) {
					out = append(out, s.at.Sub(k.at))
					found = true
					break
				}
			}
			if !found {
				notRun++
			}
		}
	}
	return out, notRun
}

// gwProc is one gateway process (run or worker) over its incarnations.
type gwProc struct {
	name string
	argv []string
	env  []string
	dir  string

	mu         sync.Mutex // guards the fields below
	cmd        *exec.Cmd
	n          int // incarnations so far
	up         bool
	killing    bool
	exited     chan struct{}
	alone      bool // exited without being killed, not yet restarted
	unexpected int
	exits      []string
	log        *lineLog
}

func (g *gwProc) label() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return fmt.Sprintf("%s#%d", g.name, g.n)
}

func (g *gwProc) start() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.log == nil {
		g.log = &lineLog{}
	}
	g.n++
	w := g.log.writer(fmt.Sprintf("%s#%d", g.name, g.n))
	cmd := exec.Command(g.argv[0], g.argv[1:]...)
	cmd.Dir, cmd.Env = g.dir, g.env
	cmd.Stdout, cmd.Stderr = w, w
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		g.exits = append(g.exits, "start: "+err.Error())
		g.alone = true
		return
	}
	g.cmd, g.up, g.killing, g.alone = cmd, true, false, false
	exited := make(chan struct{})
	g.exited = exited
	label := fmt.Sprintf("%s#%d", g.name, g.n)
	go func() {
		err := cmd.Wait()
		g.mu.Lock()
		defer g.mu.Unlock()
		if !g.killing {
			g.unexpected++
			g.alone = true
			g.exits = append(g.exits, fmt.Sprintf("%s: %v; last lines:\n%s", label, err, g.log.tailOf(label, 8)))
		}
		g.up = false
		close(exited)
	}()
}

func (g *gwProc) kill() {
	g.mu.Lock()
	if !g.up {
		g.mu.Unlock()
		return
	}
	g.killing = true
	g.cmd.Process.Kill()
	exited := g.exited
	g.mu.Unlock()
	<-exited
}

// stop sends SIGTERM and waits for a clean exit.
func (g *gwProc) stop(within time.Duration) error {
	g.mu.Lock()
	if !g.up {
		g.mu.Unlock()
		return errors.New("was not running at the end")
	}
	g.killing = true
	cmd, exited := g.cmd, g.exited
	g.mu.Unlock()
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(within):
		cmd.Process.Kill()
		<-exited
		return fmt.Errorf("did not stop within %v of SIGTERM", within)
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		return fmt.Errorf("exited with %d after SIGTERM, want 0", code)
	}
	return nil
}

func (g *gwProc) isUp() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.up
}

// exitedAlone reports, once, that the process stopped without a kill.
func (g *gwProc) exitedAlone() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	a := g.alone
	g.alone = false
	return a
}

// running reports whether the current incarnation logged that it runs.
func (g *gwProc) running() bool {
	label := g.label()
	for _, l := range g.log.all() {
		if l.who == label && bytes.Contains(l.text, []byte(`"message":"gateway running"`)) {
			return true
		}
	}
	return false
}

func (g *gwProc) lines() []logLine { return g.log.all() }

func (g *gwProc) tail() string { return g.log.tailOf(g.label(), 60) }

// keep writes the process's log to CHAOS_LOGDIR when set.
func (g *gwProc) keep(t *testing.T) {
	dir := os.Getenv("CHAOS_LOGDIR")
	if dir == "" {
		return
	}
	var b bytes.Buffer
	for _, l := range g.log.all() {
		fmt.Fprintf(&b, "%s %s %s\n", l.at.Format("15:04:05.000"), l.who, l.text)
	}
	if err := os.WriteFile(filepath.Join(dir, "cluster-"+g.name+".log"), b.Bytes(), 0o600); err != nil {
		t.Log(err)
	}
}

// keepDiscord writes every message of the channels, with the nonces the
// bot sent, to CHAOS_LOGDIR when set: an answer's nonce names its event.
func keepDiscord(t *testing.T, fd *fakediscord.Server, channels []discord.ChannelID) {
	dir := os.Getenv("CHAOS_LOGDIR")
	if dir == "" {
		return
	}
	var b bytes.Buffer
	for _, ch := range channels {
		for _, m := range fd.Messages(ch) {
			ref := ""
			if m.Reference != nil {
				ref = m.Reference.MessageID.String()
			}
			fmt.Fprintf(&b, "%s ch=%s id=%s ref=%s author=%s nonce=%s %q\n", m.Timestamp.Time().Format("15:04:05.000"), ch, m.ID, ref, m.Author.Username, m.Nonce, m.Content)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "cluster-discord.log"), b.Bytes(), 0o600); err != nil {
		t.Log(err)
	}
}

// lineLog keeps a process's output line by line, each line stamped with
// when it arrived and which incarnation wrote it.
type lineLog struct {
	mu    sync.Mutex // guards lines
	lines []logLine
}

type logLine struct {
	who  string
	at   time.Time
	text []byte
}

func (l *lineLog) writer(who string) *lineWriter { return &lineWriter{log: l, who: who} }

func (l *lineLog) all() []logLine {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.lines)
}

func (l *lineLog) tailOf(who string, n int) string {
	var out []string
	for _, line := range l.all() {
		if line.who == who {
			out = append(out, string(line.text))
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return strings.Join(out, "\n")
}

// lineWriter cuts what one incarnation writes into lines.
type lineWriter struct {
	log *lineLog
	who string

	mu      sync.Mutex // guards partial
	partial []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, p...)
	now := time.Now()
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		line := slices.Clone(w.partial[:i])
		w.partial = w.partial[i+1:]
		w.log.mu.Lock()
		w.log.lines = append(w.log.lines, logLine{who: w.who, at: now, text: line})
		w.log.mu.Unlock()
	}
	return len(p), nil
}

// natsProc is a nats-server process with JetStream on a fixed address,
// so that a restart keeps the URL the gateway processes reconnect to.
type natsProc struct {
	t    *testing.T
	bin  string
	addr string
	conf string
	n    int

	mu   sync.Mutex // guards cmd
	cmd  *exec.Cmd
	done chan struct{}
	logs bytes.Buffer
}

func newNATSProc(t *testing.T, bin, addr, dir string) *natsProc {
	host, port, _ := net.SplitHostPort(addr)
	store := filepath.Join(dir, "store")
	if err := os.MkdirAll(store, 0o700); err != nil {
		t.Fatal(err)
	}
	// sync_interval always: every write reaches the disk before its ack,
	// so a kill -9 of the server loses nothing it acknowledged.
	conf := fmt.Sprintf("server_name: chaos\nhost: %s\nport: %s\njetstream {\n  store_dir: %q\n  sync_interval: always\n}\n", host, port, store)
	path := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	return &natsProc{t: t, bin: bin, addr: addr, conf: path}
}

func (p *natsProc) label() string { return fmt.Sprintf("nats#%d", p.n) }

func (p *natsProc) start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	cmd := exec.Command(p.bin, "-c", p.conf)
	cmd.Stdout, cmd.Stderr = &p.logs, &p.logs
	if err := cmd.Start(); err != nil {
		p.t.Errorf("start nats-server: %v", err)
		return
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	p.cmd, p.done = cmd, done
}

func (p *natsProc) kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd = nil
	p.mu.Unlock()
	if cmd != nil {
		cmd.Process.Kill()
		<-done
	}
}

func (p *natsProc) isUp() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
	}
	c, err := net.DialTimeout("tcp", p.addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// waitReady waits until JetStream answers.
func (p *natsProc) waitReady(within time.Duration) error {
	return waitFor(within, func() bool {
		nc, err := nats.Connect("nats://"+p.addr, nats.Timeout(time.Second), nats.NoReconnect())
		if err != nil {
			return false
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err = js.AccountInfo(ctx)
		return err == nil
	})
}

// busy counts the events the stream still holds for the partition
// consumers (waiting or handed out): zero when the gateway is idle.
func (p *natsProc) busy() int {
	nc, err := nats.Connect("nats://"+p.addr, nats.Timeout(time.Second), nats.NoReconnect())
	if err != nil {
		return -1
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return -1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, "GATEWAY_EVENTS")
	if err != nil {
		return -1
	}
	n := 0
	names := st.ConsumerNames(ctx)
	for name := range names.Name() {
		if !strings.HasPrefix(name, "ev-") {
			continue
		}
		c, err := st.Consumer(ctx, name)
		if err != nil {
			return -1
		}
		info := c.CachedInfo()
		n += int(info.NumPending) + info.NumAckPending
	}
	if names.Err() != nil {
		return -1
	}
	return n
}

func waitFor(within time.Duration, cond func() bool) error {
	end := time.Now().Add(within)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(end) {
			return fmt.Errorf("not within %v", within)
		}
		<-tick.C
	}
	return nil
}
