package discord

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/diamondburned/arikawa/v3/gateway"
)

// presence is what the bot shows: Discord's presence update replaces the
// status and the activity together, so the bot keeps both.
type presence struct {
	mu       sync.Mutex
	status   discord.Status
	activity *discord.Activity
}

var statuses = map[string]discord.Status{
	"online": discord.OnlineStatus, "idle": discord.IdleStatus,
	"dnd": discord.DoNotDisturbStatus, "invisible": discord.InvisibleStatus,
}

var activityTypes = map[string]discord.ActivityType{
	"playing": discord.GameActivity, "listening": discord.ListeningActivity,
	"watching": discord.WatchingActivity, "competing": discord.CompetingActivity,
	"custom": discord.CustomActivity,
}

// SetStatus sets the bot's status: online, idle, dnd or invisible
// (actions.Presence). It lasts until the next connection.
func (b *Bot) SetStatus(ctx context.Context, status string) error {
	s, ok := statuses[strings.ToLower(strings.TrimSpace(status))]
	if !ok {
		return fmt.Errorf("status must be online, idle, dnd or invisible, not %q", status)
	}
	b.presence.mu.Lock()
	defer b.presence.mu.Unlock()
	b.presence.status = s
	return b.sendPresenceLocked(ctx)
}

// SetActivity sets the bot's activity: playing, listening, watching,
// competing or custom (a custom status), with its text; an empty text
// clears it (actions.Presence).
func (b *Bot) SetActivity(ctx context.Context, kind, text string) error {
	t, ok := activityTypes[strings.ToLower(strings.TrimSpace(kind))]
	if !ok {
		return fmt.Errorf("activity must be playing, listening, watching, competing or custom, not %q", kind)
	}
	text = strings.TrimSpace(text)
	if len([]rune(text)) > 128 {
		return fmt.Errorf("the activity text must be at most 128 characters")
	}
	b.presence.mu.Lock()
	defer b.presence.mu.Unlock()
	switch {
	case text == "":
		b.presence.activity = nil
	case t == discord.CustomActivity:
		b.presence.activity = &discord.Activity{Name: "Custom Status", Type: t, State: text}
	default:
		b.presence.activity = &discord.Activity{Name: text, Type: t}
	}
	return b.sendPresenceLocked(ctx)
}

func (b *Bot) sendPresenceLocked(ctx context.Context) error {
	cmd := &gateway.UpdatePresenceCommand{Status: b.presence.status, Activities: []discord.Activity{}}
	if cmd.Status == "" {
		cmd.Status = discord.OnlineStatus
	}
	if b.presence.activity != nil {
		cmd.Activities = append(cmd.Activities, *b.presence.activity)
	}
	if err := b.state.Gateway().Send(ctx, cmd); err != nil {
		return fmt.Errorf("update the presence: %w", err)
	}
	return nil
}
