package discord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/diamondburned/arikawa/v3/utils/httputil"
	"github.com/google/go-cmp/cmp"
	"github.com/jonboulle/clockwork"

	"github.com/agentgateway/gateway/internal/fakediscord"
	"github.com/agentgateway/gateway/internal/reply"
)

// longAnswer is an answer of about n characters in many lines.
func longAnswer(n int) string {
	line := "Another line of a very long answer, which goes on and on.\n"
	return strings.Repeat(line, n/len(line)+1)[:n]
}

func flush(t *testing.T, b *testBot) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestLongReplyIsCappedWithTheAnswerAttached(t *testing.T) {
	tb := startBot(t, Options{MaxReplyMessages: 3})
	prompt := tb.fd.Post(tb.channel, tb.user, "a prompt")
	text := longAnswer(20 * reply.DiscordLimit)
	if err := tb.Reply(context.Background(), tb.event(1, tb.channel, prompt.ID), text); err != nil {
		t.Fatal(err)
	}
	flush(t, tb)
	msgs := tb.fd.BotMessages(tb.channel)
	if len(msgs) != 3 {
		t.Fatalf("%d messages, want 3 (MaxReplyMessages)", len(msgs))
	}
	chunks := reply.Split(text, reply.DiscordLimit)
	for i, m := range msgs[:2] {
		if m.Content != chunks[i] {
			t.Errorf("message %d is not chunk %d of the answer", i, i)
		}
	}
	last := msgs[2]
	if !strings.Contains(last.Content, "40,000 characters long") || !strings.Contains(last.Content, "whole answer is attached as answer.md") {
		t.Errorf("last message = %q; want it to say the answer was cut and is attached", last.Content)
	}
	if len(last.Files) != 1 {
		t.Fatalf("last message has %d files, want 1", len(last.Files))
	}
	f := last.Files[0]
	if f.Field != "files[0]" || f.Name != "answer.md" || !strings.HasPrefix(f.ContentType, "text/markdown") {
		t.Errorf("file = field %q name %q type %q, want files[0] answer.md text/markdown", f.Field, f.Name, f.ContentType)
	}
	if string(f.Data) != text {
		t.Errorf("answer.md holds %d bytes, want the whole answer (%d)", len(f.Data), len(text))
	}
	for i, m := range msgs {
		if m.Nonce == "" {
			t.Errorf("message %d was sent without a nonce", i)
		}
		var am struct {
			Parse []string `json:"parse"`
		}
		if err := json.Unmarshal(m.AllowedMentions, &am); err != nil || am.Parse == nil || len(am.Parse) != 0 {
			t.Errorf("message %d allowed_mentions = %s, want parse: []", i, m.AllowedMentions)
		}
		if (m.Reference != nil) != (i == 0) {
			t.Errorf("message %d reference = %v; only the first answers the prompt", i, m.Reference)
		}
	}
	// The upload is one multipart request with the enforced nonce inside
	// payload_json.
	var upload fakediscord.Request
	for _, r := range tb.requests("POST", "/channels/"+tb.channel.String()+"/messages") {
		if strings.Contains(string(r.Body), "payload_json") {
			upload = r
		}
	}
	if !strings.Contains(string(upload.Body), `"enforce_nonce":true`) || !strings.Contains(string(upload.Body), `"filename":"answer.md"`) {
		t.Errorf("the upload's payload_json lacks enforce_nonce or the attachment:\n%.600s", upload.Body)
	}
}

// With the default cap, a 10 MiB answer is 10 messages, not 5,000, and an
// answer beyond Discord's upload limit attaches its beginning.
func TestHugeReplyAttachesWhatDiscordTakes(t *testing.T) {
	tb := startBot(t, Options{})
	text := longAnswer(fakediscord.MaxUploadSize + 100_000)
	if err := tb.Reply(context.Background(), tb.event(1, tb.channel, 0), text); err != nil {
		t.Fatal(err)
	}
	flush(t, tb)
	msgs := tb.fd.BotMessages(tb.channel)
	if len(msgs) != 10 {
		t.Fatalf("%d messages, want 10 (the default cap)", len(msgs))
	}
	last := msgs[9]
	if len(last.Files) != 1 {
		t.Fatalf("the last message has %d files, want 1; content %q", len(last.Files), last.Content)
	}
	data := last.Files[0].Data
	if len(data) > fakediscord.MaxUploadSize || len(data) < fakediscord.MaxUploadSize-100 || !strings.HasPrefix(text, string(data)) {
		t.Errorf("answer.md holds %d bytes; want the answer's first ~%d", len(data), fakediscord.MaxUploadSize)
	}
	if !strings.Contains(last.Content, "the rest was cut") || !strings.Contains(last.Content, "10 MiB") {
		t.Errorf("last message = %q; want it to say the attachment was cut at 10 MiB", last.Content)
	}
}

func TestSlashAnswerIsCappedWithTheAnswerAttached(t *testing.T) {
	tb := startBot(t, Options{MaxReplyMessages: 3})
	id := tb.fd.Interact(tb.channel, tb.user, "claude", map[string]string{"prompt": "long"})
	tb.fd.Wait(t, "the deferral", waitLong, func() bool { return len(tb.fd.Callbacks(id)) == 1 })
	taken := tb.intake.taken()
	if len(taken) != 1 {
		t.Fatalf("%d events queued, want 1", len(taken))
	}
	text := longAnswer(10 * reply.DiscordLimit)
	if err := tb.Reply(context.Background(), taken[0], text); err != nil {
		t.Fatal(err)
	}
	flush(t, tb)
	var got []fakediscord.Message
	for _, a := range tb.fd.Answers() {
		if a.Interaction == id {
			got = append(got, a)
		}
	}
	if len(got) != 3 || !got[0].Original || !got[0].Edited {
		t.Fatalf("answers = %+v; want the edited response and 2 follow-ups", got)
	}
	if len(got[2].Files) != 1 || string(got[2].Files[0].Data) != text || got[2].Files[0].Name != "answer.md" {
		t.Errorf("the last follow-up does not attach the whole answer as answer.md: %+v", got[2].Files)
	}
	if n := len(tb.fd.BotMessages(tb.channel)); n != 0 {
		t.Errorf("%d messages in the channel; the slash command's webhook took the answer", n)
	}
}

// When Discord refuses the slash command's webhook, the answer, file
// included, goes to the channel.
func TestSlashAnswerFallsBackToTheChannelWithTheAttachment(t *testing.T) {
	tb := startBot(t, Options{MaxReplyMessages: 2})
	id := tb.fd.Interact(tb.channel, tb.user, "claude", map[string]string{"prompt": "long"})
	tb.fd.Wait(t, "the deferral", waitLong, func() bool { return len(tb.fd.Callbacks(id)) == 1 })
	tb.fd.Fail(fakediscord.Fault{Method: "PATCH", Path: "/webhooks/", Status: 404})
	text := longAnswer(5 * reply.DiscordLimit)
	if err := tb.Reply(context.Background(), tb.intake.taken()[0], text); err != nil {
		t.Fatal(err)
	}
	flush(t, tb)
	msgs := tb.fd.BotMessages(tb.channel)
	if len(msgs) != 2 || len(msgs[1].Files) != 1 || string(msgs[1].Files[0].Data) != text {
		t.Fatalf("channel messages = %d (files on the last: %d); want 2, the last with answer.md", len(msgs), len(msgs[len(msgs)-1].Files))
	}
	if strings.Contains(tb.logs.String(), "itoken-") {
		t.Error("the interaction token reached the log")
	}
}

// retryIns are the retry_in values (ms) of the pending-reply log lines.
func retryIns(t *testing.T, l *logBuffer) []int64 {
	t.Helper()
	var out []int64
	for _, line := range l.lines("reply not delivered yet") {
		var v struct {
			RetryIn  int64  `json:"retry_in_ms"`
			Attempt  int    `json:"attempt"`
			Next     string `json:"next_retry"`
			Pending  bool   `json:"pending"`
			Length   int    `json:"length"`
			Channel  string `json:"channel"`
			Severity string `json:"level"`
		}
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if v.Attempt != len(out)+1 || v.Next == "" || !v.Pending || v.Length == 0 || v.Channel == "" || v.Severity != "warn" {
			t.Errorf("pending log line lacks attempt, next retry, length or channel: %s", line)
		}
		out = append(out, v.RetryIn)
	}
	return out
}

// pendingLogs is how many times a reply was logged as pending.
func (tb *testBot) pendingLogs() int { return len(tb.logs.lines("reply not delivered yet")) }

// advance waits until the delivery goroutine waits on the clock, then
// moves it.
func advance(t *testing.T, clock *clockwork.FakeClock, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatalf("no retry is waiting: %v", err)
	}
	clock.Advance(d)
}

// A reply Discord cannot take is kept, retried with a growing, capped
// backoff, and posted once when Discord recovers; replies in its channel
// wait behind it in order, other channels do not.
func TestPendingReplyIsRetriedUntilDiscordRecovers(t *testing.T) {
	clock := clockwork.NewFakeClock()
	tb := startBot(t, Options{Clock: clock, DeliveryBackoff: time.Second, DeliveryMaxBackoff: 4 * time.Second, DeliveryWindow: time.Hour})
	other := tb.fd.AddChannel(fakediscord.Channel{GuildID: tb.guild, Type: discord.GuildText, Name: "other"})
	path := "/channels/" + tb.channel.String() + "/messages"
	tb.fd.Fail(fakediscord.Fault{Method: "POST", Path: path, Status: 503, Times: 1 << 30})

	prompt := tb.fd.Post(tb.channel, tb.user, "first prompt")
	second := tb.fd.Post(tb.channel, tb.user, "second prompt")
	ctx := context.Background()
	if err := tb.Reply(ctx, tb.event(1, tb.channel, prompt.ID), "first answer"); err != nil {
		t.Fatal(err)
	}
	if err := tb.Reply(ctx, tb.event(2, tb.channel, second.ID), longAnswer(3000)); err != nil {
		t.Fatal(err)
	}
	if err := tb.Reply(ctx, tb.event(3, other, 0), "elsewhere"); err != nil {
		t.Fatal(err)
	}
	// Reply returned with nothing delivered in the failing channel; the
	// other channel is not held up.
	tb.fd.Wait(t, "the other channel's reply", waitLong, func() bool { return len(tb.fd.BotMessages(other)) == 1 })
	tb.fd.Wait(t, "two replies pending", waitLong, func() bool { return tb.Pending() == 2 })
	for range 4 {
		advance(t, clock, 4*time.Second)
	}
	tb.fd.Wait(t, "five attempts", waitLong, func() bool { return len(tb.requests("POST", path)) >= 5 })
	tb.fd.ClearFaults()
	advance(t, clock, 4*time.Second)
	flush(t, tb)

	if diff := cmp.Diff([]int64{1000, 2000, 4000, 4000, 4000}, retryIns(t, tb.logs)); diff != "" {
		t.Errorf("retry waits (-want +got):\n%s", diff)
	}
	var got []string
	for _, m := range tb.fd.BotMessages(tb.channel) {
		got = append(got, m.Content)
	}
	want := append([]string{"first answer"}, reply.Split(longAnswer(3000), reply.DiscordLimit)...)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("messages, each once and in order (-want +got):\n%s", diff)
	}
	if len(tb.logs.lines("pending reply delivered")) != 1 {
		t.Error("the late delivery is not logged")
	}
}

func TestPendingReplyIsDroppedAfterTheDeliveryWindow(t *testing.T) {
	clock := clockwork.NewFakeClock()
	tb := startBot(t, Options{Clock: clock})
	path := "/channels/" + tb.channel.String() + "/messages"
	tb.fd.Fail(fakediscord.Fault{Method: "POST", Path: path, Status: 502, Times: 1 << 30})
	start := clock.Now()
	if err := tb.Reply(context.Background(), tb.event(1, tb.channel, 0), "lost answer"); err != nil {
		t.Fatal(err)
	}
	dropped := func() bool { return len(tb.logs.lines("reply dropped")) > 0 }
	for i := 1; ; i++ {
		if i > 40 {
			t.Fatalf("not dropped after %v", clock.Since(start))
		}
		tb.fd.Wait(t, "a failed attempt", waitLong, func() bool { return tb.pendingLogs() >= i || dropped() })
		if dropped() {
			break
		}
		advance(t, clock, time.Minute)
	}
	if took := clock.Since(start); took < 15*time.Minute || took > 16*time.Minute {
		t.Errorf("dropped after %v, want the default window of 15 min", took)
	}
	waits := retryIns(t, tb.logs)
	if len(waits) < 10 || waits[0] != 1000 || waits[1] != 2000 || waits[7] != 60000 {
		t.Errorf("retry waits %v; want 1 s doubling to at most 1 min", waits)
	}
	drop := tb.logs.lines("reply dropped")[0]
	if !strings.Contains(drop, `"length":11`) || !strings.Contains(drop, `"level":"error"`) {
		t.Errorf("drop log lacks the length: %s", drop)
	}
	if n, attempts := len(tb.requests("POST", path)), len(waits)+1; n != attempts {
		t.Errorf("%d requests for %d attempts", n, attempts)
	}
	if n := len(tb.fd.BotMessages(tb.channel)); n != 0 {
		t.Errorf("%d messages posted", n)
	}
	if n := tb.Pending(); n != 0 {
		t.Errorf("Pending = %d after the drop", n)
	}
}

func TestReplyRefusedWithA4xxIsNotRetried(t *testing.T) {
	tb := startBot(t, Options{})
	path := "/channels/" + tb.channel.String() + "/messages"
	tb.fd.Fail(fakediscord.Fault{Method: "POST", Path: path, Status: 403})
	if err := tb.Reply(context.Background(), tb.event(1, tb.channel, 0), "forbidden"); err != nil {
		t.Fatal(err)
	}
	flush(t, tb)
	if n := len(tb.requests("POST", path)); n != 1 {
		t.Errorf("%d attempts, want 1", n)
	}
	if len(tb.logs.lines("reply not delivered: Discord refused it")) != 1 || len(tb.logs.lines("reply not delivered yet")) != 0 {
		t.Errorf("want one refusal logged and no pending reply:\n%s", tb.logs.String())
	}
}

// Flush is for shutdown: a reply waiting out a long backoff is retried at
// the first one, and Flush returns once it is delivered.
func TestFlushRetriesPendingRepliesSooner(t *testing.T) {
	clock := clockwork.NewFakeClock()
	tb := startBot(t, Options{Clock: clock, DeliveryBackoff: time.Second, DeliveryMaxBackoff: time.Hour, DeliveryWindow: 24 * time.Hour})
	path := "/channels/" + tb.channel.String() + "/messages"
	tb.fd.Fail(fakediscord.Fault{Method: "POST", Path: path, Status: 500, Times: 1 << 30})
	if err := tb.Reply(context.Background(), tb.event(1, tb.channel, 0), "late"); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 5; i++ {
		tb.fd.Wait(t, "a failed attempt", waitLong, func() bool { return tb.pendingLogs() >= i })
		if i < 5 {
			advance(t, clock, time.Hour)
		}
	}
	tb.fd.ClearFaults() // the next retry is 16 s away
	flushed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLong)
		defer cancel()
		flushed <- tb.Flush(ctx)
	}()
	tb.waitLog("retrying the pending reply sooner")
	advance(t, clock, time.Second)
	if err := <-flushed; err != nil {
		t.Fatalf("Flush = %v", err)
	}
	if msgs := tb.fd.BotMessages(tb.channel); len(msgs) != 1 || msgs[0].Content != "late" {
		t.Errorf("messages = %+v, want the reply once", msgs)
	}
}

func TestCloseDropsPendingRepliesAndSaysSo(t *testing.T) {
	tb := startBot(t, Options{})
	path := "/channels/" + tb.channel.String() + "/messages"
	tb.fd.Fail(fakediscord.Fault{Method: "POST", Path: path, Status: 503, Times: 1 << 30})
	if err := tb.Reply(context.Background(), tb.event(1, tb.channel, 0), "never"); err != nil {
		t.Fatal(err)
	}
	tb.waitLog("reply not delivered yet")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := tb.Flush(ctx); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "1 replies") {
		t.Errorf("Flush with an ended context = %v, want the pending count and the context's error", err)
	}
	tb.Close()
	if lines := tb.logs.lines("reply dropped: the gateway stopped"); len(lines) != 1 || !strings.Contains(lines[0], `"length":5`) {
		t.Errorf("want the dropped reply logged with its length:\n%s", tb.logs.String())
	}
}

func TestRetryDelay(t *testing.T) {
	b := &Bot{opts: Options{DeliveryBackoff: time.Second, DeliveryMaxBackoff: 8 * time.Second}}
	tests := []struct {
		name    string
		err     error
		attempt int
		want    time.Duration
		ok      bool
	}{
		{"5xx", &httputil.HTTPError{Status: 502}, 1, time.Second, true},
		{"5xx grows", &httputil.HTTPError{Status: 503}, 3, 4 * time.Second, true},
		{"5xx capped", &httputil.HTTPError{Status: 500}, 10, 8 * time.Second, true},
		{"429 honours retry_after", &httputil.HTTPError{Status: 429, Body: []byte(`{"retry_after": 45.5}`)}, 1, 45500 * time.Millisecond, true},
		{"429 without retry_after", &httputil.HTTPError{Status: 429}, 2, 2 * time.Second, true},
		{"network", httputil.RequestError{}, 1, time.Second, true},
		{"403", &httputil.HTTPError{Status: 403}, 1, 0, false},
		{"404", &httputil.HTTPError{Status: 404}, 1, 0, false},
		{"other", errors.New("bad JSON"), 1, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := b.retryDelay(tt.err, tt.attempt)
			if got != tt.want || ok != tt.ok {
				t.Errorf("retryDelay = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestOutboxIsBounded(t *testing.T) {
	add := func(o *outbox, d *delivery, serve func(*delivery)) bool {
		_, ok := o.add(d, serve)
		return ok
	}
	o := newOutbox()
	hold := func(*delivery) {} // nothing is ever delivered
	for i := range maxPendingReplies {
		if !add(&o, &delivery{channel: discord.ChannelID(i%7 + 1), size: 10}, hold) {
			t.Fatalf("reply %d refused", i+1)
		}
	}
	if add(&o, &delivery{channel: 1, size: 10}, hold) {
		t.Errorf("reply %d taken; the bound is %d", maxPendingReplies+1, maxPendingReplies)
	}

	o = newOutbox()
	if !add(&o, &delivery{channel: 1, size: maxPendingBytes + 1}, hold) {
		t.Error("a large reply refused while none is waiting")
	}
	if add(&o, &delivery{channel: 2, size: 1}, hold) {
		t.Error("a reply taken beyond maxPendingBytes")
	}
}

// deliveryLog records the DeliveryLog calls, in order.
type deliveryLog struct {
	mu       sync.Mutex
	calls    []string
	takenBy  map[uint64]bool // events another process took over
	replied  chan uint64
	recorded map[uint64]bool
}

func newDeliveryLog() *deliveryLog {
	return &deliveryLog{takenBy: map[uint64]bool{}, replied: make(chan uint64, 16), recorded: map[uint64]bool{}}
}

func (l *deliveryLog) add(format string, args ...any) {
	l.mu.Lock()
	l.calls = append(l.calls, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

func (l *deliveryLog) Handed(event uint64) { l.add("handed %d", event) }

func (l *deliveryLog) Replied(event uint64, text string, _ []string) error {
	l.add("replied %d", event)
	l.mu.Lock()
	taken := l.takenBy[event]
	l.recorded[event] = true
	l.mu.Unlock()
	l.replied <- event
	if taken {
		return ErrTakenOver
	}
	return nil
}

func (l *deliveryLog) Delivered(event uint64, chunk int, _ string) {
	l.add("delivered %d/%d", event, chunk)
}

func (l *deliveryLog) Settled(event uint64, delivered bool) { l.add("settled %d %v", event, delivered) }

func (l *deliveryLog) wasRecorded(event uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.recorded[event]
}

// A reply is recorded on the outbox's goroutine before it is posted, so
// that the turn goes on without waiting for the disk; a reply that waits
// behind another (Discord failing) is recorded before Reply returns, so
// that a restart meanwhile finds it; a reply whose event another process
// took over is not posted.
func TestRepliesAreRecordedBeforeTheyArePosted(t *testing.T) {
	clock := clockwork.NewFakeClock()
	log := newDeliveryLog()
	tb := startBot(t, Options{Clock: clock, Deliveries: log, DeliveryBackoff: time.Second, DeliveryMaxBackoff: time.Second, DeliveryWindow: time.Hour})
	path := "/channels/" + tb.channel.String() + "/messages"
	tb.fd.Fail(fakediscord.Fault{Method: "POST", Path: path, Status: 503, Times: 1 << 30})
	first := tb.fd.Post(tb.channel, tb.user, "first prompt")
	second := tb.fd.Post(tb.channel, tb.user, "second prompt")
	third := tb.fd.Post(tb.channel, tb.user, "third prompt")
	log.takenBy[3] = true
	ctx := context.Background()
	if err := tb.Reply(ctx, tb.event(1, tb.channel, first.ID), "first answer"); err != nil {
		t.Fatal(err)
	}
	if got := <-log.replied; got != 1 {
		t.Fatalf("recorded %d first, want 1", got)
	}
	if err := tb.Reply(ctx, tb.event(2, tb.channel, second.ID), "second answer"); err != nil {
		t.Fatal(err)
	}
	if !log.wasRecorded(2) {
		t.Error("a reply waiting behind another was not recorded before Reply returned")
	}
	if err := tb.Reply(ctx, tb.event(3, tb.channel, third.ID), "third answer"); err != nil {
		t.Fatal(err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, waitLong)
	defer cancel()
	if err := clock.BlockUntilContext(waitCtx, 1); err != nil {
		t.Fatalf("the first reply is not waiting for a retry: %v", err)
	}
	tb.fd.ClearFaults()
	clock.Advance(time.Second)
	flush(t, tb)

	var got []string
	for _, m := range tb.fd.BotMessages(tb.channel) {
		got = append(got, m.Content)
	}
	if diff := cmp.Diff([]string{"first answer", "second answer"}, got); diff != "" {
		t.Errorf("posted (-want +got; the third was taken over):\n%s", diff)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	want := []string{"handed 1", "replied 1", "handed 2", "replied 2", "handed 3", "replied 3", "delivered 1/0", "settled 1 true", "delivered 2/0", "settled 2 true"}
	if diff := cmp.Diff(want, log.calls); diff != "" {
		t.Errorf("delivery log (-want +got):\n%s", diff)
	}
}
