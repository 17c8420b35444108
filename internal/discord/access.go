package discord

import (
	"slices"

	"github.com/diamondburned/arikawa/v3/discord"
)

// Access holds the allowlists (ALLOWED_USER_IDS, ALLOWED_ROLE_IDS,
// ALLOWED_CHANNEL_IDS, ALLOWED_GUILD_IDS). An empty list does not restrict
// its axis; every non-empty list must admit the message, except that the
// user and role lists are one axis, who may ask: being named in either
// suffices.
type Access struct {
	users, roles, channels, guilds map[string]bool
}

// NewAccess builds the allowlists from id lists.
func NewAccess(users, channels, guilds []string) Access {
	return Access{users: set(users), channels: set(channels), guilds: set(guilds)}
}

// WithRoles returns a with the role allowlist (ALLOWED_ROLE_IDS): members
// with any of these roles may use the bot, as the listed users may.
func (a Access) WithRoles(roles []string) Access {
	a.roles = set(roles)
	return a
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
	return a.users != nil || a.roles != nil || a.channels != nil || a.guilds != nil
}

// Allows reports whether userID, a member with roles, may run the agent
// from channelID. parentID is the parent of a thread ("" otherwise): a
// thread inherits its parent's place on the channel allowlist. guildID is
// "" for direct messages, which carry no roles and follow the user
// allowlist only; when the operator restricted channels or guilds but
// named no users, direct messages are refused, or anyone could step around
// the restriction by writing to the bot privately.
func (a Access) Allows(userID, channelID, parentID, guildID string, roles ...string) bool {
	if guildID == "" {
		roles = nil
	}
	if !a.admits(userID, roles) {
		return false
	}
	if guildID == "" {
		return a.users[userID] || (a.channels == nil && a.guilds == nil)
	}
	if a.guilds != nil && !a.guilds[guildID] {
		return false
	}
	if a.channels != nil && !a.channels[channelID] && (parentID == "" || !a.channels[parentID]) {
		return false
	}
	return true
}

// admits applies the who axis: anyone when neither users nor roles are
// listed, else a listed user or a member of a listed role.
func (a Access) admits(userID string, roles []string) bool {
	if a.users == nil && a.roles == nil {
		return true
	}
	return a.users[userID] || hasAny(a.roles, roles)
}

// hasAny reports whether any of roles is in listed.
func hasAny(listed map[string]bool, roles []string) bool {
	return slices.ContainsFunc(roles, func(r string) bool { return listed[r] })
}

// ListsUsers reports whether a user allowlist is set.
func (a Access) ListsUsers() bool { return len(a.users) > 0 }

// ListedUser reports whether the user allowlist names user.
func (a Access) ListedUser(user string) bool { return a.users[user] }

// isApprover reports whether user, a member with roles, may answer
// anyone's approvals and confirmations: named in Approvers
// (APPROVER_IDS) or holding one of ApproverRoles (APPROVER_ROLE_IDS).
// Roles count in a guild only: a direct message carries none.
func (b *Bot) isApprover(user string, roles []string) bool {
	if slices.Contains(b.opts.Approvers, user) {
		return true
	}
	return slices.ContainsFunc(roles, func(r string) bool { return slices.Contains(b.opts.ApproverRoles, r) })
}

// memberRoles are a member's role ids; nil without a member (a direct
// message).
func memberRoles(m *discord.Member) []string {
	if m == nil {
		return nil
	}
	return roleIDs(m.RoleIDs)
}
