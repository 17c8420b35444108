package discord

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/fakediscord"
	"github.com/agentgateway/gateway/internal/queue"
)

const waitLong = 20 * time.Second

// testIntake is the queue as the bot sees it: it records what it is given
// and answers with refuse's error when set.
type testIntake struct {
	mu     sync.Mutex
	events []queue.Event
	refuse error
	nextID uint64
}

func (q *testIntake) Enqueue(e queue.Event) (queue.Receipt, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.refuse != nil {
		return queue.Receipt{}, q.refuse
	}
	q.nextID++
	e.ID = q.nextID
	q.events = append(q.events, e)
	return queue.Receipt{Event: e}, nil
}

func (q *testIntake) Stop(string) (bool, []queue.Event) { return false, nil }

func (q *testIntake) Cancel(string, uint64) bool { return false }

func (q *testIntake) Lane(string) (queue.Event, bool, []queue.Event) {
	return queue.Event{}, false, nil
}

func (q *testIntake) setRefuse(err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.refuse = err
}

func (q *testIntake) taken() []queue.Event {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]queue.Event(nil), q.events...)
}

type noSessions struct{}

func (noSessions) Delete(string) (bool, error) { return false, nil }

// testBot is a Bot connected to a fake Discord.
type testBot struct {
	*Bot
	t       *testing.T
	fd      *fakediscord.Server
	intake  *testIntake
	logs    *logBuffer
	guild   discord.GuildID
	channel discord.ChannelID
	user    discord.User
}

// startBot connects a bot with opts (token and URLs filled in) to a new
// fake Discord with one guild.
func startBot(t *testing.T, opts Options) *testBot {
	t.Helper()
	fd := fakediscord.Start(t)
	tb := &testBot{t: t, fd: fd, intake: &testIntake{}, logs: &logBuffer{}}
	tb.guild, tb.channel = fd.AddGuild("test")
	tb.user = fd.User("alice")
	opts.Token, opts.APIBaseURL, opts.GatewayURL = fd.Token, fd.APIBaseURL(), fd.GatewayURL()
	opts.FastReconnect = true
	// Not zerolog.NewTestWriter: the bot's background goroutines (command
	// registration, notices) may log after the test has ended, and t.Log
	// then races with the test's end. The log is shown when a test fails.
	log := zerolog.New(tb.logs)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("bot log:\n%s", tb.logs.String())
		}
	})
	b, err := New(opts, log)
	if err != nil {
		t.Fatal(err)
	}
	tb.Bot = b
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := b.Open(ctx, tb.intake, noSessions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return tb
}

// mention posts a prompt for the bot in ch.
func (tb *testBot) mention(ch discord.ChannelID, text string) discord.Message {
	return tb.fd.Post(ch, tb.user, fakediscord.Mention(tb.fd.Bot)+" "+text, tb.fd.Bot)
}

// event is the queue event of a prompt posted in ch.
func (tb *testBot) event(id uint64, ch discord.ChannelID, replyTo discord.MessageID) queue.Event {
	return queue.Event{ID: id, Kind: queue.KindMessage, Source: Source, ChannelID: ch.String(), ReplyTo: replyTo.String()}
}

func (tb *testBot) waitLog(what string) {
	tb.t.Helper()
	tb.fd.Wait(tb.t, "log "+what, waitLong, func() bool { return strings.Contains(tb.logs.String(), what) })
}

func (tb *testBot) requests(method, prefix string) []fakediscord.Request {
	var out []fakediscord.Request
	for _, r := range tb.fd.Requests() {
		if r.Method == method && strings.HasPrefix(r.Path, prefix) {
			out = append(out, r)
		}
	}
	return out
}

type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// lines are the log lines that contain s.
func (l *logBuffer) lines(s string) []string {
	var out []string
	for _, line := range strings.Split(l.String(), "\n") {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return out
}
