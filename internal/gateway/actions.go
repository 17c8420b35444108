package gateway

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/actions"
	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/deferred"
	"github.com/agentgateway/gateway/internal/files"
	"github.com/agentgateway/gateway/internal/persona"
	"github.com/agentgateway/gateway/internal/queue"
	"github.com/agentgateway/gateway/internal/session"
)

// actionRunner runs the Discord actions of the agent's replies
// (agent.ActionRunner).
type actionRunner struct {
	// env is filled in as the gateway starts (the cron actions need the
	// scheduler, which needs the queue); it is fixed before any event
	// runs.
	env     *actions.Env
	guildOf func(channelID string) string
	log     zerolog.Logger
}

// turn describes where e's actions run.
func (a *actionRunner) turn(e queue.Event, workDir string) actions.Turn {
	t := actions.Turn{GuildID: e.GuildID, ChannelID: e.ChannelID, UserID: e.UserID,
		Scheduled: e.Scheduled(), WorkDir: workDir}
	if t.GuildID == "" && t.Scheduled && e.ChannelID != "" && a.guildOf != nil {
		// A scheduled event names only its channel.
		t.GuildID = a.guildOf(e.ChannelID)
	}
	return t
}

// Section implements agent.ActionRunner.
func (a *actionRunner) Section(e queue.Event) string {
	if e.ChannelID == "" {
		return ""
	}
	return actions.PromptSection(a.env.Available(a.turn(e, "")), a.env.MaxPerTurn)
}

// Run implements agent.ActionRunner: only the agent's own reply is
// parsed, so text it quotes (a webhook's payload, a fetched message) is
// never run.
func (a *actionRunner) Run(ctx context.Context, e queue.Event, workDir, reply string) (string, []string, string) {
	clean, blocks := actions.Parse(reply)
	if len(blocks) == 0 {
		return reply, nil, ""
	}
	if e.ChannelID == "" {
		// Nowhere to report: nothing runs.
		a.log.Warn().Uint64("event", e.ID).Int("actions", len(blocks)).Msg("actions in a reply that goes to no channel were not run")
		return clean, nil, ""
	}
	results := a.env.Run(ctx, a.turn(e, workDir), blocks)
	var report []string
	var data strings.Builder
	for _, r := range results {
		report = append(report, r.Line())
		ev := a.log.Info()
		if !r.OK {
			ev = a.log.Warn()
		}
		ev.Uint64("event", e.ID).Str("channel", e.ChannelID).Str("action", r.Type).Bool("ok", r.OK).Str("summary", r.Summary).Msg("discord action")
		if r.Query() {
			fmt.Fprintf(&data, "### %s: %s\n%s\n", r.Type, r.Summary, strings.TrimRight(r.Data, "\n"))
		}
	}
	return clean, report, data.String()
}

// memoryActions are the memory actions on memory.md, through the guard
// the runtime uses, so a turn running meanwhile keeps every fact.
type memoryActions struct {
	guard *persona.MemoryGuard
	path  string
}

func (m memoryActions) Remember(text string) error {
	return m.guard.Edit(func(c string) (string, error) {
		if c != "" && !strings.HasSuffix(c, "\n") {
			c += "\n"
		}
		if c == "" {
			c = persona.MemoryHeader
		}
		return c + "- " + text + "\n", nil
	})
}

// Forget removes the lines that contain text, headings excepted.
func (m memoryActions) Forget(text string) (int, error) {
	n := 0
	err := m.guard.Edit(func(c string) (string, error) {
		lines := strings.SplitAfter(c, "\n")
		kept := lines[:0]
		for _, l := range lines {
			if strings.Contains(l, text) && !strings.HasPrefix(strings.TrimSpace(l), "#") {
				n++
				continue
			}
			kept = append(kept, l)
		}
		return strings.Join(kept, ""), nil
	})
	return n, err
}

func (m memoryActions) Show() (string, error) {
	data, err := os.ReadFile(m.path)
	if err != nil {
		return "", fmt.Errorf("read memory.md: %w", files.WithoutPath(err))
	}
	if len(data) > persona.MaxFileSize {
		data = data[:persona.MaxFileSize]
	}
	return strings.TrimSpace(string(data)), nil
}

// channelModels are the channels' models, as /model sets them.
type channelModels struct {
	sessions *session.Store
	fallback string
}

func (m channelModels) Model(channelID string) (string, bool) {
	if s := m.sessions.Settings(channelID); s.Model != "" {
		return s.Model, false
	}
	return m.fallback, true
}

func (m channelModels) SetModel(channelID, model string) error {
	_, _, err := m.sessions.UpdateSettings(channelID, func(s *session.Settings) { s.Model = model })
	return err
}

// newActions builds the actions' environment from the config; NewCore
// adds the memory and the models, the caller Discord, the confirmations
// and the cron jobs. guard decides which files sendFile may send.
func newActions(cfg *config.Config, uploadLimit int64, guard *files.Guard) *actions.Env {
	return &actions.Env{
		ResolveFile: func(workDir, path string) (string, error) {
			return sendable(guard, workDir, path, uploadLimit)
		},
		ChannelAllowed: func(id string) bool {
			return len(cfg.AllowedChannelIDs) == 0 || slices.Contains(cfg.AllowedChannelIDs, id)
		},
		OutputChannel: cfg.OutputChannelID,
		Flags:         cfg.Actions,
		MaxPerTurn:    cfg.ActionsMaxPerTurn,
		MaxDefer:      cfg.DeferMax,
	}
}

// sendable returns the real path of the file a sendFile action names,
// relative to the working directory or absolute inside it, once guard has
// read it as the agent could (never through a link, never the gateway's
// state, no secret in it). The upload reads it again the same way
// (discord's Bot.uploads), so a file swapped in between is checked too.
// Errors name the file, not where it is.
func sendable(guard *files.Guard, workDir, path string, limit int64) (string, error) {
	name := files.SafeName(filepath.Base(path))
	real, err := filepath.EvalSymlinks(workDir)
	if err != nil {
		return "", fmt.Errorf("%s: the working directory cannot be opened: %w", name, files.WithoutPath(err))
	}
	rel := path
	if filepath.IsAbs(path) {
		// The agent may name it from the working directory as it was
		// given or as it resolves.
		rel = ""
		for _, root := range []string{workDir, real} {
			if r, err := filepath.Rel(root, path); err == nil && filepath.IsLocal(r) {
				rel = r
				break
			}
		}
	}
	if !filepath.IsLocal(rel) {
		return "", fmt.Errorf("%s is outside the working directory", name)
	}
	full := filepath.Join(real, rel)
	if _, err := guard.Read(full, real, limit); err != nil {
		return "", fmt.Errorf("%s: %w", name, fileProblem(err, limit))
	}
	return full, nil
}

// deferrals keeps the agent's deferred prompts (actions.Deferrer) and
// queues each when it is due, as a scheduled event of its channel: it runs
// with the restrictions of scheduled runs (no more defers, no crons).
type deferrals struct {
	// store is the CONFIG_DIR file (deferred.Store) or, on NATS, the
	// bucket every process shares (kvdeferred.Store).
	store interface {
		Add(p deferred.Prompt, max int) (deferred.Prompt, error)
		Now() time.Time
	}
	maxPending int
}

func (d deferrals) Defer(t actions.Turn, channelID, prompt string, delay time.Duration) error {
	_, err := d.store.Add(deferred.Prompt{ChannelID: channelID, Prompt: prompt, Due: d.store.Now().Add(delay), UserID: t.UserID}, d.maxPending)
	return err
}

// DeferSource is the queue.Event Source of deferred prompts.
const DeferSource = "defer"

// deferredEvent is the event a due prompt becomes; its key makes the
// queue's journal refuse it twice (a restart between queueing and
// forgetting it).
func deferredEvent(p deferred.Prompt) queue.Event {
	return queue.Event{
		Kind:      queue.KindCron,
		Source:    DeferSource,
		Name:      "deferred",
		ChannelID: p.ChannelID,
		Text:      fmt.Sprintf("[A prompt you deferred at %s UTC, now due:]\n%s", p.Set.UTC().Format("2006-01-02 15:04"), p.Prompt),
		Key:       "defer:" + p.ID,
	}
}

// fireDeferred queues a due prompt.
func fireDeferred(enqueue func(queue.Event) (queue.Receipt, error)) deferred.Fire {
	return func(p deferred.Prompt) error {
		_, err := enqueue(deferredEvent(p))
		if errors.Is(err, queue.ErrDuplicate) {
			return nil
		}
		return err
	}
}
