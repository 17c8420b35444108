package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/fakediscord"
	"github.com/agentgateway/gateway/internal/gateway"
	"github.com/agentgateway/gateway/internal/inbox"
	"github.com/agentgateway/gateway/internal/queue"
)

// loadResult is what the load run measured.
type loadResult struct {
	// In and Out are the gateway's overhead per event at 1 and 100 busy
	// channels: Discord message sent -> backend called, and backend
	// returned -> reply POSTed. The 100 channels get 200 prompts/s (busy
	// servers, the budget's measure) and then 2,000 prompts/s.
	In1, Out1, In100, Out100 []time.Duration
	In200, Out200            []time.Duration
	// InSat and OutSat are at saturation: 100 prompts always in flight.
	InSat, OutSat    []time.Duration
	Channels, Events int
	RSSAfterKB       int
	// RSSAfterIdleKB is 30 s after the last event.
	RSSAfterIdleKB int
	Goroutines     int
}

// sent is when the fake Discord was asked to send a message, by its text.
type sentLog struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (s *sentLog) post(fd *fakediscord.Server, ch discord.ChannelID, user discord.User, key string) {
	s.mu.Lock()
	s.at[key] = time.Now()
	s.mu.Unlock()
	fd.Post(ch, user, fakediscord.Mention(fd.Bot)+" "+key, fd.Bot)
}

// runLoad starts this tool's child mode (the gateway with an instant
// backend) and drives it: overhead at 1 and at 100 busy channels, then
// enough traffic for 1,000 channels and 10,000 events, then RSS.
func runLoad(self string) (loadResult, error) {
	var res loadResult
	fd := fakediscord.New()
	defer fd.Close()
	guild, first := fd.AddGuild("bench")
	channels := []discord.ChannelID{first}
	for len(channels) < 1000 {
		channels = append(channels, fd.AddChannel(fakediscord.Channel{GuildID: guild, Type: discord.GuildText, Name: fmt.Sprint("c", len(channels))}))
	}
	user := fd.User("bench")
	dir, err := os.MkdirTemp("", "gateway-bench-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	p, err := startGateway(self, []string{"child"}, gatewayEnv(fd, dir,
		"MAX_CONCURRENT_QUERIES=100", "MAX_QUEUE_DEPTH=100000", "MAX_CHANNEL_QUEUE=100000", "BENCH_HEAP_PROFILE="+os.Getenv("BENCH_HEAP_PROFILE"), "BENCH_CPU_PROFILE="+os.Getenv("BENCH_CPU_PROFILE")), true)
	if err != nil {
		return res, err
	}
	defer p.stop()
	select {
	case <-p.ready:
	case <-time.After(60 * time.Second):
		return res, fmt.Errorf("child gateway not ready")
	}

	sent := &sentLog{at: map[string]time.Time{}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	events := 0
	waitReplies := func(n int) error {
		return fd.WaitUntil(ctx, func() bool { return fd.BotMessageCount() >= n })
	}

	// 1 busy channel: one prompt at a time.
	var keys1 []string
	for i := range 300 {
		key := fmt.Sprintf("a%d", i)
		sent.post(fd, channels[0], user, key)
		events++
		if err := waitReplies(events); err != nil {
			return res, fmt.Errorf("1 channel: %w", err)
		}
		keys1 = append(keys1, key)
	}
	// 100 busy channels: prompts arrive at a steady 2,000 a second,
	// spread round-robin over 100 channels (20 a second each), whatever the
	// gateway does: the overhead under load, below saturation.
	// First a turn in each channel, not measured: a channel's first turn
	// also creates its session binding (one fsync'd write, shared by
	// concurrent ones), a one-time cost.
	for c := range 100 {
		sent.post(fd, channels[c], user, fmt.Sprintf("w%d", c))
	}
	events += 100
	if err := waitReplies(events); err != nil {
		return res, fmt.Errorf("warm-up: %w", err)
	}
	steady := func(prefix string, perSecond, n int) ([]string, error) {
		var keys []string
		tick := time.NewTicker(time.Second / time.Duration(perSecond))
		defer tick.Stop()
		for i := range n {
			<-tick.C
			key := fmt.Sprintf("%s%d", prefix, i)
			sent.post(fd, channels[i%100], user, key)
			keys = append(keys, key)
		}
		events += n
		if err := waitReplies(events); err != nil {
			return nil, fmt.Errorf("100 channels, %d prompts/s: %w", perSecond, err)
		}
		return keys, nil
	}
	// Ten times a busy Discord server, for 15 s.
	keys200, err := steady("m", 200, 3000)
	if err != nil {
		return res, err
	}
	keys100, err := steady("b", 2000, 3000)
	if err != nil {
		return res, err
	}
	// Saturation: 100 channels each with a prompt always in flight (a new
	// one as soon as the last is answered); latency here is queueing.
	var wg sync.WaitGroup
	var keysMu sync.Mutex
	var keysSat []string
	for c := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch := channels[c]
			for i := range 10 {
				key := fmt.Sprintf("s%d-%d", c, i)
				before := countIn(fd, ch)
				sent.post(fd, ch, user, key)
				if fd.WaitUntil(ctx, func() bool { return countIn(fd, ch) > before }) != nil {
					return
				}
				keysMu.Lock()
				keysSat = append(keysSat, key)
				keysMu.Unlock()
			}
		}()
	}
	wg.Wait()
	events += 100 * 10
	if err := waitReplies(events); err != nil {
		return res, fmt.Errorf("saturation: %w", err)
	}
	// Every channel at least one turn, 10,000 events in all, 100 at a time.
	for i := 0; events < 10000; i++ {
		ch := channels[(100+i)%len(channels)]
		sent.post(fd, ch, user, fmt.Sprintf("c%d", i))
		events++
		if events%100 == 0 {
			if err := waitReplies(events); err != nil {
				return res, fmt.Errorf("fill: %w", err)
			}
		}
	}
	if err := waitReplies(events); err != nil {
		return res, err
	}
	res.Channels, res.Events = len(channels), events
	if res.RSSAfterKB, err = rssKB(p.cmd.Process.Pid); err != nil {
		return res, err
	}

	posted := replyTimes(fd)
	overhead := func(keys []string) (in, out []time.Duration) {
		for _, k := range keys {
			run, ok := p.run(k)
			sentAt, okSent := sent.at[k]
			postAt, okPost := posted[k]
			if !ok || !okSent || !okPost {
				continue
			}
			in = append(in, time.Unix(0, run[0]).Sub(sentAt))
			out = append(out, postAt.Sub(time.Unix(0, run[1])))
		}
		return in, out
	}
	res.In1, res.Out1 = overhead(keys1)
	res.In100, res.Out100 = overhead(keys100)
	res.In200, res.Out200 = overhead(keys200)
	res.InSat, res.OutSat = overhead(keysSat)

	// Settled: 30 s without traffic (the gateway trims its heap after
	// 10-20 s idle).
	time.Sleep(30 * time.Second)
	res.RSSAfterIdleKB, _ = rssKB(p.cmd.Process.Pid)
	res.Goroutines = p.goroutineCount()
	return res, nil
}

func countIn(fd *fakediscord.Server, ch discord.ChannelID) int {
	return len(fd.BotMessages(ch))
}

// replyTimes maps each reply's key ("ok <key>") to when its POST arrived.
func replyTimes(fd *fakediscord.Server) map[string]time.Time {
	out := map[string]time.Time{}
	for _, r := range fd.Requests() {
		if r.Method != "POST" || !strings.HasSuffix(r.Path, "/messages") || r.Status != 200 {
			continue
		}
		var body struct {
			Content string `json:"content"`
		}
		if json.Unmarshal(r.Body, &body) == nil {
			if key, ok := strings.CutPrefix(body.Content, "ok "); ok {
				if _, seen := out[key]; !seen {
					out[key] = r.Time
				}
			}
		}
	}
	return out
}

// throughput pushes n events over 100 channels through queue + runtime with
// the instant fake backend, in this process, and returns events/s. With
// durable, every event also goes through an inbox as in `gateway run`:
// recorded before it is accepted, started, replied, delivered, finished,
// each fsync'd (with group commit); inboxBytes is the log's size after.
func throughput(n int, durable bool) (eventsPerSec float64, inboxBytes int64, err error) {
	dir, err := os.MkdirTemp("", "gateway-bench-")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(dir)
	cfg, err := config.Load(config.LoadOptions{Environ: []string{
		"CONFIG_DIR=" + dir, "MAX_QUEUE_DEPTH=10000000", "MAX_CHANNEL_QUEUE=10000000", "MAX_CONCURRENT_QUERIES=8", "PERMISSION_MODE=acceptEdits",
	}})
	if err != nil {
		return 0, 0, err
	}
	var wg sync.WaitGroup
	opts := gateway.CoreOptions{Backend: &backends.Fake{Forget: true}, Replier: countingReplier{wg: &wg}}
	var in gateway.Inbox
	if durable {
		if in, err = gateway.OpenInbox(context.Background(), cfg, zerolog.Nop()); err != nil {
			return 0, 0, err
		}
		defer in.Close()
		opts.Journal = inboxJournal{in}
		opts.StartID = in.LastID()
		opts.OnStart = func(e queue.Event) { in.Started(e.ID) }
		opts.Replier = countingReplier{wg: &wg, in: in}
	}
	core, err := gateway.NewCore(cfg, opts, zerolog.Nop())
	if err != nil {
		return 0, 0, err
	}
	// Steady state: persona files last edited a while ago, as in a running
	// gateway (files modified within the last second are always re-read).
	if err := backdate(dir, time.Hour); err != nil {
		return 0, 0, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go core.Run(ctx)
	wg.Add(n)
	// Events are taken as Discord's intake takes them: one after the
	// other, each placed in the journal's order (Submit) while the ones
	// before it wait for the disk together (Wait).
	waits := make(chan *queue.Pending, 1024)
	failed := make(chan error, 1)
	go func() {
		for p := range waits {
			go func() {
				if _, err := p.Wait(); err != nil {
					select {
					case failed <- err:
					default:
					}
				}
			}()
		}
	}()
	start := time.Now()
	for i := range n {
		p, err := core.Queue.Submit(queue.Event{Kind: queue.KindMessage, ChannelID: fmt.Sprint(i % 100), Text: "hi"})
		if err != nil {
			close(waits)
			return 0, 0, err
		}
		waits <- p
	}
	close(waits)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case err := <-failed:
		return 0, 0, err
	}
	eventsPerSec = float64(n) / time.Since(start).Seconds()
	core.Runtime.Close() // the archive written behind finishes, untimed
	if in != nil {
		inboxBytes = in.Stats().Bytes
	}
	return eventsPerSec, inboxBytes, nil
}

// inboxJournal is the queue's journal as gateway run has it: events are
// staged in order and committed together.
type inboxJournal struct{ in gateway.Inbox }

func (j inboxJournal) Append(e queue.Event) error { return j.in.Add(e) }

func (j inboxJournal) Stage(e queue.Event) (func() error, error) {
	s, ok := j.in.(interface {
		Stage(queue.Event, ...inbox.Seen) (func() error, error)
	})
	if !ok {
		return func() error { return nil }, j.in.Add(e)
	}
	return s.Stage(e)
}

type countingReplier struct {
	wg *sync.WaitGroup
	in gateway.Inbox // records the reply's life as gateway run does, if set
}

func (c countingReplier) Reply(_ context.Context, e queue.Event, text string) error {
	if c.in == nil {
		c.wg.Done()
		return nil
	}
	// As the Discord outbox does: the reply is recorded and posted behind
	// the turn, which returns at once.
	go func() {
		defer c.wg.Done()
		c.in.Replied(e.ID, text)
		c.in.Delivered(e.ID, 0, "1")
		c.in.Finish(e.ID, inbox.Answered)
	}()
	return nil
}

// percentile returns the p-th percentile (0-100) of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(float64(len(s)-1) * p / 100)
	return s[i]
}

// backdate sets the modification time of every file in dir to d ago.
func backdate(dir string, d time.Duration) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	t := time.Now().Add(-d)
	for _, e := range entries {
		if err := os.Chtimes(filepath.Join(dir, e.Name()), t, t); err != nil {
			return err
		}
	}
	return nil
}
