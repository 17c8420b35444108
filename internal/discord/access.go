package discord

// Access holds the allowlists (ALLOWED_USER_IDS, ALLOWED_CHANNEL_IDS,
// ALLOWED_GUILD_IDS). An empty list does not restrict its axis; every
// non-empty list must admit the message.
type Access struct {
	users, channels, guilds map[string]bool
}

// NewAccess builds the allowlists from id lists.
func NewAccess(users, channels, guilds []string) Access {
	return Access{users: set(users), channels: set(channels), guilds: set(guilds)}
}

func set(ids []string) map[string]bool {
	if len(ids) == 0 {
		return nil
	}
	m := make(map[string]bool, len(ids))
	for _, id := range ids {
		m[id] = true
	}
	return m
}

// Restricted reports whether any allowlist is set.
func (a Access) Restricted() bool {
	return a.users != nil || a.channels != nil || a.guilds != nil
}

// Allows reports whether userID may run the agent from channelID. parentID
// is the parent of a thread ("" otherwise): a thread inherits its parent's
// place on the channel allowlist. guildID is "" for direct messages, which
// follow the user allowlist only; when the operator restricted channels or
// guilds but named no users, direct messages are refused, or anyone could
// step around the restriction by writing to the bot privately.
func (a Access) Allows(userID, channelID, parentID, guildID string) bool {
	if a.users != nil && !a.users[userID] {
		return false
	}
	if guildID == "" {
		return a.users != nil || (a.channels == nil && a.guilds == nil)
	}
	if a.guilds != nil && !a.guilds[guildID] {
		return false
	}
	if a.channels != nil && !a.channels[channelID] && (parentID == "" || !a.channels[parentID]) {
		return false
	}
	return true
}

// ListsUsers reports whether a user allowlist is set.
func (a Access) ListsUsers() bool { return len(a.users) > 0 }

// ListedUser reports whether the user allowlist names user.
func (a Access) ListedUser(user string) bool { return a.users[user] }
