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
		Long: `healthcheck GETs the admin server's /healthz at ADMIN_ADDR (with ADMIN_TOKEN
as a bearer token when it is set) and prints "healthy" when it answers 200.
It is the Dockerfile's HEALTHCHECK, so the image needs no curl. An admin
server listening on every address (:8081) is asked on 127.0.0.1.

Exit codes:
  0  /healthz answered 200
  1  anything else: ADMIN_ADDR not set, no answer within --timeout, another
     status. Never 2 for these: Docker reserves it
  2  usage: an argument, an unknown flag, a bad --timeout`,
		Example: `  $ gateway healthcheck
  $ gateway healthcheck --timeout 2s --env-file /etc/gateway/.env

  # in a Dockerfile
  HEALTHCHECK --interval=30s --timeout=5s CMD ["gateway", "healthcheck"]`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.timeout <= 0 {
				return usagef("--timeout %s: give a time to wait longer than 0, such as 5s", opts.timeout)
			}
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
