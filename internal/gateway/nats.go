package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/inbox"
	"github.com/agentgateway/gateway/internal/jsinbox"
	"github.com/agentgateway/gateway/internal/queue"
)

// natsOpenTimeout bounds the first connection and the creation or check of
// the stream, consumers and buckets.
const natsOpenTimeout = 30 * time.Second

// errNATSDown is /readyz's answer while the connection to NATS is lost.
var errNATSDown = errors.New("the connection to NATS is lost (the client reconnects on its own)")

// natsInbox is the inbox on NATS JetStream with the connection it owns.
type natsInbox struct {
	*jsinbox.Inbox
	nc      *nats.Conn
	timeout time.Duration
	log     zerolog.Logger

	// stats caches Stats, which reads every kept record: a metrics scrape
	// every few seconds must not read the whole inbox each time.
	stats cachedStats
}

// statsEvery is how long the inbox's figures are reused.
const statsEvery = 30 * time.Second

// cachedStats reuses what read returned for statsEvery.
type cachedStats struct {
	read func() inbox.Stats
	now  func() time.Time

	mu   sync.Mutex
	at   time.Time
	last inbox.Stats
}

func (c *cachedStats) get() inbox.Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now := c.now(); c.at.IsZero() || now.Sub(c.at) >= statsEvery {
		c.last, c.at = c.read(), now
	}
	return c.last
}

// Stats are the inbox's figures as of at most statsEvery ago.
func (n *natsInbox) Stats() inbox.Stats { return n.stats.get() }

var (
	_ Inbox    = (*natsInbox)(nil)
	_ assigner = (*natsInbox)(nil)
)

// openNATSInbox connects to NATS_URL and opens the inbox there, creating
// the stream, consumers and buckets or checking the ones that exist. Its
// errors name NATS_URL, never a secret.
func openNATSInbox(ctx context.Context, cfg *config.Config, log zerolog.Logger) (*natsInbox, error) {
	servers := redactedURLs(cfg.NATSURLs)
	opts := []nats.Option{
		nats.Name(connectionName()),
		nats.Timeout(5 * time.Second),
		// Reconnect for as long as the gateway runs: events are refused
		// meanwhile, and taken again once NATS is back.
		nats.MaxReconnects(-1),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn().Err(err).Msg("lost the connection to NATS; reconnecting (events are refused until then)")
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info().Str("server", redactURL(nc.ConnectedUrl())).Msg("reconnected to NATS")
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			log.Warn().Err(err).Msg("NATS")
		}),
	}
	nc, err := nats.Connect(strings.Join(cfg.NATSURLs, ","), append(opts, natsAuth(cfg)...)...)
	if err != nil {
		return nil, fmt.Errorf("cannot connect to NATS at %s=%s: %w", config.EnvNATSURL, servers, err)
	}
	ctx, cancel := context.WithTimeout(ctx, natsOpenTimeout)
	defer cancel()
	js, err := jsinbox.Open(ctx, nc, natsInboxOptions(cfg))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("the inbox on NATS JetStream (%s=%s): %w", config.EnvNATSURL, servers, err)
	}
	log.Info().Str("server", redactURL(nc.ConnectedUrl())).Int("replicas", cfg.NATSReplicas).
		Int("partitions", cfg.NATSPartitions).Msg("the inbox is on NATS JetStream")
	n := &natsInbox{Inbox: js, nc: nc, timeout: 5 * time.Second, log: log}
	n.stats = cachedStats{read: js.Stats, now: time.Now}
	return n, nil
}

// natsAuth are the credentials of NATS_CREDS_FILE or NATS_TOKEN.
func natsAuth(cfg *config.Config) []nats.Option {
	switch {
	case cfg.NATSCredsFile != "":
		return []nats.Option{nats.UserCredentials(cfg.NATSCredsFile)}
	case cfg.NATSToken != "":
		return []nats.Option{nats.Token(cfg.NATSToken)}
	}
	return nil
}

// natsInboxOptions are the inbox's stream and bucket settings.
func natsInboxOptions(cfg *config.Config) jsinbox.Options {
	return jsinbox.Options{
		Partitions: cfg.NATSPartitions,
		Replicas:   cfg.NATSReplicas,
		MaxDepth:   cfg.MaxQueueDepth,
		MaxPerLane: cfg.MaxChannelQueue,
		AckWait:    cfg.NATSAckWait,
	}
}

// CheckNATS connects to NATS_URL and checks the inbox's stream, consumers
// and buckets against the settings, changing nothing (doctor). A missing
// one is jsinbox.ErrNotSetUp: the first `gateway run` creates it. Its
// errors name NATS_URL, never a secret.
func CheckNATS(ctx context.Context, cfg *config.Config) error {
	servers := redactedURLs(cfg.NATSURLs)
	opts := append([]nats.Option{nats.Name(connectionName() + "-doctor"), nats.Timeout(5 * time.Second)}, natsAuth(cfg)...)
	nc, err := nats.Connect(strings.Join(cfg.NATSURLs, ","), opts...)
	if err != nil {
		return fmt.Errorf("cannot connect to NATS at %s=%s: %w", config.EnvNATSURL, servers, err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, natsOpenTimeout)
	defer cancel()
	if err := jsinbox.Check(ctx, nc, natsInboxOptions(cfg)); err != nil {
		return fmt.Errorf("the inbox on NATS JetStream (%s=%s): %w", config.EnvNATSURL, servers, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	if err := checkSharedLogs(ctx, cfg, js); err != nil {
		return fmt.Errorf("the shared ledger and archive on NATS JetStream (%s=%s): %w", config.EnvNATSURL, servers, err)
	}
	if err := checkSharedBuckets(ctx, cfg, js); err != nil {
		return fmt.Errorf("the shared state on NATS JetStream (%s=%s): %w", config.EnvNATSURL, servers, err)
	}
	return nil
}

// Assign stores the event and returns it with the id the stream gave
// (its sequence), which the queue then uses.
func (n *natsInbox) Assign(e queue.Event, seen ...inbox.Seen) (queue.Event, error) {
	ctx, cancel := context.WithTimeout(context.Background(), n.timeout)
	defer cancel()
	return n.Inbox.Append(ctx, e, seen...)
}

// Unfinished returns the events the stream still holds; one that cannot be
// read is logged, since the start then takes up nothing.
func (n *natsInbox) Unfinished() []inbox.Entry {
	ctx, cancel := context.WithTimeout(context.Background(), natsOpenTimeout)
	defer cancel()
	out, err := n.Inbox.List(ctx)
	if err != nil {
		n.log.Error().Err(err).Msg("could not read the unfinished events from NATS; they are taken up at the next start")
	}
	return out
}

// Replied records the event's reply before it is posted. While NATS
// cannot be reached it tries again, for as long as it takes: the reply is
// posted only once it is recorded, or not at all when another process
// took the event over meanwhile (jsinbox.ErrFenced), which then answers it.
func (n *natsInbox) Replied(id uint64, text string, files ...string) error {
	wait := 100 * time.Millisecond
	for {
		err := n.Inbox.Replied(id, text, files...)
		if err == nil || errors.Is(err, jsinbox.ErrFenced) || errors.Is(err, jsinbox.ErrClosed) || errors.Is(err, jsinbox.ErrUnknown) {
			return err
		}
		n.log.Warn().Err(err).Uint64("event", id).Int64("retry_in_ms", wait.Milliseconds()).Msg("cannot record the reply in NATS; it is posted once recorded")
		time.Sleep(wait)
		wait = min(2*wait, 5*time.Second)
	}
}

// Err implements Inbox: NATS must be connected to store events.
func (n *natsInbox) Err() error {
	if !n.nc.IsConnected() {
		return errNATSDown
	}
	return nil
}

// Recovered implements Inbox: a stream has no torn record to cut off.
func (n *natsInbox) Recovered() int64 { return 0 }

// Close closes the inbox and its connection, flushing what is pending.
func (n *natsInbox) Close() error {
	err := n.Inbox.Close()
	if derr := n.nc.FlushTimeout(n.timeout); derr != nil && !errors.Is(derr, nats.ErrConnectionClosed) {
		err = errors.Join(err, fmt.Errorf("flush the NATS connection: %w", derr))
	}
	n.nc.Close()
	return err
}

// connectionName names the gateway's connection on the NATS server's
// monitoring pages.
func connectionName() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	return "gateway-" + host
}

// redactedURLs shows NATS_URL without a password or token.
func redactedURLs(urls []string) string {
	shown := make([]string, len(urls))
	for i, u := range urls {
		shown[i] = redactURL(u)
	}
	return strings.Join(shown, ",")
}

// redactURL drops a URL's user and password (a token may be the user).
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "<unparsable URL>"
	}
	if u.User != nil {
		u.User = url.User("redacted")
	}
	return u.String()
}
