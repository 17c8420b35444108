package gateway

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/archive"
	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/cost"
	"github.com/agentgateway/gateway/internal/kvlog"
)

// NodeIDFile names this process among the processes of a gateway on NATS,
// in CONFIG_DIR: the origin of the ledger's and the archive's records it
// shares. A CONFIG_DIR copied to start another process must lose it.
const NodeIDFile = "node-id"

// sharedLogs share the cost ledger and the conversation archive between
// the processes of a gateway on NATS (GATEWAY_LEDGER, GATEWAY_ARCHIVE):
// each process keeps its files and applies the others' records to them,
// so budgets, /cost and a channel's recent conversation are the whole
// gateway's.
type sharedLogs struct {
	js     jetstream.JetStream
	cfg    *config.Config
	origin string
	log    zerolog.Logger

	mu   sync.Mutex // guards logs
	logs []*kvlog.Log
}

// openSharedLogs reads (or makes) this process's node id.
func openSharedLogs(cfg *config.Config, js jetstream.JetStream, log zerolog.Logger) (*sharedLogs, error) {
	host, _ := os.Hostname()
	origin, err := kvlog.LoadOrigin(filepath.Join(cfg.ConfigDir, NodeIDFile), host)
	if err != nil {
		return nil, fmt.Errorf("this process's node id in CONFIG_DIR: %w", err)
	}
	return &sharedLogs{js: js, cfg: cfg, origin: origin, log: log}, nil
}

// shareLedger shares the ledger through GATEWAY_LEDGER; call it before
// any turn is recorded.
func (s *sharedLogs) shareLedger(ctx context.Context, l *cost.Ledger) error {
	o := cost.StreamOptions(s.cfg.NATSReplicas, s.origin)
	o.Log = s.log.With().Str("component", "ledger").Logger()
	lg, err := s.open(ctx, o, l)
	if err != nil {
		return fmt.Errorf("the cost ledger on NATS JetStream: %w", err)
	}
	l.Share(lg)
	return nil
}

// shareArchive shares the archive through GATEWAY_ARCHIVE; call it before
// any exchange is archived.
func (s *sharedLogs) shareArchive(ctx context.Context, a *archive.Archive) error {
	o := archive.StreamOptions(s.cfg.NATSReplicas, s.cfg.ArchiveDays, s.origin)
	o.Log = s.log.With().Str("component", "archive").Logger()
	lg, err := s.open(ctx, o, a)
	if err != nil {
		return fmt.Errorf("the conversation archive on NATS JetStream: %w", err)
	}
	a.Share(lg)
	return nil
}

func (s *sharedLogs) open(ctx context.Context, o kvlog.Options, local kvlog.Local) (*kvlog.Log, error) {
	ctx, cancel := context.WithTimeout(ctx, natsOpenTimeout)
	defer cancel()
	lg, err := kvlog.Open(ctx, s.js, o, local)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.logs = append(s.logs, lg)
	s.mu.Unlock()
	return lg, nil
}

// Run publishes and follows both logs until ctx ends. What is recorded
// after it returns is published at the next start.
func (s *sharedLogs) Run(ctx context.Context) error {
	s.mu.Lock()
	logs := append([]*kvlog.Log(nil), s.logs...)
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, lg := range logs {
		wg.Add(1)
		go func() { defer wg.Done(); lg.Run(ctx) }()
	}
	wg.Wait()
	return nil
}

// Flush publishes what both logs hold now, bounded by ctx (a stopping
// process, after Run returned); what is left goes out at the next start.
func (s *sharedLogs) Flush(ctx context.Context) {
	s.mu.Lock()
	logs := append([]*kvlog.Log(nil), s.logs...)
	s.mu.Unlock()
	for _, lg := range logs {
		if err := lg.Flush(ctx); err != nil {
			s.log.Warn().Err(err).Msg("records not yet on NATS are published at the next start")
			return
		}
	}
}

// checkSharedLogs checks both streams without creating them (doctor): a
// missing one is kvlog.ErrNotSetUp.
func checkSharedLogs(ctx context.Context, cfg *config.Config, js jetstream.JetStream) error {
	if err := kvlog.Check(ctx, js, cost.StreamOptions(cfg.NATSReplicas, "doctor")); err != nil {
		return err
	}
	return kvlog.Check(ctx, js, archive.StreamOptions(cfg.NATSReplicas, cfg.ArchiveDays, "doctor"))
}
