package discord

import "testing"

func TestAccess(t *testing.T) {
	tests := []struct {
		name                           string
		users, roles, channels, guilds []string
		user, ch, parent, guild        string
		has                            []string // the member's roles
		want                           bool
	}{
		{name: "no lists", user: "u", ch: "c", guild: "g", want: true},
		{name: "no lists, DM", user: "u", ch: "d", want: true},
		{name: "user listed", users: []string{"u"}, user: "u", ch: "c", guild: "g", want: true},
		{name: "user not listed", users: []string{"u"}, user: "x", ch: "c", guild: "g", want: false},
		{name: "user listed, DM", users: []string{"u"}, user: "u", ch: "d", want: true},
		{name: "user not listed, DM", users: []string{"u"}, user: "x", ch: "d", want: false},
		{name: "channel listed", channels: []string{"c"}, user: "u", ch: "c", guild: "g", want: true},
		{name: "channel not listed", channels: []string{"c"}, user: "u", ch: "o", guild: "g", want: false},
		{name: "thread of listed channel", channels: []string{"c"}, user: "u", ch: "t", parent: "c", guild: "g", want: true},
		{name: "thread of other channel", channels: []string{"c"}, user: "u", ch: "t", parent: "o", guild: "g", want: false},
		{name: "guild listed", guilds: []string{"g"}, user: "u", ch: "c", guild: "g", want: true},
		{name: "guild not listed", guilds: []string{"g"}, user: "u", ch: "c", guild: "h", want: false},
		{name: "channel restriction blocks DMs without a user list", channels: []string{"c"}, user: "u", ch: "d", want: false},
		{name: "guild restriction blocks DMs without a user list", guilds: []string{"g"}, user: "u", ch: "d", want: false},
		{name: "all axes must admit", users: []string{"u"}, channels: []string{"c"}, guilds: []string{"g"}, user: "u", ch: "c", guild: "h", want: false},
		{name: "all axes admit", users: []string{"u"}, channels: []string{"c"}, guilds: []string{"g"}, user: "u", ch: "c", guild: "g", want: true},

		{name: "role listed, member has it", roles: []string{"r"}, user: "u", ch: "c", guild: "g", has: []string{"x", "r"}, want: true},
		{name: "role listed, member lacks it", roles: []string{"r"}, user: "u", ch: "c", guild: "g", has: []string{"x"}, want: false},
		{name: "role listed, member without roles", roles: []string{"r"}, user: "u", ch: "c", guild: "g", want: false},
		{name: "role listed, DM refused", roles: []string{"r"}, user: "u", ch: "d", want: false},
		{name: "role listed, DM claiming the role refused", roles: []string{"r"}, user: "u", ch: "d", has: []string{"r"}, want: false},
		{name: "users and roles: the user suffices", users: []string{"u"}, roles: []string{"r"}, user: "u", ch: "c", guild: "g", want: true},
		{name: "users and roles: the role suffices", users: []string{"u"}, roles: []string{"r"}, user: "x", ch: "c", guild: "g", has: []string{"r"}, want: true},
		{name: "users and roles: neither", users: []string{"u"}, roles: []string{"r"}, user: "x", ch: "c", guild: "g", has: []string{"s"}, want: false},
		{name: "users and roles: listed user's DM", users: []string{"u"}, roles: []string{"r"}, user: "u", ch: "d", want: true},
		{name: "role admits, channel does not", roles: []string{"r"}, channels: []string{"c"}, user: "u", ch: "o", guild: "g", has: []string{"r"}, want: false},
		{name: "role and channel admit", roles: []string{"r"}, channels: []string{"c"}, user: "u", ch: "c", guild: "g", has: []string{"r"}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := NewAccess(tt.users, tt.channels, tt.guilds).WithRoles(tt.roles)
			if got := a.Allows(tt.user, tt.ch, tt.parent, tt.guild, tt.has...); got != tt.want {
				t.Errorf("Allows = %v, want %v", got, tt.want)
			}
			if restricted := tt.users != nil || tt.roles != nil || tt.channels != nil || tt.guilds != nil; a.Restricted() != restricted {
				t.Errorf("Restricted = %v, want %v", a.Restricted(), restricted)
			}
		})
	}
}

func TestIsApprover(t *testing.T) {
	b := &Bot{opts: Options{Approvers: []string{"a"}, ApproverRoles: []string{"r"}}}
	tests := []struct {
		user  string
		roles []string
		want  bool
	}{
		{"a", nil, true},
		{"x", []string{"r"}, true},
		{"x", []string{"s", "r"}, true},
		{"x", []string{"s"}, false},
		{"x", nil, false},
	}
	for _, tt := range tests {
		if got := b.isApprover(tt.user, tt.roles); got != tt.want {
			t.Errorf("isApprover(%q, %q) = %v, want %v", tt.user, tt.roles, got, tt.want)
		}
	}
}
