package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/agentgateway/gateway/internal/agentuser"
	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/gateway"
	"github.com/agentgateway/gateway/internal/hold"
	"github.com/agentgateway/gateway/internal/inbox"
	"github.com/agentgateway/gateway/internal/jsinbox"
)

// agentUserChecks runs the start check of AGENT_USER, as `gateway run`
// would: one failed check per problem, each with its fix.
func agentUserChecks(cfg *config.Config, envFile string) []check {
	if cfg.AgentUser == "" {
		return nil
	}
	const need = "an AGENT_USER setup that holds"
	u, err := gateway.CheckAgentUser(cfg, envFile)
	var unsafe *agentuser.CheckError
	switch {
	case errors.As(err, &unsafe):
		var out []check
		for _, p := range unsafe.Problems {
			out = append(out, check{Name: "agent-user", Detail: p.String(), need: need})
		}
		return out
	case err != nil:
		return []check{{Name: "agent-user", Detail: err.Error(), need: need}}
	}
	return []check{{Name: "agent-user", OK: true,
		Detail: fmt.Sprintf("the agent CLIs run as %s (uid %d); it can reach its files and none of the gateway's", u.Name, u.UID)}}
}

// holdChecks lists the schedule changes the agent made that wait for an
// approver's Apply or Discard.
func holdChecks(cfg *config.Config) []check {
	holds, err := hold.ReadPending(cfg.ConfigDir)
	if err != nil {
		return []check{{Name: "schedule", Warning: true, Detail: err.Error()}}
	}
	var out []check
	for _, h := range holds {
		where := "not posted yet: set OUTPUT_CHANNEL_ID"
		if h.Message != "" {
			where = "Apply or Discard in channel " + h.Channel
		}
		out = append(out, check{Name: "schedule", Warning: true,
			Detail: fmt.Sprintf("a change to %s made during an agent turn is held since %s (%s)", h.File, h.Created.Format("2006-01-02 15:04 MST"), where)})
	}
	return out
}

// natsChecks looks at the inbox on NATS JetStream (NATS_URL): the
// connection, the stream, its consumers and the buckets, and the gateway's
// processes that send heartbeats there, changing nothing.
func natsChecks(ctx context.Context, cfg *config.Config) []check {
	err := gateway.CheckNATS(ctx, cfg)
	switch {
	case errors.Is(err, jsinbox.ErrNotSetUp):
		return append([]check{{Name: "inbox", OK: true, Detail: "NATS JetStream: " + err.Error()}}, workerChecks(ctx, cfg, time.Now())...)
	case err != nil:
		return []check{{Name: "inbox", Detail: err.Error(), need: "NATS JetStream at NATS_URL", runOnly: true}}
	}
	return append([]check{{Name: "inbox", OK: true, Detail: "NATS JetStream: the stream " + jsinbox.StreamName + ", its consumers and the buckets match the settings"}},
		workerChecks(ctx, cfg, time.Now())...)
}

// inboxChecks describe the inbox: its size, the events waiting or running
// (a stopped gateway takes them up at its next start), and the failed ones.
func inboxChecks(ctx context.Context, cfg *config.Config) []check {
	if len(cfg.NATSURLs) > 0 {
		return natsChecks(ctx, cfg)
	}
	st, torn, err := inbox.Inspect(filepath.Join(cfg.ConfigDir, gateway.InboxFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return []check{{Name: "inbox", OK: true, Detail: "no inbox yet: `gateway run` creates " + gateway.InboxFile}}
	case err != nil:
		return []check{{Name: "inbox", Detail: "cannot read " + gateway.InboxFile + ": " + err.Error(), need: "a readable inbox", runOnly: true}}
	}
	out := []check{{Name: "inbox", OK: true, Detail: fmt.Sprintf("%s: %.1f MB, %d events kept, %d waiting, %d running, %d failed",
		gateway.InboxFile, float64(st.Bytes)/(1<<20), st.Entries, st.Waiting, st.Running, st.Failed)}}
	if torn > 0 {
		out = append(out, check{Name: "inbox", Warning: true, Detail: fmt.Sprintf("the last %d bytes do not read as a record: a write in progress, or a record torn by a crash that the next start cuts off", torn)})
	}
	if st.Failed > 0 {
		out = append(out, check{Name: "inbox", Warning: true, Detail: fmt.Sprintf("%d events kept ended failed (their users were told; the gateway's log says why)", st.Failed)})
	}
	return out
}
