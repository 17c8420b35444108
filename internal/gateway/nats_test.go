package gateway

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/config"
	gwdiscord "github.com/agentgateway/gateway/internal/discord"
	"github.com/agentgateway/gateway/internal/jsinbox"
	"github.com/agentgateway/gateway/internal/natstest"
	"github.com/agentgateway/gateway/internal/queue"
)

// runNATS starts a real NATS server with JetStream on a random port,
// storing in a temporary directory; the test's cleanup shuts it down.
// (The lines of internal/jsinbox's server_test.go this package needs.)
func runNATS(t testing.TB) *server.Server { return natstest.Start(t, t.TempDir()) }

// inboxKind is one of the inboxes the gateway can run on; env gives the
// settings that select it (and starts what it needs), to be passed to every
// start of the gateway in one test.
type inboxKind struct {
	name string
	env  func(t *testing.T) map[string]string
}

var inboxKinds = []inboxKind{
	{"embedded", func(*testing.T) map[string]string { return nil }},
	{"nats", func(t *testing.T) map[string]string {
		// Few partitions: each is a consumer the first start creates.
		return map[string]string{config.EnvNATSURL: runNATS(t).ClientURL(), config.EnvNATSPartitions: "8"}
	}},
}

// eachInbox runs f once per inbox kind, as a subtest.
func eachInbox(t *testing.T, f func(t *testing.T, env map[string]string)) {
	for _, k := range inboxKinds {
		t.Run(k.name, func(t *testing.T) { f(t, k.env(t)) })
	}
}

// checkNoInboxFile fails the test when env puts the inbox on NATS and yet
// CONFIG_DIR has an embedded inbox.
func checkNoInboxFile(t *testing.T, env map[string]string, configDir string) {
	t.Helper()
	if env[config.EnvNATSURL] == "" {
		return
	}
	if _, err := os.Stat(filepath.Join(configDir, InboxFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s in CONFIG_DIR with NATS_URL set (stat: %v): the inbox must be on NATS only", InboxFile, err)
	}
}

// openTestInbox opens the inbox the gateway would open with env in dir.
func openTestInbox(t *testing.T, dir string, env map[string]string) Inbox {
	t.Helper()
	environ := []string{config.EnvConfigDir + "=" + dir}
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	cfg, err := config.Load(config.LoadOptions{Environ: environ, EnvFile: emptyEnvFile(t)})
	if err != nil {
		t.Fatal(err)
	}
	in, err := OpenInbox(context.Background(), cfg, zerolog.New(zerolog.NewTestWriter(t)))
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func emptyEnvFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), ".env")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A mention is answered with the inbox on NATS, and the event leaves
// the stream once answered.
func TestNATSInboxAnswersAMention(t *testing.T) {
	srv := runNATS(t)
	h := startGateway(t, harnessOptions{env: map[string]string{config.EnvNATSURL: srv.ClientURL()}})
	h.mention(h.channel, "hello")
	if msgs := h.waitReplies(h.channel, 1); msgs[0].Content != "echo: hello" {
		t.Fatalf("reply = %q", msgs[0].Content)
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	checkNoInboxFile(t, map[string]string{config.EnvNATSURL: srv.ClientURL()}, h.cfg.ConfigDir)
	js := jetStream(t, srv)
	st, err := js.Stream(context.Background(), jsinbox.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	if info := st.CachedInfo(); info.State.Msgs != 0 || info.State.LastSeq == 0 {
		t.Errorf("stream holds %d events with last sequence %d, want the answered event stored, then removed", info.State.Msgs, info.State.LastSeq)
	}
}

func jetStream(t *testing.T, srv *server.Server) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// When the stream took a sequence the gateway never heard of (a publish
// stored whose acknowledgement was lost), the next events are still
// accepted: the stream numbers them, not the gateway.
func TestNATSInboxFollowsTheStreamsSequence(t *testing.T) {
	srv := runNATS(t)
	h := startGateway(t, harnessOptions{env: map[string]string{config.EnvNATSURL: srv.ClientURL()}})
	h.mention(h.channel, "one")
	h.waitReplies(h.channel, 1)
	// A message stored behind the gateway's back, then taken out.
	js := jetStream(t, srv)
	ctx := context.Background()
	ack, err := js.Publish(ctx, "gateway.events.0.system", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, jsinbox.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteMsg(ctx, ack.Sequence); err != nil {
		t.Fatal(err)
	}
	h.mention(h.channel, "two")
	if msgs := h.waitReplies(h.channel, 2); msgs[1].Content != "echo: two" {
		t.Fatalf("second reply = %q", msgs[1].Content)
	}
}

// A NATS server that cannot be reached stops the start with an error
// naming NATS_URL, and without the password the URL carries.
func TestNATSInboxUnreachableIsAClearStartError(t *testing.T) {
	srv := runNATS(t)
	url := strings.Replace(srv.ClientURL(), "nats://", "nats://gw:hunter2secret@", 1)
	srv.Shutdown()
	srv.WaitForShutdown()
	cfg, err := config.Load(config.LoadOptions{EnvFile: emptyEnvFile(t), Environ: []string{
		config.EnvConfigDir + "=" + t.TempDir(), config.EnvNATSURL + "=" + url,
	}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = OpenInbox(context.Background(), cfg, zerolog.New(zerolog.NewTestWriter(t)))
	if err == nil {
		t.Fatal("OpenInbox succeeded with the server down")
	}
	msg := err.Error()
	if !strings.Contains(msg, "NATS_URL=nats://redacted@127.0.0.1:") || !strings.Contains(msg, "cannot connect") {
		t.Errorf("error = %q, want it to say it cannot connect and name NATS_URL", msg)
	}
	if strings.Contains(msg, "hunter2secret") {
		t.Errorf("error shows the password: %q", msg)
	}
	checkNoInboxFile(t, map[string]string{config.EnvNATSURL: url}, cfg.ConfigDir)
}

// A stream made with other settings is not changed: the start stops and
// says what differs.
func TestNATSInboxStreamWithOtherSettingsStopsTheStart(t *testing.T) {
	srv := runNATS(t)
	env := map[string]string{config.EnvNATSURL: srv.ClientURL()}
	openTestInbox(t, t.TempDir(), env).Close()
	env[config.EnvMaxQueueDepth] = "7"
	environ := []string{config.EnvConfigDir + "=" + t.TempDir()}
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	cfg, err := config.Load(config.LoadOptions{EnvFile: emptyEnvFile(t), Environ: environ})
	if err != nil {
		t.Fatal(err)
	}
	_, err = OpenInbox(context.Background(), cfg, zerolog.New(zerolog.NewTestWriter(t)))
	if err == nil || !strings.Contains(err.Error(), "max_msgs is 100, want 7") || !strings.Contains(err.Error(), "NATS_URL=") {
		t.Fatalf("error = %v, want the stream's difference (max_msgs) and NATS_URL named", err)
	}
}

// BenchmarkInboxEvent measures one Discord prompt through the inbox as Run
// records it, on each inbox: intake is the store before the prompt is
// acknowledged (durable.AppendAssign, what the queue's Enqueue waits for);
// life adds its start, reply, delivery and finish.
func BenchmarkInboxEvent(b *testing.B) {
	for _, kind := range []string{"embedded", "nats"} {
		for _, life := range []bool{false, true} {
			name := kind + "/intake"
			if life {
				name = kind + "/life"
			}
			b.Run(name, func(b *testing.B) {
				env := []string{config.EnvConfigDir + "=" + b.TempDir(), config.EnvMaxQueueDepth + "=10000000", config.EnvMaxChannelQueue + "=10000000"}
				if kind == "nats" {
					env = append(env, config.EnvNATSURL+"="+runNATS(b).ClientURL(), config.EnvNATSPartitions+"=8")
				}
				cfg, err := config.Load(config.LoadOptions{Environ: env})
				if err != nil {
					b.Fatal(err)
				}
				in, err := OpenInbox(context.Background(), cfg, zerolog.Nop())
				if err != nil {
					b.Fatal(err)
				}
				defer in.Close()
				d := newDurable(in, zerolog.Nop())
				next := in.LastID()
				b.ResetTimer()
				for i := range b.N {
					e := queue.Event{
						ID: next + 1, Time: time.Now(), Kind: queue.KindMessage, Source: gwdiscord.Source,
						ChannelID: fmt.Sprint(100 + i%100), Text: "hi", ReplyTo: fmt.Sprint(1000 + i), Key: gwdiscord.MessageKey(fmt.Sprint(1000 + i)),
					}
					e, err := d.AppendAssign(e)
					if err != nil {
						b.Fatal(err)
					}
					next = e.ID
					if !life {
						continue
					}
					d.started(e)
					if err := d.Replied(e.ID, "echo: hi", nil); err != nil {
						b.Fatal(err)
					}
					d.Delivered(e.ID, 0, "1")
					d.Settled(e.ID, true)
				}
			})
		}
	}
}
