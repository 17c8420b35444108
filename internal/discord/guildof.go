package discord

import (
	"github.com/diamondburned/arikawa/v3/discord"
)

// GuildOf returns the server a channel belongs to, from the bot's cache
// (then Discord); "" for a DM or an unknown channel. Scheduled events
// name only their channel, and actions need its server.
func (b *Bot) GuildOf(channelID string) string {
	id, err := discord.ParseSnowflake(channelID)
	if err != nil {
		return ""
	}
	ch, err := b.state.Channel(discord.ChannelID(id))
	if err != nil || !ch.GuildID.IsValid() {
		return ""
	}
	return ch.GuildID.String()
}

// ChannelName returns a channel's name from the bot's cache; "" when it
// is not known (a DM, a channel the bot cannot see).
func (b *Bot) ChannelName(channelID string) string {
	id, err := discord.ParseSnowflake(channelID)
	if err != nil {
		return ""
	}
	ch, err := b.state.Cabinet.Channel(discord.ChannelID(id))
	if err != nil {
		return ""
	}
	return ch.Name
}
