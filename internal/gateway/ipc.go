package gateway

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/files"
	"github.com/agentgateway/gateway/internal/ipc"
	"github.com/agentgateway/gateway/internal/schedule"
)

// IPCDir is the folder of proactive messages inside CONFIG_DIR.
const IPCDir = "ipc"

// newIPC watches CONFIG_DIR/ipc/outbound for messages to post.
func newIPC(cfg *config.Config, bot announcer, uploadLimit int64, secrets func() []string, log zerolog.Logger) (*ipc.Watcher, error) {
	dir := filepath.Join(cfg.ConfigDir, IPCDir)
	files := ipcFiles{roots: func() []string { return ipcRoots(cfg, dir) }, limit: uploadLimit, secrets: secrets}
	runAs, err := RunAs(cfg)
	if err != nil {
		return nil, err
	}
	var agent *ipc.Agent
	if runAs != nil {
		// The agent posts through outbound/ as its own user.
		agent = &ipc.Agent{UID: runAs.Credential.UID, GID: runAs.Credential.GID}
	}
	return ipc.New(ipc.Options{
		Agent: agent,
		Dir:   dir,
		Allowed: func(channel string) bool {
			return len(cfg.AllowedChannelIDs) == 0 || slices.Contains(cfg.AllowedChannelIDs, channel)
		},
		ResolveFile: files.resolve,
	}, announce{bot}, log.With().Str("component", "ipc").Logger())
}

// announcer posts unprompted messages (the Discord bot).
type announcer interface {
	Announce(ctx context.Context, channelID, text string, paths []string) error
}

// announce is an announcer as an ipc.Poster.
type announce struct{ announcer }

func (a announce) Post(ctx context.Context, channelID, text string, paths []string) error {
	return a.Announce(ctx, channelID, text, paths)
}

// ipcRoots are the folders an IPC message may attach files from: the IPC
// folder itself, the agent's .gateway folder (its outbox), WORK_DIR and
// PROJECTS_ROOT when set. Not CONFIG_DIR as a whole: it holds the
// gateway's own state.
func ipcRoots(cfg *config.Config, dir string) []string {
	// dir first: relative paths are relative to it.
	roots := []string{dir, filepath.Join(cfg.AgentWorkDir(), files.GatewayDir)}
	if cfg.WorkDir != "" {
		roots = append(roots, cfg.WorkDir)
	}
	if cfg.ProjectsRoot != "" {
		roots = append(roots, cfg.ProjectsRoot)
	}
	var out []string
	for _, r := range roots {
		if resolved, err := filepath.EvalSymlinks(r); err == nil {
			out = append(out, resolved)
		}
	}
	return out
}

// ipcFiles decides which files an IPC message may attach.
type ipcFiles struct {
	// roots are resolved when a file is: the folders may be created or
	// moved while the gateway runs.
	roots   func() []string
	limit   int64
	secrets func() []string
}

// resolve turns a files entry (relative to CONFIG_DIR/ipc, or absolute)
// into the real path of a file allowedFile lets out.
func (f ipcFiles) resolve(path string) (string, error) {
	roots := f.roots()
	if !filepath.IsAbs(path) && len(roots) > 0 {
		path = filepath.Join(roots[0], path)
	}
	return allowedFile(roots, path, f.limit, f.secrets)
}

// allowedFile returns the real path of path when it is a regular file
// inside one of roots (resolved, symbolic links followed), small enough to
// upload and holding none of the gateway's secrets; the error says why
// not, naming the file but no server path.
func allowedFile(roots []string, path string, limit int64, secrets func() []string) (string, error) {
	name := filepath.Base(path)
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, files.WithoutPath(err))
	}
	inside := slices.ContainsFunc(roots, func(root string) bool {
		if r, err := filepath.EvalSymlinks(root); err == nil {
			root = r
		}
		rel, err := filepath.Rel(root, real)
		return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
	})
	if !inside {
		return "", fmt.Errorf("%s is outside the folders files may be sent from", name)
	}
	st, err := os.Stat(real)
	switch {
	case err != nil:
		return "", fmt.Errorf("%s: %w", name, files.WithoutPath(err))
	case !st.Mode().IsRegular():
		return "", fmt.Errorf("%s is not a regular file", name)
	case st.Size() > limit:
		return "", fmt.Errorf("%s is larger than Discord's upload limit", name)
	}
	data, err := files.Read(real, filepath.Dir(real), limit)
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, files.WithoutPath(err))
	}
	if secrets != nil {
		for _, s := range secrets() {
			if len(s) >= 8 && strings.Contains(string(data), s) {
				return "", errors.New(name + " contains one of the gateway's secrets")
			}
		}
	}
	return real, nil
}

// secretsOf returns the strings no file the gateway uploads may
// contain: the Discord token, the model credentials and the webhook
// secrets agents.md names (read when asked: the schedule reloads).
func secretsOf(cfg *config.Config, webhooks func() []schedule.Webhook) func() []string {
	return func() []string {
		secrets := []string{cfg.DiscordToken}
		for name, val := range cfg.ProviderEnv {
			if config.IsModelCredential(name) {
				secrets = append(secrets, val)
			}
		}
		if webhooks != nil {
			for _, w := range webhooks() {
				if v, ok := cfg.Lookup(w.SecretEnv); ok {
					secrets = append(secrets, v)
				}
			}
		}
		return slices.DeleteFunc(secrets, func(s string) bool { return len(s) < 8 })
	}
}
