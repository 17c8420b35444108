package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/agentgateway/gateway/internal/gateway"
)

type runOptions struct {
	io      streams
	envFile string
}

func newRunCmd(io streams) *cobra.Command {
	opts := runOptions{io: io}
	return &cobra.Command{
		Use:   "run",
		Short: "Run the gateway: connect to Discord and answer with the agent",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.envFile, _ = cmd.Flags().GetString("env-file")
			return runRun(cmd.Context(), opts)
		},
	}
}

func runRun(ctx context.Context, opts runOptions) error {
	cfg, err := loadConfig(opts.envFile, forRun)
	if err != nil {
		return err
	}
	log := newLogger(cfg, opts.io.errOut, "")
	for _, w := range cfg.Warnings() {
		log.Warn().Msg(w)
	}
	return gateway.Run(ctx, cfg, gateway.Options{}, log)
}
