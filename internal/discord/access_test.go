package discord

import "testing"

func TestAccess(t *testing.T) {
	tests := []struct {
		name                    string
		users, channels, guilds []string
		user, ch, parent, guild string
		want                    bool
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := NewAccess(tt.users, tt.channels, tt.guilds)
			if got := a.Allows(tt.user, tt.ch, tt.parent, tt.guild); got != tt.want {
				t.Errorf("Allows = %v, want %v", got, tt.want)
			}
		})
	}
}
