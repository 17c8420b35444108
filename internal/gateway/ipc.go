package gateway

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/files"
	"github.com/agentgateway/gateway/internal/ipc"
	"github.com/agentgateway/gateway/internal/schedule"
	"github.com/agentgateway/gateway/internal/session"
)

// IPCDir is the folder of proactive messages inside CONFIG_DIR.
const IPCDir = "ipc"

// newIPC watches CONFIG_DIR/ipc/outbound for messages to post. A message
// may come from the agent (AGENT_USER may write ipc/outbound), so its
// files are read as guard reads the agent's: the IPC folder is the only
// state folder they may come from.
//
// Every message must name a channel the allowlists allow (ALLOWED_CHANNEL_IDS,
// and the channel's server in ALLOWED_GUILD_IDS). A message the agent wrote
// may post only where it has a conversation (a channel with a session, or
// one reset since) or in OUTPUT_CHANNEL_ID: the IPC folder does not reach
// further than the agent's own replies do.
func newIPC(cfg *config.Config, bot ipcBot, sessions *session.Store, uploadLimit int64, guard *files.Guard, log zerolog.Logger) (*ipc.Watcher, error) {
	dir := filepath.Join(cfg.ConfigDir, IPCDir)
	g := *guard
	if guard.State != nil {
		g.State = func(name string) bool { return name != IPCDir && guard.State(name) }
	}
	attachable := ipcFiles{roots: func() []string { return ipcRoots(cfg, dir) }, limit: uploadLimit, guard: &g}
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
			if len(cfg.AllowedChannelIDs) > 0 && !slices.Contains(cfg.AllowedChannelIDs, channel) {
				return false
			}
			return len(cfg.AllowedGuildIDs) == 0 || slices.Contains(cfg.AllowedGuildIDs, bot.GuildOf(channel))
		},
		AgentAllowed: func(channel string) bool {
			if channel == cfg.OutputChannelID {
				return true
			}
			_, bound := sessions.Get(channel)
			return bound || !sessions.ResetAt(channel).IsZero()
		},
		ResolveFile: attachable.resolve,
	}, announce{bot, attachable}, log.With().Str("component", "ipc").Logger())
}

// announcer posts unprompted messages (the Discord bot) with the files
// it is given, bytes and all.
type announcer interface {
	Announce(ctx context.Context, channelID, text string, attached []files.Outgoing) error
}

// ipcBot is what the IPC folder needs of the Discord bot: posting, and
// the server a channel is in (for ALLOWED_GUILD_IDS).
type ipcBot interface {
	announcer
	GuildOf(channelID string) string
}

// announce is an announcer as an ipc.Poster. The files are read again
// through the guard when the message is posted, as the agent could read
// them and never through a link: the agent may change outbound/ between
// the watcher's check and the post, so what goes up is what this read
// allowed, not what a plain open of the path would find.
type announce struct {
	announcer
	files ipcFiles
}

func (a announce) Post(ctx context.Context, channelID, text string, paths []string) error {
	attached := make([]files.Outgoing, 0, len(paths))
	for _, p := range paths {
		f, err := a.files.read(p)
		if err != nil {
			return fmt.Errorf("attach %w", err)
		}
		attached = append(attached, f)
	}
	return a.Announce(ctx, channelID, text, attached)
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
	// moved while the gateway runs. The first is the IPC folder.
	roots func() []string
	limit int64
	guard *files.Guard
}

// resolve turns a files entry (relative to CONFIG_DIR/ipc, or absolute)
// into the real path of a file the roots' guard lets out.
func (f ipcFiles) resolve(path string) (string, error) {
	out, err := f.read(path)
	return out.Path, err
}

// read is resolve with the file's content, read through the guard of the
// root it is in.
func (f ipcFiles) read(path string) (files.Outgoing, error) {
	roots := f.roots()
	if !filepath.IsAbs(path) && len(roots) > 0 {
		path = filepath.Join(roots[0], path)
	}
	name := files.SafeName(filepath.Base(path))
	// Links are followed here only to learn which root the file is in;
	// it is then read from that root without following any.
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return files.Outgoing{}, fmt.Errorf("%s: %w", name, files.WithoutPath(err))
	}
	for _, root := range roots {
		if r, err := filepath.EvalSymlinks(root); err == nil {
			root = r
		}
		if rel, err := filepath.Rel(root, real); err != nil || !filepath.IsLocal(rel) {
			continue
		}
		data, err := f.guard.Read(real, root, f.limit)
		if err != nil {
			return files.Outgoing{}, fmt.Errorf("%s: %w", name, fileProblem(err, f.limit))
		}
		return files.Outgoing{Name: filepath.Base(real), Path: real, Size: int64(len(data)), Root: root, Data: data}, nil
	}
	return files.Outgoing{}, fmt.Errorf("%s is outside the folders files may be sent from", name)
}

// fileProblem words why a file may not be sent, with no server path.
func fileProblem(err error, limit int64) error {
	if errors.Is(err, files.ErrTooLarge) {
		return fmt.Errorf("larger than Discord's upload limit (%d MB)", limit>>20)
	}
	return files.WithoutPath(err)
}

// secretsOf returns the strings no file the gateway uploads may
// contain: the Discord token, the transcription key, the model
// credentials and the webhook secrets agents.md names (read when asked:
// the schedule reloads).
func secretsOf(cfg *config.Config, webhooks func() []schedule.Webhook) func() []string {
	return func() []string {
		secrets := []string{cfg.DiscordToken}
		if cfg.TranscribeAPIKey != "" {
			secrets = append(secrets, cfg.TranscribeAPIKey)
		}
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
