package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"sync"
	"syscall"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/agentgateway/gateway/internal/agentuser"
	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/dirlock"
	"github.com/agentgateway/gateway/internal/discord"
	"github.com/agentgateway/gateway/internal/gateway"
	"github.com/agentgateway/gateway/internal/proc"
	"github.com/agentgateway/gateway/internal/sdnotify"
)

type runOptions struct {
	io      streams
	envFile string
	// notify tells systemd about start, stop and liveness; nil means the
	// one $NOTIFY_SOCKET names, which is none outside systemd.
	notify *sdnotify.Notifier
	// worker runs `gateway worker` instead of `gateway run`.
	worker bool
}

func newRunCmd(io streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the gateway: connect to Discord and answer with the agent",
		Long: `run starts the Discord bot: it answers mentions, direct messages and
/claude with the agent, and runs heartbeats, cron jobs, hooks and webhooks,
until SIGTERM or SIGINT. It validates the whole configuration first and
lists every problem at once. On a signal it shuts down gracefully; a second
SIGTERM or SIGINT during the shutdown stops at once: running turns are
killed, their prompts and the waiting ones stay in the inbox, each user is
told once, and the next start answers them.

One gateway per CONFIG_DIR: run, worker and chat lock it
(CONFIG_DIR/.gateway.lock); a second one exits at once naming the first.

Exit codes:
  0  stopped by SIGTERM or SIGINT (also after a second signal)
  1  Discord refused the token or an intent (with advice), CONFIG_DIR is
     locked by another gateway, or another error
  2  usage; or the configuration is invalid or incomplete (every problem
     is listed), AGENT_USER is unsafe, DISCORD_GATEWAY_URL is no gateway`,
		Example: `  $ gateway run
  $ gateway run --env-file /etc/gateway/.env

  # check first what run still needs
  $ gateway doctor && gateway run`,
	}
	return runsGateway(cmd, runOptions{io: io})
}

// runsGateway makes cmd run a gateway process with opts until a signal.
func runsGateway(cmd *cobra.Command, opts runOptions) *cobra.Command {
	cmd.Args = cobra.NoArgs
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		opts.envFile, _ = cmd.Flags().GetString("env-file")
		ctx, stop := untilInterrupt(cmd.Context(), opts.io.interrupts)
		defer stop()
		return runRun(ctx, opts)
	}
	return cmd
}

func newWorkerCmd(io streams) *cobra.Command {
	return runsGateway(&cobra.Command{
		Use:   "worker",
		Short: "Run turns for a gateway whose inbox is on NATS (NATS_URL), on this machine",
		Long: `gateway worker runs the turns the inbox on NATS JetStream hands it, and posts
their replies, cards, approvals and notices over Discord's REST API. It has no
Discord gateway connection, no webhook listener and no scheduler: a gateway run
takes the prompts. Configure it like gateway run (the same .env: the bot token,
the model key, NATS_URL), with its own CONFIG_DIR and HOME.

Exit codes:
  0  stopped by SIGTERM or SIGINT
  1  CONFIG_DIR is locked by another gateway, or another error
  2  usage; or NATS_URL is not set, or the configuration is invalid or
     incomplete (every problem is listed)`,
		Example: `  $ NATS_URL=nats://10.0.0.5:4222 gateway worker
  $ gateway worker --env-file /etc/gateway/worker.env`,
	}, runOptions{io: io, worker: true})
}

func runRun(ctx context.Context, opts runOptions) error {
	cfg, err := loadConfig(opts.envFile, forRun)
	if err != nil {
		return err
	}
	if opts.worker && len(cfg.NATSURLs) == 0 {
		return &configError{errors.New("gateway worker runs the turns of a gateway whose inbox is on NATS JetStream: set NATS_URL (the same as the gateway run's)")}
	}
	log := newLogger(cfg, opts.io.errOut, configLevel(cfg))
	for _, w := range startWarnings(cfg, true) {
		log.Warn().Msg(w)
	}
	logRootDefault(cfg, log)
	if cfg.RootRefusesBypass() {
		fmt.Fprintln(opts.io.errOut, "gateway: "+cfg.RootBypassAdvice())
	}
	role := "gateway run"
	if opts.worker {
		role = "gateway worker"
	}
	lock, err := lockConfigDir(cfg, role, log)
	if err != nil {
		return err
	}
	defer lock.Release()
	becomeNonDumpable(log)
	becomeSubreaper(log)
	notify := opts.notify
	if notify == nil {
		notify = sdnotify.FromEnv()
	}
	// The watchdog is fed through the shutdown too: the drain may take
	// longer than WatchdogSec, and the process is still alive.
	watchdogCtx, stopWatchdog := context.WithCancel(context.Background())
	defer stopWatchdog()
	go notify.RunWatchdog(watchdogCtx, func(err error) {
		log.Warn().Err(err).Msg("systemd watchdog ping failed")
	})
	var stopping sync.Once
	tellStopping := func() {
		stopping.Do(func() {
			if err := notify.Stopping(); err != nil {
				log.Warn().Err(err).Msg("telling systemd the gateway is stopping")
			}
		})
	}
	// A signal ends ctx and starts the drain at once. When the gateway
	// stops for another reason (Discord gone for good), Run returning is
	// the first sign.
	stopAfter := context.AfterFunc(ctx, tellStopping)
	defer stopAfter()
	err = gateway.Run(ctx, cfg, gateway.Options{
		EnvFile: opts.envFile,
		Worker:  opts.worker,
		Version: version(),
		Ready: func() {
			if err := notify.Ready(); err != nil {
				log.Warn().Err(err).Msg("telling systemd the gateway is ready")
			}
		},
	}, log)
	tellStopping()
	// An AGENT_USER setup that does not hold, or a gateway URL that can
	// never work, is the operator's to fix, like a bad setting.
	var handshake *discord.HandshakeError
	if agentUserProblem(err) || errors.As(err, &handshake) {
		return &configError{err}
	}
	return err
}

// agentUserProblem reports whether err is AGENT_USER's: no such user, root,
// or a setup that does not keep the agent away from the gateway's files.
func agentUserProblem(err error) bool {
	var unsafe *agentuser.CheckError
	var unknownName user.UnknownUserError
	var unknownID user.UnknownUserIdError
	return errors.As(err, &unsafe) || errors.As(err, &unknownName) || errors.As(err, &unknownID) ||
		errors.Is(err, agentuser.ErrRoot)
}

// becomeSubreaper makes the gateway the parent of what its agent CLIs
// leave orphaned, so proc can kill and reap it when a turn ends. Without it
// proc still kills what it finds; only the reaping is left to init.
func becomeSubreaper(log zerolog.Logger) {
	if err := proc.BecomeSubreaper(); err != nil {
		log.Warn().Err(err).Msg("orphans of agent CLIs are left to init to reap")
	}
}

// becomeNonDumpable makes the gateway non-dumpable (PR_SET_DUMPABLE 0):
// its /proc/<pid>/ files then belong to root, so processes of its own user,
// the agent CLIs among them, can no longer read its environment (the bot
// token) from /proc/<pid>/environ nor attach to it with ptrace, and it
// writes no core dump. The CLIs it starts are dumpable again after exec.
func becomeNonDumpable(log zerolog.Logger) {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		log.Warn().Err(err).Msg("processes of the gateway's user can read its environment in /proc")
	}
}

// startWarnings are what run and chat log at start: the configuration's
// warnings (the root refusal aside, which is printed on its own; the
// mode chosen for root, which is logged briefly at info level by
// logRootDefault; and the open Discord access unless discord) and the
// .env names that are not settings.
func startWarnings(cfg *config.Config, discord bool) []string {
	var w []string
	for _, s := range cfg.Warnings() {
		if s != cfg.RootBypassAdvice() && s != cfg.RootDefaultNote() && (discord || s != config.OpenAccessWarning) {
			w = append(w, s)
		}
	}
	for _, u := range cfg.UnknownSettings() {
		w = append(w, u.String())
	}
	return w
}

// logRootDefault says, in one line at info level, that the permission mode
// was chosen because the gateway runs as root: a choice, not a problem, so
// not a warning at every start; doctor gives the whole reason.
func logRootDefault(cfg *config.Config, log zerolog.Logger) {
	if brief := cfg.RootDefaultBrief(); brief != "" {
		log.Info().Msg(brief)
	}
}

// lockConfigDir creates CONFIG_DIR if needed, makes it private (see
// makePrivate) and takes its lock: one gateway (run or chat) per
// CONFIG_DIR, since both write sessions.json, memory.md and the other state
// files.
func lockConfigDir(cfg *config.Config, command string, log zerolog.Logger) (*dirlock.Lock, error) {
	dir := cfg.ConfigDir
	if _, err := configDirState(dir, nil); err != nil {
		return nil, &configError{err}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create CONFIG_DIR: %w", err)
	}
	makePrivate(dir, cfg.AgentUser != "", log)
	return dirlock.Acquire(dir, command)
}

// makePrivate takes group and other permissions away from CONFIG_DIR when
// it is the gateway's own folder: it is about to hold memory.md, the
// conversations and the sessions, which no other user needs. A folder that
// came with a clone is 0755 (git keeps no folder modes), and doctor would
// warn about it after the first start. A folder of another user is left
// alone, and so is one shared with AGENT_USER, whose modes the start check
// of AGENT_USER judges.
func makePrivate(dir string, agentUser bool, log zerolog.Logger) {
	fi, err := os.Stat(dir)
	if err != nil || agentUser || fi.Mode().Perm()&0o077 == 0 {
		return
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Geteuid() {
		return
	}
	if err := os.Chmod(dir, fi.Mode().Perm()&0o700); err != nil {
		log.Warn().Err(err).Msg("CONFIG_DIR stays readable by other users")
		return
	}
	log.Info().Str("was", modeString(fi.Mode())).Msg("CONFIG_DIR made private to the gateway's user (0700)")
}
