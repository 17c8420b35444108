package discord

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/diamondburned/arikawa/v3/discord"
)

const botID = "111111111111111111"

// randomText is arbitrary user text: words, punctuation, code fences,
// unicode, other mentions and lookalikes of the bot's mention.
func randomText(r *rand.Rand) string {
	pieces := []string{
		"hello", "what", "is", "  ", "\n", "```go\nx := 1\n```", "é", "🙂", "<", ">", "@", "<@", "<@!",
		"<@" + botID, botID, "<#", "@everyone", "`code`", "?", "<@222>", "<@&333>", "<#444>",
		"<:smile:555>", "\t", "ü", "<@!222>",
	}
	var b strings.Builder
	for range r.IntN(12) {
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	return b.String()
}

// Property 3: a mention of the bot anywhere in arbitrary text is removed
// and the rest is trimmed.
func TestPromptRemovesBotMention(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	for range 2000 {
		before, after := randomText(r), randomText(r)
		mention := "<@" + botID + ">"
		if r.IntN(2) == 0 {
			mention = "<@!" + botID + ">"
		}
		content := before + mention + after
		got := Prompt(content, botID, Names{})
		// Without names, every other token is kept as written; only the
		// bot's mentions (there may be more than the one inserted) go.
		want := renderEmoji(strings.TrimSpace(withoutBot(before + after)))
		if got != want {
			t.Fatalf("Prompt(%q) = %q, want %q", content, got, want)
		}
		if strings.Contains(got, "<@"+botID+">") || strings.Contains(got, "<@!"+botID+">") {
			t.Fatalf("Prompt(%q) = %q still mentions the bot", content, got)
		}
		if !Mentions(content, botID) {
			t.Fatalf("Mentions(%q) = false", content)
		}
	}
}

// withoutBot removes the bot's mentions until none is left.
func withoutBot(s string) string {
	r := strings.NewReplacer("<@"+botID+">", "", "<@!"+botID+">", "")
	for {
		next := r.Replace(s)
		if next == s {
			return s
		}
		s = next
	}
}

// renderEmoji applies the one rewrite Prompt does without names.
func renderEmoji(s string) string {
	return strings.ReplaceAll(s, "<:smile:555>", ":smile:")
}

func TestPromptRendersNames(t *testing.T) {
	names := Names{
		Users:    map[string]string{"222": "bob"},
		Roles:    map[string]string{"333": "admins"},
		Channels: map[string]string{"444": "general"},
	}
	got := Prompt("<@"+botID+"> ask <@222> and <@!222> in <#444> about <@&333> <:party:9> <a:spin:8> <@999> ", botID, names)
	want := "ask @bob and @bob in #general about @admins :party: :spin: <@999>"
	if got != want {
		t.Errorf("Prompt = %q, want %q", got, want)
	}
}

// Property 4: the prompt of /claude is exactly its option's value.
func TestSlashPromptIsTheOptionValue(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	for range 1000 {
		value := randomText(r)
		raw, _ := json.Marshal(map[string]any{
			"id": "1", "name": "claude", "type": 1,
			"options": []map[string]any{{"name": "prompt", "type": 3, "value": value}},
		})
		var cmd discord.CommandInteraction
		if err := json.Unmarshal(raw, &cmd); err != nil {
			t.Fatal(err)
		}
		if got := slashPromptText(&cmd); got != value {
			t.Fatalf("slash prompt = %q, want %q", got, value)
		}
	}
}

// Property 5: bot authors are never taken; a human mentioning the bot is.
func TestAcceptsFiltersBots(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	bot := discord.UserID(111111111111111111)
	for range 2000 {
		m := discord.Message{
			ID:      discord.MessageID(r.Uint64N(1<<62) + 1),
			GuildID: discord.GuildID(r.Uint64N(2) * 999),
			Type:    discord.DefaultMessage,
			Author:  discord.User{ID: discord.UserID(r.Uint64N(1<<40) + 200), Bot: r.IntN(2) == 0},
			Content: randomText(r),
		}
		mentioned := r.IntN(2) == 0
		if mentioned {
			m.Content += " <@" + bot.String() + ">"
		}
		got := accepts(m, bot, false)
		want := !m.Author.Bot && (mentioned || Mentions(m.Content, bot.String()) || !m.GuildID.IsValid())
		if got != want {
			t.Fatalf("accepts(bot=%v guild=%v %q) = %v, want %v", m.Author.Bot, m.GuildID, m.Content, got, want)
		}
		// The bot itself is never taken, flag or not.
		m.Author = discord.User{ID: bot}
		if accepts(m, bot, false) {
			t.Fatalf("the bot's own message was taken: %q", m.Content)
		}
	}
	// Mentions through the mentions array (e.g. a reply that pings).
	m := discord.Message{GuildID: 1, Type: discord.InlinedReplyMessage, Author: discord.User{ID: 5},
		Content: "thanks", Mentions: []discord.GuildUser{{User: discord.User{ID: bot}}}}
	if !accepts(m, bot, false) {
		t.Error("a reply pinging the bot was not taken")
	}
	m.WebhookID = 7
	if accepts(m, bot, false) {
		t.Error("a webhook's message was taken")
	}
}

func FuzzPrompt(f *testing.F) {
	f.Add("<@"+botID+"> hello <#444> <@&333> <:a:1>", botID)
	f.Add("<@!"+botID+">", botID)
	f.Add("```\n<@"+botID+">\n```", "1")
	f.Add("<@<@"+botID+">>", botID)
	f.Fuzz(func(t *testing.T, content, bot string) {
		names := Names{Users: map[string]string{bot: "self", "222": "bob"}, Channels: map[string]string{"444": "x"}}
		got := Prompt(content, bot, names)
		if utf8.ValidString(content) && !utf8.ValidString(got) {
			t.Fatalf("valid input gave invalid UTF-8: %q", got)
		}
		if got != strings.TrimSpace(got) {
			t.Fatalf("not trimmed: %q", got)
		}
		if Mentions(got, bot) {
			t.Fatalf("Prompt(%q) = %q still mentions the bot", content, got)
		}
		if len(got) > len(content)+len(content)/2+32 {
			t.Fatalf("output grew from %d to %d bytes", len(content), len(got))
		}
	})
}
