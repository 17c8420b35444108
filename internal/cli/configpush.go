package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/gateway"
	"github.com/agentgateway/gateway/internal/kvpersona"
)

// configPushTimeout bounds the whole push: connecting, checking the bucket
// and writing the files.
const configPushTimeout = 30 * time.Second

type configPushOptions struct {
	io      streams
	envFile string
	dir     string
}

func newConfigPushCmd(io streams) *cobra.Command {
	opts := configPushOptions{io: io}
	return &cobra.Command{
		Use:   "push DIR",
		Short: "Upload the persona files in DIR for every worker (with NATS_URL)",
		Long: `push uploads the persona files in DIR to the gateway-persona bucket on
NATS, where every worker takes them from before its turns: soul.md,
identity.md, agents.md, user.md, tools.md, heartbeat.md, boot.md, the files
boot.md lists and the skills directory. memory.md is not among them: the
agent writes it, and the workers share it themselves. A file missing in DIR
is deleted from the bucket. A file larger than the persona reads (256 KiB),
or one that is not a regular file, stops the push before anything changes.
It connects with the gateway's settings (NATS_URL, NATS_CREDS_FILE or
NATS_TOKEN, NATS_REPLICAS) and prints the files it updated or deleted.

Exit codes:
  0  pushed, or nothing changed
  1  NATS could not be reached, or the push failed (the files written
     before the failure are printed)
  2  usage: no DIR, more than one; or NATS_URL is not set, or a setting
     is invalid`,
		Example: `  $ gateway config push ./config
  $ gateway config push /srv/persona --env-file /etc/gateway/.env`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("%s takes one argument, DIR (the folder of persona files to upload), got %d", cmd.CommandPath(), len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.envFile, _ = cmd.Flags().GetString("env-file")
			opts.dir = args[0]
			ctx, stop := untilInterrupt(cmd.Context(), io.interrupts)
			defer stop()
			return runConfigPush(ctx, opts)
		},
	}
}

func runConfigPush(ctx context.Context, opts configPushOptions) error {
	cfg, err := loadConfig(opts.envFile, forDoctor)
	if err != nil {
		return err
	}
	if len(cfg.NATSURLs) == 0 {
		return &configError{fmt.Errorf("%s is not set: the persona is pushed to the NATS server the workers use", config.EnvNATSURL)}
	}
	nc, err := gateway.ConnectNATS(cfg, "config-push")
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("JetStream: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, configPushTimeout)
	defer cancel()
	p, err := kvpersona.OpenPersona(ctx, js, cfg.NATSReplicas)
	if err != nil {
		return err
	}
	ch, err := p.Push(ctx, opts.dir)
	// What was written before an error is in the bucket: say so either way.
	printPersonaChanges(opts.io, ch)
	if err != nil {
		return err
	}
	if ch.Empty() {
		fmt.Fprintln(opts.io.errOut, "nothing changed: the bucket already holds these files")
	}
	if err := nc.FlushTimeout(5 * time.Second); err != nil {
		return fmt.Errorf("flush the NATS connection: %w", err)
	}
	return nil
}

// printPersonaChanges prints a push's changes, one file a line, on stdout.
func printPersonaChanges(io streams, ch kvpersona.Changes) {
	for _, name := range ch.Written {
		fmt.Fprintln(io.out, "updated", name)
	}
	for _, name := range ch.Deleted {
		fmt.Fprintln(io.out, "deleted", name)
	}
}
