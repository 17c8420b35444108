package gateway

import (
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/agentgateway/gateway/internal/config"
)

// ConnectNATS connects to NATS_URL with the gateway's credentials
// (NATS_CREDS_FILE or NATS_TOKEN), for a command that talks to the
// gateway's buckets once (`gateway config push`): no reconnecting. role
// names the connection on the server's monitoring pages. Its errors name
// NATS_URL, never a secret.
func ConnectNATS(cfg *config.Config, role string) (*nats.Conn, error) {
	if len(cfg.NATSURLs) == 0 {
		return nil, fmt.Errorf("%s is not set: there is no NATS server to talk to", config.EnvNATSURL)
	}
	opts := append([]nats.Option{nats.Name(connectionName() + "-" + role), nats.Timeout(5 * time.Second)}, natsAuth(cfg)...)
	nc, err := nats.Connect(strings.Join(cfg.NATSURLs, ","), opts...)
	if err != nil {
		return nil, fmt.Errorf("cannot connect to NATS at %s=%s: %w", config.EnvNATSURL, redactedURLs(cfg.NATSURLs), err)
	}
	return nc, nil
}
