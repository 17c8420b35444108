package actions

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// MemoryStore is the agent's memory.md, through the gateway's memory
// guard.
type MemoryStore interface {
	Remember(text string) error
	// Forget removes the lines that contain text and says how many.
	Forget(text string) (int, error)
	Show() (string, error)
}

// Models are the channels' models (/model).
type Models interface {
	// Model is the channel's model, and whether it is the default.
	Model(channelID string) (model string, isDefault bool)
	SetModel(channelID, model string) error
}

// Presence sets what the bot shows (the bot profile actions).
type Presence interface {
	SetStatus(ctx context.Context, status string) error
	SetActivity(ctx context.Context, kind, text string) error
}

// Reactions asks a question answered with a reaction; the answer comes
// back to the agent as a new prompt in the channel.
type Reactions interface {
	AskWithReactions(ctx context.Context, t Turn, channelID, question string, emoji []string) (string, error)
}

// Deferrer keeps a prompt to run in a channel later (the defer action).
type Deferrer interface {
	Defer(t Turn, channelID, prompt string, delay time.Duration) error
}

// Confirmer asks the person who sent the prompt (or an approver) to
// confirm a destructive action, and waits for the answer.
type Confirmer interface {
	Confirm(ctx context.Context, t Turn, what string) (bool, error)
}

// Env is what the actions act on. A nil part makes its actions fail with
// "not available".
type Env struct {
	Discord Discord
	Memory  MemoryStore
	Models  Models
	Confirm Confirmer
	Defer   Deferrer
	Crons   CronJobs
	// Presence and Reactions are parts of the bot; nil leaves their
	// actions out.
	Presence  Presence
	Reactions Reactions
	// MaxDefer bounds a defer action's delay.
	MaxDefer time.Duration
	// ResolveFile turns a sendFile path (relative to the working
	// directory) into an absolute path it allows, or says why not.
	ResolveFile func(workDir, path string) (string, error)
	// ChannelAllowed is the channel allowlist; nil allows every channel.
	ChannelAllowed func(channelID string) bool
	// OutputChannel is where a cron job without a channel posts
	// (OUTPUT_CHANNEL_ID); empty: such a job posts nowhere.
	OutputChannel string
	Flags         Flags
	// MaxPerTurn bounds the actions of one reply.
	MaxPerTurn int
}

// Turn is the turn whose reply carried the actions.
type Turn struct {
	GuildID, ChannelID, UserID string
	// Scheduled is set for a heartbeat, cron job, hook or webhook run, and
	// for a prompt that carries such a run's restrictions (the answer to
	// its reaction prompt): such a turn may not use what NotScheduled
	// names, and what it sets in motion inherits the restriction.
	Scheduled bool
	WorkDir   string
}

// Result is what became of one action.
type Result struct {
	// Type is the action's type; "" when the block could not be read.
	Type string
	OK   bool
	// Summary is the report line's text.
	Summary string
	// Data is what a query action returned, for the follow-up turn.
	Data string
}

// Line is the report line: "Done: ..." or "Failed: ...".
func (r Result) Line() string {
	if r.OK {
		return "Done: " + r.Summary
	}
	return "Failed: " + r.Summary
}

// Query reports whether r is a query action that returned data.
func (r Result) Query() bool { return r.OK && r.Data != "" }

// Run runs the blocks of one reply in order and returns one result per
// block. A block that cannot be read, is not enabled here, or is past the
// per-reply limit fails without running; the others run even when one
// before them failed. Run stops early only when ctx ends.
func (env Env) Run(ctx context.Context, ev Turn, blocks []Block) []Result {
	x := &run{env: env, ev: ev}
	results := make([]Result, 0, len(blocks))
	for i, b := range blocks {
		if ctx.Err() != nil {
			results = append(results, Result{Summary: "the turn ended before this action ran"})
			continue
		}
		if env.MaxPerTurn > 0 && i >= env.MaxPerTurn {
			results = append(results, Result{Summary: fmt.Sprintf("not run: at most %d actions per reply (DISCORD_ACTIONS_MAX_PER_TURN)", env.MaxPerTurn)})
			continue
		}
		a, err := Decode(b)
		if err != nil {
			results = append(results, Result{Summary: err.Error()})
			continue
		}
		r := Result{Type: a.Spec.Type}
		if err := env.Flags.Check(Context{GuildID: ev.GuildID, Scheduled: ev.Scheduled, Implemented: env.implemented}, a.Spec); err != nil {
			r.Summary = err.Error()
			results = append(results, r)
			continue
		}
		summary, data, err := x.do(ctx, a)
		if err != nil {
			r.Summary = a.Spec.Type + ": " + err.Error()
		} else {
			r.OK, r.Summary, r.Data = true, summary, data
		}
		results = append(results, r)
	}
	return results
}

// implemented reports whether env can run typ: its category's part is
// there and the type has an executor.
func (env Env) implemented(typ string) bool {
	s, ok := Lookup(typ)
	if !ok {
		return false
	}
	if _, ok := executors[typ]; !ok {
		return false
	}
	switch s.Category {
	case Memory:
		return env.Memory != nil
	case Config:
		return env.Models != nil
	case Defer:
		return env.Defer != nil
	case Crons:
		return env.Crons != nil
	case BotProfile:
		if typ == "botSetNickname" {
			return env.Discord != nil
		}
		return env.Presence != nil
	case Channels, Messaging, Guild, Moderation, Polls:
		if env.Discord == nil {
			return false
		}
	}
	if typ == "reactionPrompt" && env.Reactions == nil {
		return false
	}
	if s.Destructive && env.Confirm == nil {
		return false
	}
	return true
}

// Available lists the types the agent may use in ev.
func (env Env) Available(ev Turn) []*Spec {
	return env.Flags.Available(Context{GuildID: ev.GuildID, Scheduled: ev.Scheduled, Implemented: env.implemented})
}

// run is one reply's actions: it caches what several need.
type run struct {
	env      Env
	ev       Turn
	channels []Channel
	roles    []Role
}

// executor runs one action type and returns its summary, and data for a
// query.
type executor func(ctx context.Context, x *run, a Action) (summary, data string, err error)

func (x *run) do(ctx context.Context, a Action) (string, string, error) {
	return executors[a.Spec.Type](ctx, x, a)
}

// errNotMine refuses changes to other people's messages.
var errNotMine = errors.New("only the bot's own messages can be changed")

// channel resolves a channel field (a name, "#name", a mention or an id)
// to a channel of the event's server that the allowlist lets the agent
// use. An empty field is the event's own channel.
func (x *run) channel(ctx context.Context, ref string) (Channel, error) {
	if x.channels == nil {
		chs, err := x.env.Discord.Channels(ctx, x.ev.GuildID)
		if err != nil {
			return Channel{}, fmt.Errorf("could not list the server's channels: %w", err)
		}
		x.channels = chs
	}
	ref = strings.TrimSpace(ref)
	if ref == "" {
		ref = x.ev.ChannelID
	}
	id := strings.TrimSuffix(strings.TrimPrefix(ref, "<#"), ">")
	name := strings.ToLower(strings.TrimPrefix(ref, "#"))
	var found *Channel
	for i, c := range x.channels {
		if c.ID == id || strings.ToLower(c.Name) == name {
			found = &x.channels[i]
			if c.ID == id {
				break
			}
		}
	}
	if found == nil {
		// Threads are not in the server's channel list: an id may still
		// be the event's own thread.
		if id == x.ev.ChannelID && id != "" {
			return Channel{ID: id}, nil
		}
		return Channel{}, fmt.Errorf("no channel %q in this server", clip(ref, 60))
	}
	if x.env.ChannelAllowed != nil && !x.env.ChannelAllowed(found.ID) {
		return Channel{}, fmt.Errorf("#%s is not a channel the bot may use (ALLOWED_CHANNEL_IDS)", found.Name)
	}
	return *found, nil
}

// role resolves a role field (a name, "@name", a mention or an id).
func (x *run) role(ctx context.Context, ref string) (Role, error) {
	if x.roles == nil {
		roles, err := x.env.Discord.Roles(ctx, x.ev.GuildID)
		if err != nil {
			return Role{}, fmt.Errorf("could not list the server's roles: %w", err)
		}
		x.roles = roles
	}
	id := strings.TrimSuffix(strings.TrimPrefix(ref, "<@&"), ">")
	name := strings.ToLower(strings.TrimPrefix(ref, "@"))
	for _, r := range x.roles {
		if r.ID == id || strings.ToLower(r.Name) == name {
			return r, nil
		}
	}
	return Role{}, fmt.Errorf("no role %q in this server", clip(ref, 60))
}

// snowflake checks an id field.
func snowflake(field, id string) (string, error) {
	id = strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(id), "<@"), "!"), ">")
	if _, err := strconv.ParseUint(id, 10, 64); err != nil || len(id) < 15 {
		return "", fmt.Errorf("%s %q is not a Discord id", field, clip(id, 30))
	}
	return id, nil
}

// confirm asks a person before a destructive action.
func (x *run) confirm(ctx context.Context, what string) error {
	ok, err := x.env.Confirm.Confirm(ctx, x.ev, what)
	switch {
	case err != nil:
		return fmt.Errorf("not confirmed: %w", err)
	case !ok:
		return errors.New("cancelled by the person asked to confirm it")
	}
	return nil
}

// excerpt is a message's text cut for a listing.
func excerpt(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}

// messageLines renders messages for the agent, oldest first.
func messageLines(msgs []Message) string {
	var b strings.Builder
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		fmt.Fprintf(&b, "- %s %s (%s): %s", m.ID, m.Author, m.Time.UTC().Format(time.RFC3339), excerpt(m.Content, 500))
		if len(m.Attachments) > 0 {
			fmt.Fprintf(&b, " [attached: %s]", strings.Join(m.Attachments, ", "))
		}
		b.WriteByte('\n')
	}
	return b.String()
}
