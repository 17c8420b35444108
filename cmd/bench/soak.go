package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/diamondburned/arikawa/v3/discord"

	"github.com/agentgateway/gateway/internal/fakediscord"
)

// soakChannels is how many channels the soak's mentions go round.
const soakChannels = 200

// soakEventsPerSecond is the soak's rate: one event every 50 ms.
const soakEventsPerSecond = 20

// The gateway's default bounds on what it keeps in memory by design:
// the finished events the inbox keeps for de-duplication
// (INBOX_MAX_EVENTS) and the recent exchanges per channel
// (HISTORY_MESSAGES).
const (
	defaultInboxMaxEvents  = 10000
	defaultHistoryMessages = 20
)

// soakBounds are the gateway's memory bounds a soak runs with; 0 is the
// default.
type soakBounds struct {
	InboxMaxEvents, HistoryMessages int
}

// soakBoundsFor is the bounds for a soak of d. The heap grows until the
// inbox holds its 10,000 finished events and each channel its 20
// exchanges (8 minutes and 4,000 events at the soak's rate), and then
// stays: a soak shorter than about an hour would see only that fill and
// call it a leak. A shorter soak bounds both to what the events of its
// first sixth fill, so the fill is over within the first quarter, which
// the flat rule leaves out.
func soakBoundsFor(d time.Duration) soakBounds {
	firstSixth := int(d.Seconds()) * soakEventsPerSecond / 6
	var b soakBounds
	if firstSixth < defaultInboxMaxEvents {
		b.InboxMaxEvents = max(firstSixth, 100)
	}
	if perChannel := firstSixth / soakChannels; perChannel < defaultHistoryMessages {
		b.HistoryMessages = max(perChannel, 1)
	}
	return b
}

func (b soakBounds) env() []string {
	var env []string
	if b.InboxMaxEvents > 0 {
		env = append(env, fmt.Sprint("INBOX_MAX_EVENTS=", b.InboxMaxEvents))
	}
	if b.HistoryMessages > 0 {
		env = append(env, fmt.Sprint("HISTORY_MESSAGES=", b.HistoryMessages))
	}
	return env
}

func (b soakBounds) String() string {
	if b == (soakBounds{}) {
		return "the default bounds (10,000 inbox events, 20 exchanges a channel)"
	}
	return strings.Join(b.env(), " ")
}

// soakSample is one reading of the gateway during the soak.
type soakSample struct {
	Elapsed time.Duration
	Events  int // bot messages the fake Discord had received
	RSSKB   int
	// AnonKB and FileKB split RSSKB: the gateway's own memory, and
	// file pages mapped (the binary's, the stores' memory-mapped files).
	AnonKB, FileKB int
	Goroutines     int
}

// soakTraffic counts what the soak sent, by kind.
type soakTraffic struct {
	Mentions, Prompts, Status, Webhooks int
	// WebhookErrors are deliveries that were not accepted (no 2xx).
	WebhookErrors int
}

func (t soakTraffic) total() int { return t.Mentions + t.Prompts + t.Status + t.Webhooks }

// soakResult is what a soak measured.
type soakResult struct {
	Duration time.Duration
	Samples  []soakSample
	Sent     soakTraffic
	// Replies is the bot messages the fake Discord received.
	Replies int
	// Bounds are the memory bounds the gateway ran with.
	Bounds soakBounds
}

// flatSlack is how much the last quarter's peak may exceed the second
// quarter's and still count as flat: 10%. The first quarter is left out:
// it is the warm-up (sessions created, buffers and caches grown).
const flatSlack = 0.10

// flatGoroutineSlack is the absolute slack for goroutines: a few turns in
// flight more at one sample than at another is traffic, not a leak.
const flatGoroutineSlack = 5

// quarterMax is the largest value of the samples in the given quarter
// (1 to 4) of the soak, by elapsed time. The last quarter takes the
// samples past the end too (the last one is taken a little late).
func (r soakResult) quarterMax(q int, value func(soakSample) int) int {
	from, to := r.Duration*time.Duration(q-1)/4, r.Duration*time.Duration(q)/4
	m := 0
	for _, s := range r.Samples {
		if s.Elapsed > from && (s.Elapsed <= to || q == 4) {
			m = max(m, value(s))
		}
	}
	return m
}

func sampleRSS(s soakSample) int        { return s.RSSKB }
func sampleGoroutines(s soakSample) int { return s.Goroutines }

// rssFlat reports whether RSS stayed flat: the last quarter's max within
// 10% of the second quarter's max.
func (r soakResult) rssFlat() bool {
	second, last := r.quarterMax(2, sampleRSS), r.quarterMax(4, sampleRSS)
	return float64(last) <= float64(second)*(1+flatSlack)
}

// goroutinesFlat is rssFlat for the goroutine count, with a few
// goroutines of slack.
func (r soakResult) goroutinesFlat() bool {
	second, last := r.quarterMax(2, sampleGoroutines), r.quarterMax(4, sampleGoroutines)
	return float64(last) <= float64(second)*(1+flatSlack) || last <= second+flatGoroutineSlack
}

// Flat reports whether both RSS and goroutines stayed flat.
func (r soakResult) Flat() bool { return r.rssFlat() && r.goroutinesFlat() }

// startMiddleEnd are the first sample, the one nearest half-time, and the
// last.
func (r soakResult) startMiddleEnd() (start, middle, end soakSample) {
	if len(r.Samples) == 0 {
		return
	}
	start, end = r.Samples[0], r.Samples[len(r.Samples)-1]
	middle = start
	for _, s := range r.Samples {
		if (s.Elapsed - r.Duration/2).Abs() < (middle.Elapsed - r.Duration/2).Abs() {
			middle = s
		}
	}
	return start, middle, end
}

// soakLines are the soak's summary: what was sent, RSS and goroutines at
// start, middle and end, and whether they stayed flat, each with a mark
// as the footprint lines have.
func soakLines(r soakResult) []string {
	mark := func(ok bool) string {
		if ok {
			return "OK"
		}
		return "NOT FLAT"
	}
	mbOf := func(kb int) float64 { return float64(kb) / 1024 }
	start, middle, end := r.startMiddleEnd()
	return []string{
		fmt.Sprintf("soak: %v, %d events (%d mentions over %d channels, %d /claude, %d /status, %d webhooks; %d webhook errors), %d bot messages, %s",
			r.Duration, r.Sent.total(), r.Sent.Mentions, soakChannels, r.Sent.Prompts, r.Sent.Status, r.Sent.Webhooks, r.Sent.WebhookErrors, r.Replies, r.Bounds),
		fmt.Sprintf("soak: RSS start %.1f MB, middle %.1f MB, end %.1f MB (anonymous %.1f, %.1f, %.1f MB); goroutines start %d, middle %d, end %d",
			mbOf(start.RSSKB), mbOf(middle.RSSKB), mbOf(end.RSSKB), mbOf(start.AnonKB), mbOf(middle.AnonKB), mbOf(end.AnonKB), start.Goroutines, middle.Goroutines, end.Goroutines),
		fmt.Sprintf("soak: RSS flat (last quarter's max %.1f MB within 10%% of the second quarter's %.1f MB) %s; goroutines flat (%d vs %d) %s",
			mbOf(r.quarterMax(4, sampleRSS)), mbOf(r.quarterMax(2, sampleRSS)), mark(r.rssFlat()),
			r.quarterMax(4, sampleGoroutines), r.quarterMax(2, sampleGoroutines), mark(r.goroutinesFlat())),
	}
}

// soakBudgetRow is the budget table's row for a soak of r.Duration.
func soakBudgetRow(r soakResult) string {
	start, _, end := r.startMiddleEnd()
	return fmt.Sprintf("| RSS and goroutines flat over a %v soak (last quarter's max within 10%% of the second's) | RSS %.1f -> %.1f MB, goroutines %d -> %d, %d events | %s |",
		r.Duration, float64(start.RSSKB)/1024, float64(end.RSSKB)/1024, start.Goroutines, end.Goroutines, r.Sent.total(), verdict(r.Flat()))
}

// runSoak runs the soak for d and prints each sample as it is taken, then
// the summary lines.
func runSoak(d time.Duration) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	r, err := measureSoak(self, d, os.Stdout)
	if err != nil {
		return err
	}
	for _, l := range soakLines(r) {
		fmt.Println(l)
	}
	return nil
}

// measureSoak runs the child gateway (self's child mode) under mixed
// traffic for d: every 50 ms one of mentions round 200 channels, /claude
// and /status slash commands, and signed webhook deliveries. It samples
// RSS and goroutines every 10 s (every d/20 for a soak under 200 s) and
// writes each sample to progress. With BENCH_HEAP_PROFILE=file the child
// writes a heap profile there at exit.
func measureSoak(self string, d time.Duration, progress io.Writer) (soakResult, error) {
	res := soakResult{Duration: d, Bounds: soakBoundsFor(d)}
	fd := fakediscord.New()
	defer fd.Close()
	guild, first := fd.AddGuild("soak")
	channels := []discord.ChannelID{first}
	for len(channels) < soakChannels {
		channels = append(channels, fd.AddChannel(fakediscord.Channel{GuildID: guild, Type: discord.GuildText}))
	}
	user := fd.User("soak")
	dir, err := os.MkdirTemp("", "gateway-soak-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	hook, err := newSoakWebhook(dir, first)
	if err != nil {
		return res, err
	}
	env := append(hook.env(), "MAX_CONCURRENT_QUERIES=20", "BENCH_HEAP_PROFILE="+os.Getenv("BENCH_HEAP_PROFILE"))
	env = append(env, res.Bounds.env()...)
	p, err := startGateway(self, []string{"child"}, gatewayEnv(fd, dir, env...), true)
	if err != nil {
		return res, err
	}
	defer p.stop()
	select {
	case <-p.ready:
	case <-time.After(60 * time.Second):
		return res, fmt.Errorf("child gateway not ready")
	}

	every := 10 * time.Second
	if d < 200*time.Second {
		every = d / 20
	}
	fmt.Fprintf(progress, "%8s %8s %10s %10s %10s %10s\n", "elapsed", "events", "rss_mb", "anon_mb", "file_mb", "goroutines")
	tick := time.NewTicker(time.Second / soakEventsPerSecond)
	defer tick.Stop()
	sample := time.NewTicker(every)
	defer sample.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			res.Replies = fd.BotMessageCount()
			return res, nil
		case <-tick.C:
			sendSoakEvent(fd, hook, channels, user, i, &res.Sent)
		case <-sample.C:
			st, err := procStatus(p.cmd.Process.Pid)
			if err != nil {
				return res, err
			}
			s := soakSample{Elapsed: time.Since(start), Events: fd.BotMessageCount(), RSSKB: st["VmRSS"], AnonKB: st["RssAnon"], FileKB: st["RssFile"], Goroutines: p.goroutineCount()}
			res.Samples = append(res.Samples, s)
			fmt.Fprintf(progress, "%8s %8d %10.1f %10.1f %10.1f %10d\n", s.Elapsed.Round(time.Second), s.Events, float64(s.RSSKB)/1024, float64(s.AnonKB)/1024, float64(s.FileKB)/1024, s.Goroutines)
		}
	}
}

// sendSoakEvent sends the i-th event of the mix: of every 100, one
// webhook delivery, five /claude prompts, five /status, the rest mentions
// (each in the next channel round).
func sendSoakEvent(fd *fakediscord.Server, hook *soakWebhook, channels []discord.ChannelID, user discord.User, i int, sent *soakTraffic) {
	ch := channels[i%len(channels)]
	switch {
	case i%100 == 50:
		sent.Webhooks++
		if err := hook.deliver(i); err != nil {
			sent.WebhookErrors++
		}
	case i%20 == 5:
		sent.Prompts++
		fd.Interact(ch, user, "claude", map[string]string{"prompt": fmt.Sprintf("p%d", i)})
	case i%20 == 15:
		sent.Status++
		fd.Interact(ch, user, "status", nil)
	default:
		sent.Mentions++
		fd.Post(ch, user, fakediscord.Mention(fd.Bot)+fmt.Sprintf(" s%d", i), fd.Bot)
	}
}

// soakWebhook is a webhook the soak's gateway serves (agents.md's
// "## Webhooks" section) and the soak delivers to with its bearer secret.
type soakWebhook struct {
	addr, secret string
	client       *http.Client
}

// newSoakWebhook writes agents.md into configDir with one webhook that
// posts to channel, and picks a free port for the listener.
func newSoakWebhook(configDir string, channel discord.ChannelID) (*soakWebhook, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	agents := fmt.Sprintf("## Webhooks\n\n### soak\nSecret-Env: WEBHOOK_SOAK_SECRET\nChannel: %s\nInstruction: A soak delivery: {{payload}}\n", channel)
	if err := os.WriteFile(filepath.Join(configDir, "agents.md"), []byte(agents), 0o600); err != nil {
		return nil, fmt.Errorf("write agents.md: %w", err)
	}
	return &soakWebhook{addr: addr, secret: hex.EncodeToString(b), client: &http.Client{Timeout: 5 * time.Second}}, nil
}

func (w *soakWebhook) env() []string {
	return []string{"WEBHOOK_ADDR=" + w.addr, "WEBHOOK_SOAK_SECRET=" + w.secret}
}

// deliver POSTs delivery i and reports an error unless it was accepted.
func (w *soakWebhook) deliver(i int) error {
	req, err := http.NewRequest(http.MethodPost, "http://"+w.addr+"/hooks/soak", bytes.NewReader([]byte(fmt.Sprintf(`{"delivery":%d}`, i))))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+w.secret)
	req.Header.Set("X-Delivery-Id", fmt.Sprint("soak-", i))
	resp, err := w.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("webhook delivery %d: %s", i, resp.Status)
	}
	return nil
}
