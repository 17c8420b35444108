package gateway

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/cluster"
	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/jsinbox"
	"github.com/agentgateway/gateway/internal/kvdeferred"
	"github.com/agentgateway/gateway/internal/kvpersona"
	"github.com/agentgateway/gateway/internal/kvstate"
	"github.com/agentgateway/gateway/internal/proc"
)

// sharedState is what follows a channel to whichever process runs its
// next turn, on a gateway whose inbox is on NATS (docs/scale-out.md §4):
// the session bindings and channel settings, the CLIs' session files,
// memory.md, and the operator's persona files. Every process keeps its
// own CONFIG_DIR as a local copy.
type sharedState struct {
	js          jetstream.JetStream
	logs        *sharedLogs // the cost ledger and the archive
	sessions    *kvstate.Sessions
	transcripts *kvstate.Transcripts
	memory      *kvpersona.Memory
	persona     *kvpersona.Persona
	// mirror writes the persona into a worker's CONFIG_DIR; nil on the
	// node that has the files on disk.
	mirror *kvpersona.Mirror
	// publisher pushes that node's persona files when they change; nil
	// on a worker.
	publisher *kvpersona.Publisher
}

// openShared opens the buckets of the shared state. agent is AGENT_USER's
// credential (nil without), given the restored session files. A worker
// mirrors the persona; gateway run publishes its own.
func openShared(ctx context.Context, cfg *config.Config, n *natsInbox, worker bool, agent *proc.Credential, log zerolog.Logger) (*sharedState, error) {
	ctx, cancel := context.WithTimeout(ctx, natsOpenTimeout)
	defer cancel()
	js, err := jetstream.New(n.nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	s := &sharedState{js: js}
	if s.logs, err = openSharedLogs(cfg, js, log); err != nil {
		return nil, err
	}
	o := kvstate.Options{Replicas: cfg.NATSReplicas}
	if s.sessions, err = kvstate.OpenSessions(ctx, js, o); err != nil {
		return nil, err
	}
	if s.transcripts, err = kvstate.OpenTranscripts(ctx, js, kvstate.TranscriptOptions{Options: o, Agent: agent}); err != nil {
		return nil, err
	}
	if s.memory, err = kvpersona.OpenMemory(ctx, js, cfg.NATSReplicas, log.With().Str("component", "memory").Logger()); err != nil {
		return nil, err
	}
	if s.persona, err = kvpersona.OpenPersona(ctx, js, cfg.NATSReplicas); err != nil {
		return nil, err
	}
	if worker {
		if s.mirror, err = s.persona.Mirror(ctx, log.With().Str("component", "persona").Logger()); err != nil {
			return nil, err
		}
	} else {
		s.publisher = s.persona.Publisher(cfg.ConfigDir)
	}
	return s, nil
}

// close stops the persona's mirror.
func (s *sharedState) close() {
	if s != nil && s.mirror != nil {
		s.mirror.Close()
	}
}

// syncPersona brings the operator's persona files into CONFIG_DIR (a
// worker) or pushes CONFIG_DIR's to the bucket (gateway run); both cost
// nothing when nothing changed. It returns the files it wrote into
// CONFIG_DIR (a worker).
func (s *sharedState) syncPersona(ctx context.Context, dir string, log zerolog.Logger) (written []string) {
	if s == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if s.mirror != nil {
		changed, err := s.mirror.Sync(ctx, dir)
		if err != nil {
			log.Warn().Err(err).Msg("could not bring the persona files from NATS; this turn uses the copies in CONFIG_DIR")
		} else if len(changed) > 0 {
			log.Info().Strs("files", changed).Msg("persona files updated from NATS")
		}
		return changed
	}
	ch, err := s.publisher.Publish(ctx)
	if err != nil {
		log.Warn().Err(err).Msg("could not publish the persona files to NATS; workers keep the copies they have")
	} else if !ch.Empty() {
		log.Info().Strs("written", ch.Written).Strs("deleted", ch.Deleted).Msg("persona files published to the workers")
	}
	return nil
}

// agentHome is the HOME the CLIs run with, where they keep their sessions.
func agentHome(runAs *proc.Credential, home string) string {
	if runAs != nil && home != "" {
		return home
	}
	h, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return h
}

// patientTranscripts saves a turn's session files until NATS takes them,
// for up to limit: the turn's event cannot finish while NATS is out of
// reach anyway, and a copy saved late is better than the next turn on
// another machine resuming an older one, which would silently lose a turn
// the user saw answered.
type patientTranscripts struct {
	*kvstate.Transcripts
	limit time.Duration
	log   zerolog.Logger
}

func (p patientTranscripts) Save(ctx context.Context, backend, home, workDir, id string) error {
	wait := 100 * time.Millisecond
	deadline := time.Now().Add(p.limit)
	for {
		err := p.Transcripts.Save(ctx, backend, home, workDir, id)
		if err == nil || errors.Is(err, backends.ErrNotMovable) || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		p.log.Warn().Err(err).Str("session", id).Int64("retry_in_ms", wait.Milliseconds()).Msg("cannot save the session's files to NATS yet")
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// checkSharedBuckets checks the buckets of the shared state as the
// processes create them, creating nothing (doctor): a missing one is
// jsinbox.ErrNotSetUp.
func checkSharedBuckets(ctx context.Context, cfg *config.Config, js jetstream.JetStream) error {
	r := cfg.NATSReplicas
	for _, want := range []jetstream.KeyValueConfig{
		kvstate.SessionsConfig(kvstate.Options{Replicas: r}),
		kvpersona.PersonaBucketConfig(r),
		kvpersona.MemoryBucketConfig(r),
		kvdeferred.BucketConfig(r),
		cluster.LeaseBucket(cluster.DefaultLeaseTTL, r),
		cluster.WorkerBucket(cluster.DefaultWorkerTTL, r),
	} {
		if _, err := jsinbox.CheckBucket(ctx, js, want); err != nil {
			return err
		}
	}
	want := kvstate.TranscriptsConfig(kvstate.Options{Replicas: r})
	if _, err := js.ObjectStore(ctx, want.Bucket); errors.Is(err, jetstream.ErrBucketNotFound) {
		return fmt.Errorf("object store %s: %w", want.Bucket, jsinbox.ErrNotSetUp)
	} else if err != nil {
		return fmt.Errorf("look up object store %s: %w", want.Bucket, err)
	}
	return nil
}
