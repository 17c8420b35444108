package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentgateway/gateway/internal/config"
)

type healthcheckOptions struct {
	io      streams
	envFile string
	timeout time.Duration
}

// newHealthcheckCmd is the container's HEALTHCHECK: a GET of the admin
// server's /healthz, so the image needs no curl. It is listed in --help, as
// the Dockerfile and scripts use it.
func newHealthcheckCmd(io streams) *cobra.Command {
	opts := healthcheckOptions{io: io}
	cmd := &cobra.Command{
		Use:   "healthcheck",
		Short: "Exit 0 when the admin server's /healthz answers 200, else 1 (the Dockerfile's HEALTHCHECK)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.envFile, _ = cmd.Flags().GetString("env-file")
			return runHealthcheck(cmd.Context(), opts)
		},
	}
	cmd.Flags().DurationVar(&opts.timeout, "timeout", 5*time.Second, "give up after this long")
	return cmd
}

// errUnhealthy ends a failed healthcheck. It is not a configError: Docker
// reserves exit code 2, so every failure exits 1.
var errUnhealthy = errors.New("unhealthy")

func runHealthcheck(ctx context.Context, opts healthcheckOptions) error {
	// Only ADMIN_ADDR and ADMIN_TOKEN matter here: a problem with another
	// setting is not the health of the running gateway.
	cfg, err := config.Load(config.LoadOptions{EnvFile: opts.envFile})
	var verr *config.ValidationError
	if cfg == nil || (err != nil && !errors.As(err, &verr)) {
		return fmt.Errorf("%w: %w", errUnhealthy, err)
	}
	if cfg.AdminAddr == "" {
		return fmt.Errorf("%w: %s is not set (or not valid), so there is no admin server to ask", errUnhealthy, config.EnvAdminAddr)
	}
	url := "http://" + dialAddr(cfg.AdminAddr) + "/healthz"
	ctx, cancel := context.WithTimeout(ctx, opts.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("%w: %w", errUnhealthy, err)
	}
	if cfg.AdminToken != "" {
		req.Header.Set("Authorization", "Bearer "+cfg.AdminToken)
	}
	// No proxy from the environment: the admin server is this machine's.
	client := &http.Client{Transport: &http.Transport{}}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %w", errUnhealthy, err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: GET %s: %s", errUnhealthy, url, resp.Status)
	}
	fmt.Fprintln(opts.io.out, "healthy")
	return nil
}

// dialAddr turns a listen address into one to connect to: a listener on
// every address (":8081", "0.0.0.0:8081", "[::]:8081") is reached on the
// loopback address.
func dialAddr(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
