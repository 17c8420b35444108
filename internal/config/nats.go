package config

import (
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// natsSchemes are the URL schemes the NATS client connects with: plain,
// TLS, and WebSocket.
var natsSchemes = []string{"nats", "tls", "ws", "wss"}

// maxPartitions bounds NATS_PARTITIONS: each partition is a consumer, a
// Raft group on a cluster, so thousands would load the servers for little.
const maxPartitions = 4096

// parseNATSURLs parses NATS_URL: comma-separated nats://, tls://, ws:// or
// wss:// URLs with a host. A rejected URL is shown without its password
// or token.
func parseNATSURLs(name, s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	urls := splitList(s)
	if urls == nil {
		return nil, varErrorf(name, "%s: %s names no server (unset it for the embedded inbox)", name, quote(s))
	}
	var bad []string
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil {
			bad = append(bad, quote(masked))
			continue
		}
		ok := false
		for _, sc := range natsSchemes {
			ok = ok || strings.EqualFold(u.Scheme, sc)
		}
		if !ok || u.Hostname() == "" {
			bad = append(bad, quote(redactURL(raw)))
		}
	}
	if len(bad) > 0 {
		return nil, varErrorf(name, "%s: %s is not a nats://, tls://, ws:// or wss:// URL (e.g. nats://nats1:4222,nats://nats2:4222)",
			name, strings.Join(bad, ", "))
	}
	return urls, nil
}

// parseCredsFile takes NATS_CREDS_FILE when it names a regular file the
// gateway can read. Its content is the client's to parse, at connect.
func parseCredsFile(name, s string) (string, error) {
	if s == "" {
		return "", nil
	}
	f, err := os.Open(s)
	if err != nil {
		return "", varErrorf(name, "%s: cannot read %s: %v", name, s, reason(err))
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return "", varErrorf(name, "%s: %s is not a regular file", name, s)
	}
	return s, nil
}

// parseReplicas takes NATS_REPLICAS: 1, or 3 or 5 on a cluster (an even
// count adds a server to every quorum without surviving one more loss).
func parseReplicas(name, s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || (n != 1 && n != 3 && n != 5) {
		return 0, varErrorf(name, "%s: %s is not 1, 3 or 5 (1 for one NATS server, 3 for a cluster of three or more)", name, quote(s))
	}
	return n, nil
}

// parsePartitions takes NATS_PARTITIONS: 1 to maxPartitions.
func parsePartitions(name, s string) (int, error) {
	n, err := parseCount(name, s)
	if err != nil {
		return 0, err
	}
	if n > maxPartitions {
		return 0, varErrorf(name, "%s: %d is more than %d", name, n, maxPartitions)
	}
	return n, nil
}

// checkNATS reports the NATS settings that contradict each other: one
// way to authenticate at a time, and none without a server.
func (p *parser) checkNATS(c *Config) {
	if c.NATSCredsFile != "" && c.NATSToken != "" {
		p.problems = append(p.problems, varErrorf(EnvNATSCredsFile,
			"%s and %s are both set: the NATS server takes one of them; unset the other", EnvNATSCredsFile, EnvNATSToken))
		p.bad[EnvNATSCredsFile] = true
		c.NATSCredsFile = ""
	}
	if len(c.NATSURLs) == 0 && c.MaxConcurrent == 0 && !p.bad[EnvMaxConcurrent] {
		p.problems = append(p.problems, varErrorf(EnvMaxConcurrent,
			"%s is 0, so nothing would ever run: 0 means \"take prompts only\" on a gateway whose turns run on workers (%s); set it to 1 or more", EnvMaxConcurrent, EnvNATSURL))
		p.bad[EnvMaxConcurrent] = true
		c.MaxConcurrent, _ = strconv.Atoi(defaults[EnvMaxConcurrent])
	}
	if c.NATSAckWait > 0 && c.NATSAckWait < 3*time.Second {
		p.problems = append(p.problems, varErrorf(EnvNATSAckWait, "%s: %s is under 3s; a worker reports progress every third of it, and a shorter wait hands turns that are still running to another worker", EnvNATSAckWait, c.NATSAckWait))
		p.bad[EnvNATSAckWait] = true
		c.NATSAckWait = time.Minute
	}
	if len(c.NATSURLs) == 0 && (c.NATSCredsFile != "" || c.NATSToken != "") && !p.bad[EnvNATSURL] {
		p.problems = append(p.problems, varErrorf(EnvNATSURL,
			"%s is not set, so %s means nothing: set %s for the inbox on NATS, or unset it",
			EnvNATSURL, map[bool]string{true: EnvNATSCredsFile, false: EnvNATSToken}[c.NATSCredsFile != ""], EnvNATSURL))
	}
}
