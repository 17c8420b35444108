package discord

import (
	"regexp"
	"strings"
	"sync"
)

// Names resolves the ids in Discord's mention syntax to readable names. A
// missing id leaves the mention as Discord wrote it.
type Names struct {
	Users    map[string]string
	Roles    map[string]string
	Channels map[string]string
}

// mentionPattern matches user (<@id>, <@!id>), role (<@&id>) and channel
// (<#id>) mentions, and custom emoji (<:name:id>, <a:name:id>).
var mentionPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`<(@!?|@&|#)(\d{1,20})>|<a?:(\w{1,32}):\d{1,20}>`) })

// Prompt turns a message's content into the agent's prompt: every mention of
// the bot (botID) is removed, other mentions become readable names so the
// agent understands them (@name, #channel, :emoji:), and the result is
// trimmed (property 3). Everything else, code blocks included, is kept as
// written.
func Prompt(content, botID string, names Names) string {
	// Removing "<@id>" from "<@<@id>id>" spells a new mention; repeat until
	// none is left (each pass shortens the text).
	for botID != "" && Mentions(content, botID) {
		content = strings.NewReplacer("<@"+botID+">", "", "<@!"+botID+">", "").Replace(content)
	}
	out := mentionPattern().ReplaceAllStringFunc(content, func(m string) string {
		sub := mentionPattern().FindStringSubmatch(m)
		kind, id, emoji := sub[1], sub[2], sub[3]
		switch kind {
		case "@", "@!":
			return named("@", names.Users[id], m)
		case "@&":
			return named("@", names.Roles[id], m)
		case "#":
			return named("#", names.Channels[id], m)
		}
		return ":" + emoji + ":"
	})
	return strings.TrimSpace(out)
}

func named(prefix, name, original string) string {
	if name == "" {
		return original
	}
	return prefix + name
}

// Mentions reports whether content mentions the bot in either of Discord's
// user mention forms.
func Mentions(content, botID string) bool {
	return botID != "" && (strings.Contains(content, "<@"+botID+">") || strings.Contains(content, "<@!"+botID+">"))
}
